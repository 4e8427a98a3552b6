// Forward and VJP of every op, side by side (as mlx/primitives.cpp keeps Add::vjp beside Add::vmap).
// A VJP reads d_out = self.grad and adds into each input that requires a gradient with accumulate()
// (first contribution assigns). Only non-tensor data is captured in closures, so the tape owns its
// inputs through Node::inputs alone and cutting that list frees the step.
#include "policy/autodiff/ops.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::autodiff {
namespace {

template <class T>
using Tn = TensorT<T>;

[[noreturn]] void fail(const char* op, const std::string& what) { throw Error(fmt::format("{}: {}", op, what)); }

std::string shape(Index r, Index c) { return fmt::format("[{}, {}]", r, c); }
template <class T>
std::string shape(const Tn<T>& x) {
  return shape(x.rows(), x.cols());
}

template <class T>
void check_defined(const char* op, const Tn<T>& x) {
  if (!x.defined()) fail(op, "input tensor is undefined (default-constructed)");
}

template <class T>
Node<T>& in(Node<T>& self, size_t i) {
  return *self.inputs[i].node();
}

template <class T>
bool wants(Node<T>& self, size_t i) {
  return self.inputs[i].requires_grad();
}

void check_index(const char* op, int32_t index, Index bound, size_t at) {
  if (index < 0 || index >= bound) {
    fail(op, fmt::format("index {} at position {} is outside [0, {})", index, at, bound));
  }
}

template <class T>
void check_csr(const char* op, const CsrPtr& csr, const Tn<T>& x) {
  if (!csr) fail(op, "csr is null");
  if (csr->cols != x.rows()) {
    fail(op, fmt::format("csr has {} columns but x has {} rows; build the CSR over x's rows", csr->cols, x.rows()));
  }
}

// --- broadcasting ---

// How an operand of a binary op covers the [r,c] output.
enum class Cover { full, row, col, scalar };

Cover cover_of(const char* op, Index r, Index c, Index out_r, Index out_c) {
  if (r == out_r && c == out_c) return Cover::full;
  if (r == 1 && c == out_c) return Cover::row;
  if (c == 1 && r == out_r) return Cover::col;
  if (r == 1 && c == 1) return Cover::scalar;
  fail(op, fmt::format("shape {} does not broadcast to {}", shape(r, c), shape(out_r, out_c)));
}

template <class T>
Matrix<T> expand(const Matrix<T>& v, Index out_r, Index out_c) {
  if (v.rows() == out_r && v.cols() == out_c) return v;
  return v.replicate(out_r / v.rows(), out_c / v.cols());
}

// Adds d_out (out-shaped) into an input that may have been broadcast, summing the broadcast axes.
template <class T, class Expr>
void accumulate_reduced(Node<T>& node, const Eigen::MatrixBase<Expr>& d_out) {
  const Index r = node.value.rows(), c = node.value.cols();
  if (r == d_out.rows() && c == d_out.cols()) {
    accumulate(node, d_out);
  } else if (r == 1 && c == d_out.cols()) {
    accumulate(node, d_out.colwise().sum());
  } else if (c == 1 && r == d_out.rows()) {
    accumulate(node, d_out.rowwise().sum());
  } else {
    accumulate(node, Matrix<T>::Constant(1, 1, d_out.sum()));
  }
}

struct AddOp {
  template <class L, class R> static void apply(L&& l, const R& r) { l += r; }
};
struct SubOp {
  template <class L, class R> static void apply(L&& l, const R& r) { l -= r; }
};
struct MulOp {
  template <class L, class R> static void apply(L&& l, const R& r) { l *= r; }
};
struct DivOp {
  template <class L, class R> static void apply(L&& l, const R& r) { l /= r; }
};

// out (already [r,c]) op= b, with b broadcast as rowwise / colwise / scalar without expanding it.
template <class Op, class T>
void apply_broadcast(Matrix<T>& out, const Matrix<T>& b, Cover cover) {
  switch (cover) {
    case Cover::full: Op::apply(out.array(), b.array()); break;
    case Cover::row: Op::apply(out.array().rowwise(), b.row(0).array()); break;
    case Cover::col: Op::apply(out.array().colwise(), b.col(0).array()); break;
    case Cover::scalar: Op::apply(out.array(), b(0, 0)); break;
  }
}

template <class Op, class T, class Vjp>
Tn<T> binary(const char* op, const Tn<T>& a, const Tn<T>& b, Vjp&& vjp) {
  check_defined(op, a);
  check_defined(op, b);
  const Index r = std::max(a.rows(), b.rows()), c = std::max(a.cols(), b.cols());
  cover_of(op, a.rows(), a.cols(), r, c);
  const Cover cover_b = cover_of(op, b.rows(), b.cols(), r, c);
  Matrix<T> out = expand(a.value(), r, c);
  apply_broadcast<Op>(out, b.value(), cover_b);
  return make_result<T>(op, std::move(out), {a, b}, std::forward<Vjp>(vjp));
}

// --- row softmax ---

template <class T>
Matrix<T> softmax_forward(const Matrix<T>& x, const Mask* mask) {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  Matrix<T> y(x.rows(), x.cols());
  if (mask == nullptr) {
    const auto row_max = x.rowwise().maxCoeff().eval();
    y.array() = (x.colwise() - row_max).array().exp();
  } else {
    auto kept = mask->select(x.array(), -kInf).eval();
    auto row_max = kept.rowwise().maxCoeff().eval();
    row_max = (row_max == -kInf).select(T(0), row_max);  // fully masked rows
    y.array() = mask->select((kept.colwise() - row_max).exp(), T(0));
  }
  auto row_sum = y.rowwise().sum().eval();
  row_sum = (row_sum.array() == T(0)).select(T(1), row_sum);
  y.array().colwise() /= row_sum.array();
  return y;
}

template <class T>
void check_mask(const char* op, const Tn<T>& x, const Mask* mask) {
  if (mask != nullptr && (mask->rows() != x.rows() || mask->cols() != x.cols())) {
    fail(op, fmt::format("mask has shape {}, x has {}", shape(mask->rows(), mask->cols()), shape(x)));
  }
}

template <class T>
Matrix<T> ones_like_mask(const Mask* mask, Index r, Index c) {
  if (mask == nullptr) return Matrix<T>::Ones(r, c);
  return mask->template cast<T>().matrix();
}

// --- segment aggregation (shared by sum and mean: weight 1 or 1/count) ---

template <class T>
Tn<T> segment_linear(const char* op, const Tn<T>& x, const CsrPtr& csr, bool mean_of_row) {
  check_defined(op, x);
  check_csr(op, csr, x);
  const Csr& s = *csr;
  Matrix<T> out = Matrix<T>::Zero(s.rows, x.cols());
  const Matrix<T>& xv = x.value();
  for (int32_t i = 0; i < s.rows; ++i) {
    const int32_t begin = s.offsets[i], end = s.offsets[i + 1];
    for (int32_t j = begin; j < end; ++j) out.row(i) += xv.row(s.indices[j]);
    if (mean_of_row && end > begin) out.row(i) *= T(1) / T(end - begin);
  }
  return make_result<T>(op, std::move(out), {x}, [csr, mean_of_row](Node<T>& self) {
    const Csr& c = *csr;
    Matrix<T>& d_x = grad_buffer(in(self, 0));
    for (int32_t i = 0; i < c.rows; ++i) {
      const int32_t begin = c.offsets[i], end = c.offsets[i + 1];
      if (end == begin) continue;
      const T w = mean_of_row ? T(1) / T(end - begin) : T(1);
      for (int32_t j = begin; j < end; ++j) d_x.row(c.indices[j]) += w * self.grad.row(i);
    }
  });
}

}  // namespace

