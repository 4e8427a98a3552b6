// The lean schedule loops bench/bm_sim.cpp measures the engine against: the engine's default schedule
// (same op starts, checked there) and nothing else, without memory, critical path or statistics.
//   ScheduleOnly: the plainest event-by-event loop (an upper bound on what this schedule costs).
//   ScheduleLean: the same schedule from a loop laid out for speed (issue 31's probe, rebuilt); with
//   run_with_memory, also the engine's exact memory accounting (same peaks, checked there).
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "sim/engine.h"
#include "sim/engine_state.h"  // the event kinds, for ScheduleLean

namespace placelab::bench {

/** Each device's time class and a device of each class, to lay op times out by class as the engine reads them. */
struct TimeClasses {
  std::vector<int32_t> of_device, first;
  explicit TimeClasses(const sim::Simulator& sim) : first(sim.num_time_classes(), -1) {
    for (int32_t d = 0; d < sim.num_devices(); ++d) {
      of_device.push_back(sim.time_class(d));
      if (first[of_device[d]] < 0) first[of_device[d]] = d;
    }
  }
  int32_t size() const { return static_cast<int32_t>(first.size()); }
};

/**
 * The floor anchor: the cheapest schedule evaluation we know, one pass over the ops in topological order
 * on flat arrays (start = max(device free, inputs' arrival over idle links)), with no ready queues, link
 * contention, memory or critical path. The engine does all of that on top, so its time over this floor is
 * the price of those semantics, and this floor is what any engine pays at least.
 */
class TopoSweep {
 public:
  explicit TopoSweep(const sim::Simulator& sim)
      : n_(sim.num_ops()), D_(sim.num_devices()), order_(sim.graph().topo_order().begin(), sim.graph().topo_order().end()),
        in_begin_{0}, end_(static_cast<size_t>(n_)), free_s_(static_cast<size_t>(D_)) {
    const graphs::Graph& g = sim.graph();
    // Op times by device class, as the engine reads them (identical devices share one column).
    const TimeClasses classes(sim);
    C_ = classes.size();
    time_class_ = classes.of_device;
    time_.resize(static_cast<size_t>(n_) * C_);
    for (graphs::OpId op : order_) {  // inputs in CSR over the topological order
      for (graphs::EdgeId e : g.in_edges(op)) ins_.push_back(In{g.edge_src(e), g.edge_bytes(e)});
      in_begin_.push_back(static_cast<int32_t>(ins_.size()));
      for (int32_t c = 0; c < C_; ++c) time_[static_cast<size_t>(op) * C_ + c] = sim.op_time_s(op, classes.first[c]);
    }
    latency_.assign(static_cast<size_t>(D_) * D_, 0);
    inv_bw_.assign(static_cast<size_t>(D_) * D_, 0);
    for (int32_t a = 0; a < D_; ++a)
      for (int32_t b = 0; b < D_; ++b)
        if (a != b) {
          latency_[a * D_ + b] = sim.cluster().route_latency_s(a, b);
          inv_bw_[a * D_ + b] = 1.0 / sim.cluster().route_bandwidth_bytes_per_s(a, b);
        }
  }

  /** The makespan of placement `device_of` (one device per op) under the sweep. */
  double run(const int32_t* device_of) {
    std::fill(free_s_.begin(), free_s_.end(), 0.0);
    double makespan = 0;
    for (int32_t k = 0; k < n_; ++k) {
      const graphs::OpId op = order_[k];
      const int32_t d = device_of[op];
      double start = free_s_[d];
      for (int32_t j = in_begin_[k]; j < in_begin_[k + 1]; ++j) {
        const int32_t src = ins_[j].src, from = device_of[src];
        const double arrive =
            from == d ? end_[src] : end_[src] + latency_[from * D_ + d] + ins_[j].bytes * inv_bw_[from * D_ + d];
        start = std::max(start, arrive);
      }
      end_[op] = free_s_[d] = start + time_[static_cast<size_t>(op) * C_ + time_class_[d]];
      makespan = std::max(makespan, end_[op]);
    }
    return makespan;
  }

