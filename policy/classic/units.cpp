// Units of placement (colocation classes) with their costs, and helpers shared by the classic placers.
#include "policy/classic/units.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <unordered_map>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::policy {

Units::Units(const sim::Simulator& simulator) : sim_(&simulator), devices_(simulator.num_devices()) {
  const graphs::Graph& g = simulator.graph();
  const sim::Cluster& c = simulator.cluster();
  // Units numbered in the topological order of their first ops.
  std::unordered_map<int32_t, int32_t> unit_of_class;
  unit_of_.assign(g.num_ops(), -1);
  int32_t n = 0;
  for (graphs::OpId op : g.topo_order()) {
    const int32_t cls = g.colocation(op);
    if (cls == graphs::kNoClass) {
      unit_of_[op] = n++;
    } else {
      auto [it, fresh] = unit_of_class.emplace(cls, n);
      if (fresh) ++n;
      unit_of_[op] = it->second;
    }
  }
  member_offset_.assign(n + 1, 0);
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) ++member_offset_[unit_of_[op] + 1];
  std::partial_sum(member_offset_.begin(), member_offset_.end(), member_offset_.begin());
  members_.resize(g.num_ops());
  std::vector<int32_t> fill(member_offset_.begin(), member_offset_.end() - 1);
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) members_[fill[unit_of_[op]]++] = op;

  time_s_.assign(static_cast<size_t>(n) * devices_, 0.0);
  mean_time_s_.assign(n, 0.0);
  memory_bytes_.assign(n, 0.0);
  for (int32_t u = 0; u < n; ++u) {
    for (graphs::OpId op : ops(u)) {
      memory_bytes_[u] += g.param_bytes(op) + g.output_bytes(op) + g.temp_bytes(op);
      const std::string& pin = g.pinned_kind(op);
      for (int32_t d = 0; d < devices_; ++d) {
        double& t = time_s_[static_cast<size_t>(u) * devices_ + d];
        if (!pin.empty() && c.device(d).kind != pin) t = kNotAllowed;
        else if (t != kNotAllowed) t += simulator.op_time_s(op, d);
      }
    }
    int32_t count = 0;
    for (int32_t d = 0; d < devices_; ++d)
      if (allowed(u, d)) mean_time_s_[u] += time_s(u, d), ++count;
    if (count == 0) {
      graphs::OpId op = ops(u)[0];
      for (graphs::OpId o : ops(u))
        if (!g.pinned_kind(o).empty()) op = o;
      fail_unplaceable_pin(g, c, op);
    }
    mean_time_s_[u] /= count;
  }
  if (devices_ > 1) {
    for (int32_t p = 0; p < devices_; ++p)
      for (int32_t q = 0; q < devices_; ++q)
        if (p != q) {
          mean_latency_s_ += c.route_latency_s(p, q);
          mean_inv_bandwidth_ += 1.0 / c.route_bandwidth_bytes_per_s(p, q);
        }
    const double pairs = static_cast<double>(devices_) * (devices_ - 1);
    mean_latency_s_ /= pairs;
    mean_inv_bandwidth_ /= pairs;
  }
}

double Units::comm_s(int32_t p, int32_t q, double bytes) const {
  if (p == q || bytes <= 0) return 0;
  return sim_->cluster().transfer_time_s(p, q, bytes);
}

std::vector<int32_t> Units::allowed_devices(int32_t u) const {
  std::vector<int32_t> out;
  for (int32_t d = 0; d < devices_; ++d)
    if (allowed(u, d)) out.push_back(d);
  std::stable_sort(out.begin(), out.end(), [&](int32_t a, int32_t b) { return time_s(u, a) < time_s(u, b); });
  return out;
}

std::vector<int32_t> Units::expand(std::span<const int32_t> unit_device) const {
  std::vector<int32_t> device_of(unit_of_.size());
  for (size_t op = 0; op < unit_of_.size(); ++op) device_of[op] = unit_device[unit_of_[op]];
  return device_of;
}

void fail_unplaceable_pin(const graphs::Graph& graph, const sim::Cluster& cluster, graphs::OpId op) {
  throw Error(fmt::format("op \"{}\" (and its colocation class) is pinned to kinds no device of cluster \"{}\" has "
                          "(pin \"{}\"): add such a device or remove the pin",
                          graph.op_name(op), cluster.name(), graph.pinned_kind(op)));
}

int64_t option_int(std::string_view placer, const nlohmann::json& options, std::string_view key, int64_t fallback,
                   int64_t max_value) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  // An unsigned value above INT64_MAX reads as negative: refused either way.
  if (!it->is_number_integer() || it->get<int64_t>() < 0)
    throw Error(fmt::format("placer {} options: \"{}\" is {}, expected a non-negative integer", placer, key, it->dump()));
  if (it->get<int64_t>() > max_value)
    throw Error(fmt::format("placer {} options: \"{}\" is {}, expected at most {}", placer, key, it->dump(), max_value));
  return it->get<int64_t>();
}

double option_number(std::string_view placer, const nlohmann::json& options, std::string_view key, double fallback,
                     double min_value) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < min_value)
    throw Error(fmt::format("placer {} options: \"{}\" is {}, expected a number >= {}", placer, key, it->dump(),
                            min_value));
  return it->get<double>();
}

bool option_bool(std::string_view placer, const nlohmann::json& options, std::string_view key, bool fallback) {
  auto it = options.find(key);
  if (it == options.end()) return fallback;
  if (!it->is_boolean())
    throw Error(fmt::format("placer {} options: \"{}\" is {}, expected true or false", placer, key, it->dump()));
  return it->get<bool>();
}

std::vector<int32_t> contiguous_blocks(std::span<const double> weight_s, std::span<const double> share) {
  const double total_w = std::accumulate(weight_s.begin(), weight_s.end(), 0.0);
  const double total_share = std::accumulate(share.begin(), share.end(), 0.0);
  std::vector<double> bound(share.size());
  double acc = 0;
  for (size_t k = 0; k < share.size(); ++k) bound[k] = (acc += share[k]) / total_share;
  std::vector<int32_t> block(weight_s.size(), 0);
  double prefix = 0;
  int32_t k = 0;
  for (size_t i = 0; i < weight_s.size(); ++i) {
    // Zero total weight: split by count instead, so blocks still spread.
    double mid = total_w > 0 ? (prefix + 0.5 * weight_s[i]) / total_w
                             : (static_cast<double>(i) + 0.5) / static_cast<double>(weight_s.size());
    prefix += weight_s[i];
    while (k + 1 < static_cast<int32_t>(share.size()) && mid >= bound[k]) ++k;
    block[i] = k;
  }
  return block;
}

std::vector<double> device_speeds(const Units& units) {
  std::vector<double> total(units.num_devices(), 0.0);
  for (int32_t u = 0; u < units.num_units(); ++u) {
    double fastest = kNotAllowed;
    for (int32_t d = 0; d < units.num_devices(); ++d) fastest = std::min(fastest, units.time_s(u, d));
    for (int32_t d = 0; d < units.num_devices(); ++d)
      total[d] += units.allowed(u, d) ? units.time_s(u, d) : fastest;
  }
  std::vector<double> speed(total.size());
  for (size_t d = 0; d < total.size(); ++d) speed[d] = total[d] > 0 ? 1.0 / total[d] : 1.0;
  return speed;
}

}  // namespace placelab::policy
