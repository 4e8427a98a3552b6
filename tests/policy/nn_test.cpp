// Tests of the layers (finite-difference gradchecks in double over inputs and every parameter),
// the optimisers, a tiny supervised problem, seeded determinism and parameter save/load.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "graphs/error.h"
#include "graphs/graph.h"
#include "policy/nn/attention.h"
#include "policy/nn/graphsage.h"
#include "policy/nn/lstm.h"
#include "policy/nn/optim.h"
#include "tests/policy/gradcheck.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::nn;
using placelab::testing::error_of;
using autodiff::CsrPtr;
using autodiff::MatrixD;
using autodiff::MatrixF;
using autodiff::Tensor;
using autodiff::TensorD;
using placelab::test::gradcheck;
using placelab::test::random_matrix;

namespace {

using Leaves = std::vector<TensorD>;

template <class Layer>
std::vector<TensorD> params_of(const Layer& layer) {
  ParamList<double> list;
  layer.collect("", list);
  return tensors_of(list);
}

// A 6-op diamond-and-tail DAG plus an isolated op.
graphs::Graph small_graph() {
  graphs::GraphBuilder b("small");
  for (int i = 0; i < 7; ++i) b.add_op({.name = "op" + std::to_string(i), .type = i % 2 ? "MatMul" : "Relu"});
  for (auto [s, d] : std::vector<std::pair<int, int>>{{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {1, 4}, {4, 5}}) {
    b.add_edge(s, d, 4);
  }
  return std::move(b).build();
}

}  // namespace

TEST_CASE("nn: gradcheck of dense layers", "[policy][nn]") {
  std::mt19937_64 rng(1);
  const LinearT<double> linear(4, 3, rng);
  gradcheck("Linear", {random_matrix(5, 4, 1)}, [&](const Leaves& x) { return linear.forward(x[0]); },
            params_of(linear));
  for (auto act : {Activation::relu, Activation::tanh, Activation::gelu}) {
    const MlpT<double> mlp({4, 6, 3}, rng, act);
    gradcheck("Mlp", {random_matrix(5, 4, 2)}, [&](const Leaves& x) { return mlp.forward(x[0]); }, params_of(mlp));
  }
  LayerNormT<double> norm(4);
  for (auto& p : params_of(norm)) p.mutable_value() = random_matrix(1, 4, 3, 0.5, 1.5);
  gradcheck("LayerNorm", {random_matrix(5, 4, 4)}, [&](const Leaves& x) { return norm.forward(x[0]); },
            params_of(norm));
  const EmbeddingT<double> embed(6, 3, rng);
  gradcheck("Embedding", {random_matrix(1, 1, 5)}, [&](const Leaves& x) { return x[0] * embed.forward({5, 0, 5}); },
            params_of(embed));
  FilmT<double> film(3, 4, rng);
  CHECK(film.forward(TensorD::leaf(random_matrix(2, 4, 6)), TensorD::leaf(random_matrix(1, 3, 7))).value() ==
        random_matrix(2, 4, 6));  // a fresh FiLM is the identity
  uint64_t seed = 10;
  for (auto& p : params_of(film)) p.mutable_value() = random_matrix(p.rows(), p.cols(), ++seed);
  gradcheck("Film", {random_matrix(5, 4, 8), random_matrix(1, 3, 9)},
            [&](const Leaves& x) { return film.forward(x[0], x[1]); }, params_of(film));
}

TEST_CASE("nn: gradcheck of graph layers", "[policy][nn]") {
  std::mt19937_64 rng(2);
  const graphs::Graph graph = small_graph();
  const CsrPtr neighbors = neighbor_csr(graph);
  CHECK(neighbors->rows == 7);
  CHECK(std::vector<int32_t>(neighbors->indices.begin() + neighbors->offsets[3],
                             neighbors->indices.begin() + neighbors->offsets[4]) == std::vector<int32_t>{1, 2, 4});
  CHECK(neighbors->offsets[7] - neighbors->offsets[6] == 0);
  for (auto agg : {Aggregator::mean, Aggregator::max_pool}) {
    const GraphSageT<double> sage(3, 4, agg, rng);
    gradcheck(agg == Aggregator::mean ? "GraphSage mean" : "GraphSage max_pool", {random_matrix(7, 3, 1)},
              [&](const Leaves& x) { return sage.forward(x[0], neighbors); }, params_of(sage));
  }
  const CsrPtr propagation = gcn_csr(graph);
  // Row 6 (isolated) only has its self loop, with weight 1; row 0 has degree 3 (self, 1, 2).
  CHECK(propagation->values[propagation->offsets[6]] == 1.0f);
  CHECK(propagation->values[propagation->offsets[0]] == Approx(1.0 / 3));
  GcnT<double> gcn(3, 4, rng);
  for (auto& p : params_of(gcn)) p.mutable_value() = random_matrix(p.rows(), p.cols(), 5);
  gradcheck("Gcn", {random_matrix(7, 3, 2)}, [&](const Leaves& x) { return gcn.forward(x[0], propagation); },
            params_of(gcn));
}

TEST_CASE("nn: gradcheck of attention layers with segment memory", "[policy][nn]") {
  std::mt19937_64 rng(3);
  const MultiHeadAttentionT<double> mha(4, 2, rng);
  const autodiff::Mask mask = segment_mask(2, 3, 3, 5, false);  // 2 segments of 3 rows, 5 valid rows
  CHECK(!mask(0, 0));                             // segment 0 has no memory
  CHECK(mask(3, 0));                              // segment 1 attends to its memory
  CHECK(!mask(4, 5));                             // row 5 is padding
  const MatrixD memory = random_matrix(6, 4, 2);
  gradcheck("MultiHeadAttention", {random_matrix(6, 4, 1)},
            [&](const Leaves& x) { return mha.forward(x[0], TensorD::leaf(memory), 2, &mask); }, params_of(mha));
  gradcheck("MultiHeadAttention no memory", {random_matrix(6, 4, 1)},
            [&](const Leaves& x) { return mha.forward(x[0], TensorD(), 1); }, params_of(mha));
  const TransformerXlBlockT<double> block(4, 2, 8, rng);
  gradcheck("TransformerXlBlock", {random_matrix(6, 4, 3)},
            [&](const Leaves& x) {
              return block.forward(x[0], TensorD::leaf(memory), 2, &mask);
            },
            params_of(block));

  const TensorD memory_of = previous_segment_memory(TensorD::leaf(memory), 2);
  CHECK(memory_of.value().topRows(3).norm() == 0);
  CHECK(memory_of.value().bottomRows(3) == memory.topRows(3));
  // Segments run together equal segments run one at a time.
  const TensorD x = TensorD::leaf(random_matrix(6, 4, 4));
  const TensorD both = mha.forward(x, TensorD::leaf(memory), 2);
  for (int s = 0; s < 2; ++s) {
    const TensorD one = mha.forward(autodiff::slice_rows(x, 3 * s, 3),
                                    TensorD::leaf(memory.middleRows(3 * s, 3)), 1);
    CHECK((one.value() - both.value().middleRows(3 * s, 3)).norm() < 1e-12);
  }
  CHECK(error_of([&] { MultiHeadAttentionT<double>(6, 4, rng); }).find("MultiHeadAttention: width 6") == 0);
}

TEST_CASE("nn: gradcheck of the LSTM cell and the attentional decoder", "[policy][nn]") {
  std::mt19937_64 rng(4);
  const LstmCellT<double> cell(3, 4, rng);
  gradcheck("LstmCell", {random_matrix(2, 3, 1), random_matrix(2, 4, 2), random_matrix(2, 4, 3)},
            [&](const Leaves& x) {
              const LstmState<double> s1 = cell.forward(x[0], {x[1], x[2]});
              const LstmState<double> s2 = cell.forward(x[0] * 0.5, s1);
              return autodiff::concat_cols<double>({s2.h, s2.c});
            },
            params_of(cell));
  const AttentionalLstmDecoderT<double> decoder(3, 4, 3, 2, 5, rng);
  gradcheck("AttentionalLstmDecoder", {random_matrix(4, 3, 4)},
            [&](const Leaves& x) { return decoder.forward(x[0], {2, 0, 1, 1}); }, params_of(decoder));
  CHECK(error_of([&] { decoder.forward(TensorD::leaf(random_matrix(2, 3, 4)), {3, 0}); })
            .find("AttentionalLstmDecoder: previous device 3") == 0);
}

TEST_CASE("nn: a GraphSAGE classifier learns op types of a graph to near-zero loss", "[policy][nn]") {
  // Label = op type; features are one-hot in- and out-degrees only, so the layers must combine them
  // (and the neighbourhoods at the chain ends) to tell types apart. Loss must go to ~0.
  graphs::GraphBuilder b("chain-of-blocks");
  const int n = 60;
  for (int i = 0; i < n; ++i) b.add_op({.name = "op" + std::to_string(i), .type = i % 3 == 0 ? "Conv" : "Relu"});
  for (int i = 0; i + 1 < n; ++i) b.add_edge(i, i + 1, 4);
  for (int i = 0; i + 3 < n; i += 3) b.add_edge(i, i + 3, 4);  // Conv ops form a skip chain
  const graphs::Graph graph = std::move(b).build();
  const CsrPtr nbrs = neighbor_csr(graph);
  MatrixF features = MatrixF::Zero(n, 6);
  std::vector<int32_t> labels(n);
  for (int v = 0; v < n; ++v) {
    features(v, graph.in_degree(v)) = 1;
    features(v, 3 + graph.out_degree(v)) = 1;
    labels[v] = graph.op_type_id(v);
  }
  const auto train = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    const GraphSage sage1(6, 16, Aggregator::mean, rng), sage2(16, 16, Aggregator::max_pool, rng);
    const Linear head(16, 2, rng);
    ParamList<float> params;
    sage1.collect("sage1", params);
    sage2.collect("sage2", params);
    head.collect("head", params);
    Adam adam(tensors_of(params), {.lr = 0.03});
    const Tensor x = Tensor::leaf(features);
    float loss_value = 0;
    for (int step = 0; step < 80; ++step) {
      const Tensor h = autodiff::relu(sage2.forward(autodiff::relu(sage1.forward(x, nbrs)), nbrs));
      const Tensor logp = autodiff::log_softmax_rows(head.forward(h));
      const Tensor loss = -autodiff::mean(autodiff::select_per_row(logp, labels));
      loss_value = loss.item();
      adam.zero_grad();
      autodiff::backward(loss);
      clip_grad_norm(adam.params(), 5.0);
      adam.step();
    }
    return std::make_pair(loss_value, params[0].tensor.value());
  };
  const auto [loss_a, weights_a] = train(7);
  const auto [loss_b, weights_b] = train(7);
  CHECK(loss_a < 0.01f);
  CHECK(loss_a == loss_b);  // seeded runs are identical, bit for bit
  CHECK(weights_a == weights_b);
  const auto [loss_c, weights_c] = train(8);
  CHECK(weights_c != weights_a);
}

