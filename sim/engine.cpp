// The discrete-event engine. Events are per device: each device has at most one pending event, the end
// of its running op or the wake-up that starts its best ready op, and the next one is the least by (time,
// ends before wake-ups, device index): a vector scan for up to 16 devices, a tournament tree over more
// (see run_mode). Links are FIFO channels reserved in request order, so a transfer's times are known when
// its producer ends and need no event of their own.
#include "sim/engine.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include <fmt/format.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#include <tbb/enumerable_thread_specific.h>
#include <tbb/parallel_for.h>

#include "graphs/error.h"
#include "sim/sharing.h"

namespace placelab::sim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The longest op or transfer a run accepts (~32 years): anything longer is a unit mistake, and the
// bound keeps every sum of times finite (placers add them up, LP solvers take them as coefficients).
constexpr double kMaxSeconds = 1e9;
// Event kinds, in their order at equal times: network (transfers ending under bandwidth sharing), op
// ends, device wake-ups.
constexpr int32_t kNet = 0, kEnd = 1, kWake = 2;

// An op in a ready queue. `prio` is the op's position by (upward rank descending, op id), unique, so
// that the default order needs two comparisons and an entry fits in 16 bytes.
struct ReadyEntry {
  double ready_s;
  int32_t prio;
  int32_t op;
};

// (ready time, rank, op id): the default priority, and the order of ops waiting for their inputs.
struct ByReadyTime {
  bool operator()(const ReadyEntry& a, const ReadyEntry& b) const {
    return a.ready_s < b.ready_s || (a.ready_s == b.ready_s && a.prio < b.prio);
  }
};

// (ready time, release key): Priority::fifo's order; release keys are unique.
struct ByRelease {
  const double* key;
  bool operator()(const ReadyEntry& a, const ReadyEntry& b) const {
    return a.ready_s < b.ready_s || (a.ready_s == b.ready_s && key[a.op] < key[b.op]);
  }
};

// (rank, ready time, op id): Priority::rank among ops that are ready; `rank_class` numbers the distinct
// ranks in decreasing order, and prio orders equal ranks by op id.
struct ByRank {
  const int32_t* rank_class;
  bool operator()(const ReadyEntry& a, const ReadyEntry& b) const {
    if (rank_class[a.op] != rank_class[b.op]) return rank_class[a.op] < rank_class[b.op];
    return a.ready_s < b.ready_s || (a.ready_s == b.ready_s && a.prio < b.prio);
  }
};

// Binary min-heap in h[0, size).
template <class Less>
void heap_push(ReadyEntry* h, int32_t& size, ReadyEntry e, Less less) {
  int32_t i = size++;
  while (i > 0) {
    int32_t parent = (i - 1) / 2;
    if (!less(e, h[parent])) break;
    h[i] = h[parent];
    i = parent;
  }
  h[i] = e;
}

template <class Less>
ReadyEntry heap_pop(ReadyEntry* h, int32_t& size, Less less) {
  ReadyEntry top = h[0];
  ReadyEntry last = h[--size];
  int32_t i = 0;
  for (;;) {
    int32_t c = 2 * i + 1;
    if (c >= size) break;
    if (c + 1 < size && less(h[c + 1], h[c])) ++c;
    if (!less(h[c], last)) break;
    h[i] = h[c];
    i = c;
  }
  h[i] = last;
  return top;
}

// The least (time, kind, index) among P event slots: the least time by a pairwise reduction (a short
// dependency chain, unlike a running minimum: measured faster), then ties, which are rare, by kind and index.
template <int P>
int32_t scan_next(const double* time_s, const int32_t* kind) {
  uint32_t at_min = 0;
#if defined(__SSE2__)
  if constexpr (P >= 2) {  // two slots per register
    __m128d v[P / 2], m[P / 2];
    for (int i = 0; i < P / 2; ++i) m[i] = v[i] = _mm_loadu_pd(time_s + 2 * i);
    for (int w = P / 4; w >= 1; w /= 2)
      for (int i = 0; i < w; ++i) m[i] = _mm_min_pd(m[i], m[i + w]);
    const __m128d least = _mm_min_pd(m[0], _mm_shuffle_pd(m[0], m[0], 1));  // in both lanes
    for (int i = 0; i < P / 2; ++i)
      at_min |= static_cast<uint32_t>(_mm_movemask_pd(_mm_cmpeq_pd(v[i], least))) << (2 * i);
  } else
#endif
  {
    std::array<double, P> m;
    std::copy(time_s, time_s + P, m.begin());
    for (int w = P / 2; w >= 1; w /= 2)
      for (int i = 0; i < w; ++i) m[i] = std::min(m[i], m[i + w]);
    for (int i = 0; i < P; ++i) at_min |= static_cast<uint32_t>(time_s[i] == m[0]) << i;
  }
  int32_t best = std::countr_zero(at_min);
  for (uint32_t rest = at_min & (at_min - 1); rest != 0; rest &= rest - 1) {
    const int32_t i = std::countr_zero(rest);
    if (kind[i] < kind[best]) best = i;
  }
  return best;
}

// A memory change dated in the future (received copies at transfer start, senders' frees at transfer end).
// Its key orders by time, then frees before allocations: times are >= 0, so their bits order like them.
struct MemEvent {
  uint64_t key;
  int32_t device;
  int64_t bytes;
  bool is_alloc() const { return key & 1; }
};

uint64_t mem_key(double time_s, int32_t is_alloc) {
  return (std::bit_cast<uint64_t>(time_s) << 1) | static_cast<uint64_t>(is_alloc);
}

// A radix heap: a priority queue for keys that never go below the last one taken out, which holds here
// because changes are dated after the event being handled. Push O(1), pop amortised O(log key range).
struct MemQueue {
  std::array<std::vector<MemEvent>, 65> bucket;  // bucket i > 0: keys whose highest bit differing from last is i-1
  std::array<uint64_t, 65> bucket_min;           // the smallest key of each bucket (UINT64_MAX when empty)
  uint64_t last = 0;
  uint64_t min = UINT64_MAX;  // smallest key held
  uint64_t filled = 0;        // bit i-1 set: bucket i is not empty
  size_t size = 0;

