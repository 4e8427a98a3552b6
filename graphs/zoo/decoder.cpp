// Today's transformers: the GPT (Radford et al. 2019, Brown et al. 2020) and Llama (Touvron et al. 2023)
// decoders, mixture-of-experts feed-forward layers (Fedus et al. 2022, Switch; Jiang et al. 2024, Mixtral),
// and the ViT encoder (Dosovitskiy et al. 2021). All are stacks of pre-norm blocks:
// x + attention(norm(x)), then x + ffn(norm(x)).
// `shards` splits every attention and dense feed-forward sublayer Megatron-style (Shoeybi et al. 2019):
// shard g holds heads [g N/s, (g+1) N/s) and a column block of the feed-forward, and an AddN sums the
// shards' partial outputs (the all-reduce of tensor parallelism), so a placer can spread one layer.
// Layer (block) indices: the embeddings join block 0, transformer layer l is block l, the head is `layers`.
#include <algorithm>
#include <optional>

#include "graphs/zoo/families.h"
#include "graphs/zoo/net_builder.h"

namespace placelab::graphs::zoo {

namespace {

// B = batch, T = sequence, H = hidden, N = query heads, K = key/value heads, D = H / N (head size),
// F = feed-forward units, E = experts, s = shards.

constexpr double kRmsNorm = 4;        // square, mean, reciprocal square root, scale
constexpr double kRotary = 3;         // x cos + rotate(x) sin
constexpr double kSilu = cost::kTranscendental + 1;

enum class Family { gpt, llama };

struct Config {
  Family family;
  int64_t batch, seq, hidden, heads, kv_heads, ffn, experts, top_k, moe_every, shards;
  int64_t micro_batches;  // `batch` is the size of one of them
  bool causal, flash;
  int64_t head_dim() const { return hidden / heads; }
  bool moe_layer(int32_t l) const { return experts > 0 && (l + 1) % moe_every == 0; }
};

void require_multiple(const Args& args, std::string_view what, int64_t value, std::string_view of_what, int64_t of) {
  if (value % of != 0) args.fail(fmt::format("{} ({}) must be a multiple of {} ({})", what, value, of_what, of));
}

Config config_of(const Args& args, Family family, bool causal) {
  Config c{.family = family,
           .batch = args.integer("batch"),
           .seq = 0,
           .hidden = args.integer("hidden"),
           .heads = args.integer("heads"),
           .kv_heads = args.integer("heads"),
           .ffn = args.integer("ffn"),
           .experts = 0,
           .top_k = 1,
           .moe_every = 1,
           .shards = args.integer("shards"),
           .micro_batches = args.integer("micro_batches"),
           .causal = causal,
           .flash = false};
  if (c.ffn == 0) c.ffn = 4 * c.hidden;
  if (args.model() != "vit") {  // ViT's sequence is its patches; it has no decoder-only options
    c.seq = args.integer("seq_len");
    if (family == Family::llama && args.integer("kv_heads") > 0) c.kv_heads = args.integer("kv_heads");
    c.experts = args.integer("experts");
    c.top_k = args.integer("top_k");
    c.moe_every = args.integer("moe_every");
    c.flash = args.integer("flash") != 0;
    if (c.experts > 0 && c.top_k > c.experts)
      args.fail(fmt::format("top_k ({}) exceeds experts ({})", c.top_k, c.experts));
  }
  require_multiple(args, "batch", c.batch, "micro_batches", c.micro_batches);
  c.batch /= c.micro_batches;
  require_multiple(args, "hidden", c.hidden, "heads", c.heads);
  require_multiple(args, "heads", c.heads, "kv_heads", c.kv_heads);
  require_multiple(args, "heads", c.heads, "shards", c.shards);
  require_multiple(args, "kv_heads", c.kv_heads, "shards", c.shards);
  require_multiple(args, "ffn", c.ffn, "shards", c.shards);
  return c;
}

/** Runs `f(g)` for every shard g, in scope "shard{g}" when there are several; returns their outputs. */
template <class F>
std::vector<Tensor> per_shard(NetBuilder& b, int64_t shards, F&& f) {
  std::vector<Tensor> out;
  for (int64_t g = 0; g < shards; ++g) {
    std::optional<NetBuilder::Scope> s;
    if (shards > 1) s.emplace(b.scope("shard{}", g));
    out.push_back(f());
  }
  return out;
}

/** The sum of the shards' partial outputs (one op: the all-reduce), or the only one. */
Tensor reduce_shards(NetBuilder& b, std::span<const Tensor> partial) {
  return partial.size() == 1 ? partial.front() : b.in_scope("allreduce", [&] { return b.add_n(partial); });
}

Tensor norm(NetBuilder& b, const Config& c, const Tensor& x) {
  if (c.family == Family::gpt) return b.layer_norm(x);
  return b.op({.type = "RMSNorm",
               .out = x.shape,
               .flops = kRmsNorm * static_cast<double>(x.elements()),
               .param_elements = static_cast<double>(x.dim(-1))},
              {x});
}

/** A projection of x [..., H] to `units`; GPT's have a bias, Llama's do not. */
Tensor project(NetBuilder& b, const Config& c, std::string_view name, const Tensor& x, int64_t units) {
  return b.in_scope(name, [&] { return b.dense(x, units, c.family == Family::gpt); });
}

/**
 * Attention of one shard's heads: q [B, n, T, D], k and v [B, kv, T, D] (grouped-query: n / kv query heads
 * read each key/value head). Unfused: scores, scale, causal mask, softmax and weighted sum as separate ops
 * holding the [B, n, T, T] scores; fused (FlashAttention, Dao et al. 2022): one op with the same FLOPs that
 * never holds them. Returns [B, T, n D].
 */
Tensor attend(NetBuilder& b, const Config& c, const Tensor& q, const Tensor& k, const Tensor& v,
              const std::optional<Tensor>& mask) {
  const int64_t n = q.dim(1), t = q.dim(2), d = q.dim(3), scores = c.batch * n * t * t;
  const Shape out = {c.batch, t, n * d};
  if (c.flash) {
    // The unfused ops' FLOPs: two products, the scale, the mask and the softmax.
    const double flops = 4.0 * static_cast<double>(scores * d) +
                         (2 + cost::kSoftmax - (c.causal ? 0 : 1)) * static_cast<double>(scores);
    return b.op({.type = "FlashAttention", .out = out, .flops = flops}, {q, k, v});
  }
  return b.in_scope("attention", [&] {
    Tensor s = b.scale(b.batch_matmul(q, k, true));
    if (mask) s = b.add(s, *mask);
    return NetBuilder::view(b.batch_matmul(b.softmax(s), v), out);
  });
}

/** Rotary position embedding of q or k (Su et al. 2021): an element-wise rotation by the position. */
Tensor rotary(NetBuilder& b, const Tensor& x) {
  return b.op({.type = "Rotary", .out = x.shape, .flops = kRotary * static_cast<double>(x.elements())}, {x});
}

/** x + self-attention(norm(x)), its heads split over the shards. */
Tensor attention_block(NetBuilder& b, const Config& c, const Tensor& x, const std::optional<Tensor>& mask) {
  auto s = b.scope("attention");
  const int64_t n = c.heads / c.shards, kv = c.kv_heads / c.shards, d = c.head_dim(), t = x.dim(1);
  const Tensor h = norm(b, c, x);
  std::vector<Tensor> partial = per_shard(b, c.shards, [&] {
    Tensor q, k, v;
    if (c.family == Family::gpt) {  // GPT-2's fused c_attn projection, then a split
      std::vector<Tensor> qkv = b.split(project(b, c, "qkv", h, 3 * n * d), 3);
      q = qkv[0], k = qkv[1], v = qkv[2];
    } else {
      q = rotary(b, project(b, c, "query", h, n * d));
      k = rotary(b, project(b, c, "key", h, kv * d));
      v = project(b, c, "value", h, kv * d);
    }
    Tensor context = attend(b, c, NetBuilder::view(q, {c.batch, n, t, d}), NetBuilder::view(k, {c.batch, kv, t, d}),
                            NetBuilder::view(v, {c.batch, kv, t, d}), mask);
    return b.in_scope("output", [&] { return b.matmul(context, c.hidden); });  // row-parallel: a partial sum
  });
  Tensor y = reduce_shards(b, partial);
  if (c.family == Family::gpt) y = b.in_scope("output", [&] { return b.bias_add(y); });
  return b.add(x, y);
}

/** One feed-forward network on x [..., H] with `units` hidden units: GELU MLP (GPT) or SwiGLU (Llama). */
Tensor mlp(NetBuilder& b, const Config& c, const Tensor& x, int64_t units, bool output_bias) {
  if (c.family == Family::gpt) {
    Tensor y = b.unary("Gelu", project(b, c, "fc", x, units), cost::kGelu);
    return b.in_scope("proj", [&] { return b.dense(y, c.hidden, output_bias); });
  }
  Tensor gate = b.unary("Silu", project(b, c, "gate", x, units), kSilu);
  Tensor y = b.mul(gate, project(b, c, "up", x, units));
  return project(b, c, "down", y, c.hidden);
}

/** x + ffn(norm(x)) with a dense feed-forward, its columns split over the shards. */
Tensor dense_ffn_block(NetBuilder& b, const Config& c, const Tensor& x) {
  auto s = b.scope("ffn");
  const Tensor h = norm(b, c, x);
  std::vector<Tensor> partial = per_shard(b, c.shards, [&] { return mlp(b, c, h, c.ffn / c.shards, c.shards == 1); });
  Tensor y = reduce_shards(b, partial);
  if (c.family == Family::gpt && c.shards > 1) y = b.in_scope("proj", [&] { return b.bias_add(y); });
  return b.add(x, y);
}

/**
 * x + moe(norm(x)): a router (MatMul, Softmax, TopK) sends each token to its top_k experts; one Dispatch op
 * gathers every expert's tokens, each expert is a feed-forward network of its own ops, and a Combine op sums
 * their outputs weighted by the router. Routing is balanced: each expert receives tokens x top_k / E of them
 * (rounded up), and the edges from Dispatch to an expert and from it to Combine carry those tokens.
 */
Tensor moe_ffn_block(NetBuilder& b, const Config& c, const Tensor& x) {
  auto s = b.scope("moe");
  const Tensor h = norm(b, c, x);
  const int64_t tokens = h.elements() / c.hidden, per_expert = (tokens * c.top_k + c.experts - 1) / c.experts;
  const Tensor probs = b.in_scope("router", [&] { return b.softmax(b.matmul(h, c.experts)); });
  const Tensor top = b.op({.type = "TopK",
                           .out = {tokens, 2 * c.top_k},  // weights and expert ids
                           .flops = static_cast<double>(tokens * c.experts * c.top_k)},
                          {probs});
  const Tensor routed = b.op({.type = "Dispatch", .out = {c.experts * per_expert, c.hidden}}, {h, top});
  std::vector<Tensor> inputs = {top};
  for (int64_t e = 0; e < c.experts; ++e) {
    auto es = b.scope("expert{}", e);
    inputs.push_back(mlp(b, c, NetBuilder::view(routed, {per_expert, c.hidden}), c.ffn, true));
  }
  const Tensor y = b.op({.type = "Combine",
                         .out = x.shape,
                         .flops = 2.0 * static_cast<double>(tokens * c.top_k * c.hidden)},
                        inputs);
  return b.add(x, y);
}

/** `f(r)` in repeat r for every micro-batch r (NetBuilder::repeat: they share the weights). */
template <class F>
void per_micro_batch(NetBuilder& b, const Config& c, F&& f) {
  for (int64_t r = 0; r < c.micro_batches; ++r) {
    auto rep = b.repeat(r, c.micro_batches);
    f(r);
  }
}

/** The blocks, layer by layer; in each layer every micro-batch's `xs[r]` passes through its own copy. */
void decoder_layers(NetBuilder& b, const Config& c, std::vector<Tensor>& xs, int32_t layers,
                    const std::optional<Tensor>& mask) {
  for (int32_t l = 0; l < layers; ++l) {
    b.set_layer(l);
    auto s = b.scope("layer{}", l);
    per_micro_batch(b, c, [&](int64_t r) {
      Tensor x = attention_block(b, c, xs[r], mask);
      xs[r] = c.moe_layer(l) ? moe_ffn_block(b, c, x) : dense_ffn_block(b, c, x);
    });
  }
}

/** Logits [B, T, V] and the loss's softmax; `own` false: the projection is tied to the embedding table. */
void lm_head(NetBuilder& b, const Config& c, const Tensor& x, int64_t vocab, bool own) {
  auto s = b.scope("head");
  const Tensor h = norm(b, c, x);
  const int64_t rows = h.elements() / c.hidden;
  Shape out = h.shape;
  out.back() = vocab;
  const double weights = static_cast<double>(vocab * c.hidden);
  const Tensor logits = b.op({.type = "MatMul",
                              .out = std::move(out),
                              .flops = 2.0 * static_cast<double>(rows) * weights,
                              .param_elements = own ? weights : 0,
                              .bytes_read = h.bytes() + kFloatBytes * weights,
                              .gemm = {.batch = 1, .m = rows, .n = vocab, .k = c.hidden}},
                             {h});
  b.softmax(logits);
}

std::optional<Tensor> causal_mask(NetBuilder& b, const Config& c) {
  if (!c.causal || c.flash) return std::nullopt;  // a fused kernel masks as it goes
  return b.constant("causal_mask", {c.seq, c.seq});
}

}  // namespace

namespace {

/** GPT or Llama: the token embedding (GPT adds learned positions), the blocks and the LM head. */
Graph build_decoder(const Args& args, Family family) {
  const Config c = config_of(args, family, true);
  const int32_t layers = args.int32("layers");
  const int64_t vocab = args.integer("vocab");
  NetBuilder b(std::string(args.model()));
  b.set_layer(0);
  std::vector<Tensor> xs(static_cast<size_t>(c.micro_batches));
  per_micro_batch(b, c, [&](int64_t r) {
    auto s = b.scope("embeddings");
    xs[r] = b.in_scope("token", [&] { return b.embedding(b.input("input_ids", {c.batch, c.seq}), vocab, c.hidden); });
    if (family == Family::llama) return;  // its positions are rotations inside the attention
    Tensor positions = b.in_scope(
        "position", [&] { return b.embedding(b.constant("position_ids", {c.seq}), c.seq, c.hidden); });
    xs[r] = b.add(xs[r], positions);
  });
  decoder_layers(b, c, xs, layers, causal_mask(b, c));
  b.set_layer(layers);
  // GPT-2's head is tied to the token embedding; Llama's has weights of its own.
  per_micro_batch(b, c, [&](int64_t r) { lm_head(b, c, xs[r], vocab, family == Family::llama); });
  return std::move(b).build();
}

}  // namespace

Graph build_gpt(const Args& args) { return build_decoder(args, Family::gpt); }

Graph build_llama(const Args& args) { return build_decoder(args, Family::llama); }

Graph build_vit(const Args& args) {
  const int64_t image = args.integer("image_size"), patch = args.integer("patch");
  if (image % patch != 0) args.fail(fmt::format("image_size ({}) must be a multiple of patch ({})", image, patch));
  Config c = config_of(args, Family::gpt, false);
  const int64_t grid = image / patch;
  c.seq = grid * grid + 1;  // the patches and the class token
  const int32_t layers = args.int32("layers");
  NetBuilder b("vit");
  b.set_layer(0);
  std::vector<Tensor> xs(static_cast<size_t>(c.micro_batches));
  per_micro_batch(b, c, [&](int64_t r) {
    auto s = b.scope("embeddings");
    Tensor patches = b.conv2d(b.input("images", {c.batch, image, image, 3}), c.hidden, patch, patch, patch,
                              Padding::valid, 1, true);
    Tensor tokens = b.op({.type = "Concat",
                          .name = "class_token",
                          .out = {c.batch, c.seq, c.hidden},
                          .param_elements = static_cast<double>(c.hidden)},
                         {NetBuilder::view(patches, {c.batch, grid * grid, c.hidden})});
    xs[r] = b.op({.type = "Add",
                  .name = "position",
                  .out = tokens.shape,
                  .flops = static_cast<double>(tokens.elements()),
                  .param_elements = static_cast<double>(c.seq * c.hidden)},
                 {tokens});
  });
  decoder_layers(b, c, xs, layers, std::nullopt);
  b.set_layer(layers);
  per_micro_batch(b, c, [&](int64_t r) {
    auto s = b.scope("head");
    Tensor cls = NetBuilder::view(b.layer_norm(xs[r]), {c.batch, c.hidden});  // the class token's features
    b.softmax(b.dense(cls, args.integer("classes")));
  });
  return std::move(b).build();
}

}  // namespace placelab::graphs::zoo
