// Cluster validation, route computation and the placelab.cluster JSON format.
#include "sim/cluster.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <queue>
#include <unordered_map>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "graphs/msr.h"
#include "graphs/op_class.h"
#include "sim/presets.h"

namespace placelab::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_amount(double v, std::string_view what, const std::string& where) {
  if (!std::isfinite(v) || v < 0) throw Error(fmt::format("{}: {} is {}, must be finite and >= 0", where, what, v));
}

void check_positive(double v, std::string_view what, const std::string& where) {
  if (!std::isfinite(v) || v <= 0) throw Error(fmt::format("{}: {} is {}, must be finite and > 0", where, what, v));
}

// A curve's points: sizes increasing and > 0, efficiencies > 0, as many of each, at least one.
void validate_curve(const EfficiencyCurve& c, const std::string& where) {
  if (c.size.empty() || c.size.size() != c.efficiency.size())
    throw Error(fmt::format("{}: {} sizes and {} efficiencies; give one efficiency per size, at least one", where,
                            c.size.size(), c.efficiency.size()));
  for (size_t k = 0; k < c.size.size(); ++k) {
    check_positive(c.size[k], fmt::format("size[{}]", k), where);
    check_positive(c.efficiency[k], fmt::format("efficiency[{}]", k), where);
    if (k > 0 && !(c.size[k] > c.size[k - 1]))
      throw Error(fmt::format("{}: size[{}] = {} does not increase from size[{}] = {}; list sizes in increasing order",
                              where, k, c.size[k], k - 1, c.size[k - 1]));
  }
}

EfficiencyCurve curve_from_json(const io::JsonNode& c) {
  c.check_fields({"size", "efficiency"});
  EfficiencyCurve curve;
  for (auto [key, out] : {std::pair{"size", &curve.size}, std::pair{"efficiency", &curve.efficiency}}) {
    io::JsonNode list = c.at(key);
    for (size_t k = 0; k < list.size(); ++k) out->push_back(list.at(k).as_amount());
  }
  validate_curve(curve, c.where());  // here, so that the error names the file
  return curve;
}

nlohmann::json curve_to_json(const EfficiencyCurve& c) { return {{"size", c.size}, {"efficiency", c.efficiency}}; }

void validate_device(const Device& d, size_t i) {
  std::string where = fmt::format("cluster device {} (\"{}\")", i, d.name);
  if (d.name.empty()) throw Error(fmt::format("cluster device {}: empty name; give every device a unique name", i));
  if (d.kind.empty()) throw Error(where + ": empty kind; say what it is (\"v100\", \"cpu\", ...)");
  check_positive(d.peak_flops_per_s, "peak_flops_per_s", where);
  check_positive(d.memory_bandwidth_bytes_per_s, "memory_bandwidth_bytes_per_s", where);
  check_amount(d.memory_bytes, "memory_bytes", where);
  check_amount(d.launch_overhead_s, "launch_overhead_s", where);
  check_amount(d.gap_after_op_s, "gap_after_op_s", where);
  if (!(d.efficiency > 0 && d.efficiency <= 1))
    throw Error(fmt::format("{}: efficiency is {}, must be in (0, 1]", where, d.efficiency));
  for (double e : d.gemm_element_s)
    if (!std::isfinite(e) || std::abs(e) > 1)
      throw Error(fmt::format("{}: gemm_element_s holds {}, must be finite and at most 1 s per element either way (a "
                              "calibration gives nanoseconds)", where, e));
  for (const auto* curves : {&d.efficiency_curves, &d.contended_efficiency_curves})
    for (const auto& [name, curve] : *curves) {
      if (!graphs::parse_op_class(name))
        throw Error(fmt::format("{}: efficiency curve for \"{}\", which is no op class (gemm, conv, elementwise, "
                                "reduction, movement)", where, name));
      validate_curve(curve, fmt::format("{}: efficiency curve \"{}\"", where, name));
    }
}