 private:
  struct In {
    int32_t src;
    double bytes;
  };
  int32_t n_, D_, C_ = 0;
  std::vector<graphs::OpId> order_;
  std::vector<int32_t> in_begin_, time_class_;
  std::vector<In> ins_;
  std::vector<double> time_, latency_, inv_bw_, end_, free_s_;
};

/** Records each op's start in a run of the engine, to check an anchor's schedule against it. */
struct StartTimes : sim::SimObserver {
  std::vector<double> start_s;  // by op id
  explicit StartTimes(int32_t num_ops) : start_s(num_ops) {}
  void on_op(graphs::OpId op, int32_t, double start, double) override { start_s[op] = start; }
  void on_transfer(graphs::OpId, int32_t, int32_t, double, double, double) override {}
};

/** The ops by the engine's priority: upward rank descending, then op id. */
inline std::vector<graphs::OpId> by_priority(const sim::Simulator& sim) {
  std::vector<graphs::OpId> order(sim.num_ops());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](graphs::OpId a, graphs::OpId b) {
    return sim.upward_rank(a) != sim.upward_rank(b) ? sim.upward_rank(a) > sim.upward_rank(b) : a < b;
  });
  return order;
}

// A second anchor: the engine's default schedule and nothing else, in a lean loop (flat arrays, ready
// heaps of 16-byte entries with the rank folded into one integer, FIFO channels along the routes, one
// transfer per destination device), without memory, critical path, busy times, byte counts, prefetching
// or checkpoints. Every op's start equals the engine's, bit for bit (checked before timing), so its time
// is what this schedule costs when computed event by event with nothing else on top: an upper bound on
// that cost from one implementation, not a proof that no cheaper one exists.
class ScheduleOnly {
 public:
  explicit ScheduleOnly(const sim::Simulator& sim) : n_(sim.num_ops()), D_(sim.num_devices()) {
    const graphs::Graph& g = sim.graph();
    const sim::Cluster& c = sim.cluster();
    const std::vector<graphs::OpId> order = by_priority(sim);
    priority_.resize(n_);
    for (int32_t i = 0; i < n_; ++i) priority_[order[i]] = i;
    out_begin_.push_back(0);
    for (graphs::OpId op = 0; op < n_; ++op) {
      for (graphs::EdgeId e : g.out_edges(op)) out_.push_back(Out{g.edge_dst(e), g.edge_bytes(e)});
      out_begin_.push_back(static_cast<int32_t>(out_.size()));
      in_degree_.push_back(g.in_degree(op));
      for (int32_t d = 0; d < D_; ++d) time_.push_back(sim.op_time_s(op, d));
    }
    latency_.assign(static_cast<size_t>(D_) * D_, 0);
    bandwidth_.assign(static_cast<size_t>(D_) * D_, 0);
    route_off_.push_back(0);
    for (int32_t a = 0; a < D_; ++a)
      for (int32_t b = 0; b < D_; ++b) {
        if (a != b) {
          latency_[a * D_ + b] = c.route_latency_s(a, b);
          bandwidth_[a * D_ + b] = c.route_bandwidth_bytes_per_s(a, b);
        }
        const auto route = c.route(a, b);
        route_ch_.insert(route_ch_.end(), route.begin(), route.end());
        route_off_.push_back(static_cast<int32_t>(route_ch_.size()));
      }
    for (int32_t d = 0; d < D_; ++d) gap_.push_back(c.device(d).gap_after_op_s);
    for (int32_t ch = 0; ch < c.num_channels(); ++ch) busy_after_.push_back(c.link(sim::Cluster::channel_link(ch)).busy_after_s);
    op_.resize(n_);
    heap_.resize(n_);
    for (auto* v : {&heap_off_, &heap_size_, &running_, &stamp_, &dest_, &next_kind_}) v->resize(D_);
    for (auto* v : {&free_s_, &next_s_, &dest_bytes_, &arrival_s_}) v->resize(D_);
    chan_free_s_.resize(c.num_channels());
  }

