// The discrete-event engine: given a placement (one device per op), it says when every op and transfer
// happens and reports the facts (step time, busy times, peak memory, bytes moved, critical path). Built
// once per (graph, cluster, cost model, options), it precomputes an op x device time table and flat
// adjacency, so simulate() does no allocation with a caller-owned scratch. Semantics: docs/simulator.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphs/graph.h"
#include "sim/cluster.h"
#include "sim/cost_model.h"

namespace placelab::sim {

/** Knobs of the engine. */
struct SimOptions {
  /** Which ready op a free device starts; unset: the cluster's choice (Cluster::priority), else ready_time. */
  std::optional<Priority> priority;
  /** Use the graph's measured times per device kind when present (they then override the cost model). */
  bool use_measured = true;
  /** Use an edge's measured transfer time (comm_s) instead of latency + bytes / bandwidth when known. */
  bool use_edge_comm = false;
  /**
   * Links share their bandwidth max-min fairly among the transfers crossing them at once, instead of
   * serving them one at a time (FIFO); busy_after_s is ignored then.
   */
  bool share_bandwidth = false;
};

/** What one simulated step did; no rewards or penalties, only facts. */
struct SimResult {
  double step_time_s = 0;        // makespan: end of the last op
  double busy_until_s = 0;       // every device and link free again: the last gap and busy_after included (Placeto's run time)
  double critical_path_s = 0;    // longest path of op times plus idle-network transfer times (a lower bound)
  double total_bytes_moved = 0;  // bytes of every transfer (once per destination device)
  int64_t num_transfers = 0;
  bool oom = false;                       // some device's peak exceeded its memory
  std::vector<double> device_busy_s;      // time running ops (gaps excluded)
  std::vector<double> device_peak_bytes;  // resident + activations + received copies + temp, at its peak
  std::vector<double> device_excess_bytes;  // max(0, peak - capacity)
  std::vector<double> link_busy_s;        // time transfers held the link (busy_after included), both directions summed
  std::vector<double> link_bytes;         // bytes that crossed the link
};

/** The facts of `result` as one JSON object, with device and link names from `cluster`. */
nlohmann::json result_to_json(const SimResult& result, const Cluster& cluster);

/** Receives the schedule as it is decided (trace export, debugging); never called without being passed. */
class SimObserver {
 public:
  virtual ~SimObserver() = default;
  /** `op` runs on `device` from start_s to end_s. */
  virtual void on_op(graphs::OpId op, int32_t device, double start_s, double end_s) = 0;
  /** The output of `op` moves from `src` to `dst` (along the pair's route) from start_s to end_s. */
  virtual void on_transfer(graphs::OpId op, int32_t src, int32_t dst, double start_s, double end_s, double bytes) = 0;
  /**
   * `device` holds `bytes` from time_s on: called after every memory change, in the order the run
   * applies them (the order that decides peaks at one instant), first with each device's resident bytes
   * at time 0. The maximum per device is its peak. Optional.
   */
  virtual void on_memory(int32_t /*device*/, double /*time_s*/, int64_t /*bytes*/) {}
};

/** Per-thread working memory of simulate(); make one with Simulator::make_scratch(). */
struct SimScratch;
struct SimCheckpoints;
struct SimUndo;
struct ScratchPool;
struct StreamResult;  // sim/pipeline.h
struct SimScratchDeleter {
  void operator()(SimScratch* s) const;
};
using SimScratchPtr = std::unique_ptr<SimScratch, SimScratchDeleter>;

class Simulator {
 public:
  /** Precomputes op times on every device; `graph` and `cluster` must outlive the simulator. */
  Simulator(const graphs::Graph& graph, const Cluster& cluster,
            std::shared_ptr<const CostModel> cost_model = default_cost_model(), SimOptions options = {});
  // The simulator keeps references: temporaries would dangle.
  Simulator(graphs::Graph&&, const Cluster&, std::shared_ptr<const CostModel> = {}, SimOptions = {}) = delete;
  Simulator(const graphs::Graph&, Cluster&&, std::shared_ptr<const CostModel> = {}, SimOptions = {}) = delete;
  ~Simulator();
  Simulator(Simulator&&) noexcept;

