// Coarsening by labels: ops with one label form one group; groups whose contraction would close a
// cycle are merged (strongly connected components of the quotient graph); each group becomes one op
// whose numbers aggregate its members'. contract_colocation, fuse_chains and group_by_size only choose
// the labels.
#include "graphs/coarsen.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <queue>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::graphs {

namespace {

// Union-find over dense ids, with path halving.
class DisjointSets {
 public:
  explicit DisjointSets(int32_t n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int32_t find(int32_t a) {
    while (parent_[a] != a) a = parent_[a] = parent_[parent_[a]];
    return a;
  }
  /** Joins the sets of a and b; the root of a's set stays the root. */
  void join(int32_t a, int32_t b) {
    a = find(a);
    b = find(b);
    if (a != b) parent_[b] = a;
  }

 private:
  std::vector<int32_t> parent_;
};

// Strongly connected components (Tarjan, iterative); returns the component of each node.
std::vector<int32_t> strong_components(const std::vector<std::vector<int32_t>>& adj) {
  const auto k = static_cast<int32_t>(adj.size());
  std::vector<int32_t> index(k, -1), low(k, 0), comp(k, -1), stack;
  std::vector<char> on_stack(k, 0);
  std::vector<std::pair<int32_t, size_t>> calls;  // node, next child to visit
  int32_t next_index = 0, num_comps = 0;
  auto enter = [&](int32_t v) {
    index[v] = low[v] = next_index++;
    stack.push_back(v);
    on_stack[v] = 1;
    calls.emplace_back(v, 0);
  };
  for (int32_t root = 0; root < k; ++root) {
    if (index[root] >= 0) continue;
    enter(root);
    while (!calls.empty()) {
      const int32_t v = calls.back().first;
      if (calls.back().second < adj[v].size()) {
        const int32_t w = adj[v][calls.back().second++];
        if (index[w] < 0) enter(w);
        else if (on_stack[w]) low[v] = std::min(low[v], index[w]);
        continue;
      }
      calls.pop_back();
      if (low[v] == index[v]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = num_comps;
        } while (w != v);
        ++num_comps;
      }
      if (!calls.empty()) low[calls.back().first] = std::min(low[calls.back().first], low[v]);
    }
  }
  return comp;
}

// Dense group ids from labels, merged where the quotient graph has cycles, numbered by the first
// member in topological order.
std::vector<OpId> acyclic_groups(const Graph& g, std::span<const int64_t> label) {
  const OpId n = g.num_ops();
  std::unordered_map<int64_t, int32_t> dense;
  std::vector<int32_t> group(n);
  for (OpId op = 0; op < n; ++op)
    group[op] = dense.emplace(label[op], static_cast<int32_t>(dense.size())).first->second;
  std::vector<std::vector<int32_t>> adj(dense.size());
  for (EdgeId e = 0; e < g.num_edges(); ++e) {
    const int32_t a = group[g.edge_src(e)], b = group[g.edge_dst(e)];
    if (a != b) adj[a].push_back(b);
  }
  const std::vector<int32_t> comp = strong_components(adj);
  std::vector<int32_t> renumber(adj.size(), -1);
  int32_t next = 0;
  std::vector<OpId> group_of(n);
  for (OpId op : g.topo_order()) {
    int32_t& id = renumber[comp[group[op]]];
    if (id < 0) id = next++;
    group_of[op] = id;
  }
  return group_of;
}

// Sums `values` unless one is unknown.
struct KnownSum {
  double sum = 0;
  bool known = true;
  void add(double v) {
    if (std::isnan(v)) known = false;
    else sum += v;
  }
};

// The coarse graph of `group_of` (dense, acyclic); see docs/graph_transforms.md for the rules.
Graph build_coarse(const Graph& g, const std::vector<OpId>& group_of, const std::string& name) {
  const OpId n = g.num_ops();
  const int32_t groups = n == 0 ? 0 : *std::max_element(group_of.begin(), group_of.end()) + 1;
  std::vector<std::vector<OpId>> members(groups);
  for (OpId op : g.topo_order()) members[group_of[op]].push_back(op);

  // Coarse classes: classes that share a group are joined; the coarse id is the set's smallest class.
  std::unordered_map<int32_t, int32_t> class_index;
  std::vector<int32_t> class_ids;
  for (OpId op = 0; op < n; ++op)
    if (g.colocation(op) != kNoClass && class_index.emplace(g.colocation(op), class_ids.size()).second)
      class_ids.push_back(g.colocation(op));
  DisjointSets classes(static_cast<int32_t>(class_ids.size()));
  for (const auto& ops : members) {
    int32_t first = -1;
    for (OpId op : ops) {
      if (g.colocation(op) == kNoClass) continue;
      const int32_t c = class_index.at(g.colocation(op));
      if (first < 0) first = c;
      else classes.join(first, c);
    }
  }
  std::vector<int32_t> smallest_class(class_ids.size(), INT32_MAX);
  for (size_t c = 0; c < class_ids.size(); ++c) {
    int32_t& s = smallest_class[classes.find(static_cast<int32_t>(c))];
    s = std::min(s, class_ids[c]);
  }

  std::unordered_set<std::string> names;
  for (const auto& ops : members)
    if (ops.size() == 1) names.insert(g.op_name(ops[0]));
  const auto kinds = static_cast<int32_t>(g.measured_kinds().size());
  GraphBuilder builder(name);
  for (int32_t gid = 0; gid < groups; ++gid) {
    const std::vector<OpId>& ops = members[gid];
    const OpId leader = ops.front();
    OpSpec spec;
    spec.name = g.op_name(leader);
    if (ops.size() > 1) {
      spec.name += fmt::format("+{}", ops.size() - 1);
      while (!names.insert(spec.name).second) spec.name += fmt::format("#{}", gid);
    }
    spec.type = g.op_type(leader);
    spec.phase = g.phase(leader);
    spec.layer = g.layer(leader);
    std::vector<KnownSum> measured(kinds);
    OpId pinned_by = -1;
    for (OpId op : ops) {
      if (g.op_type_id(op) != g.op_type_id(leader)) spec.type = "Group";
      // forward < backward < update: the group is forward if any member is.
      spec.phase = std::min(spec.phase, g.phase(op));
      if (g.layer(op) != spec.layer) spec.layer = kNoClass;
      spec.flops += g.flops(op);
      spec.bytes_read += g.bytes_read(op);
      spec.bytes_written += g.bytes_written(op);
      spec.param_bytes += g.param_bytes(op);
      spec.temp_bytes += g.temp_bytes(op);
      bool leaves = g.out_degree(op) == 0;
      for (OpId next : g.successors(op)) leaves = leaves || group_of[next] != gid;
      if (leaves) spec.output_bytes += g.output_bytes(op);
      if (g.colocation(op) != kNoClass)
        spec.colocation = smallest_class[classes.find(class_index.at(g.colocation(op)))];
      for (int32_t k = 0; k < kinds; ++k) measured[k].add(g.measured_s(op, k));
      if (g.pinned_kind(op).empty()) continue;
      if (pinned_by >= 0 && g.pinned_kind(op) != g.pinned_kind(pinned_by))
        throw Error(fmt::format("coarsening \"{}\": ops \"{}\" (pinned to \"{}\") and \"{}\" (pinned to \"{}\") must "
                                "share a device (same colocation class, or a cycle through their classes); "
                                "pin them to one kind", name, g.op_name(pinned_by), g.pinned_kind(pinned_by),
                                g.op_name(op), g.pinned_kind(op)));
      pinned_by = op;
    }
    if (pinned_by >= 0) spec.pinned_kind = g.pinned_kind(pinned_by);
    if (ops.size() == 1) spec.gemm = g.gemm(leader);  // a group's products have no one shape
    for (int32_t k = 0; k < kinds; ++k)
      if (measured[k].known) spec.measured_s.emplace_back(g.measured_kinds()[k], measured[k].sum);
    builder.add_op(std::move(spec));
  }

  // A producer's tensor goes to a destination group once: per (producer, group) keep its largest
  // edge, then sum over the producers of each group pair.
  struct Crossing {
    int32_t src_group, dst_group;
    OpId producer;
    double bytes, comm_s;
  };
  std::vector<Crossing> crossings;
  for (EdgeId e = 0; e < g.num_edges(); ++e) {
    const int32_t a = group_of[g.edge_src(e)], b = group_of[g.edge_dst(e)];
    if (a != b) crossings.push_back({a, b, g.edge_src(e), g.edge_bytes(e), g.edge_comm_s(e)});
  }
  std::sort(crossings.begin(), crossings.end(), [](const Crossing& x, const Crossing& y) {
    return std::tie(x.src_group, x.dst_group, x.producer) < std::tie(y.src_group, y.dst_group, y.producer);
  });
  for (size_t i = 0; i < crossings.size();) {
    const Crossing& first = crossings[i];
    double bytes = 0, comm_s = 0;
    bool any_comm = false;
    while (i < crossings.size() && crossings[i].src_group == first.src_group &&
           crossings[i].dst_group == first.dst_group) {
      const OpId producer = crossings[i].producer;
      double max_bytes = 0, max_comm_s = kUnknown;
      for (; i < crossings.size() && crossings[i].dst_group == first.dst_group && crossings[i].producer == producer;
           ++i) {
        max_bytes = std::max(max_bytes, crossings[i].bytes);
        if (!std::isnan(crossings[i].comm_s))
          max_comm_s = std::isnan(max_comm_s) ? crossings[i].comm_s : std::max(max_comm_s, crossings[i].comm_s);
      }
      bytes += max_bytes;
      if (!std::isnan(max_comm_s)) {
        comm_s += max_comm_s;
        any_comm = true;
      }
    }
    builder.add_edge(first.src_group, first.dst_group, bytes, any_comm ? comm_s : kUnknown);
  }
  return std::move(builder).build();
}

}  // namespace