  /** The step time of `device_of`; with `start_s` (one entry per op), each op's start too. */
  [[gnu::noinline]] double run(const int32_t* device_of, double* start_s = nullptr) {  // callgrind can count it
    constexpr double kInf = std::numeric_limits<double>::infinity();
    constexpr int32_t kEnd = 1, kWake = 2;  // ends before wake-ups at equal times, as in the engine
    std::fill(heap_size_.begin(), heap_size_.end(), 0);
    for (graphs::OpId op = 0; op < n_; ++op) {
      ++heap_size_[device_of[op]];
      op_[op] = OpState{in_degree_[op], 0.0};
    }
    for (int32_t d = 0, off = 0; d < D_; ++d) {
      heap_off_[d] = off;
      off += heap_size_[d];
      heap_size_[d] = 0;
      running_[d] = stamp_[d] = -1;
      free_s_[d] = 0;
    }
    std::fill(chan_free_s_.begin(), chan_free_s_.end(), 0.0);
    auto wake = [&](int32_t d) {
      next_s_[d] = heap_size_[d] > 0 ? std::max(free_s_[d], heap_[heap_off_[d]].ready_s) : kInf;
      next_kind_[d] = kWake;
    };
    for (graphs::OpId op = 0; op < n_; ++op)
      if (op_[op].pending == 0) push(device_of[op], Entry{0.0, priority_[op], op});
    for (int32_t d = 0; d < D_; ++d) wake(d);
    double makespan = 0;
    for (;;) {
      int32_t d = 0;
      for (int32_t i = 1; i < D_; ++i)
        if (next_s_[i] < next_s_[d] || (next_s_[i] == next_s_[d] && next_kind_[i] < next_kind_[d])) d = i;
      const double t = next_s_[d];
      if (t == kInf) break;
      if (next_kind_[d] == kWake) {
        running_[d] = pop(d).op;
        if (start_s) start_s[running_[d]] = t;
        next_s_[d] = t + time_[static_cast<size_t>(running_[d]) * D_ + d];
        next_kind_[d] = kEnd;
        continue;
      }
      const int32_t p = running_[d];
      makespan = t;
      free_s_[d] = time_[static_cast<size_t>(p) * D_ + d] > 0 ? t + gap_[d] : t;  // no gap after an op that took no time
      int32_t num_dest = 0;
      for (int32_t k = out_begin_[p]; k < out_begin_[p + 1]; ++k) {
        const double bytes = out_[k].bytes;
        if (bytes <= 0) continue;
        const int32_t e = device_of[out_[k].dst];
        if (e == d) continue;
        if (stamp_[e] != p) {
          stamp_[e] = p;
          dest_[num_dest++] = e;
          dest_bytes_[e] = bytes;
        } else {
          dest_bytes_[e] = std::max(dest_bytes_[e], bytes);
        }
      }
      for (int32_t i = 0; i < num_dest; ++i) {
        const int32_t e = dest_[i], pair = d * D_ + e;
        const int32_t* ch = route_ch_.data() + route_off_[pair];
        const int32_t hops = route_off_[pair + 1] - route_off_[pair];
        double start = t;
        for (int32_t h = 0; h < hops; ++h) start = std::max(start, chan_free_s_[ch[h]]);
        const double end = start + (latency_[pair] + dest_bytes_[e] / bandwidth_[pair]);
        for (int32_t h = 0; h < hops; ++h) chan_free_s_[ch[h]] = end + busy_after_[ch[h]];
        arrival_s_[e] = end;
      }
      for (int32_t k = out_begin_[p]; k < out_begin_[p + 1]; ++k) {
        const graphs::OpId q = out_[k].dst;
        const int32_t e = device_of[q];
        OpState& s = op_[q];
        s.ready_s = std::max(s.ready_s, e == d || out_[k].bytes <= 0 ? t : arrival_s_[e]);
        if (--s.pending == 0) {
          push(e, Entry{s.ready_s, priority_[q], q});
          if (running_[e] == -1) wake(e);
        }
      }
      running_[d] = -1;
      wake(d);
    }
    return makespan;
  }

