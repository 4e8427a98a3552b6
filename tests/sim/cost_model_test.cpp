#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/cost_model.h"
#include "sim/engine.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

graphs::Graph two_ops() {
  graphs::GraphBuilder b("two");
  // 2 GFLOP over 1 GB: compute-bound on the device below; 1 MFLOP over 1 GB: memory-bound.
  b.add_op(graphs::OpSpec{.name = "mm", .type = "MatMul", .flops = 2e9, .bytes_read = 6e8, .bytes_written = 4e8});
  b.add_op(graphs::OpSpec{.name = "add", .type = "Add", .flops = 1e6, .bytes_read = 6e8, .bytes_written = 4e8,
                          .measured_s = {{"gpu", 0.125}}});
  b.add_edge(0, 1, 4e8);
  return std::move(b).build();
}

Device gpu() {
  return Device{.name = "g", .kind = "gpu", .peak_flops_per_s = 1e12, .memory_bandwidth_bytes_per_s = 1e12,
                .memory_bytes = 1e10, .launch_overhead_s = 1e-5, .efficiency = 0.5};
}

}  // namespace

TEST_CASE("sim::RooflineModel: max of compute and memory time over effective rates, plus launch", "[sim]") {
  graphs::Graph g = two_ops();
  RooflineModel roofline;
  CHECK(roofline.op_time_s(g, 0, gpu()) == Approx(2e9 / 0.5e12 + 1e-5));  // 4 ms compute > 2 ms memory
  CHECK(roofline.op_time_s(g, 1, gpu()) == Approx(1e9 / 0.5e12 + 1e-5));  // memory-bound
  RooflineModel typed({.type_efficiency = {{"MatMul", 0.5}}, .half_efficiency_flops = 2e9});
  // e = 0.5 * 0.5 * 2e9 / (2e9 + 2e9) = 0.125
  CHECK(typed.op_time_s(g, 0, gpu()) == Approx(2e9 / 0.125e12 + 1e-5));
  CHECK_THROWS_WITH(RooflineModel({.type_efficiency = {{"X", 0}}}), Catch::Contains("must be in (0, 1]"));
}

TEST_CASE("sim::ProfileModel: per-op entries, then per-type, then the fallback", "[sim]") {
  graphs::Graph g = two_ops();
  auto roofline = std::make_shared<RooflineModel>();
  auto profile = profile_from_json(io::parse_json(R"({"format": "placelab.profile", "version": 1, "entries": [
      {"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.5},
      {"device_kind": "gpu", "op": "mm", "time_s": 0.25},
      {"device_kind": "cpu", "op_type": "Add", "time_s": 9}]})", "p.json"), "p.json", roofline);
  CHECK(profile->op_time_s(g, 0, gpu()) == 0.25);
  CHECK(profile->op_time_s(g, 1, gpu()) == roofline->op_time_s(g, 1, gpu()));
  Device cpu = gpu();
  cpu.kind = "cpu";
  CHECK(profile->op_time_s(g, 1, cpu) == 9);
  CHECK(profile_from_json(profile->to_json(), "again", roofline)->size() == 3);
  CHECK_THROWS_WITH(profile_from_json(io::parse_json(R"({"format": "placelab.profile", "version": 1, "entries": [
      {"device_kind": "gpu", "op": "mm", "op_type": "MatMul", "time_s": 1}]})", "p.json"), "p.json", roofline),
                    Catch::Contains("p.json: entries[0]: give exactly one of"));
  CHECK_THROWS_WITH(profile_from_json(io::parse_json(R"({"format": "placelab.profile", "version": 1, "entries": [
      {"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.5}, {"device_kind": "gpu", "op": "MatMul", "time_s": 1},
      {"device_kind": "gpu", "op_type": "MatMul", "time_s": 9}]})", "p.json"), "p.json", roofline),
                    Catch::Contains("p.json: entries[2]: repeats the time of op_type \"MatMul\" on \"gpu\" (entries[0])"));
  CHECK_THROWS_WITH(profile_from_json(io::parse_json(R"({"format": "placelab.profile", "version": 1, "entries": [
      {"device_kind": "", "op": "mm", "time_s": 1}]})", "p.json"), "p.json", roofline),
                    Catch::Contains("p.json: entries[0].device_kind: is empty"));
  CHECK_THROWS_WITH(profile_from_json(io::parse_json(R"({"format": "placelab.profile", "version": 1, "entries": [
      {"device_kind": "gpu", "op_type": "", "time_s": 1}]})", "p.json"), "p.json", roofline),
                    Catch::Contains("p.json: entries[0].op_type: is empty"));
}