Coarsening contract_labels(const Graph& g, std::span<const int64_t> label, const std::string& name) {
  if (static_cast<int64_t>(label.size()) != g.num_ops())
    throw Error(fmt::format("coarsening \"{}\": {} labels for {} ops (give one label per op)", name, label.size(),
                            g.num_ops()));
  Coarsening c;
  c.group_of = acyclic_groups(g, label);
  c.graph = build_coarse(g, c.group_of, name);
  return c;
}

Coarsening contract_colocation(const Graph& g) {
  // Classes are >= 0, so negative labels (one per op) keep unconstrained ops alone.
  std::vector<int64_t> label(g.num_ops());
  for (OpId op = 0; op < g.num_ops(); ++op)
    label[op] = g.colocation(op) != kNoClass ? g.colocation(op) : -1 - static_cast<int64_t>(op);
  return contract_labels(g, label, g.name() + "/colocation");
}

Coarsening fuse_chains(const Graph& g) {
  DisjointSets chains(g.num_ops());
  std::vector<OpId> pinned_op(g.num_ops(), -1);  // per chain root: a member with a pin, or -1
  for (OpId op = 0; op < g.num_ops(); ++op)
    if (!g.pinned_kind(op).empty()) pinned_op[op] = op;
  for (OpId op : g.topo_order()) {
    if (g.out_degree(op) != 1) continue;
    const OpId next = g.successors(op)[0];
    if (g.in_degree(next) != 1) continue;
    const OpId a = chains.find(op), b = chains.find(next);
    if (pinned_op[a] >= 0 && pinned_op[b] >= 0 && g.pinned_kind(pinned_op[a]) != g.pinned_kind(pinned_op[b]))
      continue;
    if (pinned_op[a] < 0) pinned_op[a] = pinned_op[b];
    chains.join(a, b);
  }
  std::vector<int64_t> label(g.num_ops());
  for (OpId op = 0; op < g.num_ops(); ++op) label[op] = chains.find(op);
  return contract_labels(g, label, g.name() + "/chains");
}