 private:
  struct Entry {
    double ready_s;
    int32_t priority;  // position by (upward rank descending, op id)
    graphs::OpId op;
    bool operator<(const Entry& b) const { return ready_s < b.ready_s || (ready_s == b.ready_s && priority < b.priority); }
  };
  struct Out {
    graphs::OpId dst;
    double bytes;
  };
  struct OpState {
    int32_t pending;
    double ready_s;
  };
  void push(int32_t d, Entry e) {
    Entry* h = heap_.data() + heap_off_[d];
    int32_t i = heap_size_[d]++;
    for (; i > 0 && e < h[(i - 1) / 2]; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = e;
  }
  Entry pop(int32_t d) {
    Entry* h = heap_.data() + heap_off_[d];
    const int32_t size = --heap_size_[d];
    const Entry top = h[0], last = h[size];
    int32_t i = 0;
    for (;;) {
      int32_t c = 2 * i + 1;
      if (c >= size) break;
      if (c + 1 < size && h[c + 1] < h[c]) ++c;
      if (!(h[c] < last)) break;
      h[i] = h[c];
      i = c;
    }
    h[i] = last;
    return top;
  }

  int32_t n_, D_;
  std::vector<int32_t> priority_, out_begin_, in_degree_, route_off_, route_ch_;
  std::vector<Out> out_;
  std::vector<double> time_, latency_, bandwidth_, gap_, busy_after_;
  std::vector<OpState> op_;
  std::vector<Entry> heap_;
  std::vector<int32_t> heap_off_, heap_size_, running_, stamp_, dest_, next_kind_;
  std::vector<double> free_s_, next_s_, dest_bytes_, arrival_s_, chan_free_s_;
};

// The next event in ScheduleLean: each slot keeps (time, kind) as one integer key, the time's bits (times
// are >= +0.0, so their bits order like them) shifted left by one, the low bit set for a wake-up; keys
// order like (time, ends before wake-ups). The least (key, index) is found by a tournament of integer
// comparisons and conditional moves, ties to the lower index: a dependency chain of a few cycles per
// level, against ~25 cycles for the engine's floating-point scan (sim::detail::scan_next), and the next
// event waits on it (bench/results/sim.md, "What changed over issue 31").
inline uint64_t event_key(double time_s, int32_t kind) {
  return std::bit_cast<uint64_t>(time_s) << 1 | static_cast<uint64_t>(kind == sim::detail::kWake);
}
inline double key_time(uint64_t key) { return std::bit_cast<double>(key >> 1); }

struct Least {
  uint64_t key;
  int32_t at;
};
template <int P>
inline Least least_key(const uint64_t* key, int32_t first = 0) {
  if constexpr (P == 1) {
    return {key[first], first};
  } else {
    const Least a = least_key<P / 2>(key, first), b = least_key<P / 2>(key, first + P / 2);
    const bool right = b.key < a.key;
    const int32_t mask = -static_cast<int32_t>(right);
    return {right ? b.key : a.key, a.at ^ ((a.at ^ b.at) & mask)};
  }
}

// A third anchor (issue 31): ScheduleOnly's schedule from a loop laid out for speed, as the probe
// describes it: ops numbered by priority (a ready heap's key is one 128-bit integer of the ready time's
// bits and that number), a pass per placement that reads the placement once (each op's time on its
// device; per out-edge one word with the consumer, its device and whether the edge brings a transfer,
// the transfer's duration beside the first edge to each device), a +inf sentinel in every empty ready
// heap, the next event by a tournament over integer keys (least_key), routes padded to their longest
// (reading a channel that is always free, writing one nobody reads) and unrolled by a template on that
// length. Checked against the engine like ScheduleOnly; what each step gained is in the log of 2026-11-27
// (git show 88a5381:bench/results/sim_history.md, "Session 21"). run_with_memory adds the engine's memory
// accounting, its design included (dated changes in one radix heap, sim::detail::MemQueue), so that what
// exact peaks cost in this loop is measured beside the engine: bench/results/sim.md, "What bounds issue
// 31's targets".
class ScheduleLean {
 public:
  explicit ScheduleLean(const sim::Simulator& sim) : n_(sim.num_ops()), D_(sim.num_devices()) {
    const graphs::Graph& g = sim.graph();
    const sim::Cluster& c = sim.cluster();
    op_of_ = by_priority(sim);
    // Op times by device class, as the engine reads them (identical devices share one column).
    const TimeClasses classes(sim);
    C_ = classes.size();
    time_class_ = classes.of_device;
    std::vector<int32_t> pos(n_);
    for (int32_t i = 0; i < n_; ++i) pos[op_of_[i]] = i;
    // Memory: each op's input slots (its in-edges), and the slot each out-edge fills.
    std::vector<int32_t> slot_of_edge(g.num_edges());
    in_begin_.push_back(0);
    for (int32_t i = 0; i < n_; ++i) {
      for (graphs::EdgeId e : g.in_edges(op_of_[i])) {
        slot_of_edge[e] = static_cast<int32_t>(in_.size());
        in_.push_back(In{g.edge_bytes(e) > 0 ? pos[g.edge_src(e)] : -1, -1});  // -1: holds no memory
      }
      in_begin_.push_back(static_cast<int32_t>(in_.size()));
    }
    out_begin_.push_back(0);
    for (int32_t i = 0; i < n_; ++i) {
      const graphs::OpId op = op_of_[i];
      for (graphs::EdgeId e : g.out_edges(op)) {
        out_.push_back(Out{pos[g.edge_dst(e)], g.edge_bytes(e)});
        in_slot_.push_back(slot_of_edge[e]);
      }
      out_begin_.push_back(static_cast<int32_t>(out_.size()));
      in_degree_.push_back(g.in_degree(op));
      if (in_degree_.back() == 0) sources_.push_back(i);
      for (int32_t k = 0; k < C_; ++k) time_.push_back(sim.op_time_s(op, classes.first[k]));
      om_.push_back(OpMem{std::llround(g.output_bytes(op)), std::llround(g.temp_bytes(op)), 0.0, 0, 0});
      param_mem_.push_back(std::llround(g.param_bytes(op)));
    }
    const int32_t channels = c.num_channels();
    for (int32_t a = 0; a < D_; ++a)
      for (int32_t b = 0; b < D_; ++b) hops_ = std::max(hops_, static_cast<int32_t>(c.route(a, b).size()));
    latency_.assign(static_cast<size_t>(D_) * D_, 0);
    bandwidth_.assign(static_cast<size_t>(D_) * D_, 1);
    read_.assign(static_cast<size_t>(D_) * D_ * hops_, channels);        // always free
    write_.assign(static_cast<size_t>(D_) * D_ * hops_, channels + 1);   // never read
    for (int32_t a = 0; a < D_; ++a)
      for (int32_t b = 0; b < D_; ++b) {
        const size_t pair = static_cast<size_t>(a) * D_ + b;
        if (a != b) latency_[pair] = c.route_latency_s(a, b), bandwidth_[pair] = c.route_bandwidth_bytes_per_s(a, b);
        const auto route = c.route(a, b);
        for (size_t h = 0; h < route.size(); ++h) read_[pair * hops_ + h] = write_[pair * hops_ + h] = route[h];
      }
    for (int32_t d = 0; d < D_; ++d) gap_.push_back(c.device(d).gap_after_op_s);
    busy_after_.assign(static_cast<size_t>(channels) + 2, 0);
    for (int32_t ch = 0; ch < channels; ++ch) busy_after_[ch] = c.link(sim::Cluster::channel_link(ch)).busy_after_s;
    chan_free_.resize(static_cast<size_t>(channels) + 2);
    dev_.resize(n_), dur_.resize(n_), pending_.resize(n_), ready_.resize(n_);
    word_.resize(out_.size()), transfer_s_.resize(out_.size());
    heap_.resize(static_cast<size_t>(n_) + D_);
    for (auto* v : {&heap_off_, &heap_size_, &running_, &stamp_, &count_, &dest_xfer_}) v->resize(D_);
    for (auto* v : {&free_s_, &arrival_s_, &largest_}) v->resize(D_);
    xfer_count_.resize(out_.size()), xfer_bytes_.resize(out_.size()), xfer_.resize(out_.size());
    mem_.resize(D_), peak_.resize(D_);
    while (P_ < D_) P_ *= 2;
    if (P_ > 16) throw std::invalid_argument("ScheduleLean: at most 16 devices");
    next_key_.assign(P_, event_key(std::numeric_limits<double>::infinity(), sim::detail::kWake));  // padded: no event
  }