void validate_link(const Link& l, size_t i) {
  std::string where = fmt::format("cluster link {} (\"{}\")", i, l.name);
  if (l.name.empty()) throw Error(fmt::format("cluster link {}: empty name; give every link a unique name", i));
  check_positive(l.bandwidth_bytes_per_s, "bandwidth_bytes_per_s", where);
  check_amount(l.latency_s, "latency_s", where);
  check_amount(l.busy_after_s, "busy_after_s", where);
  if (l.end_a.empty() != l.end_b.empty())
    throw Error(where + ": give both ends or neither (a link without ends is a bus usable only in explicit routes)");
  if (!l.end_a.empty() && l.end_a == l.end_b) throw Error(where + ": both ends are \"" + l.end_a + "\"");
  if (!l.efficiency_curve.size.empty() || !l.efficiency_curve.efficiency.empty())
    validate_curve(l.efficiency_curve, where + ": efficiency curve");
  if (!l.loaded_efficiency_curve.size.empty() || !l.loaded_efficiency_curve.efficiency.empty())
    validate_curve(l.loaded_efficiency_curve, where + ": loaded efficiency curve");
}

}  // namespace

Cluster::Cluster(ClusterSpec spec) : spec_(std::move(spec)) {
  const size_t n = spec_.devices.size();
  if (n == 0) throw Error(fmt::format("cluster \"{}\": no devices; list at least one", spec_.name));
  if (!(spec_.clock_unit_s > 0 && spec_.clock_unit_s <= 1))
    throw Error(fmt::format("cluster \"{}\": clock_unit_s is {:g}, expected a unit in (0, 1] seconds", spec_.name,
                            spec_.clock_unit_s));
  if (n > kMaxDevices) {
    throw Error(fmt::format("cluster \"{}\": {} devices, at most {} (a route is kept per pair of devices)", spec_.name,
                            n, kMaxDevices));
  }
  std::unordered_map<std::string, int32_t> device_index, link_index;
  for (size_t i = 0; i < n; ++i) {
    validate_device(spec_.devices[i], i);
    if (!device_index.emplace(spec_.devices[i].name, static_cast<int32_t>(i)).second)
      throw Error(fmt::format("cluster device {}: name \"{}\" is used twice", i, spec_.devices[i].name));
  }
  for (size_t i = 0; i < spec_.links.size(); ++i) {
    validate_link(spec_.links[i], i);
    if (!link_index.emplace(spec_.links[i].name, static_cast<int32_t>(i)).second)
      throw Error(fmt::format("cluster link {}: name \"{}\" is used twice", i, spec_.links[i].name));
    if (device_index.count(spec_.links[i].name))
      throw Error(fmt::format("cluster link {}: name \"{}\" is also a device name", i, spec_.links[i].name));
  }

  // Nodes: the devices (0..n-1), then the switches in the order the links name them.
  std::unordered_map<std::string, int32_t> node_of;
  std::vector<std::string> node_names;
  auto node = [&](const std::string& name) {
    auto [it, fresh] = node_of.emplace(name, static_cast<int32_t>(node_names.size()));
    if (fresh) node_names.push_back(name);
    return it->second;
  };
  for (const Device& d : spec_.devices) node(d.name);
  std::vector<int32_t> end_a(spec_.links.size(), -1), end_b(spec_.links.size(), -1);  // -1: a bus
  for (size_t l = 0; l < spec_.links.size(); ++l)
    if (!spec_.links[l].end_a.empty()) end_a[l] = node(spec_.links[l].end_a), end_b[l] = node(spec_.links[l].end_b);
  const size_t nodes = node_names.size();

  // Channel of link l walked from node `from`; the node reached (unchanged for a bus).
  auto walk = [&](int32_t l, int32_t from, int32_t& to) -> int32_t {
    if (end_a[l] < 0) {
      to = from;
      return 2 * l;
    }
    int32_t dir = 0;
    if (from == end_a[l]) to = end_b[l];
    else if (from == end_b[l]) to = end_a[l], dir = 1;
    else return -1;
    return 2 * l + (spec_.links[l].duplex == Duplex::full ? dir : 0);
  };

  std::unordered_map<size_t, std::vector<int32_t>> given;  // pair index -> channels of its explicit route
  for (size_t r = 0; r < spec_.routes.size(); ++r) {
    const RouteSpec& rs = spec_.routes[r];
    std::string where = fmt::format("cluster route {} ({} -> {})", r, rs.src, rs.dst);
    auto s = device_index.find(rs.src), t = device_index.find(rs.dst);
    if (s == device_index.end() || t == device_index.end())
      throw Error(where + ": src and dst must be device names");
    if (s->second == t->second) throw Error(where + ": src equals dst; a device needs no route to itself");
    if (rs.links.empty()) throw Error(where + ": no links; list the links the route crosses");
    auto [it, fresh] = given.try_emplace(static_cast<size_t>(s->second) * n + t->second);
    if (!fresh) throw Error(where + ": a second route for this pair; give one route per ordered pair");
    std::vector<int32_t>& route = it->second;
    int32_t at = s->second, next = 0;
    std::vector<int32_t> visited{at};
    bool all_ends = true;
    for (const auto& name : rs.links) {
      auto li = link_index.find(name);
      if (li == link_index.end()) throw Error(where + ": unknown link \"" + name + "\"");
      const int32_t l = li->second;
      if (std::any_of(route.begin(), route.end(), [&](int32_t ch) { return channel_link(ch) == l; }))
        throw Error(where + ": crosses link \"" + name + "\" twice; a route crosses each link at most once");
      all_ends = all_ends && end_a[l] >= 0;
      int32_t ch = walk(l, at, next);
      if (ch < 0)
        throw Error(where + ": link \"" + name + "\" does not touch \"" + node_names[at] + "\"; list the links in order");
      if (end_a[l] >= 0 && std::find(visited.begin(), visited.end(), next) != visited.end())
        throw Error(where + ": link \"" + name + "\" goes back to \"" + node_names[next] +
                    "\"; a route visits each node once");
      visited.push_back(next);
      route.push_back(ch);
      at = next;
    }
    if (all_ends && at != t->second)
      throw Error(where + ": the links end at \"" + node_names[at] + "\", not at \"" + rs.dst + "\"");
  }

  // Shortest paths (hops, then latency, then the lowest link indices in path order) over links with ends;
  // devices are never inner nodes.
  std::vector<std::vector<int32_t>> adjacent_links(nodes);
  for (size_t l = 0; l < spec_.links.size(); ++l) {
    if (end_a[l] < 0) continue;
    adjacent_links[end_a[l]].push_back(static_cast<int32_t>(l));
    adjacent_links[end_b[l]].push_back(static_cast<int32_t>(l));
  }
  using Cost = std::pair<int32_t, double>;  // hops, latency
  using Entry = std::pair<Cost, int32_t>;
  std::vector<Cost> cost(nodes);
  std::vector<int32_t> via(nodes);  // link used to reach the node
  std::vector<bool> done(nodes);
  std::vector<int32_t> path, other;
  // The links from the source to `v` (reached already), in path order.
  auto links_to = [&](int32_t v, int32_t source, std::vector<int32_t>& out) {
    out.clear();
    for (; v != source; v = end_a[via[v]] == v ? end_b[via[v]] : end_a[via[v]]) out.push_back(via[v]);
    std::reverse(out.begin(), out.end());
  };
  // Whether reaching v from u over link l beats v's path of equal cost: its links, compared in path
  // order, are lower. Every node of a shortest path has fewer hops than the next, so u's path is final.
  auto lower_links = [&](int32_t u, int32_t l, int32_t v, int32_t source) {
    links_to(u, source, path);
    path.push_back(l);
    links_to(v, source, other);
    return path < other;
  };
  // What the routes will hold, counted first (hops by breadth-first search) so that a cluster too
  // deep to store fails before its routes take the memory.
  size_t crossings = 0;
  for (const auto& [pair, route] : given) crossings += route.size();
  std::vector<int32_t> hops(nodes), frontier, next;
  for (size_t s = 0; s < n; ++s) {
    std::fill(hops.begin(), hops.end(), -1);
    hops[s] = 0;
    frontier.assign(1, static_cast<int32_t>(s));
    for (int32_t h = 1; !frontier.empty(); ++h) {
      next.clear();
      for (int32_t u : frontier) {
        if (u != static_cast<int32_t>(s) && static_cast<size_t>(u) < n) continue;  // devices do not forward
        for (int32_t l : adjacent_links[u]) {
          const int32_t v = end_a[l] == u ? end_b[l] : end_a[l];
          if (hops[v] < 0) hops[v] = h, next.push_back(v);
        }
      }
      frontier.swap(next);
    }
    for (size_t t = 0; t < n; ++t)
      if (t != s && hops[t] > 0 && !given.count(s * n + t)) crossings += static_cast<size_t>(hops[t]);
    if (crossings > kMaxRouteCrossings)
      throw Error(fmt::format("cluster \"{}\": its routes would cross more than {} links in all (hops summed over the "
                              "pairs of its {} devices); shorten the chains of switches between devices, or connect "
                              "them through fewer switches",
                              spec_.name, kMaxRouteCrossings, n));
  }

  route_offset_.assign(n * n + 1, 0);
  for (size_t s = 0; s < n; ++s) {
    std::fill(cost.begin(), cost.end(), Cost{std::numeric_limits<int32_t>::max(), kInf});
    std::fill(via.begin(), via.end(), -1);
    std::fill(done.begin(), done.end(), false);
    cost[s] = {0, 0.0};
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    queue.push({cost[s], static_cast<int32_t>(s)});
    while (!queue.empty()) {
      const auto [c, u] = queue.top();
      queue.pop();
      if (done[u] || c != cost[u]) continue;  // superseded by a cheaper entry
      done[u] = true;
      if (u != static_cast<int32_t>(s) && static_cast<size_t>(u) < n) continue;  // devices do not forward
      for (int32_t l : adjacent_links[u]) {
        const int32_t v = end_a[l] == u ? end_b[l] : end_a[l];
        const Cost c_v{c.first + 1, c.second + spec_.links[l].latency_s};
        const bool cheaper = c_v < cost[v];
        if (!cheaper && !(c_v == cost[v] && lower_links(u, l, v, static_cast<int32_t>(s)))) continue;
        cost[v] = c_v, via[v] = l;
        // A node at infinite latency is reached but not expanded; a tie keeps the node's queue entry.
        if (cheaper && c_v.second < kInf) queue.push({c_v, v});
      }
    }
    for (size_t t = 0; t < n; ++t) {
      const size_t p = s * n + t;
      if (auto it = given.find(p); it != given.end()) {
        route_channels_.insert(route_channels_.end(), it->second.begin(), it->second.end());
      } else if (s != t) {
        if (via[t] < 0)
          throw Error(fmt::format("cluster \"{}\": device \"{}\" cannot reach \"{}\"; add a link or a route",
                                  spec_.name, spec_.devices[s].name, spec_.devices[t].name));
        links_to(static_cast<int32_t>(t), static_cast<int32_t>(s), path);
        int32_t at = static_cast<int32_t>(s);
        for (int32_t l : path) route_channels_.push_back(walk(l, at, at));
      }
      route_offset_[p + 1] = static_cast<int32_t>(route_channels_.size());
    }
  }
}

