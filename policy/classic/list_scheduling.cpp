// HEFT, m-TOPO, m-ETF and m-SCT on cost matrices; the placers (list_placers.cpp) build the matrices from the graph.
#include "policy/classic/list_scheduling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <queue>

#include <ClpEventHandler.hpp>
#include <ClpSimplex.hpp>
#include <CoinPackedMatrix.hpp>
#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/placer.h"

namespace placelab::policy {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/** Adjacency by edge index, and a topological order (Kahn, smallest task id first). */
struct Dag {
  std::vector<std::vector<int32_t>> in, out;  // edge indices
  std::vector<int32_t> topo;

  explicit Dag(const ScheduleProblem& pb) : in(pb.num_tasks), out(pb.num_tasks) {
    for (int32_t e = 0; e < static_cast<int32_t>(pb.edges.size()); ++e) {
      out[pb.edges[e].src].push_back(e);
      in[pb.edges[e].dst].push_back(e);
    }
    std::vector<int32_t> indeg(pb.num_tasks);
    std::priority_queue<int32_t, std::vector<int32_t>, std::greater<>> ready;
    for (int32_t t = 0; t < pb.num_tasks; ++t)
      if ((indeg[t] = static_cast<int32_t>(in[t].size())) == 0) ready.push(t);
    while (!ready.empty()) {
      int32_t t = ready.top();
      ready.pop();
      topo.push_back(t);
      for (int32_t e : out[t])
        if (--indeg[pb.edges[e].dst] == 0) ready.push(pb.edges[e].dst);
    }
    if (static_cast<int32_t>(topo.size()) != pb.num_tasks) throw Error("schedule problem: the task graph has a cycle");
  }
};

double comm(const ScheduleProblem& pb, int32_t e, int32_t p, int32_t q) {
  if (p == q) return 0;
  return pb.comm_s ? pb.comm_s(e, p, q) : pb.edges[e].mean_comm_s;
}

/**
 * The constraints of a partial schedule: pinned processors (infinite costs), groups that must share a
 * processor, and memory. A group reserves its whole memory when its first task is placed; a task also
 * needs the inputs it receives from other processors.
 */
class State {
 public:
  State(const ScheduleProblem& pb, const Dag& dag) : pb_(pb), dag_(dag), used_(pb.num_procs, 0.0) {
    if (limited()) {
      // The estimate counts every output as live all step; when even the whole cluster cannot hold that,
      // capacities scale up by the same factor so memory is still spread in proportion to capacity.
      double need = 0, capacity = 0;
      for (double b : pb.memory_bytes) need += b;
      for (double b : pb.capacity_bytes) capacity += b;
      scale_ = capacity > 0 ? std::max(1.0, need / capacity) : 1.0;
      for (double b : pb.capacity_bytes) capacity_.push_back(b * scale_);
    }
    if (pb.group.empty()) return;
    const int32_t groups = 1 + *std::max_element(pb.group.begin(), pb.group.end());
    group_proc_.assign(groups, -1);
    group_ok_.assign(static_cast<size_t>(groups) * pb.num_procs, true);
    group_bytes_.assign(groups, 0.0);
    for (int32_t t = 0; t < pb.num_tasks; ++t) {
      const int32_t g = pb.group[t];
      if (g < 0) continue;
      for (int32_t p = 0; p < pb.num_procs; ++p)
        if (pb.cost(t, p) == kInf) group_ok_[static_cast<size_t>(g) * pb.num_procs + p] = false;
      if (limited()) group_bytes_[g] += pb.memory_bytes[t];
    }
  }
  bool limited() const { return !pb_.capacity_bytes.empty(); }
  int32_t group_of(int32_t t) const { return pb_.group.empty() ? -1 : pb_.group[t]; }
  /** Whether `t` may go on `p` given its pin and where its group is. */
  bool can_run(int32_t t, int32_t p) const {
    if (pb_.cost(t, p) == kInf) return false;
    const int32_t g = group_of(t);
    if (g < 0) return true;
    return group_proc_[g] < 0 ? group_ok_[static_cast<size_t>(g) * pb_.num_procs + p] : group_proc_[g] == p;
  }
  /** Throws when `t` can run nowhere (before anything is placed). */
  void check_runnable(int32_t t) const {
    for (int32_t p = 0; p < pb_.num_procs; ++p)
      if (can_run(t, p)) return;
    throw Error(fmt::format("schedule problem: task {} (with its group) may run on no processor", t));
  }
  double need(const std::vector<int32_t>& proc, int32_t t, int32_t p) const {
    return need_if(proc, t, p, first_of_group(t));
  }
  /** need() while `t`'s group is not placed yet (`first`), or once it is (the same for a task without one). */
  double need_if(const std::vector<int32_t>& proc, int32_t t, int32_t p, bool first) const {
    if (!limited()) return 0;
    const int32_t g = group_of(t);
    double bytes = g < 0 ? pb_.memory_bytes[t] : (first ? group_bytes_[g] : 0.0);
    if (!pb_.edge_bytes.empty())
      for (int32_t e : dag_.in[t])
        if (proc[pb_.edges[e].src] != p) bytes += pb_.edge_bytes[e];
    return bytes;
  }
  bool fits(const std::vector<int32_t>& proc, int32_t t, int32_t p) const { return fits_need(p, need(proc, t, p)); }
  bool fits_need(int32_t p, double need) const { return !limited() || used_[p] + need <= capacity_[p]; }
  double room(int32_t p) const { return limited() ? capacity_[p] - used_[p] : kInf; }
  /** Factor (>= 1) the capacities were scaled by: above 1, the estimate could not fit at all. */
  double memory_scale() const { return scale_; }
  /** Whether `t` is the first task of its group to be placed (or has no group). */
  bool first_of_group(int32_t t) const {
    const int32_t g = group_of(t);
    return g < 0 || group_proc_[g] < 0;
  }
  /** Records `t` on `p` in `s` (processor, memory, group). */
  void place(Schedule& s, int32_t t, int32_t p) {
    if (limited()) used_[p] += need(s.proc, t, p);
    s.proc[t] = p;
    if (const int32_t g = group_of(t); g >= 0) group_proc_[g] = p;
  }