  /** The step time of `device_of`; with `start_s` (one entry per op, by op id), each op's start too. */
  [[gnu::noinline]] double run(const int32_t* device_of, double* start_s = nullptr) {
    return run_hops<false>(device_of, start_s);
  }
  /** The same, also tracking memory as the engine does: each device's peak bytes in `peak` (D entries). */
  [[gnu::noinline]] double run_with_memory(const int32_t* device_of, double* peak) {
    const double makespan = run_hops<true>(device_of, nullptr);
    for (int32_t d = 0; d < D_; ++d) peak[d] = static_cast<double>(peak_[d]);
    return makespan;
  }

 private:
  template <bool kMemory>
  double run_hops(const int32_t* device_of, double* start_s) {
    switch (hops_) {  // routes of a known length: loops the compiler unrolls
      case 1: return run_routes<1, kMemory>(device_of, start_s);
      case 2: return run_routes<2, kMemory>(device_of, start_s);
      case 3: return run_routes<3, kMemory>(device_of, start_s);
      case 4: return run_routes<4, kMemory>(device_of, start_s);
      case 5: return run_routes<5, kMemory>(device_of, start_s);
      case 6: return run_routes<6, kMemory>(device_of, start_s);
      default: return run_routes<0, kMemory>(device_of, start_s);
    }
  }

