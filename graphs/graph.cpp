// GraphBuilder validation and the derived structures of Graph (CSR, topological order, depth).
#include "graphs/graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::graphs {

std::string_view phase_name(Phase phase) {
  switch (phase) {
    case Phase::forward: return "forward";
    case Phase::backward: return "backward";
    case Phase::update: return "update";
  }
  return "forward";
}

Phase parse_phase(std::string_view name, std::string_view where) {
  if (name == "forward") return Phase::forward;
  if (name == "backward") return Phase::backward;
  if (name == "update") return Phase::update;
  throw Error(fmt::format("{}: unknown phase \"{}\" (use forward, backward or update)", where, name));
}

int32_t Graph::measured_kind_index(std::string_view kind) const {
  for (size_t k = 0; k < measured_kinds_.size(); ++k)
    if (measured_kinds_[k] == kind) return static_cast<int32_t>(k);
  return -1;
}

OpId Graph::find_op(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : it->second;
}

GraphStats Graph::stats() const {
  GraphStats s;
  s.ops = num_ops();
  s.edges = num_edges();
  s.op_types = static_cast<int64_t>(type_names_.size());
  std::unordered_set<int32_t> classes;
  for (OpId op = 0; op < num_ops(); ++op) {
    switch (phase_[op]) {
      case Phase::forward: ++s.forward_ops; break;
      case Phase::backward: ++s.backward_ops; break;
      case Phase::update: ++s.update_ops; break;
    }
    if (colocation_[op] != kNoClass) classes.insert(colocation_[op]);
    s.depth = std::max(s.depth, depth_[op] + 1);
    s.flops += flops_[op];
    s.bytes_read += bytes_read_[op];
    s.bytes_written += bytes_written_[op];
    s.output_bytes += output_bytes_[op];
    s.param_bytes += param_bytes_[op];
  }
  s.colocation_classes = static_cast<int64_t>(classes.size());
  for (double b : edge_bytes_) s.edge_bytes += b;
  return s;
}

OpSpec Graph::op_spec(OpId op) const {
  OpSpec spec{.name = names_[op],
              .type = type_names_[type_id_[op]],
              .phase = phase_[op],
              .flops = flops_[op],
              .bytes_read = bytes_read_[op],
              .bytes_written = bytes_written_[op],
              .output_bytes = output_bytes_[op],
              .param_bytes = param_bytes_[op],
              .temp_bytes = temp_bytes_[op],
              .colocation = colocation_[op],
              .layer = layer_[op],
              .pinned_kind = pinned_kind(op),
              .gemm = gemm_[op],
              .measured_s = {}};
  for (size_t k = 0; k < measured_kinds_.size(); ++k) {
    double t = measured_s(op, static_cast<int32_t>(k));
    if (!std::isnan(t)) spec.measured_s.emplace_back(measured_kinds_[k], t);
  }
  return spec;
}

EdgeSpec Graph::edge_spec(EdgeId e) const {
  return {edge_src_[e], edge_dst_[e], edge_bytes_[e], edge_comm_s_[e]};
}

GemmDims square_dims(double flops) {
  if (!(flops > 0)) return {};
  flops = std::min(flops, 0x1p62);  // n and k must fit int64
  auto n = std::max<int64_t>(1, static_cast<int64_t>(std::cbrt(flops / 2)));
  if (n >= 8) n -= n % 8;
  const auto nn = static_cast<double>(n) * static_cast<double>(n);
  const int64_t k = std::clamp<int64_t>(std::llround(flops / (2 * nn)), 1, kMaxGemmDim);
  return {.batch = 1, .m = n, .n = n, .k = k};
}

GraphBuilder::GraphBuilder(std::string name) : name_(std::move(name)) {}

OpId GraphBuilder::add_op(OpSpec spec) {
  ops_.push_back(std::move(spec));
  return static_cast<OpId>(ops_.size() - 1);
}

EdgeId GraphBuilder::add_edge(OpId src, OpId dst, double bytes, double comm_s) {
  edges_.push_back({src, dst, bytes, comm_s});
  return static_cast<EdgeId>(edges_.size() - 1);
}