TEST_CASE("sim::Simulator: measured times of the device's kind override the cost model exactly", "[sim]") {
  graphs::Graph g = two_ops();
  Device other = gpu();
  other.name = "h";
  other.kind = "tpu";
  Cluster c(ClusterSpec{.name = "c", .devices = {gpu(), other}, .links = {link("l", "g", "h", 1e9, 0)}});
  Simulator sim(g, c);
  CHECK(sim.op_time_s(1, 0) == 0.125);  // measured on "gpu", no launch overhead added
  CHECK(sim.op_time_s(1, 1) == Approx(1e9 / 0.5e12 + 1e-5));
  Simulator no_measured(g, c, default_cost_model(), SimOptions{.use_measured = false});
  CHECK(no_measured.op_time_s(1, 0) == Approx(1e9 / 0.5e12 + 1e-5));
}

TEST_CASE("sim::EfficiencyCurve: linear in log(size) between points, the end values beyond", "[sim]") {
  const EfficiencyCurve c{.size = {1e3, 1e5, 1e7}, .efficiency = {0.1, 0.5, 0.7}};
  CHECK(c.at(1) == 0.1);
  CHECK(c.at(1e3) == 0.1);
  CHECK(c.at(1e4) == Approx(0.3));   // halfway in log between 1e3 and 1e5
  CHECK(c.at(1e5) == Approx(0.5));
  CHECK(c.at(1e6) == Approx(0.6));
  CHECK(c.at(1e9) == 0.7);
  CHECK(EfficiencyCurve{.size = {5}, .efficiency = {0.25}}.at(1e9) == 0.25);
}

TEST_CASE("sim::RooflineModel: calibrated curves set the efficiency by op class and size", "[sim]") {
  graphs::GraphBuilder b("classes");
  b.add_op(graphs::OpSpec{.name = "small_mm", .type = "MatMul", .flops = 1e3, .bytes_read = 1, .bytes_written = 1});
  b.add_op(graphs::OpSpec{.name = "mid_mm", .type = "MatMul", .flops = 1e5, .bytes_read = 1, .bytes_written = 1});
  b.add_op(graphs::OpSpec{.name = "conv", .type = "Conv2D", .flops = 1e7, .bytes_read = 1, .bytes_written = 1});
  b.add_op(graphs::OpSpec{.name = "relu", .type = "Relu", .flops = 0, .bytes_read = 5e5, .bytes_written = 5e5});
  b.add_op(graphs::OpSpec{.name = "softmax", .type = "Softmax", .flops = 0, .bytes_read = 5e5, .bytes_written = 5e5});
  b.add_op(graphs::OpSpec{.name = "concat", .type = "Concat", .flops = 0, .bytes_read = 5e5, .bytes_written = 5e5});
  const graphs::Graph g = std::move(b).build();
  Device d{.name = "c", .kind = "cpu", .peak_flops_per_s = 1e9, .memory_bandwidth_bytes_per_s = 1e9, .memory_bytes = 1e9,
           .launch_overhead_s = 1e-6, .efficiency = 0.5};
  d.efficiency_curves = {{"gemm", {.size = {1e3, 1e7}, .efficiency = {0.1, 0.9}}},
                         {"elementwise", {.size = {1e6}, .efficiency = {0.8}}},
                         {"reduction", {.size = {1e6}, .efficiency = {0.2}}}};
  RooflineModel roofline({.half_efficiency_flops = 1e12});  // ignored where a curve gives the size's efficiency
  CHECK(roofline.op_time_s(g, 0, d) == Approx(1e3 / (1e9 * 0.1) + 1e-6));
  CHECK(roofline.op_time_s(g, 1, d) == Approx(1e5 / (1e9 * 0.5) + 1e-6));  // halfway in log: 0.5
  CHECK(roofline.op_time_s(g, 2, d) == Approx(1e7 / (1e9 * 0.9) + 1e-6));  // no "conv" curve: the "gemm" one
  CHECK(roofline.op_time_s(g, 3, d) == Approx(1e6 / (1e9 * 0.8) + 1e-6));
  CHECK(roofline.op_time_s(g, 4, d) == Approx(1e6 / (1e9 * 0.2) + 1e-6));  // its own class's curve
  CHECK(roofline.op_time_s(g, 5, d) == Approx(1e6 / (1e9 * 0.8) + 1e-6));  // no "movement" curve: "elementwise"
  d.efficiency_curves.clear();  // without curves: the device's efficiency and the size factor
  CHECK(roofline.op_time_s(g, 3, d) == Approx(1e6 / (1e9 * 0.5) + 1e-6));
}
