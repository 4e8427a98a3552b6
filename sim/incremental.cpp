// IncrementalSimulator: a run saved every so many events, resumed after a move from the last saved state
// before the moved ops' first input was produced, so the result equals a full run bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "graphs/error.h"
#include "sim/engine.h"
#include "sim/engine_state.h"

namespace placelab::sim {

IncrementalSimulator::IncrementalSimulator(const Simulator& simulator, std::vector<int32_t> device_of,
                                           int32_t checkpoints)
    : sim_(&simulator), device_of_(std::move(device_of)), checkpoints_(std::make_unique<SimCheckpoints>()),
      undo_(std::make_unique<SimUndo>()) {
  sim_->check_placement(device_of_);
  if (checkpoints < 1) throw Error(fmt::format("incremental simulator: {} checkpoints, need at least 1", checkpoints));
  checkpoints_->interval = std::max<int64_t>(1, 2 * static_cast<int64_t>(sim_->num_ops()) / checkpoints);
  checkpoints_->next = checkpoints_->interval;  // the initial state is not saved: a fresh run is cheaper
  state_ = sim_->make_scratch();
  sum_work();
  sum_tail();
  sim_->count_runs(1);
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
  return *move_within(ops, device, std::numeric_limits<double>::infinity());
}

void IncrementalSimulator::set_limit(double limit_s) {
  // Two lower bounds of the step time, checked as the run goes: a device's work left, run back to back
  // from where the run is, and an op's end plus the longest path after it. The margin covers rounding:
  // the run adds times up in another order, and clock units are rounded.
  const double limit = limit_s / sim_->clock_unit_s_ * (1 + 1e-9);
  SimScratch& s = *state_;
  for (int32_t d = 0; d < sim_->num_devices(); ++d) s.stop_wake_s[d] = limit - work_[d];
  s.stop_tail_s = std::isinf(limit) ? nullptr : tail_.data();
  s.stop_end_s = limit;
}

void IncrementalSimulator::sum_work() {
  work_.assign(sim_->num_devices(), 0.0);
  for (graphs::OpId op = 0; op < sim_->num_ops(); ++op) work_[device_of_[op]] += sim_->clock_op_time(op, device_of_[op]);
}

void IncrementalSimulator::sum_tail() {
  // The same for every placement, so that moves need not update it: each op at its fastest device's time
  // and transfers free (any two ops may share a device). Computed for the placement at hand (transfers on
  // an idle network) it stops far earlier on some graphs, but a pass over the graph per move costs more
  // than it saves on large ones (bench/results/sim.md, "Session 30").
  const Simulator& sim = *sim_;
  const int32_t D = sim.num_devices();
  std::vector<double> fastest(sim.num_ops());
  for (graphs::OpId op = 0; op < sim.num_ops(); ++op) {
    fastest[op] = sim.clock_op_time(op, 0);
    for (int32_t d = 1; d < D; ++d) fastest[op] = std::min(fastest[op], sim.clock_op_time(op, d));
  }
  tail_.assign(sim.num_ops(), 0.0);
  const auto topo = sim.graph().topo_order();
  for (auto it = topo.rbegin(); it != topo.rend(); ++it)
    for (graphs::OpId w : sim.graph().successors(*it)) tail_[*it] = std::max(tail_[*it], fastest[w] + tail_[w]);
}

const SimResult* IncrementalSimulator::run_to(double limit_s, bool fresh) {
  set_limit(limit_s);
  stopped_ = !sim_->run(device_of_, *state_, result_, nullptr, checkpoints_.get(), fresh);
  if (!stopped_) return &result_;
  std::swap(result_, undo_->result);  // result() stays the last complete one meanwhile
  return nullptr;
}

const SimResult* IncrementalSimulator::move_within(std::span<const graphs::OpId> ops, int32_t device, double limit_s) {
  const Simulator& sim = *sim_;
  if (stopped_) throw Error("incremental move: the last move stopped at its limit; resume() or undo() it first");
  if (std::isnan(limit_s)) throw Error("incremental move: the limit is NaN (pass +inf for none)");
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
    return &result_;
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
  undo.work = work_;
  // Work per device follows the moves; summed afresh now and then so that rounding cannot build up.
  if (++moves_ % 4096 == 0) {
    sum_work();
  } else {
    for (const Moved& m : moved_) {
      work_[m.from] -= sim.clock_op_time(m.op, m.from);
      work_[m.to] += sim.clock_op_time(m.op, m.to);
    }
  }
  if (undo.saved.size() < cps.count - usable) undo.saved.resize(cps.count - usable);
  for (size_t j = usable; j < cps.count; ++j) std::swap(cps.saved[j], undo.saved[j - usable]);
  if (!undo.state) undo.state = sim.make_scratch();
  std::swap(state_, undo.state);
  std::swap(result_, undo.result);
  sim.count_runs(1);
  if (usable == 0) {  // a source moved, or `first` comes before the first saved state
    cps.count = 0;
    cps.next = cps.interval;
    replayed_fraction_ = 1;
    return run_to(limit_s, true);
  }
  const size_t k = usable - 1;
  cps.count = k + 1;
  // Saved states up to k stay valid for the new placement once the moves are applied to them.
  for (size_t j = 0; j <= k; ++j) relocate(cps.saved[j], moved_);
  SimScratch& s = *state_;
  SimCheckpoints::restore(cps.saved[k], s);
  cps.next = s.events + cps.interval;
  replayed_fraction_ = total_events > 0 ? 1.0 - static_cast<double>(s.events) / static_cast<double>(total_events) : 1;
  return run_to(limit_s, false);
}

const SimResult* IncrementalSimulator::resume(double limit_s) {
  if (!stopped_) throw Error("incremental resume: no move stopped at a limit (resume continues one that move_within() stopped)");
  if (std::isnan(limit_s)) throw Error("incremental resume: the limit is NaN (pass +inf for none)");
  std::swap(result_, undo_->result);
  return run_to(limit_s, false);
}

const SimResult& IncrementalSimulator::undo() {
  SimUndo& undo = *undo_;
  if (!undo.valid) throw Error("incremental undo: nothing to revert (undo reverts the last move, once)");
  undo.valid = false;
  if (stopped_) std::swap(result_, undo.result);  // as a move that ran to the end leaves them
  stopped_ = false;
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
  work_ = undo.work;
  std::swap(state_, undo.state);
  std::swap(result_, undo.result);
  replayed_fraction_ = undo.replayed_fraction;
  return result_;
}

}  // namespace placelab::sim