 private:
  const ScheduleProblem& pb_;
  const Dag& dag_;
  std::vector<double> used_, capacity_;
  double scale_ = 1;
  std::vector<int32_t> group_proc_;
  std::vector<bool> group_ok_;
  std::vector<double> group_bytes_;
};

/** When `t` could start on `p`: its inputs have arrived. */
double data_ready_s(const ScheduleProblem& pb, const Dag& dag, const Schedule& s, int32_t t, int32_t p) {
  double ready = 0;
  for (int32_t e : dag.in[t]) {
    int32_t src = pb.edges[e].src;
    ready = std::max(ready, s.finish_s[src] + comm(pb, e, s.proc[src], p));
  }
  return ready;
}

Schedule empty_schedule(const ScheduleProblem& pb) {
  if (pb.num_procs <= 0 || static_cast<int32_t>(pb.cost_s.size()) != pb.num_tasks * pb.num_procs)
    throw Error("schedule problem: cost_s must have num_tasks x num_procs entries");
  Schedule s;
  s.proc.assign(pb.num_tasks, -1);
  s.start_s.assign(pb.num_tasks, 0.0);
  s.finish_s.assign(pb.num_tasks, 0.0);
  return s;
}

/** Order by decreasing rank, ties (within rounding) by task id, so equal ranks schedule as in the papers. */
bool rank_before(const std::vector<double>& rank, int32_t a, int32_t b) {
  const double tol = 1e-9 * std::max({1.0, std::abs(rank[a]), std::abs(rank[b])});
  if (std::abs(rank[a] - rank[b]) > tol) return rank[a] > rank[b];
  return a < b;
}

}  // namespace

