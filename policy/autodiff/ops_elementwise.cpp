// Forward and VJP of the elementwise (with broadcasting), structure (concat, slices, gather/scatter),
// segment, reduction and dropout ops; conventions as in ops.cpp.
#include <cmath>
#include <limits>
#include <numbers>
#include <string>

#include <fmt/format.h>

#include "policy/autodiff/ops.h"
#include "policy/autodiff/ops_detail.h"

namespace placelab::autodiff {
using namespace detail;
namespace {

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

#define PLACELAB_INSTANTIATE_OPS(T)                                                                \
  template Tn<T> add(const Tn<T>&, const Tn<T>&);                                                  \
  template Tn<T> sub(const Tn<T>&, const Tn<T>&);                                                  \
  template Tn<T> mul(const Tn<T>&, const Tn<T>&);                                                  \
  template Tn<T> div(const Tn<T>&, const Tn<T>&);                                                  \
  template Tn<T> add_scalar(const Tn<T>&, T);                                                      \
  template Tn<T> mul_scalar(const Tn<T>&, T);                                                      \
  template Tn<T> square(const Tn<T>&);                                                             \
  template Tn<T> relu(const Tn<T>&);                                                               \
  template Tn<T> leaky_relu(const Tn<T>&, T);                                                      \
  template Tn<T> tanh(const Tn<T>&);                                                               \
  template Tn<T> sigmoid(const Tn<T>&);                                                            \
  template Tn<T> gelu(const Tn<T>&);                                                               \
  template Tn<T> exp(const Tn<T>&);                                                                \
  template Tn<T> log(const Tn<T>&);                                                                \
  template Tn<T> concat_rows(const std::vector<Tn<T>>&);                                           \
  template Tn<T> concat_cols(const std::vector<Tn<T>>&);                                           \
  template Tn<T> slice_rows(const Tn<T>&, Index, Index);                                           \
  template Tn<T> slice_cols(const Tn<T>&, Index, Index);                                           \
  template Tn<T> interleave_blocks(const Tn<T>&, const Tn<T>&, Index);                             \
  template Tn<T> gather_rows(const Tn<T>&, std::vector<int32_t>);                                  \
  template Tn<T> scatter_add_rows(const Tn<T>&, std::vector<int32_t>, Index);                      \
  template Tn<T> select_per_row(const Tn<T>&, std::vector<int32_t>);                               \
  template Tn<T> embedding(const Tn<T>&, std::vector<int32_t>);                                    \
  template Tn<T> detach(const Tn<T>&);                                                             \
  template Tn<T> segment_sum(const Tn<T>&, const CsrPtr&);                                         \
  template Tn<T> segment_mean(const Tn<T>&, const CsrPtr&);                                        \
  template Tn<T> segment_max(const Tn<T>&, const CsrPtr&);                                         \
  template Tn<T> sum(const Tn<T>&);                                                                \
  template Tn<T> mean(const Tn<T>&);                                                               \
  template Tn<T> sum(const Tn<T>&, int);                                                           \
  template Tn<T> mean(const Tn<T>&, int);                                                          \
  template Tn<T> dropout(const Tn<T>&, T, std::mt19937_64&, bool);
PLACELAB_INSTANTIATE_OPS(float)
PLACELAB_INSTANTIATE_OPS(double)
#undef PLACELAB_INSTANTIATE_OPS

}  // namespace placelab::autodiff
