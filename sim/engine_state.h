// The engine's internal state and the helpers its event loops share: ready queues, the next-event scan,
// dated memory changes, a run's state (SimScratch), saved states (SimCheckpoints) and undo records.
// Private to sim/: engine.cpp builds the simulator, event_loop.cpp runs (and resets and finishes) runs,
// incremental.cpp resumes them from saved states.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "sim/engine.h"
#include "sim/sharing.h"

namespace placelab::sim {

namespace detail {

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
    // Each slot by its own 8-byte load: the event just handled wrote its slot with an 8-byte store, and
    // a 16-byte load over a store still in flight cannot take its value from the store buffer, so it
    // waits for the store to reach the cache, once per event (bench/results/sim.md, "Session 27"). The
    // empty asm keeps the compiler from merging the two loads into one.
    for (int i = 0; i < P / 2; ++i) {
      __m128d lo = _mm_load_sd(time_s + 2 * i);
      asm("" : "+x"(lo));
      m[i] = v[i] = _mm_loadh_pd(lo, time_s + 2 * i + 1);
    }
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

inline uint64_t mem_key(double time_s, int32_t is_alloc) {
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
  static int index(uint64_t key, uint64_t last) { return 64 - std::countl_zero(key ^ last); }  // 0 when equal
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

}  // namespace detail

using detail::MemEvent;
using detail::MemQueue;
using detail::ReadyEntry;

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
  // Where a run stops early, before it changes anything at the event (IncrementalSimulator's moves
  // within a limit): before device d starts an op at t when t - busy[d] > stop_wake_s[d] (d's work left,
  // run back to back from t, would end past the limit), and before the end of op p at t when
  // t + stop_tail_s[p] > stop_end_s (the path after p takes at least stop_tail_s[p]). +inf and nullptr:
  // never. Not part of a saved state.
  std::vector<double> stop_wake_s;
  const double* stop_tail_s = nullptr;
  double stop_end_s = detail::kInf;
};

// The next event: the device (leaf) with the least (next_s, kind, index). Up to 16 leaves: a scan
// (scan_next, measured faster for 8 GPUs); more: a tournament tree kept up to date.
class NextEvent {
 public:
  explicit NextEvent(SimDense& s)
      : P_(s.tree_leaves), tree_(s.tree.data()), next_s_(s.next_s.data()), next_kind_(s.next_kind.data()) {}
  int32_t next() const {
    switch (P_) {  // the scan's width is a power of two
      case 1: return 0;
      case 2: return detail::scan_next<2>(next_s_, next_kind_);
      case 4: return detail::scan_next<4>(next_s_, next_kind_);
      case 8: return detail::scan_next<8>(next_s_, next_kind_);
      case 16: return detail::scan_next<16>(next_s_, next_kind_);
      default: return tree_[1];
    }
  }
  /** After leaf d's event changed. */
  void update(int32_t d) const {
    if (P_ <= 16) return;
    for (int32_t i = (P_ + d) >> 1; i >= 1; i >>= 1) tree_[i] = better(tree_[2 * i], tree_[2 * i + 1]);
  }
  /** After every leaf's event changed. */
  void rebuild() const {
    for (int32_t i = P_ - 1; i >= 1; --i) tree_[i] = better(tree_[2 * i], tree_[2 * i + 1]);
    if (P_ == 1) tree_[1] = 0;
  }

 private:
  int32_t better(int32_t a, int32_t b) const {
    const bool a_first = next_s_[a] < next_s_[b] ||
                         (next_s_[a] == next_s_[b] && next_kind_[a] * P_ + a < next_kind_[b] * P_ + b);
    return a_first ? a : b;
  }
  int32_t P_;
  int32_t* tree_;
  const double* next_s_;
  const int32_t* next_kind_;
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
  std::vector<double> work;  // IncrementalSimulator::work_ before the move
};


}  // namespace placelab::sim