Timeline::Where Timeline::find(double ready_s, double w) const {
  // The first interval ending after ready_s: the gap before it starts at ready_s, every later one at
  // the end of the interval before it.
  size_t b = static_cast<size_t>(std::lower_bound(blocks_.begin(), blocks_.end(), ready_s, [](const Block& x, double v) {
                                   return x.slots.back().finish_s <= v;
                                 }) - blocks_.begin());
  size_t i = 0;
  if (b < blocks_.size()) {
    const auto& sl = blocks_[b].slots;
    i = static_cast<size_t>(std::lower_bound(sl.begin(), sl.end(), ready_s, [](const Slot& x, double v) {
                              return x.finish_s <= v;
                            }) - sl.begin());
  }
  for (bool first = true; b < blocks_.size(); ++b, i = 0, first = false) {
    const Block& block = blocks_[b];
    // A gap the task fits in (fl(prev + w) <= start) is at least w - eps (start + w) long as computed.
    constexpr double kEps = 4 * std::numeric_limits<double>::epsilon();
    if (!first && block.longest_gap_s < w - kEps * (block.slots.back().start_s + w)) continue;
    for (; i < block.slots.size(); ++i) {
      const double start = std::max(ready_s, previous_finish(b, i));
      if (start + w <= block.slots[i].start_s) return {start, b, i};
    }
  }
  const double last = blocks_.empty() ? 0.0 : blocks_.back().slots.back().finish_s;
  return {std::max(ready_s, last), blocks_.empty() ? 0 : blocks_.size() - 1,
          blocks_.empty() ? 0 : blocks_.back().slots.size()};
}

void Timeline::insert(const Where& at, Slot slot) {
  if (blocks_.empty()) blocks_.emplace_back();
  // The interval that will follow the new one, and the gap before it, which the new one splits: the
  // gaps it leaves are no longer, so a block's longest gap needs recomputing only where that one was it.
  size_t next_block = at.block, next_index = at.index;
  if (next_index == blocks_[next_block].slots.size()) ++next_block, next_index = 0;
  const bool split_longest = next_block < blocks_.size() &&
                             blocks_[next_block].slots[next_index].start_s - previous_finish(next_block, next_index) >=
                                 blocks_[next_block].longest_gap_s;
  auto& sl = blocks_[at.block].slots;
  sl.insert(sl.begin() + static_cast<std::ptrdiff_t>(at.index), slot);
  if (sl.size() > 2 * kBlock) {  // split in halves
    Block second;
    second.slots.assign(sl.begin() + kBlock, sl.end());
    sl.resize(kBlock);
    blocks_.insert(blocks_.begin() + static_cast<std::ptrdiff_t>(at.block) + 1, std::move(second));
    for (size_t b = at.block; b < std::min(blocks_.size(), at.block + 3); ++b) update(b);
    return;
  }
  Block& own = blocks_[at.block];
  own.longest_gap_s = std::max(own.longest_gap_s, slot.start_s - previous_finish(at.block, at.index));
  if (split_longest) update(next_block);  // the same block, or the next one (then its first gap)
}

std::vector<Timeline::Slot> Timeline::slots() const {
  std::vector<Slot> out;
  for (const Block& block : blocks_) out.insert(out.end(), block.slots.begin(), block.slots.end());
  return out;
}

double Timeline::previous_finish(size_t b, size_t i) const {
  if (i > 0) return blocks_[b].slots[i - 1].finish_s;
  return b > 0 ? blocks_[b - 1].slots.back().finish_s : 0.0;
}

void Timeline::update(size_t b) {
  Block& block = blocks_[b];
  block.longest_gap_s = -std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < block.slots.size(); ++i)
    block.longest_gap_s = std::max(block.longest_gap_s, block.slots[i].start_s - previous_finish(b, i));
}

std::vector<double> upward_ranks(const ScheduleProblem& pb) {
  Dag dag(pb);
  std::vector<double> rank(pb.num_tasks, 0.0);
  for (auto it = dag.topo.rbegin(); it != dag.topo.rend(); ++it) {
    const int32_t t = *it;
    double sum = 0;
    int32_t count = 0;
    for (int32_t p = 0; p < pb.num_procs; ++p)
      if (pb.cost(t, p) != kInf) sum += pb.cost(t, p), ++count;
    double tail = 0;
    for (int32_t e : dag.out[t]) tail = std::max(tail, pb.edges[e].mean_comm_s + rank[pb.edges[e].dst]);
    if (count == 0) throw Error(fmt::format("schedule problem: task {} may run on no processor", t));
    rank[t] = sum / count + tail;
  }
  return rank;
}

