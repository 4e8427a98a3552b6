// Lower bounds of the step time (bounds.h). Why each part is one, in the engine's own terms:
//
// * An op runs for at least its time on its device (memory contention only slows ops down, as the engine's
//   own early stops assume: IncrementalSimulator::move_within), starts only once every input has ended,
//   and an input from another device arrives no sooner than the route's latency plus its bytes over the
//   route's bottleneck bandwidth after its producer ends: the tensor sent is the largest edge to that
//   device (>= this edge's), a broadcast takes its slowest destination's time, shared bandwidth and
//   senders without a copy engine only add waiting. A measured edge time (use_edge_comm) is used only when
//   every edge of the transfer has one (the longest): either way the transfer takes at least the smaller
//   of this edge's measured and modelled times. Links with efficiency curves may beat their nominal
//   bandwidth, so across them only the latency counts. Control edges (0 bytes) move nothing.
// * So L(v, d) = t(v, d) + max over inputs u of min over devices d' of (L(u, d') + transfer(u, v, d', d)) is
//   at most v's end on d in any placement whose ops' devices are among those allowed (by induction in
//   topological order), and the step time is at least max_v min_d L(v, d): "path". Likewise Q(v, d), the
//   time from v's start on d to the end of the step, backwards.
// * A device runs one op at a time and stays idle gap_after_op_s after each op that takes time; each op on
//   it starts no sooner than its head L - t and is followed by at least its tail Q - t. Stretching each op
//   by its gap and shortening its tail by as much, the ops are disjoint intervals with release times and
//   tails on one machine; letting them be pre-empted only lowers the best makespan, which Jackson's
//   schedule (always the released op with the longest tail) attains: "device".
// * A connected part of the graph (data edges between units) whose parameters no device holds is split in
//   every placement that fits: one of its data edges crosses devices, so the step is at least the cheapest
//   L(u, d) + transfer(u, v, d, d') + Q(v, d') over its edges (u, v) and devices d != d' ("cut").
// * A FIFO channel carries one transfer at a time, each holding every channel of its route for its whole
//   duration and the channel's busy_after_s more; a shared channel streams at most its bandwidth. A transfer
//   starts after its producer ends and ends before its consumers start: the same one-machine relaxation per
//   channel, over the transfers between placed ops ("link").
// * The step is at least every device's load. For any weights w >= 0 per device summing to 1 and prices
//   m >= 0 per device, sum_d w_d load_d <= step, and a placement that fits has sum_d m_d (resident_d -
//   capacity_d) <= 0, so step >= sum_u min_d (w_d t(u, d) + m_d params(u)) - sum_d m_d capacity_d. The
//   weights and prices are the duals of the fractional assignment LP (any values would be valid; those are
//   the best). Water-filling the units not placed yet, each at its fastest, over the placed loads: "work".
// * Memory: a device holds its units' parameters all step, and while an op runs its output, its scratch
//   and each input (a local producer's whole output, or the received copy, at least the edge's bytes); and
//   the output of every op before it that a consumer after it reads on the producer's device (a consumer of
//   the producer's own unit, say a forward activation read by its gradient): the output lives from its
//   producer's start until that consumer's end.
// The tables these read (columns, links, symmetry, components, outputs kept alive, the LP) are built once, in
// bounds_setup.cpp.
#include "policy/classic/bounds.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <numeric>
#include <queue>
#include <tuple>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::policy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

int64_t whole_bytes(double bytes) { return std::llround(bytes); }

// Slack for a sum of `terms` doubles whose magnitudes add up to `magnitude`: the rounding it may carry.
double rounding_slack(double magnitude, size_t terms) {
  return magnitude * static_cast<double>(terms + 2) * std::numeric_limits<double>::epsilon();
}

}  // namespace

