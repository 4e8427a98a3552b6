// The zoo's transformers of today (graphs/zoo/decoder.cpp): published parameter counts, op counts derived
// from the architectures, and what shards, experts and fused attention change and keep.
#include <catch2/catch.hpp>
#include <string>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::graphs;
using Catch::Matchers::Contains;

namespace {

double parameters(const Graph& g) { return g.stats().param_bytes / 4; }

double flops_of(const Graph& g, std::string_view type) {
  double total = 0;
  for (OpId op = 0; op < g.num_ops(); ++op)
    if (g.op_type(op) == type) total += g.flops(op);
  return total;
}

int count_of(const Graph& g, std::string_view type) {
  int n = 0;
  for (OpId op = 0; op < g.num_ops(); ++op) n += g.op_type(op) == type;
  return n;
}

std::string make_error(std::string_view model, const zoo::Params& params) {
  return testing::error_of([&] { zoo::make_model(model, params); });
}

}  // namespace

TEST_CASE("graphs::zoo: today's models have their published parameter counts, within 1%", "[graphs]") {
  SECTION("GPT-2 small (Radford et al. 2019): 124M, the released checkpoint's 124,439,808 exactly") {
    CHECK(parameters(zoo::make_model("gpt")) == 124439808);
  }
  SECTION("GPT-3 6.7B (Brown et al. 2020, table 2.1): 32 layers, 4096 wide, 32 heads, 2048 tokens") {
    Graph g = zoo::make_model("gpt", {{"layers", 32}, {"hidden", 4096}, {"heads", 32}, {"seq_len", 2048}});
    CHECK(parameters(g) == Approx(6.7e9).epsilon(0.01));
  }
  SECTION("Llama-2 (Touvron et al. 2023): 7B 6.74B, 13B 13.0B, 70B 69.0B with 8 key/value heads") {
    CHECK(parameters(zoo::make_model("llama")) == Approx(6.74e9).epsilon(0.01));
    Graph l13 = zoo::make_model("llama", {{"layers", 40}, {"hidden", 5120}, {"heads", 40},
                                          {"ffn", 13824}});
    CHECK(parameters(l13) == Approx(13.0e9).epsilon(0.01));
    Graph l70 = zoo::make_model("llama", {{"layers", 80}, {"hidden", 8192}, {"heads", 64}, {"kv_heads", 8},
                                          {"ffn", 28672}});
    CHECK(parameters(l70) == Approx(69.0e9).epsilon(0.01));
  }
  SECTION("Mixtral 8x7B (Jiang et al. 2024): 46.7B in all, 12.9B active per token") {
    Graph g = zoo::make_model("mixtral", {{"seq_len", 512}});
    CHECK(parameters(g) == Approx(46.7e9).epsilon(0.01));
    // A product costs 2 FLOPs per weight and token, so MatMul FLOPs per token / 2 are the weights a token
    // meets: every expert sees tokens x top_k / E tokens. The embedding is gathered, not multiplied.
    const double active = flops_of(g, "MatMul") / 512 / 2 + 32000.0 * 4096;
    CHECK(active == Approx(12.9e9).epsilon(0.01));
  }
  SECTION("ViT-B/16 (Dosovitskiy et al. 2021): torchvision's vit_b_16 has 86,567,656 and 17.56G multiply-adds") {
    Graph g = zoo::make_model("vit");
    CHECK(parameters(g) == 86567656);
    const double products = flops_of(g, "Conv2D") + flops_of(g, "MatMul") + flops_of(g, "BatchMatMul");
    CHECK(products / 2 == Approx(17.56e9).epsilon(0.01));
  }
}