namespace {

// Weight of each op for group_by_size: FLOPs; else the first measured kind with a positive total;
// else 1 per op.
std::vector<double> op_weights(const Graph& g) {
  std::vector<double> w(g.num_ops());
  for (OpId op = 0; op < g.num_ops(); ++op) w[op] = g.flops(op);
  if (std::accumulate(w.begin(), w.end(), 0.0) > 0) return w;
  for (int32_t k = 0; k < static_cast<int32_t>(g.measured_kinds().size()); ++k) {
    for (OpId op = 0; op < g.num_ops(); ++op) w[op] = std::isnan(g.measured_s(op, k)) ? 0 : g.measured_s(op, k);
    if (std::accumulate(w.begin(), w.end(), 0.0) > 0) return w;
  }
  std::fill(w.begin(), w.end(), 1.0);
  return w;
}

}  // namespace

Coarsening group_by_size(const Graph& g, int32_t max_groups) {
  if (max_groups < 1)
    throw Error(fmt::format("group_by_size of graph \"{}\": max_groups is {} (must be >= 1)", g.name(), max_groups));
  const OpId n = g.num_ops();
  const std::vector<double> weight = op_weights(g);
  // Ops in topological order; prefix[i] = weight of the first i of them.
  std::span<const OpId> order = g.topo_order();
  std::vector<double> prefix(n + 1, 0.0);
  for (OpId i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + weight[order[i]];
  // A group must not hold two pin kinds: such neighbours are always cut apart.
  std::vector<char> forced_cut(n, 0);
  const std::string* pin = nullptr;
  for (OpId i = 0; i < n; ++i) {
    const std::string& p = g.pinned_kind(order[i]);
    if (p.empty()) continue;
    if (pin != nullptr && *pin != p) forced_cut[i] = 1;
    pin = &p;
  }

  // Greedy packing under a capacity: starts of the groups.
  auto pack = [&](double capacity) {
    std::vector<OpId> starts{0};
    for (OpId i = 1; i < n; ++i)
      if (forced_cut[i] || prefix[i + 1] - prefix[starts.back()] > capacity) starts.push_back(i);
    return starts;
  };
  // Smallest capacity that packs into max_groups (bisection; the greedy is optimal for a capacity).
  // With more forced cuts than max_groups nothing fits, and the forced groups are returned.
  auto fits = [&](double capacity) { return static_cast<int32_t>(pack(capacity).size()) <= max_groups; };
  double lo = 0, hi = prefix[n];
  for (OpId i = 0; i < n; ++i) lo = std::max(lo, weight[order[i]]);
  if (fits(lo)) hi = lo;
  for (int iter = 0; iter < 100 && hi - lo > 1e-12 * hi; ++iter) {
    const double mid = lo + (hi - lo) / 2;
    (fits(mid) ? hi : lo) = mid;
  }
  const std::vector<OpId> starts = pack(hi);

  // Use the remaining budget: split the heaviest group (then the largest) at its most balanced point.
  using Interval = std::tuple<double, OpId, OpId>;  // weight, size, -begin (heaviest, largest, earliest first)
  std::priority_queue<Interval> queue;
  std::vector<std::pair<OpId, OpId>> done;  // [begin, end) that cannot or need not be split
  for (size_t k = 0; k < starts.size(); ++k) {
    const OpId b = starts[k], e = k + 1 < starts.size() ? starts[k + 1] : n;
    if (e - b > 1) queue.emplace(prefix[e] - prefix[b], e - b, -b);
    else done.emplace_back(b, e);
  }
  auto count = [&] { return static_cast<int32_t>(queue.size() + done.size()); };
  while (count() < max_groups && !queue.empty()) {
    const auto [w, size, neg_begin] = queue.top();
    queue.pop();
    const OpId b = -neg_begin, e = b + size;
    OpId best = b + 1;
    auto cost = [&](OpId p) {
      return std::pair{std::max(prefix[p] - prefix[b], prefix[e] - prefix[p]), std::abs((p - b) - (e - p))};
    };
    for (OpId p = b + 2; p < e; ++p)
      if (cost(p) < cost(best)) best = p;
    for (auto [sb, se] : {std::pair{b, best}, std::pair{best, e}}) {
      if (se - sb > 1) queue.emplace(prefix[se] - prefix[sb], se - sb, -sb);
      else done.emplace_back(sb, se);
    }
  }
  while (!queue.empty()) {
    const auto [w, size, neg_begin] = queue.top();
    queue.pop();
    done.emplace_back(-neg_begin, -neg_begin + size);
  }
  std::vector<int64_t> label(n);
  for (auto [b, e] : done)
    for (OpId i = b; i < e; ++i) label[order[i]] = b;
  return contract_labels(g, label, g.name() + "/groups");
}

Coarsening compose(const Coarsening& first, const Coarsening& second) {
  if (static_cast<int64_t>(second.group_of.size()) != first.graph.num_ops())
    throw Error(fmt::format("compose: the second coarsening maps {} ops but the first has {} coarse ops (it must "
                            "coarsen the first's graph)", second.group_of.size(), first.graph.num_ops()));
  Coarsening c;
  c.graph = second.graph;
  c.group_of.reserve(first.group_of.size());
  for (OpId group : first.group_of) c.group_of.push_back(second.group_of[group]);
  return c;
}

std::vector<int32_t> expand_placement(std::span<const int32_t> coarse_device_of, const Coarsening& c) {
  if (static_cast<int64_t>(coarse_device_of.size()) != c.graph.num_ops())
    throw Error(fmt::format("expand_placement: the placement has {} entries but the coarse graph \"{}\" has {} ops",
                            coarse_device_of.size(), c.graph.name(), c.graph.num_ops()));
  for (size_t g = 0; g < coarse_device_of.size(); ++g)
    if (coarse_device_of[g] < 0)
      throw Error(fmt::format("expand_placement: the placement puts coarse op {} (\"{}\") on device {}; devices are "
                              "indices from 0",
                              g, c.graph.op_name(static_cast<OpId>(g)), coarse_device_of[g]));
  std::vector<int32_t> device_of;
  device_of.reserve(c.group_of.size());
  for (OpId group : c.group_of) device_of.push_back(coarse_device_of[group]);
  return device_of;
}

}  // namespace placelab::graphs
