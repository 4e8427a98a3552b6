// The simulator's construction (op x device time table, flat adjacency, routes), placement checks,
// scratch, batches and results as JSON. The event loop is event_loop.cpp; incremental re-simulation is
// incremental.cpp.
#include "sim/engine.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "graphs/error.h"
#include "sim/engine_state.h"

namespace placelab::sim {

using namespace detail;

nlohmann::json result_to_json(const SimResult& r, const Cluster& c) {
  nlohmann::json devices = nlohmann::json::array(), links = nlohmann::json::array();
  for (int32_t d = 0; d < c.num_devices(); ++d)
    devices.push_back({{"name", c.device(d).name},
                       {"kind", c.device(d).kind},
                       {"busy_s", r.device_busy_s[d]},
                       {"peak_bytes", r.device_peak_bytes[d]},
                       {"memory_bytes", c.device(d).memory_bytes},
                       {"excess_bytes", r.device_excess_bytes[d]}});
  for (int32_t l = 0; l < c.num_links(); ++l)
    links.push_back({{"name", c.link(l).name}, {"busy_s", r.link_busy_s[l]}, {"bytes", r.link_bytes[l]}});
  return {{"step_time_s", r.step_time_s},
          {"busy_until_s", r.busy_until_s},
          {"critical_path_s", r.critical_path_s},
          {"total_bytes_moved", r.total_bytes_moved},
          {"num_transfers", r.num_transfers},
          {"oom", r.oom},
          {"devices", devices},
          {"links", links}};
}

void SimScratchDeleter::operator()(SimScratch* s) const { delete s; }

struct ScratchPool {
  tbb::enumerable_thread_specific<SimScratchPtr> scratch;  // made on a thread's first use
  std::atomic<int64_t> runs{0};  // runs(): here, so that the simulator stays movable
};

Simulator::Simulator(const graphs::Graph& graph, const Cluster& cluster, std::shared_ptr<const CostModel> cost_model,
                     SimOptions options)
    : graph_(&graph), cluster_(&cluster), pool_(std::make_unique<ScratchPool>()), cost_model_(std::move(cost_model)),
      options_(options) {
  if (!cost_model_) throw Error("simulator: no cost model given");
  options_.priority = options.priority.value_or(cluster.priority().value_or(Priority::ready_time));
  n_ = graph.num_ops();
  devices_ = cluster.num_devices();
  channels_ = cluster.num_channels();
  const size_t n = n_, D = devices_;

  // Op x device times: measured times of the device's kind when present, else the cost model.
  std::vector<int32_t> measured_of_device(D);
  for (size_t d = 0; d < D; ++d)
    measured_of_device[d] = options_.use_measured ? graph.measured_kind_index(cluster.device(d).kind) : -1;
  time_.resize(n * D);
  for (size_t op = 0; op < n; ++op)
    for (size_t d = 0; d < D; ++d) {
      double t = measured_of_device[d] >= 0 ? graph.measured_s(op, measured_of_device[d]) : graphs::kUnknown;
      const bool measured = !std::isnan(t);
      if (!measured) t = cost_model_->op_time_s(graph, static_cast<graphs::OpId>(op), cluster.device(d));
      if (!(t >= 0 && t <= kMaxSeconds))
        throw Error(fmt::format("simulator: {} gives {:.6g} s for op \"{}\" on \"{}\"; times must be finite, >= 0 and "
                                "at most {:g} s: check the op's amounts (FLOPs, bytes, measured or profiled times) "
                                "and the device's peak, bandwidth and launch overhead",
                                measured ? fmt::format("the graph's measured time on kind \"{}\"", cluster.device(d).kind)
                                         : fmt::format("cost model \"{}\"", cost_model_->name()),
                                t, graph.op_name(op), cluster.device(d).name, kMaxSeconds));
      time_[op * D + d] = t;
    }

  // Upward rank over mean op times, in reverse topological order.
  rank_.assign(n, 0);
  auto topo = graph.topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it) {
    graphs::OpId op = *it;
    double mean = 0, best = 0;
    for (size_t d = 0; d < D; ++d) mean += time_[op * D + d];
    for (graphs::OpId s : graph.successors(op)) best = std::max(best, rank_[s]);
    rank_[op] = mean / static_cast<double>(D) + best;
  }

