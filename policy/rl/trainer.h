// Training runs of the learned placers: the Learner interface every policy implements, the tasks it
// trains on, and the loop behind `placelab train` and the Python bindings: progress, a JSONL log of
// the curve, atomic checkpoints and exact resume.
//
// A checkpoint is one JSON file (DIR/checkpoint.json, written to a temporary file and renamed):
// {"format": "placelab.checkpoint", "version": 1, "policy": NAME, "options": {...}, "step": N,
//  "learner": <Learner::state()>, "trainer": {seed, wall time, simulations, per task: name, fingerprint of
//  the graph and cluster, reward options, best cost, step and placement; under MPI "replicas": the other
//  ranks' own state}} (docs/learned.md#checkpoints, docs/distributed.md). Resuming loads it,
// truncates DIR/log.jsonl to the checkpoint's step and continues; the same seed and options then give
// the same curve as an uninterrupted run, step for step.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphs/graph.h"
#include "policy/learned/problem.h"
#include "policy/rl/reward.h"
#include "sim/cluster.h"
#include "sim/engine.h"

namespace placelab::rl {

/** One graph on one cluster to learn on: owns everything it points to. */
struct Task {
  std::string name;  // e.g. "inception_v3:training=1 on v100-nvlink-4"
  std::shared_ptr<const graphs::Graph> graph;
  std::shared_ptr<const sim::Cluster> cluster;
  std::shared_ptr<const sim::Simulator> simulator;
  std::shared_ptr<const learned::Problem> problem;
  /** Normaliser of the reward: the objective's cost of a reference placement (see make_task). */
  double reference_s = 1;
  /** The reward learners optimise on this task (rl::evaluate(task, placements) uses it). */
  RewardOptions reward;
};

/**
 * Builds a task; reference_s is the cost of the best of single_device and round_robin under
 * `reward` (cheap, defined for every graph, and the same for every policy).
 */
Task make_task(std::string name, std::shared_ptr<const graphs::Graph> graph,
               std::shared_ptr<const sim::Cluster> cluster, const RewardOptions& reward = {});
/** A task on an existing simulator (its cost model and options); graph and cluster alias the simulator's. */
Task make_task(std::string name, std::shared_ptr<const sim::Simulator> simulator, const RewardOptions& reward = {});

/** What one training step did (averages over its rollouts). */
struct StepStats {
  double reward_mean = 0;
  double cost_mean_s = 0;                                     // objective cost (step time by default)
  double best_cost_s = std::numeric_limits<double>::infinity();  // best rollout of this step that fits in memory
  std::vector<int32_t> best_placement;                        // op placement of that rollout
  double loss = 0;
  double entropy = 0;
  int64_t rollouts = 0;
  int64_t simulations = 0;  // simulator runs this step (incremental moves count one each)
};

/** A learned policy with its optimiser: what the trainer drives. Not thread-safe; one per run. */
class Learner {
 public:
  virtual ~Learner() = default;
  /** Registry name ("gdp", "placeto", "hdp", "hsdag"). */
  virtual std::string name() const = 0;
  /** Options it was made with, completed with defaults (saved in checkpoints). */
  virtual nlohmann::json options() const = 0;
  /** Samples rollouts on `task`, simulates them (in parallel), and updates the policy once. */
  virtual StepStats train_step(const Task& task, int64_t step) = 0;
  /** The policy's placement of `task` (greedy, or its own search for MDP policies), as an op placement. */
  virtual std::vector<int32_t> place(const Task& task) = 0;
  /**
   * At most how many simulations train_step(task, step) will run next, and place(task): what a placer's
   * simulations budget needs to know before it starts them. The default throws: a policy without them
   * cannot run on such a budget.
   */
  virtual int64_t max_step_simulations(const Task& task, int64_t step);
  virtual int64_t max_place_simulations(const Task& task);
  /**
   * Per unit of `task`'s problem, the policy's probability of each device ([unit][device]) where it decides the
   * unit when placing the task greedily (empty rows where it does not: a unit with one device); empty when the
   * policy has none to give. The learned placers' annealing search may draw its moves' devices from them.
   */
  virtual std::vector<std::vector<float>> device_preferences(const Task& /*task*/) { return {}; }
  /** Everything needed to continue exactly: parameters, optimiser moments, RNG, baselines. */
  virtual nlohmann::json state() const = 0;
  /** Restores state(); throws placelab::Error naming the field on a mismatch (other architecture). */
  virtual void load_state(const nlohmann::json& state) = 0;
};

/** A registered learned policy. */
struct LearnerInfo {
  std::string name;
  std::string summary;
  /** Options as a JSON object (unknown keys are errors); the seed fixes every random choice. */
  std::function<std::unique_ptr<Learner>(const nlohmann::json& options, uint64_t seed)> make;
  /**
   * Optional: defaults that depend on the run, added to options that leave them out: the cluster's device
   * count (0: unknown) and the planned training steps (0: unknown; training runs pass 0, so that a resumed
   * longer run keeps its options), e.g. HDP's groups and noise phase.
   */
  std::function<void(nlohmann::json& options, int32_t devices, int64_t steps)> run_defaults = nullptr;
};

/** Every learned policy, in a stable order. */
const std::vector<LearnerInfo>& learners();
/** Whether `name` is a learned policy (a row of learners()). */
bool is_learned_policy(std::string_view name);
/** The row of learned policy `name`; throws placelab::Error (prefixed with `where`) listing the known names. */
const LearnerInfo& find_learner(std::string_view name, std::string_view where = "");
/** The learner called `name`; throws placelab::Error listing the known names otherwise. */
std::unique_ptr<Learner> make_learner(std::string_view name, const nlohmann::json& options, uint64_t seed);
/**
 * The same for a run on clusters of up to `devices` devices for `steps` training steps (0: unknown): options
 * it leaves out that depend on them take their per-run defaults (HDP: groups min(256, 20 x devices), logit
 * noise for the first 30% of the steps).
 */
std::unique_ptr<Learner> make_learner(std::string_view name, nlohmann::json options, uint64_t seed, int32_t devices,
                                      int64_t steps);

/** One line of the JSONL training log. */
struct LogEntry {
  int64_t step = 0;
  std::string task;
  double reward = 0;          // mean reward of the step
  double cost_s = 0;          // mean cost of the step's rollouts
  double best_cost_s = 0;     // best cost seen so far over all steps (on this step's task)
  double wall_s = 0;          // training wall time so far (summed over resumed runs)
  double loss = 0;
  double entropy = 0;
  int64_t simulations = 0;    // total so far
};
nlohmann::json to_json(const LogEntry& entry);

struct TrainOptions {
  int64_t steps = 100;          // stop after this many steps in total (counting resumed ones) ...
  double minutes = 0;           // ... or after this many minutes of this run when > 0, whichever first
  std::string checkpoint_dir;   // empty: no checkpoints, no log file
  int64_t checkpoint_every = 10;  // also at the end of the run; <= 0: only at the end
  bool resume = false;          // continue from checkpoint_dir's checkpoint (an error if there is none)
  uint64_t seed = 0;            // recorded in the checkpoint (the learner was seeded when made); a resumed run keeps the saved one
  int64_t progress_every = 0;   // a progress line every so many steps (and every 10 s); 0: about 20 per run
  /**
   * Optional: asked before each step with its task and index; false ends the run before that step, with a
   * checkpoint (a placer's budget of simulations or time, policy/budget.h). Under MPI any rank's false ends it.
   */
  std::function<bool(const Task& task, int64_t step)> before_step;
};

/** Outcome of a run: the best placement found per task. */
struct TrainSummary {
  uint64_t seed = 0;  // the run's: a resumed run's is the checkpoint's
  int64_t steps = 0;
  double wall_s = 0;
  std::vector<double> best_cost_s;                 // per task
  std::vector<std::vector<int32_t>> best_placement;  // per task (op placements)
  std::vector<int64_t> best_step;                  // step at which each best was found
};

/**
 * Trains `learner` on `tasks` (step s uses task s mod tasks.size()). Calls `on_step` after every
 * step (return false to stop early) and `progress` with a one-line status now and then. Writes the
 * log and checkpoints when options.checkpoint_dir is set; with options.resume, first restores the
 * learner and the trainer from that checkpoint (which must name the same policy and tasks).
 * Started by mpirun or srun (after comm::init), every rank calls it: each trains on its own task and
 * rollouts, gradients are averaged over the ranks, rank 0 alone writes files and reports (replicas.h).
 */
TrainSummary train(Learner& learner, const std::vector<Task>& tasks, const TrainOptions& options,
                   const std::function<bool(const LogEntry&)>& on_step = {},
                   const std::function<void(std::string_view)>& progress = {});

/** DIR/checkpoint.json for a directory, the path itself otherwise. */
std::string checkpoint_file(const std::string& path);

/** Writes DIR/checkpoint.json atomically for `learner` at `step` with the trainer's `trainer_state`. */
void save_checkpoint(const std::string& dir, const Learner& learner, int64_t step,
                     const nlohmann::json& trainer_state = nlohmann::json::object());
/** Reads a checkpoint file or directory; throws placelab::Error naming the file and what is wrong. */
nlohmann::json read_checkpoint(const std::string& path);
/** Checks a checkpoint document's header and fields (read_checkpoint's checks); `origin` names it in errors. */
void check_checkpoint(const nlohmann::json& doc, const std::string& origin);
/** What a resumed run takes from its checkpoint: the policy and seed always, options and reward unless given. */
struct SavedRun {
  std::string file;        // the checkpoint file, for errors
  std::string policy;
  nlohmann::json options;  // the learner's options
  nlohmann::json reward;   // the first task's reward options (null when the checkpoint has no task)
  uint64_t seed = 0;
};
/** Reads SavedRun from the checkpoint in `dir`; throws placelab::Error naming the file and field. */
SavedRun saved_run(const std::string& dir);
/** Throws placelab::Error naming checkpoint `file` and the fix unless its `saved` policy is `name`. */
void check_resumed_policy(const std::string& file, const std::string& saved, std::string_view name);
/** A learner restored from a checkpoint file or directory (made with the saved name, options and state). */
std::unique_ptr<Learner> load_learner(const std::string& path);
/**
 * A learner restored from checkpoint document `doc` (`origin` names it in errors): made with the saved
 * policy and options, `overrides` replacing saved options (a change of architecture then fails to load,
 * naming the parameter), then given the saved state. With a `seed`, its random stream restarts from
 * that seed instead of the saved one, so that placing from one checkpoint with several seeds gives
 * several samples (a resumed run keeps the saved stream: rl::train restores it).
 */
std::unique_ptr<Learner> learner_from_checkpoint(const nlohmann::json& doc, const std::string& origin,
                                                 const nlohmann::json& overrides = nlohmann::json::object(),
                                                 std::optional<uint64_t> seed = std::nullopt);
/**
 * The learner a new training run starts from: checkpoint `init` (file or directory, e.g. the exported
 * pre-trained GDP policy), whose policy must be `policy`, with `options` over the saved ones and the random
 * stream of `seed`. Training it on other tasks continues that policy's training (its optimiser moments too,
 * where saved); the run's own steps count from 0.
 */
std::unique_ptr<Learner> learner_from_init(const std::string& init, std::string_view policy,
                                           const nlohmann::json& options, uint64_t seed);

}  // namespace placelab::rl