// ================================================================================================
// Csr
// ================================================================================================

Csr Csr::from_lists(int32_t cols, const std::vector<std::vector<int32_t>>& lists) {
  Csr csr;
  csr.rows = static_cast<int32_t>(lists.size());
  csr.cols = cols;
  csr.offsets.reserve(lists.size() + 1);
  for (const auto& list : lists) {
    csr.indices.insert(csr.indices.end(), list.begin(), list.end());
    csr.offsets.push_back(static_cast<int32_t>(csr.indices.size()));
  }
  csr.validate("Csr::from_lists");
  return csr;
}

void Csr::validate(const char* where) const {
  if (rows < 0 || cols < 0) fail(where, fmt::format("negative shape {}", shape(rows, cols)));
  if (offsets.size() != static_cast<size_t>(rows) + 1 || offsets[0] != 0) {
    fail(where, fmt::format("offsets must have rows + 1 = {} entries starting at 0", rows + 1));
  }
  for (int32_t i = 0; i < rows; ++i) {
    if (offsets[i + 1] < offsets[i]) fail(where, fmt::format("offsets decrease at row {}", i));
  }
  if (static_cast<size_t>(offsets.back()) != indices.size()) {
    fail(where, fmt::format("offsets end at {} but there are {} indices", offsets.back(), indices.size()));
  }
  if (!values.empty() && values.size() != indices.size()) {
    fail(where, fmt::format("{} values for {} indices (leave values empty for all-ones)", values.size(),
                            indices.size()));
  }
  for (size_t j = 0; j < indices.size(); ++j) check_index(where, indices[j], cols, j);
}

// ================================================================================================
// Products
// ================================================================================================

template <class T>
Tn<T> matmul(const Tn<T>& a, const Tn<T>& b) {
  check_defined("matmul", a);
  check_defined("matmul", b);
  if (a.cols() != b.rows()) fail("matmul", fmt::format("inner dimensions differ: {} x {}", shape(a), shape(b)));
  Matrix<T> out(a.rows(), b.cols());
  out.noalias() = a.value() * b.value();
  return make_result<T>("matmul", std::move(out), {a, b}, [](Node<T>& self) {
    Node<T>& na = in(self, 0);
    Node<T>& nb = in(self, 1);
    if (wants(self, 0)) accumulate(na, self.grad * nb.value.transpose());  // d_a = d_out b^T
    if (wants(self, 1)) accumulate(nb, na.value.transpose() * self.grad);  // d_b = a^T d_out
  });
}

template <class T>
Tn<T> affine(const Tn<T>& x, const Tn<T>& w, const Tn<T>& b) {
  check_defined("affine", x);
  check_defined("affine", w);
  if (x.cols() != w.rows()) fail("affine", fmt::format("inner dimensions differ: {} x {}", shape(x), shape(w)));
  if (!b.defined()) return matmul(x, w);
  if (b.rows() != 1 || b.cols() != w.cols()) fail("affine", fmt::format("bias {} must be [1, {}]", shape(b), w.cols()));
  Matrix<T> out(x.rows(), w.cols());
  out.rowwise() = b.value().row(0);
  out.noalias() += x.value() * w.value();
  return make_result<T>("affine", std::move(out), {x, w, b}, [](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    Node<T>& nw = in(self, 1);
    if (wants(self, 0)) accumulate(nx, self.grad * nw.value.transpose());
    if (wants(self, 1)) accumulate(nw, nx.value.transpose() * self.grad);
    if (wants(self, 2)) accumulate(in(self, 2), self.grad.colwise().sum());
  });
}

template <class T>
Tn<T> matmul_nt(const Tn<T>& a, const Tn<T>& b) {
  check_defined("matmul_nt", a);
  check_defined("matmul_nt", b);
  if (a.cols() != b.cols()) fail("matmul_nt", fmt::format("inner dimensions differ: {} x {}^T", shape(a), shape(b)));
  Matrix<T> out(a.rows(), b.rows());
  out.noalias() = a.value() * b.value().transpose();
  return make_result<T>("matmul_nt", std::move(out), {a, b}, [](Node<T>& self) {
    Node<T>& na = in(self, 0);
    Node<T>& nb = in(self, 1);
    if (wants(self, 0)) accumulate(na, self.grad * nb.value);                 // d_a = d_out b
    if (wants(self, 1)) accumulate(nb, self.grad.transpose() * na.value);     // d_b = d_out^T a
  });
}