StepBound::StepBound(const Units& units, StepBoundOptions options) : units_(&units), options_(options) {
  const sim::Simulator& sim = units.simulator();
  const graphs::Graph& g = sim.graph();
  const sim::Cluster& c = sim.cluster();
  devices_ = units.num_devices();
  n_ = g.num_ops();
  const int32_t U = units.num_units(), D = devices_;

  gap_s_.resize(D);
  capacity_.resize(D);
  for (int32_t d = 0; d < D; ++d) gap_s_[d] = c.device(d).gap_after_op_s, capacity_[d] = c.device(d).memory_bytes;

  // Memory in whole bytes; each op's data producers once, with the largest edge from each.
  out_mem_.resize(n_);
  self_mem_.resize(n_);
  unit_params_.assign(U, 0);
  mem_in_off_.assign(n_ + 1, 0);
  for (graphs::OpId op = 0; op < n_; ++op) {
    out_mem_[op] = whole_bytes(g.output_bytes(op));
    self_mem_[op] = out_mem_[op] + whole_bytes(g.temp_bytes(op));
    unit_params_[units.unit_of(op)] += whole_bytes(g.param_bytes(op));
  }
  for (graphs::OpId op = 0; op < n_; ++op) {
    std::map<int32_t, int64_t> producers;
    for (graphs::EdgeId e : g.in_edges(op))
      if (g.edge_bytes(e) > 0) {
        int64_t& b = producers[g.edge_src(e)];
        b = std::max(b, static_cast<int64_t>(g.edge_bytes(e) + 0.5));  // as the engine rounds a transfer
      }
    for (auto [src, bytes] : producers) mem_in_src_.push_back(src), mem_in_bytes_.push_back(bytes);
    mem_in_off_[op + 1] = static_cast<int32_t>(mem_in_src_.size());
  }

  topo_.assign(g.topo_order().begin(), g.topo_order().end());
  build_live(g);

  // Allowed devices: the unit's pins, and (with memory) its parameters plus each op's least working set, or what
  // it keeps alive at one op.
  allowed_.assign(static_cast<size_t>(U) * D, 0);
  if (D <= 64) allowed_mask_.assign(U, 0);
  forced_.assign(U, -1);
  unit_working_.assign(U, 0);
  for (int32_t u = 0; u < U; ++u) {
    int64_t working = 0;
    for (graphs::OpId op : units.ops(u)) {
      int64_t w = self_mem_[op];
      for (int32_t k = mem_in_off_[op]; k < mem_in_off_[op + 1]; ++k) {
        const int32_t p = mem_in_src_[k];
        w += units.unit_of(p) == u ? out_mem_[p] : std::min(out_mem_[p], mem_in_bytes_[k]);
      }
      working = std::max(working, w);
    }
    unit_working_[u] = working;
    int32_t count = 0, last = -1;
    for (int32_t d = 0; d < D; ++d) {
      const bool ok = units.allowed(u, d) &&
                      (!options_.memory ||
                       static_cast<double>(unit_params_[u] + std::max(working, unit_live_max_[u])) <= capacity_[d]);
      allowed_[static_cast<size_t>(u) * D + d] = ok;
      if (ok && D <= 64) allowed_mask_[u] |= uint64_t{1} << d;
      if (ok) ++count, last = d;
    }
    if (count == 0) lp_fits_ = false;  // this unit fits nowhere
    if (count == 1) forced_[u] = last;
  }

  // Edges as in-edge slots per consumer, and each op's out-edges as those slots.
  const bool measured = sim.options().use_edge_comm && g.has_edge_comm();
  in_off_.assign(n_ + 1, 0);
  out_off_.assign(n_ + 1, 0);
  for (graphs::OpId op = 0; op < n_; ++op) {
    for (graphs::EdgeId e : g.in_edges(op)) {
      in_src_.push_back(g.edge_src(e));
      in_bytes_.push_back(g.edge_bytes(e));
      in_comm_s_.push_back(measured ? g.edge_comm_s(e) : std::nan(""));
      ++out_off_[g.edge_src(e) + 1];
    }
    in_dst_.resize(in_src_.size(), op);
    in_off_[op + 1] = static_cast<int32_t>(in_src_.size());
  }
  std::partial_sum(out_off_.begin(), out_off_.end(), out_off_.begin());
  out_slot_.resize(in_src_.size());
  out_dst_.resize(in_src_.size());
  std::vector<int32_t> fill(out_off_.begin(), out_off_.end() - 1);
  for (graphs::OpId op = 0; op < n_; ++op)
    for (int32_t k = in_off_[op]; k < in_off_[op + 1]; ++k) {
      const int32_t at = fill[in_src_[k]]++;
      out_slot_[at] = k;
      out_dst_[at] = op;
    }

  build_columns(sim);
  build_components();
  build_links(sim);
  build_symmetry(sim);
  solve_work_lp(sim);
  op_device_.assign(n_, -1);
  unit_eff_.assign(U, -1);
  if (!allowed_mask_.empty()) domain_.assign(U, 0);
  col_ok_.assign(static_cast<size_t>(n_) * cols_, 0);
  head_.assign(static_cast<size_t>(n_) * cols_, 0.0);
  tail_.assign(static_cast<size_t>(n_) * cols_, 0.0);
  resident_.assign(D, 0);
  working_.assign(D, 0);
  working_of_.assign(n_, 0);
}