  // run() for routes padded to kHops channels (0: hops_, unknown at compile time).
  template <int32_t kHops, bool kMemory>
  double run_routes(const int32_t* device_of, double* start_s) {
    using sim::detail::MemEvent, sim::detail::mem_key;
    const int32_t hops = kHops > 0 ? kHops : hops_;
    constexpr double kInf = std::numeric_limits<double>::infinity();
    constexpr int32_t kEnd = 1, kWake = 2;
    prepare<kMemory>(device_of);  // also counts each device's ops in heap_size_
    for (int32_t d = 0, off = 0; d < D_; ++d) {
      heap_off_[d] = off;
      off += heap_size_[d] + 1;  // and the sentinel
      heap_size_[d] = 0;
      heap_[heap_off_[d]] = kSentinel;
      running_[d] = -1;
      free_s_[d] = 0;
    }
    std::fill(chan_free_.begin(), chan_free_.end(), 0.0);
    for (const int32_t i : sources_) push(dev_[i], key(0.0, i));
    auto wake = [&](int32_t d) {
      next_key_[d] = event_key(std::max(free_s_[d], ready_of(heap_[heap_off_[d]])), kWake);  // +inf when empty
    };
    for (int32_t d = 0; d < D_; ++d) wake(d);

    // Memory as the engine counts it (sim/event_loop.cpp): changes dated after the event that makes them
    // (a copy allocated when its transfer starts, an output freed when its last transfer ends) wait in
    // time order, and peaks are taken after each allocation.
    int32_t num_xfers = 0;
    double now = 0;
    auto alloc = [&](int32_t d, int64_t bytes) {
      mem_[d] += bytes;
      peak_[d] = std::max(peak_[d], mem_[d]);
    };
    auto mem_later = [&](double time_s, int32_t is_alloc, int32_t d, int64_t bytes) {
      if (is_alloc && time_s == now) mem_now_.push_back(MemEvent{mem_key(time_s, is_alloc), d, bytes});
      else mem_q_.push(MemEvent{mem_key(time_s, is_alloc), d, bytes});
    };
    auto flush = [&](double t, bool allocs_at_t) {
      if (!mem_now_.empty() && (mem_now_.front().key < mem_key(t, 0) || allocs_at_t)) {
        for (const MemEvent& e : mem_now_) alloc(e.device, e.bytes);
        mem_now_.clear();
      }
      const uint64_t limit = mem_key(t, allocs_at_t ? 1 : 0);
      while (mem_q_.size > 0 && mem_q_.min <= limit) {
        const MemEvent e = mem_q_.pop();
        if (e.is_alloc()) alloc(e.device, e.bytes);
        else mem_[e.device] -= e.bytes;
      }
    };
    auto due = [&](double t, bool wake_up) {  // most events have nothing to apply
      return (mem_q_.size > 0 && mem_q_.min <= mem_key(t, 1)) ||
             (!mem_now_.empty() && (wake_up || mem_now_.front().key < mem_key(t, 0)));
    };
    auto free_output = [&](int32_t q, int32_t d, double t) {
      const int64_t bytes = om_[q].output;
      if (bytes <= 0) return;
      if (om_[q].hold > t) mem_later(om_[q].hold, 0, d, bytes);
      else mem_[d] -= bytes;
    };
    if constexpr (kMemory) {
      std::fill(mem_.begin(), mem_.end(), 0);
      for (int32_t i = 0; i < n_; ++i) mem_[dev_[i]] += param_mem_[i];
      peak_ = mem_;
      mem_q_.clear();
      mem_now_.clear();
    }

    double makespan = 0;
    for (;;) {
      const auto [slot, d] = next_event();  // the least (time, kind, device)
      const double t = key_time(slot);
      if (t == kInf) break;
      if constexpr (kMemory) {
        if (due(t, slot & 1)) flush(t, slot & 1);
        now = t;
      }
      if (slot & 1) {
        const int32_t p = pop(d);
        if (start_s) start_s[op_of_[p]] = t;
        running_[d] = p;
        next_key_[d] = event_key(t + dur_[p], kEnd);
        __builtin_prefetch(&word_[out_begin_[p]]);  // what this op's end reads
        if constexpr (kMemory) {
          alloc(d, om_[p].output + om_[p].temp);
          // Its end reads its inputs' records: fetch them meanwhile.
          for (int32_t k = in_begin_[p]; k < in_begin_[p + 1]; ++k) {
            const In in = in_[k];
            __builtin_prefetch(in.xfer >= 0 ? static_cast<const void*>(&xfer_[in.xfer]) : &om_[in.src]);
          }
        }
        continue;
      }
      const int32_t p = running_[d];
      makespan = t;
      free_s_[d] = dur_[p] > 0 ? t + gap_[d] : t;  // no gap after an op that took no time
      double hold = t;
      if constexpr (kMemory) {
        mem_[d] -= om_[p].temp;
        // Inputs whose last consumer on this device this was.
        for (int32_t k = in_begin_[p]; k < in_begin_[p + 1]; ++k) {
          const auto [q, x] = in_[k];
          if (q < 0) continue;
          if (x < 0) {
            if (--om_[q].local_left == 0) free_output(q, d, t);
          } else if (--xfer_[x].left == 0) {
            mem_[d] -= xfer_[x].bytes;
          }
        }
      }
      for (int32_t k = out_begin_[p]; k < out_begin_[p + 1]; ++k) {
        const uint64_t w = word_[k];
        const auto q = static_cast<int32_t>(static_cast<uint32_t>(w));
        const auto e = static_cast<int32_t>((w >> 32) & 0xffff);
        if (w & kFirst) {  // p's transfer to e, in the order its out-edges first reach the devices
          const size_t pair = static_cast<size_t>(d) * D_ + e;
          const int32_t* rd = read_.data() + pair * hops_;
          const int32_t* wr = write_.data() + pair * hops_;
          double start = t;
          for (int32_t h = 0; h < hops; ++h) start = std::max(start, chan_free_[rd[h]]);
          const double end = start + transfer_s_[k];
          for (int32_t h = 0; h < hops; ++h) chan_free_[wr[h]] = end + busy_after_[wr[h]];
          arrival_s_[e] = end;
          if constexpr (kMemory) {
            const int32_t x = num_xfers++;
            xfer_[x] = Xfer{xfer_count_[k], xfer_bytes_[k]};
            dest_xfer_[e] = x;
            mem_later(start, 1, e, xfer_bytes_[k]);
            hold = std::max(hold, end);
          }
        }
        if constexpr (kMemory)
          if (w & kData) in_[in_slot_[k]].xfer = (w & kRemote) ? dest_xfer_[e] : -1;
        ready_[q] = std::max(ready_[q], (w & kRemote) ? arrival_s_[e] : t);
        if (--pending_[q] == 0) {
          push(e, key(ready_[q], q));
          if constexpr (kMemory) __builtin_prefetch(&om_[q]);
          if (running_[e] == -1) wake(e);
        }
      }
      if constexpr (kMemory) {
        OpMem& m = om_[p];
        m.local_left = m.local;
        m.hold = hold;
        if (m.local == 0) free_output(p, d, t);
      }
      running_[d] = -1;
      wake(d);
    }
    if constexpr (kMemory) flush(kInf, true);
    return makespan;
  }

