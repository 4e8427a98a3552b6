// The learned policies' view of a placement problem: units keep colocation classes whole, features are
// finite and scale with what they describe, neighbourhoods are symmetric, and pins become masks.
#include <catch2/catch.hpp>

#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/problem.h"
#include "sim/presets.h"

using namespace placelab;

TEST_CASE("learned::Problem: training graphs place one unit per forward op", "[learned]") {
  const graphs::Graph forward = graphs::zoo::make_model("random_dag", {{"ops", 30}, {"seed", 3}});
  const graphs::Graph training = graphs::expand_training(forward);
  const sim::Cluster cluster = sim::make_preset("v100-nvlink-4");
  const sim::Simulator simulator(training, cluster);
  const learned::Problem problem(simulator);

  REQUIRE(problem.num_units() == forward.num_ops());
  REQUIRE(problem.num_devices() == 4);
  REQUIRE(problem.unit_x().rows() == problem.num_units());
  REQUIRE(problem.unit_x().cols() == learned::kUnitFeatures);
  REQUIRE(problem.pair_x().rows() == problem.num_units() * 4);
  REQUIRE(problem.unit_x().allFinite());
  REQUIRE(problem.device_x().allFinite());
  REQUIRE(problem.pair_x().allFinite());
  // Identical GPUs: the same compute and memory features (links may differ), and every pair allowed.
  REQUIRE(problem.device_x().row(0).head(4) == problem.device_x().row(3).head(4));
  REQUIRE(problem.allowed().all());

  // Neighbourhoods are symmetric and never hold the unit itself.
  const autodiff::Csr& nb = *problem.neighbors();
  for (int32_t u = 0; u < nb.rows; ++u)
    for (int32_t j = nb.offsets[u]; j < nb.offsets[u + 1]; ++j) {
      const int32_t v = nb.indices[j];
      REQUIRE(v != u);
      const auto row = std::span(nb.indices).subspan(nb.offsets[v], nb.offsets[v + 1] - nb.offsets[v]);
      REQUIRE(std::find(row.begin(), row.end(), u) != row.end());
    }

  // The op placement keeps each unit (forward, backward and update ops) on one device.
  std::vector<int32_t> unit_device(problem.num_units());
  for (int32_t u = 0; u < problem.num_units(); ++u) unit_device[u] = u % 4;
  const std::vector<int32_t> device_of = problem.expand(unit_device);
  REQUIRE_NOTHROW(simulator.check_placement(device_of));
  for (graphs::OpId f = 0; f < forward.num_ops(); ++f) REQUIRE(device_of[forward.num_ops() + f] == device_of[f]);
}

TEST_CASE("learned::Problem: features grow with FLOPs and devices differ by kind", "[learned]") {
  graphs::GraphBuilder b("pair");
  graphs::OpSpec small{.name = "small", .type = "MatMul", .flops = 1e6, .output_bytes = 1e3};
  graphs::OpSpec big{.name = "big", .type = "MatMul", .flops = 1e10, .output_bytes = 1e3, .pinned_kind = "cpu"};
  const auto a = b.add_op(small);
  const auto c = b.add_op(big);
  b.add_edge(a, c, 1e3);
  const graphs::Graph g = std::move(b).build();
  const sim::Cluster cluster = sim::make_preset("cpu-gpu-1");
  const sim::Simulator simulator(g, cluster);
  const learned::Problem problem(simulator);

  REQUIRE(problem.unit_x()(1, 0) > problem.unit_x()(0, 0));  // log FLOPs
  REQUIRE(problem.unit_type()[0] == problem.unit_type()[1]);
  REQUIRE(problem.unit_type()[0] == learned::op_type_bucket("MatMul"));
  int cpu = -1;
  for (int32_t d = 0; d < cluster.num_devices(); ++d)
    if (cluster.device(d).kind == "cpu") cpu = d;
  REQUIRE(cpu >= 0);
  REQUIRE(problem.device_x()(cpu, 6) == 1.f);
  REQUIRE(problem.device_x()(1 - cpu, 6) == 0.f);
  // The pinned op may only go to the CPU; its other pair row is all zeros.
  REQUIRE(problem.allowed()(1, cpu));
  REQUIRE_FALSE(problem.allowed()(1, 1 - cpu));
  REQUIRE(problem.pair_x().row(1 * 2 + (1 - cpu)).isZero());
  REQUIRE(problem.out_bytes(0) == 1e3);
  REQUIRE(problem.out_bytes(1) == 0);
}
