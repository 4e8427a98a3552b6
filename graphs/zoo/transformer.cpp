// Transformer models of the zoo: the BERT encoder and Transformer-XL (one segment with its memory).
// Both share the residual sublayer plumbing, the attention-probability ops and the feed-forward layer.
// Layer (block) indices: transformer layer l is block l (embeddings join block 0); the pooler or
// the adaptive softmax is block `layers`.
#include <cmath>

#include "graphs/zoo/families.h"
#include "graphs/zoo/net_builder.h"

namespace placelab::graphs::zoo {

namespace {

// B = batch, T = sequence (segment) length, M = memory length, H = hidden, N = heads, D = H / N.

struct Dims {
  int64_t batch, seq, hidden, heads;
  int64_t head_dim() const { return hidden / heads; }
  /** [B, N, rows, D]: per-head view of a [B, rows, H] tensor. */
  Shape per_head(int64_t rows) const { return {batch, heads, rows, head_dim()}; }
};

Dims dims_of(const Args& args) {
  Dims d{args.integer("batch"), args.integer("seq_len"), args.integer("hidden"), args.integer("heads")};
  if (d.hidden % d.heads != 0)
    args.fail(fmt::format("hidden ({}) must be a multiple of heads ({})", d.hidden, d.heads));
  return d;
}

/** softmax(scores / sqrt(D) + mask), named "attention/..." so expert rules can find it. */
Tensor attention_probs(NetBuilder& b, const Tensor& scores, const Tensor& mask) {
  return b.softmax(b.add(b.scale(scores), mask));
}

/** x + sublayer output, then LayerNorm (post-norm, as BERT and Transformer-XL). */
Tensor residual_norm(NetBuilder& b, const Tensor& x, const Tensor& y) { return b.layer_norm(b.add(x, y)); }

/** Position-wise feed-forward sublayer with its residual and norm. */
Tensor feed_forward(NetBuilder& b, const Tensor& x, int64_t inner, std::string_view activation, double act_flops) {
  auto s = b.scope("ffn");
  Tensor y = b.unary(activation, b.dense(x, inner), act_flops);
  return residual_norm(b, x, b.dense(y, x.dim(-1)));
}

/** BERT's self-attention sublayer with its residual and norm. */
Tensor bert_attention(NetBuilder& b, const Dims& d, const Tensor& x, const Tensor& mask) {
  auto s = b.scope("attention");
  auto projection = [&](std::string_view name) {
    return NetBuilder::view(b.in_scope(name, [&] { return b.dense(x, d.hidden); }), d.per_head(d.seq));
  };
  Tensor q = projection("query");
  Tensor k = projection("key");
  Tensor v = projection("value");
  Tensor probs = attention_probs(b, b.batch_matmul(q, k, true), mask);  // [B, N, T, T]
  Tensor context = NetBuilder::view(b.batch_matmul(probs, v), {d.batch, d.seq, d.hidden});
  return residual_norm(b, x, b.in_scope("output", [&] { return b.dense(context, d.hidden); }));
}

/**
 * Transformer-XL's adaptive softmax (Grave et al. 2017) with its WikiText-103 cutoffs 20000, 40000
 * and 200000 and projections tied to the embedding table: a head over the frequent words plus one
 * logit per tail cluster for every token, and per tail cluster the logits of the tokens whose word
 * falls in it. Which tokens those are depends on the data; each cluster gets the share of tokens
 * that Zipf's law gives its ranks, (H(end) - H(begin)) / H(vocab), H the harmonic number.
 */
void adaptive_softmax(NetBuilder& b, const Tensor& x, int64_t vocab) {
  constexpr double kEulerGamma = 0.5772156649;
  auto harmonic = [](int64_t n) { return std::log(static_cast<double>(n)) + kEulerGamma; };
  std::vector<int64_t> bounds = {0};
  for (int64_t cutoff : {20000, 40000, 200000})
    if (cutoff < vocab) bounds.push_back(cutoff);
  bounds.push_back(vocab);
  const int64_t tails = static_cast<int64_t>(bounds.size()) - 2, hidden = x.dim(-1);
  const int64_t tokens = x.elements() / hidden;
  // A projection tied to `rows` rows of the embedding table: it reads them but owns no parameters,
  // which stay counted once, on the Embedding op; its bias (and the head's cluster weights) it owns.
  auto tied_logits = [&](const Tensor& h, int64_t rows, int64_t own_rows) {
    Shape out = h.shape;
    out.back() = rows;
    const double flops = 2.0 * static_cast<double>(h.elements() * rows);
    Tensor logits = b.op({.type = "MatMul",
                          .out = std::move(out),
                          .flops = flops,
                          .param_elements = static_cast<double>(own_rows * hidden),
                          .bytes_read = h.bytes() + kFloatBytes * static_cast<double>(rows * hidden),
                          .gemm = {.batch = 1, .m = h.elements() / hidden, .n = rows, .k = hidden}},
                         {h});
    return b.softmax(b.bias_add(logits));
  };
  b.in_scope("head", [&] { return tied_logits(x, bounds[1] + tails, tails); });
  for (int64_t i = 1; i <= tails; ++i) {
    auto s = b.scope("tail{}", i);
    const double share = (harmonic(bounds[i + 1]) - harmonic(bounds[i])) / harmonic(vocab);
    const auto rows = std::max<int64_t>(1, std::llround(share * static_cast<double>(tokens)));
    Tensor selected = b.op({.type = "Gather", .out = {rows, hidden}}, {x});  // this cluster's tokens
    tied_logits(selected, bounds[i + 1] - bounds[i], 0);
  }
}

}  // namespace

Graph build_bert(const Args& args) {
  const Dims d = dims_of(args);
  const int32_t layers = args.int32("layers");
  constexpr int64_t kMaxPositions = 512, kTokenTypes = 2;
  NetBuilder b("bert");
  b.set_layer(0);
  Tensor x = b.in_scope("embeddings", [&] {
    Tensor words = b.in_scope("word", [&] {
      return b.embedding(b.input("input_ids", {d.batch, d.seq}), args.integer("vocab"), d.hidden);
    });
    Tensor types = b.in_scope("token_type", [&] {
      return b.embedding(b.input("token_type_ids", {d.batch, d.seq}), kTokenTypes, d.hidden);
    });
    Tensor positions = b.in_scope(
        "position", [&] { return b.embedding(b.constant("position_ids", {d.seq}), kMaxPositions, d.hidden); });
    Tensor sum = b.add(words, types);
    return b.layer_norm(b.add(sum, positions));
  });
  const Tensor mask = b.input("attention_mask", {d.batch, 1, 1, d.seq});
  for (int32_t l = 0; l < layers; ++l) {
    b.set_layer(l);
    auto s = b.scope("layer{}", l);
    x = bert_attention(b, d, x, mask);
    x = feed_forward(b, x, 4 * d.hidden, "Gelu", cost::kGelu);
  }
  b.set_layer(layers);
  b.in_scope("pooler", [&] { return b.tanh(b.dense(NetBuilder::view(x, {d.batch, d.hidden}), d.hidden)); });
  return std::move(b).build();
}

Graph build_transformer_xl(const Args& args) {
  const Dims d = dims_of(args);
  const int32_t layers = args.int32("layers");
  const int64_t mem = args.integer("mem_len"), vocab = args.integer("vocab"), keys = mem + d.seq;
  NetBuilder b("transformer_xl");
  b.set_layer(0);
  Tensor x = b.in_scope("embedding", [&] {
    return b.scale(b.embedding(b.input("ids", {d.batch, d.seq}), vocab, d.hidden));  // times sqrt(H)
  });
  // Sinusoids of the relative distances M + T - 1 ... 0, shared by all layers.
  const Tensor positions = b.op({.type = "PositionalEncoding",
                                 .name = "relative_positions",
                                 .out = {keys, d.hidden},
                                 .flops = cost::kTranscendental * static_cast<double>(keys * d.hidden)},
                                {});
  const Tensor mask = b.constant("causal_mask", {d.seq, keys});
  for (int32_t l = 0; l < layers; ++l) {
    b.set_layer(l);
    auto s = b.scope("layer{}", l);
    Tensor context = b.in_scope("attention", [&] {
      Tensor keys_in = x;
      if (mem > 0) keys_in = b.concat({b.input("memory", {d.batch, mem, d.hidden}), x}, 1);
      std::vector<Tensor> qkv = b.split(b.in_scope("qkv", [&] { return b.matmul(keys_in, 3 * d.hidden); }), 3);
      Tensor q = NetBuilder::view(qkv[0], d.per_head(d.seq));  // queries of the segment only
      Tensor k = NetBuilder::view(qkv[1], d.per_head(keys));
      Tensor v = NetBuilder::view(qkv[2], d.per_head(keys));
      Tensor r = b.in_scope("r_net", [&] { return b.matmul(positions, d.hidden); });
      r = NetBuilder::view(r, {1, d.heads, keys, d.head_dim()});
      // Content term (q + u) k^T and position term (q + v) r^T, with learned biases u and v.
      auto biased_query = [&](std::string_view name) {
        return b.op({.type = "BiasAdd",
                     .name = name,
                     .out = q.shape,
                     .flops = static_cast<double>(q.elements()),
                     .param_elements = static_cast<double>(d.hidden)},
                    {q});
      };
      Tensor content = b.batch_matmul(biased_query("r_w_bias"), k, true);
      Tensor position = b.batch_matmul(biased_query("r_r_bias"), r, true);
      position = b.op({.type = "RelShift", .out = position.shape}, {position});
      Tensor probs = attention_probs(b, b.add(content, position), mask);  // [B, N, T, M + T]
      Tensor heads = NetBuilder::view(b.batch_matmul(probs, v), {d.batch, d.seq, d.hidden});
      return b.in_scope("output", [&] { return b.matmul(heads, d.hidden); });
    });
    x = residual_norm(b, x, context);
    x = feed_forward(b, x, args.integer("inner"), "Relu", cost::kElementwise);
  }
  b.set_layer(layers);
  {
    auto s = b.scope("adaptive_softmax");
    adaptive_softmax(b, x, vocab);
  }
  return std::move(b).build();
}

}  // namespace placelab::graphs::zoo