  // A tournament over the slots' keys, padded to a power of two with +inf: a running minimum over the
  // devices is a chain of dependent loads, and cost this loop a third of its time.
  Least next_event() const {
    switch (P_) {
      case 1: return least_key<1>(next_key_.data());
      case 2: return least_key<2>(next_key_.data());
      case 4: return least_key<4>(next_key_.data());
      case 8: return least_key<8>(next_key_.data());
      default: return least_key<16>(next_key_.data());
    }
  }
  __extension__ typedef unsigned __int128 Key;  // ready time's bits, then the position: one comparison orders the heap
  static constexpr uint64_t kRemote = uint64_t{1} << 48, kFirst = uint64_t{1} << 49, kData = uint64_t{1} << 50;
  static constexpr Key kSentinel = static_cast<Key>(0x7ff0000000000000ULL) << 64;  // +inf
  static Key key(double ready_s, int32_t pos) { return static_cast<Key>(std::bit_cast<uint64_t>(ready_s)) << 64 | static_cast<uint32_t>(pos); }
  static double ready_of(Key k) { return std::bit_cast<double>(static_cast<uint64_t>(k >> 64)); }
  struct Out {
    int32_t dst;  // position
    double bytes;
  };
  struct Xfer {
    int32_t left;   // consumers on the destination that have not ended
    int64_t bytes;  // memory of the received copy
  };

