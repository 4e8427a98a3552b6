// The tables of StepBound (bounds.h) built once per graph and cluster: the path tables' columns, the links,
// interchangeable devices, the graph's connected parts, the outputs kept alive across each op, and the work
// LP's dual (solved with CLP). Why the bounds built on them hold: bounds.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include <ClpSimplex.hpp>

#include "policy/classic/bounds.h"

namespace placelab::policy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
// Pooling is automatic beyond these sizes (one column per device otherwise).
constexpr int32_t kMaxColumns = 16;
constexpr int64_t kMaxPathCells = 4'000'000;
// Devices compared pairwise for symmetry (O(D^3)); beyond, each device is its own class.
constexpr int32_t kMaxSymmetryDevices = 64;

}  // namespace

void StepBound::build_columns(const sim::Simulator& sim) {
  const sim::Cluster& c = sim.cluster();
  const int32_t D = devices_;
  col_of_.resize(D);
  std::vector<int32_t> rep;  // a device of each column
  const bool pool = options_.pool_devices &&
                    (D > kMaxColumns || static_cast<int64_t>(n_) * D > kMaxPathCells);
  if (pool) {
    // Devices alike in everything a column holds per op: times, kind (pins), capacity (memory), gap.
    std::map<std::tuple<int32_t, std::string, double, double>, int32_t> column_of;
    for (int32_t d = 0; d < D; ++d) {
      auto key = std::make_tuple(sim.time_class(d), c.device(d).kind, capacity_[d], gap_s_[d]);
      auto [it, fresh] = column_of.emplace(key, static_cast<int32_t>(rep.size()));
      if (fresh) rep.push_back(d);
      col_of_[d] = it->second;
    }
  } else {
    for (int32_t d = 0; d < D; ++d) col_of_[d] = d, rep.push_back(d);
  }
  cols_ = static_cast<int32_t>(rep.size());
  const int32_t C = cols_;
  col_time_.assign(static_cast<size_t>(n_) * C, kInf);
  for (graphs::OpId op = 0; op < n_; ++op)
    for (int32_t k = 0; k < C; ++k)
      if (allowed(units_->unit_of(op), rep[k])) col_time_[static_cast<size_t>(op) * C + k] = sim.op_time_s(op, rep[k]);
  // The cheapest latency and inverse bandwidth between distinct devices of two columns (0 within one: an
  // op may stay on its producer's device). Across a link with an efficiency curve, latency only.
  col_latency_s_.assign(static_cast<size_t>(C) * C, kInf);
  col_inv_bandwidth_.assign(static_cast<size_t>(C) * C, kInf);
  for (int32_t a = 0; a < D; ++a)
    for (int32_t b = 0; b < D; ++b) {
      if (a == b) continue;
      const size_t k = static_cast<size_t>(col_of_[a]) * C + col_of_[b];
      col_latency_s_[k] = std::min(col_latency_s_[k], c.route_latency_s(a, b));
      const double inv = c.route_has_curve(a, b) ? 0.0 : 1.0 / c.route_bandwidth_bytes_per_s(a, b);
      col_inv_bandwidth_[k] = std::min(col_inv_bandwidth_[k], inv);
    }
  for (int32_t k = 0; k < C; ++k) col_latency_s_[static_cast<size_t>(k) * C + k] = col_inv_bandwidth_[static_cast<size_t>(k) * C + k] = 0;
}