// A component that no device may hold whole (the units' domains, the parameters and a working set) is split in
// every placement that fits: one of its data edges joins two devices, and the longest path through that
// edge pays its transfer there.
double StepBound::cut_bound() {
  if (!options_.memory) return 0;
  const int32_t C = cols_;
  std::vector<int32_t> devices_in_column(C, 0);
  for (int32_t d = 0; d < devices_; ++d) ++devices_in_column[col_of_[d]];
  double value = 0;
  for (const Component& comp : components_) {
    bool whole = false;
    for (int32_t d = 0; d < devices_ && !whole; ++d) {
      if (static_cast<double>(std::max(comp.params + comp.working, comp.held)) > capacity_[d]) continue;
      whole = std::all_of(comp.units.begin(), comp.units.end(), [&](int32_t u) { return in_domain(u, d); });
    }
    if (whole) continue;
    double cheapest = kInf;
    for (int32_t k : comp.slots) {
      const double* L = head_.data() + static_cast<size_t>(in_src_[k]) * C;
      const double* Q = tail_.data() + static_cast<size_t>(in_dst_[k]) * C;
      for (int32_t a = 0; a < C; ++a)
        for (int32_t b = 0; b < C; ++b)
          if ((a != b || devices_in_column[a] > 1) && L[a] != kInf && Q[b] != kInf)
            cheapest = std::min(cheapest, L[a] + comm_lb(k, a, b) + Q[b]);
    }
    value = std::max(value, cheapest);
  }
  return value;
}

double StepBound::comm_lb(int32_t slot, int32_t from, int32_t to) const {
  const double bytes = in_bytes_[slot];
  if (from == to || bytes <= 0) return 0;
  const size_t k = static_cast<size_t>(from) * cols_ + to;
  const double modelled = col_latency_s_[k] + bytes * col_inv_bandwidth_[k];
  const double measured = in_comm_s_[slot];
  return std::isnan(measured) ? modelled : std::min(modelled, measured);
}

