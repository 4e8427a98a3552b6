// List scheduling on plain cost matrices (Topcuoglu et al.'s notation: tasks, processors, computation
// costs w[i][p], communication costs per edge), so the algorithms are exact and testable on the papers'
// worked examples: insertion-based HEFT (Topcuoglu, Hariri and Wu, TPDS 2002) and Baechi's
// memory-constrained m-TOPO, m-ETF and m-SCT (Jeon et al., SoCC 2020).
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

namespace placelab::policy {

/** A task graph on processors; the placers build one from Units, the tests from a paper's table. */
struct ScheduleProblem {
  struct Edge {
    int32_t src = 0, dst = 0;
    double mean_comm_s = 0;  // c-bar: the cost used for ranks and for the LP of m-SCT
  };
  int32_t num_tasks = 0, num_procs = 0;
  std::vector<double> cost_s;  // tasks x procs, row-major; infinity where the task may not run
  std::vector<Edge> edges;     // a DAG over the tasks
  /** Seconds edge `e` takes from processor p to q (called only with p != q); null: mean_comm_s. */
  std::function<double(int32_t e, int32_t p, int32_t q)> comm_s;
  /** Bytes each task holds on its processor, and each processor's capacity; empty: no memory limits. */
  std::vector<double> memory_bytes, capacity_bytes;
  /** Bytes a consumer on another processor receives over edge e (counted on the consumer's processor). */
  std::vector<double> edge_bytes;
  /** Per task, its colocation group: tasks of one group share a processor (-1: none); empty: no groups. */
  std::vector<int32_t> group;
  /** Polled between the SCT LP's iterations: true stops it with policy::Interrupted (null: never). */
  std::function<bool()> interrupted;

  double cost(int32_t t, int32_t p) const { return cost_s[static_cast<size_t>(t) * num_procs + p]; }
};

/** Where and when every task runs. */
struct Schedule {
  std::vector<int32_t> proc;
  std::vector<double> start_s, finish_s;
  double makespan_s = 0;
  bool fits_memory = true;  // false when some task had to go where it overflows (no processor had room)
  /**
   * 1 normally; when the tasks' memory exceeds the processors' total, the factor capacities were scaled
   * by so that memory is spread in proportion to capacity (fits_memory then says nothing of real memory).
   */
  double memory_scale = 1;
};

/** Upward ranks: mean cost over allowed processors + max over successors of (mean comm + their rank). */
std::vector<double> upward_ranks(const ScheduleProblem& problem);

/**
 * One processor's busy intervals for insertion-based HEFT, in start order, in blocks that each know
 * their longest idle gap (before each of their intervals, after the one before it), so that the search
 * for the first gap holding a task skips blocks whose gaps are all too short. Walking every interval
 * after the task's ready time was quadratic where low-ranked tasks (sinks) are ready early and scheduled
 * last, behind everything.
 */
class Timeline {
 public:
  struct Slot {
    double start_s, finish_s;
  };
  struct Where {
    double start_s;
    size_t block, index;  // where the new interval goes
  };
  /**
   * The earliest start of `w` seconds of work at or after ready_s in an idle gap (after the last
   * interval at worst), exactly as a walk over every interval ending after ready_s finds it.
   */
  Where find(double ready_s, double w) const;
  /** Adds the interval `slot` where find() said, with no insert() since (which may move intervals). */
  void insert(const Where& at, Slot slot);
  /** Every interval, in order. */
  std::vector<Slot> slots() const;

 private:
  static constexpr size_t kBlock = 256;  // blocks hold kBlock to 2 kBlock intervals once split
  struct Block {
    std::vector<Slot> slots;  // never empty once made
    double longest_gap_s = -std::numeric_limits<double>::infinity();
  };
  double previous_finish(size_t b, size_t i) const;
  void update(size_t b);

  std::vector<Block> blocks_;
};

/** Where a task could go in HEFT's insertion-based schedule: its start and finish on `proc`. */
struct ProcOption {
  int32_t proc;
  double start_s, finish_s;
};
/**
 * Picks a processor for `task` among `options` (those that may run it, in processor order; never empty)
 * and returns its index there. HEFT's own choice is the earliest finish.
 */
using ProcChooser = std::function<size_t(int32_t task, std::span<const ProcOption> options)>;

/**
 * Insertion-based HEFT: tasks by decreasing upward rank, each on the processor of earliest finish (a task
 * whose group is already placed goes where its group is). With `choose`, it decides instead, for every
 * task that has no group or is the first of its group (the learned placers' schedule-aware decoding).
 */
Schedule heft_schedule(const ScheduleProblem& problem, const ProcChooser& choose = {});

/**
 * Baechi's m-TOPO: tasks in topological order fill one processor after the other, moving on when its
 * memory is full or its share of the total mean compute (proportional to its speed) is reached; a
 * capacity is never exceeded while some processor has room for the task.
 */
Schedule m_topo_schedule(const ScheduleProblem& problem);

/**
 * Baechi's m-ETF: repeatedly starts the (ready task, processor) pair with the earliest start time among
 * processors with memory room, ties to the higher upward rank. With `favorite_child` (one entry per task,
 * -1 for none), m-SCT: a favourite child goes to its parent's processor when it has room.
 */
Schedule m_etf_schedule(const ScheduleProblem& problem, const std::vector<int32_t>* favorite_child = nullptr);

/** Favourite children and how they were found. */
struct FavoriteChildren {
  std::vector<int32_t> child;  // per task, -1 for none
  bool lp_optimal = false;     // false: CLP hit the iteration limit (or was not run) and the greedy rule chose them
  int64_t lp_iterations = 0;   // simplex iterations CLP ran
  /** A lower bound on the iterations the LP needs; above the limit, CLP is not run at all (lp_iterations 0). */
  int64_t lp_min_iterations = 0;
};

/**
 * Favourite children from the LP relaxation of Hanen and Munier's small-communication-time schedule
 * (solved with CLP within `max_iterations` simplex iterations, a limit that keeps results independent
 * of the machine's speed): edge (i, j) with x < 0.5 makes j the favourite child of i. Past the limit,
 * each task's favourite is its successor with the largest communication cost. When the LP provably needs
 * more iterations than the limit (lp_min_iterations), CLP is not run: the same children, without the wait.
 */
FavoriteChildren sct_favorite_children(const ScheduleProblem& problem, int64_t max_iterations = 50000);

/** m-SCT: m-ETF guided by sct_favorite_children (how they were found into `how` when given). */
Schedule m_sct_schedule(const ScheduleProblem& problem, int64_t max_iterations = 50000, FavoriteChildren* how = nullptr);

}  // namespace placelab::policy
