// Seeded tiny placement problems and brute force over every unit placement: the ground truth that the step
// time bounds (policy/classic/bounds.h) and the exact placer are checked against. Instances vary what the
// bounds must respect: measured op times with ties, control and data edges, colocation classes, pins,
// binding memory, gaps, devices without a copy engine, FIFO or shared links, broadcasts, measured edge
// times, half-duplex links, all three priorities, and identical devices (so the symmetry is exercised).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "graphs/graph.h"
#include "policy/classic/units.h"
#include "sim/cluster.h"
#include "sim/engine.h"

namespace placelab::testing {

struct TinyInstance {
  graphs::Graph graph;
  sim::Cluster cluster;
  sim::SimOptions options;
};

/** A random instance of `min_ops`..`max_ops` ops on 2..`max_devices` devices of kinds "a" and "b". */
inline TinyInstance tiny_instance(uint64_t seed, int32_t min_ops = 4, int32_t max_ops = 7, int32_t max_devices = 4) {
  std::mt19937_64 rng(seed);
  auto uniform = [&](double lo, double hi) { return lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53; };
  auto chance = [&](double p) { return uniform(0, 1) < p; };
  auto pick = [&](int64_t lo, int64_t hi) { return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1)); };
  const bool ties = chance(0.5);  // times on a half-second grid: ties at equal instants are common
  auto time = [&](double lo, double hi) { return ties ? std::round(uniform(lo, hi) * 2) / 2 : uniform(lo, hi); };

  // Devices: kinds, then a switch with one link per device (alike per kind, or each its own), or a full mesh.
  const auto D = static_cast<int32_t>(pick(2, max_devices));
  sim::ClusterSpec spec;
  spec.name = fmt::format("tiny{}", seed);
  const bool kinds_alike = chance(0.5);
  for (int32_t d = 0; d < D; ++d) {
    sim::Device dev;
    dev.name = fmt::format("d{}", d);
    dev.kind = d == 0 || chance(0.6) ? "a" : "b";
    dev.peak_flops_per_s = 1;
    dev.memory_bandwidth_bytes_per_s = 1;
    dev.memory_bytes = 1e12;  // set below when memory binds
    dev.gap_after_op_s = chance(0.15) ? 0.25 : 0;
    if (kinds_alike) dev.gap_after_op_s = 0;
    dev.copy_engine = !chance(0.1);
    spec.devices.push_back(std::move(dev));
  }
  const bool share = chance(0.2) && std::all_of(spec.devices.begin(), spec.devices.end(),
                                                [](const sim::Device& d) { return d.copy_engine; });
  auto link = [&](std::string name, std::string a, std::string b, uint64_t key) {
    std::mt19937_64 r(kinds_alike ? key : rng());
    sim::Link l;
    l.name = std::move(name);
    l.end_a = std::move(a);
    l.end_b = std::move(b);
    l.bandwidth_bytes_per_s = std::array<double, 3>{10, 40, 100}[r() % 3];
    l.latency_s = std::array<double, 3>{0, 0.1, 0.5}[r() % 3];
    l.duplex = r() % 4 == 0 ? sim::Duplex::half : sim::Duplex::full;
    l.busy_after_s = !share && r() % 5 == 0 ? 0.25 : 0;
    return l;
  };
  if (chance(0.6)) {
    for (const auto& dev : spec.devices)
      spec.links.push_back(link(dev.name + "-sw", dev.name, "sw", dev.kind == "a" ? 1 : 2));
  } else {
    for (int32_t a = 0; a < D; ++a)
      for (int32_t b = a + 1; b < D; ++b)
        spec.links.push_back(link(fmt::format("l{}{}", a, b), spec.devices[a].name, spec.devices[b].name,
                                  spec.devices[a].kind == spec.devices[b].kind ? 3 : 4));
  }
  if (chance(0.15)) spec.transfer_mode = sim::TransferMode::broadcast;

  // Ops: measured times per kind, some zero; memory amounts; colocation with an earlier op; pins.
  const auto n = static_cast<int32_t>(pick(min_ops, max_ops));
  graphs::GraphBuilder b(fmt::format("tiny{}", seed));
  const bool has_b = std::any_of(spec.devices.begin(), spec.devices.end(), [](const sim::Device& d) { return d.kind == "b"; });
  int32_t next_class = 0;
  std::vector<int32_t> class_of(n, graphs::kNoClass);
  double total_params = 0, largest = 0;
  for (int32_t i = 0; i < n; ++i) {
    graphs::OpSpec op;
    op.name = fmt::format("op{}", i);
    op.type = "Op";
    const double ta = chance(0.1) ? 0 : time(0.5, 4);
    op.measured_s = {{"a", ta}, {"b", chance(0.1) ? 0 : time(0.5, 6)}};
    op.output_bytes = static_cast<double>(pick(0, 40));
    op.param_bytes = chance(0.6) ? static_cast<double>(pick(1, 60)) : 0;
    op.temp_bytes = chance(0.3) ? static_cast<double>(pick(1, 30)) : 0;
    if (i > 0 && chance(0.25)) {
      const auto j = static_cast<int32_t>(pick(0, i - 1));
      if (class_of[j] == graphs::kNoClass) class_of[j] = next_class++;
      class_of[i] = class_of[j];
    }
    if (has_b && chance(0.1)) op.pinned_kind = "b";
    total_params += op.param_bytes;
    largest = std::max(largest, op.param_bytes + op.output_bytes + op.temp_bytes);
    b.add_op(std::move(op));
  }
  for (int32_t i = 0; i < n; ++i) b.op(i).colocation = class_of[i];
  // Pins within a class must agree, or the class has no device: the class takes its first op's pin.
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < i; ++j)
      if (class_of[i] != graphs::kNoClass && class_of[i] == class_of[j]) b.op(i).pinned_kind = b.op(j).pinned_kind;
  const bool measured_edges = chance(0.2);
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = i + 1; j < n; ++j) {
      if (!chance(j == i + 1 ? 0.6 : 0.25)) continue;
      const double bytes = chance(0.15) ? 0 : static_cast<double>(pick(1, 100));
      b.add_edge(i, j, bytes, measured_edges && bytes > 0 && chance(0.5) ? time(0.2, 3) : graphs::kUnknown);
    }
  if (chance(0.35))  // binding memory: between the largest op and the whole graph's parameters
    for (auto& dev : spec.devices) dev.memory_bytes = std::round(uniform(largest, std::max(largest, total_params) + 40));
  sim::SimOptions options;
  options.priority = std::array<sim::Priority, 3>{sim::Priority::ready_time, sim::Priority::rank,
                                                  sim::Priority::fifo}[rng() % 3];
  options.share_bandwidth = share;
  options.use_edge_comm = measured_edges;
  return {std::move(b).build(), sim::Cluster(std::move(spec)), options};
}

/** Every unit placement (pins kept) with its step time (+inf when out of memory), in mixed-radix order. */
struct BruteForce {
  std::vector<std::vector<int32_t>> placements;  // unit devices
  std::vector<double> step_s;
  double best_s = std::numeric_limits<double>::infinity();
};

inline BruteForce brute_force(const policy::Units& units) {
  const sim::Simulator& sim = units.simulator();
  const int32_t U = units.num_units(), D = units.num_devices();
  BruteForce out;
  std::vector<int32_t> p(U, 0);
  auto ok = [&] {
    for (int32_t u = 0; u < U; ++u)
      if (!units.allowed(u, p[u])) return false;
    return true;
  };
  while (true) {
    if (ok()) {
      const sim::SimResult r = sim.simulate(units.expand(p));
      out.placements.push_back(p);
      out.step_s.push_back(r.oom ? std::numeric_limits<double>::infinity() : r.step_time_s);
      out.best_s = std::min(out.best_s, out.step_s.back());
    }
    int32_t u = 0;
    while (u < U && ++p[u] == D) p[u++] = 0;
    if (u == U) break;
  }
  return out;
}

}  // namespace placelab::testing