  // Each op's time on its device and its initial state, each device's op count; per out-edge its word;
  // beside the first edge to each remote device, the transfer's duration (latency + its largest tensor
  // over the route's bandwidth). One pass over the ops after their devices. With memory, also each op's
  // count of local consumers and each transfer's consumers and bytes.
  template <bool kMemory>
  void prepare(const int32_t* device_of) {
    for (int32_t i = 0; i < n_; ++i) dev_[i] = device_of[op_of_[i]];
    std::fill(stamp_.begin(), stamp_.end(), -1);
    std::fill(heap_size_.begin(), heap_size_.end(), 0);
    for (int32_t p = 0; p < n_; ++p) {
      const int32_t d = dev_[p];
      dur_[p] = time_[static_cast<size_t>(p) * C_ + time_class_[d]];
      ++heap_size_[d];
      pending_[p] = in_degree_[p];
      ready_[p] = 0;
      int32_t local = 0;
      for (int32_t k = out_begin_[p]; k < out_begin_[p + 1]; ++k) {
        const int32_t q = out_[k].dst, e = dev_[q];
        uint64_t w = static_cast<uint32_t>(q) | static_cast<uint64_t>(e) << 32;
        if (out_[k].bytes > 0) w |= kData;
        if constexpr (kMemory) local += e == d && out_[k].bytes > 0;
        if (e != d && out_[k].bytes > 0) {
          w |= kRemote;
          if (stamp_[e] != p) {
            stamp_[e] = p;
            largest_[e] = out_[k].bytes;
            if constexpr (kMemory) count_[e] = 1;
            w |= kFirst;
          } else {
            largest_[e] = std::max(largest_[e], out_[k].bytes);
            if constexpr (kMemory) ++count_[e];
          }
        }
        word_[k] = w;
      }
      if constexpr (kMemory) om_[p].local = local;
      for (int32_t k = out_begin_[p]; k < out_begin_[p + 1]; ++k)
        if (word_[k] & kFirst) {
          const auto e = static_cast<int32_t>((word_[k] >> 32) & 0xffff);
          const size_t pair = static_cast<size_t>(d) * D_ + e;
          transfer_s_[k] = latency_[pair] + largest_[e] / bandwidth_[pair];
          if constexpr (kMemory) {
            xfer_count_[k] = count_[e];
            xfer_bytes_[k] = static_cast<int64_t>(largest_[e] + 0.5);
          }
        }
    }
  }
  void push(int32_t d, Key k) {
    Key* h = heap_.data() + heap_off_[d];
    int32_t i = heap_size_[d]++;
    for (; i > 0 && k < h[(i - 1) / 2]; i = (i - 1) / 2) h[i] = h[(i - 1) / 2];
    h[i] = k;
  }
  int32_t pop(int32_t d) {  // not empty; leaves the sentinel at the top when it empties
    Key* h = heap_.data() + heap_off_[d];
    const int32_t size = --heap_size_[d];
    const Key top = h[0], last = h[size];
    h[size] = kSentinel;
    int32_t i = 0;
    for (;;) {
      int32_t c = 2 * i + 1;
      if (c >= size) break;
      c += static_cast<int32_t>(c + 1 < size && h[c + 1] < h[c]);
      if (!(h[c] < last)) break;
      h[i] = h[c];
      i = c;
    }
    if (size > 0) h[i] = last;
    return static_cast<int32_t>(static_cast<uint32_t>(top));
  }

  int32_t n_, D_, C_ = 1, P_ = 1, hops_ = 0;
  std::vector<int32_t> op_of_, out_begin_, in_degree_, sources_, read_, write_, time_class_;
  std::vector<Out> out_;
  std::vector<double> time_, latency_, bandwidth_, gap_, busy_after_, chan_free_;
  std::vector<int32_t> dev_, pending_;
  std::vector<double> dur_, ready_, transfer_s_;
  std::vector<uint64_t> word_;
  std::vector<Key> heap_;
  std::vector<int32_t> heap_off_, heap_size_, running_, stamp_, count_;
  std::vector<uint64_t> next_key_;
  std::vector<double> free_s_, arrival_s_, largest_;
  // memory
  struct OpMem {
    int64_t output, temp;   // bytes
    double hold;            // the output's last transfer end
    int32_t local, local_left;  // local data consumers; those that have not ended
  };
  struct In {
    int32_t src;   // the producer's position; -1: a control edge
    int32_t xfer;  // the transfer record that brought it; -1: local
  };
  std::vector<OpMem> om_;
  std::vector<In> in_;
  std::vector<int32_t> in_begin_, in_slot_, xfer_count_, dest_xfer_;
  std::vector<int64_t> param_mem_, xfer_bytes_, mem_, peak_;
  std::vector<Xfer> xfer_;
  sim::detail::MemQueue mem_q_;
  std::vector<sim::detail::MemEvent> mem_now_;
};

}  // namespace placelab::bench