double EfficiencyCurve::at(double x) const {
  if (size.empty()) return 1;
  if (!(x > size.front())) return efficiency.front();
  if (x >= size.back()) return efficiency.back();
  const size_t k = static_cast<size_t>(std::upper_bound(size.begin(), size.end(), x) - size.begin());  // size[k-1] <= x < size[k]
  const double w = std::log(x / size[k - 1]) / std::log(size[k] / size[k - 1]);
  return efficiency[k - 1] + w * (efficiency[k] - efficiency[k - 1]);
}

double Cluster::route_latency_s(int32_t src, int32_t dst) const {
  double s = 0;
  for (int32_t ch : route(src, dst)) s += spec_.links[channel_link(ch)].latency_s;
  return s;
}

double Cluster::route_bandwidth_bytes_per_s(int32_t src, int32_t dst) const {
  double b = kInf;
  for (int32_t ch : route(src, dst)) b = std::min(b, spec_.links[channel_link(ch)].bandwidth_bytes_per_s);
  return b;
}

double Cluster::route_bandwidth_bytes_per_s(int32_t src, int32_t dst, double bytes, bool loaded) const {
  double b = kInf;
  for (int32_t ch : route(src, dst)) {
    const Link& l = spec_.links[channel_link(ch)];
    const EfficiencyCurve& c = loaded && !l.loaded_efficiency_curve.size.empty() ? l.loaded_efficiency_curve : l.efficiency_curve;
    b = std::min(b, l.bandwidth_bytes_per_s * (c.size.empty() ? 1.0 : c.at(bytes)));
  }
  return b;
}