  // Memory is counted in whole bytes in 64-bit integers (exact sums in any order): all the bytes a run
  // may hold at once must fit, with room to spare.
  double all_bytes = 0;
  for (size_t op = 0; op < n; ++op) all_bytes += graph.param_bytes(op) + graph.output_bytes(op) + graph.temp_bytes(op);
  for (graphs::EdgeId e = 0; e < graph.num_edges(); ++e) all_bytes += graph.edge_bytes(e);
  constexpr double kMaxBytes = 0x1p62;
  if (!(all_bytes <= kMaxBytes))
    throw Error(fmt::format("simulator: graph \"{}\" has {:.3g} bytes of parameters, outputs, temporaries and "
                            "transfers in all, more than the {:.3g} bytes memory accounting can hold; check the "
                            "graph's byte amounts (they are bytes, not bits or elements)",
                            graph.name(), all_bytes, kMaxBytes));
  info_.resize(n);
  param_bytes_.resize(n);
  in_degree_.resize(n);
  int32_t out_pos = 0, in_pos = 0;
  for (size_t op = 0; op < n; ++op) {
    OpInfo& info = info_[op];
    info.output_mem = std::llround(graph.output_bytes(op));
    info.temp_mem = std::llround(graph.temp_bytes(op));
    info.out_begin = out_pos;
    info.out_end = out_pos += graph.out_degree(op);
    info.in_begin = in_pos;
    info.in_end = in_pos += graph.in_degree(op);
    param_bytes_[op] = std::llround(graph.param_bytes(op));
    in_degree_[op] = graph.in_degree(op);
  }
  const size_t m = graph.num_edges();
  out_.resize(m);
  in_.resize(m);
  out_comm_s_.resize(m);
  std::vector<int32_t> in_pos_of_edge(m);
  for (size_t op = 0; op < n; ++op) {
    int32_t k = info_[op].in_begin;
    for (graphs::EdgeId e : graph.in_edges(op)) {
      in_[k] = InSlot{graph.edge_src(e), 0, graph.edge_bytes(e)};
      in_pos_of_edge[e] = k++;
    }
  }
  for (size_t op = 0; op < n; ++op) {
    int32_t k = info_[op].out_begin;
    for (graphs::EdgeId e : graph.out_edges(op)) {
      out_comm_s_[k] = graph.edge_comm_s(e);
      out_[k++] = OutSlot{graph.edge_dst(e), in_pos_of_edge[e], graph.edge_bytes(e)};
    }
  }