template <class T>
Tn<T> block_matmul_nt(const Tn<T>& a, const Tn<T>& b, Index blocks) {
  const char* op = "block_matmul_nt";
  check_defined(op, a);
  check_defined(op, b);
  if (blocks <= 0 || a.rows() % blocks != 0 || b.rows() % blocks != 0 || a.cols() != b.cols()) {
    fail(op, fmt::format("{} and {} do not split into {} blocks with equal columns", shape(a), shape(b), blocks));
  }
  const Index p = a.rows() / blocks, q = b.rows() / blocks;
  Matrix<T> out(a.rows(), q);
  for (Index s = 0; s < blocks; ++s) {
    out.middleRows(s * p, p).noalias() = a.value().middleRows(s * p, p) * b.value().middleRows(s * q, q).transpose();
  }
  return make_result<T>(op, std::move(out), {a, b}, [blocks, p, q](Node<T>& self) {
    Node<T>& na = in(self, 0);
    Node<T>& nb = in(self, 1);
    if (wants(self, 0)) {
      Matrix<T>& d_a = grad_buffer(na);
      for (Index s = 0; s < blocks; ++s) {
        d_a.middleRows(s * p, p).noalias() += self.grad.middleRows(s * p, p) * nb.value.middleRows(s * q, q);
      }
    }
    if (wants(self, 1)) {
      Matrix<T>& d_b = grad_buffer(nb);
      for (Index s = 0; s < blocks; ++s) {
        d_b.middleRows(s * q, q).noalias() +=
            self.grad.middleRows(s * p, p).transpose() * na.value.middleRows(s * p, p);
      }
    }
  });
}

template <class T>
Tn<T> block_matmul(const Tn<T>& a, const Tn<T>& b, Index blocks) {
  const char* op = "block_matmul";
  check_defined(op, a);
  check_defined(op, b);
  if (blocks <= 0 || a.rows() % blocks != 0 || b.rows() != blocks * a.cols()) {
    fail(op, fmt::format("{} x {}: need a [B*P, Q] and b [B*Q, m] with B = {}", shape(a), shape(b), blocks));
  }
  const Index p = a.rows() / blocks, q = a.cols();
  Matrix<T> out(a.rows(), b.cols());
  for (Index s = 0; s < blocks; ++s) {
    out.middleRows(s * p, p).noalias() = a.value().middleRows(s * p, p) * b.value().middleRows(s * q, q);
  }
  return make_result<T>(op, std::move(out), {a, b}, [blocks, p, q](Node<T>& self) {
    Node<T>& na = in(self, 0);
    Node<T>& nb = in(self, 1);
    if (wants(self, 0)) {
      Matrix<T>& d_a = grad_buffer(na);
      for (Index s = 0; s < blocks; ++s) {
        d_a.middleRows(s * p, p).noalias() +=
            self.grad.middleRows(s * p, p) * nb.value.middleRows(s * q, q).transpose();
      }
    }
    if (wants(self, 1)) {
      Matrix<T>& d_b = grad_buffer(nb);
      for (Index s = 0; s < blocks; ++s) {
        d_b.middleRows(s * q, q).noalias() +=
            na.value.middleRows(s * p, p).transpose() * self.grad.middleRows(s * p, p);
      }
    }
  });
}

template <class T>
Tn<T> block_attention(const Tn<T>& q, const Tn<T>& k, const Tn<T>& v, Index blocks, Index heads, T scale,
                      const Mask* mask) {
  const char* op = "block_attention";
  check_defined(op, q);
  check_defined(op, k);
  check_defined(op, v);
  const Index d = q.cols();
  if (blocks <= 0 || heads <= 0 || d % heads != 0 || k.cols() != d || v.cols() != d || k.rows() != v.rows() ||
      q.rows() % blocks != 0 || k.rows() % blocks != 0) {
    fail(op, fmt::format("q {}, k {}, v {} do not split into {} blocks of {} heads", shape(q), shape(k), shape(v),
                         blocks, heads));
  }
  const Index p = q.rows() / blocks, kq = k.rows() / blocks, d_h = d / heads;
  if (mask != nullptr && (mask->rows() != q.rows() || mask->cols() != kq)) {
    fail(op, fmt::format("mask is {}, expected {}", shape(mask->rows(), mask->cols()), shape(q.rows(), kq)));
  }
  // probs[j] holds head j's probabilities for all blocks, [B*P, Q].
  auto probs = std::make_shared<std::vector<Matrix<T>>>(static_cast<size_t>(heads));
  Matrix<T> out(q.rows(), d);
  Matrix<T> scores(p, kq);
  for (Index j = 0; j < heads; ++j) {
    Matrix<T>& prob = (*probs)[static_cast<size_t>(j)];
    prob.resize(q.rows(), kq);
    for (Index s = 0; s < blocks; ++s) {
      const auto q_sj = q.value().block(s * p, j * d_h, p, d_h);
      const auto k_sj = k.value().block(s * kq, j * d_h, kq, d_h);
      scores.noalias() = (q_sj * scale) * k_sj.transpose();
      if (mask != nullptr) {
        const Mask block_mask = mask->middleRows(s * p, p);
        prob.middleRows(s * p, p) = softmax_forward(scores, &block_mask);
      } else {
        prob.middleRows(s * p, p) = softmax_forward(scores, nullptr);
      }
      out.block(s * p, j * d_h, p, d_h).noalias() =
          prob.middleRows(s * p, p) * v.value().block(s * kq, j * d_h, kq, d_h);
    }
  }
  return make_result<T>(op, std::move(out), {q, k, v}, [probs, blocks, heads, p, kq, d_h, scale](Node<T>& self) {
    Node<T>& nq = in(self, 0);
    Node<T>& nk = in(self, 1);
    Node<T>& nv = in(self, 2);
    const bool want_q = wants(self, 0), want_k = wants(self, 1), want_v = wants(self, 2);
    Matrix<T>* d_q = want_q ? &grad_buffer(nq) : nullptr;
    Matrix<T>* d_k = want_k ? &grad_buffer(nk) : nullptr;
    Matrix<T>* d_v = want_v ? &grad_buffer(nv) : nullptr;
    Matrix<T> d_scores(p, kq);
    for (Index j = 0; j < heads; ++j) {
      const Matrix<T>& prob = (*probs)[static_cast<size_t>(j)];
      for (Index s = 0; s < blocks; ++s) {
        const auto d_o = self.grad.block(s * p, j * d_h, p, d_h);
        const auto p_s = prob.middleRows(s * p, p);
        if (want_v) d_v->block(s * kq, j * d_h, kq, d_h).noalias() += p_s.transpose() * d_o;
        if (!want_q && !want_k) continue;
        // d_scores = scale * P * (dP - rowsum(dP * P)), dP = d_o v^T
        d_scores.noalias() = d_o * nv.value.block(s * kq, j * d_h, kq, d_h).transpose();
        const auto dot = (d_scores.array() * p_s.array()).rowwise().sum().eval();
        d_scores.array() = scale * p_s.array() * (d_scores.array().colwise() - dot);
        if (want_q) d_q->block(s * p, j * d_h, p, d_h).noalias() += d_scores * nk.value.block(s * kq, j * d_h, kq, d_h);
        if (want_k) {
          d_k->block(s * kq, j * d_h, kq, d_h).noalias() += d_scores.transpose() * nq.value.block(s * p, j * d_h, p, d_h);
        }
      }
    }
  });
}