  const graphs::Graph& graph() const { return *graph_; }
  const Cluster& cluster() const { return *cluster_; }
  /** The options in force: priority is always set (the options', else the cluster's, else ready_time). */
  const SimOptions& options() const { return options_; }
  const std::shared_ptr<const CostModel>& cost_model() const { return cost_model_; }
  int32_t num_ops() const { return n_; }
  int32_t num_devices() const { return devices_; }

  /** Seconds `op` takes on device `d` (the precomputed table). */
  double op_time_s(graphs::OpId op, int32_t d) const { return time_[static_cast<size_t>(op) * devices_ + d]; }
  /** Devices whose times are equal, bit for bit, for every op form a class (numbered by first device). */
  int32_t time_class(int32_t d) const { return time_class_[d]; }
  int32_t num_time_classes() const { return time_classes_; }
  /** Placement-independent priority: mean op time over devices plus the largest rank of a successor. */
  double upward_rank(graphs::OpId op) const { return rank_[op]; }

  /** Throws placelab::Error for a wrong length, a device index out of range, or an op off its pinned kind. */
  void check_placement(std::span<const int32_t> device_of) const;

  /** Simulates one step of `device_of` (one device index per op). */
  SimResult simulate(std::span<const int32_t> device_of, SimObserver* observer = nullptr) const;
  /** The same into `out` with caller-owned scratch: no allocation once `out` has been used. */
  void simulate(std::span<const int32_t> device_of, SimScratch& scratch, SimResult& out,
                SimObserver* observer = nullptr) const;
  /** Working memory for simulate(). */
  SimScratchPtr make_scratch() const;

  /** Simulates every placement, in parallel with oneTBB (per-thread scratch); equals one-by-one exactly. */
  std::vector<SimResult> simulate_batch(std::span<const std::vector<int32_t>> placements) const;
  /**
   * The same into `results` (resized to match): reusing it, and this simulator's per-thread scratch,
   * nothing is allocated per run. Thread-safe, like every const method.
   */
  void simulate_batch(std::span<const std::vector<int32_t>> placements, std::vector<SimResult>& results) const;

  /**
   * Simulations run on this simulator so far: simulate() and each placement of simulate_batch() count one, an
   * IncrementalSimulator its first run and each move that changes a device (resume() continues that run).
   * Placers' budgets and tests count with it; simulations on other threads at the same time count too.
   */
  int64_t runs() const;

 private:
  friend class IncrementalSimulator;
  friend StreamResult simulate_stream(const Simulator&, std::span<const int32_t>, int32_t);
  /**
   * For simulate_stream, on a simulator of `base`'s graph repeated (ops [k * n, (k + 1) * n) are
   * micro-batch k): op times become base's (a cost model that knows ops by name would miss the copies'
   * new names), and ranks exact integers ordering ops by micro-batch, then by base's upward rank, so
   * that under Priority::rank a device starts the earliest micro-batch's ready op (a pipeline's order).
   */
  void take_batches_of(const Simulator& base);
  /** Each op's prio (in info_) and rank class from rank_, after rank_ changes. */
  void order_by_rank();
  /** The op times a run reads, in clock units: `op` on device d at op * time_classes_ + time_class_[d]. */
  const double* run_times() const {
    return !class_time_.empty() ? class_time_.data() : clock_time_.empty() ? time_.data() : clock_time_.data();
  }
  /** The time a run counts for `op` on device d when its memory domain is idle, in clock units. */
  double clock_op_time(graphs::OpId op, int32_t d) const {
    return run_times()[static_cast<size_t>(op) * static_cast<size_t>(time_classes_) + time_class_[d]];
  }
  /** Makes the run count time in `unit_s` (a second: nothing to do). */
  void use_clock_unit(double unit_s);
  /** clock_time_ from time_, after time_ changes. */
  void refresh_clock_time();
  /** time_class_ and class_time_ from the run's op times, after they change. */
  void refresh_time_classes();
  /**
   * One run; with `checkpoints`, saves the state every so many events; `fresh` = false resumes `s`.
   * Returns false when it stopped where s's stop_ fields say (s can be resumed then), true when it ran to the end.
   */
  bool run(std::span<const int32_t> device_of, SimScratch& s, SimResult& out, SimObserver* observer,
           SimCheckpoints* checkpoints = nullptr, bool fresh = true) const;
  /**
   * run() for one mode (sim/event_loop.cpp): kGeneral = false only for the default options without an
   * observer (see general()), whose copy of the loop has the other modes' branches compiled out;
   * kStoppable = false (default mode only) compiles out the checks for stopping early.
   */
  template <bool kGeneral, bool kStoppable>
  bool run_mode(std::span<const int32_t> device_of, SimScratch& s, SimResult& out, SimObserver* observer,
                SimCheckpoints* checkpoints, bool fresh) const;
  /** Counts `n` runs in runs(). */
  void count_runs(int64_t n) const;
  /** Whether a run with this observer needs the general mode of the loop. */
  bool general(const SimObserver* observer) const;
  /** The state a fresh run starts from, but for the ready queues and the general mode's extras. */
  void reset_run(const int32_t* device_of, SimScratch& s) const;
  /** The result facts from the state of a run that has ended. */
  void finish_run(const SimScratch& s, SimResult& out) const;

