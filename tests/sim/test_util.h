// Small clusters and graphs whose schedules can be checked by hand: devices run 1 FLOP/s with unit
// efficiency and no memory-bound ops, so an op with `flops = 3` takes exactly 3 s (plus overheads).
#pragma once

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "graphs/graph.h"
#include "sim/cluster.h"
#include "sim/engine.h"

namespace placelab::sim::testing {

inline Device unit_device(std::string name, double memory_bytes = 1e12) {
  return Device{.name = std::move(name), .kind = "unit", .peak_flops_per_s = 1, .memory_bandwidth_bytes_per_s = 1e30,
                .memory_bytes = memory_bytes};
}

inline Link link(std::string name, std::string a, std::string b, double bandwidth, double latency) {
  return Link{.name = std::move(name), .end_a = std::move(a), .end_b = std::move(b),
              .bandwidth_bytes_per_s = bandwidth, .latency_s = latency};
}

inline graphs::OpSpec op(std::string name, double flops, double output_bytes = 0) {
  return graphs::OpSpec{.name = std::move(name), .type = "Op", .flops = flops, .output_bytes = output_bytes};
}

/** A seeded random DAG: each op reads up to 3 earlier ops; some edges are control edges. */
inline graphs::Graph random_dag(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  graphs::GraphBuilder b("random" + std::to_string(seed));
  for (int i = 0; i < n; ++i) {
    graphs::OpSpec s = op("op" + std::to_string(i), uniform(0.1, 10), uniform(0, 1000));
    s.param_bytes = uniform(0, 500);
    s.temp_bytes = uniform(0, 100);
    b.add_op(std::move(s));
    if (i == 0) continue;
    int preds = 1 + static_cast<int>(rng() % 3);
    std::vector<int> used;
    for (int k = 0; k < preds; ++k) {
      int src = static_cast<int>(rng() % static_cast<uint64_t>(i));
      if (std::find(used.begin(), used.end(), src) != used.end()) continue;
      used.push_back(src);
      b.add_edge(src, i, rng() % 5 == 0 ? 0.0 : b.op(src).output_bytes);
    }
  }
  return std::move(b).build();
}

/** a (1 FLOP, 100 output bytes) feeding b (2) and c (3) over 100-byte edges: the golden fork. */
inline graphs::Graph fork_graph() {
  graphs::GraphBuilder b("fork");
  b.add_op(op("a", 1, 100));
  b.add_op(op("b", 2));
  b.add_op(op("c", 3));
  b.add_edge(0, 1, 100);
  b.add_edge(0, 2, 100);
  return std::move(b).build();
}

/**
 * The Placeto-preset example of the golden tests: a (10 us, 76000 bytes out) feeds b (20 us), c (30 us) and
 * d (5 us, 76000 bytes out), d feeds e (1 us); times are measured for kind "k80", the placeto preset's.
 */
inline graphs::Graph placeto_example_graph() {
  auto timed = [](std::string name, double us, double out_bytes) {
    graphs::OpSpec s = op(std::move(name), 0, out_bytes);
    s.measured_s = {{"k80", us * 1e-6}};
    return s;
  };
  graphs::GraphBuilder b("placeto");
  b.add_op(timed("a", 10, 76000));  // 76000 bytes at 7600 bytes/us: 10 us
  b.add_op(timed("b", 20, 0));
  b.add_op(timed("c", 30, 0));
  b.add_op(timed("d", 5, 76000));
  b.add_op(timed("e", 1, 0));
  b.add_edge(0, 1, 76000);
  b.add_edge(0, 2, 76000);
  b.add_edge(0, 3, 76000);
  b.add_edge(3, 4, 76000);
  return std::move(b).build();
}

// Every fact of two results is equal, bit for bit.
inline void require_same(const SimResult& r, const SimResult& full) {
  REQUIRE(r.step_time_s == full.step_time_s);
  REQUIRE(r.critical_path_s == full.critical_path_s);
  REQUIRE(r.device_busy_s == full.device_busy_s);
  REQUIRE(r.device_peak_bytes == full.device_peak_bytes);
  REQUIRE(r.link_busy_s == full.link_busy_s);
  REQUIRE(r.link_bytes == full.link_bytes);
  REQUIRE(r.total_bytes_moved == full.total_bytes_moved);
  REQUIRE(r.num_transfers == full.num_transfers);
}

}  // namespace placelab::sim::testing
