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
