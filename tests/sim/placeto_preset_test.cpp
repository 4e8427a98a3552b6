// Golden tests of the `placeto` preset: Placeto's simulator's rules, one example each (docs/simulator.md,
// "Placeto's simulator"). tests/python/test_placeto_sim.py compares whole schedules with those rules.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "sim/engine.h"
#include "sim/presets.h"
#include "sim/trace.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

// Ops with measured times in microseconds on the preset's kind ("k80") and their output bytes.
struct Timed {
  std::string name;
  double us, out_bytes;
};

graphs::Graph timed_graph(const std::vector<Timed>& ops, const std::vector<std::pair<int, int>>& edges) {
  graphs::GraphBuilder b("placeto-golden");
  for (const Timed& t : ops) {
    graphs::OpSpec s = op(t.name, 0, t.out_bytes);
    s.measured_s = {{"k80", t.us * 1e-6}};
    b.add_op(std::move(s));
  }
  for (auto [src, dst] : edges) b.add_edge(src, dst, ops[src].out_bytes);
  return std::move(b).build();
}

// Start times in microseconds by op name, and the result.
struct Run {
  std::map<std::string, double> start_us;
  SimResult result;
};

Run run(const graphs::Graph& g, const Cluster& c, const std::vector<int32_t>& place, SimOptions options = {}) {
  Simulator sim(g, c, default_cost_model(), options);
  TraceRecorder trace(sim);
  Run out;
  out.result = sim.simulate(place, &trace);
  for (const auto& e : trace.ops()) out.start_us[g.op_name(e.op)] = e.start_s * 1e6;
  return out;
}

}  // namespace

TEST_CASE("placeto preset: one broadcast per tensor, a 5.7 us gap, the bus held 25 us more", "[sim][golden]") {
  graphs::Graph g = placeto_example_graph();
  Run r = run(g, make_preset("placeto-4"), {0, 1, 2, 0, 1});
  // a 0-10; one transfer to gpu1 and gpu2 10-20, bus0 busy until 45; d 15.7-20.7 (gap);
  // b 20-40, c 20-50; d's transfer waits for bus0: 45-55; e 55-56.
  CHECK(r.start_us["d"] == Approx(15.7));
  CHECK(r.start_us["b"] == Approx(20));
  CHECK(r.start_us["c"] == Approx(20));
  CHECK(r.start_us["e"] == Approx(55));
  CHECK(r.result.step_time_s == Approx(56e-6));
  CHECK(r.result.num_transfers == 2);
  CHECK(r.result.total_bytes_moved == 2 * 76000);
  CHECK(r.result.link_busy_s[0] == Approx(70e-6));  // 2 x (10 + 25) us
  // Placeto's run time: bus0 is free again at 55 + 25 = 80 (e's gap ends at 61.7).
  CHECK(r.result.busy_until_s == Approx(80e-6));
}

TEST_CASE("placeto preset: ops ready at one instant start in the order they were released", "[sim][golden]") {
  // a (10 us) feeds b (5 us) and c (50 us) on gpu0; c sends 76,000 B to d (10 us) on gpu1. Both are
  // released at 10 by a, b first by name: b 15.7-20.7, c 26.4-76.4, transfer -86.4, d 86.4-96.4.
  graphs::Graph g = timed_graph({{"a", 10, 8}, {"b", 5, 8}, {"c", 50, 76000}, {"d", 10, 8}}, {{0, 1}, {0, 2}, {2, 3}});
  const Cluster c = make_preset("placeto-2");
  const std::vector<int32_t> place{0, 0, 0, 1};
  Run fifo = run(g, c, place);
  CHECK(fifo.start_us["b"] == Approx(15.7));
  CHECK(fifo.start_us["d"] == Approx(86.4));
  CHECK(fifo.result.step_time_s == Approx(96.4e-6));
  CHECK(fifo.result.busy_until_s == Approx(111.4e-6));  // bus0 held until 86.4 + 25
  // The default priority starts c first (higher upward rank): d ends at 85.7.
  Run by_rank = run(g, c, place, SimOptions{.priority = Priority::ready_time});
  CHECK(by_rank.start_us["c"] == Approx(15.7));
  CHECK(by_rank.result.step_time_s == Approx(85.7e-6));
}

TEST_CASE("placeto preset: no gap after an op that takes no time, and its releases come after those due", "[sim][golden]") {
  // gpu0: w (1 us) 0-1, gap to 6.7; z (0 us, a source) runs at 6.7 and releases v at 6.7. gpu1: s (1 us)
  // sends 43,320 B (5.7 us) to u, which arrives at 6.7 too. u's release was due before 6.7, v's is made
  // at 6.7: u first although (z, v) sorts before (s, u) by name. z leaves no gap: u starts at 6.7.
  graphs::Graph g = timed_graph({{"w", 1, 8}, {"z", 0, 8}, {"s", 1, 43320}, {"v", 1, 8}, {"u", 1, 8}},
                                {{1, 3}, {2, 4}});
  Run r = run(g, make_preset("placeto-2"), {0, 0, 1, 0, 0});
  CHECK(r.start_us["z"] == Approx(6.7));
  CHECK(r.start_us["u"] == Approx(6.7));
  CHECK(r.start_us["v"] == Approx(13.4));  // after u and its gap
}

TEST_CASE("placeto preset: times add in microseconds, so ties exact in them stay ties", "[sim][golden]") {
  // gpu1: p (2 us) 0-2, gap, q (5 us) 7.7-12.7 releases x; gpu0: o (7 us) sends 43,320 B (5.7 us) to y,
  // arriving at 7 + 5.7 = 12.7. In microseconds both are ready at 12.7 exactly, and y goes first ((o, y)
  // sorts before (q, x)). Added in seconds, x would be ready 2e-21 s earlier and go first.
  graphs::Graph g = timed_graph({{"p", 2, 8}, {"q", 5, 8}, {"o", 7, 43320}, {"x", 1, 8}, {"y", 1, 8}},
                                {{0, 1}, {1, 3}, {2, 4}});
  const std::vector<int32_t> place{1, 1, 0, 1, 1};
  Run us = run(g, make_preset("placeto-2"), place);
  CHECK(us.start_us["y"] == Approx(18.4));
  CHECK(us.start_us["x"] == Approx(25.1));
  // x's end is the microsecond sum p, gap, q, gap, y, gap, x, converted once: the same bits
  CHECK(us.result.step_time_s == (((((2 + 5.7) + 5) + 5.7) + 1) + 5.7 + 1) * 1e-6);
  ClusterSpec in_seconds = make_preset("placeto-2").spec();
  in_seconds.clock_unit_s = 1;
  Run s = run(g, Cluster(in_seconds), place);
  CHECK(s.start_us["x"] == Approx(18.4));
  CHECK(s.start_us["y"] == Approx(25.1));
}