Schedule heft_schedule(const ScheduleProblem& pb, const ProcChooser& choose) {
  Dag dag(pb);
  Schedule s = empty_schedule(pb);
  State state(pb, dag);
  std::vector<double> rank = upward_ranks(pb);
  // Decreasing upward rank is a topological order when costs are positive; taking the highest-ranked
  // ready task keeps the order topological with zero costs too.
  std::vector<int32_t> indeg(pb.num_tasks);
  for (int32_t t = 0; t < pb.num_tasks; ++t) indeg[t] = static_cast<int32_t>(dag.in[t].size());
  auto cmp = [&](int32_t a, int32_t b) { return rank_before(rank, b, a); };
  std::priority_queue<int32_t, std::vector<int32_t>, decltype(cmp)> ready(cmp);
  for (int32_t t = 0; t < pb.num_tasks; ++t)
    if (indeg[t] == 0) ready.push(t);

  std::vector<Timeline> timelines(pb.num_procs);
  std::vector<ProcOption> options;
  std::vector<Timeline::Where> where;
  while (!ready.empty()) {
    const int32_t t = ready.top();
    ready.pop();
    state.check_runnable(t);
    options.clear();
    where.clear();
    size_t pick = 0;
    for (int32_t p = 0; p < pb.num_procs; ++p) {
      if (!state.can_run(t, p)) continue;
      const double w = pb.cost(t, p);
      // Insertion: the earliest idle gap after the inputs arrive that holds w.
      const Timeline::Where at = timelines[p].find(data_ready_s(pb, dag, s, t, p), w);
      options.push_back({p, at.start_s, at.start_s + w});
      where.push_back(at);
      if (options.back().finish_s < options[pick].finish_s) pick = options.size() - 1;
    }
    if (choose && state.first_of_group(t)) {
      pick = choose(t, options);
      if (pick >= options.size()) throw Error(fmt::format("heft: the chooser picked option {} of {}", pick, options.size()));
    }
    const ProcOption& best = options[pick];
    state.place(s, t, best.proc);
    s.start_s[t] = best.start_s;
    s.finish_s[t] = best.finish_s;
    timelines[best.proc].insert(where[pick], {best.start_s, best.finish_s});
    s.makespan_s = std::max(s.makespan_s, best.finish_s);
    for (int32_t e : dag.out[t])
      if (--indeg[pb.edges[e].dst] == 0) ready.push(pb.edges[e].dst);
  }
  return s;
}