void StepBound::build_live(const graphs::Graph& g) {
  const int32_t U = units_->num_units();
  // Which ops to look at: all of them on graphs of up to kMaxLiveOps ops (a pass over the graph each), else the
  // first ops of the backward pass (a training step holds the most activations there).
  constexpr int32_t kMaxLiveOps = 2048, kMaxLiveCandidates = 8;
  std::vector<graphs::OpId> at;
  if (n_ <= kMaxLiveOps) {
    for (graphs::OpId x = 0; x < n_; ++x) at.push_back(x);
  } else {
    for (graphs::OpId x : topo_) {
      if (static_cast<int32_t>(at.size()) == kMaxLiveCandidates) break;
      const auto preds = g.predecessors(x);
      if (g.phase(x) == graphs::Phase::backward &&
          std::none_of(preds.begin(), preds.end(), [&](graphs::OpId p) { return g.phase(p) == graphs::Phase::backward; }))
        at.push_back(x);
    }
    std::sort(at.begin(), at.end());
  }
  live_off_.assign(n_ + 1, 0);
  unit_live_max_.assign(U, 0);
  unit_held_.assign(unit_params_.begin(), unit_params_.end());
  std::vector<uint8_t> before(n_), after(n_);
  std::vector<int64_t> held(U, 0);
  std::vector<graphs::OpId> stack;
  auto mark = [&](graphs::OpId x, std::vector<uint8_t>& seen, bool down) {
    std::fill(seen.begin(), seen.end(), 0);
    stack.assign(1, x);
    while (!stack.empty()) {
      const graphs::OpId v = stack.back();
      stack.pop_back();
      for (graphs::OpId w : down ? g.successors(v) : g.predecessors(v))
        if (!seen[w]) seen[w] = 1, stack.push_back(w);
    }
  };
  int64_t most = 0;
  std::vector<int64_t> best_held;
  size_t next = 0;
  for (graphs::OpId x = 0; x < n_; ++x) {
    if (next < at.size() && at[next] == x) {
      ++next;
      mark(x, before, false);
      mark(x, after, true);
      for (graphs::OpId p : g.predecessors(x)) before[p] = 0;  // x's own inputs count in its working set
      std::vector<int32_t> touched;
      for (graphs::OpId a = 0; a < n_; ++a) {
        if (!before[a] || out_mem_[a] == 0) continue;
        const int32_t u = units_->unit_of(a);
        const auto outs = g.out_edges(a);
        const bool kept = std::any_of(outs.begin(), outs.end(), [&](graphs::EdgeId e) {
          return g.edge_bytes(e) > 0 && after[g.edge_dst(e)] && units_->unit_of(g.edge_dst(e)) == u;
        });
        if (!kept) continue;
        if (held[u] == 0) touched.push_back(u);
        held[u] += out_mem_[a];
      }
      int64_t total = 0;
      for (int32_t u : touched) {
        live_unit_.push_back(u), live_bytes_.push_back(held[u]);
        unit_live_max_[u] = std::max(unit_live_max_[u], held[u]);
        total += held[u];
      }
      if (total > most) {
        most = total;
        best_held.assign(U, 0);
        for (int32_t u : touched) best_held[u] = held[u];
      }
      for (int32_t u : touched) held[u] = 0;
    }
    live_off_[x + 1] = static_cast<int32_t>(live_unit_.size());
  }
  for (int32_t u = 0; u < U && !best_held.empty(); ++u) unit_held_[u] += best_held[u];
}

void StepBound::build_components() {
  const int32_t U = units_->num_units();
  std::vector<int32_t> parent(U);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  for (size_t k = 0; k < in_src_.size(); ++k)
    if (in_bytes_[k] > 0) parent[find(units_->unit_of(in_src_[k]))] = find(units_->unit_of(in_dst_[k]));
  std::vector<int32_t> index(U, -1);
  for (int32_t u = 0; u < U; ++u) {
    int32_t& at = index[find(u)];
    if (at < 0) at = static_cast<int32_t>(components_.size()), components_.emplace_back();
    Component& comp = components_[at];
    comp.units.push_back(u);
    comp.params += unit_params_[u];
    comp.held += unit_held_[u];
    comp.working = std::max(comp.working, unit_working_[u]);
  }
  for (size_t k = 0; k < in_src_.size(); ++k) {
    const int32_t a = units_->unit_of(in_src_[k]), b = units_->unit_of(in_dst_[k]);
    if (in_bytes_[k] > 0 && a != b) components_[index[find(a)]].slots.push_back(static_cast<int32_t>(k));
  }
  std::erase_if(components_, [](const Component& comp) { return comp.units.size() < 2; });
}

