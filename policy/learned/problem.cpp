// Features of a placement problem for the learned policies (see problem.h for the columns).
#include "policy/learned/problem.h"

#include <algorithm>
#include <cmath>

namespace placelab::learned {
namespace {

// Scales chosen so typical values land within a few units of 0: FLOPs in MFLOP, bytes in KB, times in us.
float log_scaled(double value, double unit) { return static_cast<float>(std::log1p(std::max(0.0, value) / unit)); }

/** Unit-level CSR rows: for each unit, the distinct other units reached by `step` over its ops' edges. */
template <class Step>
CsrPtr unit_csr(const policy::Units& units, Step step) {
  const int32_t n = units.num_units();
  std::vector<std::vector<int32_t>> lists(n);
  for (int32_t u = 0; u < n; ++u) {
    auto& list = lists[u];
    for (graphs::OpId op : units.ops(u))
      step(op, [&](graphs::OpId other) {
        const int32_t v = units.unit_of(other);
        if (v != u) list.push_back(v);
      });
    std::sort(list.begin(), list.end());
    list.erase(std::unique(list.begin(), list.end()), list.end());
  }
  return std::make_shared<autodiff::Csr>(autodiff::Csr::from_lists(n, lists));
}

}  // namespace

int32_t op_type_bucket(std::string_view type) {
  uint32_t h = 2166136261u;
  for (unsigned char c : type) h = (h ^ c) * 16777619u;
  return static_cast<int32_t>(h % kOpTypeBuckets);
}

Problem::Problem(const sim::Simulator& simulator) : units_(simulator) {
  const graphs::Graph& g = simulator.graph();
  const sim::Cluster& c = simulator.cluster();
  const int32_t n = units_.num_units(), devices = units_.num_devices();

  predecessors_ = unit_csr(units_, [&](graphs::OpId op, auto&& emit) {
    for (graphs::OpId p : g.predecessors(op)) emit(p);
  });
  neighbors_ = unit_csr(units_, [&](graphs::OpId op, auto&& emit) {
    for (graphs::OpId p : g.predecessors(op)) emit(p);
    for (graphs::OpId s : g.successors(op)) emit(s);
  });
  const CsrPtr successors = unit_csr(units_, [&](graphs::OpId op, auto&& emit) {
    for (graphs::OpId s : g.successors(op)) emit(s);
  });

  int32_t max_depth = 1;
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) max_depth = std::max(max_depth, g.depth(op));
  const bool measured = !g.measured_kinds().empty();

  unit_x_.setZero(n, kUnitFeatures);
  unit_type_.resize(n);
  out_bytes_.assign(n, 0.0);
  for (int32_t u = 0; u < n; ++u) {
    double flops = 0, bytes = 0, output = 0, params = 0;
    int32_t depth = g.depth(units_.ops(u)[0]);
    for (graphs::OpId op : units_.ops(u)) {
      flops += g.flops(op);
      bytes += g.bytes_read(op) + g.bytes_written(op);
      output += g.output_bytes(op);
      params += g.param_bytes(op);
      depth = std::min(depth, g.depth(op));
      for (graphs::EdgeId e : g.out_edges(op))
        if (units_.unit_of(g.edge_dst(e)) != u) out_bytes_[u] += g.edge_bytes(e);
    }
    int32_t allowed = 0;
    for (int32_t d = 0; d < devices; ++d) allowed += units_.allowed(u, d);
    auto row = unit_x_.row(u);
    row[0] = log_scaled(flops, 1e6);
    row[1] = log_scaled(bytes, 1e3);
    row[2] = log_scaled(output, 1e3);
    row[3] = log_scaled(params, 1e3);
    row[4] = log_scaled(predecessors_->offsets[u + 1] - predecessors_->offsets[u], 1);
    row[5] = log_scaled(successors->offsets[u + 1] - successors->offsets[u], 1);
    row[6] = n > 1 ? static_cast<float>(u) / static_cast<float>(n - 1) : 0.f;
    row[7] = static_cast<float>(depth) / static_cast<float>(max_depth);
    row[8] = log_scaled(units_.mean_time_s(u), 1e-6);
    row[9] = log_scaled(static_cast<double>(units_.ops(u).size()), 1);
    row[10] = measured ? 1.f : 0.f;
    row[11] = static_cast<float>(allowed) / static_cast<float>(devices);
    unit_type_[u] = op_type_bucket(g.op_type(units_.ops(u)[0]));
  }

  device_x_.setZero(devices, kDeviceFeatures);
  for (int32_t d = 0; d < devices; ++d) {
    const sim::Device& dev = c.device(d);
    double inv_bandwidth = 0, latency_s = 0;
    for (int32_t q = 0; q < devices; ++q)
      if (q != d) {
        inv_bandwidth += 0.5 * (1 / c.route_bandwidth_bytes_per_s(d, q) + 1 / c.route_bandwidth_bytes_per_s(q, d));
        latency_s += 0.5 * (c.route_latency_s(d, q) + c.route_latency_s(q, d));
      }
    const double others = std::max(1, devices - 1);
    auto row = device_x_.row(d);
    row[0] = log_scaled(dev.peak_flops_per_s * dev.efficiency, 1e12);
    row[1] = log_scaled(dev.memory_bandwidth_bytes_per_s * dev.efficiency, 1e11);
    row[2] = log_scaled(dev.memory_bytes, 1e9);
    row[3] = log_scaled(dev.launch_overhead_s + dev.gap_after_op_s, 1e-6);
    row[4] = devices > 1 ? log_scaled(others / inv_bandwidth, 1e9) : 0.f;
    row[5] = log_scaled(latency_s / others, 1e-6);
    row[6] = dev.kind == "cpu" ? 1.f : 0.f;
  }

  pair_x_.setZero(static_cast<autodiff::Index>(n) * devices, kPairFeatures);
  allowed_.setConstant(n, devices, false);
  for (int32_t u = 0; u < n; ++u)
    for (int32_t d = 0; d < devices; ++d) {
      if (!units_.allowed(u, d)) continue;
      allowed_(u, d) = true;
      auto row = pair_x_.row(static_cast<autodiff::Index>(u) * devices + d);
      const double mean = units_.mean_time_s(u);
      row[0] = mean > 0 ? static_cast<float>(std::log(std::max(units_.time_s(u, d), 1e-12) / mean)) : 0.f;
      row[1] = 1.f;
      const double capacity = c.device(d).memory_bytes;
      row[2] = capacity > 0 ? static_cast<float>(std::log1p(units_.memory_bytes(u) / capacity)) : 0.f;
    }
}

}  // namespace placelab::learned