bool Cluster::route_has_curve(int32_t src, int32_t dst) const {
  const auto r = route(src, dst);
  return std::any_of(r.begin(), r.end(), [&](int32_t ch) {
    const Link& l = spec_.links[channel_link(ch)];
    return !l.efficiency_curve.size.empty() || !l.loaded_efficiency_curve.size.empty();
  });
}

double Cluster::transfer_time_s(int32_t src, int32_t dst, double bytes) const {
  if (src == dst) return 0;
  return route_latency_s(src, dst) + bytes / route_bandwidth_bytes_per_s(src, dst, bytes);
}

int32_t Cluster::find_device(std::string_view name) const {
  for (int32_t d = 0; d < num_devices(); ++d)
    if (spec_.devices[d].name == name) return d;
  return -1;
}

std::vector<std::string> Cluster::kinds() const {
  std::vector<std::string> out;
  for (const Device& d : spec_.devices)
    if (std::find(out.begin(), out.end(), d.kind) == out.end()) out.push_back(d.kind);
  return out;
}

std::string_view duplex_name(Duplex duplex) { return duplex == Duplex::full ? "full" : "half"; }

std::string_view transfer_mode_name(TransferMode mode) {
  return mode == TransferMode::per_destination ? "per_destination" : "broadcast";
}