bool StepBound::memory_fits() {
  if (!options_.memory) return true;
  const int32_t U = units_->num_units(), D = devices_;
  std::fill(resident_.begin(), resident_.end(), 0);
  std::fill(working_.begin(), working_.end(), 0);
  int64_t free_params = 0;
  for (int32_t u = 0; u < U; ++u) (unit_eff_[u] >= 0 ? resident_[unit_eff_[u]] : free_params) += unit_params_[u];
  for (graphs::OpId op = 0; op < n_; ++op) {
    const int32_t d = op_device_[op];
    working_of_[op] = 0;
    if (d < 0) continue;
    int64_t w = self_mem_[op];
    for (int32_t k = mem_in_off_[op]; k < mem_in_off_[op + 1]; ++k) {
      const int32_t p = mem_in_src_[k], dp = op_device_[p];
      w += dp == d ? out_mem_[p] : dp >= 0 ? mem_in_bytes_[k] : std::min(out_mem_[p], mem_in_bytes_[k]);
    }
    working_of_[op] = w;
    working_[d] = std::max(working_[d], w);
  }
  double room = 0;
  for (int32_t d = 0; d < D; ++d) {
    if (static_cast<double>(resident_[d] + working_[d]) > capacity_[d]) return false;
    room += std::max(0.0, capacity_[d] - static_cast<double>(resident_[d]));
  }
  if (static_cast<double>(free_params) > room) return false;
  // While op x runs, each device also holds the outputs kept alive across x by its placed units.
  std::vector<int64_t>& alive = held_;
  for (graphs::OpId x = 0; x < n_; ++x) {
    if (live_off_[x] == live_off_[x + 1]) continue;
    alive.assign(D, 0);
    int64_t free_live = 0;
    for (int32_t k = live_off_[x]; k < live_off_[x + 1]; ++k) {
      const int32_t d = unit_eff_[live_unit_[k]];
      (d >= 0 ? alive[d] : free_live) += live_bytes_[k];
    }
    if (op_device_[x] >= 0) alive[op_device_[x]] += working_of_[x];
    double left = 0;
    for (int32_t d = 0; d < D; ++d) {
      const double used = static_cast<double>(resident_[d] + alive[d]);
      if (used > capacity_[d]) return false;
      left += std::max(0.0, capacity_[d] - used);
    }
    if (static_cast<double>(free_params + free_live) > left) return false;
  }
  return true;
}

void StepBound::forward_paths() {
  const int32_t C = cols_;
  for (graphs::OpId v : topo_) {
    double* Lv = head_.data() + static_cast<size_t>(v) * C;
    for (int32_t c = 0; c < C; ++c) {
      const double t = col_time_[static_cast<size_t>(v) * C + c];
      if (!col_ok_[static_cast<size_t>(v) * C + c]) {
        Lv[c] = kInf;
        continue;
      }
      double start = 0;
      for (int32_t k = in_off_[v]; k < in_off_[v + 1]; ++k) {
        const double* Lu = head_.data() + static_cast<size_t>(in_src_[k]) * C;
        double best = kInf;
        for (int32_t c2 = 0; c2 < C; ++c2)
          if (Lu[c2] != kInf) best = std::min(best, Lu[c2] + comm_lb(k, c2, c));
        start = std::max(start, best);
      }
      Lv[c] = start + t;
    }
  }
}

void StepBound::backward_paths() {
  const int32_t C = cols_;
  for (auto it = topo_.rbegin(); it != topo_.rend(); ++it) {
    const graphs::OpId v = *it;
    double* Qv = tail_.data() + static_cast<size_t>(v) * C;
    for (int32_t c = 0; c < C; ++c) {
      const double t = col_time_[static_cast<size_t>(v) * C + c];
      if (!col_ok_[static_cast<size_t>(v) * C + c]) {
        Qv[c] = kInf;
        continue;
      }
      double after = 0;
      for (int32_t j = out_off_[v]; j < out_off_[v + 1]; ++j) {
        const int32_t k = out_slot_[j];
        const double* Qw = tail_.data() + static_cast<size_t>(out_dst_[j]) * C;
        double best = kInf;
        for (int32_t c2 = 0; c2 < C; ++c2)
          if (Qw[c2] != kInf) best = std::min(best, comm_lb(k, c, c2) + Qw[c2]);
        after = std::max(after, best);
      }
      Qv[c] = t + after;
    }
  }
}

