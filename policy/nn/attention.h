// Attention layers of GDP's placer: multi-head attention whose keys and values prepend a memory of
// the previous segment (Transformer-XL segment recurrence), run on all segments of a graph at once,
// and the Transformer-XL block built from it.
// Legend: B = segments (blocks), L = rows per segment, M = memory rows per segment, d = model width,
// h = heads, d_h = d / h.
#pragma once

#include "policy/nn/linear.h"

namespace placelab::nn {

/**
 * Multi-head attention over B independent segments stacked in rows. Segment s's queries are the
 * rows of x block s; its keys and values are [memory block s; x block s] (memory is detached, as in
 * Transformer-XL: no gradient flows into the previous segment). mask[B*L, M+L] (true = may attend)
 * may be null. With B = 1 and no memory it is plain self-attention (PyTorch's nn.MultiheadAttention).
 */
template <class T>
class MultiHeadAttentionT {
 public:
  MultiHeadAttentionT() = default;
  MultiHeadAttentionT(Index dim, Index heads, std::mt19937_64& rng);
  /** x[B*L, d], memory[B*M, d] (undefined for none) -> [B*L, d]. */
  TensorT<T> forward(const TensorT<T>& x, const TensorT<T>& memory, Index blocks, const Mask* mask = nullptr) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;
  Index heads() const { return heads_; }
  LinearT<T>& query() { return query_; }
  LinearT<T>& key() { return key_; }
  LinearT<T>& value() { return value_; }
  LinearT<T>& output() { return output_; }

 private:
  Index heads_ = 1;
  LinearT<T> query_, key_, value_, output_;
};

/**
 * Transformer-XL block (post-norm, as the original): h = LN1(x + MHA(x, memory)),
 * y = LN2(h + W2 relu(W1 h)).
 */
template <class T>
class TransformerXlBlockT {
 public:
  TransformerXlBlockT() = default;
  TransformerXlBlockT(Index dim, Index heads, Index ff_dim, std::mt19937_64& rng);
  TensorT<T> forward(const TensorT<T>& x, const TensorT<T>& memory, Index blocks, const Mask* mask = nullptr) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;

 private:
  MultiHeadAttentionT<T> attention_;
  LayerNormT<T> norm1_, norm2_;
  LinearT<T> ff1_, ff2_;
};

/**
 * Memory for segment recurrence over x[B*L, d]: block s of the result is x's block s-1 (detached);
 * block 0 is zeros, so mask it out with segment_mask(..., first_has_memory = false).
 */
template <class T>
TensorT<T> previous_segment_memory(const TensorT<T>& x, Index blocks);

/**
 * Attention mask [B*L, M+L] for B segments of L rows with M memory rows each: a row may attend to
 * memory (except in segment 0 unless first_has_memory) and to rows of its own segment that are
 * valid (global row index < valid_rows, the real node count before padding).
 */
Mask segment_mask(Index blocks, Index rows_per_block, Index memory_rows, Index valid_rows, bool first_has_memory);

using MultiHeadAttention = MultiHeadAttentionT<float>;
using TransformerXlBlock = TransformerXlBlockT<float>;

}  // namespace placelab::nn
