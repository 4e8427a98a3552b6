// Forward and VJP of every op, side by side (as mlx/primitives.cpp keeps Add::vjp beside Add::vmap).
// A VJP reads d_out = self.grad and adds into each input that requires a gradient with accumulate()
// (first contribution assigns). Only non-tensor data is captured in closures, so the tape owns its
// inputs through Node::inputs alone and cutting that list frees the step.
//
// This file: products, attention, row softmax and layer norm (the dense work); ops_elementwise.cpp: the
// elementwise, structure, segment and reduction ops.
#include "policy/autodiff/ops.h"

#include <cmath>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "policy/autodiff/ops_detail.h"

namespace placelab::autodiff {
using namespace detail;
namespace {

// --- row softmax ---

// Row by row, so that exp runs over contiguous rows (Eigen vectorises it there, not over a masked select
// or a broadcast). A fully masked row, or one of -inf, gives zeros.
template <class T>
Matrix<T> softmax_forward(const Matrix<T>& x, const Mask* mask) {
  constexpr T kInf = std::numeric_limits<T>::infinity();
  const Index cols = x.cols();
  Matrix<T> y(x.rows(), cols);
  if (cols == 0) return y;
  for (Index r = 0; r < x.rows(); ++r) {
    T* out = y.row(r).data();
    const T* in = x.row(r).data();
    const bool* keep = mask != nullptr ? mask->row(r).data() : nullptr;
    if (keep != nullptr) {
      for (Index c = 0; c < cols; ++c) out[c] = keep[c] ? in[c] : -kInf;
    } else {
      std::copy(in, in + cols, out);
    }
    T top = y.row(r).maxCoeff();
    if (top == -kInf) top = 0;
    y.row(r).array() = (y.row(r).array() - top).exp();
    // Eigen's vectorised exp clamps its input, so exp(-inf) comes out tiny, not 0: masked and -inf
    // entries are set to 0 here.
    for (Index c = 0; c < cols; ++c) out[c] = (keep == nullptr || keep[c]) && in[c] != -kInf ? out[c] : T(0);
    const T sum = y.row(r).sum();
    if (sum != 0) y.row(r) /= sum;
  }
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
// Instantiations: float for the product, double for the finite-difference tests.
// ================================================================================================

#define PLACELAB_INSTANTIATE_OPS(T)                                                                \
  template Tn<T> matmul(const Tn<T>&, const Tn<T>&);                                               \
  template Tn<T> affine(const Tn<T>&, const Tn<T>&, const Tn<T>&);                                 \
  template Tn<T> matmul_nt(const Tn<T>&, const Tn<T>&);                                            \
  template Tn<T> block_matmul_nt(const Tn<T>&, const Tn<T>&, Index);                               \
  template Tn<T> block_matmul(const Tn<T>&, const Tn<T>&, Index);                                  \
  template Tn<T> block_attention(const Tn<T>&, const Tn<T>&, const Tn<T>&, Index, Index, T, const Mask*); \
  template Tn<T> spmm(const CsrPtr&, const Tn<T>&);                                                \
  template Tn<T> transpose(const Tn<T>&);                                                          \
  template Tn<T> softmax_rows(const Tn<T>&, const Mask*);                                          \
  template Tn<T> log_softmax_rows(const Tn<T>&, const Mask*);                                      \
  template Tn<T> layer_norm(const Tn<T>&, const Tn<T>&, const Tn<T>&, T);
PLACELAB_INSTANTIATE_OPS(float)
PLACELAB_INSTANTIATE_OPS(double)
#undef PLACELAB_INSTANTIATE_OPS

}  // namespace placelab::autodiff
