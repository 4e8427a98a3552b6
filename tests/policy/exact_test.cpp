// The exact placer (policy/classic/exact.h): the same optimum as brute force over every unit placement on
// random tiny instances across seeds (ties, memory, pins, identical devices, every engine mode), with and
// without symmetry breaking; an early stop reports a bound that brute force confirms; the placer's options
// and info.
#include <algorithm>
#include <cmath>
#include <tuple>

#include <catch2/catch.hpp>

#include "policy/classic/bounds.h"
#include "policy/classic/exact.h"
#include "sim/presets.h"
#include "../test_util.h"
#include "tiny_instances.h"

using namespace placelab;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_against_brute_force(uint64_t seed, bool symmetry, bool starts = true) {
  const testing::TinyInstance inst = testing::tiny_instance(seed, 3, 7, 4);
  sim::Simulator sim(inst.graph, inst.cluster, sim::default_cost_model(), inst.options);
  policy::Units units(sim);
  const testing::BruteForce bf = testing::brute_force(units);
  policy::ExactOptions options;
  options.time_limit_s = 0;
  options.symmetry = symmetry;
  options.starts = starts;
  const policy::ExactResult r = policy::solve_exact(sim, options, seed);
  INFO("seed " << seed << ", symmetry " << symmetry << ": " << units.num_units() << " units on "
                << units.num_devices() << " devices, brute force " << bf.best_s << ", exact " << r.step_time_s);
  REQUIRE(r.proven);
  if (bf.best_s == kInf) {
    CHECK(r.device_of.empty());
    return;
  }
  REQUIRE_FALSE(r.device_of.empty());
  const sim::SimResult check = sim.simulate(r.device_of);
  CHECK_FALSE(check.oom);
  CHECK(check.step_time_s == r.step_time_s);
  CHECK(r.step_time_s <= bf.best_s * (1 + 1e-9));
  CHECK(r.bound_s == r.step_time_s);
  CHECK(r.root_bound_s <= bf.best_s * (1 + 1e-9));
}

}  // namespace

TEST_CASE("policy::exact: the brute-force optimum on random tiny instances", "[policy][exact]") {
  int64_t with_classes = 0;
  for (uint64_t seed = 1; seed <= testing::seeds(200); ++seed) {
    check_against_brute_force(seed, true);
    const testing::TinyInstance inst = testing::tiny_instance(seed, 3, 7, 4);
    sim::Simulator sim(inst.graph, inst.cluster);
    policy::Units units(sim);
    policy::StepBound bound(units);
    const auto cls = bound.symmetry_class();
    with_classes += *std::max_element(cls.begin(), cls.end()) + 1 < units.num_devices();
  }
  CHECK(with_classes > static_cast<int64_t>(testing::seeds(200) / 5));  // the symmetry is really exercised
  for (uint64_t seed = 1; seed <= testing::seeds(60); ++seed) check_against_brute_force(seed, false);
  // The search alone, without the heuristics' start.
  for (uint64_t seed = 1; seed <= testing::seeds(60); ++seed) check_against_brute_force(seed, true, false);
}

TEST_CASE("policy::exact: relabellings of alike devices are simulated, since the engine breaks ties by device index",
          "[policy][exact]") {
  // a and b (1 s each, on GPUs) end at 1 and both send 100 B into the CPU's link (100 B/s): the transfer of the
  // lower-numbered GPU goes first. x (10 s) reads a, y (1 s) reads b, z (0.5 s, GPU) reads y. With b on gpu0
  // y runs 2-3 and the step is 13; with a on gpu0, y waits for x and the step is 14.5. The search places a
  // first (more work than z), on gpu0 (alike GPUs in index order): the optimum is the other labelling.
  graphs::GraphBuilder b("tie");
  const std::vector<std::tuple<const char*, const char*, double>> ops = {
      {"a", "gpu", 1}, {"b", "gpu", 1}, {"x", "cpu", 10}, {"y", "cpu", 1}, {"z", "gpu", 0.5}};
  for (const auto& [name, kind, t] : ops) {
    graphs::OpSpec op{.name = name, .type = "Op", .pinned_kind = kind};
    op.measured_s = {{"gpu", t}, {"cpu", t}};
    b.add_op(std::move(op));
  }
  b.add_edge(0, 2, 100);
  b.add_edge(1, 3, 100);
  b.add_edge(3, 4, 100);
  graphs::Graph g = std::move(b).build();
  sim::ClusterSpec spec{.name = "tie"};
  for (const char* name : {"gpu0", "gpu1", "cpu"}) {
    sim::Device d;
    d.name = name;
    d.kind = std::string(name).substr(0, 3);
    d.peak_flops_per_s = d.memory_bandwidth_bytes_per_s = 1;
    d.memory_bytes = 1e9;
    spec.devices.push_back(d);
    spec.links.push_back({.name = d.name + "-sw", .end_a = d.name, .end_b = "sw", .bandwidth_bytes_per_s = 100});
  }
  sim::Cluster c(std::move(spec));
  sim::Simulator sim(g, c);
  CHECK(sim.simulate(std::vector<int32_t>{1, 0, 2, 2, 0}).step_time_s == Approx(13));
  CHECK(sim.simulate(std::vector<int32_t>{0, 1, 2, 2, 1}).step_time_s == Approx(14.5));
  // Without the heuristics' start (they find it), so that only the relabelled leaf can.
  const policy::ExactResult r = policy::solve_exact(sim, {.time_limit_s = 0, .starts = false}, 1);
  CHECK(r.proven);
  CHECK(r.step_time_s == Approx(13));
  CHECK(r.symmetry_class == std::vector<int32_t>{0, 0, 1});
}