  MemQueue() { bucket_min.fill(UINT64_MAX); }
  static int index(uint64_t key, uint64_t last) { return key == last ? 0 : 64 - std::countl_zero(key ^ last); }
  void clear() {
    for (auto& b : bucket) b.clear();
    bucket_min.fill(UINT64_MAX);
    last = filled = 0;
    min = UINT64_MAX;
    size = 0;
  }
  void put(const MemEvent& e) {
    const int i = index(e.key, last);
    bucket[i].push_back(e);
    bucket_min[i] = std::min(bucket_min[i], e.key);
    if (i > 0) filled |= uint64_t{1} << (i - 1);
  }
  void push(const MemEvent& e) {
    put(e);
    min = std::min(min, e.key);
    ++size;
  }
  // One with the smallest key; size > 0. Every key of a lower bucket is below every key of a higher one,
  // so the smallest key held is that of the lowest bucket in use: no bucket is scanned for it.
  MemEvent pop() {
    if (bucket[0].empty()) {
      const int i = std::countr_zero(filled) + 1;
      last = min;
      filled &= ~(uint64_t{1} << (i - 1));
      for (const MemEvent& e : bucket[i]) put(e);  // all go to lower buckets
      bucket[i].clear();
      bucket_min[i] = UINT64_MAX;
    }
    MemEvent e = bucket[0].back();
    bucket[0].pop_back();
    --size;
    if (bucket[0].empty()) {
      bucket_min[0] = UINT64_MAX;
      min = filled ? bucket_min[std::countr_zero(filled) + 1] : UINT64_MAX;
    }
    return e;
  }
};

}  // namespace

// A run's state but for its sparse arrays, which SimScratch adds: a saved state copies this whole and only
// the used parts of those.
struct SimDense {
  // per op, packed: one cache line serves two ops
  struct OpState {
    int32_t pending;     // inputs not yet produced
    int32_t local_left;  // local data consumers that have not ended (set when the op ends)
    double ready_s;      // latest input arrival so far
    double cp_start_s;   // critical-path start: longest idle-network path to the op
    double hold_until_s; // the output's last outgoing transfer end (FIFO links)
  };
  std::vector<OpState> op;  // 32 bytes: two ops per cache line
  std::vector<int32_t> sending;  // per op, with bandwidth sharing: its transfers still under way
  // per in-slot: the transfer record that brought that input, -1 when local or a control edge
  std::vector<int32_t> xfer_of_in;
  // a transfer record (one per destination device)
  struct Xfer {
    int32_t left;   // consumers on the destination that have not ended
    int64_t bytes;  // memory of the received copy, whole bytes
  };
  // per device
  std::vector<int32_t> heap_off, heap_size, running, stamp, dest, dest_count, dest_xfer, tree;
  std::vector<double> free_s, next_s, dest_bytes, dest_comm_s, arrival_s;
  std::vector<double> run_s;  // with memory contention: how long the running op takes
  std::vector<int64_t> mem_s, peak_s;  // memory in whole bytes, so sums are exact in any order
  std::vector<int32_t> next_kind;
  std::vector<int32_t> ranked_size;
  SharedNetwork net;  // with bandwidth sharing: the transfers under way
  // per channel
  std::vector<double> chan_free_s, chan_busy_s, chan_bytes;
  std::vector<int32_t> chan_stamp, chan_list;
  MemQueue mem_events;
  std::vector<MemEvent> mem_now;     // allocations at the current instant, applied before later changes
  int32_t tree_leaves = 1;
  // progress, so that a run can stop and resume (incremental re-simulation)
  int64_t events = 0;
  int32_t num_xfers = 0, done = 0;
  double makespan = 0, critical = 0, total_bytes = 0;
  int64_t transfers = 0;
  std::vector<double> busy;
  std::vector<int32_t> end_event;  // event index at which each op ended
  // Priority::fifo: per op, the key of the release that made it ready; per device, the start of the
  // transfer to it under way (which tells a release scheduled ahead from one made at its instant)
  std::vector<double> fifo_key, depart_s;
};

struct SimScratch : SimDense {
  std::vector<Xfer> xfer;                // transfer records, num_xfers of them made so far
  std::vector<ReadyEntry> heap, ranked;  // per-device segments at heap_off; ranked only for Priority::rank
};

// Saved states of one run, every `interval` events, for IncrementalSimulator. A saved state keeps the
// dense part whole and of the sparse arrays only what is used, which halves the bytes a save and a
// restore copy: the transfer records made so far, and each device's live ready heap, stored back to
// back (so that moving ops between devices changes only the offsets of the full layout, heap_off).
struct SimCheckpoints {
  int64_t interval = 1;
  int64_t next = 0;
  size_t count = 0;
  std::vector<SimScratch> saved;

  void save(const SimScratch& s) {
    if (count == saved.size()) saved.emplace_back();
    SimScratch& out = saved[count++];
    static_cast<SimDense&>(out) = s;
    out.xfer.assign(s.xfer.begin(), s.xfer.begin() + s.num_xfers);
    for (auto [full, compact, sizes] :
         {std::tuple{&s.heap, &out.heap, &s.heap_size}, std::tuple{&s.ranked, &out.ranked, &s.ranked_size}}) {
      compact->clear();
      if (full->empty()) continue;
      for (size_t d = 0; d < s.heap_off.size(); ++d)
        compact->insert(compact->end(), full->begin() + s.heap_off[d], full->begin() + s.heap_off[d] + (*sizes)[d]);
    }
    next = s.events + interval;
  }
  // Makes `s`, a full scratch from make_scratch(), the state `saved` holds.
  static void restore(const SimScratch& saved, SimScratch& s) {
    static_cast<SimDense&>(s) = saved;
    std::copy(saved.xfer.begin(), saved.xfer.end(), s.xfer.begin());
    for (auto [compact, full, sizes] : {std::tuple{&saved.heap, &s.heap, &saved.heap_size},
                                        std::tuple{&saved.ranked, &s.ranked, &saved.ranked_size}}) {
      if (full->empty()) continue;
      for (size_t d = 0, taken = 0; d < saved.heap_off.size(); taken += (*sizes)[d++])
        std::copy(compact->begin() + taken, compact->begin() + taken + (*sizes)[d], full->begin() + saved.heap_off[d]);
    }
  }
};