std::string_view priority_name(Priority priority) {
  switch (priority) {
    case Priority::rank: return "rank";
    case Priority::fifo: return "fifo";
    default: return "ready_time";
  }
}

std::optional<Priority> priority_from_name(std::string_view name) {
  for (Priority p : {Priority::ready_time, Priority::rank, Priority::fifo})
    if (priority_name(p) == name) return p;
  return std::nullopt;
}

// --- placelab.cluster v1 ---

Cluster cluster_from_json(const nlohmann::json& doc, const std::string& origin) {
  io::JsonNode root(doc, origin);
  root.check_header("placelab.cluster", {1});
  root.check_fields({"format", "version", "name", "transfer_mode", "priority", "clock_unit_s", "devices", "links", "routes"});
  ClusterSpec spec;
  spec.name = root.get_string("name", "");
  if (root.has("transfer_mode")) {
    io::JsonNode m = root.at("transfer_mode");
    std::string s = m.as_string();
    if (s == "per_destination") spec.transfer_mode = TransferMode::per_destination;
    else if (s == "broadcast") spec.transfer_mode = TransferMode::broadcast;
    else m.fail("is \"" + s + "\", expected \"per_destination\" or \"broadcast\"");
  }
  if (root.has("priority")) {
    io::JsonNode p = root.at("priority");
    spec.priority = priority_from_name(p.as_string());
    if (!spec.priority) p.fail("is \"" + p.as_string() + "\", expected \"ready_time\", \"rank\" or \"fifo\"");
  }
  spec.clock_unit_s = root.get_amount("clock_unit_s", 1);  // its range: the Cluster constructor
  io::JsonNode devices = root.at("devices");
  if (devices.size() == 0) devices.fail("is empty; list at least one device");
  if (devices.size() > kMaxDevices) devices.fail(fmt::format("has {} devices, at most {}", devices.size(), kMaxDevices));
  for (size_t i = 0; i < devices.size(); ++i) {
    io::JsonNode d = devices.at(i);
    d.check_fields({"name", "kind", "peak_flops_per_s", "memory_bandwidth_bytes_per_s", "memory_bytes",
                    "launch_overhead_s", "gap_after_op_s", "efficiency", "efficiency_curves", "copy_engine",
                    "memory_domain", "contended_efficiency_curves", "gemm_element_s"});
    Device dev{.name = d.at("name").as_string(),
               .kind = d.at("kind").as_string(),
               .peak_flops_per_s = d.at("peak_flops_per_s").as_amount(),
               .memory_bandwidth_bytes_per_s = d.at("memory_bandwidth_bytes_per_s").as_amount(),
               .memory_bytes = d.at("memory_bytes").as_amount(),
               .launch_overhead_s = d.get_amount("launch_overhead_s", 0),
               .gap_after_op_s = d.get_amount("gap_after_op_s", 0),
               .efficiency = d.get_amount("efficiency", 1),
               .copy_engine = !d.has("copy_engine") || d.at("copy_engine").as_bool(),
               .memory_domain = d.get_string("memory_domain", "")};
    if (dev.peak_flops_per_s <= 0) d.at("peak_flops_per_s").fail("must be > 0");
    if (dev.memory_bandwidth_bytes_per_s <= 0) d.at("memory_bandwidth_bytes_per_s").fail("must be > 0");
    if (!(dev.efficiency > 0 && dev.efficiency <= 1)) d.at("efficiency").fail("must be in (0, 1]");
    if (d.has("gemm_element_s")) {
      io::JsonNode e = d.at("gemm_element_s");
      if (!e.value().is_array() || e.size() != 3) e.fail("must be [A, B, C]: seconds per element of each operand");
      for (size_t j = 0; j < 3; ++j) dev.gemm_element_s[j] = e.at(j).as_number();
    }
    for (auto [key, out] : {std::pair{"efficiency_curves", &dev.efficiency_curves},
                            std::pair{"contended_efficiency_curves", &dev.contended_efficiency_curves}}) {
      if (!d.has(key)) continue;
      io::JsonNode curves = d.at(key);
      curves.expect_object();
      for (const auto& [name, value] : curves.value().items()) {
        io::JsonNode c = curves.at(name);
        if (!graphs::parse_op_class(name)) c.fail("names no op class; use gemm, conv, elementwise, reduction or movement");
        out->emplace(name, curve_from_json(c));
      }
    }
    spec.devices.push_back(std::move(dev));
  }
  if (root.has("links")) {
    io::JsonNode links = root.at("links");
    for (size_t i = 0; i < links.size(); ++i) {
      io::JsonNode l = links.at(i);
      l.check_fields({"name", "ends", "bandwidth_bytes_per_s", "latency_s", "duplex", "busy_after_s", "efficiency_curve",
                      "loaded_efficiency_curve"});
      Link link{.name = l.at("name").as_string(),
                .bandwidth_bytes_per_s = l.at("bandwidth_bytes_per_s").as_amount(),
                .latency_s = l.get_amount("latency_s", 0),
                .busy_after_s = l.get_amount("busy_after_s", 0)};
      if (link.bandwidth_bytes_per_s <= 0) l.at("bandwidth_bytes_per_s").fail("must be > 0 (a link that moves nothing cannot carry a route)");
      if (l.has("ends")) {
        io::JsonNode ends = l.at("ends");
        if (ends.size() != 2) ends.fail("must list exactly two node names");
        for (size_t k = 0; k < 2; ++k)  // an empty name would make the link a bus
          if (ends.at(k).as_string().empty())
            ends.at(k).fail("is empty; name a device or a switch (leave out \"ends\" for a bus)");
        link.end_a = ends.at(0).as_string();
        link.end_b = ends.at(1).as_string();
      }
      std::string duplex = l.get_string("duplex", "full");
      if (duplex == "half") link.duplex = Duplex::half;
      else if (duplex != "full") l.at("duplex").fail("is \"" + duplex + "\", expected \"full\" or \"half\"");
      if (l.has("efficiency_curve")) link.efficiency_curve = curve_from_json(l.at("efficiency_curve"));
      if (l.has("loaded_efficiency_curve")) link.loaded_efficiency_curve = curve_from_json(l.at("loaded_efficiency_curve"));
      spec.links.push_back(std::move(link));
    }
  }
  if (root.has("routes")) {
    io::JsonNode routes = root.at("routes");
    for (size_t i = 0; i < routes.size(); ++i) {
      io::JsonNode r = routes.at(i);
      r.check_fields({"src", "dst", "links"});
      RouteSpec rs{.src = r.at("src").as_string(), .dst = r.at("dst").as_string()};
      io::JsonNode names = r.at("links");
      for (size_t k = 0; k < names.size(); ++k) rs.links.push_back(names.at(k).as_string());
      spec.routes.push_back(std::move(rs));
    }
  }
  if (spec.name.empty()) spec.name = origin;
  try {
    return Cluster(std::move(spec));
  } catch (const Error& e) {
    throw Error(origin + ": " + e.what());
  }
}

