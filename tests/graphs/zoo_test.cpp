#include "graphs/zoo/zoo.h"

#include <fmt/format.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "graphs/error.h"
#include "graphs/training.h"

using namespace placelab;
using namespace placelab::graphs;
using Catch::Matchers::Contains;

namespace {

/** Sum over ops of a predicate-selected quantity. */
template <class Pred>
double sum_flops(const Graph& g, Pred keep) {
  double total = 0;
  for (OpId op = 0; op < g.num_ops(); ++op)
    if (keep(op)) total += g.flops(op);
  return total;
}

/** Multiply-adds of the contractions (convolutions and matrix products), as papers count them. */
double multiply_adds(const Graph& g) {
  return sum_flops(g,
                   [&](OpId op) {
                     const std::string& t = g.op_type(op);
                     return t == "Conv2D" || t == "DepthwiseConv2dNative" || t == "MatMul";
                   }) /
         2;
}

double parameters(const Graph& g) { return g.stats().param_bytes / 4; }

std::string make_error(std::string_view model, const zoo::Params& params) {
  try {
    zoo::make_model(model, params);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

/** Everything that identifies a graph: names, types, costs and edges. */
std::string fingerprint(const Graph& g) {
  std::string s;
  for (OpId op = 0; op < g.num_ops(); ++op)
    s += fmt::format("{}:{}:{}:{}:{}:{};", g.op_name(op), g.op_type(op), g.flops(op), g.output_bytes(op),
                     g.param_bytes(op), g.layer(op));
  for (EdgeId e = 0; e < g.num_edges(); ++e)
    s += fmt::format("{}>{}:{};", g.edge_src(e), g.edge_dst(e), g.edge_bytes(e));
  return s;
}

}  // namespace

TEST_CASE("graphs::zoo: published parameter and multiply-add counts, within 3%", "[graphs]") {
  SECTION("ResNet-50: 25.6M parameters, 4.1G multiply-adds at 224x224") {
    Graph g = zoo::make_model("resnet50", {{"batch", 1}});
    CHECK(parameters(g) == Approx(25.6e6).epsilon(0.03));
    CHECK(multiply_adds(g) == Approx(4.1e9).epsilon(0.03));
  }
  SECTION("Inception-v3: 23.8M parameters, 5.7G multiply-adds at 299x299") {
    Graph g = zoo::make_model("inception_v3", {{"batch", 1}});
    CHECK(parameters(g) == Approx(23.8e6).epsilon(0.03));
    CHECK(multiply_adds(g) == Approx(5.7e9).epsilon(0.03));
  }
  SECTION("BERT-base: 110M parameters") {
    Graph g = zoo::make_model("bert", {{"layers", 12}, {"hidden", 768}, {"heads", 12}});
    CHECK(parameters(g) == Approx(110e6).epsilon(0.03));
  }
  SECTION("NASNet-A Large (Zoph et al. 2018, table 2): 88.9M parameters, 23.8G multiply-adds at 331x331") {
    Graph g = zoo::make_model("nasnet", {{"batch", 1}});
    CHECK(parameters(g) == Approx(88.9e6).epsilon(0.03));
    CHECK(multiply_adds(g) == Approx(23.8e9).epsilon(0.03));
  }
  SECTION("AmoebaNet-A N=6, F=190 (Real et al. 2019, table 2): 86.7M parameters, 23.1G multiply-adds at 331x331") {
    Graph g = zoo::make_model("amoebanet", {{"batch", 1}});
    CHECK(parameters(g) == Approx(86.7e6).epsilon(0.03));
    CHECK(multiply_adds(g) == Approx(23.1e9).epsilon(0.03));
  }
  SECTION("Transformer-XL base on WikiText-103 (Dai et al. 2019): 151M parameters") {
    CHECK(parameters(zoo::make_model("transformer_xl")) == Approx(151e6).epsilon(0.03));
  }
}

TEST_CASE("graphs::zoo: every model builds a valid forward graph with its defaults", "[graphs]") {
  REQUIRE(zoo::models().size() == 17);
  for (const zoo::ModelInfo& info : zoo::models()) {
    INFO("model " << info.name);
    CHECK(&zoo::model_info(info.name) == &info);
    for (const zoo::Param& p : info.params) {
      INFO("param " << p.name);
      CHECK(std::all_of(p.name.begin(), p.name.end(), [](char c) { return std::islower(c) || c == '_'; }));
      CHECK(!p.help.empty());
    }
    Graph g = zoo::make_model(info.name);
    CHECK(g.num_ops() > 100);
    CHECK(g.measured_kinds().empty());
    bool all_forward = true, unconstrained = true, in_blocks = true, typed = true;
    for (OpId op = 0; op < g.num_ops(); ++op) {
      all_forward = all_forward && g.phase(op) == Phase::forward;
      unconstrained = unconstrained && g.colocation(op) == kNoClass;
      in_blocks = in_blocks && g.layer(op) >= 0;
      typed = typed && !g.op_type(op).empty() && g.output_bytes(op) > 0;
    }
    CHECK(all_forward);
    CHECK(unconstrained);
    CHECK(in_blocks);
    CHECK(typed);
    bool edges_carry_tensors = true;
    for (EdgeId e = 0; e < g.num_edges(); ++e)
      edges_carry_tensors =
          edges_carry_tensors && g.edge_bytes(e) > 0 && g.edge_bytes(e) <= g.output_bytes(g.edge_src(e));
    CHECK(edges_carry_tensors);
    GraphStats s = g.stats();
    CHECK(s.flops > 0);
    CHECK(s.param_bytes > 0);
    // Convolutions and matrix products carry their shape: the replay runs it and the cost model prices it
    // (depthwise convolutions do not: libraries run them as direct, memory-bound kernels).
    double shaped_flops = 0, product_flops = 0;
    for (OpId op = 0; op < g.num_ops(); ++op) {
      const std::string& type = g.op_type(op);
      const bool product = type == "Conv2D" || type == "MatMul" || type == "BatchMatMul";
      if (product) product_flops += g.flops(op);
      if (g.gemm(op).known()) {
        CHECK(product);
        shaped_flops += g.flops(op);
        CHECK(std::abs(g.gemm(op).flops() / g.flops(op) - 1) < 0.25);
      }
    }
    if (info.name != "random_dag") CHECK(shaped_flops == product_flops);  // random_dag's ops have FLOPs, no shapes
  }
}

TEST_CASE("graphs::zoo: op counts of the real models are stable", "[graphs]") {
  // ResNet-50: input; stem conv, bn, relu, pool (4); 16 bottlenecks of 3 x (conv, bn) + 2 relu + add +
  // relu (10) and 4 projection shortcuts (conv, bn); head mean, matmul, bias, softmax (4).
  CHECK(zoo::make_model("resnet50").num_ops() == 1 + 4 + 16 * 10 + 4 * 2 + 4);
  // Inception-v3: each conv is conv + bn + relu (3 ops). Stem: input, 5 convs, 2 pools (18); 3 A blocks
  // of 7 convs + pool + concat (23); reduction A of 4 convs + pool + concat (14); 4 C blocks of 10
  // convs + pool + concat (32); reduction B of 6 convs + pool + concat (20); 2 E blocks of 9 convs +
  // 2 inner concats + pool + concat (31); head (4).
  CHECK(zoo::make_model("inception_v3").num_ops() == 18 + 3 * 23 + 14 + 4 * 32 + 20 + 2 * 31 + 4);
  // BERT-base: embeddings (2 inputs, 1 const, 3 Embedding, 2 Add, LayerNorm) and the mask (10); per
  // layer q, k, v, output dense (MatMul + BiasAdd each), 2 BatchMatMul, Mul, Add, Softmax, Add,
  // LayerNorm, FFN dense, Gelu, dense, Add, LayerNorm (22); pooler MatMul, BiasAdd, Tanh (3).
  CHECK(zoo::make_model("bert").num_ops() == 10 + 12 * 22 + 3);
  // Transformer-XL: ids, Embedding, scale, positions, mask (5); per layer memory input, Concat, qkv
  // MatMul, Split, r_net MatMul, 2 BiasAdd, 2 BatchMatMul, RelShift, Add, Mul, Add, Softmax,
  // BatchMatMul, MatMul, Add, LayerNorm (18) and FFN (7); adaptive softmax head MatMul, BiasAdd,
  // Softmax (3) and 3 tail clusters of Gather, MatMul, BiasAdd, Softmax (12).
  CHECK(zoo::make_model("transformer_xl").num_ops() == 5 + 16 * 25 + 3 + 3 * 4);
  // WaveNet: input, causal conv; 30 layers of 2 dilated convs, Tanh, Sigmoid, Mul, skip conv,
  // residual conv and Add (8), the last without its residual (-2); head AddN, Relu, conv, Relu, conv, Softmax.
  CHECK(zoo::make_model("wavenet").num_ops() == 2 + 30 * 8 - 2 + 6);
  // RNNLM: ids, Embedding; per layer kernel, bias, initial state; 14 LSTM ops per layer and step;
  // softmax kernel, bias and MatMul, BiasAdd, Softmax per step.
  CHECK(zoo::make_model("rnnlm").num_ops() == 2 + 2 * 3 + 2 * 40 * 14 + 2 + 40 * 3);
  // NASNet-A Large and AmoebaNet-A: counted by the generator at its defaults (the cells are fixed
  // published specs, so these change only if the cell builder does).
  CHECK(zoo::make_model("nasnet").num_ops() == 1242);
  CHECK(zoo::make_model("amoebanet").num_ops() == 1136);
}

TEST_CASE("graphs::zoo: GNMT op count follows its layers, steps and softmax shards", "[graphs]") {
  // Per step, encoder: bidirectional bottom layer 2 x 14 + Concat, 14 per further layer, residual
  // Add from layer 2; decoder: 14 per layer, residual Adds, attention (MatMul, Add, Tanh, MatMul,
  // Softmax, BatchMatMul) and softmax (MatMul, BiasAdd, Softmax per shard, plus a SoftmaxCombine when
  // sharded). Once: 2 ids + 2 Embedding; kernel, bias and initial state per LSTM (L + 1 encoder, L
  // decoder); attention Pack, memory MatMul, 2 weights, initial context; kernel and bias per shard.
  auto expected = [](int64_t layers, int64_t steps, int64_t shards) {
    const int64_t residual = std::max<int64_t>(0, layers - 2);
    const int64_t encoder_step = 29 + 14 * (layers - 1) + residual;
    const int64_t decoder_step = 14 * layers + residual + 6 + 3 * shards + (shards > 1 ? 1 : 0);
    return steps * (encoder_step + decoder_step) + 4 + 3 * (2 * layers + 1) + 5 + 2 * shards;
  };
  for (int layers : {2, 4, 8})
    for (int shards : {1, 3, 8}) {
      INFO("layers " << layers << ", shards " << shards);
      CHECK(zoo::make_model("gnmt", {{"layers", layers}, {"steps", 5}, {"shards", shards}}).num_ops() ==
            expected(layers, 5, shards));
    }
  Graph g = zoo::make_model("gnmt", {{"layers", 8}});
  CHECK(g.num_ops() == expected(8, 100, 8));
  CHECK(g.num_ops() > 25000);

  // Expert rules find the LSTM layer of every op; attention and softmax sit past the last layer.
  int64_t head_ops = 0, layer3_ops = 0, misplaced = 0;
  for (OpId op = 0; op < g.num_ops(); ++op) {
    const std::string& name = g.op_name(op);
    if (name.starts_with("decoder/attention/") || name.starts_with("softmax/")) {
      ++head_ops;
      misplaced += g.layer(op) != 8;
    } else if (name.starts_with("encoder/layer3/") || name.starts_with("decoder/layer3/")) {
      ++layer3_ops;
      misplaced += g.layer(op) != 3;
    }
  }
  CHECK(misplaced == 0);
  CHECK(head_ops == 100 * (6 + 3 * 8 + 1) + 4 + 2 * 8);  // per-step attention and softmax, their weights
  CHECK(layer3_ops == 2 * (100 * 15 + 3));               // 14 LSTM ops + residual Add per step, weights, state
  for (std::string_view name : {"decoder/attention/step7/Softmax", "softmax/shard5/step7/Softmax"}) {
    REQUIRE(g.find_op(name) >= 0);
    CHECK(g.op_type(g.find_op(name)) == "Softmax");
  }
  REQUIRE(g.find_op("softmax/step7/SoftmaxCombine") >= 0);
  REQUIRE(g.find_op("encoder/layer0/bw/step99/MatMul") >= 0);
}

TEST_CASE("graphs::zoo: GNMT's sharded softmax costs the unsharded one plus the combines", "[graphs]") {
  // Slices of 32000 / 3 are uneven (10667, 10667, 10666): their FLOPs, parameters and outputs still add
  // up to the single softmax's; each step adds one SoftmaxCombine reading K values per row ([B, 1] out).
  const int64_t batch = 16, steps = 6, shards = 3;
  auto stats = [&](int64_t k) {
    return zoo::make_model("gnmt", {{"layers", 2}, {"steps", steps}, {"batch", batch}, {"shards", k}}).stats();
  };
  const GraphStats one = stats(1), sharded = stats(shards);
  CHECK(sharded.param_bytes == one.param_bytes);
  CHECK(sharded.flops == Approx(one.flops + steps * 5.0 * batch * shards).epsilon(1e-12));
  CHECK(sharded.output_bytes == Approx(one.output_bytes + steps * 4.0 * batch).epsilon(1e-12));
  CHECK_THROWS_WITH(zoo::make_model("gnmt", {{"vocab", 4}, {"shards", 5}}),
                    Catch::Contains("shards (5) exceeds vocab (4)"));
}

TEST_CASE("graphs::zoo: the 8-layer GNMT training graph has over 50,000 ops, as in GDP", "[graphs]") {
  Graph training = expand_training(zoo::make_model("gnmt", {{"layers", 8}}));
  CHECK(training.num_ops() > 50000);
}

TEST_CASE("graphs::zoo: generators are deterministic and seeds change the seeded families", "[graphs]") {
  for (const zoo::ModelInfo& info : zoo::models()) {
    INFO("model " << info.name);
    const bool seeded = std::any_of(info.params.begin(), info.params.end(), [](auto& p) { return p.name == "seed"; });
    zoo::Params small;
    if (info.name == "gnmt") small = {{"steps", 4}};
    zoo::Params seed1 = small, seed2 = small;
    seed1["seed"] = 1;
    seed2["seed"] = 2;
    const std::string a = fingerprint(zoo::make_model(info.name, seeded ? seed1 : small));
    CHECK(a == fingerprint(zoo::make_model(info.name, seeded ? seed1 : small)));
    if (seeded) CHECK(a != fingerprint(zoo::make_model(info.name, seed2)));
  }
}

TEST_CASE("graphs::zoo: FLOPs scale with the batch, parameters do not", "[graphs]") {
  for (const zoo::ModelInfo& info : zoo::models()) {
    const bool batched = std::any_of(info.params.begin(), info.params.end(), [](auto& p) { return p.name == "batch"; });
    if (!batched) continue;
    INFO("model " << info.name);
    std::vector<GraphStats> s;  // at batch 1, 2, 4
    for (int batch : {1, 2, 4}) {
      zoo::Params params = {{"batch", batch}};
      if (info.name == "gnmt") params["steps"] = 4;
      s.push_back(zoo::make_model(info.name, params).stats());
    }
    CHECK(s[2].ops == s[0].ops);
    CHECK(s[2].param_bytes == s[0].param_bytes);
    // FLOPs = per-example work x batch + batch-independent work (Transformer-XL's projection of the
    // relative positions, under 10%); its tail-cluster token counts round, hence the tolerance.
    const double per_example = s[1].flops - s[0].flops;
    CHECK(s[2].flops - s[1].flops == Approx(2 * per_example).epsilon(0.01));
    CHECK(s[0].flops - per_example >= -1e-6 * s[0].flops);
    CHECK(s[0].flops - per_example <= 0.1 * s[0].flops);
  }
}

TEST_CASE("graphs::zoo: random_dag honours its shape and cost ranges", "[graphs]") {
  Graph g = zoo::make_model("random_dag", {{"ops", 300},
                                           {"width", 10},
                                           {"fan_in", 2},
                                           {"max_skip", 1},
                                           {"min_flops", 100},
                                           {"max_flops", 1000},
                                           {"param_prob", 0}});
  CHECK(g.num_ops() == 300);
  CHECK(g.stats().depth == 30);
  CHECK(g.stats().param_bytes == 0);
  for (OpId op = 0; op < g.num_ops(); ++op) {
    REQUIRE(g.flops(op) >= 100);
    REQUIRE(g.flops(op) <= 1000);
    REQUIRE(g.in_degree(op) <= 2);
    for (OpId pred : g.predecessors(op)) REQUIRE(g.layer(pred) == g.layer(op) - 1);
  }
}

TEST_CASE("graphs::zoo: bad names and params give errors naming them", "[graphs]") {
  CHECK_THAT(make_error("resnet", {}),
             Contains("unknown model \"resnet\"") && Contains("resnet50") && Contains("random_dag"));
  CHECK_THROWS_AS(zoo::model_info("vgg16"), Error);
  CHECK_THAT(make_error("gnmt", {{"depth", 3}}),
             Contains("unknown param \"depth\"") && Contains("layers") && Contains("steps"));
  CHECK_THAT(make_error("gnmt", {{"layers", 0}}), Contains("\"layers\" is 0") && Contains("integer in [1, 16]"));
  CHECK_THAT(make_error("gnmt", {{"layers", 2.5}}), Contains("\"layers\" is 2.5") && Contains("an integer"));
  CHECK_THAT(make_error("bert", {{"seq_len", std::nan("")}}), Contains("\"seq_len\" is nan"));
  CHECK_THAT(make_error("resnet50", {{"batch", -1}}), Contains("\"batch\" is -1"));
  CHECK_THAT(make_error("bert", {{"hidden", 100}, {"heads", 12}}),
             Contains("hidden (100) must be a multiple of heads (12)"));
  CHECK_THAT(make_error("random_dag", {{"min_flops", 10}, {"max_flops", 1}}),
             Contains("min_flops (10) exceeds max_flops (1)"));
  CHECK_THAT(make_error("inception_v3", {{"image_size", 40}}), Contains("\"image_size\" is 40"));
}

TEST_CASE("graphs::zoo: docs/zoo.md matches the code", "[graphs]") {
  std::ifstream doc(std::string(PLACELAB_TEST_DIR) + "/../docs/zoo.md");
  REQUIRE(doc.good());
  // Cells of a markdown table row, trimmed: "| a | b |" -> {"a", "b"}.
  auto cells = [](const std::string& line) {
    std::vector<std::string> out;
    std::stringstream row(line.substr(1));
    for (std::string cell; std::getline(row, cell, '|');) {
      const auto first = cell.find_first_not_of(' '), last = cell.find_last_not_of(' ');
      out.push_back(first == std::string::npos ? "" : cell.substr(first, last - first + 1));
    }
    return out;
  };
  std::set<std::string> totals_checked, defaults_checked;
  std::string chapter, section;  // the "## " heading, and the model of the "### `name`" section
  for (std::string line; std::getline(doc, line);) {
    if (line.starts_with("## ")) chapter = line.substr(3);
    if (line.starts_with("### `")) section = line.substr(5, line.find('`', 5) - 5);
    if (line.starts_with("| `--")) {  // a parameter row: | `--name` | default | help |
      std::vector<std::string> c = cells(line);
      const zoo::ModelInfo& info = zoo::model_info(section);
      const std::string name = c[0].substr(3, c[0].size() - 4);
      auto p = std::find_if(info.params.begin(), info.params.end(), [&](auto& q) { return q.name == name; });
      INFO(section << " --" << name);
      REQUIRE(p != info.params.end());
      CHECK(c[1] == fmt::format("{}", p->value));
      defaults_checked.insert(section + "/" + name);
    } else if (line.starts_with("| `") && chapter == "Totals at the defaults") {
      std::vector<std::string> c = cells(line);
      const std::string name = c[0].substr(1, c[0].size() - 2);
      INFO("totals of " << name);
      GraphStats s = zoo::make_model(name).stats();
      CHECK(c[1] == std::to_string(s.ops));
      CHECK(c[2] == std::to_string(s.edges));
      CHECK(c[3] == std::to_string(s.depth));
      CHECK(c[4] == fmt::format("{:.4g}", s.flops / 1e9));
      CHECK(c[5] == fmt::format("{:.4g}", s.param_bytes / 1e6));
      CHECK(c[6] == fmt::format("{:.4g}", s.output_bytes / 1e9));
      totals_checked.insert(name);
    }
  }
  size_t params = 0;
  for (const zoo::ModelInfo& info : zoo::models()) {
    CHECK(totals_checked.count(info.name) == 1);
    params += info.params.size();
  }
  CHECK(defaults_checked.size() == params);
}