template <class T>
Tn<T> spmm(const CsrPtr& csr, const Tn<T>& x) {
  check_defined("spmm", x);
  check_csr("spmm", csr, x);
  const Csr& s = *csr;
  const bool weighted = !s.values.empty();
  Matrix<T> out = Matrix<T>::Zero(s.rows, x.cols());
  const Matrix<T>& xv = x.value();
  for (int32_t i = 0; i < s.rows; ++i) {
    for (int32_t j = s.offsets[i]; j < s.offsets[i + 1]; ++j) {
      out.row(i) += (weighted ? static_cast<T>(s.values[j]) : T(1)) * xv.row(s.indices[j]);
    }
  }
  return make_result<T>("spmm", std::move(out), {x}, [csr, weighted](Node<T>& self) {
    const Csr& c = *csr;
    Matrix<T>& d_x = grad_buffer(in(self, 0));  // d_x = A^T d_out, as a scatter over entries
    for (int32_t i = 0; i < c.rows; ++i) {
      for (int32_t j = c.offsets[i]; j < c.offsets[i + 1]; ++j) {
        d_x.row(c.indices[j]) += (weighted ? static_cast<T>(c.values[j]) : T(1)) * self.grad.row(i);
      }
    }
  });
}

template <class T>
Tn<T> transpose(const Tn<T>& x) {
  check_defined("transpose", x);
  return make_result<T>("transpose", x.value().transpose(), {x},
                        [](Node<T>& self) { accumulate(in(self, 0), self.grad.transpose()); });
}

// ================================================================================================
// Elementwise binary
// ================================================================================================

template <class T>
Tn<T> add(const Tn<T>& a, const Tn<T>& b) {
  return binary<AddOp>("add", a, b, [](Node<T>& self) {
    if (wants(self, 0)) accumulate_reduced(in(self, 0), self.grad);
    if (wants(self, 1)) accumulate_reduced(in(self, 1), self.grad);
  });
}

template <class T>
Tn<T> sub(const Tn<T>& a, const Tn<T>& b) {
  return binary<SubOp>("sub", a, b, [](Node<T>& self) {
    if (wants(self, 0)) accumulate_reduced(in(self, 0), self.grad);
    if (wants(self, 1)) accumulate_reduced(in(self, 1), -self.grad);
  });
}

template <class T>
Tn<T> mul(const Tn<T>& a, const Tn<T>& b) {
  return binary<MulOp>("mul", a, b, [](Node<T>& self) {
    const Index r = self.value.rows(), c = self.value.cols();
    Node<T>& na = in(self, 0);
    Node<T>& nb = in(self, 1);
    if (wants(self, 0)) accumulate_reduced(na, (self.grad.array() * expand(nb.value, r, c).array()).matrix());
    if (wants(self, 1)) accumulate_reduced(nb, (self.grad.array() * expand(na.value, r, c).array()).matrix());
  });
}

template <class T>
Tn<T> div(const Tn<T>& a, const Tn<T>& b) {
  return binary<DivOp>("div", a, b, [](Node<T>& self) {
    const Index r = self.value.rows(), c = self.value.cols();
    Node<T>& na = in(self, 0);
    Node<T>& nb = in(self, 1);
    const Matrix<T> b_full = expand(nb.value, r, c);
    if (wants(self, 0)) accumulate_reduced(na, (self.grad.array() / b_full.array()).matrix());
    // d(a/b)/db = -(a/b)/b = -out/b
    if (wants(self, 1)) accumulate_reduced(nb, (-self.grad.array() * self.value.array() / b_full.array()).matrix());
  });
}

// ================================================================================================
// Scalar and unary
// ================================================================================================

template <class T>
Tn<T> add_scalar(const Tn<T>& x, T s) {
  check_defined("add_scalar", x);
  return make_result<T>("add_scalar", (x.value().array() + s).matrix(), {x},
                        [](Node<T>& self) { accumulate(in(self, 0), self.grad); });
}

template <class T>
Tn<T> mul_scalar(const Tn<T>& x, T s) {
  check_defined("mul_scalar", x);
  return make_result<T>("mul_scalar", x.value() * s, {x}, [s](Node<T>& self) { accumulate(in(self, 0), self.grad * s); });
}

template <class T>
Tn<T> square(const Tn<T>& x) {
  check_defined("square", x);
  return make_result<T>("square", x.value().array().square().matrix(), {x}, [](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    accumulate(nx, (self.grad.array() * nx.value.array() * T(2)).matrix());
  });
}

template <class T>
Tn<T> relu(const Tn<T>& x) {
  check_defined("relu", x);
  return make_result<T>("relu", x.value().cwiseMax(T(0)), {x}, [](Node<T>& self) {
    accumulate(in(self, 0), (self.value.array() > T(0)).select(self.grad, T(0)).matrix());
  });
}

