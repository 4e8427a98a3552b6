// Data-parallel training (rl::train over the ranks of comm.h): which task each rank trains on, the
// gradient average that keeps the replicas' parameters equal, each step's statistics as every rank sees
// them, and the ranks' own learner state in checkpoints. On a single rank every function is trivial, so
// rl::train runs one code path with or without MPI.
//
// A learner's state() splits in two: "params" and "optimizer" are the replicated part (the same on every
// rank, checked by hash at each checkpoint); every other field (the random stream "rng", baselines,
// per-task bests) is the rank's own, since each rank samples its own rollouts.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/nn/optim.h"
#include "policy/rl/trainer.h"

namespace placelab::rl {

/**
 * The task rank `rank` of `ranks` trains on at `step` (of `tasks`): a step covers `ranks` consecutive
 * tasks, so a single rank trains on task step mod tasks, as without MPI.
 */
size_t task_of(int64_t step, int rank, int ranks, size_t tasks);

/**
 * While alive, every optimizer step on this thread first replaces the gradients by their mean over the
 * ranks (summed in a fixed order; a parameter none of the ranks has a gradient for stays without one).
 * Each rank has clipped its own gradients before (the learners clip, then step). Nothing on one rank.
 */
class GradientAverage {
 public:
  GradientAverage();

 private:
  std::optional<nn::ScopedGradientHook> hook_;
};

/**
 * Makes every rank's learner rank 0's (parameters, optimizer, the rest), then gives each rank r > 0 its
 * own part: `saved[r - 1]` when `saved` (a checkpoint's replicas) holds exactly the other ranks of this
 * run, else rank 0's with a random stream of its own, seeded from (seed, rank, step).
 */
void start_replicas(Learner& learner, uint64_t seed, int64_t step, const nlohmann::json& saved);

/**
 * For a checkpoint at `step`, on every rank: checks that each rank's parameters and optimizer equal rank
 * 0's (throws placelab::Error naming the first rank that differs) and returns, on rank 0, the other ranks'
 * own state, [{"rank", "hash", "own"}, ...] (rank 1 first; "hash" of the replicated part). Null on one rank.
 */
nlohmann::json gather_replicas(const Learner& learner, int64_t step);

/** What one rank's step did. */
struct RankStep {
  size_t task = 0;
  double reward = 0, cost_s = 0, best_cost_s = 0, loss = 0, entropy = 0, wall_s = 0;
  int64_t simulations = 0;
};
/** Every rank's step, in rank order, the same on all ranks. */
std::vector<RankStep> share_step(size_t task, const StepStats& stats, double wall_s);
/** On rank 0: rank `from`'s `mine` (rank `from` sends it; other ranks return it unchanged). */
std::vector<int32_t> placement_to_rank0(int from, std::vector<int32_t> mine);

/**
 * Test-only faults, from PLACELAB_TEST_FAULT: "exit:R:S" ends rank R at the start of step S as if it
 * died (exit code 3, no clean-up); "hang:R:S" makes it sleep for ever there; "unsynced:R" makes rank R
 * keep its own gradients (it still takes part in the sums).
 */
void inject_test_fault(int64_t step);

}  // namespace placelab::rl
