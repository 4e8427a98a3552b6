// The differentiable ops of placelab's autodiff, as free functions on TensorT<T> (T = float in the
// product, double in the finite-difference tests). Each op's forward sits beside its VJP in ops.cpp.
//
// Shape legend used below (row-major, every tensor is 2-D):
//   n = rows (graph nodes, sequence positions, batch), m = columns (features), k = inner dimension,
//   B = number of blocks (attention segments), P/Q = rows per block, e = entries of a sparse structure.
// Bad shapes or indices throw placelab::Error naming the op.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <vector>

#include "policy/autodiff/tensor.h"

namespace placelab::autodiff {

/**
 * Sparse rows (CSR) built once per graph and shared by the ops that use it: row i lists the column
 * indices offsets[i]..offsets[i+1] (GraphSAGE neighbourhoods, segment members) with optional weights
 * (normalised GCN adjacency). Values are float; double tests use float-representable weights.
 */
struct Csr {
  int32_t rows = 0;
  int32_t cols = 0;
  std::vector<int32_t> offsets{0};  // rows + 1, non-decreasing, offsets[0] == 0
  std::vector<int32_t> indices;     // column of each entry, in [0, cols)
  std::vector<float> values;        // weight of each entry; empty means every weight is 1

  /** Row i holds lists[i]; every index must be in [0, cols). */
  static Csr from_lists(int32_t cols, const std::vector<std::vector<int32_t>>& lists);
  int64_t nnz() const { return static_cast<int64_t>(indices.size()); }
  /** Throws placelab::Error (naming `where`) unless offsets, indices and values are consistent. */
  void validate(const char* where) const;
};
using CsrPtr = std::shared_ptr<const Csr>;

// --- products -------------------------------------------------------------------------------
/** a[n,k] x b[k,m] -> [n,m]. */
template <class T> TensorT<T> matmul(const TensorT<T>& a, const TensorT<T>& b);
/** x[n,k] w[k,m] + b[1,m] -> [n,m]: a fused Linear (one output buffer instead of two); b may be undefined. */
template <class T> TensorT<T> affine(const TensorT<T>& x, const TensorT<T>& w, const TensorT<T>& b);
/** a[n,k] x b[m,k]^T -> [n,m] (attention scores without materialising a transpose). */
template <class T> TensorT<T> matmul_nt(const TensorT<T>& a, const TensorT<T>& b);
/** Per block s of B: a[B*P,k] block s times b[B*Q,k] block s transposed -> [B*P,Q]. */
template <class T> TensorT<T> block_matmul_nt(const TensorT<T>& a, const TensorT<T>& b, Index blocks);
/** Per block s of B: a[B*P,Q] block s times b[B*Q,m] block s -> [B*P,m]. */
template <class T> TensorT<T> block_matmul(const TensorT<T>& a, const TensorT<T>& b, Index blocks);
/**
 * Fused multi-head attention over B blocks: for block s and head j (columns j*d_h..(j+1)*d_h of d),
 * out_s,j = softmax_rows(scale * q_s,j k_s,j^T, mask_s) v_s,j. q[B*P,d], k and v [B*Q,d], mask[B*P,Q]
 * (true = may attend; null = all) -> [B*P,d]. Only the probabilities are kept for the VJP: one
 * [B*P,Q] matrix per head instead of scores, scaled scores and probabilities.
 */
template <class T>
TensorT<T> block_attention(const TensorT<T>& q, const TensorT<T>& k, const TensorT<T>& v, Index blocks, Index heads,
                           T scale, const Mask* mask = nullptr);
/** CSR sparse [r,c] x dense x[c,m] -> [r,m] (entry weights, 1 when the CSR has none). */
template <class T> TensorT<T> spmm(const CsrPtr& csr, const TensorT<T>& x);
/** x[n,m] -> [m,n]. */
template <class T> TensorT<T> transpose(const TensorT<T>& x);

// --- elementwise binary, with broadcast: each operand is [n,m], [1,m] (row), [n,1] (column) or [1,1]
/** a + b -> [n,m]. */
template <class T> TensorT<T> add(const TensorT<T>& a, const TensorT<T>& b);
/** a - b -> [n,m]. */
template <class T> TensorT<T> sub(const TensorT<T>& a, const TensorT<T>& b);
/** a * b elementwise -> [n,m]. */
template <class T> TensorT<T> mul(const TensorT<T>& a, const TensorT<T>& b);
/** a / b elementwise -> [n,m]. */
template <class T> TensorT<T> div(const TensorT<T>& a, const TensorT<T>& b);

// --- scalar ops: x[n,m] -> [n,m] ----------------------------------------------------------------
/** x + s. */
template <class T> TensorT<T> add_scalar(const TensorT<T>& x, T s);
/** x * s. */
template <class T> TensorT<T> mul_scalar(const TensorT<T>& x, T s);
/** x * x. */
template <class T> TensorT<T> square(const TensorT<T>& x);

// --- elementwise unary: x[n,m] -> [n,m] -------------------------------------------------------
/** max(x, 0). */
template <class T> TensorT<T> relu(const TensorT<T>& x);
/** x for x > 0, slope * x otherwise. */
template <class T> TensorT<T> leaky_relu(const TensorT<T>& x, T slope = T(0.01));
/** tanh(x). */
template <class T> TensorT<T> tanh(const TensorT<T>& x);
/** 1 / (1 + exp(-x)). */
template <class T> TensorT<T> sigmoid(const TensorT<T>& x);
/** x * Phi(x), the exact (erf) GELU, as PyTorch's default. */
template <class T> TensorT<T> gelu(const TensorT<T>& x);
/** exp(x). */
template <class T> TensorT<T> exp(const TensorT<T>& x);
/** log(x); x must be positive. */
template <class T> TensorT<T> log(const TensorT<T>& x);

// --- rows -------------------------------------------------------------------------------------
/** Softmax of each row of x[n,m] over the entries kept by mask[n,m] (null = all); dropped entries and
 *  fully masked rows are 0. */
template <class T> TensorT<T> softmax_rows(const TensorT<T>& x, const Mask* mask = nullptr);
/** Log-softmax of each row over kept entries; dropped entries are 0 (not -inf, so that
 *  entropy terms p * log p stay finite) and get no gradient. */
template <class T> TensorT<T> log_softmax_rows(const TensorT<T>& x, const Mask* mask = nullptr);
/** Normalises each row of x[n,m], then scales by gamma[1,m] and shifts by beta[1,m]. */
template <class T>
TensorT<T> layer_norm(const TensorT<T>& x, const TensorT<T>& gamma, const TensorT<T>& beta, T eps = T(1e-5));

// --- structure --------------------------------------------------------------------------------
/** Stacks [n_i,m] tensors -> [sum n_i, m]. */
template <class T> TensorT<T> concat_rows(const std::vector<TensorT<T>>& xs);
/** Joins [n,m_i] tensors side by side -> [n, sum m_i]. */
template <class T> TensorT<T> concat_cols(const std::vector<TensorT<T>>& xs);
/** Rows [begin, begin+count) of x[n,m] -> [count,m]. */
template <class T> TensorT<T> slice_rows(const TensorT<T>& x, Index begin, Index count);
/** Per block s of B: [a block s; b block s]. a[B*P,m], b[B*Q,m] -> [B*(P+Q),m] (keys over memory + segment). */
template <class T> TensorT<T> interleave_blocks(const TensorT<T>& a, const TensorT<T>& b, Index blocks);
/** Columns [begin, begin+count) of x[n,m] -> [n,count]. */
template <class T> TensorT<T> slice_cols(const TensorT<T>& x, Index begin, Index count);
/** out[i] = x[index[i]]: x[n,m], index[e] -> [e,m]; the VJP scatter-adds. */
template <class T> TensorT<T> gather_rows(const TensorT<T>& x, std::vector<int32_t> index);
/** out[index[i]] += x[i]: x[e,m], index[e] -> [rows,m]; the VJP gathers. */
template <class T> TensorT<T> scatter_add_rows(const TensorT<T>& x, std::vector<int32_t> index, Index rows);
/** out[i] = x[i, cols[i]]: x[n,m], cols[n] -> [n,1] (log-probability of the chosen action). */
template <class T> TensorT<T> select_per_row(const TensorT<T>& x, std::vector<int32_t> cols);
/** Embedding lookup: table[V,m], ids[e] in [0,V) -> [e,m]. */
template <class T> TensorT<T> embedding(const TensorT<T>& table, std::vector<int32_t> ids);
/** The same value, off the tape (Transformer-XL memory, targets); x itself when it is already off it. */
template <class T> TensorT<T> detach(const TensorT<T>& x);

// --- segment aggregation over CSR rows: x[n,m], csr [r, n] -> [r,m]; empty rows give 0 --------
/** out[i] = sum of x[j] over j in row i of csr (weights ignored). */
template <class T> TensorT<T> segment_sum(const TensorT<T>& x, const CsrPtr& csr);
/** out[i] = mean of x[j] over j in row i. */
template <class T> TensorT<T> segment_mean(const TensorT<T>& x, const CsrPtr& csr);
/** out[i] = elementwise max of x[j] over j in row i; the VJP routes to the (first) argmax. */
template <class T> TensorT<T> segment_max(const TensorT<T>& x, const CsrPtr& csr);

// --- reductions ---------------------------------------------------------------------------------
/** Sum of all entries -> [1,1]. */
template <class T> TensorT<T> sum(const TensorT<T>& x);
/** Mean of all entries -> [1,1]. */
template <class T> TensorT<T> mean(const TensorT<T>& x);
/** Sum over axis 0 (rows) -> [1,m], or over axis 1 (columns) -> [n,1]. */
template <class T> TensorT<T> sum(const TensorT<T>& x, int axis);
/** Mean over axis 0 -> [1,m], or over axis 1 -> [n,1]. */
template <class T> TensorT<T> mean(const TensorT<T>& x, int axis);

// --- regularisation -------------------------------------------------------------------------------
/** Inverted dropout: zeroes each entry with probability p and scales the rest by 1/(1-p), drawing
 *  from `rng`; identity when !training or p == 0. */
template <class T> TensorT<T> dropout(const TensorT<T>& x, T p, std::mt19937_64& rng, bool training = true);

// --- operators: shorthands for add/sub/mul/div and the scalar ops ---------------------------------
template <class T> TensorT<T> operator+(const TensorT<T>& a, const TensorT<T>& b) { return add(a, b); }
template <class T> TensorT<T> operator-(const TensorT<T>& a, const TensorT<T>& b) { return sub(a, b); }
template <class T> TensorT<T> operator*(const TensorT<T>& a, const TensorT<T>& b) { return mul(a, b); }
template <class T> TensorT<T> operator/(const TensorT<T>& a, const TensorT<T>& b) { return div(a, b); }
template <class T> TensorT<T> operator+(const TensorT<T>& x, T s) { return add_scalar(x, s); }
template <class T> TensorT<T> operator-(const TensorT<T>& x, T s) { return add_scalar(x, -s); }
template <class T> TensorT<T> operator*(const TensorT<T>& x, T s) { return mul_scalar(x, s); }
template <class T> TensorT<T> operator*(T s, const TensorT<T>& x) { return mul_scalar(x, s); }
template <class T> TensorT<T> operator/(const TensorT<T>& x, T s) { return mul_scalar(x, T(1) / s); }
template <class T> TensorT<T> operator-(const TensorT<T>& x) { return mul_scalar(x, T(-1)); }

/** A uniform draw in [0, 1) from the top 53 bits (std distributions differ across libraries). */
inline double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace placelab::autodiff
