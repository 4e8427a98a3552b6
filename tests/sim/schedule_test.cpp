// An independent check of the engine: the recorded schedule of random graphs on several clusters is
// validated against the semantics directly (no overlap, inputs before starts, FIFO channels, no idle
// device with a ready op, priorities), and peak memory is recomputed from the trace by a plain sweep.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <tuple>

#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "sim/trace.h"
#include "test_util.h"

using namespace placelab;
using namespace placelab::sim;
using namespace placelab::sim::testing;

namespace {

struct Checked {
  std::vector<double> start, end, ready;
};

// Validates the schedule in `trace` of `place` and returns the per-op times for further checks.
Checked validate(const Simulator& sim, const TraceRecorder& trace, const std::vector<int32_t>& place,
                 const SimResult& result) {
  const graphs::Graph& g = sim.graph();
  const Cluster& c = sim.cluster();
  const int32_t n = g.num_ops(), D = c.num_devices();
  Checked k{std::vector<double>(n, -1), std::vector<double>(n, -1), std::vector<double>(n, 0)};
  REQUIRE(trace.ops().size() == static_cast<size_t>(n));
  for (const auto& e : trace.ops()) {
    REQUIRE(k.start[e.op] < 0);  // once
    CHECK(e.device == place[e.op]);
    CHECK(e.end_s - e.start_s == Approx(sim.op_time_s(e.op, e.device)).margin(1e-12));
    k.start[e.op] = e.start_s;
    k.end[e.op] = e.end_s;
  }
  // Transfers by (producer, destination device).
  std::map<std::pair<int32_t, int32_t>, TraceRecorder::TransferEvent> xfer;
  for (const auto& t : trace.transfers()) {
    CHECK(xfer.emplace(std::pair{t.op, t.dst}, t).second);  // one per tensor and destination
    CHECK(t.start_s >= k.end[t.op]);
    CHECK(t.src == place[t.op]);
  }
  // Inputs arrive before consumers start.
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    const int32_t p = g.edge_src(e), q = g.edge_dst(e);
    double arrive = k.end[p];
    if (place[p] != place[q] && g.edge_bytes(e) > 0) {
      auto it = xfer.find({p, place[q]});
      REQUIRE(it != xfer.end());
      arrive = it->second.end_s;
    }
    k.ready[q] = std::max(k.ready[q], arrive);
  }
  for (int32_t op = 0; op < n; ++op) CHECK(k.start[op] >= k.ready[op]);
  // Devices: no overlap, the gap after each op, never idle while an op of theirs is ready.
  for (int32_t d = 0; d < D; ++d) {
    std::vector<int32_t> mine;
    for (int32_t op = 0; op < n; ++op)
      if (place[op] == d) mine.push_back(op);
    std::sort(mine.begin(), mine.end(), [&](int32_t a, int32_t b) { return k.start[a] < k.start[b]; });
    // The gap follows an op that takes time, not one that takes none.
    auto free_after = [&](int32_t op) { return k.end[op] + (sim.op_time_s(op, d) > 0 ? c.device(d).gap_after_op_s : 0); };
    for (size_t i = 1; i < mine.size(); ++i) CHECK(k.start[mine[i]] >= free_after(mine[i - 1]) - 1e-12);
    for (size_t i = 0; i < mine.size(); ++i) {
      const int32_t o = mine[i];
      // When o started, the device had been free since max(its previous op's end + gap, o's ready time).
      const double free_at = i == 0 ? 0.0 : free_after(mine[i - 1]);
      CHECK(k.start[o] == Approx(std::max(free_at, k.ready[o])).margin(1e-12));
      // Priority: any op started later that was ready by then ranks after o.
      for (size_t j = i + 1; j < mine.size(); ++j) {
        const int32_t later = mine[j];
        if (k.ready[later] > k.start[o]) continue;
        auto key = [&](int32_t op) { return std::tuple(k.ready[op], -sim.upward_rank(op), op); };
        // fifo breaks ties by release order: test_placeto_sim.py checks it against Placeto's rules
        if (sim.options().priority == Priority::fifo) CHECK(k.ready[o] <= k.ready[later]);
        else CHECK(key(o) < key(later));
      }
    }
  }
  // FIFO channels: transfers that share a channel do not overlap (busy_after included).
  std::map<int32_t, std::vector<std::pair<double, double>>> on_channel;
  const bool fifo = !sim.options().share_bandwidth;
  for (const auto& t : trace.transfers())
    for (int32_t ch : c.route(t.src, t.dst))
      on_channel[ch].emplace_back(t.start_s, t.end_s + c.link(Cluster::channel_link(ch)).busy_after_s);
  for (auto& [ch, spans] : on_channel) {
    if (!fifo) break;
    std::sort(spans.begin(), spans.end());
    spans.erase(std::unique(spans.begin(), spans.end()), spans.end());  // a broadcast reaches several devices at once
    for (size_t i = 1; i < spans.size(); ++i) CHECK(spans[i].first >= spans[i - 1].second - 1e-12);
  }
  // Peak memory by a plain sweep: (time, frees before allocations, bytes) per device.
  std::vector<std::vector<std::tuple<double, int, int64_t>>> deltas(D);
  auto whole = [](double b) { return static_cast<int64_t>(b + 0.5); };
  std::vector<int64_t> resident(D, 0);
  for (int32_t op = 0; op < n; ++op) {
    const int32_t d = place[op];
    resident[d] += whole(g.param_bytes(op));
    deltas[d].emplace_back(k.start[op], 1, whole(g.output_bytes(op)) + whole(g.temp_bytes(op)));
    deltas[d].emplace_back(k.end[op], 0, -whole(g.temp_bytes(op)));
    double out_until = k.end[op];  // last local data consumer's end, and last outgoing transfer's end
    for (graphs::EdgeId e : g.out_edges(op))
      if (g.edge_bytes(e) > 0 && place[g.edge_dst(e)] == d) out_until = std::max(out_until, k.end[g.edge_dst(e)]);
    for (int32_t e2 = 0; e2 < D; ++e2)
      if (auto it = xfer.find({op, e2}); it != xfer.end()) out_until = std::max(out_until, it->second.end_s);
    deltas[d].emplace_back(out_until, 0, -whole(g.output_bytes(op)));
  }
  for (const auto& [key, t] : xfer) {  // received copies: transfer start to last consumer there
    double until = t.end_s;
    for (graphs::EdgeId e : g.out_edges(t.op))
      if (g.edge_bytes(e) > 0 && place[g.edge_dst(e)] == t.dst) until = std::max(until, k.end[g.edge_dst(e)]);
    deltas[t.dst].emplace_back(t.start_s, 1, whole(t.bytes));
    deltas[t.dst].emplace_back(until, 0, -whole(t.bytes));
  }
  for (int32_t d = 0; d < D; ++d) {
    std::sort(deltas[d].begin(), deltas[d].end());
    int64_t mem = resident[d], peak = mem;
    for (const auto& [time, kind, bytes] : deltas[d]) peak = std::max(peak, mem += bytes);
    CHECK(mem == resident[d]);
    CHECK(result.device_peak_bytes[d] == static_cast<double>(peak));
  }
  return k;
}

}  // namespace