namespace {

// With `total`, the amount is also added to the graph's total of that field, which must stay finite:
// stats, cost sums and placers add the amounts up.
void check_amount(double v, std::string_view field, const std::function<std::string()>& where,
                  double* total = nullptr) {
  if (!std::isfinite(v) || v < 0)
    throw Error(fmt::format("{}: {} is {} (must be a finite number >= 0)", where(), field, v));
  if (total && !std::isfinite(*total += v))
    throw Error(fmt::format("{}: {} is {}, which takes the graph's total {} past the largest number (~1.8e308): "
                            "check the unit", where(), field, v, field));
}

// Known dims are all positive and within kMaxGemmDim, and their FLOPs within 25% of the op's: a bias or
// activation folded into the op may add a little, a dimension in the wrong unit or a missing batch far more.
void check_gemm_dims(const OpSpec& s, const std::function<std::string()>& where) {
  const GemmDims& d = s.gemm;
  if (d == GemmDims{}) return;
  for (auto [name, v] : {std::pair{"batch", d.batch}, {"m", d.m}, {"n", d.n}, {"k", d.k}})
    if (v < 1 || v > kMaxGemmDim)
      throw Error(fmt::format("{}: gemm {} is {}, must be in 1..{} (or give no gemm dims at all)", where(), name, v,
                              kMaxGemmDim));
  if (std::abs(d.flops() - s.flops) > 0.25 * s.flops)
    throw Error(fmt::format("{}: gemm dims [batch {}, m {}, n {}, k {}] make {:.4g} FLOPs (2 batch m n k) but the "
                            "op has {:.4g}; fix the dims or the flops",
                            where(), d.batch, d.m, d.n, d.k, d.flops(), s.flops));
}

// Counting-sort edges by `key` into CSR arrays.
void build_csr(int32_t n, const std::vector<OpId>& key, const std::vector<OpId>& other,
               std::vector<int32_t>& offset, std::vector<EdgeId>& edge, std::vector<OpId>& op) {
  offset.assign(static_cast<size_t>(n) + 1, 0);
  for (OpId k : key) ++offset[k + 1];
  for (int32_t i = 0; i < n; ++i) offset[i + 1] += offset[i];
  edge.resize(key.size());
  op.resize(key.size());
  std::vector<int32_t> next(offset.begin(), offset.end() - 1);
  for (size_t e = 0; e < key.size(); ++e) {
    int32_t slot = next[key[e]]++;
    edge[slot] = static_cast<EdgeId>(e);
    op[slot] = other[e];
  }
}

}  // namespace