Schedule m_topo_schedule(const ScheduleProblem& pb) {
  Dag dag(pb);
  Schedule s = empty_schedule(pb);
  State state(pb, dag);
  // Each processor's share of the total mean compute is proportional to its speed (1 / the time of
  // everything it may run), so a slow CPU beside GPUs gets a small share; equal processors get 1/procs.
  std::vector<double> mean_s(pb.num_tasks, 0.0), speed(pb.num_procs, 0.0), share(pb.num_procs), load(pb.num_procs, 0.0),
      free_s(pb.num_procs, 0.0);
  double total_s = 0, speed_sum = 0;
  for (int32_t t = 0; t < pb.num_tasks; ++t) {
    state.check_runnable(t);
    int32_t count = 0;
    for (int32_t p = 0; p < pb.num_procs; ++p)
      if (pb.cost(t, p) != kInf) mean_s[t] += pb.cost(t, p), speed[p] += pb.cost(t, p), ++count;
    total_s += (mean_s[t] /= count);
  }
  for (double& v : speed) speed_sum += (v = v > 0 ? 1 / v : 0);
  // A group's first task brings the whole group's compute (its later tasks are forced to follow).
  std::vector<double> group_s(pb.group.empty() ? 0 : 1 + *std::max_element(pb.group.begin(), pb.group.end()), 0.0);
  for (int32_t t = 0; t < pb.num_tasks; ++t)
    if (!pb.group.empty() && pb.group[t] >= 0) group_s[pb.group[t]] += mean_s[t];
  for (int32_t p = 0; p < pb.num_procs; ++p) share[p] = speed_sum > 0 ? total_s * speed[p] / speed_sum : 0;
  int32_t cur = 0;
  for (int32_t t : dag.topo) {
    if (load[cur] >= share[cur] && cur + 1 < pb.num_procs && load[cur] > 0) ++cur;
    int32_t p = -1;
    // The current processor, else the next ones that may run it with room, else any with room.
    for (int32_t k = 0; k < pb.num_procs && p < 0; ++k) {
      int32_t q = (cur + k) % pb.num_procs;
      if (state.can_run(t, q) && state.fits(s.proc, t, q)) p = q;
    }
    if (p < 0) {  // nowhere has room: the least overflow
      s.fits_memory = false;
      for (int32_t q = 0; q < pb.num_procs; ++q)
        if (state.can_run(t, q) && (p < 0 || state.room(q) > state.room(p))) p = q;
    }
    if (p > cur && state.can_run(t, cur)) cur = p;  // the current one is full: fill the next
    if (state.first_of_group(t)) load[p] += pb.group.empty() || pb.group[t] < 0 ? mean_s[t] : group_s[pb.group[t]];
    state.place(s, t, p);
    s.start_s[t] = std::max(free_s[p], data_ready_s(pb, dag, s, t, p));
    s.finish_s[t] = free_s[p] = s.start_s[t] + pb.cost(t, p);
    s.makespan_s = std::max(s.makespan_s, s.finish_s[t]);
  }
  s.memory_scale = state.memory_scale();
  return s;
}

Schedule m_etf_schedule(const ScheduleProblem& pb, const std::vector<int32_t>* favorite_child) {
  Dag dag(pb);
  Schedule s = empty_schedule(pb);
  State state(pb, dag);
  for (int32_t t = 0; t < pb.num_tasks; ++t) state.check_runnable(t);
  std::vector<double> rank = upward_ranks(pb);
  std::vector<int32_t> favorite_parent(pb.num_tasks, -1);
  if (favorite_child)
    for (int32_t t = 0; t < pb.num_tasks; ++t)
      if ((*favorite_child)[t] >= 0) favorite_parent[(*favorite_child)[t]] = t;
  // What stays fixed once a task is ready, per processor, so that the scan below (every ready task on
  // every processor, each step) reads it instead of walking the task's inputs: when its inputs are there,
  // and the memory it needs there while its group is not placed yet, and once it is. One row per ready
  // task, in rows reused once their task is placed.
  const int32_t P = pb.num_procs;
  std::vector<double> inputs_s, need_first, need_later;
  std::vector<int32_t> indeg(pb.num_tasks), ready, row_of(pb.num_tasks, -1), free_rows;
  auto make_ready = [&](int32_t t) {
    ready.push_back(t);
    if (free_rows.empty()) {
      free_rows.push_back(static_cast<int32_t>(inputs_s.size() / P));
      inputs_s.resize(inputs_s.size() + P);
      if (state.limited()) need_first.resize(inputs_s.size()), need_later.resize(inputs_s.size());
    }
    row_of[t] = free_rows.back();
    free_rows.pop_back();
    for (int32_t p = 0; p < P; ++p) {
      const size_t i = static_cast<size_t>(row_of[t]) * P + p;
      inputs_s[i] = data_ready_s(pb, dag, s, t, p);
      if (!state.limited()) continue;
      need_first[i] = state.need_if(s.proc, t, p, true);
      need_later[i] = state.need_if(s.proc, t, p, false);
    }
  };
  for (int32_t t = 0; t < pb.num_tasks; ++t)
    if ((indeg[t] = static_cast<int32_t>(dag.in[t].size())) == 0) make_ready(t);
  std::vector<double> free_s(P, 0.0);
  while (!ready.empty()) {
    // The earliest start among pairs with room; only when no ready task fits anywhere, the least overflow.
    int32_t best_t = -1, best_p = -1;
    double best_start = kInf, best_need = 0;
    bool best_fits = false;
    for (int32_t t : ready) {
      const size_t row = static_cast<size_t>(row_of[t]) * P;
      const std::vector<double>& need = state.first_of_group(t) ? need_first : need_later;
      auto need_on = [&](int32_t p) { return need.empty() ? 0.0 : need[row + p]; };
      const int32_t parent = favorite_parent[t];
      const bool stay = parent >= 0 && state.can_run(t, s.proc[parent]) &&
                        state.fits_need(s.proc[parent], need_on(s.proc[parent]));
      for (int32_t p = 0; p < P; ++p) {
        if (!state.can_run(t, p) || (stay && p != s.proc[parent])) continue;
        const double need_p = need_on(p);
        const bool fits = state.fits_need(p, need_p);
        if (best_fits && !fits) continue;
        const double start = std::max(free_s[p], inputs_s[row + p]);
        bool better = best_t < 0 || (fits && !best_fits);
        if (!better && fits == best_fits) {
          if (!fits) better = state.room(p) - need_p > state.room(best_p) - best_need;
          else if (start != best_start) better = start < best_start;
          else better = t != best_t && rank_before(rank, t, best_t);
        }
        if (better) best_t = t, best_p = p, best_start = start, best_fits = fits, best_need = need_p;
      }
    }
    if (!best_fits) s.fits_memory = false;
    state.place(s, best_t, best_p);
    s.start_s[best_t] = best_start;
    s.finish_s[best_t] = free_s[best_p] = best_start + pb.cost(best_t, best_p);
    s.makespan_s = std::max(s.makespan_s, s.finish_s[best_t]);
    ready.erase(std::find(ready.begin(), ready.end(), best_t));
    free_rows.push_back(row_of[best_t]);
    for (int32_t e : dag.out[best_t])
      if (--indeg[pb.edges[e].dst] == 0) make_ready(pb.edges[e].dst);
  }
  s.memory_scale = state.memory_scale();
  return s;
}