template <class T>
Tn<T> leaky_relu(const Tn<T>& x, T slope) {
  check_defined("leaky_relu", x);
  Matrix<T> out = (x.value().array() > T(0)).select(x.value(), x.value() * slope);
  return make_result<T>("leaky_relu", std::move(out), {x}, [slope](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    accumulate(nx, (nx.value.array() > T(0)).select(self.grad, self.grad * slope).matrix());
  });
}

template <class T>
Tn<T> tanh(const Tn<T>& x) {
  check_defined("tanh", x);
  return make_result<T>("tanh", x.value().array().tanh().matrix(), {x}, [](Node<T>& self) {
    accumulate(in(self, 0), (self.grad.array() * (T(1) - self.value.array().square())).matrix());
  });
}

template <class T>
Tn<T> sigmoid(const Tn<T>& x) {
  check_defined("sigmoid", x);
  Matrix<T> out = (T(1) / (T(1) + (-x.value().array()).exp())).matrix();
  return make_result<T>("sigmoid", std::move(out), {x}, [](Node<T>& self) {
    const auto& y = self.value.array();
    accumulate(in(self, 0), (self.grad.array() * y * (T(1) - y)).matrix());
  });
}

template <class T>
Tn<T> gelu(const Tn<T>& x) {
  check_defined("gelu", x);
  const T inv_sqrt2 = T(1) / std::numbers::sqrt2_v<T>;
  Matrix<T> out = x.value().unaryExpr([inv_sqrt2](T v) { return T(0.5) * v * (T(1) + std::erf(v * inv_sqrt2)); });
  return make_result<T>("gelu", std::move(out), {x}, [inv_sqrt2](Node<T>& self) {
    const T inv_sqrt2pi = inv_sqrt2 * std::numbers::inv_sqrtpi_v<T>;
    // d/dx x Phi(x) = Phi(x) + x phi(x)
    Matrix<T> slope = in(self, 0).value.unaryExpr([inv_sqrt2, inv_sqrt2pi](T v) {
      return T(0.5) * (T(1) + std::erf(v * inv_sqrt2)) + v * inv_sqrt2pi * std::exp(T(-0.5) * v * v);
    });
    accumulate(in(self, 0), (self.grad.array() * slope.array()).matrix());
  });
}

template <class T>
Tn<T> exp(const Tn<T>& x) {
  check_defined("exp", x);
  return make_result<T>("exp", x.value().array().exp().matrix(), {x}, [](Node<T>& self) {
    accumulate(in(self, 0), (self.grad.array() * self.value.array()).matrix());
  });
}

template <class T>
Tn<T> log(const Tn<T>& x) {
  check_defined("log", x);
  if (x.size() > 0 && !(x.value().minCoeff() > T(0))) fail("log", "input has entries <= 0 (or NaN)");
  return make_result<T>("log", x.value().array().log().matrix(), {x}, [](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    accumulate(nx, (self.grad.array() / nx.value.array()).matrix());
  });
}

// ================================================================================================
// Rows
// ================================================================================================

template <class T>
Tn<T> softmax_rows(const Tn<T>& x, const Mask* mask) {
  check_defined("softmax_rows", x);
  check_mask("softmax_rows", x, mask);
  return make_result<T>("softmax_rows", softmax_forward(x.value(), mask), {x}, [](Node<T>& self) {
    // d_x = y * (d_y - sum(d_y * y)); dropped entries have y = 0 and get 0.
    const auto& y = self.value.array();
    const auto dot = (self.grad.array() * y).rowwise().sum().eval();
    accumulate(in(self, 0), (y * (self.grad.array().colwise() - dot)).matrix());
  });
}

template <class T>
Tn<T> log_softmax_rows(const Tn<T>& x, const Mask* mask) {
  check_defined("log_softmax_rows", x);
  check_mask("log_softmax_rows", x, mask);
  Matrix<T> y = softmax_forward(x.value(), mask);  // for the VJP
  // Shifted form x - max - log(sum exp(x - max)): exact far into the tail, where log(y) underflows.
  constexpr T kInf = std::numeric_limits<T>::infinity();
  Matrix<T> out(x.rows(), x.cols());
  {
    const auto kept = mask ? mask->select(x.value().array(), -kInf).eval() : x.value().array().eval();
    auto row_max = kept.rowwise().maxCoeff().eval();
    row_max = (row_max == -kInf).select(T(0), row_max);
    const auto shifted = (kept.colwise() - row_max).eval();
    auto lse = shifted.exp().rowwise().sum().eval();
    lse = (lse == T(0)).select(T(1), lse).log();
    out.array() = shifted.colwise() - lse;
    if (mask) out.array() = mask->select(out.array(), T(0));
  }
  Matrix<T> keep = ones_like_mask<T>(mask, x.rows(), x.cols());
  return make_result<T>("log_softmax_rows", std::move(out), {x},
                        [y = std::move(y), keep = std::move(keep)](Node<T>& self) {
                          // d_x = d_out * keep - y * sum(d_out * keep)
                          const auto g = (self.grad.array() * keep.array()).eval();
                          const auto total = g.rowwise().sum().eval();
                          accumulate(in(self, 0), (g - y.array().colwise() * total).matrix());
                        });
}

