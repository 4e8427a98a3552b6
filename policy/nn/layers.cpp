// Implementations of the layers in linear.h, graphsage.h, attention.h and lstm.h, kept in one
// translation unit (they only compose ops; one TU keeps the Eigen-heavy build short on 2 cores).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/nn/attention.h"
#include "policy/nn/graphsage.h"
#include "policy/nn/lstm.h"

namespace placelab::nn {

using autodiff::Csr;
using autodiff::CsrPtr;
namespace ad = placelab::autodiff;

// ================================================================================================
// linear.h
// ================================================================================================

template <class T>
LinearT<T>::LinearT(Index in, Index out, std::mt19937_64& rng, bool bias) {
  if (in <= 0 || out <= 0) throw Error(fmt::format("Linear: sizes {} -> {} must be positive", in, out));
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  weight_ = uniform_param<T>(in, out, bound, rng);
  if (bias) bias_ = uniform_param<T>(1, out, bound, rng);
}

template <class T>
TensorT<T> LinearT<T>::forward(const TensorT<T>& x) const {
  if (x.cols() != weight_.rows()) {
    throw Error(fmt::format("Linear: input has {} features, the layer expects {}", x.cols(), weight_.rows()));
  }
  return ad::affine(x, weight_, bias_);
}

template <class T>
void LinearT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  out.push_back({join_name(prefix, "weight"), weight_});
  if (bias_.defined()) out.push_back({join_name(prefix, "bias"), bias_});
}

template <class T>
TensorT<T> activate(const TensorT<T>& x, Activation act) {
  switch (act) {
    case Activation::relu: return ad::relu(x);
    case Activation::tanh: return ad::tanh(x);
    case Activation::gelu: return ad::gelu(x);
  }
  return x;
}

template <class T>
MlpT<T>::MlpT(const std::vector<Index>& sizes, std::mt19937_64& rng, Activation act) : act_(act) {
  if (sizes.size() < 2) throw Error("Mlp: sizes must list at least {in, out}");
  for (size_t i = 0; i + 1 < sizes.size(); ++i) layers_.emplace_back(sizes[i], sizes[i + 1], rng);
}

template <class T>
TensorT<T> MlpT<T>::forward(const TensorT<T>& x) const {
  TensorT<T> h = x;
  for (size_t i = 0; i < layers_.size(); ++i) {
    h = layers_[i].forward(h);
    if (i + 1 < layers_.size()) h = activate(h, act_);
  }
  return h;
}

template <class T>
void MlpT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  for (size_t i = 0; i < layers_.size(); ++i) layers_[i].collect(join_name(prefix, std::to_string(i)), out);
}

template <class T>
LayerNormT<T>::LayerNormT(Index dim, T eps)
    : gamma_(constant_param<T>(1, dim, T(1))), beta_(constant_param<T>(1, dim, T(0))), eps_(eps) {}

template <class T>
TensorT<T> LayerNormT<T>::forward(const TensorT<T>& x) const {
  return ad::layer_norm(x, gamma_, beta_, eps_);
}

template <class T>
void LayerNormT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  out.push_back({join_name(prefix, "weight"), gamma_});
  out.push_back({join_name(prefix, "bias"), beta_});
}

template <class T>
EmbeddingT<T>::EmbeddingT(Index vocab, Index dim, std::mt19937_64& rng)
    : table_(uniform_param<T>(vocab, dim, std::sqrt(3.0), rng)) {}

template <class T>
TensorT<T> EmbeddingT<T>::forward(const std::vector<int32_t>& ids) const {
  return ad::embedding(table_, ids);
}

template <class T>
void EmbeddingT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  out.push_back({join_name(prefix, "weight"), table_});
}

template <class T>
FilmT<T>::FilmT(Index cond_dim, Index feature_dim, std::mt19937_64& rng)
    : gamma_(cond_dim, feature_dim, rng), beta_(cond_dim, feature_dim, rng) {
  for (LinearT<T>* l : {&gamma_, &beta_}) {
    TensorT<T> w = l->weight(), b = l->bias();
    w.mutable_value().setZero();
    b.mutable_value().setZero();
  }
}

template <class T>
TensorT<T> FilmT<T>::forward(const TensorT<T>& x, const TensorT<T>& cond) const {
  if (cond.rows() != 1) throw Error(fmt::format("Film: condition must be one row, got {}", cond.rows()));
  return ad::add(ad::mul(x, ad::add_scalar(gamma_.forward(cond), T(1))), beta_.forward(cond));
}

template <class T>
void FilmT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  gamma_.collect(join_name(prefix, "gamma"), out);
  beta_.collect(join_name(prefix, "beta"), out);
}

// ================================================================================================
// graphsage.h
// ================================================================================================