void StepBound::build_links(const sim::Simulator& sim) {
  const sim::Cluster& c = sim.cluster();
  const int32_t D = devices_;
  // Per destination transfers, with one column per device (transfers are known only between placed ops).
  links_ = cols_ == D && c.transfer_mode() == sim::TransferMode::per_destination && D <= 64;
  if (!links_) return;
  share_bandwidth_ = sim.options().share_bandwidth;
  route_off_.assign(static_cast<size_t>(D) * D + 1, 0);
  pair_latency_s_.assign(static_cast<size_t>(D) * D, 0);
  pair_bandwidth_.assign(static_cast<size_t>(D) * D, kInf);
  pair_curved_.assign(static_cast<size_t>(D) * D, 0);
  for (int32_t a = 0; a < D; ++a)
    for (int32_t b = 0; b < D; ++b) {
      const size_t pair = static_cast<size_t>(a) * D + b;
      if (a != b) {
        const auto route = c.route(a, b);
        route_ch_.insert(route_ch_.end(), route.begin(), route.end());
        pair_latency_s_[pair] = c.route_latency_s(a, b);
        pair_bandwidth_[pair] = c.route_bandwidth_bytes_per_s(a, b);
        pair_curved_[pair] = c.route_has_curve(a, b);
      }
      route_off_[pair + 1] = static_cast<int32_t>(route_ch_.size());
    }
  channel_bandwidth_.resize(c.num_channels());
  channel_hold_s_.resize(c.num_channels());
  for (int32_t ch = 0; ch < c.num_channels(); ++ch) {
    const sim::Link& l = c.link(sim::Cluster::channel_link(ch));
    channel_bandwidth_[ch] = l.bandwidth_bytes_per_s;
    channel_hold_s_[ch] = share_bandwidth_ ? 0 : l.busy_after_s;
  }
  channel_jobs_.assign(c.num_channels(), {});
  dest_stamp_.assign(D, -1);
  dest_bytes_.assign(D, 0);
  dest_tail_s_.assign(D, 0);
  dest_measured_s_.assign(D, 0);
}

void StepBound::build_symmetry(const sim::Simulator& sim) {
  const sim::Cluster& c = sim.cluster();
  const int32_t D = devices_;
  symmetry_class_.resize(D);
  std::iota(symmetry_class_.begin(), symmetry_class_.end(), 0);
  if (D > kMaxSymmetryDevices) return;
  auto pair = [&](int32_t a, int32_t b) {
    return std::make_tuple(c.route_latency_s(a, b), c.route_bandwidth_bytes_per_s(a, b), c.route_has_curve(a, b));
  };
  // Swapping a and b keeps the data iff the devices agree and every route to or from a third device, and
  // the two between them, match. Such swaps compose (a c) = (a b)(b c)(a b): the relation is an equivalence.
  auto swappable = [&](int32_t a, int32_t b) {
    const sim::Device &da = c.device(a), &db = c.device(b);
    if (sim.time_class(a) != sim.time_class(b) || da.kind != db.kind || da.memory_bytes != db.memory_bytes ||
        da.gap_after_op_s != db.gap_after_op_s || pair(a, b) != pair(b, a))
      return false;
    for (int32_t x = 0; x < D; ++x)
      if (x != a && x != b && (pair(a, x) != pair(b, x) || pair(x, a) != pair(x, b))) return false;
    return true;
  };
  for (int32_t b = 1; b < D; ++b)
    for (int32_t a = 0; a < b; ++a)
      if (symmetry_class_[a] == a && swappable(a, b)) {
        symmetry_class_[b] = a;
        break;
      }
  // Renumber classes by first device (already so: a class is named by its first device) into 0, 1, ...
  std::vector<int32_t> index(D, -1);
  int32_t next = 0;
  for (int32_t d = 0; d < D; ++d) {
    if (index[symmetry_class_[d]] < 0) index[symmetry_class_[d]] = next++;
    symmetry_class_[d] = index[symmetry_class_[d]];
  }
}