Cluster read_cluster(const std::string& path) {
  const nlohmann::json doc = io::read_json_file(path);
  if (graphs::is_msr_instance(doc)) return msr_cluster(graphs::msr_from_json(doc, path));
  if (doc.is_object() && !doc.contains("format")) graphs::fail_unknown_format(path, "placelab.cluster");
  return cluster_from_json(doc, path);
}

nlohmann::json cluster_to_json(const Cluster& cluster) {
  const ClusterSpec& s = cluster.spec();
  nlohmann::json devices = nlohmann::json::array(), links = nlohmann::json::array(),
                 routes = nlohmann::json::array();
  for (const Device& d : s.devices) {
    devices.push_back({{"name", d.name},
                       {"kind", d.kind},
                       {"peak_flops_per_s", d.peak_flops_per_s},
                       {"memory_bandwidth_bytes_per_s", d.memory_bandwidth_bytes_per_s},
                       {"memory_bytes", d.memory_bytes},
                       {"launch_overhead_s", d.launch_overhead_s},
                       {"gap_after_op_s", d.gap_after_op_s},
                       {"efficiency", d.efficiency}});
    if (!d.copy_engine) devices.back()["copy_engine"] = false;
    if (!d.memory_domain.empty()) devices.back()["memory_domain"] = d.memory_domain;
    if (d.gemm_element_s != std::array<double, 3>{0, 0, 0}) devices.back()["gemm_element_s"] = d.gemm_element_s;
    for (auto [key, map] : {std::pair{"efficiency_curves", &d.efficiency_curves},
                            std::pair{"contended_efficiency_curves", &d.contended_efficiency_curves}}) {
      if (map->empty()) continue;
      nlohmann::json curves = nlohmann::json::object();
      for (const auto& [name, c] : *map) curves[name] = curve_to_json(c);
      devices.back()[key] = curves;
    }
  }
  for (const Link& l : s.links) {
    nlohmann::json j = {{"name", l.name},
                        {"bandwidth_bytes_per_s", l.bandwidth_bytes_per_s},
                        {"latency_s", l.latency_s},
                        {"duplex", duplex_name(l.duplex)},
                        {"busy_after_s", l.busy_after_s}};
    if (!l.end_a.empty()) j["ends"] = {l.end_a, l.end_b};
    if (!l.efficiency_curve.size.empty()) j["efficiency_curve"] = curve_to_json(l.efficiency_curve);
    if (!l.loaded_efficiency_curve.size.empty()) j["loaded_efficiency_curve"] = curve_to_json(l.loaded_efficiency_curve);
    links.push_back(std::move(j));
  }
  for (const RouteSpec& r : s.routes) routes.push_back({{"src", r.src}, {"dst", r.dst}, {"links", r.links}});
  nlohmann::json doc = {{"format", "placelab.cluster"},
                        {"version", 1},
                        {"name", s.name},
                        {"transfer_mode", transfer_mode_name(s.transfer_mode)},
                        {"devices", devices},
                        {"links", links}};
  if (!routes.empty()) doc["routes"] = routes;
  if (s.priority) doc["priority"] = priority_name(*s.priority);
  if (s.clock_unit_s != 1) doc["clock_unit_s"] = s.clock_unit_s;
  return doc;
}

void write_cluster(const Cluster& cluster, const std::string& path) {
  io::write_json_atomic(path, cluster_to_json(cluster));
}

}  // namespace placelab::sim
