#include <catch2/catch.hpp>

#include <cmath>

#include "graphs/msr.h"
#include "sim/cost_model.h"
#include "sim/pipeline.h"
#include "sim/presets.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

const std::string kMsrDir = std::string(PLACELAB_SHARED_DATA) + "/msr-dnn-partitioning";

}  // namespace

TEST_CASE("sim::max_load: the expert splits give the README's expert values", "[sim][msr]") {
  struct Case {
    std::string instance, split;
    double expert_ms;
  };
  const std::vector<Case> cases = {
      {"bert24_inference", "bert24_inference", 20.084},   {"bert24_training", "bert24_training", 49.4049},
      {"gnmt_inference", "gnmt_inference", 46.2085},      {"gnmt_training", "gnmt_training", 137.154},
      {"resnet50_inference", "resnet50_inference", 43.9183}, {"resnet50_training", "resnet50_inference", 112.108},
  };
  for (const Case& c : cases) {
    INFO(c.instance);
    graphs::MsrInstance inst = graphs::read_msr(kMsrDir + "/throughput-inputs/LayerGraphs/" + c.instance + ".json");
    graphs::MsrSplit split = graphs::read_msr_split(kMsrDir + "/human-experts/" + c.split + "_expert.json", inst);
    Cluster cluster = msr_cluster(static_cast<int>(split.accelerators.size()), static_cast<int>(split.cpus.size()),
                                  inst.accelerator_memory_bytes);
    Simulator sim(inst.graph, cluster);
    MaxLoadResult r = max_load(sim, graphs::split_placement(split, inst));
    CHECK(r.max_load_s / graphs::kMsrSecondsPerUnit == Approx(c.expert_ms).epsilon(1e-4));
    CHECK(r.load_s[r.bottleneck_device] == r.max_load_s);
    CHECK(r.comm_s.back() == 0);  // the CPU pays no communication
    // One accelerator holding everything: no communication at all.
    std::vector<int32_t> one(inst.graph.num_ops(), 0);
    for (graphs::OpId op = 0; op < inst.graph.num_ops(); ++op)
      if (inst.graph.pinned_kind(op) == "cpu") one[op] = cluster.num_devices() - 1;
    MaxLoadResult single = max_load(sim, one);
    CHECK(single.contiguous);
    Cluster allowed = msr_cluster(inst);  // the instance's own limits
    CHECK(allowed.num_devices() == inst.max_accelerators + inst.max_cpus);
    CHECK(allowed.device(0).memory_bytes == inst.accelerator_memory_bytes);
  }
}

TEST_CASE("sim::max_load: compute plus communication per device, memory and contiguity", "[sim]") {
  graphs::GraphBuilder b("chain");
  graphs::OpSpec a = op("a", 1, 100);
  a.param_bytes = 60;
  b.add_op(a);
  b.add_op(op("b", 2, 100));
  b.add_op(op("c", 1));
  b.add_edge(0, 1, 100);
  b.add_edge(1, 2, 100);
  graphs::Graph g = std::move(b).build();
  Cluster c(ClusterSpec{.name = "pair",
                        .devices = {unit_device("d0", 50), unit_device("d1")},
                        .links = {link("l", "d0", "d1", 100, 0.5)}});
  Simulator sim(g, c);
  // a, c on d0 and b on d1: two crossings of 1.5 s each; d0 sends one and receives one.
  MaxLoadResult r = max_load(sim, std::vector<int32_t>{0, 1, 0});
  CHECK(r.compute_s == std::vector<double>{2, 2});
  CHECK(r.comm_s == std::vector<double>{3, 3});
  CHECK(r.max_load_s == 5);
  CHECK(r.bottleneck_device == 0);
  CHECK_FALSE(r.fits);
  CHECK(r.excess_bytes[0] == 10);
  CHECK_FALSE(r.contiguous);  // a -> b -> c leaves d0 and comes back
  CHECK(max_load(sim, std::vector<int32_t>{0, 0, 1}).contiguous);
}

TEST_CASE("sim::simulate_stream: the steady-state period is the bottleneck device's load", "[sim]") {
  graphs::GraphBuilder b("pipe");
  b.add_op(op("a", 1));
  b.add_op(op("b", 2));
  b.add_op(op("c", 1));
  b.add_edge(0, 1, 0);  // control edges: no transfers
  b.add_edge(1, 2, 0);
  graphs::Graph g = std::move(b).build();
  Cluster c(ClusterSpec{.name = "three",
                        .devices = {unit_device("d0"), unit_device("d1"), unit_device("d2")},
                        .links = {link("l0", "d0", "sw", 1, 0), link("l1", "d1", "sw", 1, 0), link("l2", "d2", "sw", 1, 0)}});
  Simulator sim(g, c);
  std::vector<int32_t> place{0, 1, 2};
  StreamResult s = simulate_stream(sim, place, 10);
  CHECK(s.single_s == 4);
  CHECK(s.makespan_s == 1 + 2 * 10 + 1);
  CHECK(s.time_per_batch_s == 2);
  CHECK(s.time_per_batch_s == max_load(sim, place).max_load_s);
  CHECK_THROWS_WITH(simulate_stream(sim, place, 0), Catch::Contains("need at least 1"));
}

TEST_CASE("sim::simulate_stream: stages of several ops pipeline micro-batches, parameters are held once", "[sim]") {
  // a -> b on d0, c -> d on d1, 1 s each; a holds 100 bytes of parameters. By ready time alone d0 would
  // run a of every micro-batch before any b (all a's are ready at 0) and d1 would start after ~M s;
  // micro-batch order gives a period of 2 s, the max load.
  graphs::GraphBuilder b("stages");
  for (const char* name : {"a", "b", "c", "d"}) {
    graphs::OpSpec spec = op(name, 1);
    if (spec.name == "a") spec.param_bytes = 100;
    b.add_op(spec);
  }
  b.add_edge(0, 1, 0);
  b.add_edge(1, 2, 0);
  b.add_edge(2, 3, 0);
  graphs::Graph g = std::move(b).build();
  Cluster c(ClusterSpec{.name = "two",
                        .devices = {unit_device("d0"), unit_device("d1")},
                        .links = {link("l0", "d0", "sw", 1, 0), link("l1", "d1", "sw", 1, 0)}});
  Simulator sim(g, c);
  std::vector<int32_t> place{0, 0, 1, 1};
  for (int32_t m : {1, 2, 10}) {
    INFO(m);
    StreamResult s = simulate_stream(sim, place, m);
    CHECK(s.single_s == 4);
    CHECK(s.makespan_s == 4 + 2 * (m - 1));
    CHECK(s.time_per_batch_s == (m == 1 ? 4 : 2));
    CHECK(s.last.device_peak_bytes[0] == 100);
  }
  CHECK(max_load(sim, place).max_load_s == 2);

  // Op times of a cost model that knows ops by name (a profile) carry over to the stream's copies.
  auto profile = profile_from_json(nlohmann::json::parse(R"({"format": "placelab.profile", "version": 1,
      "entries": [{"device_kind": "unit", "op": "b", "time_s": 3}]})"), "p.json", default_cost_model());
  Simulator profiled(g, c, profile);
  REQUIRE(profiled.simulate(place).step_time_s == 6);
  StreamResult s = simulate_stream(profiled, place, 4);
  CHECK(s.single_s == 6);
  CHECK(s.time_per_batch_s == 4);  // d0 runs a (1 s) and b (3 s) per micro-batch
}