CsrPtr neighbor_csr(const graphs::Graph& graph, Neighbors which) {
  std::vector<std::vector<int32_t>> lists(graph.num_ops());
  for (graphs::OpId v = 0; v < graph.num_ops(); ++v) {
    auto& list = lists[v];
    if (which != Neighbors::out) list.assign(graph.predecessors(v).begin(), graph.predecessors(v).end());
    if (which != Neighbors::in) list.insert(list.end(), graph.successors(v).begin(), graph.successors(v).end());
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return std::make_shared<Csr>(Csr::from_lists(graph.num_ops(), lists));
}

CsrPtr gcn_csr(const Csr& neighbors) {
  if (neighbors.rows != neighbors.cols) {
    throw Error(fmt::format("gcn_csr: neighbourhoods must be square, got [{}, {}]", neighbors.rows, neighbors.cols));
  }
  const int32_t n = neighbors.rows;
  std::vector<std::vector<int32_t>> lists(n);
  for (int32_t v = 0; v < n; ++v) {
    lists[v].push_back(v);  // self loop
    for (int32_t j = neighbors.offsets[v]; j < neighbors.offsets[v + 1]; ++j) {
      lists[v].push_back(neighbors.indices[j]);
      lists[neighbors.indices[j]].push_back(v);  // symmetrise
    }
  }
  for (auto& list : lists) {
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  auto csr = std::make_shared<Csr>(Csr::from_lists(n, lists));
  csr->values.resize(csr->indices.size());
  for (int32_t v = 0; v < n; ++v) {
    for (int32_t j = csr->offsets[v]; j < csr->offsets[v + 1]; ++j) {
      const double deg_v = static_cast<double>(lists[v].size());
      const double deg_u = static_cast<double>(lists[csr->indices[j]].size());
      csr->values[j] = static_cast<float>(1.0 / std::sqrt(deg_v * deg_u));
    }
  }
  return csr;
}

CsrPtr gcn_csr(const graphs::Graph& graph) { return gcn_csr(*neighbor_csr(graph, Neighbors::both)); }

template <class T>
GraphSageT<T>::GraphSageT(Index in, Index out, Aggregator aggregator, std::mt19937_64& rng)
    : aggregator_(aggregator) {
  if (aggregator == Aggregator::max_pool) pool_ = LinearT<T>(in, in, rng);
  neigh_ = LinearT<T>(in, out, rng);
  self_ = LinearT<T>(in, out, rng, false);
}

template <class T>
TensorT<T> GraphSageT<T>::forward(const TensorT<T>& x, const CsrPtr& neighbors) const {
  const TensorT<T> agg = aggregator_ == Aggregator::mean
                             ? ad::segment_mean(x, neighbors)
                             : ad::segment_max(ad::relu(pool_.forward(x)), neighbors);
  return ad::add(neigh_.forward(agg), self_.forward(x));
}

template <class T>
void GraphSageT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  if (aggregator_ == Aggregator::max_pool) pool_.collect(join_name(prefix, "pool"), out);
  neigh_.collect(join_name(prefix, "neigh"), out);
  self_.collect(join_name(prefix, "self"), out);
}

template <class T>
GcnT<T>::GcnT(Index in, Index out, std::mt19937_64& rng)
    : linear_(in, out, rng, false), bias_(constant_param<T>(1, out, T(0))) {}

template <class T>
TensorT<T> GcnT<T>::forward(const TensorT<T>& x, const CsrPtr& propagation) const {
  return ad::add(ad::spmm(propagation, linear_.forward(x)), bias_);
}

template <class T>
void GcnT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  linear_.collect(prefix, out);
  out.push_back({join_name(prefix, "bias"), bias_});
}

// ================================================================================================
// attention.h
// ================================================================================================

template <class T>
MultiHeadAttentionT<T>::MultiHeadAttentionT(Index dim, Index heads, std::mt19937_64& rng)
    : heads_(heads),
      query_(dim, dim, rng),
      key_(dim, dim, rng),
      value_(dim, dim, rng),
      output_(dim, dim, rng) {
  if (heads <= 0 || dim % heads != 0) {
    throw Error(fmt::format("MultiHeadAttention: width {} must split evenly into {} heads", dim, heads));
  }
}