double StepBound::one_machine(std::vector<Job>& jobs) {
  if (jobs.empty()) return 0;
  // Jackson's pre-emptive schedule: at every moment the released job with the longest tail.
  std::sort(jobs.begin(), jobs.end(), [](const Job& a, const Job& b) { return a.head < b.head; });
  std::priority_queue<std::pair<double, double>> ready;  // (tail, time left)
  double t = 0, value = 0;
  size_t i = 0;
  while (i < jobs.size() || !ready.empty()) {
    if (ready.empty()) t = std::max(t, jobs[i].head);
    while (i < jobs.size() && jobs[i].head <= t) ready.emplace(jobs[i].tail, jobs[i].time), ++i;
    auto [tail, left] = ready.top();
    ready.pop();
    const double next = i < jobs.size() ? jobs[i].head : kInf;
    if (t + left <= next) {
      t += left;
      value = std::max(value, t + tail);
    } else {
      ready.emplace(tail, left - (next - t));
      t = next;
    }
  }
  return value;
}

double StepBound::device_bound(int32_t d) {
  const int32_t C = cols_, col = col_of_[d];
  jobs_.clear();
  for (graphs::OpId v = 0; v < n_; ++v) {
    if (op_device_[v] != d) continue;
    const size_t k = static_cast<size_t>(v) * C + col;
    const double t = col_time_[k], gap = t > 0 ? gap_s_[d] : 0;
    jobs_.push_back({head_[k] - t, t + gap, tail_[k] - t - gap});
  }
  return one_machine(jobs_);
}

// Transfers between placed ops: one per producer and destination device, carrying at least the largest of
// its edges there, released when its producer ends at the earliest, followed by the longest tail of its
// consumers there. With FIFO links it holds every channel of its route for its whole duration (plus the
// channel's hold after it); with shared links it streams its bytes through each channel at most at the
// channel's bandwidth, after the route's latency (a measured transfer streams nothing: left out).
double StepBound::link_bound() {
  if (!links_) return 0;
  const int32_t D = devices_;
  for (auto& jobs : channel_jobs_) jobs.clear();
  for (graphs::OpId p = 0; p < n_; ++p) {
    const int32_t a = op_device_[p];
    if (a < 0) continue;
    int32_t dests = 0;
    for (int32_t j = out_off_[p]; j < out_off_[p + 1]; ++j) {
      const int32_t w = out_dst_[j], b = op_device_[w], k = out_slot_[j];
      if (b < 0 || b == a || in_bytes_[k] <= 0) continue;
      const double q = tail_[static_cast<size_t>(w) * cols_ + b];
      const double measured = in_comm_s_[k];
      if (dest_stamp_[b] != p) {
        dest_stamp_[b] = p;
        ++dests;
        dest_bytes_[b] = in_bytes_[k], dest_tail_s_[b] = q, dest_measured_s_[b] = measured;
      } else {
        dest_bytes_[b] = std::max(dest_bytes_[b], in_bytes_[k]);
        dest_tail_s_[b] = std::max(dest_tail_s_[b], q);
        // The longest measured time of its edges (any edge measured: at least the smaller of it and the model).
        if (!std::isnan(measured)) dest_measured_s_[b] = std::isnan(dest_measured_s_[b]) ? measured : std::max(dest_measured_s_[b], measured);
      }
    }
    if (dests == 0) continue;
    const double release = head_[static_cast<size_t>(p) * cols_ + a];
    for (int32_t b = 0; b < D; ++b) {
      if (dest_stamp_[b] != p) continue;
      dest_stamp_[b] = -1;
      const size_t pair = static_cast<size_t>(a) * D + b;
      const double bytes = dest_bytes_[b];
      for (int32_t r = route_off_[pair]; r < route_off_[pair + 1]; ++r) {
        const int32_t ch = route_ch_[r];
        const double hold = channel_hold_s_[ch];
        if (share_bandwidth_) {
          if (!std::isnan(dest_measured_s_[b]) || pair_curved_[pair]) continue;
          channel_jobs_[ch].push_back({release + pair_latency_s_[pair], bytes / channel_bandwidth_[ch], dest_tail_s_[b]});
        } else {
          double duration = pair_latency_s_[pair] + (pair_curved_[pair] ? 0 : bytes / pair_bandwidth_[pair]);
          if (!std::isnan(dest_measured_s_[b])) duration = std::min(duration, dest_measured_s_[b]);
          channel_jobs_[ch].push_back({release, duration + hold, dest_tail_s_[b] - hold});
        }
      }
    }
  }
  double value = 0;
  for (auto& jobs : channel_jobs_) value = std::max(value, one_machine(jobs));
  return value;
}