// What the last incremental move replaced, swapped aside (not copied) so that undo() can put it back.
struct SimUndo {
  bool valid = false;
  std::vector<IncrementalSimulator::Moved> moved;  // empty: the move changed nothing
  size_t kept = 0;                 // saved states the move kept (relocated in place)
  size_t count = 0;                // saved states before the move
  std::vector<SimScratch> saved;   // the states from `kept` on, as they were
  SimScratchPtr state;
  SimResult result;
  double replayed_fraction = 1;
};

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
  run(device_of, scratch, out, observer);
}

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
  // A thread's scratch is used by one run at a time: run() never waits, so TBB cannot interleave two.
  tbb::parallel_for(tbb::blocked_range<size_t>(0, placements.size()), [&](const tbb::blocked_range<size_t>& r) {
    SimScratchPtr& mine = pool_->scratch.local();
    if (!mine) mine = make_scratch();
    SimScratch& s = *mine;
    for (size_t i = r.begin(); i != r.end(); ++i) run(placements[i], s, results[i], nullptr);
  });
}

IncrementalSimulator::IncrementalSimulator(const Simulator& simulator, std::vector<int32_t> device_of,
                                           int32_t checkpoints)
    : sim_(&simulator), device_of_(std::move(device_of)), checkpoints_(std::make_unique<SimCheckpoints>()),
      undo_(std::make_unique<SimUndo>()) {
  sim_->check_placement(device_of_);
  if (checkpoints < 1) throw Error(fmt::format("incremental simulator: {} checkpoints, need at least 1", checkpoints));
  checkpoints_->interval = std::max<int64_t>(1, 2 * static_cast<int64_t>(sim_->num_ops()) / checkpoints);
  checkpoints_->next = checkpoints_->interval;  // the initial state is not saved: a fresh run is cheaper
  state_ = sim_->make_scratch();
  sim_->run(device_of_, *state_, result_, nullptr, checkpoints_.get(), true);
}

IncrementalSimulator::~IncrementalSimulator() = default;

void IncrementalSimulator::relocate(SimScratch& s, std::span<const Moved> moved) const {
  // Resident bytes are a constant offset over the whole prefix, so its peaks move by the same amount.
  const int32_t D = sim_->num_devices();
  std::vector<int32_t>& change = s.dest_count;  // per-device scratch, free between runs: ops gained
  std::fill(change.begin(), change.begin() + D, 0);
  for (const auto [op, from, to] : moved) {
    const int64_t param = sim_->param_bytes_[op];
    s.mem_s[from] -= param;
    s.peak_s[from] -= param;
    s.mem_s[to] += param;
    s.peak_s[to] += param;
    --change[from];
    ++change[to];
  }
  // Heap segments are sized by ops per device (the moved ops are in no heap yet); a saved state stores
  // them back to back, so only their offsets in the full layout change.
  for (int32_t d = 0, off = 0; d < D; ++d) {
    const int32_t ops = (d + 1 < D ? s.heap_off[d + 1] : sim_->num_ops()) - s.heap_off[d] + change[d];
    s.heap_off[d] = off;
    off += ops;
  }
}

const SimResult& IncrementalSimulator::move(graphs::OpId op, int32_t device) {
  return move(std::span<const graphs::OpId>(&op, 1), device);
}

const SimResult& IncrementalSimulator::move(std::span<const graphs::OpId> ops, int32_t device) {
  const Simulator& sim = *sim_;
  for (graphs::OpId op : ops)
    if (op < 0 || op >= sim.num_ops())
      throw Error(fmt::format("incremental move: op {} is out of range (graph has {} ops)", op, sim.num_ops()));
  moved_.clear();
  for (graphs::OpId op : ops) {
    if (device_of_[op] == device) continue;  // also skips an op listed twice
    moved_.push_back(Moved{op, device_of_[op], device});
    device_of_[op] = device;
  }
  SimUndo& undo = *undo_;
  if (moved_.empty()) {
    undo.valid = true;
    undo.moved.clear();
    return result_;
  }
  try {
    sim.check_placement(device_of_);
  } catch (const Error&) {
    for (auto it = moved_.rbegin(); it != moved_.rend(); ++it) device_of_[it->op] = it->from;
    throw;
  }
  const int64_t total_events = state_->events;
  // The first event that reads where a moved op is: the end of the earliest of their producers; a
  // source (no producer) is queued at the start.
  int64_t first = std::numeric_limits<int64_t>::max();
  for (const Moved& m : moved_) {
    const Simulator::OpInfo& info = sim.info_[m.op];
    if (info.in_begin == info.in_end) first = -1;
    for (int32_t k = info.in_begin; k < info.in_end; ++k)
      first = std::min<int64_t>(first, state_->end_event[sim.in_[k].src]);
  }
  SimCheckpoints& cps = *checkpoints_;
  size_t usable = 0;  // saved states taken no later than `first`
  while (first >= 0 && usable < cps.count && cps.saved[usable].events <= first) ++usable;
  // Keep what the move replaces for undo(): the saved states it drops, the final state, the result.
  undo.valid = true;
  undo.moved = moved_;
  undo.kept = usable;
  undo.count = cps.count;
  undo.replayed_fraction = replayed_fraction_;
  if (undo.saved.size() < cps.count - usable) undo.saved.resize(cps.count - usable);
  for (size_t j = usable; j < cps.count; ++j) std::swap(cps.saved[j], undo.saved[j - usable]);
  if (!undo.state) undo.state = sim.make_scratch();
  std::swap(state_, undo.state);
  std::swap(result_, undo.result);
  if (usable == 0) {  // a source moved, or `first` comes before the first saved state
    cps.count = 0;
    cps.next = cps.interval;
    sim.run(device_of_, *state_, result_, nullptr, &cps, true);
    replayed_fraction_ = 1;
    return result_;
  }
  const size_t k = usable - 1;
  cps.count = k + 1;
  // Saved states up to k stay valid for the new placement once the moves are applied to them.
  for (size_t j = 0; j <= k; ++j) relocate(cps.saved[j], moved_);
  SimScratch& s = *state_;
  SimCheckpoints::restore(cps.saved[k], s);
  cps.next = s.events + cps.interval;
  replayed_fraction_ = total_events > 0 ? 1.0 - static_cast<double>(s.events) / static_cast<double>(total_events) : 1;
  sim.run(device_of_, s, result_, nullptr, &cps, false);
  return result_;
}

