// Builds the throughput placers' view of a graph: groups, their DAG, device classes and hyperedges.
#include "policy/classic/throughput_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/classic/units.h"

namespace placelab::policy {

namespace {

struct UnionFind {
  explicit UnionFind(int32_t n) : parent(n) { std::iota(parent.begin(), parent.end(), 0); }
  int32_t find(int32_t a) {
    while (parent[a] != a) a = parent[a] = parent[parent[a]];
    return a;
  }
  void unite(int32_t a, int32_t b) { parent[find(a)] = find(b); }
  std::vector<int32_t> parent;
};

/** Strongly connected components (iterative Tarjan): component index per node. */
std::vector<int32_t> strong_components(const std::vector<std::vector<int32_t>>& succ) {
  const int32_t n = static_cast<int32_t>(succ.size());
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1), stack;
  std::vector<char> on_stack(n, 0);
  std::vector<std::pair<int32_t, size_t>> call;  // (node, next successor position)
  int32_t counter = 0, components = 0;
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    call.emplace_back(root, 0);
    index[root] = low[root] = counter++;
    stack.push_back(root);
    on_stack[root] = 1;
    while (!call.empty()) {
      auto& [v, pos] = call.back();
      if (pos < succ[v].size()) {
        const int32_t w = succ[v][pos++];
        if (index[w] < 0) {
          index[w] = low[w] = counter++;
          stack.push_back(w);
          on_stack[w] = 1;
          call.emplace_back(w, 0);
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const int32_t done = v;
      call.pop_back();
      if (!call.empty()) low[call.back().first] = std::min(low[call.back().first], low[done]);
      if (low[done] == index[done]) {
        int32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = components;
        } while (w != done);
        ++components;
      }
    }
  }
  return comp;
}

/** Renumbers labels (one per op) densely in order of their first op. */
std::vector<int32_t> dense_labels(const std::vector<int32_t>& label) {
  std::map<int32_t, int32_t> id;
  std::vector<int32_t> out(label.size());
  for (size_t i = 0; i < label.size(); ++i) {
    auto [it, fresh] = id.emplace(label[i], static_cast<int32_t>(id.size()));
    out[i] = it->second;
  }
  return out;
}

/** Biconnected components of an undirected graph (recursive Tarjan): the component of each edge. */
class Biconnected {
 public:
  explicit Biconnected(const std::vector<std::vector<std::pair<int32_t, int32_t>>>& adjacent, int32_t edges)
      : adj_(adjacent), entry_(adjacent.size(), -1), low_(adjacent.size(), 0), component_(edges, -1) {
    for (int32_t v = 0; v < static_cast<int32_t>(adj_.size()); ++v)
      if (entry_[v] < 0) search(v, -1);
  }
  const std::vector<int32_t>& component() const { return component_; }

 private:
  void search(int32_t v, int32_t parent_edge) {
    entry_[v] = low_[v] = time_++;
    for (auto [w, e] : adj_[v]) {
      if (e == parent_edge) continue;
      if (entry_[w] < 0) {
        stack_.push_back(e);
        search(w, e);
        low_[v] = std::min(low_[v], low_[w]);
        if (low_[w] >= entry_[v]) {
          int32_t f;
          do {
            f = stack_.back();
            stack_.pop_back();
            component_[f] = count_;
          } while (f != e);
          ++count_;
        }
      } else if (entry_[w] < entry_[v]) {
        stack_.push_back(e);
        low_[v] = std::min(low_[v], entry_[w]);
      }
    }
  }
  const std::vector<std::vector<std::pair<int32_t, int32_t>>>& adj_;
  std::vector<int32_t> entry_, low_, component_, stack_;
  int32_t time_ = 0, count_ = 0;
};

/**
 * PipeDream's contraction as Tarnawski et al. ran it: on the graph of (colour class, forward/backward)
 * nodes, every biconnected component fuses the classes of the tails of its edges, so that what remains
 * is close to a chain of blocks. Returns the new dense group of each op.
 */
std::vector<int32_t> fuse_biconnected(const graphs::Graph& g, const std::vector<int32_t>& group, int32_t groups) {
  auto node = [&](graphs::OpId op) { return 2 * group[op] + (g.phase(op) == graphs::Phase::forward ? 0 : 1); };
  std::map<std::pair<int32_t, int32_t>, int32_t> edge_index;
  std::vector<std::pair<int32_t, int32_t>> edges;
  std::vector<std::vector<std::pair<int32_t, int32_t>>> adjacent(2 * static_cast<size_t>(groups));
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    const int32_t a = node(g.edge_src(e)), b = node(g.edge_dst(e));
    if (a == b) continue;
    auto [it, fresh] = edge_index.emplace(std::make_pair(a, b), static_cast<int32_t>(edges.size()));
    if (!fresh) continue;
    adjacent[a].emplace_back(b, it->second);
    adjacent[b].emplace_back(a, it->second);
    edges.emplace_back(a, b);
  }
  const Biconnected bcc(adjacent, static_cast<int32_t>(edges.size()));
  UnionFind joined(groups);
  std::map<int32_t, int32_t> first_tail;
  for (size_t e = 0; e < edges.size(); ++e) {
    auto [it, fresh] = first_tail.emplace(bcc.component()[e], edges[e].first / 2);
    if (!fresh) joined.unite(edges[e].first / 2, it->second);
  }
  std::vector<int32_t> label(group.size());
  for (size_t op = 0; op < group.size(); ++op) label[op] = joined.find(group[op]);
  return dense_labels(label);
}


}  // namespace

