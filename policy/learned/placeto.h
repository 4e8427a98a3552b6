// Placeto (Addanki et al., NeurIPS 2019): device placement as an MDP of per-unit moves over the current
// placement. An episode starts from a random placement and visits every unit (colocation class) once,
// in topological order; at each step a graph network embeds the graph with its current placement and
// the policy picks a device for the current unit. The reward of a step is the change in the reward
// (rl::reward) that the move causes, computed by incremental re-simulation, so an episode's return is
// its improvement. Trained by REINFORCE with per-step-index moving-average baselines and Adam; nothing
// in the parameters depends on the graph or the number of devices, so one policy serves a family.
// Architecture, features and differences from the paper: docs/learned.md, section "placeto".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/nn/linear.h"
#include "policy/nn/optim.h"
#include "policy/rl/trainer.h"

namespace placelab::learned {

/** Settings of the Placeto learner (JSON keys are the member names). The reward is the task's (rl::Task::reward). */
struct PlacetoOptions {
  int64_t hidden = 32;          // width of node, device and context embeddings
  int64_t type_dim = 8;         // op-type embedding width
  int64_t rounds = 3;           // message-passing rounds (each one a down pass and an up pass)
  int64_t episodes = 4;         // episodes per training step
  int64_t embed_every = 0;      // recompute the graph embedding every this many moves (0: about 64 times
                                // an episode, every move on graphs of up to 64 movable units)
  double lr = 1e-2;             // Adam learning rate
  double gamma = 0.9;           // discount of the per-step returns
  double baseline_decay = 0.9;  // weight of the old value in the per-step-index moving baselines
  double entropy = 0.05;        // entropy bonus weight (on normalised advantages)
  double grad_clip = 1.0;       // global gradient-norm clip (0: none)
  bool normalize = true;        // normalise the advantages of a step's moves (zero mean, unit deviation)
  std::string initial = "random";  // start of an episode: "random" (the paper), "single" (lowest allowed device)
                                   // or classical placers ("heft,scotch": the best of their placements, refined)
};

/** Reads options (unknown keys and bad values throw placelab::Error naming the key). */
PlacetoOptions placeto_options_from_json(const nlohmann::json& options);
/** The options with every key, as placeto_options_from_json reads them. */
nlohmann::json to_json(const PlacetoOptions& options);

/** What one episode did, step by step. */
struct PlacetoEpisode {
  std::vector<int32_t> initial;     // unit placement at the start
  double initial_reward = 0;        // rl::reward of the initial placement
  double initial_cost_s = 0;
  std::vector<int32_t> units;       // unit moved at step t (units with one allowed device are skipped)
  std::vector<int32_t> devices;     // device chosen at step t
  std::vector<double> rewards;      // r_t = reward after step t - reward before it
  std::vector<double> costs_s;      // objective cost after step t
  std::vector<double> step_times_s; // simulated step time after step t (incremental simulator)
  std::vector<int32_t> final_placement;  // unit placement at the end
  // The best of the initial placement and every step: the cheapest that fits in memory, or, while none
  // fits, the one of highest reward.
  bool best_fits = false;
  double best_reward = 0;
  double best_cost_s = 0;
  std::vector<int32_t> best_placement;   // op placement of the best
  int64_t simulations = 0;          // incremental moves (one per unit moved) plus the initial full run
};

/** The Placeto learner. */
class PlacetoLearner final : public rl::Learner {
 public:
  PlacetoLearner(const PlacetoOptions& options, uint64_t seed);
  ~PlacetoLearner() override;

  std::string name() const override { return "placeto"; }
  nlohmann::json options() const override { return to_json(options_); }
  rl::StepStats train_step(const rl::Task& task, int64_t step) override;
  /** One greedy episode from the seed's random initial placement; the best placement seen in it. */
  std::vector<int32_t> place(const rl::Task& task) override;
  /** Episodes run one simulation, then one per unit moved: at most one per movable unit. */
  int64_t max_step_simulations(const rl::Task& task, int64_t step) override;
  int64_t max_place_simulations(const rl::Task& task) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

  /** A greedy episode (no tape, no update) from `initial_units` (a unit placement). */
  PlacetoEpisode greedy_episode(const rl::Task& task, std::vector<int32_t> initial_units);
  /** An episode sampled from the policy with `rng` (no tape, no update). */
  PlacetoEpisode sample_episode(const rl::Task& task, std::vector<int32_t> initial_units, std::mt19937_64& rng);
  /** The initial unit placement an episode draws from `rng` under the options' "initial". */
  std::vector<int32_t> initial_placement(const rl::Task& task, std::mt19937_64& rng);
  /** All parameters with their dotted names. */
  const nn::ParamList<float>& parameters() const { return params_; }

 private:
  struct Network;
  struct TaskData;
  TaskData& task_data(const rl::Task& task);
  /** At most the simulations of `episodes` episodes on `task`, its classical start included when not made yet. */
  int64_t max_episode_simulations(const rl::Task& task, int64_t episodes);
  /**
   * Runs an episode: samples with `rng` when set, else greedy. With `step_logits`, also returns the moves'
   * logits [T, D] (on the tape when grad mode is on) and their allowed devices in `step_mask`.
   */
  PlacetoEpisode run_episode(const rl::Task& task, std::vector<int32_t> unit_device, std::mt19937_64* rng,
                             autodiff::Tensor* step_logits, autodiff::Mask* step_mask);

  PlacetoOptions options_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  std::unique_ptr<Network> net_;
  nn::ParamList<float> params_;
  std::unique_ptr<nn::Adam> optimizer_;
  /** Moving baseline of the return at each step index, per task name, and how many updates it has had. */
  std::map<std::string, std::vector<double>> baseline_;
  std::map<std::string, std::vector<int64_t>> baseline_count_;
  std::vector<std::shared_ptr<TaskData>> cache_;
};

}  // namespace placelab::learned