const SimResult& IncrementalSimulator::undo() {
  SimUndo& undo = *undo_;
  if (!undo.valid) throw Error("incremental undo: nothing to revert (undo reverts the last move, once)");
  undo.valid = false;
  if (undo.moved.empty()) return result_;
  moved_.clear();
  for (const Moved& m : undo.moved) {
    device_of_[m.op] = m.from;
    moved_.push_back(Moved{m.op, m.to, m.from});
  }
  SimCheckpoints& cps = *checkpoints_;
  for (size_t j = 0; j < undo.kept; ++j) relocate(cps.saved[j], moved_);
  for (size_t j = undo.kept; j < undo.count; ++j) std::swap(cps.saved[j], undo.saved[j - undo.kept]);
  cps.count = undo.count;
  std::swap(state_, undo.state);
  std::swap(result_, undo.result);
  replayed_fraction_ = undo.replayed_fraction;
  return result_;
}

void Simulator::run(std::span<const int32_t> dev, SimScratch& s, SimResult& out, SimObserver* observer,
                    SimCheckpoints* checkpoints, bool fresh) const {
  // The default options without an observer (the hot case: rewards, batches) get their own copy of the
  // event loop with the other modes' branches compiled out.
  const bool general = observer != nullptr || options_.priority != Priority::ready_time || options_.share_bandwidth ||
                       (options_.use_edge_comm && graph_->has_edge_comm()) ||
                       cluster_->transfer_mode() == TransferMode::broadcast || any_sender_copies_ || any_link_curves_ ||
                       !contended_time_.empty();
  if (general) run_mode<true>(dev, s, out, observer, checkpoints, fresh);
  else run_mode<false>(dev, s, out, nullptr, checkpoints, fresh);
}