  pair_latency_s_.assign(D * D, 0);
  pair_bandwidth_.assign(D * D, 0);
  pair_curved_.assign(D * D, 0);
  route_off_.assign(D * D + 1, 0);
  for (size_t a = 0; a < D; ++a)
    for (size_t b = 0; b < D; ++b) {
      size_t p = a * D + b;
      auto route = cluster.route(a, b);
      if (a != b) {
        pair_latency_s_[p] = cluster.route_latency_s(a, b);
        pair_bandwidth_[p] = cluster.route_bandwidth_bytes_per_s(a, b);
        pair_curved_[p] = cluster.route_has_curve(a, b);
        any_link_curves_ = any_link_curves_ || pair_curved_[p];
      }
      route_off_[p + 1] = route_off_[p] + static_cast<int32_t>(route.size());
      route_ch_.insert(route_ch_.end(), route.begin(), route.end());
    }
  // Transfers and gaps obey the op-time bound too: the largest tensor on each route, each fixed time.
  double max_edge_bytes = 0, max_edge_comm_s = 0;
  for (graphs::EdgeId e = 0; e < graph.num_edges(); ++e) {
    max_edge_bytes = std::max(max_edge_bytes, graph.edge_bytes(e));
    if (!std::isnan(graph.edge_comm_s(e))) max_edge_comm_s = std::max(max_edge_comm_s, graph.edge_comm_s(e));
  }
  auto check_seconds = [&](double t, const std::string& what) {
    if (!(t <= kMaxSeconds))
      throw Error(fmt::format("simulator: {} takes {:.6g} s, more than the {:g} s a run accepts; check its amounts",
                              what, t, kMaxSeconds));
  };
  check_seconds(max_edge_comm_s, fmt::format("a measured transfer of graph \"{}\"", graph.name()));
  for (size_t a = 0; a < D; ++a)
    for (size_t b = 0; b < D; ++b)
      if (a != b)
        check_seconds(cluster.transfer_time_s(a, b, max_edge_bytes),
                      fmt::format("sending the largest tensor ({:g} bytes) from \"{}\" to \"{}\"", max_edge_bytes,
                                  cluster.device(a).name, cluster.device(b).name));
  for (size_t d = 0; d < D; ++d)
    check_seconds(cluster.device(d).gap_after_op_s, fmt::format("the gap after each op on \"{}\"", cluster.device(d).name));
  for (int32_t l = 0; l < cluster.num_links(); ++l)
    check_seconds(cluster.link(l).busy_after_s, fmt::format("the busy time after each transfer on link \"{}\"", cluster.link(l).name));
  channel_busy_after_s_.resize(channels_);
  channel_bandwidth_.resize(channels_);
  for (int32_t c = 0; c < channels_; ++c) channel_bandwidth_[c] = cluster.link(Cluster::channel_link(c)).bandwidth_bytes_per_s;
  for (int32_t c = 0; c < channels_; ++c) channel_busy_after_s_[c] = cluster.link(Cluster::channel_link(c)).busy_after_s;
  gap_after_op_s_.resize(D);
  for (size_t d = 0; d < D; ++d) gap_after_op_s_[d] = cluster.device(d).gap_after_op_s;
  sender_copies_.resize(D);
  for (size_t d = 0; d < D; ++d) {
    sender_copies_[d] = !cluster.device(d).copy_engine;
    any_sender_copies_ = any_sender_copies_ || sender_copies_[d];
    if (sender_copies_[d] && options_.share_bandwidth)
      throw Error(fmt::format("simulator: device \"{}\" of cluster \"{}\" has no copy engine (copy_engine false), "
                              "which bandwidth sharing does not model; simulate it with FIFO links (no share_bandwidth)",
                              cluster.device(d).name, cluster.name()));
  }
  use_clock_unit(cluster.clock_unit_s());
  refresh_time_classes();
  build_contention(graph, cluster, measured_of_device);
  order_by_rank();

  if (options_.priority == Priority::fifo) {
    // Placeto's simulator orders releases at one instant by (producer name, consumer name): the keys
    // of Priority::fifo need each op's place among the names.
    std::vector<int32_t> by_name(n);
    std::iota(by_name.begin(), by_name.end(), 0);
    std::sort(by_name.begin(), by_name.end(),
              [&](int32_t a, int32_t b) { return graph.op_name(a) < graph.op_name(b); });
    fifo_name_key_.resize(n);
    for (size_t i = 0; i < n; ++i) fifo_name_key_[by_name[i]] = static_cast<double>(i);
  }

  kinds_ = cluster.kinds();
  device_kind_.resize(D);
  for (size_t d = 0; d < D; ++d)
    device_kind_[d] = static_cast<int32_t>(std::find(kinds_.begin(), kinds_.end(), cluster.device(d).kind) - kinds_.begin());
  op_pin_.assign(n, -1);
  for (size_t op = 0; op < n; ++op) {
    const std::string& pin = graph.pinned_kind(op);
    if (pin.empty()) continue;
    auto it = std::find(kinds_.begin(), kinds_.end(), pin);
    op_pin_[op] = it == kinds_.end() ? -2 : static_cast<int32_t>(it - kinds_.begin());
  }
}