template <class T>
Tn<T> layer_norm(const Tn<T>& x, const Tn<T>& gamma, const Tn<T>& beta, T eps) {
  const char* op = "layer_norm";
  check_defined(op, x);
  check_defined(op, gamma);
  check_defined(op, beta);
  const Index m = x.cols();
  if (gamma.rows() != 1 || gamma.cols() != m || beta.rows() != 1 || beta.cols() != m) {
    fail(op, fmt::format("gamma {} and beta {} must be [1, {}] for x {}", shape(gamma), shape(beta), m, shape(x)));
  }
  // Keep mean and 1/std per row; x_hat is recomputed in the VJP instead of stored (as PyTorch).
  Eigen::Array<T, Eigen::Dynamic, 1> mu = x.value().rowwise().mean();
  Matrix<T> out = x.value().colwise() - mu.matrix();
  Eigen::Array<T, Eigen::Dynamic, 1> rstd =
      (out.array().square().rowwise().sum() / T(m) + eps).rsqrt();
  out.array().colwise() *= rstd;
  out.array().rowwise() *= gamma.value().row(0).array();
  out.array().rowwise() += beta.value().row(0).array();
  return make_result<T>(op, std::move(out), {x, gamma, beta},
                        [mu = std::move(mu), rstd = std::move(rstd), m](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    Matrix<T> x_hat = nx.value.colwise() - mu.matrix();
    x_hat.array().colwise() *= rstd;
    if (wants(self, 1)) accumulate(in(self, 1), (self.grad.array() * x_hat.array()).colwise().sum().matrix());
    if (wants(self, 2)) accumulate(in(self, 2), self.grad.colwise().sum());
    if (wants(self, 0)) {
      // d_x = rstd * (d_xh - mean(d_xh) - x_hat * mean(d_xh * x_hat)), d_xh = d_out * gamma
      Matrix<T> d_xh = self.grad;
      d_xh.array().rowwise() *= in(self, 1).value.row(0).array();
      const auto mean_d = (d_xh.rowwise().sum() / T(m)).eval();
      const auto mean_dx = ((d_xh.array() * x_hat.array()).rowwise().sum() / T(m)).eval();
      d_xh.colwise() -= mean_d;
      d_xh.array() -= x_hat.array().colwise() * mean_dx;
      d_xh.array().colwise() *= rstd;
      accumulate(nx, d_xh);
    }
  });
}

// ================================================================================================
// Structure
// ================================================================================================

// Rows (Axis 0) or columns (Axis 1) [at, at + n) of a matrix, as an assignable block.
template <int Axis, class M>
auto band(M& m, Index at, Index n) {
  if constexpr (Axis == 0) {
    return m.middleRows(at, n);
  } else {
    return m.middleCols(at, n);
  }
}

// Stacks xs along Axis (0: rows, 1: columns); the VJP hands each input its band of d_out.
template <int Axis, class T>
Tn<T> concat_along(const std::vector<Tn<T>>& xs, const char* op) {
  if (xs.empty()) fail(op, "no inputs");
  auto length = [](const auto& x) { return Axis == 0 ? x.rows() : x.cols(); };
  auto across = [](const auto& x) { return Axis == 0 ? x.cols() : x.rows(); };
  Index total = 0;
  for (const auto& x : xs) {
    check_defined(op, x);
    if (across(x) != across(xs[0])) {
      fail(op, fmt::format("{} and {} differ in {}", shape(xs[0]), shape(x), Axis == 0 ? "columns" : "rows"));
    }
    total += length(x);
  }
  Matrix<T> out = Axis == 0 ? Matrix<T>(total, xs[0].cols()) : Matrix<T>(xs[0].rows(), total);
  Index at = 0;
  for (const auto& x : xs) {
    band<Axis>(out, at, length(x)) = x.value();
    at += length(x);
  }
  return make_result<T>(op, std::move(out), xs, [length](Node<T>& self) {
    Index offset = 0;
    for (size_t i = 0; i < self.inputs.size(); ++i) {
      const Index n = length(self.inputs[i]);
      if (wants(self, i)) accumulate(in(self, i), band<Axis>(self.grad, offset, n));
      offset += n;
    }
  });
}

template <class T>
Tn<T> concat_rows(const std::vector<Tn<T>>& xs) {
  return concat_along<0>(xs, "concat_rows");
}

template <class T>
Tn<T> concat_cols(const std::vector<Tn<T>>& xs) {
  return concat_along<1>(xs, "concat_cols");
}

template <class T>
Tn<T> slice_rows(const Tn<T>& x, Index begin, Index count) {
  check_defined("slice_rows", x);
  if (begin < 0 || count < 0 || begin + count > x.rows()) {
    fail("slice_rows", fmt::format("rows [{}, {}) outside {}", begin, begin + count, shape(x)));
  }
  return make_result<T>("slice_rows", x.value().middleRows(begin, count), {x}, [begin, count](Node<T>& self) {
    grad_buffer(in(self, 0)).middleRows(begin, count) += self.grad;
  });
}

template <class T>
Tn<T> interleave_blocks(const Tn<T>& a, const Tn<T>& b, Index blocks) {
  const char* op = "interleave_blocks";
  check_defined(op, a);
  check_defined(op, b);
  if (blocks <= 0 || a.rows() % blocks != 0 || b.rows() % blocks != 0 || a.cols() != b.cols()) {
    fail(op, fmt::format("{} and {} do not split into {} blocks with equal columns", shape(a), shape(b), blocks));
  }
  const Index p = a.rows() / blocks, q = b.rows() / blocks;
  Matrix<T> out(a.rows() + b.rows(), a.cols());
  for (Index s = 0; s < blocks; ++s) {
    out.middleRows(s * (p + q), p) = a.value().middleRows(s * p, p);
    out.middleRows(s * (p + q) + p, q) = b.value().middleRows(s * q, q);
  }
  return make_result<T>(op, std::move(out), {a, b}, [blocks, p, q](Node<T>& self) {
    for (size_t i = 0; i < 2; ++i) {
      if (!wants(self, i)) continue;
      const Index rows = i == 0 ? p : q, skip = i == 0 ? 0 : p;
      Node<T>& target = in(self, i);
      Matrix<T> d_in(target.value.rows(), target.value.cols());
      for (Index s = 0; s < blocks; ++s) d_in.middleRows(s * rows, rows) = self.grad.middleRows(s * (p + q) + skip, rows);
      accumulate(target, d_in);
    }
  });
}

template <class T>
Tn<T> slice_cols(const Tn<T>& x, Index begin, Index count) {
  check_defined("slice_cols", x);
  if (begin < 0 || count < 0 || begin + count > x.cols()) {
    fail("slice_cols", fmt::format("columns [{}, {}) outside {}", begin, begin + count, shape(x)));
  }
  return make_result<T>("slice_cols", x.value().middleCols(begin, count), {x}, [begin, count](Node<T>& self) {
    grad_buffer(in(self, 0)).middleCols(begin, count) += self.grad;
  });
}