template <class T>
TensorT<T> MultiHeadAttentionT<T>::forward(const TensorT<T>& x, const TensorT<T>& memory, Index blocks,
                                           const Mask* mask) const {
  const Index d = query_.in_features();
  if (blocks <= 0 || x.rows() % blocks != 0 || (memory.defined() && memory.rows() % blocks != 0)) {
    throw Error(fmt::format("MultiHeadAttention: {} rows (and memory) must split into {} segments", x.rows(), blocks));
  }
  const Index rows = x.rows() / blocks;
  const Index mem_rows = memory.defined() ? memory.rows() / blocks : 0;
  if (mask != nullptr && (mask->rows() != x.rows() || mask->cols() != mem_rows + rows)) {
    throw Error(fmt::format("MultiHeadAttention: mask is [{}, {}], expected [{}, {}] (queries x memory+segment)",
                            mask->rows(), mask->cols(), x.rows(), mem_rows + rows));
  }
  // Keys and values of segment s: its memory block, then its own block.
  const TensorT<T> kv_in = memory.defined() ? ad::interleave_blocks(ad::detach(memory), x, blocks) : x;
  const TensorT<T> q = query_.forward(x), k = key_.forward(kv_in), v = value_.forward(kv_in);
  const T scale = T(1) / std::sqrt(static_cast<T>(d / heads_));
  return output_.forward(ad::block_attention(q, k, v, blocks, heads_, scale, mask));
}

template <class T>
void MultiHeadAttentionT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  query_.collect(join_name(prefix, "query"), out);
  key_.collect(join_name(prefix, "key"), out);
  value_.collect(join_name(prefix, "value"), out);
  output_.collect(join_name(prefix, "output"), out);
}

template <class T>
TransformerXlBlockT<T>::TransformerXlBlockT(Index dim, Index heads, Index ff_dim, std::mt19937_64& rng)
    : attention_(dim, heads, rng), norm1_(dim), norm2_(dim), ff1_(dim, ff_dim, rng), ff2_(ff_dim, dim, rng) {}

template <class T>
TensorT<T> TransformerXlBlockT<T>::forward(const TensorT<T>& x, const TensorT<T>& memory, Index blocks,
                                           const Mask* mask) const {
  const TensorT<T> h = norm1_.forward(ad::add(x, attention_.forward(x, memory, blocks, mask)));
  return norm2_.forward(ad::add(h, ff2_.forward(ad::relu(ff1_.forward(h)))));
}

template <class T>
void TransformerXlBlockT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  attention_.collect(join_name(prefix, "attention"), out);
  norm1_.collect(join_name(prefix, "norm1"), out);
  ff1_.collect(join_name(prefix, "ff1"), out);
  ff2_.collect(join_name(prefix, "ff2"), out);
  norm2_.collect(join_name(prefix, "norm2"), out);
}

template <class T>
TensorT<T> previous_segment_memory(const TensorT<T>& x, Index blocks) {
  if (blocks <= 0 || x.rows() % blocks != 0) {
    throw Error(fmt::format("previous_segment_memory: {} rows do not split into {} segments", x.rows(), blocks));
  }
  const Index rows = x.rows() / blocks;
  Matrix<T> memory(x.rows(), x.cols());
  memory.topRows(rows).setZero();
  memory.bottomRows(x.rows() - rows) = x.value().topRows(x.rows() - rows);
  return TensorT<T>::leaf(std::move(memory), false);
}

Mask segment_mask(Index blocks, Index rows_per_block, Index memory_rows, Index valid_rows, bool first_has_memory) {
  Mask mask(blocks * rows_per_block, memory_rows + rows_per_block);
  for (Index s = 0; s < blocks; ++s) {
    auto rows = mask.middleRows(s * rows_per_block, rows_per_block);
    rows.leftCols(memory_rows).setConstant(s > 0 || first_has_memory);
    for (Index j = 0; j < rows_per_block; ++j) rows.col(memory_rows + j).setConstant(s * rows_per_block + j < valid_rows);
  }
  return mask;
}

// ================================================================================================
// lstm.h
// ================================================================================================

template <class T>
LstmCellT<T>::LstmCellT(Index in, Index hidden, std::mt19937_64& rng) : hidden_(hidden) {
  const double bound = 1.0 / std::sqrt(static_cast<double>(hidden));
  input_ = LinearT<T>(in, 4 * hidden, rng);
  recurrent_ = LinearT<T>(hidden, 4 * hidden, rng);
  for (LinearT<T>* l : {&input_, &recurrent_}) {  // PyTorch's LSTM init bound is 1/sqrt(hidden) for all
    for (TensorT<T> p : {l->weight(), l->bias()}) {
      p.mutable_value() = uniform_param<T>(p.rows(), p.cols(), bound, rng).value();
    }
  }
}

template <class T>
LstmState<T> LstmCellT<T>::forward(const TensorT<T>& x, const LstmState<T>& state) const {
  const Index k = hidden_;
  const TensorT<T> gates = ad::add(input_.forward(x), recurrent_.forward(state.h));
  const TensorT<T> i = ad::sigmoid(ad::slice_cols(gates, 0, k));
  const TensorT<T> f = ad::sigmoid(ad::slice_cols(gates, k, k));
  const TensorT<T> g = ad::tanh(ad::slice_cols(gates, 2 * k, k));
  const TensorT<T> o = ad::sigmoid(ad::slice_cols(gates, 3 * k, k));
  const TensorT<T> c = ad::add(ad::mul(f, state.c), ad::mul(i, g));
  return {ad::mul(o, ad::tanh(c)), c};
}

