// IncrementalSimulator: moves, group moves and undo equal full simulations bit for bit; moves within a
// limit stop only when the step time exceeds it, and resume or revert exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "graphs/error.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

TEST_CASE("sim::IncrementalSimulator: every move equals a full simulation, bit for bit", "[sim]") {
  graphs::Graph g = random_dag(300, 11);
  const std::vector<std::pair<const char*, SimOptions>> variants = {
      {"v100-nvlink-4", {}},
      {"placeto-4", {}},
      {"v100-nvlink-4", {.priority = Priority::rank}},
      {"v100-nvlink-4", {.share_bandwidth = true}},
      {"placeto-4", {.priority = Priority::rank, .share_bandwidth = true}}};
  for (const auto& [preset, options] : variants) {
    Cluster c = make_preset(preset);
    Simulator sim(g, c, default_cost_model(), options);
    std::mt19937_64 rng(11);
    IncrementalSimulator inc(sim, random_placement(sim, rng), 8);
    CHECK(inc.result().step_time_s == sim.simulate(inc.placement()).step_time_s);
    double replayed = 0;
    for (int move = 0; move < 60; ++move) {
      // Ops late in the graph, early ones, and sources (op 0) all get moved.
      graphs::OpId op = move % 10 == 0 ? 0 : static_cast<graphs::OpId>(rng() % static_cast<uint64_t>(g.num_ops()));
      int32_t device = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.num_devices()));
      const SimResult& r = inc.move(op, device);
      replayed += inc.last_replayed_fraction();
      require_same(r, sim.simulate(inc.placement()));
    }
    CHECK(replayed / 60 < 0.9);  // the saved prefix is really reused
  }
  Cluster c = make_preset("a100-2");
  Simulator sim(g, c);
  IncrementalSimulator inc(sim, std::vector<int32_t>(g.num_ops(), 0));
  CHECK_THROWS_WITH(inc.move(5, 2), Catch::Contains("op \"op5\" is on device 2"));
  CHECK(inc.placement()[5] == 0);  // a refused move changes nothing
}

TEST_CASE("sim::IncrementalSimulator: undo reverts the last move exactly, and later moves stay exact", "[sim]") {
  graphs::Graph g = random_dag(300, 13);
  for (const SimOptions& options : {SimOptions{}, SimOptions{.priority = Priority::rank, .share_bandwidth = true}}) {
    Cluster c = make_preset("v100-nvlink-4");
    Simulator sim(g, c, default_cost_model(), options);
    std::mt19937_64 rng(13);
    IncrementalSimulator inc(sim, random_placement(sim, rng), 4);
    CHECK_THROWS_WITH(inc.undo(), Catch::Contains("nothing to revert"));
    for (int step = 0; step < 40; ++step) {
      const std::vector<int32_t> before(inc.placement().begin(), inc.placement().end());
      const SimResult expected = inc.result();
      // Single ops (sources too) and groups of three, as annealing moves them.
      std::vector<graphs::OpId> ops = {step % 8 == 0 ? 0 : static_cast<graphs::OpId>(rng() % 300)};
      if (step % 3 == 1) ops.push_back(static_cast<graphs::OpId>(rng() % 300)), ops.push_back(ops[0] / 2);
      const auto device = static_cast<int32_t>(rng() % 4);
      inc.move(ops, device);
      if (rng() % 2 == 0) {
        require_same(inc.undo(), expected);
        CHECK(std::equal(before.begin(), before.end(), inc.placement().begin()));
        CHECK_THROWS_WITH(inc.undo(), Catch::Contains("nothing to revert"));
      }
      require_same(inc.result(), sim.simulate(inc.placement()));
    }
    // A move that changes nothing is undone as nothing.
    const std::vector<int32_t> now(inc.placement().begin(), inc.placement().end());
    inc.move(7, now[7]);
    require_same(inc.undo(), sim.simulate(now));
    CHECK_THROWS(inc.undo());
  }
}

TEST_CASE("sim::IncrementalSimulator: a group move equals a full simulation and replays once", "[sim]") {
  graphs::Graph g = random_dag(300, 12);
  for (const auto& [preset, options] : std::vector<std::pair<const char*, SimOptions>>{
           {"v100-nvlink-4", {}}, {"placeto-4", {.priority = Priority::rank, .share_bandwidth = true}}}) {
    Cluster c = make_preset(preset);
    Simulator sim(g, c, default_cost_model(), options);
    std::mt19937_64 rng(12);
    const std::vector<int32_t> start = random_placement(sim, rng);
    IncrementalSimulator group(sim, start, 8), one_by_one(sim, start, 8);
    for (int move = 0; move < 30; ++move) {
      // 1-4 ops, sometimes one listed twice or already on the device, sometimes a source (op 0).
      std::vector<graphs::OpId> ops;
      for (uint64_t k = 0, size = 1 + rng() % 4; k < size; ++k)
        ops.push_back(static_cast<graphs::OpId>(rng() % static_cast<uint64_t>(g.num_ops())));
      if (move % 7 == 3) ops.push_back(ops.front());
      if (move % 10 == 5) ops.push_back(0);
      const auto device = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.num_devices()));
      const SimResult& r = group.move(ops, device);
      double separate = 0;
      for (graphs::OpId op : ops) {
        one_by_one.move(op, device);
        separate += one_by_one.placement()[op] == device ? one_by_one.last_replayed_fraction() : 0;
      }
      REQUIRE(std::equal(group.placement().begin(), group.placement().end(), one_by_one.placement().begin()));
      for (graphs::OpId op : ops) REQUIRE(group.placement()[op] == device);
      require_same(r, sim.simulate(group.placement()));
      require_same(r, one_by_one.result());
      // One replay from the earliest of the ops' first inputs: never more than the per-op replays together.
      CHECK(group.last_replayed_fraction() <= separate + 1e-12);
    }
  }
  Cluster c = make_preset("a100-2");
  Simulator sim(g, c);
  IncrementalSimulator inc(sim, std::vector<int32_t>(g.num_ops(), 0));
  const std::vector<graphs::OpId> ops{3, 5, 7};
  CHECK_THROWS_WITH(inc.move(ops, 2), Catch::Contains("is on device 2"));
  for (graphs::OpId op : ops) CHECK(inc.placement()[op] == 0);  // a refused group move changes none of them
  CHECK_THROWS_WITH(inc.move(std::vector<graphs::OpId>{3, 300}, 1), Catch::Contains("op 300 is out of range"));
  CHECK(inc.placement()[3] == 0);
}