TEST_CASE("sim::Simulator: schedules of random graphs satisfy the semantics, checked from the trace", "[sim]") {
  for (const char* preset : {"v100-nvlink-8", "k80-4", "placeto-4", "eth-4", "cpu-gpu-2"}) {
    INFO(preset);
    Cluster c = make_preset(preset);
    ClusterSpec gapped = c.spec();  // gaps and a half-duplex link exercise more rules
    for (auto& d : gapped.devices) d.gap_after_op_s = 1e-4;
    if (!gapped.links.empty()) gapped.links[0].duplex = Duplex::half;
    Cluster cg(gapped);
    for (const Cluster* cluster : {&c, &cg}) {
      for (uint64_t seed : {1, 2}) {
        graphs::Graph g = random_dag(120, seed);
        Simulator sim(g, *cluster, default_cost_model(), SimOptions{.share_bandwidth = seed == 2});
        std::mt19937_64 rng(seed);
        for (int trial = 0; trial < 3; ++trial) {
          std::vector<int32_t> place = random_placement(sim, rng);
          TraceRecorder trace(sim);
          SimResult r = sim.simulate(place, &trace);
          Checked k = validate(sim, trace, place, r);
          CHECK(r.step_time_s == *std::max_element(k.end.begin(), k.end.end()));
        }
      }
    }
  }
}