namespace {

// Ends CLP's simplex between iterations once `interrupted` says so (a large LP runs for many seconds),
// and remembers it in `stopped`: the poll answers true only once.
class StopWhenInterrupted final : public ClpEventHandler {
 public:
  StopWhenInterrupted(const std::function<bool()>& interrupted, bool& stopped)
      : interrupted_(&interrupted), stopped_(&stopped) {}
  int event(Event which) override {
    if (which != endOfIteration || !(*interrupted_)()) return -1;
    *stopped_ = true;
    return 0;  // any code >= 0 ends the solve
  }
  ClpEventHandler* clone() const override { return new StopWhenInterrupted(*this); }

 private:
  const std::function<bool()>* interrupted_;
  bool* stopped_;
};

}  // namespace

FavoriteChildren sct_favorite_children(const ScheduleProblem& pb, int64_t max_iterations) {
  Dag dag(pb);
  const int32_t n = pb.num_tasks, m = static_cast<int32_t>(pb.edges.size());
  std::vector<double> mean_s(n, 0.0);
  for (int32_t t = 0; t < n; ++t) {
    int32_t count = 0;
    for (int32_t p = 0; p < pb.num_procs; ++p)
      if (pb.cost(t, p) != kInf) mean_s[t] += pb.cost(t, p), ++count;
    if (count == 0) throw Error(fmt::format("schedule problem: task {} may run on no processor", t));
    mean_s[t] /= count;
  }
  // A lower bound on the simplex iterations: CLP's dual simplex starts from the slack basis and each
  // iteration brings one column into the basis, and at the optimum every start time that must be positive
  // (a task after one that takes time, even with no communication) and the makespan are basic. When that
  // bound passes the limit the LP cannot finish, and the greedy rule below would choose anyway.
  FavoriteChildren out{std::vector<int32_t>(n, -1), false, 0, 0};
  std::vector<double> earliest_s(n, 0.0);
  for (const int32_t t : dag.topo) {
    for (int32_t e : dag.in[t])
      earliest_s[t] = std::max(earliest_s[t], earliest_s[pb.edges[e].src] + mean_s[pb.edges[e].src]);
    out.lp_min_iterations += earliest_s[t] > 0;
  }
  out.lp_min_iterations += std::any_of(mean_s.begin(), mean_s.end(), [](double s) { return s > 0; });
  std::vector<bool> has_parent(n, false);
  auto claim = [&](int32_t e) {
    const auto& edge = pb.edges[e];
    if (out.child[edge.src] >= 0 || has_parent[edge.dst]) return;
    out.child[edge.src] = edge.dst;
    has_parent[edge.dst] = true;
  };
  auto greedy = [&] {  // heaviest communication first: the edges SCT most wants to keep local
    std::vector<int32_t> order(m);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return pb.edges[a].mean_comm_s > pb.edges[b].mean_comm_s; });
    for (int32_t e : order) claim(e);
    return out;
  };
  if (out.lp_min_iterations > max_iterations) return greedy();
  // Columns: start times t_0..t_{n-1}, edge variables x_0..x_{m-1} (1 = the edge communicates), makespan.
  const int32_t col_m = n + m;
  std::vector<int> rows, cols;
  std::vector<double> vals, row_lb, row_ub;
  auto entry = [&](int32_t r, int32_t c, double v) {
    rows.push_back(r);
    cols.push_back(c);
    vals.push_back(v);
  };
  int32_t r = 0;
  for (int32_t e = 0; e < m; ++e, ++r) {  // t_dst >= t_src + p_src + c_e x_e
    entry(r, pb.edges[e].dst, 1);
    entry(r, pb.edges[e].src, -1);
    entry(r, n + e, -pb.edges[e].mean_comm_s);
    row_lb.push_back(mean_s[pb.edges[e].src]);
    row_ub.push_back(COIN_DBL_MAX);
  }
  for (int32_t t = 0; t < n; ++t, ++r) {  // M >= t_t + p_t
    entry(r, col_m, 1);
    entry(r, t, -1);
    row_lb.push_back(mean_s[t]);
    row_ub.push_back(COIN_DBL_MAX);
  }
  // At most one child shares a task's processor without communication, and at most one parent.
  for (const auto* side : {&dag.out, &dag.in})
    for (int32_t t = 0; t < n; ++t) {
      const auto& es = (*side)[t];
      if (es.size() < 2) continue;
      for (int32_t e : es) entry(r, n + e, 1);
      row_lb.push_back(static_cast<double>(es.size()) - 1);
      row_ub.push_back(COIN_DBL_MAX);
      ++r;
    }
  CoinPackedMatrix matrix(false, rows.data(), cols.data(), vals.data(), static_cast<CoinBigIndex>(vals.size()));
  matrix.setDimensions(r, col_m + 1);
  std::vector<double> col_lb(col_m + 1, 0.0), col_ub(col_m + 1, COIN_DBL_MAX), obj(col_m + 1, 0.0);
  for (int32_t e = 0; e < m; ++e) col_ub[n + e] = 1;
  obj[col_m] = 1;
  ClpSimplex lp;
  lp.setLogLevel(0);
  lp.loadProblem(matrix, col_lb.data(), col_ub.data(), obj.data(), row_lb.data(), row_ub.data());
  lp.setMaximumIterations(static_cast<int>(std::min<int64_t>(max_iterations, std::numeric_limits<int>::max())));
  bool stopped = false;
  if (pb.interrupted) {
    const StopWhenInterrupted stop(pb.interrupted, stopped);
    lp.passInEventHandler(&stop);  // CLP keeps a copy
  }
  lp.dual();
  if (stopped) throw Interrupted();
  out.lp_optimal = lp.isProvenOptimal();
  out.lp_iterations = lp.numberIterations();
  if (!out.lp_optimal) return greedy();
  const double* x = lp.primalColumnSolution();
  for (int32_t e = 0; e < m; ++e)
    if (x[n + e] < 0.5) claim(e);
  return out;
}

Schedule m_sct_schedule(const ScheduleProblem& pb, int64_t max_iterations, FavoriteChildren* how) {
  FavoriteChildren fav = sct_favorite_children(pb, max_iterations);
  Schedule s = m_etf_schedule(pb, &fav.child);
  if (how) *how = std::move(fav);
  return s;
}

}  // namespace placelab::policy