  const graphs::Graph* graph_;
  const Cluster* cluster_;
  std::unique_ptr<ScratchPool> pool_;  // per-thread scratch of simulate_batch, kept between calls
  std::shared_ptr<const CostModel> cost_model_;
  SimOptions options_;
  int32_t n_ = 0, devices_ = 0, channels_ = 0;

  // Hot per-op and per-edge data packed so that handling one op touches few cache lines.
  struct OpInfo {
    int64_t output_mem, temp_mem;  // whole bytes
    int32_t prio;                  // position by (upward rank descending, op id): the ready queues' tie-break
    int32_t unused;
    int32_t out_begin, out_end, in_begin, in_end;
  };
  struct OutSlot {  // an out-edge of a producer
    int32_t dst;
    int32_t in_pos;  // position of the same edge among dst's in-slots
    double bytes;
  };
  struct InSlot {  // an in-edge of a consumer
    int32_t src;
    int32_t unused;
    double bytes;
  };
  std::vector<double> time_;  // n x devices, seconds
  std::vector<double> rank_;
  std::vector<int32_t> rank_class_;  // distinct upward ranks numbered in decreasing order (Priority::rank)
  // The run's tables below count time in clock units (Cluster::clock_unit_s, seconds by default); with
  // another unit, clock_time_ is time_ in it (else empty: the run reads time_).
  double clock_unit_s_ = 1;
  std::vector<double> clock_time_;
  // Devices with the same time for every op (a DGX's GPUs) form a class, and the run reads op times by
  // class: n x classes entries, so one cache line holds several ops' times, not part of one op's row.
  // class_time_ is empty when no two devices are alike (the run reads the full table, classes = devices).
  std::vector<int32_t> time_class_;
  int32_t time_classes_ = 1;
  std::vector<double> class_time_;
  std::vector<double> fifo_name_key_;  // Priority::fifo: each op's position among the ops' names, sorted
  std::vector<int64_t> param_bytes_;  // memory in whole bytes
  std::vector<int32_t> in_degree_;
  std::vector<OpInfo> info_;
  std::vector<OutSlot> out_;
  std::vector<InSlot> in_;
  std::vector<double> out_comm_s_;  // measured transfer time per out-slot (NaN when unknown)
  // Device pairs: route latency and bottleneck bandwidth; route channels as in Cluster.
  std::vector<double> pair_latency_s_, pair_bandwidth_;
  std::vector<int32_t> route_off_, route_ch_;
  std::vector<double> channel_busy_after_s_, channel_bandwidth_;
  std::vector<double> gap_after_op_s_;
  std::vector<uint8_t> sender_copies_;  // per device: no copy engine (Device::copy_engine false)
  bool any_sender_copies_ = false;
  std::vector<uint8_t> pair_curved_;  // per device pair: a link of its route has an efficiency curve
  bool any_link_curves_ = false;
  // Memory contention (Device::memory_domain): per device, the others of its domain; op x device times at the
  // contended efficiency, in clock units (empty when no device has a peer and contended curves).
  std::vector<std::vector<int32_t>> peers_;
  std::vector<double> contended_time_;
  /** peers_ and contended_time_ from the cluster's memory domains; after use_clock_unit. */
  void build_contention(const graphs::Graph& graph, const Cluster& cluster,
                        const std::vector<int32_t>& measured_of_device);
  /**
   * Bytes per clock unit on pair `pair`'s route for a copy of `bytes` (its links' efficiency curves there;
   * `loaded`: made while the destination runs an op).
   */
  double pair_bandwidth_at(size_t pair, double bytes, bool loaded = false) const;
  std::vector<int32_t> device_kind_, op_pin_;  // kind indices; op_pin_ -1 = any, -2 = kind absent from cluster
  std::vector<std::string> kinds_;
};

/**
 * A placement that changes one op at a time (Placeto's MDP, local search). The state of the last run is
 * saved every ~2n/checkpoints events; after a move the run resumes from the last saved state before the
 * first input of the moved op was produced (nothing earlier depends on where that op is), so the result
 * equals a full simulate() of the new placement bit for bit.
 */
class IncrementalSimulator {
 public:
  /** Simulates `device_of` fully (checked like simulate()); `simulator` must outlive this object. */
  IncrementalSimulator(const Simulator& simulator, std::vector<int32_t> device_of, int32_t checkpoints = 4);
  ~IncrementalSimulator();