TEST_CASE("nn: optimisers follow their update rules", "[policy][nn]") {
  const auto param = [] { return Tensor::leaf(MatrixF::Constant(1, 2, 1.0f), true); };
  const auto set_grad = [](Tensor& p, float g) { p.mutable_grad() = MatrixF::Constant(1, 2, g); };
  {
    Tensor p = param();
    Sgd sgd({p}, {.lr = 0.1, .momentum = 0.9});
    set_grad(p, 1);
    sgd.step();  // v = 1, p = 1 - 0.1
    set_grad(p, 1);
    sgd.step();  // v = 1.9, p = 0.9 - 0.19
    CHECK(p.value()(0, 0) == Approx(0.71f));
  }
  {
    Tensor p = param();
    Adam adam({p}, {.lr = 0.1});
    set_grad(p, 3);
    adam.step();  // the first Adam step moves by lr * sign(g)
    CHECK(p.value()(0, 0) == Approx(0.9f).epsilon(1e-5));
    Tensor q = param();
    Adam adamw({q}, {.lr = 0.1, .weight_decay = 0.5, .decoupled_weight_decay = true});
    set_grad(q, 3);
    adamw.step();  // (1 - 0.05) * 1 - 0.1
    CHECK(q.value()(0, 0) == Approx(0.85f).epsilon(1e-5));
    adamw.zero_grad();
    adamw.step();  // no gradient: untouched
    CHECK(q.value()(0, 0) == Approx(0.85f).epsilon(1e-5));
  }
  {
    // A gradient hook (data-parallel training's gradient average) sees the gradients before the update,
    // while installed on this thread only.
    Tensor p = param();
    Sgd sgd({p}, {.lr = 0.1});
    int calls = 0;
    {
      const ScopedGradientHook halve([&](const std::vector<Tensor>& params) {
        ++calls;
        for (const Tensor& t : params) Tensor(t).mutable_grad() *= 0.5f;
      });
      set_grad(p, 1);
      sgd.step();  // p = 1 - 0.1 * 0.5
    }
    set_grad(p, 1);
    sgd.step();  // no hook: p = 0.95 - 0.1
    CHECK(calls == 1);
    CHECK(p.value()(0, 0) == Approx(0.85f));
  }
  {
    Tensor a = param(), b = param();
    set_grad(a, 3);
    set_grad(b, 4);  // joint norm sqrt(2 * 9 + 2 * 16) = sqrt(50)
    CHECK(clip_grad_norm({a, b}, 1.0) == Approx(std::sqrt(50.0)));
    CHECK(std::sqrt(a.grad().squaredNorm() + b.grad().squaredNorm()) == Approx(1.0).epsilon(1e-5));
  }
  const LrSchedule cosine{.kind = LrSchedule::Kind::warmup_cosine, .base_lr = 1.0, .warmup_steps = 10,
                          .total_steps = 110, .min_lr = 0.1};
  CHECK(cosine.lr_at(0) == Approx(0.1));
  CHECK(cosine.lr_at(9) == Approx(1.0));
  CHECK(cosine.lr_at(60) == Approx(0.55));
  CHECK(cosine.lr_at(500) == Approx(0.1));
  const LrSchedule steps{.kind = LrSchedule::Kind::step_decay, .base_lr = 1.0, .decay_every = 5, .gamma = 0.5};
  CHECK(steps.lr_at(4) == 1.0);
  CHECK(steps.lr_at(10) == 0.25);
}