// Rows index[i] of x; `op` names it on the tape and in errors (gather_rows, embedding).
template <class T>
Tn<T> gather_rows_as(const char* op, const Tn<T>& x, std::vector<int32_t> index) {
  check_defined(op, x);
  Matrix<T> out(static_cast<Index>(index.size()), x.cols());
  for (size_t i = 0; i < index.size(); ++i) {
    check_index(op, index[i], x.rows(), i);
    out.row(static_cast<Index>(i)) = x.value().row(index[i]);
  }
  return make_result<T>(op, std::move(out), {x}, [index = std::move(index)](Node<T>& self) {
    Matrix<T>& d_x = grad_buffer(in(self, 0));
    for (size_t i = 0; i < index.size(); ++i) d_x.row(index[i]) += self.grad.row(static_cast<Index>(i));
  });
}

template <class T>
Tn<T> gather_rows(const Tn<T>& x, std::vector<int32_t> index) {
  return gather_rows_as("gather_rows", x, std::move(index));
}

template <class T>
Tn<T> scatter_add_rows(const Tn<T>& x, std::vector<int32_t> index, Index rows) {
  check_defined("scatter_add_rows", x);
  if (static_cast<Index>(index.size()) != x.rows()) {
    fail("scatter_add_rows", fmt::format("{} indices for {} rows of x", index.size(), x.rows()));
  }
  Matrix<T> out = Matrix<T>::Zero(rows, x.cols());
  for (size_t i = 0; i < index.size(); ++i) {
    check_index("scatter_add_rows", index[i], rows, i);
    out.row(index[i]) += x.value().row(static_cast<Index>(i));
  }
  return make_result<T>("scatter_add_rows", std::move(out), {x}, [index = std::move(index)](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    Matrix<T> d_x(nx.value.rows(), nx.value.cols());
    for (size_t i = 0; i < index.size(); ++i) d_x.row(static_cast<Index>(i)) = self.grad.row(index[i]);
    accumulate(nx, d_x);
  });
}

template <class T>
Tn<T> select_per_row(const Tn<T>& x, std::vector<int32_t> cols) {
  check_defined("select_per_row", x);
  if (static_cast<Index>(cols.size()) != x.rows()) {
    fail("select_per_row", fmt::format("{} column indices for {} rows", cols.size(), x.rows()));
  }
  Matrix<T> out(x.rows(), 1);
  for (size_t i = 0; i < cols.size(); ++i) {
    check_index("select_per_row", cols[i], x.cols(), i);
    out(static_cast<Index>(i), 0) = x.value()(static_cast<Index>(i), cols[i]);
  }
  return make_result<T>("select_per_row", std::move(out), {x}, [cols = std::move(cols)](Node<T>& self) {
    Matrix<T>& d_x = grad_buffer(in(self, 0));
    for (size_t i = 0; i < cols.size(); ++i) d_x(static_cast<Index>(i), cols[i]) += self.grad(static_cast<Index>(i), 0);
  });
}

template <class T>
Tn<T> embedding(const Tn<T>& table, std::vector<int32_t> ids) {
  return gather_rows_as("embedding", table, std::move(ids));
}

template <class T>
Tn<T> detach(const Tn<T>& x) {
  check_defined("detach", x);
  if (!x.requires_grad()) return x;  // already off the tape: no copy
  auto node = std::make_shared<Node<T>>();
  node->value = x.value();
  node->op = "detach";
  return Tn<T>(std::move(node));
}

// ================================================================================================
// Segment aggregation
// ================================================================================================

template <class T>
Tn<T> segment_sum(const Tn<T>& x, const CsrPtr& csr) {
  return segment_linear("segment_sum", x, csr, false);
}

template <class T>
Tn<T> segment_mean(const Tn<T>& x, const CsrPtr& csr) {
  return segment_linear("segment_mean", x, csr, true);
}

template <class T>
Tn<T> segment_max(const Tn<T>& x, const CsrPtr& csr) {
  check_defined("segment_max", x);
  check_csr("segment_max", csr, x);
  const Csr& s = *csr;
  const Index m = x.cols();
  Matrix<T> out = Matrix<T>::Zero(s.rows, m);
  // argmax[i, f] = source row of the winning entry, -1 for empty rows.
  Eigen::Array<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> argmax =
      Eigen::Array<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>::Constant(s.rows, m, -1);
  const Matrix<T>& xv = x.value();
  for (int32_t i = 0; i < s.rows; ++i) {
    const int32_t begin = s.offsets[i], end = s.offsets[i + 1];
    if (begin == end) continue;
    out.row(i) = xv.row(s.indices[begin]);
    argmax.row(i).setConstant(s.indices[begin]);
    for (int32_t j = begin + 1; j < end; ++j) {
      const int32_t src = s.indices[j];
      for (Index f = 0; f < m; ++f) {
        if (xv(src, f) > out(i, f)) {
          out(i, f) = xv(src, f);
          argmax(i, f) = src;
        }
      }
    }
  }
  return make_result<T>("segment_max", std::move(out), {x}, [argmax = std::move(argmax)](Node<T>& self) {
    Matrix<T>& d_x = grad_buffer(in(self, 0));
    for (Index i = 0; i < argmax.rows(); ++i) {
      for (Index f = 0; f < argmax.cols(); ++f) {
        if (argmax(i, f) >= 0) d_x(argmax(i, f), f) += self.grad(i, f);
      }
    }
  });
}

// ================================================================================================
// Reductions
// ================================================================================================

template <class T>
Tn<T> sum(const Tn<T>& x) {
  check_defined("sum", x);
  return make_result<T>("sum", Matrix<T>::Constant(1, 1, x.value().sum()), {x}, [](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    accumulate(nx, Matrix<T>::Constant(nx.value.rows(), nx.value.cols(), self.grad(0, 0)));
  });
}

template <class T>
Tn<T> mean(const Tn<T>& x) {
  check_defined("mean", x);
  if (x.size() == 0) fail("mean", "input is empty");
  return make_result<T>("mean", Matrix<T>::Constant(1, 1, x.value().mean()), {x}, [](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    accumulate(nx, Matrix<T>::Constant(nx.value.rows(), nx.value.cols(), self.grad(0, 0) / T(nx.value.size())));
  });
}

