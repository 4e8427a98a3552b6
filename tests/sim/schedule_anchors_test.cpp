// The benchmark's lean loops (bench/schedule_anchors.h) compute the engine's schedule, and with memory its
// peaks, exactly: bm_sim checks this on its own graph before timing, and this test on random graphs with
// control edges, parameters and temporaries and on a training graph, on clusters of 4 and 8 devices.
#include <catch2/catch.hpp>

#include <random>

#include "bench/schedule_anchors.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "test_util.h"

using namespace placelab;

namespace {

void check_anchors(const graphs::Graph& g, const std::string& preset) {
  const sim::Cluster cluster = sim::make_preset(preset);
  const sim::Simulator engine(g, cluster);
  bench::ScheduleOnly only(engine);
  bench::ScheduleLean lean(engine);
  std::mt19937_64 rng(7);
  std::vector<std::vector<int32_t>> placements;
  for (int i = 0; i < 8; ++i) placements.push_back(sim::random_placement(engine, rng));
  std::vector<int32_t> blocks(g.num_ops());  // the topological order cut into equal blocks
  for (graphs::OpId op = 0; op < g.num_ops(); ++op)
    blocks[op] = static_cast<int32_t>(static_cast<int64_t>(g.topo_rank(op)) * cluster.num_devices() / g.num_ops());
  placements.push_back(blocks);
  for (const auto& place : placements) {
    bench::StartTimes expected(g.num_ops());
    const sim::SimResult r = engine.simulate(place, &expected);
    std::vector<double> start(g.num_ops()), peak(cluster.num_devices());
    only.run(place.data(), start.data());
    CHECK(start == expected.start_s);
    lean.run(place.data(), start.data());
    CHECK(start == expected.start_s);
    CHECK(lean.run_with_memory(place.data(), peak.data()) == r.step_time_s);
    CHECK(peak == r.device_peak_bytes);
  }
}

}  // namespace

TEST_CASE("the lean schedule loops give the engine's op starts, step time and peaks, bit for bit") {
  SECTION("random graphs with control edges") {
    for (uint64_t seed : {1, 2, 3}) {
      const graphs::Graph g = sim::testing::random_dag(400, seed);
      check_anchors(g, "v100-nvlink-8");
      check_anchors(g, "v100-pcie-4");
    }
  }
  SECTION("a training graph") {
    const graphs::Graph g = graphs::expand_training(graphs::zoo::make_model("gnmt", {{"layers", 2}}));
    check_anchors(g, "v100-nvlink-8");
    check_anchors(g, "k80-8");
  }
}