double StepBound::unit_term(int32_t u, int32_t d) const {
  return load_weight_[d] * units_->time_s(u, d) + memory_price_[d] * static_cast<double>(unit_held_[u]);
}

double StepBound::work_bound() {
  const int32_t U = units_->num_units(), D = devices_;
  // The LP's dual: each unit on its device, or at its best among those it may take.
  double dual = -memory_offset_s_, magnitude = memory_offset_s_;
  std::vector<double>& placed = placed_;
  placed.assign(D, 0.0);
  double free_work = 0;
  for (int32_t u = 0; u < U; ++u) {
    double term = kInf, fastest = kInf;
    if (unit_eff_[u] >= 0) {
      term = unit_term(u, unit_eff_[u]);
      placed[unit_eff_[u]] += units_->time_s(u, unit_eff_[u]);
    } else {
      for (int32_t d = 0; d < D; ++d)
        if (in_domain(u, d)) term = std::min(term, unit_term(u, d)), fastest = std::min(fastest, units_->time_s(u, d));
      free_work += fastest;
    }
    dual += term;
    magnitude += term;
  }
  dual -= rounding_slack(magnitude, static_cast<size_t>(U));
  // Water-filling: the free work poured over the placed loads.
  std::sort(placed.begin(), placed.end());
  double level = placed.back(), sum = 0;
  for (int32_t k = 0; k < D; ++k) {
    sum += placed[k];
    const double l = (free_work + sum) / (k + 1);
    if (k + 1 == D || l <= placed[k + 1]) {
      level = std::max(l, placed.back());
      break;
    }
  }
  return std::max(dual, level);
}

// Drops from each open unit's domain the devices through which no completion stays below the cutoff: the
// longest path through one of its ops there, the LP's dual with it there, or its device's load with it, reach
// the cutoff; or its parameters and working set overflow the device. Returns false when a domain empties.
bool StepBound::filter_domains(double cutoff_s, bool& changed) {
  const int32_t U = units_->num_units(), D = devices_;
  changed = false;
  double dual = -memory_offset_s_, magnitude = memory_offset_s_;
  std::vector<double>& term_of = term_;  // per unit: its term in the dual
  term_of.assign(U, kInf);
  load_.assign(D, 0.0);
  for (int32_t u = 0; u < U; ++u) {
    if (unit_eff_[u] >= 0) {
      term_of[u] = unit_term(u, unit_eff_[u]);
      load_[unit_eff_[u]] += units_->time_s(u, unit_eff_[u]);
    } else {
      for (int32_t d = 0; d < D; ++d)
        if ((domain_[u] >> d) & 1) term_of[u] = std::min(term_of[u], unit_term(u, d));
    }
    dual += term_of[u];
    magnitude += term_of[u];
  }
  dual -= rounding_slack(magnitude, static_cast<size_t>(U));
  for (int32_t u = 0; u < U; ++u) {
    if (unit_eff_[u] >= 0) continue;
    for (int32_t d = 0; d < D; ++d) {
      if (!((domain_[u] >> d) & 1)) continue;
      double through = 0;
      for (graphs::OpId v : units_->ops(u)) {
        const size_t k = static_cast<size_t>(v) * cols_ + d;
        through = std::max(through, head_[k] + tail_[k] - col_time_[k]);
      }
      const bool drop =
          through >= cutoff_s || dual - term_of[u] + unit_term(u, d) >= cutoff_s ||
          load_[d] + units_->time_s(u, d) >= cutoff_s ||
          (options_.memory && static_cast<double>(resident_[d] + unit_params_[u] +
                                                  std::max(working_[d], unit_working_[u])) > capacity_[d]);
      if (drop) domain_[u] &= ~(uint64_t{1} << d), changed = true;
    }
    if (domain_[u] == 0) return false;
  }
  return true;
}