TEST_CASE("graphs::zoo: decoder op counts follow the architecture", "[graphs]") {
  // GPT: ids, token Embedding, position ids, position Embedding, Add (5) and the causal mask (1); per layer
  // attention LayerNorm, qkv MatMul + BiasAdd, Split, BatchMatMul, Mul, Add (mask), Softmax, BatchMatMul,
  // output MatMul + BiasAdd, residual Add (12) and MLP LayerNorm, MatMul, BiasAdd, Gelu, MatMul, BiasAdd, Add (7);
  // head LayerNorm, MatMul, Softmax (3).
  CHECK(zoo::make_model("gpt").num_ops() == 5 + 1 + 12 * 19 + 3);
  // Fused attention: one FlashAttention op instead of 5, no mask.
  CHECK(zoo::make_model("gpt", {{"flash", 1}}).num_ops() == 5 + 12 * 15 + 3);
  // Llama: ids, Embedding; per layer RMSNorm, q MatMul, Rotary, k MatMul, Rotary, v MatMul, FlashAttention,
  // output MatMul, Add (9) and RMSNorm, gate MatMul, Silu, up MatMul, Mul, down MatMul, Add (7); head (3).
  CHECK(zoo::make_model("llama", {{"seq_len", 256}}).num_ops() == 2 + 32 * 16 + 3);
  // With s shards: norm, s x 7, AddN, Add for attention; norm, s x 5, AddN, Add for the feed-forward.
  CHECK(zoo::make_model("llama", {{"seq_len", 256}, {"layers", 4}, {"shards", 4}}).num_ops() ==
        2 + 4 * (3 + 7 * 4 + 3 + 5 * 4) + 3);
  // Mixtral: attention (9); RMSNorm, router MatMul and Softmax, TopK, Dispatch, 8 experts x 5, Combine, Add.
  CHECK(zoo::make_model("mixtral", {{"seq_len", 256}}).num_ops() == 2 + 32 * (9 + 7 + 8 * 5) + 3);
  // ViT: images, Conv2D, class token, position Add (4); per layer as GPT's without the mask (18); head
  // LayerNorm, MatMul, BiasAdd, Softmax (4).
  CHECK(zoo::make_model("vit").num_ops() == 4 + 12 * 18 + 4);
}

TEST_CASE("graphs::zoo: shards split the work of a layer without changing it", "[graphs]") {
  for (std::string model : {"gpt", "llama"}) {
    INFO(model);
    zoo::Params base = {{"seq_len", 128}, {"layers", 2}, {"hidden", 512}, {"heads", 8}, {"ffn", 2048}};
    if (model == "llama") base["kv_heads"] = 4;  // grouped-query attention, one key/value head per shard
    zoo::Params split = base;
    split["shards"] = 4;
    Graph one = zoo::make_model(model, base), four = zoo::make_model(model, split);
    CHECK(four.stats().param_bytes == one.stats().param_bytes);
    CHECK(flops_of(four, "MatMul") == flops_of(one, "MatMul"));
    // The only new work: two AddN per layer, each summing 4 partial [1, 128, 512] outputs.
    CHECK(count_of(four, "AddN") == 2 * 2);
    CHECK(four.stats().flops - one.stats().flops == Approx(2 * 2 * 3 * 128.0 * 512));
    // Each attention shard reads the normalised input and holds a quarter of the heads.
    CHECK(four.num_ops() > one.num_ops());
  }
}

TEST_CASE("graphs::zoo: experts receive their tokens as edges", "[graphs]") {
  Graph g = zoo::make_model("mixtral", {{"seq_len", 64}, {"layers", 2}, {"batch", 2}});
  const OpId dispatch = g.find_op("layer0/moe/Dispatch");
  REQUIRE(dispatch >= 0);
  // 128 tokens x top 2 / 8 experts = 32 tokens of 4096 floats to each expert's gate and up projections.
  int expert_inputs = 0;
  for (EdgeId e : g.out_edges(dispatch)) {
    CHECK(g.edge_bytes(e) == 32 * 4096 * 4.0);
    ++expert_inputs;
  }
  CHECK(expert_inputs == 8 * 2);
  const OpId combine = g.find_op("layer0/moe/Combine");
  CHECK(g.in_edges(combine).size() == 8 + 1);  // every expert and the router's choice
  // The same routing with top 1: half the tokens per expert, half the expert FLOPs.
  Graph top1 = zoo::make_model("mixtral", {{"seq_len", 64}, {"layers", 2}, {"batch", 2}, {"top_k", 1}});
  auto expert_flops = [](const Graph& x) {
    double total = 0;
    for (OpId op = 0; op < x.num_ops(); ++op)
      if (x.op_name(op).find("/expert") != std::string::npos) total += x.flops(op);
    return total;
  };
  CHECK(expert_flops(top1) == Approx(expert_flops(g) / 2));
  // Switch-style: experts on every other layer of GPT, top 1.
  Graph sw = zoo::make_model("gpt", {{"layers", 4}, {"experts", 4}, {"moe_every", 2}, {"seq_len", 64}});
  CHECK(count_of(sw, "Dispatch") == 2);
  CHECK(sw.find_op("layer1/moe/Dispatch") >= 0);
  CHECK(sw.find_op("layer0/moe/Dispatch") < 0);
}

TEST_CASE("graphs::zoo: fused attention does the unfused work without holding the scores", "[graphs]") {
  const zoo::Params p = {{"layers", 2}, {"seq_len", 256}};
  zoo::Params fused = p;
  fused["flash"] = 1;
  Graph plain = zoo::make_model("gpt", p), flash = zoo::make_model("gpt", fused);
  CHECK(flash.stats().flops == Approx(plain.stats().flops).epsilon(1e-12));
  CHECK(flash.stats().param_bytes == plain.stats().param_bytes);
  // Unfused, each layer holds four [1, 12, 256, 256] score tensors (scores, scaled, masked, probabilities) where
  // the fused op holds none (its output is the context's size), and the mask is gone.
  CHECK(plain.stats().output_bytes - flash.stats().output_bytes == 2 * (4 * 12 * 256 * 256 * 4.0) + 256 * 256 * 4.0);
}