namespace {
// An amount in the clock's unit rounded to 12 significant digits, so that decimals written in seconds
// (5.7e-6 s) become the decimals a simulator written in that unit adds (5.7 us), bit for bit.
double in_clock_unit(double amount) {
  return std::isnan(amount) ? amount : std::strtod(fmt::format("{:.12g}", amount).c_str(), nullptr);
}
}  // namespace

void Simulator::use_clock_unit(double unit_s) {
  clock_unit_s_ = unit_s;
  if (unit_s == 1) return;
  for (auto* v : {&pair_latency_s_, &out_comm_s_, &channel_busy_after_s_, &gap_after_op_s_})
    for (double& x : *v) x = in_clock_unit(x / unit_s);
  for (auto* v : {&pair_bandwidth_, &channel_bandwidth_})  // bytes per unit
    for (double& x : *v) x = in_clock_unit(x * unit_s);
  refresh_clock_time();
}

void Simulator::build_contention(const graphs::Graph& graph, const Cluster& cluster,
                                 const std::vector<int32_t>& measured_of_device) {
  const size_t n = n_, D = devices_;
  peers_.assign(D, {});
  bool any = false;
  for (size_t d = 0; d < D; ++d) {
    const Device& dev = cluster.device(d);
    if (dev.memory_domain.empty() || dev.contended_efficiency_curves.empty()) continue;
    for (size_t e = 0; e < D; ++e)
      if (e != d && cluster.device(e).memory_domain == dev.memory_domain) peers_[d].push_back(static_cast<int32_t>(e));
    any = any || !peers_[d].empty();
  }
  if (!any) return;
  // The contended time is the cost model's on the device with its contended curves in place of its own;
  // a measured time (the graph's, per device kind) stays as measured.
  contended_time_ = clock_time_.empty() ? time_ : clock_time_;
  for (size_t d = 0; d < D; ++d) {
    if (peers_[d].empty()) continue;
    Device contended = cluster.device(d);
    for (const auto& [name, curve] : cluster.device(d).contended_efficiency_curves) contended.efficiency_curves[name] = curve;
    for (size_t op = 0; op < n; ++op) {
      if (measured_of_device[d] >= 0 && !std::isnan(graph.measured_s(op, measured_of_device[d]))) continue;
      const double t = cost_model_->op_time_s(graph, static_cast<graphs::OpId>(op), contended);
      if (!(t >= 0 && t <= kMaxSeconds))
        throw Error(fmt::format("simulator: cost model \"{}\" gives {:.6g} s for op \"{}\" on \"{}\" at its contended "
                                "efficiency; check the device's contended_efficiency_curves",
                                cost_model_->name(), t, graph.op_name(op), cluster.device(d).name));
      contended_time_[op * D + d] = clock_unit_s_ == 1 ? t : in_clock_unit(t / clock_unit_s_);
    }
  }
}

double Simulator::pair_bandwidth_at(size_t pair, double bytes, bool loaded) const {
  if (!pair_curved_[pair]) return pair_bandwidth_[pair];
  const auto D = static_cast<size_t>(devices_);
  return cluster_->route_bandwidth_bytes_per_s(static_cast<int32_t>(pair / D), static_cast<int32_t>(pair % D), bytes,
                                               loaded) *
         clock_unit_s_;
}

void Simulator::refresh_clock_time() {
  if (clock_unit_s_ == 1) return;
  clock_time_.resize(time_.size());
  std::transform(time_.begin(), time_.end(), clock_time_.begin(), [&](double t) { return in_clock_unit(t / clock_unit_s_); });
}