template <bool kGeneral>
void Simulator::run_mode(std::span<const int32_t> dev, SimScratch& s, SimResult& out, SimObserver* observer,
                         SimCheckpoints* checkpoints, bool fresh) const {
  const int32_t n = n_, D = devices_;
  const int32_t* device_of = dev.data();
  const OpInfo* info = info_.data();
  const OutSlot* outs = out_.data();
  const InSlot* ins = in_.data();
  SimScratch::OpState* state = s.op.data();
  const double* op_time = clock_time_.empty() ? time_.data() : clock_time_.data();
  const double unit = clock_unit_s_;  // observers and results get seconds

  // Per device: ops whose inputs are all produced, by ready time (heap); with Priority::rank, those
  // already ready when the device looked, by rank (ranked).
  ReadyEntry* heap = s.heap.data();
  ReadyEntry* ranked = s.ranked.data();
  const bool by_rank = kGeneral && options_.priority == Priority::rank;
  const bool fifo = kGeneral && options_.priority == Priority::fifo;
  const bool edge_comm = kGeneral && options_.use_edge_comm && graph_->has_edge_comm();
  const bool broadcast = kGeneral && cluster_->transfer_mode() == TransferMode::broadcast;
  const bool sharing = kGeneral && options_.share_bandwidth;
  const bool sender_copies = kGeneral && any_sender_copies_;  // some device copies its own outputs
  const bool link_curves = kGeneral && any_link_curves_;      // some route's bandwidth depends on the size
  const bool contention = kGeneral && !contended_time_.empty();  // devices share a memory domain
  // Whether device e runs an op at time `at` (as far as the run knows at the current event).
  auto running_at = [&](int32_t e, double at) { return s.running[e] >= 0 && s.next_s[e] > at; };
  // Whether another device of d's memory domain is busy at t: running an op past t, copying, or starting
  // one at t (ops that start together slow each other, whichever is handled first).
  auto peer_busy = [&](int32_t d, double t) {
    return std::any_of(peers_[d].begin(), peers_[d].end(), [&](int32_t e) {
      return running_at(e, t) || s.free_s[e] > t || (s.next_kind[e] == kWake && s.next_s[e] == t);
    });
  };
  // Bytes per clock unit from one device to another for a copy of `bytes`, made while the destination runs an
  // op (loaded) or not.
  auto bandwidth = [&](size_t pair, double bytes, bool loaded = false) {
    return link_curves ? pair_bandwidth_at(pair, bytes, loaded) : pair_bandwidth_[pair];
  };
  const ByRelease by_release{s.fifo_key.data()};
  const ByRank by_rank_class{rank_class_.data()};

  // The next event: the device (leaf) with the least (next_s, kind, index). Up to 16 leaves: a scan
  // (scan_next, measured faster for 8 GPUs); more: a tournament tree kept up to date.
  const int32_t P = s.tree_leaves;
  const bool scan = P <= 16;
  int32_t* tree = s.tree.data();
  const double* next_s = s.next_s.data();
  const int32_t* next_kind = s.next_kind.data();
  auto better = [&](int32_t a, int32_t b) {
    const bool a_first = next_s[a] < next_s[b] ||
                         (next_s[a] == next_s[b] && next_kind[a] * P + a < next_kind[b] * P + b);
    return a_first ? a : b;
  };
  auto tree_update = [&](int32_t d) {
    if (scan) return;
    for (int32_t i = (P + d) >> 1; i >= 1; i >>= 1) tree[i] = better(tree[2 * i], tree[2 * i + 1]);
  };
  auto next_event = [&] {
    switch (P) {  // the scan's width is a power of two
      case 1: return 0;
      case 2: return scan_next<2>(next_s, next_kind);
      case 4: return scan_next<4>(next_s, next_kind);
      case 8: return scan_next<8>(next_s, next_kind);
      case 16: return scan_next<16>(next_s, next_kind);
      default: return tree[1];
    }
  };

  // An idle device wakes when its best ready op is ready and the device is free.
  auto schedule_wake = [&](int32_t d) {
    double t = s.heap_size[d] > 0 ? std::max(s.free_s[d], heap[s.heap_off[d]].ready_s) : kInf;
    if (by_rank && s.ranked_size[d] > 0) t = s.free_s[d];
    if (t != s.next_s[d] || s.next_kind[d] != kWake) {
      s.next_s[d] = t;
      s.next_kind[d] = kWake;
      tree_update(d);
    }
  };
  auto make_ready = [&](int32_t op, int32_t d) {
    // The op starts some events from now: fetch its time and adjacency meanwhile.
    __builtin_prefetch(op_time + static_cast<size_t>(op) * D);
    __builtin_prefetch(outs + info[op].out_begin);
    __builtin_prefetch(ins + info[op].in_begin);
    const ReadyEntry entry{state[op].ready_s, info[op].prio, op};
    if (fifo) heap_push(heap + s.heap_off[d], s.heap_size[d], entry, by_release);
    else heap_push(heap + s.heap_off[d], s.heap_size[d], entry, ByReadyTime());
    if (s.running[d] == -1) schedule_wake(d);
  };
  // Priority::fifo: ties in ready time go in the order Placeto's simulator releases ops at one instant.
  // Releases scheduled ahead of it (after an op or a transfer that took time) come first, by (producer
  // name, consumer name); then those made at the instant (after an op that took no time), in the order
  // the ops ended, by consumer name. An op's key is that of the last of its inputs to arrive. Sources
  // come first of all, in graph order (keys 0..n-1). Keys stay below 2^53 up to ~6e7 ops: exact.
  const double nk = n;
  auto fifo_release = [&](int32_t producer, int32_t consumer, double arrive, bool scheduled_ahead) {
    const double key = scheduled_ahead ? nk + fifo_name_key_[producer] * nk + fifo_name_key_[consumer]
                                       : nk + nk * nk + s.done * nk + fifo_name_key_[consumer];
    double& k = s.fifo_key[consumer];
    const double ready = state[consumer].ready_s;
    if (arrive > ready) k = key;
    else if (arrive == ready) k = std::max(k, key);
  };

  MemQueue& mem = s.mem_events;
  std::vector<MemEvent>& mem_now = s.mem_now;
  double now = 0;  // time of the event being handled
  auto mem_later = [&](double time_s, int32_t is_alloc, int32_t d, int64_t bytes) {
    if (is_alloc && time_s == now) {  // common: the link was free; skip the heap
      mem_now.push_back(MemEvent{mem_key(time_s, is_alloc), d, bytes});
      return;
    }
    mem.push(MemEvent{mem_key(time_s, is_alloc), d, bytes});
  };
  auto mem_alloc = [&](int32_t d, int64_t bytes, double time_s) {
    s.mem_s[d] += bytes;
    s.peak_s[d] = std::max(s.peak_s[d], s.mem_s[d]);
    if (kGeneral && observer) observer->on_memory(d, time_s * unit, s.mem_s[d]);
  };
  auto mem_free = [&](int32_t d, int64_t bytes, double time_s) {
    s.mem_s[d] -= bytes;
    if (kGeneral && observer) observer->on_memory(d, time_s * unit, s.mem_s[d]);
  };
  auto mem_time = [](const MemEvent& e) { return std::bit_cast<double>(e.key >> 1); };
  // Applies dated changes up to time t: frees at t always, allocations at t only before allocations.
  auto mem_flush = [&](double t, bool allocs_at_t) {
    // Allocations of an earlier instant (or of this one, before this instant's allocations) come first:
    // every change still in the heap is at that instant or later, and this instant's frees are done.
    if (!mem_now.empty() && (mem_now.front().key < mem_key(t, 0) || allocs_at_t)) {
      for (const MemEvent& e : mem_now) mem_alloc(e.device, e.bytes, mem_time(e));
      mem_now.clear();
    }
    const uint64_t limit = mem_key(t, allocs_at_t ? 1 : 0);
    while (mem.size > 0 && mem.min <= limit) {
      const MemEvent e = mem.pop();
      if (e.is_alloc()) mem_alloc(e.device, e.bytes, mem_time(e));
      else mem_free(e.device, e.bytes, mem_time(e));
    }
  };
  auto free_output = [&](int32_t op, int32_t d, double t) {
    const int64_t bytes = info[op].output_mem;
    if (bytes <= 0 || (sharing && s.sending[op] > 0)) return;  // a sharing transfer still reads it: freed when it ends
    if (state[op].hold_until_s > t) mem_later(state[op].hold_until_s, 0, d, bytes);
    else mem_free(d, bytes, t);
  };

  // The network's slot (leaf D) waits for its next event: a transfer ending or finishing its latency.
  auto schedule_net = [&] {
    s.next_s[D] = s.net.next_s();
    tree_update(D);
  };
  // A transfer has delivered its tensor: its consumers on the destinations have that input now.
  auto net_deliver = [&](int32_t f, double t) {
    const SharedNetwork::Flow& fl = s.net.flow(f);
    const OpInfo& ip = info[fl.producer];
    for (int32_t e : s.net.dests(fl)) {
      for (int32_t k = ip.out_begin; k < ip.out_end; ++k) {
        const OutSlot& o = outs[k];
        if (o.bytes <= 0 || device_of[o.dst] != e) continue;
        SimScratch::OpState& sc = state[o.dst];
        if (fifo) fifo_release(fl.producer, o.dst, t, t > fl.start_s);
        sc.ready_s = std::max(sc.ready_s, t);
        if (--sc.pending == 0) make_ready(o.dst, e);
      }
      if (kGeneral && observer) observer->on_transfer(fl.producer, fl.src, e, fl.start_s * unit, t * unit, fl.bytes);
    }
    SimScratch::OpState& sp = state[fl.producer];
    if (--s.sending[fl.producer] == 0 && sp.local_left == 0) free_output(fl.producer, fl.src, t);
  };

  if (fresh) {
    s.events = 0;
    s.num_xfers = s.done = 0;
    s.makespan = s.critical = s.total_bytes = 0;
    s.transfers = 0;
    std::fill(s.busy.begin(), s.busy.end(), 0.0);
    // Resident bytes and per-device heap segments.
    std::fill(s.heap_size.begin(), s.heap_size.end(), 0);
    std::fill(s.ranked_size.begin(), s.ranked_size.end(), 0);
    std::fill(s.mem_s.begin(), s.mem_s.end(), 0);
    for (int32_t op = 0; op < n; ++op) {
      ++s.heap_size[device_of[op]];
      state[op] = SimScratch::OpState{in_degree_[op], 0, 0.0, 0.0, 0.0};
      if (fifo) s.fifo_key[op] = in_degree_[op] == 0 ? op : -1;
      s.mem_s[device_of[op]] += param_bytes_[op];
    }
    for (int32_t d = 0, off = 0; d < D; ++d) {
      s.heap_off[d] = off;
      off += s.heap_size[d];
      s.heap_size[d] = 0;
      s.peak_s[d] = s.mem_s[d];
      if (kGeneral && observer) observer->on_memory(d, 0, s.mem_s[d]);
      s.running[d] = -1;
      s.free_s[d] = 0;
      s.next_s[d] = kInf;
      s.next_kind[d] = kWake;
      s.stamp[d] = -1;
    }
    std::fill(s.chan_free_s.begin(), s.chan_free_s.end(), 0.0);
    std::fill(s.chan_busy_s.begin(), s.chan_busy_s.end(), 0.0);
    std::fill(s.chan_bytes.begin(), s.chan_bytes.end(), 0.0);
    std::fill(s.chan_stamp.begin(), s.chan_stamp.end(), -1);
    s.mem_events.clear();
    s.mem_now.clear();
    for (int32_t i = 0; i < P; ++i) tree[P + i] = i;
    for (int32_t i = D; i < P; ++i) s.next_s[i] = kInf, s.next_kind[i] = i == D ? kNet : kWake;
    if (sharing) {
      std::fill(s.sending.begin(), s.sending.end(), 0);
      s.net.clear();
    }
    for (int32_t i = P - 1; i >= 1; --i) tree[i] = better(tree[2 * i], tree[2 * i + 1]);
    if (P == 1) tree[1] = 0;
    for (int32_t op = 0; op < n; ++op)
      if (state[op].pending == 0) make_ready(op, device_of[op]);
  }

  for (;; ++s.events) {
    const int32_t d = next_event();
    const double t = s.next_s[d];
    if (t == kInf) break;
    if (checkpoints && s.events >= checkpoints->next) checkpoints->save(s);

    const bool flush = (mem.size > 0 && mem.min <= mem_key(t, 1)) || (!mem_now.empty() && mem_now.front().key < mem_key(t, 0)) ||
                       (!mem_now.empty() && s.next_kind[d] == kWake);  // most events have nothing to flush
    now = t;
    if (sharing && d == D) {  // bandwidth sharing: transfers end or finish paying their latency
      if (flush) mem_flush(t, false);
      for (int32_t f : s.net.step(t, s.chan_busy_s)) net_deliver(f, t);
      schedule_net();
      continue;
    }
    if (s.next_kind[d] == kWake) {
      if (flush) mem_flush(t, true);
      int32_t op;
      if (!by_rank) {
        op = fifo ? heap_pop(heap + s.heap_off[d], s.heap_size[d], by_release).op
                  : heap_pop(heap + s.heap_off[d], s.heap_size[d], ByReadyTime()).op;
      } else {
        while (s.heap_size[d] > 0 && heap[s.heap_off[d]].ready_s <= t)
          heap_push(ranked + s.heap_off[d], s.ranked_size[d],
                    heap_pop(heap + s.heap_off[d], s.heap_size[d], ByReadyTime()), by_rank_class);
        op = heap_pop(ranked + s.heap_off[d], s.ranked_size[d], by_rank_class).op;
      }
      const size_t at = static_cast<size_t>(op) * D + d;
      const double dur = contention && peer_busy(d, t) ? contended_time_[at] : op_time[at];
      if (contention) s.run_s[d] = dur;
      s.running[d] = op;
      s.next_s[d] = t + dur;
      s.next_kind[d] = kEnd;
      tree_update(d);
      mem_alloc(d, info[op].output_mem + info[op].temp_mem, t);
      s.busy[d] += dur;
      if (kGeneral && observer) observer->on_op(op, d, t * unit, (t + dur) * unit);
      // Its end, some events from now, reads the records of its inputs and the state of its consumers:
      // fetch them meanwhile (random placements miss the cache there most).
      const OpInfo& io = info[op];
      for (int32_t k = io.in_begin; k < io.in_end; ++k) {
        const int32_t x = s.xfer_of_in[k];
        __builtin_prefetch(x >= 0 ? static_cast<const void*>(&s.xfer[x]) : &state[ins[k].src]);
      }
      for (int32_t k = io.out_begin; k < io.out_end; ++k) {
        __builtin_prefetch(device_of + outs[k].dst);
        __builtin_prefetch(state + outs[k].dst);
        __builtin_prefetch(info + outs[k].dst);
      }
      continue;
    }

    // The running op p of device d ends at t.
    if (flush) mem_flush(t, false);
    const int32_t p = s.running[d];
    const OpInfo& ip = info[p];
    SimScratch::OpState& sp = state[p];
    ++s.done;
    s.makespan = t;
    s.end_event[p] = static_cast<int32_t>(s.events);
    const double dur_p = contention ? s.run_s[d] : op_time[static_cast<size_t>(p) * D + d];
    const double cp_end = sp.cp_start_s + dur_p;
    s.critical = std::max(s.critical, cp_end);
    s.running[d] = -2;  // ending: make_ready must not schedule d before its gap is known
    s.free_s[d] = dur_p > 0 ? t + gap_after_op_s_[d] : t;  // no gap after an op that took no time
    mem_free(d, ip.temp_mem, t);

    // Inputs whose last local consumer this was.
    for (int32_t k = ip.in_begin; k < ip.in_end; ++k) {
      if (ins[k].bytes <= 0) continue;
      const int32_t x = s.xfer_of_in[k];
      if (x < 0) {
        const int32_t q = ins[k].src;
        if (--state[q].local_left == 0) free_output(q, d, t);
      } else if (--s.xfer[x].left == 0) {
        mem_free(d, s.xfer[x].bytes, t);
      }
    }

    // Remote destinations of p's output: one transfer per device (or one for all when broadcasting).
    int32_t local = 0, num_dest = 0;
    for (int32_t k = ip.out_begin; k < ip.out_end; ++k) {
      const double bytes = outs[k].bytes;
      if (bytes <= 0) continue;
      const int32_t e = device_of[outs[k].dst];
      if (e == d) {
        ++local;
      } else if (s.stamp[e] != p) {
        s.stamp[e] = p;
        s.dest[num_dest++] = e;
        s.dest_bytes[e] = bytes;
        if (edge_comm) s.dest_comm_s[e] = out_comm_s_[k];
        s.dest_count[e] = 1;
      } else {
        s.dest_bytes[e] = std::max(s.dest_bytes[e], bytes);
        // A transfer is measured when every edge it serves is (the longest time), else modelled: NaN wins.
        const double c = out_comm_s_[k];
        if (edge_comm) s.dest_comm_s[e] = std::isnan(c) ? c : std::max(s.dest_comm_s[e], c);
        ++s.dest_count[e];
      }
    }
    if (edge_comm && broadcast &&
        std::any_of(s.dest.begin(), s.dest.begin() + num_dest, [&](int32_t e) { return std::isnan(s.dest_comm_s[e]); }))
      for (int32_t i = 0; i < num_dest; ++i) s.dest_comm_s[s.dest[i]] = kNaN;  // one broadcast serves them all
    sp.local_left = local;
    sp.hold_until_s = t;
    if (num_dest > 0) {
      // A copy to e starting at `at`: loaded when e runs an op then.
      auto duration = [&](int32_t e, double bytes, double at) {
        if (edge_comm && !std::isnan(s.dest_comm_s[e])) return s.dest_comm_s[e];
        const size_t pair = static_cast<size_t>(d) * D + e;
        return pair_latency_s_[pair] + bytes / bandwidth(pair, bytes, running_at(e, at));
      };
      auto record = [&](int32_t e, double bytes, double start, double end) {
        const int32_t x = s.num_xfers++;
        s.xfer[x] = SimScratch::Xfer{s.dest_count[e], static_cast<int64_t>(bytes + 0.5)};  // bytes >= 0
        s.dest_xfer[e] = x;
        s.arrival_s[e] = end;
        s.depart_s[e] = start;
        mem_later(start, 1, e, s.xfer[x].bytes);
        if (kGeneral && observer) observer->on_transfer(p, d, e, start * unit, end * unit, bytes);
      };
      auto hold_channels = [&](const int32_t* ch, int32_t count, double end, double dur, double bytes) {
        for (int32_t i = 0; i < count; ++i) {
          const int32_t c = ch[i];
          s.chan_free_s[c] = end + channel_busy_after_s_[c];
          s.chan_busy_s[c] += dur + channel_busy_after_s_[c];
          s.chan_bytes[c] += bytes;
        }
      };
      if (sharing) {
        // Transfers start now, pay their route's latency, then share each channel with the others.
        auto add_flow = [&](std::span<const int32_t> dests, double bytes, double stream_bytes, double latency) {
          for (int32_t c : s.net.add(p, d, dests, bytes, stream_bytes, t, latency)) s.chan_bytes[c] += bytes;
          for (int32_t e : dests) {
            const int32_t x = s.num_xfers++;
            s.xfer[x] = SimScratch::Xfer{s.dest_count[e], static_cast<int64_t>(bytes + 0.5)};
            s.dest_xfer[e] = x;
            mem_later(t, 1, e, s.xfer[x].bytes);
          }
          ++s.sending[p];
          s.total_bytes += bytes;
          ++s.transfers;
        };
        // A measured transfer is all latency: it takes exactly that long (a broadcast: all or none of its
        // destinations are measured).
        auto timed = [&](int32_t e) { return edge_comm && !std::isnan(s.dest_comm_s[e]); };
        // A copy that reaches a fraction of its route's bandwidth at its size (a link's efficiency curve)
        // streams as that many more bytes at the full one: alone on its route, it takes as long as in FIFO.
        auto stretch = [&](size_t pair, double bytes) {
          return pair_bandwidth_[pair] / bandwidth(pair, bytes, running_at(static_cast<int32_t>(pair % D), t));
        };
        if (!broadcast) {
          for (int32_t i = 0; i < num_dest; ++i) {
            const int32_t e = s.dest[i];
            const size_t pair = static_cast<size_t>(d) * D + e;
            const double bytes = s.dest_bytes[e];
            add_flow({&s.dest[i], 1}, bytes, timed(e) ? 0.0 : bytes * stretch(pair, bytes),
                     timed(e) ? s.dest_comm_s[e] : pair_latency_s_[pair]);
          }
        } else {
          double bytes = 0, latency = 0, most = 0;
          for (int32_t i = 0; i < num_dest; ++i) bytes = std::max(bytes, s.dest_bytes[s.dest[i]]);
          for (int32_t i = 0; i < num_dest; ++i) {
            const int32_t e = s.dest[i];
            const size_t pair = static_cast<size_t>(d) * D + e;
            latency = std::max(latency, timed(e) ? s.dest_comm_s[e] : pair_latency_s_[pair]);
            most = std::max(most, stretch(pair, bytes));
          }
          add_flow({s.dest.data(), static_cast<size_t>(num_dest)}, bytes, timed(s.dest[0]) ? 0.0 : bytes * most, latency);
        }
        schedule_net();
      } else if (!broadcast) {
        // A device without a copy engine sends one transfer after another.
        const bool serial = sender_copies && sender_copies_[d];
        for (int32_t i = 0; i < num_dest; ++i) {
          const int32_t e = s.dest[i];
          const double bytes = s.dest_bytes[e];
          const size_t pair = static_cast<size_t>(d) * D + e;
          const int32_t* ch = route_ch_.data() + route_off_[pair];
          const int32_t count = route_off_[pair + 1] - route_off_[pair];
          double start = serial ? sp.hold_until_s : t;
          for (int32_t c = 0; c < count; ++c) start = std::max(start, s.chan_free_s[ch[c]]);
          const double dur = duration(e, bytes, start), end = start + dur;
          hold_channels(ch, count, end, dur, bytes);
          record(e, bytes, start, end);
          sp.hold_until_s = std::max(sp.hold_until_s, end);
          s.total_bytes += bytes;
          ++s.transfers;
        }
      } else {
        // One transfer over the union of the routes, as long as the slowest destination needs.
        double bytes = 0, dur = 0, start = t;
        int32_t count = 0;
        for (int32_t i = 0; i < num_dest; ++i) bytes = std::max(bytes, s.dest_bytes[s.dest[i]]);
        for (int32_t i = 0; i < num_dest; ++i) {
          const int32_t e = s.dest[i];
          dur = std::max(dur, duration(e, bytes, t));
          const size_t pair = static_cast<size_t>(d) * D + e;
          for (int32_t r = route_off_[pair]; r < route_off_[pair + 1]; ++r) {
            const int32_t c = route_ch_[r];
            if (s.chan_stamp[c] == p) continue;
            s.chan_stamp[c] = p;
            s.chan_list[count++] = c;
            start = std::max(start, s.chan_free_s[c]);
          }
        }
        const double end = start + dur;
        hold_channels(s.chan_list.data(), count, end, dur, bytes);
        for (int32_t i = 0; i < num_dest; ++i) record(s.dest[i], bytes, start, end);
        sp.hold_until_s = end;
        s.total_bytes += bytes;
        ++s.transfers;
      }
      // Without a copy engine the device was copying until its last transfer ended.
      if (sender_copies && sender_copies_[d]) s.free_s[d] = std::max(s.free_s[d], sp.hold_until_s);
    }

    // Consumers: inputs arrive locally at t, remotely at the transfer's end; control edges at t.
    for (int32_t k = ip.out_begin; k < ip.out_end; ++k) {
      const OutSlot& o = outs[k];
      const int32_t e = device_of[o.dst];
      SimScratch::OpState& sc = state[o.dst];
      double arrive = t, cp = cp_end;
      if (e == d || o.bytes <= 0) {
        s.xfer_of_in[o.in_pos] = -1;
      } else {
        s.xfer_of_in[o.in_pos] = s.dest_xfer[e];
        const size_t pair = static_cast<size_t>(d) * D + e;
        cp += edge_comm && !std::isnan(s.dest_comm_s[e]) ? out_comm_s_[k]
                                                         : pair_latency_s_[pair] + o.bytes / bandwidth(pair, o.bytes);
        sc.cp_start_s = std::max(sc.cp_start_s, cp);
        if (sharing) continue;  // the input arrives when its flow ends
        arrive = s.arrival_s[e];
      }
      if (fifo) fifo_release(p, o.dst, arrive, e == d || o.bytes <= 0 ? dur_p > 0 : arrive > s.depart_s[e]);
      sc.ready_s = std::max(sc.ready_s, arrive);
      sc.cp_start_s = std::max(sc.cp_start_s, cp);
      if (--sc.pending == 0) make_ready(o.dst, e);
    }
    if (local == 0) free_output(p, d, t);

    s.running[d] = -1;
    s.next_kind[d] = kEnd;  // force schedule_wake to refresh the tree
    schedule_wake(d);
  }
  mem_flush(kInf, true);

  out.step_time_s = out.critical_path_s = out.total_bytes_moved = 0;
  out.num_transfers = 0;
  out.oom = false;
  out.device_busy_s.assign(D, 0.0);
  out.device_peak_bytes.assign(D, 0.0);
  out.device_excess_bytes.assign(D, 0.0);
  out.link_busy_s.assign(cluster_->num_links(), 0.0);
  out.link_bytes.assign(cluster_->num_links(), 0.0);

  if (s.done != n) throw Error(fmt::format("simulator: internal error, {} of {} ops ran", s.done, n));
  double busy_until = s.makespan;
  for (int32_t d = 0; d < D; ++d) busy_until = std::max(busy_until, s.free_s[d]);
  if (!sharing)
    for (int32_t c = 0; c < channels_; ++c) busy_until = std::max(busy_until, s.chan_free_s[c]);
  out.step_time_s = s.makespan * unit;
  out.busy_until_s = busy_until * unit;
  out.critical_path_s = s.critical * unit;
  out.total_bytes_moved = s.total_bytes;
  out.num_transfers = s.transfers;
  for (int32_t d = 0; d < D; ++d) out.device_busy_s[d] = s.busy[d] * unit;
  for (int32_t d = 0; d < D; ++d) {
    out.device_peak_bytes[d] = static_cast<double>(s.peak_s[d]);
    out.device_excess_bytes[d] = std::max(0.0, out.device_peak_bytes[d] - cluster_->device(d).memory_bytes);
    out.oom = out.oom || out.device_excess_bytes[d] > 0;
  }
  for (int32_t c = 0; c < channels_; ++c) {
    out.link_busy_s[Cluster::channel_link(c)] += s.chan_busy_s[c] * unit;
    out.link_bytes[Cluster::channel_link(c)] += s.chan_bytes[c];
  }
}

}  // namespace placelab::sim