Graph GraphBuilder::build() && {
  if (ops_.empty())
    throw Error(fmt::format("graph \"{}\": has no ops (add at least one op)", name_));
  const auto n = static_cast<int32_t>(ops_.size());
  Graph g;
  g.name_ = std::move(name_);

  std::unordered_map<std::string, int32_t> type_index, pinned_index, kind_index;
  GraphStats totals;
  g.by_name_.reserve(ops_.size());
  for (OpId i = 0; i < n; ++i) {
    OpSpec& s = ops_[i];
    auto where = [&] { return fmt::format("op {} (\"{}\")", i, s.name); };
    if (s.name.empty()) throw Error(fmt::format("op {}: has an empty name (give every op a unique name)", i));
    auto [it, fresh] = g.by_name_.emplace(s.name, i);
    if (!fresh)
      throw Error(fmt::format("op {}: duplicate name \"{}\" (first used by op {}; names must be unique)", i,
                              s.name, it->second));
    if (s.type.empty()) throw Error(fmt::format("{}: has an empty type", where()));
    check_amount(s.flops, "flops", where, &totals.flops);
    check_amount(s.bytes_read, "bytes_read", where, &totals.bytes_read);
    check_amount(s.bytes_written, "bytes_written", where, &totals.bytes_written);
    check_amount(s.output_bytes, "output_bytes", where, &totals.output_bytes);
    check_amount(s.param_bytes, "param_bytes", where, &totals.param_bytes);
    check_amount(s.temp_bytes, "temp_bytes", where);
    if (s.colocation < kNoClass)
      throw Error(fmt::format("{}: colocation class {} is negative (use >= 0, or omit it)", where(), s.colocation));
    if (s.layer < kNoClass)
      throw Error(fmt::format("{}: layer {} is negative (use >= 0, or omit it)", where(), s.layer));
    check_gemm_dims(s, where);
    for (auto& [kind, t] : s.measured_s) {
      if (kind.empty()) throw Error(fmt::format("{}: measured time with an empty device kind", where()));
      check_amount(t, "measured time on \"" + kind + "\"", where);
      if (kind_index.emplace(kind, static_cast<int32_t>(g.measured_kinds_.size())).second)
        g.measured_kinds_.push_back(kind);
    }

    auto [tit, tnew] = type_index.emplace(s.type, static_cast<int32_t>(g.type_names_.size()));
    if (tnew) g.type_names_.push_back(s.type);
    g.type_id_.push_back(tit->second);
    int32_t pin = 0;
    if (!s.pinned_kind.empty()) {
      auto [pit, pnew] = pinned_index.emplace(s.pinned_kind, static_cast<int32_t>(g.pinned_kinds_.size()));
      if (pnew) g.pinned_kinds_.push_back(s.pinned_kind);
      pin = pit->second;
    }
    g.pinned_id_.push_back(pin);
    g.names_.push_back(s.name);
    g.phase_.push_back(s.phase);
    g.flops_.push_back(s.flops);
    g.bytes_read_.push_back(s.bytes_read);
    g.bytes_written_.push_back(s.bytes_written);
    g.output_bytes_.push_back(s.output_bytes);
    g.param_bytes_.push_back(s.param_bytes);
    g.temp_bytes_.push_back(s.temp_bytes);
    g.colocation_.push_back(s.colocation);
    g.layer_.push_back(s.layer);
    g.gemm_.push_back(s.gemm);
    g.has_gemm_dims_ = g.has_gemm_dims_ || s.gemm.known();
  }

  const size_t kinds = g.measured_kinds_.size();
  g.measured_.assign(static_cast<size_t>(n) * kinds, kUnknown);
  for (OpId i = 0; i < n; ++i) {
    for (auto& [kind, t] : ops_[i].measured_s) {
      double& slot = g.measured_[static_cast<size_t>(i) * kinds + kind_index.at(kind)];
      if (!std::isnan(slot))
        throw Error(fmt::format("op {} (\"{}\"): two measured times for device kind \"{}\"", i, ops_[i].name, kind));
      slot = t;
    }
  }

  std::set<std::pair<OpId, OpId>> seen;
  const auto m = edges_.size();
  g.edge_src_.reserve(m);
  g.edge_dst_.reserve(m);
  for (size_t e = 0; e < m; ++e) {
    const EdgeSpec& s = edges_[e];
    auto where = [&] { return fmt::format("edge {} ({} -> {})", e, s.src, s.dst); };
    if (s.src < 0 || s.src >= n || s.dst < 0 || s.dst >= n)
      throw Error(fmt::format("{}: refers to a missing op (ops are 0..{})", where(), n - 1));
    auto named = [&] { return fmt::format("edge {} (\"{}\" -> \"{}\")", e, ops_[s.src].name, ops_[s.dst].name); };
    if (s.src == s.dst) throw Error(fmt::format("{}: is a self-loop (an op cannot depend on itself)", named()));
    if (!seen.emplace(s.src, s.dst).second)
      throw Error(fmt::format("{}: duplicates an earlier edge (merge their bytes into one edge)", named()));
    check_amount(s.bytes, "bytes", named, &totals.edge_bytes);
    if (!std::isnan(s.comm_s)) {
      check_amount(s.comm_s, "comm_s", named);
      g.has_edge_comm_ = true;
    }
    g.edge_src_.push_back(s.src);
    g.edge_dst_.push_back(s.dst);
    g.edge_bytes_.push_back(s.bytes);
    g.edge_comm_s_.push_back(s.comm_s);
  }
  build_csr(n, g.edge_src_, g.edge_dst_, g.out_offset_, g.out_edge_, g.out_op_);
  build_csr(n, g.edge_dst_, g.edge_src_, g.in_offset_, g.in_edge_, g.in_op_);

  // Kahn's algorithm with a min-heap, so the order is unique for a given graph.
  std::vector<int32_t> missing(n);
  std::priority_queue<OpId, std::vector<OpId>, std::greater<>> ready;
  for (OpId i = 0; i < n; ++i) {
    missing[i] = g.in_degree(i);
    if (missing[i] == 0) ready.push(i);
  }
  g.topo_order_.reserve(n);
  g.depth_.assign(n, 0);
  while (!ready.empty()) {
    OpId op = ready.top();
    ready.pop();
    g.topo_order_.push_back(op);
    for (OpId next : g.successors(op)) {
      g.depth_[next] = std::max(g.depth_[next], g.depth_[op] + 1);
      if (--missing[next] == 0) ready.push(next);
    }
  }
  if (static_cast<int32_t>(g.topo_order_.size()) != n) {
    // Walk predecessors that are still blocked until one repeats: that walk closes a cycle.
    OpId start = 0;
    while (missing[start] == 0) ++start;
    std::vector<int32_t> seen_at(n, -1);
    std::vector<OpId> path;
    OpId op = start;
    while (seen_at[op] < 0) {
      seen_at[op] = static_cast<int32_t>(path.size());
      path.push_back(op);
      for (OpId pred : g.predecessors(op))
        if (missing[pred] > 0) { op = pred; break; }
    }
    // path[k + 1] feeds path[k]; print the cycle in dataflow order, at most 12 names.
    const auto first = static_cast<size_t>(seen_at[op]);
    std::string cycle = fmt::format("\"{}\"", g.names_[path[first]]);
    for (size_t i = path.size(), shown = 0; i-- > first;) {
      if (++shown > 12) { cycle += " -> ..."; break; }
      cycle += fmt::format(" -> \"{}\"", g.names_[path[i]]);
    }
    throw Error(fmt::format("graph \"{}\": has a cycle: {} (a dataflow graph must be acyclic)", g.name_, cycle));
  }
  g.topo_rank_.resize(n);
  for (int32_t r = 0; r < n; ++r) g.topo_rank_[g.topo_order_[r]] = r;
  return g;
}

}  // namespace placelab::graphs