TEST_CASE("graphs::zoo: a Llama-2-7B training step holds weights and Adam's moments", "[graphs]") {
  Graph g = expand_training(zoo::make_model("llama", {{"seq_len", 128}}));
  // Weights (4 bytes) and two moments (8 bytes) per parameter are resident; gradients are outputs of the
  // backward ops, alive until their update.
  CHECK(g.stats().param_bytes == Approx(12 * 6.74e9).epsilon(0.01));
  CHECK(g.stats().update_ops == 1 + 32 * 9 + 2);  // every op with weights: embedding, 7 products, 2 norms; head
}

TEST_CASE("graphs::zoo: inconsistent transformer shapes are errors naming both values", "[graphs]") {
  CHECK_THAT(make_error("llama", {{"heads", 32}, {"kv_heads", 5}}),
             Contains("heads (32) must be a multiple of kv_heads (5)"));
  CHECK_THAT(make_error("llama", {{"shards", 3}}), Contains("heads (32) must be a multiple of shards (3)"));
  CHECK_THAT(make_error("mixtral", {{"shards", 16}}), Contains("kv_heads (8) must be a multiple of shards (16)"));
  CHECK_THAT(make_error("gpt", {{"ffn", 1000}, {"shards", 3}, {"heads", 12}}),
             Contains("ffn (1000) must be a multiple of shards (3)"));
  CHECK_THAT(make_error("mixtral", {{"top_k", 9}}), Contains("top_k (9) exceeds experts (8)"));
  CHECK_THAT(make_error("vit", {{"patch", 15}}), Contains("image_size (224) must be a multiple of patch (15)"));
  CHECK_THAT(make_error("gpt", {{"kv_heads", 4}}), Contains("unknown param \"kv_heads\""));
}

TEST_CASE("graphs::zoo: micro-batches are copies of the model sharing one set of weights", "[graphs]") {
  for (std::string model : {"gpt", "llama", "mixtral", "vit"}) {
    INFO(model);
    zoo::Params whole = {{"layers", 2}, {"batch", 4}};
    if (model != "vit") whole["seq_len"] = 64;
    zoo::Params split = whole;
    split["micro_batches"] = 4;
    Graph one = zoo::make_model(model, whole), four = zoo::make_model(model, split);
    const GraphStats s1 = one.stats(), s4 = four.stats();
    // The same work and weights; the weights' ops hold nothing beyond their parameters.
    CHECK(s4.param_bytes == s1.param_bytes);
    CHECK(s4.flops == Approx(s1.flops).epsilon(1e-12));
    // GPT's position embedding [T, H] (and its ids [T]) is looked up by every micro-batch.
    const double positions = model == "gpt" ? 3 * (64 * 768 + 64) * 4.0 : 0;
    CHECK(s4.output_bytes == Approx(s1.output_bytes + positions).epsilon(1e-12));
    // One weight op per op that owned weights, read by that op's copy in each micro-batch.
    int owners = 0, weight_ops = 0;
    for (OpId op = 0; op < one.num_ops(); ++op) owners += one.param_bytes(op) > 0;
    for (OpId op = 0; op < four.num_ops(); ++op) {
      if (four.param_bytes(op) == 0) continue;
      ++weight_ops;
      CHECK(four.op_type(op) == "Variable");
      CHECK(four.output_bytes(op) == 0);
      CHECK(four.out_edges(op).size() == 4);
      for (EdgeId e : four.out_edges(op)) CHECK(four.edge_bytes(e) == four.param_bytes(op));
    }
    CHECK(weight_ops == owners);
    CHECK(four.num_ops() == 4 * (one.num_ops() - 1 * (model == "gpt")) + (model == "gpt") + owners);
    // A training step updates each weight once, from the gradients of all four micro-batches.
    Graph t1 = expand_training(one), t4 = expand_training(four);
    CHECK(t4.stats().update_ops == t1.stats().update_ops);
    CHECK(t4.stats().param_bytes == t1.stats().param_bytes);
  }
  const OpId w = zoo::make_model("llama", {{"micro_batches", 2}, {"batch", 2}, {"seq_len", 64}, {"layers", 1}})
                     .find_op("layer0/attention/query/MatMul/weights");
  CHECK(w >= 0);
  CHECK_THAT(make_error("llama", {{"micro_batches", 3}, {"batch", 4}}),
             Contains("batch (4) must be a multiple of micro_batches (3)"));
}