TEST_CASE("sim::IncrementalSimulator: a move within a limit stops only past it, and resumes or reverts exactly",
          "[sim]") {
  constexpr double kNever = std::numeric_limits<double>::infinity();
  graphs::Graph g = random_dag(300, 14);
  for (const auto& [preset, options] : std::vector<std::pair<const char*, SimOptions>>{
           {"v100-nvlink-4", {}}, {"cpu-gpu-2", {}}, {"placeto-4", {.priority = Priority::rank, .share_bandwidth = true}}}) {
    Cluster c = make_preset(preset);
    Simulator sim(g, c, default_cost_model(), options);
    std::mt19937_64 rng(14);
    IncrementalSimulator inc(sim, random_placement(sim, rng), 4);
    int stops = 0;
    for (int step = 0; step < 80; ++step) {
      const std::vector<int32_t> before(inc.placement().begin(), inc.placement().end());
      const SimResult old = inc.result();
      std::vector<graphs::OpId> ops = {step % 9 == 0 ? 0 : static_cast<graphs::OpId>(rng() % 300)};
      if (step % 4 == 1) ops.push_back(static_cast<graphs::OpId>(rng() % 300));
      const auto device = static_cast<int32_t>(rng() % static_cast<uint64_t>(c.num_devices()));
      std::vector<int32_t> after = before;
      for (graphs::OpId op : ops) after[op] = device;
      const SimResult expected = sim.simulate(after);
      // Limits below, at and above the new step time, and none.
      const double factors[] = {0.3, 0.8, 0.97, 1.0, 1.03, kNever};
      const double limit = expected.step_time_s * factors[rng() % 6];
      const SimResult* r = inc.move_within(ops, device, limit);
      CHECK(std::equal(after.begin(), after.end(), inc.placement().begin()));
      if (r) {
        require_same(*r, expected);
      } else {
        ++stops;
        REQUIRE(expected.step_time_s > limit);  // a stop is never wrong
        require_same(inc.result(), old);  // still the last complete result
        CHECK_THROWS_WITH(inc.move(ops, device), Catch::Contains("resume() or undo()"));
        switch (rng() % 3) {
          case 0:  // reverted as if never made
            require_same(inc.undo(), old);
            CHECK(std::equal(before.begin(), before.end(), inc.placement().begin()));
            break;
          case 1:  // resumed to the end
            REQUIRE(inc.resume(kNever) != nullptr);
            require_same(inc.result(), expected);
            break;
          default:  // resumed under the same limit: stops again, and then undone
            CHECK(inc.resume(limit) == nullptr);
            require_same(inc.undo(), old);
        }
      }
      // Whatever happened, later moves stay exact.
      require_same(inc.result(), sim.simulate(inc.placement()));
    }
    CHECK(stops >= 10);
    CHECK_THROWS_WITH(inc.resume(kNever), Catch::Contains("no move stopped"));
    CHECK_THROWS_WITH(inc.move_within(std::vector<graphs::OpId>{1}, 1 - inc.placement()[1] % 2, std::nan("")),
                      Catch::Contains("NaN"));
  }
}

TEST_CASE("sim::Simulator::runs counts every simulation: single, batched, incremental", "[sim]") {
  graphs::Graph g = random_dag(40, 5);
  Cluster c = make_preset("v100-nvlink-4");
  Simulator sim(g, c);
  std::mt19937_64 rng(5);
  const std::vector<int32_t> p = random_placement(sim, rng);
  CHECK(sim.runs() == 0);
  sim.simulate(p);
  CHECK(sim.runs() == 1);
  sim.simulate_batch(std::vector<std::vector<int32_t>>(3, p));
  CHECK(sim.runs() == 4);
  IncrementalSimulator inc(sim, p);
  CHECK(sim.runs() == 5);  // its first, full run
  inc.move(3, (p[3] + 1) % 4);
  inc.undo();              // reverts without simulating
  inc.move(3, p[3]);       // no op changes device: nothing to simulate
  CHECK(sim.runs() == 6);
  CHECK(inc.move_within(std::vector<graphs::OpId>{0}, (p[0] + 1) % 4, 0.0) == nullptr);  // stopped at once
  inc.resume(std::numeric_limits<double>::infinity());  // the same run, continued
  CHECK(sim.runs() == 7);
  Simulator moved(std::move(sim));
  CHECK(moved.runs() == 7);
}