void Simulator::refresh_time_classes() {
  const double* t = clock_time_.empty() ? time_.data() : clock_time_.data();
  const size_t n = n_, D = devices_;
  // A device joins the class of the first device whose times equal its own, bit for bit, for every op.
  auto same_times = [&](size_t a, size_t b) {
    for (size_t op = 0; op < n; ++op)
      if (std::bit_cast<uint64_t>(t[op * D + a]) != std::bit_cast<uint64_t>(t[op * D + b])) return false;
    return true;
  };
  std::vector<size_t> first;  // a device of each class
  time_class_.assign(D, 0);
  for (size_t d = 0; d < D; ++d) {
    size_t c = 0;
    while (c < first.size() && !same_times(first[c], d)) ++c;
    if (c == first.size()) first.push_back(d);
    time_class_[d] = static_cast<int32_t>(c);
  }
  time_classes_ = static_cast<int32_t>(first.size());
  class_time_.clear();
  if (first.size() == D) return;  // no two alike: the run reads the full table
  class_time_.resize(n * first.size());
  for (size_t op = 0; op < n; ++op)
    for (size_t c = 0; c < first.size(); ++c) class_time_[op * first.size() + c] = t[op * D + first[c]];
}

void Simulator::order_by_rank() {
  std::vector<int32_t> order(n_);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return rank_[a] > rank_[b] || (rank_[a] == rank_[b] && a < b); });
  rank_class_.resize(n_);
  for (int32_t i = 0, c = -1; i < n_; ++i) {
    if (i == 0 || rank_[order[i]] != rank_[order[i - 1]]) ++c;
    info_[order[i]].prio = i;
    rank_class_[order[i]] = c;
  }
}

void Simulator::take_batches_of(const Simulator& base) {
  const int32_t n = base.n_;
  const auto D = static_cast<size_t>(devices_);
  for (int32_t op = 0; op < n_; ++op)
    std::copy_n(base.time_.begin() + static_cast<ptrdiff_t>((op % n) * D), D, time_.begin() + static_cast<ptrdiff_t>(op * D));
  refresh_clock_time();
  refresh_time_classes();
  if (!contended_time_.empty())
    for (int32_t op = 0; op < n_; ++op)
      std::copy_n(base.contended_time_.begin() + static_cast<ptrdiff_t>((op % n) * D), D,
                  contended_time_.begin() + static_cast<ptrdiff_t>(op * D));
  // Dense positions of base's ops by decreasing upward rank (equal ranks share one).
  std::vector<int32_t> order(n), pos(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return base.rank_[a] > base.rank_[b]; });
  for (int32_t i = 0, p = -1; i < n; ++i) {
    if (i == 0 || base.rank_[order[i]] != base.rank_[order[i - 1]]) ++p;
    pos[order[i]] = p;
  }
  const int64_t batches = n_ / n;
  for (int32_t op = 0; op < n_; ++op) {  // below 2^53: exact
    const int64_t k = op / n;
    rank_[op] = static_cast<double>((batches - 1 - k) * n + (n - 1 - pos[op % n]));
  }
  order_by_rank();
}

Simulator::~Simulator() = default;
Simulator::Simulator(Simulator&&) noexcept = default;

void Simulator::check_placement(std::span<const int32_t> device_of) const {
  if (device_of.size() != static_cast<size_t>(n_))
    throw Error(fmt::format("placement has {} entries but graph \"{}\" has {} ops; give one device per op",
                            device_of.size(), graph_->name(), n_));
  for (int32_t op = 0; op < n_; ++op) {
    int32_t d = device_of[op];
    if (d < 0 || d >= devices_)
      throw Error(fmt::format("placement: op \"{}\" is on device {}, but cluster \"{}\" has devices 0..{}",
                              graph_->op_name(op), d, cluster_->name(), devices_ - 1));
    if (op_pin_[op] != -1 && op_pin_[op] != device_kind_[d])
      throw Error(fmt::format("placement: op \"{}\" is pinned to kind \"{}\" but placed on \"{}\" (kind \"{}\")",
                              graph_->op_name(op), graph_->pinned_kind(op), cluster_->device(d).name,
                              cluster_->device(d).kind));
  }
}