ThroughputModel::ThroughputModel(const sim::Simulator& simulator, bool linearize, bool fuse_blocks)
    : graph_(&simulator.graph()) {
  const graphs::Graph& g = *graph_;
  const sim::Cluster& c = simulator.cluster();
  const int32_t n = g.num_ops();
  auto forward = [&](graphs::OpId op) { return g.phase(op) == graphs::Phase::forward; };

  // 1. Colour classes: one group per class, ops without a class alone.
  UnionFind classes(n);
  {
    std::map<int32_t, graphs::OpId> first_of_class;
    for (graphs::OpId op = 0; op < n; ++op) {
      if (g.colocation(op) == graphs::kNoClass) continue;
      auto [it, fresh] = first_of_class.emplace(g.colocation(op), op);
      if (!fresh) classes.unite(op, it->second);
    }
  }
  std::vector<int32_t> label(n);
  for (graphs::OpId op = 0; op < n; ++op) label[op] = classes.find(op);
  std::vector<int32_t> group = dense_labels(label);
  int32_t groups = group.empty() ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  if (linearize && fuse_blocks) {
    group = fuse_biconnected(g, group, groups);
    groups = group.empty() ? 0 : *std::max_element(group.begin(), group.end()) + 1;
  }
  std::vector<char> has_forward(groups, 0);
  for (graphs::OpId op = 0; op < n; ++op) has_forward[group[op]] |= forward(op) ? 1 : 0;

  // 2. The forward DAG between groups: forward edges, and for a group with no forward op the mirror of
  //    its backward edges (the reference's artificial forward nodes).
  std::vector<std::vector<int32_t>> succ(groups);
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
    const graphs::OpId u = g.edge_src(e), v = g.edge_dst(e);
    const int32_t gu = group[u], gv = group[v];
    if (gu == gv) continue;
    if (forward(u) && forward(v)) succ[gu].push_back(gv);
    if (!forward(u) && !forward(v) && (!has_forward[gu] || !has_forward[gv])) succ[gv].push_back(gu);
  }
  // 3. Cycles between groups (a colour class spanning a path) are fused. Then, as the reference does, a
  //    group that takes no time, holds no memory (or memory cannot bind) and touches exactly one other
  //    group (by any edge) joins
  //    it: that never makes a split worse (its only traffic is with that group) and it shrinks the
  //    number of ideals by orders of magnitude on graphs with many zero-time nodes (gnmt).
  const int32_t class_groups = groups;
  std::vector<int32_t> merged(class_groups);  // class group -> a class group of its merged group
  {
    const std::vector<int32_t> comp = strong_components(succ);
    std::vector<int32_t> first_of_comp(class_groups, -1);
    for (int32_t a = 0; a < class_groups; ++a) {
      if (first_of_comp[comp[a]] < 0) first_of_comp[comp[a]] = a;
      merged[a] = first_of_comp[comp[a]];
    }
    // Memory does not matter when the whole graph fits on every device.
    double total_bytes = 0, smallest_bytes = std::numeric_limits<double>::infinity();
    for (graphs::OpId op = 0; op < n; ++op) total_bytes += g.param_bytes(op);
    for (int32_t d = 0; d < c.num_devices(); ++d) smallest_bytes = std::min(smallest_bytes, c.device(d).memory_bytes);
    const bool memory_free = total_bytes <= smallest_bytes;
    std::vector<char> idle(class_groups, 1);
    for (graphs::OpId op = 0; op < n; ++op) {
      bool zero = (memory_free || g.param_bytes(op) == 0) && g.pinned_kind(op).empty();
      for (int32_t d = 0; d < c.num_devices() && zero; ++d) zero = simulator.op_time_s(op, d) == 0;
      if (!zero) idle[group[op]] = 0;
    }
    UnionFind joined(class_groups);
    for (int32_t a = 0; a < class_groups; ++a) joined.unite(a, merged[a]);
    for (bool changed = true; changed;) {
      changed = false;
      std::vector<char> idle_root(class_groups, 1);
      for (int32_t a = 0; a < class_groups; ++a) idle_root[joined.find(a)] &= idle[a];
      std::vector<std::vector<int32_t>> adjacent(class_groups);
      auto link = [&](int32_t a, int32_t b) {
        a = joined.find(a), b = joined.find(b);
        if (a != b) adjacent[a].push_back(b), adjacent[b].push_back(a);
      };
      for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) link(group[g.edge_src(e)], group[g.edge_dst(e)]);
      for (int32_t a = 0; a < class_groups; ++a)
        for (int32_t b : succ[a]) link(a, b);
      for (int32_t a = 0; a < class_groups; ++a) {
        auto& adj = adjacent[a];
        std::sort(adj.begin(), adj.end());
        adj.erase(std::unique(adj.begin(), adj.end()), adj.end());
        if (joined.find(a) == a && idle_root[a] && adj.size() == 1 && joined.find(adj[0]) != joined.find(a)) {
          joined.unite(a, adj[0]);
          changed = true;  // later groups of this pass see a stale adjacency, which only delays merges
        }
      }
    }
    for (int32_t a = 0; a < class_groups; ++a) merged[a] = joined.find(a);
  }
  for (graphs::OpId op = 0; op < n; ++op) label[op] = merged[group[op]];
  group_of_ = dense_labels(label);
  groups = group_of_.empty() ? 0 : *std::max_element(group_of_.begin(), group_of_.end()) + 1;
  members_.assign(groups, {});
  for (graphs::OpId op = 0; op < n; ++op) members_[group_of_[op]].push_back(op);
  std::vector<int32_t> final_of_class(class_groups, -1);
  for (graphs::OpId op = 0; op < n; ++op) final_of_class[group[op]] = group_of_[op];
  preds_.assign(groups, {});
  succs_.assign(groups, {});
  for (int32_t a = 0; a < class_groups; ++a) {
    for (int32_t b : succ[a]) {
      const int32_t ga = final_of_class[a], gb = final_of_class[b];
      if (ga != gb) succs_[ga].push_back(gb);
    }
  }
  for (auto& s : succs_) {
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
  }
  if (linearize) {
    // PipeDream's linear order as the reference builds it: Kahn's algorithm with a stack (DFS-like),
    // sources pushed in group order, successors in increasing order. The chain replaces the DAG.
    std::vector<int32_t> indegree(groups, 0), stack, order;
    for (const auto& s : succs_)
      for (int32_t b : s) ++indegree[b];
    for (int32_t v = 0; v < groups; ++v)
      if (indegree[v] == 0) stack.push_back(v);
    while (!stack.empty()) {
      const int32_t v = stack.back();
      stack.pop_back();
      order.push_back(v);
      for (int32_t b : succs_[v])
        if (--indegree[b] == 0) stack.push_back(b);
    }
    for (auto& s : succs_) s.clear();
    for (size_t i = 1; i < order.size(); ++i) succs_[order[i - 1]].push_back(order[i]);
  }
  for (int32_t a = 0; a < groups; ++a)
    for (int32_t b : succs_[a]) preds_[b].push_back(a);

  // 4. Device classes: devices with the same kind, capacity and op times are interchangeable.
  class_of_device_.assign(c.num_devices(), -1);
  std::vector<int32_t> representative;
  for (int32_t d = 0; d < c.num_devices(); ++d) {
    for (int32_t t = 0; t < num_classes() && class_of_device_[d] < 0; ++t) {
      const int32_t r = representative[t];
      if (c.device(r).kind != c.device(d).kind || c.device(r).memory_bytes != c.device(d).memory_bytes) continue;
      bool same = true;
      for (graphs::OpId op = 0; op < n && same; ++op) same = simulator.op_time_s(op, r) == simulator.op_time_s(op, d);
      if (same) class_of_device_[d] = t;
    }
    if (class_of_device_[d] < 0) {
      if (num_classes() == kMaxClasses)
        throw Error(fmt::format("throughput placers: more than {} distinct device classes in the cluster", kMaxClasses));
      class_of_device_[d] = num_classes();
      representative.push_back(d);
      classes_.push_back({c.device(d).kind, {}, c.device(d).kind != "cpu", c.device(d).memory_bytes});
    }
    classes_[class_of_device_[d]].devices.push_back(d);
  }

  // 5. Times, memory and pins per group and class.
  const size_t C = classes_.size();
  time_s_.assign(static_cast<size_t>(groups) * C, 0.0);
  forbidden_.assign(static_cast<size_t>(groups) * C, 0);
  memory_bytes_.assign(groups, 0.0);
  // Memory: parameters (Tarnawski et al.'s node sizes), and the outputs a training step keeps into a later
  // phase (forward activations for the backward pass, gradients for the update), as the simulator holds
  // them; msr inputs have no output bytes, so their model is unchanged.
  std::vector<bool> kept(n, false);
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e)
    if (g.phase(g.edge_dst(e)) > g.phase(g.edge_src(e))) kept[g.edge_src(e)] = true;
  for (graphs::OpId op = 0; op < n; ++op) {
    const int32_t v = group_of_[op];
    memory_bytes_[v] += g.param_bytes(op) + (kept[op] ? g.output_bytes(op) : 0.0);
    const std::string& pin = g.pinned_kind(op);
    bool placeable = pin.empty();
    for (size_t t = 0; t < C; ++t) {
      if (!pin.empty() && pin != classes_[t].kind) {
        forbidden_[v * C + t] = 1;
      } else {
        placeable = true;
        time_s_[v * C + t] += simulator.op_time_s(op, representative[t]);
      }
    }
    if (!placeable) fail_unplaceable_pin(g, c, op);  // not "no split fits the memory", the real reason
  }

  // 6. Hyperedges: an op and the groups of its data consumers (control edges cost nothing, as in
  //    sim::max_load); cost = the largest cost of an edge leaving its group (an edge's measured comm_s,
  //    else its slowest transfer between two distinct devices), so the model never charges less than
  //    sim::max_load does.
  auto transfer_s = [&](double bytes) {
    double worst = 0;
    for (int32_t a = 0; a < c.num_devices(); ++a)
      for (int32_t b = 0; b < c.num_devices(); ++b)
        if (a != b) worst = std::max(worst, c.transfer_time_s(a, b, bytes));
    return worst;
  };
  std::map<std::vector<int32_t>, int32_t> index;
  hyperedges_of_.assign(groups, {});
  for (graphs::OpId u = 0; u < n; ++u) {
    std::vector<int32_t> h = {group_of_[u]};
    double cost = 0;
    for (graphs::EdgeId e : g.out_edges(u)) {
      const int32_t gv = group_of_[g.edge_dst(e)];
      if (gv == group_of_[u] || g.is_control_edge(e)) continue;
      h.push_back(gv);
      cost = std::max(cost, std::isnan(g.edge_comm_s(e)) ? transfer_s(g.edge_bytes(e)) : g.edge_comm_s(e));
    }
    if (h.size() == 1 || cost <= 0) continue;
    std::sort(h.begin(), h.end());
    h.erase(std::unique(h.begin(), h.end()), h.end());
    auto [it, fresh] = index.emplace(h, num_hyperedges());
    if (fresh) {
      for (int32_t v : h) hyperedges_of_[v].push_back(it->second);
      hyperedge_members_.push_back(std::move(h));
      hyperedge_cost_s_.push_back(cost);
    } else {
      hyperedge_cost_s_[it->second] += cost;
    }
  }

  // 7. Bounds for the DP's thresholds.
  double total_min = 0, largest_min = 0, comm = 0;
  std::vector<double> total(C, 0.0);
  for (int32_t v = 0; v < groups; ++v) {
    double best = std::numeric_limits<double>::infinity();
    for (size_t t = 0; t < C; ++t) {
      if (forbidden(v, static_cast<int32_t>(t))) continue;
      best = std::min(best, time_s(v, static_cast<int32_t>(t)));
      total[t] += time_s(v, static_cast<int32_t>(t));
    }
    if (std::isfinite(best)) total_min += best, largest_min = std::max(largest_min, best);
  }
  for (double x : hyperedge_cost_s_) comm += x;
  // With every class's work spread evenly (exact when times are proportional across classes, a
  // heuristic start otherwise: the DP's answer does not depend on it, only its speed).
  double rate = 0;
  for (size_t t = 0; t < C; ++t)
    if (total[t] > 0) rate += static_cast<double>(classes_[t].devices.size()) / total[t];
  floor_s_ = std::max({largest_min, c.num_devices() > 0 ? total_min / c.num_devices() : 0.0,
                       rate > 0 ? 1 / rate : 0.0});
  ceiling_s_ = *std::max_element(total.begin(), total.end()) + comm;
}

}  // namespace placelab::policy