TEST_CASE("nn: parameters save and load exactly, wrong shapes are clear errors", "[policy][nn]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "placelab_nn_test").string();
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/params.json";
  std::mt19937_64 rng(5);
  const TransformerXlBlock block(8, 2, 16, rng);
  ParamList<float> params;
  block.collect("block", params);
  save_parameters(path, params);
  CHECK(!std::filesystem::exists(path + ".tmp"));

  std::mt19937_64 other_rng(6);
  const TransformerXlBlock copy(8, 2, 16, other_rng);
  ParamList<float> copy_params;
  copy.collect("block", copy_params);
  CHECK(copy_params[0].tensor.value() != params[0].tensor.value());
  load_parameters(path, copy_params);
  for (size_t i = 0; i < params.size(); ++i) CHECK(copy_params[i].tensor.value() == params[i].tensor.value());

  const TransformerXlBlock wider(8, 2, 32, rng);
  ParamList<float> wider_params;
  wider.collect("block", wider_params);
  const MatrixF before = wider_params[0].tensor.value();
  const std::string message = error_of([&] { load_parameters(path, wider_params); });
  CHECK(message.find("params.json: params[") != std::string::npos);
  CHECK(message.find("parameter 'block.ff1.weight' has shape [8, 16] in the file but the model expects [8, 32]") !=
        std::string::npos);
  CHECK(wider_params[0].tensor.value() == before);  // nothing loaded from a file that does not fit

  ParamList<float> renamed;
  block.collect("encoder", renamed);
  CHECK(error_of([&] { load_parameters(path, renamed); }).find("parameter 'block.attention.query.weight' is not in") !=
        std::string::npos);
  std::ofstream(dir + "/bad.json") << R"({"format": "placelab.params", "version": 9, "params": []})";
  CHECK(error_of([&] { load_parameters(dir + "/bad.json", params); }).find("version") != std::string::npos);
  std::filesystem::remove_all(dir);
}