  const SimResult& result() const { return result_; }
  std::span<const int32_t> placement() const { return device_of_; }
  /** Moves `op` to `device` and re-simulates; throws placelab::Error for an invalid move. */
  const SimResult& move(graphs::OpId op, int32_t device);
  /**
   * Moves every op of `ops` to `device` (a colocation group, a placer's unit) and re-simulates once,
   * from the last saved state before the first input of any of them was produced: one replay instead of
   * one per op. Throws placelab::Error for an invalid move, and then changes nothing.
   */
  const SimResult& move(std::span<const graphs::OpId> ops, int32_t device);
  /**
   * move(), unless the new step time is sure to exceed `limit_s`: then the replay stops as soon as it
   * knows and returns nullptr. It knows from two lower bounds of the step time, checked as it goes, with a
   * relative margin of 1e-9: a device's work left, run back to back from where the replay is, and an op's
   * end plus the longest path after it (each op at its fastest, transfers free). A search that would
   * reject such a move anyway (annealing's Metropolis rule) skips the rest of the replay. After a stop,
   * only resume() or undo() may follow, and result() is still the last complete result. With
   * limit_s = +inf it is move().
   */
  const SimResult* move_within(std::span<const graphs::OpId> ops, int32_t device, double limit_s);
  /** Whether the last move stopped at its limit (then only resume() or undo() may follow). */
  bool stopped() const { return stopped_; }
  /** Continues the move that move_within() stopped, up to a new limit (higher, or the same stop follows). */
  const SimResult* resume(double limit_s);
  /**
   * Reverts the last move (the last call of move() that returned) without simulating: the state it
   * replaced was kept, so the placement, result and saved states are again exactly those before it.
   * A local search that rejects a move pays one replay for it instead of two. Throws placelab::Error
   * when there is nothing to revert (no move yet, or it was reverted already).
   */
  const SimResult& undo();
  /** Fraction of the events of a full run that the last move replayed (1 for a full run). */
  double last_replayed_fraction() const { return replayed_fraction_; }

 private:
  friend struct SimUndo;
  struct Moved {
    graphs::OpId op;
    int32_t from, to;
  };
  /** Applies `moved` to a saved state from before any of their ops' inputs was produced. */
  void relocate(SimScratch& s, std::span<const Moved> moved) const;
  /** work_ summed afresh from the placement. */
  void sum_work();
  /** tail_, once. */
  void sum_tail();
  /** Where the run stops for a limit on the step time. */
  void set_limit(double limit_s);
  /** Runs the state (fresh or resumed) up to a limit; nullptr when it stopped there. */
  const SimResult* run_to(double limit_s, bool fresh);

  const Simulator* sim_;
  std::vector<int32_t> device_of_;
  std::unique_ptr<SimCheckpoints> checkpoints_;
  SimScratchPtr state_;
  SimResult result_;
  double replayed_fraction_ = 1;
  std::vector<Moved> moved_;      // the ops the current move changes, kept to avoid allocating per move
  std::unique_ptr<SimUndo> undo_;  // what the last move replaced
  std::vector<double> work_;      // per device: its ops' times, in the run's clock units
  std::vector<double> tail_;      // per op: a lower bound of the time from its end to the step's end
  int64_t moves_ = 0;
  bool stopped_ = false;          // the last move stopped at its limit
};

}  // namespace placelab::sim