void StepBound::solve_work_lp(const sim::Simulator& sim) {
  const int32_t U = units_->num_units(), D = devices_;
  load_weight_.assign(D, 1.0 / D);  // the uniform dual: everything at its fastest, spread evenly
  memory_price_.assign(D, 0.0);
  memory_offset_s_ = 0;
  if (!lp_fits_) return;
  // The LP's classes: devices with equal op times, kind and capacity (all the LP reads of a device), so that its
  // duals are the same for devices a placement may swap, and the LP is small on clusters of one device kind.
  std::vector<int32_t> cls(D);
  std::map<std::tuple<int32_t, std::string, double>, int32_t> class_of;
  for (int32_t d = 0; d < D; ++d) {
    auto key = std::make_tuple(sim.time_class(d), sim.cluster().device(d).kind, capacity_[d]);
    cls[d] = class_of.emplace(key, static_cast<int32_t>(class_of.size())).first->second;
  }
  const int32_t K = static_cast<int32_t>(class_of.size());
  std::vector<int32_t> rep(K, -1), count(K, 0);
  for (int32_t d = 0; d < D; ++d) {
    if (rep[cls[d]] < 0) rep[cls[d]] = d;
    ++count[cls[d]];
  }
  int64_t variables = 1;
  double fastest_sum = 0;
  bool any_params = false;
  for (int32_t u = 0; u < U; ++u) {
    double fastest = kInf;
    for (int32_t k = 0; k < K; ++k)
      if (allowed(u, rep[k])) ++variables, fastest = std::min(fastest, units_->time_s(u, rep[k]));
    fastest_sum += fastest;
    any_params = any_params || unit_held_[u] > 0;
  }
  const double tau = fastest_sum / D;  // time scale: the LP's optimum is about 1
  const bool memory_rows = options_.memory && any_params;
  if (K == 1) {  // alike devices: the uniform dual is the LP's optimum; memory only decides whether it is feasible
    double params = 0;
    for (int32_t u = 0; u < U; ++u) params += static_cast<double>(unit_held_[u]);
    if (memory_rows && params > D * capacity_[0]) lp_fits_ = false;
    return;
  }
  if (!(tau > 0)) return;

  // The LP's items: the units, or on large graphs buckets of units whose times on the classes are alike (within
  // 2%, the same classes allowed), summed. The buckets' LP is not the units' (it is neither looser nor tighter),
  // but its duals are valid all the same, evaluated on the units; so only the units' LP may say nothing fits.
  const bool exact = variables <= options_.max_lp_variables;
  std::vector<std::vector<double>> item_time;  // per item, per class (+inf: not allowed)
  std::vector<double> item_held;
  if (exact) {
    for (int32_t u = 0; u < U; ++u) {
      item_time.emplace_back(K, kInf);
      for (int32_t k = 0; k < K; ++k)
        if (allowed(u, rep[k])) item_time.back()[k] = units_->time_s(u, rep[k]);
      item_held.push_back(static_cast<double>(unit_held_[u]));
    }
  } else {
    std::map<std::vector<int64_t>, int32_t> bucket_of;
    for (int32_t u = 0; u < U; ++u) {
      double fastest = kInf;
      for (int32_t k = 0; k < K; ++k)
        if (allowed(u, rep[k])) fastest = std::min(fastest, units_->time_s(u, rep[k]));
      std::vector<int64_t> key(K + 1, std::numeric_limits<int64_t>::max());
      for (int32_t k = 0; k < K; ++k)
        if (allowed(u, rep[k]) && fastest > 0) key[k] = std::llround(std::log(units_->time_s(u, rep[k]) / fastest) / std::log(1.02));
      key[K] = unit_held_[u] > 0;
      auto [it, fresh] = bucket_of.emplace(key, static_cast<int32_t>(item_time.size()));
      if (fresh) item_time.emplace_back(K, 0.0), item_held.push_back(0);
      for (int32_t k = 0; k < K; ++k)
        item_time[it->second][k] += allowed(u, rep[k]) ? units_->time_s(u, rep[k]) : kInf;
      item_held[it->second] += static_cast<double>(unit_held_[u]);
    }
  }
  const int32_t I = static_cast<int32_t>(item_time.size());

  // Columns x_{i,k} (share of item i on class k), then T. Rows: each item placed once; each class's load
  // at most count_k T; each class's parameters (and activations alive at one op) at most count_k x capacity,
  // in units of its capacity (so that CLP's tolerances mean the same on every row).
  std::vector<int> rows, cols;
  std::vector<double> vals, col_lb, col_ub, obj, row_lb, row_ub;
  const int load_row = I, memory_row = I + K;
  int col = 0;
  for (int32_t i = 0; i < I; ++i) {
    for (int32_t k = 0; k < K; ++k) {
      if (item_time[i][k] == kInf) continue;
      rows.push_back(i), cols.push_back(col), vals.push_back(1);
      rows.push_back(load_row + k), cols.push_back(col), vals.push_back(item_time[i][k] / tau);
      if (memory_rows && item_held[i] > 0 && capacity_[rep[k]] > 0)
        rows.push_back(memory_row + k), cols.push_back(col), vals.push_back(item_held[i] / capacity_[rep[k]]);
      col_lb.push_back(0), col_ub.push_back(1), obj.push_back(0);
      ++col;
    }
    row_lb.push_back(1), row_ub.push_back(1);
  }
  for (int32_t k = 0; k < K; ++k) {
    rows.push_back(load_row + k), cols.push_back(col), vals.push_back(-count[k]);
    row_lb.push_back(-COIN_DBL_MAX), row_ub.push_back(0);
  }
  if (memory_rows)
    for (int32_t k = 0; k < K; ++k) row_lb.push_back(-COIN_DBL_MAX), row_ub.push_back(count[k]);
  col_lb.push_back(0), col_ub.push_back(COIN_DBL_MAX), obj.push_back(1);
  const int num_rows = static_cast<int>(row_lb.size());
  CoinPackedMatrix matrix(true, rows.data(), cols.data(), vals.data(), static_cast<CoinBigIndex>(vals.size()));
  matrix.setDimensions(num_rows, col + 1);
  ClpSimplex lp;
  lp.setLogLevel(0);
  lp.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
  lp.dual();
  if (lp.isProvenPrimalInfeasible()) {
    if (exact) lp_fits_ = false;  // the parameters do not fit even split fractionally
    return;
  }
  if (!lp.isProvenOptimal()) return;
  // Duals of <= rows of a minimisation are <= 0 in CLP's convention; any non-negative values give a valid
  // bound (bounds.cpp's header), and these give the LP's optimum.
  const double* dual = lp.dualRowSolution();
  std::vector<double> w(K), m(K, 0.0);
  double s = 0;
  for (int32_t k = 0; k < K; ++k) {
    w[k] = std::max(0.0, -dual[load_row + k]);
    if (memory_rows) m[k] = std::max(0.0, -dual[memory_row + k]);
    s += w[k] * count[k];
  }
  if (!(s > 0)) return;
  for (int32_t d = 0; d < D; ++d) {
    load_weight_[d] = w[cls[d]] / s;
    memory_price_[d] = capacity_[d] > 0 ? m[cls[d]] * tau / (s * capacity_[d]) : 0;
    memory_offset_s_ += memory_price_[d] * capacity_[d];
  }
}

}  // namespace placelab::policy