TEST_CASE("policy::exact: an early stop reports a bound that brute force confirms", "[policy][exact]") {
  int64_t stopped = 0;
  for (uint64_t seed = 1; seed <= testing::seeds(80); ++seed) {
    const testing::TinyInstance inst = testing::tiny_instance(seed, 6, 8, 3);
    sim::Simulator sim(inst.graph, inst.cluster, sim::default_cost_model(), inst.options);
    policy::Units units(sim);
    const testing::BruteForce bf = testing::brute_force(units);
    policy::ExactOptions options;
    options.time_limit_s = 0;
    options.max_nodes = 6;
    const policy::ExactResult r = policy::solve_exact(sim, options, seed);
    INFO("seed " << seed << ": bound " << r.bound_s << ", found " << r.step_time_s << ", optimum " << bf.best_s);
    CHECK(r.bound_s <= bf.best_s * (1 + 1e-9));
    CHECK(r.step_time_s >= bf.best_s * (1 - 1e-12));
    if (!r.proven) {
      ++stopped;
      CHECK(r.stopped == "max_nodes");
      CHECK(r.nodes >= 6);
      CHECK(r.bound_s <= r.step_time_s);
    }
  }
  CHECK(stopped > static_cast<int64_t>(testing::seeds(80) / 8));
}

TEST_CASE("policy::exact: the placer's options and info", "[policy][exact]") {
  const testing::TinyInstance inst = testing::tiny_instance(7, 5, 6, 3);
  sim::Simulator sim(inst.graph, inst.cluster);
  auto placer = policy::make_placer("exact");
  policy::PlaceRequest request{sim, {{"time_limit_s", 0}}, 1};
  const policy::PlaceResult r = placer->place(request);
  REQUIRE_NOTHROW(sim.check_placement(r.device_of));
  CHECK(r.info["proven"] == true);
  CHECK(r.info["step_time_s"].get<double>() == sim.simulate(r.device_of).step_time_s);
  CHECK(r.info["bound_s"] == r.info["step_time_s"]);
  CHECK(r.info["gap"].get<double>() == 0);
  for (const char* key : {"nodes", "leaves", "simulations", "units", "branch_units", "root_bound_s", "start"})
    CHECK(r.info.contains(key));
  policy::PlaceRequest bad{sim, {{"max_node", 5}}, 1};
  CHECK_THROWS_WITH(placer->place(bad), Catch::Contains("max_node") && Catch::Contains("max_nodes"));
  policy::PlaceRequest negative{sim, {{"time_limit_s", -1}}, 1};
  CHECK_THROWS_WITH(placer->place(negative), Catch::Contains("time_limit_s"));
  sim::Cluster big = sim::make_preset("h100-nodes-9x8");  // 72 devices
  sim::Simulator on_big(inst.graph, big);
  policy::PlaceRequest too_many{on_big, {{"time_limit_s", 0}}, 1};
  CHECK_THROWS_WITH(placer->place(too_many), Catch::Contains("72 devices") && Catch::Contains("at most 64"));
}

TEST_CASE("policy::exact: no placement fits in memory is an error that says so", "[policy][exact]") {
  graphs::GraphBuilder b("heavy");
  for (int i = 0; i < 2; ++i) {
    graphs::OpSpec op{.name = fmt::format("op{}", i), .type = "Op", .param_bytes = 60};
    op.measured_s = {{"a", 1.0}};
    b.add_op(std::move(op));
  }
  graphs::Graph g = std::move(b).build();
  sim::ClusterSpec spec{.name = "small"};
  for (int d = 0; d < 2; ++d) {
    sim::Device dev;
    dev.name = fmt::format("d{}", d);
    dev.kind = "a";
    dev.peak_flops_per_s = dev.memory_bandwidth_bytes_per_s = 1;
    dev.memory_bytes = 50;
    spec.devices.push_back(dev);
    spec.links.push_back({.name = fmt::format("l{}", d), .end_a = dev.name, .end_b = "sw", .bandwidth_bytes_per_s = 1});
  }
  sim::Cluster c(std::move(spec));
  sim::Simulator sim(g, c);
  policy::PlaceRequest request{sim};
  CHECK_THROWS_WITH(policy::make_placer("exact")->place(request),
                    Catch::Contains("no placement") && Catch::Contains("fits in memory"));
}