SimScratchPtr Simulator::make_scratch() const {
  SimScratchPtr s(new SimScratch);
  const size_t n = n_, D = devices_, m = out_.size(), C = channels_;
  s->op.resize(n);
  s->xfer_of_in.resize(m);
  s->xfer.resize(m);
  for (auto* v : {&s->heap_off, &s->heap_size, &s->running, &s->stamp, &s->dest, &s->dest_count, &s->dest_xfer,
                  &s->next_kind})
    v->resize(D);
  for (auto* v : {&s->free_s, &s->next_s, &s->dest_bytes, &s->dest_comm_s, &s->arrival_s, &s->busy, &s->run_s})
    v->resize(D);
  s->mem_s.resize(D);
  s->peak_s.resize(D);
  s->stop_wake_s.assign(D, kInf);
  s->end_event.resize(n);
  s->depart_s.resize(D);
  if (options_.priority == Priority::fifo) s->fifo_key.resize(n);
  s->heap.resize(n);
  s->ranked_size.resize(D);
  if (options_.priority == Priority::rank) s->ranked.resize(n);
  s->chan_free_s.resize(C);
  s->chan_busy_s.resize(C);
  s->chan_bytes.resize(C);
  s->chan_stamp.resize(C);
  s->chan_list.resize(C);
  s->mem_now.reserve(m + 1);
  // One leaf per device, and one for the network when links share their bandwidth.
  while (s->tree_leaves < devices_ + (options_.share_bandwidth ? 1 : 0)) s->tree_leaves *= 2;
  if (options_.share_bandwidth) {
    s->sending.resize(n);
    s->net.init(devices_, route_off_, route_ch_, channel_bandwidth_, m);
  }
  s->tree.resize(2 * static_cast<size_t>(s->tree_leaves));
  s->next_s.resize(s->tree_leaves);  // padded leaves of the tree are devices that never have an event
  s->next_kind.resize(s->tree_leaves);
  return s;
}

SimResult Simulator::simulate(std::span<const int32_t> device_of, SimObserver* observer) const {
  SimScratchPtr s = make_scratch();
  SimResult out;
  simulate(device_of, *s, out, observer);
  return out;
}

void Simulator::simulate(std::span<const int32_t> device_of, SimScratch& scratch, SimResult& out,
                         SimObserver* observer) const {
  check_placement(device_of);
  count_runs(1);
  run(device_of, scratch, out, observer);
}

int64_t Simulator::runs() const { return pool_->runs.load(std::memory_order_relaxed); }

void Simulator::count_runs(int64_t n) const { pool_->runs.fetch_add(n, std::memory_order_relaxed); }

std::vector<SimResult> Simulator::simulate_batch(std::span<const std::vector<int32_t>> placements) const {
  std::vector<SimResult> results;
  simulate_batch(placements, results);
  return results;
}

void Simulator::simulate_batch(std::span<const std::vector<int32_t>> placements, std::vector<SimResult>& results) const {
  // Checks in parallel too (serial checks would cap the scaling); the error is the first invalid
  // placement's, as if checked in order.
  std::atomic<size_t> first_bad = placements.size();
  tbb::parallel_for(tbb::blocked_range<size_t>(0, placements.size()), [&](const tbb::blocked_range<size_t>& r) {
    for (size_t i = r.begin(); i != r.end(); ++i) {
      try {
        check_placement(placements[i]);
      } catch (const Error&) {
        size_t seen = first_bad.load();
        while (i < seen && !first_bad.compare_exchange_weak(seen, i)) {
        }
      }
    }
  });
  if (first_bad.load() < placements.size()) check_placement(placements[first_bad.load()]);  // throws
  results.resize(placements.size());
  count_runs(static_cast<int64_t>(placements.size()));
  // A thread's scratch is used by one run at a time: run() never waits, so TBB cannot interleave two.
  tbb::parallel_for(tbb::blocked_range<size_t>(0, placements.size()), [&](const tbb::blocked_range<size_t>& r) {
    SimScratchPtr& mine = pool_->scratch.local();
    if (!mine) mine = make_scratch();
    SimScratch& s = *mine;
    for (size_t i = r.begin(); i != r.end(); ++i) run(placements[i], s, results[i], nullptr);
  });
}

}  // namespace placelab::sim