template <class T>
Tn<T> sum(const Tn<T>& x, int axis) {
  check_defined("sum", x);
  if (axis != 0 && axis != 1) fail("sum", fmt::format("axis {} must be 0 (over rows) or 1 (over columns)", axis));
  Matrix<T> out = axis == 0 ? Matrix<T>(x.value().colwise().sum()) : Matrix<T>(x.value().rowwise().sum());
  return make_result<T>("sum_axis", std::move(out), {x}, [](Node<T>& self) {
    Node<T>& nx = in(self, 0);
    accumulate(nx, expand(self.grad, nx.value.rows(), nx.value.cols()));
  });
}

template <class T>
Tn<T> mean(const Tn<T>& x, int axis) {
  if (axis != 0 && axis != 1) fail("mean", fmt::format("axis {} must be 0 (over rows) or 1 (over columns)", axis));
  const Index count = axis == 0 ? x.rows() : x.cols();
  if (count == 0) fail("mean", "reduced axis is empty");
  return mul_scalar(sum(x, axis), T(1) / T(count));
}

// ================================================================================================
// Regularisation
// ================================================================================================

template <class T>
Tn<T> dropout(const Tn<T>& x, T p, std::mt19937_64& rng, bool training) {
  check_defined("dropout", x);
  if (!(p >= T(0) && p < T(1))) fail("dropout", fmt::format("p = {} must be in [0, 1)", static_cast<double>(p)));
  if (!training || p == T(0)) return x;
  Matrix<T> keep(x.rows(), x.cols());
  const T scale = T(1) / (T(1) - p);
  for (Index i = 0; i < keep.size(); ++i) keep.data()[i] = uniform01(rng) >= static_cast<double>(p) ? scale : T(0);
  Matrix<T> out = (x.value().array() * keep.array()).matrix();
  return make_result<T>("dropout", std::move(out), {x}, [keep = std::move(keep)](Node<T>& self) {
    accumulate(in(self, 0), (self.grad.array() * keep.array()).matrix());
  });
}

// ================================================================================================
// Instantiations: float for the product, double for the finite-difference tests.
// ================================================================================================

#define PLACELAB_INSTANTIATE_OPS(T)                                                               \
  template Tn<T> matmul(const Tn<T>&, const Tn<T>&);                                              \
  template Tn<T> affine(const Tn<T>&, const Tn<T>&, const Tn<T>&);                                \
  template Tn<T> matmul_nt(const Tn<T>&, const Tn<T>&);                                           \
  template Tn<T> block_matmul_nt(const Tn<T>&, const Tn<T>&, Index);                              \
  template Tn<T> block_matmul(const Tn<T>&, const Tn<T>&, Index);                                 \
  template Tn<T> block_attention(const Tn<T>&, const Tn<T>&, const Tn<T>&, Index, Index, T, const Mask*); \
  template Tn<T> spmm(const CsrPtr&, const Tn<T>&);                                               \
  template Tn<T> transpose(const Tn<T>&);                                                         \
  template Tn<T> add(const Tn<T>&, const Tn<T>&);                                                 \
  template Tn<T> sub(const Tn<T>&, const Tn<T>&);                                                 \
  template Tn<T> mul(const Tn<T>&, const Tn<T>&);                                                 \
  template Tn<T> div(const Tn<T>&, const Tn<T>&);                                                 \
  template Tn<T> add_scalar(const Tn<T>&, T);                                                     \
  template Tn<T> mul_scalar(const Tn<T>&, T);                                                     \
  template Tn<T> square(const Tn<T>&);                                                            \
  template Tn<T> relu(const Tn<T>&);                                                              \
  template Tn<T> leaky_relu(const Tn<T>&, T);                                                     \
  template Tn<T> tanh(const Tn<T>&);                                                              \
  template Tn<T> sigmoid(const Tn<T>&);                                                           \
  template Tn<T> gelu(const Tn<T>&);                                                              \
  template Tn<T> exp(const Tn<T>&);                                                               \
  template Tn<T> log(const Tn<T>&);                                                               \
  template Tn<T> softmax_rows(const Tn<T>&, const Mask*);                                         \
  template Tn<T> log_softmax_rows(const Tn<T>&, const Mask*);                                     \
  template Tn<T> layer_norm(const Tn<T>&, const Tn<T>&, const Tn<T>&, T);                         \
  template Tn<T> concat_rows(const std::vector<Tn<T>>&);                                          \
  template Tn<T> concat_cols(const std::vector<Tn<T>>&);                                          \
  template Tn<T> slice_rows(const Tn<T>&, Index, Index);                                          \
  template Tn<T> slice_cols(const Tn<T>&, Index, Index);                                          \
  template Tn<T> interleave_blocks(const Tn<T>&, const Tn<T>&, Index);                            \
  template Tn<T> gather_rows(const Tn<T>&, std::vector<int32_t>);                                 \
  template Tn<T> scatter_add_rows(const Tn<T>&, std::vector<int32_t>, Index);                     \
  template Tn<T> select_per_row(const Tn<T>&, std::vector<int32_t>);                              \
  template Tn<T> embedding(const Tn<T>&, std::vector<int32_t>);                                   \
  template Tn<T> detach(const Tn<T>&);                                                            \
  template Tn<T> segment_sum(const Tn<T>&, const CsrPtr&);                                        \
  template Tn<T> segment_mean(const Tn<T>&, const CsrPtr&);                                       \
  template Tn<T> segment_max(const Tn<T>&, const CsrPtr&);                                        \
  template Tn<T> sum(const Tn<T>&);                                                               \
  template Tn<T> mean(const Tn<T>&);                                                              \
  template Tn<T> sum(const Tn<T>&, int);                                                          \
  template Tn<T> mean(const Tn<T>&, int);                                                         \
  template Tn<T> dropout(const Tn<T>&, T, std::mt19937_64&, bool);
PLACELAB_INSTANTIATE_OPS(float)
PLACELAB_INSTANTIATE_OPS(double)
#undef PLACELAB_INSTANTIATE_OPS

}  // namespace placelab::autodiff
