// Golden comparisons against PyTorch: fixtures written once by tests/python/gen_autodiff_fixtures.py
// hold weights, inputs, outputs and gradients of loss = sum(output * projection); placelab's float
// layers must reproduce outputs and every gradient within float tolerances.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "graphs/json_util.h"
#include "policy/nn/attention.h"
#include "policy/nn/graphsage.h"
#include "policy/nn/lstm.h"

using namespace placelab;
using namespace placelab::nn;
using autodiff::MatrixF;
using autodiff::Tensor;

namespace {

MatrixF matrix_of(const io::json& rows) {
  MatrixF m(static_cast<Index>(rows.size()), static_cast<Index>(rows.at(0).size()));
  for (Index i = 0; i < m.rows(); ++i) {
    for (Index j = 0; j < m.cols(); ++j) m(i, j) = rows.at(i).at(j).get<float>();
  }
  return m;
}

// Float32 round-off through a few layers: entries agree to ~1e-6 relative; 1e-5 leaves margin for
// different summation orders (Eigen's GEMM versus PyTorch's BLAS).
void check_close(const std::string& what, const MatrixF& actual, const MatrixF& expected) {
  INFO(what);
  REQUIRE(actual.rows() == expected.rows());
  REQUIRE(actual.cols() == expected.cols());
  const float error = (actual - expected).cwiseAbs().maxCoeff();
  INFO("max abs error " << error << " of max " << expected.cwiseAbs().maxCoeff());
  CHECK(error <= 1e-5f * (1 + expected.cwiseAbs().maxCoeff()));
}

struct Fixture {
  io::json doc;
  std::map<std::string, Tensor> inputs;

  explicit Fixture(const std::string& name)
      : doc(io::read_json_file(std::string(PLACELAB_TEST_DIR) + "/golden/autodiff/" + name + ".json")) {
    for (const auto& [key, rows] : doc.at("inputs").items()) inputs[key] = Tensor::leaf(matrix_of(rows), true);
  }

  /** Loads the fixture's weights into `params` (every parameter must be in the fixture). */
  void load(const ParamList<float>& params) const {
    REQUIRE(params.size() == doc.at("params").size());
    for (const auto& p : params) {
      INFO("parameter " << p.name);
      REQUIRE(doc.at("params").contains(p.name));
      Tensor t = p.tensor;
      const MatrixF value = matrix_of(doc.at("params").at(p.name));
      REQUIRE(value.rows() == t.rows());
      REQUIRE(value.cols() == t.cols());
      t.mutable_value() = value;
    }
  }

  /** Compares `output`, then back-propagates the projection and compares every gradient. */
  void check(const Tensor& output, const ParamList<float>& params) const {
    check_close("output", output.value(), matrix_of(doc.at("output")));
    autodiff::backward(output, matrix_of(doc.at("projection")));
    for (const auto& [key, tensor] : inputs) check_close("grad of input " + key, tensor.grad(), matrix_of(doc.at("grads").at(key)));
    for (const auto& p : params) check_close("grad of " + p.name, p.tensor.grad(), matrix_of(doc.at("grads").at(p.name)));
  }
};

template <class Layer>
ParamList<float> params_of(const Layer& layer) {
  ParamList<float> list;
  layer.collect("", list);
  return list;
}

}  // namespace

TEST_CASE("nn golden: Linear equals torch.nn.Linear", "[policy][nn][golden]") {
  const Fixture f("linear");
  std::mt19937_64 rng(0);
  const Linear layer(6, 5, rng);
  f.load(params_of(layer));
  f.check(layer.forward(f.inputs.at("x")), params_of(layer));
}

TEST_CASE("nn golden: LayerNorm equals torch.nn.LayerNorm", "[policy][nn][golden]") {
  const Fixture f("layer_norm");
  const LayerNorm layer(8);
  f.load(params_of(layer));
  f.check(layer.forward(f.inputs.at("x")), params_of(layer));
}

TEST_CASE("nn golden: GraphSAGE equals a PyTorch SAGEConv (mean and max-pool)", "[policy][nn][golden]") {
  for (const auto& [name, aggregator] : {std::pair{"graphsage_mean", Aggregator::mean},
                                         std::pair{"graphsage_max_pool", Aggregator::max_pool}}) {
    INFO(name);
    const Fixture f(name);
    std::vector<std::vector<int32_t>> lists = f.doc.at("neighbors").get<std::vector<std::vector<int32_t>>>();
    const auto neighbors = std::make_shared<autodiff::Csr>(
        autodiff::Csr::from_lists(static_cast<int32_t>(lists.size()), lists));
    std::mt19937_64 rng(0);
    const GraphSage layer(5, 4, aggregator, rng);
    f.load(params_of(layer));
    f.check(layer.forward(f.inputs.at("x"), neighbors), params_of(layer));
  }
}

TEST_CASE("nn golden: multi-head attention with memory equals torch.nn.MultiheadAttention", "[policy][nn][golden]") {
  const Fixture f("attention");
  std::mt19937_64 rng(0);
  const MultiHeadAttention layer(8, f.doc.at("heads").get<Index>(), rng);
  f.load(params_of(layer));
  const MatrixF keep = matrix_of(f.doc.at("mask"));
  const autodiff::Mask mask = keep.array() != 0;
  const Tensor memory = Tensor::leaf(matrix_of(f.doc.at("memory")));
  f.check(layer.forward(f.inputs.at("x"), memory, 1, &mask), params_of(layer));
}

TEST_CASE("nn golden: LSTM cell unrolled equals torch.nn.LSTMCell", "[policy][nn][golden]") {
  const Fixture f("lstm");
  std::mt19937_64 rng(0);
  const LstmCell cell(5, 6, rng);
  f.load(params_of(cell));
  LstmState<float> state{f.inputs.at("h0"), f.inputs.at("c0")};
  std::vector<Tensor> rows;
  for (int t = 0; t < f.doc.at("steps").get<int>(); ++t) {
    state = cell.forward(f.inputs.at("x" + std::to_string(t)), state);
    rows.push_back(state.h);
  }
  rows.push_back(state.c);
  f.check(autodiff::concat_rows(rows), params_of(cell));
}