BoundParts StepBound::partial(std::span<const int32_t> unit_device, double cutoff_s,
                              std::span<const uint64_t> start_domains) {
  const int32_t U = units_->num_units(), C = cols_;
  if (static_cast<int32_t>(unit_device.size()) != U)
    throw Error(fmt::format("StepBound::partial: {} unit devices for {} units", unit_device.size(), U));
  BoundParts parts;
  auto none_fits = [&] {
    parts.fits = false;
    parts.bound_s = kInf;
    return parts;
  };
  if (!lp_fits_) return none_fits();
  for (int32_t u = 0; u < U; ++u) {
    const int32_t d = forced_[u] >= 0 ? forced_[u] : unit_device[u];
    if (d >= devices_ || (d >= 0 && !allowed(u, d))) return none_fits();
    if (!domain_.empty()) {
      domain_[u] = (d >= 0 ? uint64_t{1} << d : allowed_mask_[u]) & (start_domains.empty() ? ~uint64_t{0} : start_domains[u]);
      if (domain_[u] == 0) {  // placed where an earlier propagation ruled it out
        parts.bound_s = cutoff_s;
        return parts;
      }
    }
    unit_eff_[u] = d;
  }
  // Propagation needs a column per device; a few rounds reach (nearly) a fixed point.
  const bool filter = std::isfinite(cutoff_s) && !domain_.empty() && C == devices_;
  constexpr int kRounds = 4;
  for (int round = 0;; ++round) {
    for (int32_t u = 0; u < U; ++u)
      if (!domain_.empty() && std::has_single_bit(domain_[u])) unit_eff_[u] = std::countr_zero(domain_[u]);
    for (graphs::OpId op = 0; op < n_; ++op) {
      const int32_t u = units_->unit_of(op);
      op_device_[op] = unit_eff_[u];
      for (int32_t c = 0; c < C; ++c)
        col_ok_[static_cast<size_t>(op) * C + c] =
            col_time_[static_cast<size_t>(op) * C + c] != kInf &&
            (op_device_[op] >= 0 ? col_of_[op_device_[op]] == c : C != devices_ || in_domain(u, c));
    }
    if (!memory_fits()) return none_fits();
    forward_paths();
    backward_paths();
    parts.path_s = 0;
    for (graphs::OpId v = 0; v < n_; ++v) {
      const double* Lv = head_.data() + static_cast<size_t>(v) * C;
      parts.path_s = std::max(parts.path_s, *std::min_element(Lv, Lv + C));
    }
    if (parts.path_s == kInf) return none_fits();  // an op with no device its inputs can reach
    if (!filter || parts.path_s >= cutoff_s || round == kRounds) break;
    bool changed = false;
    if (!filter_domains(cutoff_s, changed)) {
      parts.bound_s = cutoff_s;  // no completion below the cutoff
      return parts;
    }
    if (!changed) break;
  }
  for (int32_t d = 0; d < devices_; ++d) parts.device_s = std::max(parts.device_s, device_bound(d));
  parts.work_s = work_bound();
  parts.link_s = link_bound();
  parts.cut_s = cut_bound();
  parts.bound_s = std::max({parts.path_s, parts.cut_s, parts.device_s, parts.work_s, parts.link_s});
  return parts;
}

BoundParts StepBound::whole() {
  std::vector<int32_t> none(units_->num_units(), -1);
  return partial(none);
}

BoundParts lower_bound(const sim::Simulator& simulator) {
  Units units(simulator);
  StepBound bound(units, {.pool_devices = true});
  return bound.whole();
}

nlohmann::json bound_to_json(const BoundParts& parts) {
  auto finite = [](double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(nullptr); };
  return {{"bound_s", finite(parts.bound_s)},
          {"path_s", finite(parts.path_s)},
          {"device_s", finite(parts.device_s)},
          {"work_s", finite(parts.work_s)},
          {"link_s", finite(parts.link_s)},
          {"cut_s", finite(parts.cut_s)},
          {"fits", parts.fits}};
}

}  // namespace placelab::policy