template <class T>
LstmState<T> LstmCellT<T>::zero_state(Index rows) const {
  return {TensorT<T>::constant(rows, hidden_, T(0)), TensorT<T>::constant(rows, hidden_, T(0))};
}

template <class T>
void LstmCellT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  input_.collect(join_name(prefix, "input"), out);
  recurrent_.collect(join_name(prefix, "recurrent"), out);
}

template <class T>
AttentionalLstmDecoderT<T>::AttentionalLstmDecoderT(Index encoder_dim, Index hidden, Index devices, Index embed_dim,
                                                    Index attention_dim, std::mt19937_64& rng)
    : devices_(devices),
      embed_(devices + 1, embed_dim, rng),
      cell_(embed_dim + encoder_dim, hidden, rng),
      att_enc_(encoder_dim, attention_dim, rng, false),
      att_dec_(hidden, attention_dim, rng),
      att_v_(attention_dim, 1, rng, false),
      out_(hidden + encoder_dim, devices, rng) {}

template <class T>
typename AttentionalLstmDecoderT<T>::State AttentionalLstmDecoderT<T>::start(const TensorT<T>& encoder) const {
  return {cell_.zero_state(1), TensorT<T>::constant(1, encoder.cols(), T(0))};
}

template <class T>
TensorT<T> AttentionalLstmDecoderT<T>::project_encoder(const TensorT<T>& encoder) const {
  return att_enc_.forward(encoder);
}

template <class T>
TensorT<T> AttentionalLstmDecoderT<T>::step(const TensorT<T>& encoder, const TensorT<T>& enc_proj,
                                            int32_t previous_device, State& state) const {
  if (previous_device < -1 || previous_device >= devices_) {
    throw Error(fmt::format("AttentionalLstmDecoder: previous device {} outside [-1, {})", previous_device, devices_));
  }
  const TensorT<T> input = ad::concat_cols<T>({embed_.forward({previous_device + 1}), state.context});
  state.lstm = cell_.forward(input, state.lstm);
  // score[G,1] = v^T tanh(W_enc enc + W_dec h); attention weights over the G rows.
  const TensorT<T> scores = att_v_.forward(ad::tanh(ad::add(enc_proj, att_dec_.forward(state.lstm.h))));
  state.context = ad::matmul(ad::softmax_rows(ad::transpose(scores)), encoder);
  return out_.forward(ad::concat_cols<T>({state.lstm.h, state.context}));
}

template <class T>
TensorT<T> AttentionalLstmDecoderT<T>::forward(const TensorT<T>& encoder, const std::vector<int32_t>& devices) const {
  if (static_cast<Index>(devices.size()) != encoder.rows()) {
    throw Error(fmt::format("AttentionalLstmDecoder: {} devices for {} encoder rows", devices.size(), encoder.rows()));
  }
  const TensorT<T> enc_proj = project_encoder(encoder);
  State state = start(encoder);
  std::vector<TensorT<T>> logits;
  for (size_t t = 0; t < devices.size(); ++t) {
    logits.push_back(step(encoder, enc_proj, t == 0 ? -1 : devices[t - 1], state));
  }
  return ad::concat_rows(logits);
}

template <class T>
void AttentionalLstmDecoderT<T>::collect(const std::string& prefix, ParamList<T>& out) const {
  embed_.collect(join_name(prefix, "embed"), out);
  cell_.collect(join_name(prefix, "cell"), out);
  att_enc_.collect(join_name(prefix, "att_enc"), out);
  att_dec_.collect(join_name(prefix, "att_dec"), out);
  att_v_.collect(join_name(prefix, "att_v"), out);
  out_.collect(join_name(prefix, "out"), out);
}

#define PLACELAB_INSTANTIATE_LAYERS(T)                                 \
  template class LinearT<T>;                                           \
  template TensorT<T> activate(const TensorT<T>&, Activation);         \
  template class MlpT<T>;                                              \
  template class LayerNormT<T>;                                        \
  template class EmbeddingT<T>;                                        \
  template class FilmT<T>;                                             \
  template class GraphSageT<T>;                                        \
  template class GcnT<T>;                                              \
  template class MultiHeadAttentionT<T>;                               \
  template class TransformerXlBlockT<T>;                               \
  template TensorT<T> previous_segment_memory(const TensorT<T>&, Index); \
  template class LstmCellT<T>;                                         \
  template class AttentionalLstmDecoderT<T>;
PLACELAB_INSTANTIATE_LAYERS(float)
PLACELAB_INSTANTIATE_LAYERS(double)
#undef PLACELAB_INSTANTIATE_LAYERS

}  // namespace placelab::nn
