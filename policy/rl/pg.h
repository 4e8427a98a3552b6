// Policy-gradient pieces shared by the learned placers: sampling from masked categorical rows,
// advantages (normalised, or against an exponential moving baseline), the PPO clipped surrogate and
// the REINFORCE loss, and rollout evaluation on the simulator in parallel (simulate_batch).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/autodiff/ops.h"
#include "policy/nn/optim.h"
#include "policy/rl/reward.h"
#include "policy/rl/trainer.h"

namespace placelab::rl {

using autodiff::Mask;
using autodiff::MatrixF;
using autodiff::Tensor;

/** Choices drawn from the rows of a logits matrix, with their log-probabilities. */
struct Sampled {
  std::vector<int32_t> choice;  // one column per row
  std::vector<double> logp;     // log-probability of each choice
};

/** One categorical choice with its log-probability. */
struct Draw {
  int32_t choice;
  double logp;
};
/**
 * One draw from the categorical of `logits` over the entries `keep` allows (keep may be null: all; some
 * entry must be allowed), by inverse CDF on one uniform from `rng`: sample_rows' draw for one row.
 */
Draw sample_row(std::span<const float> logits, const bool* keep, std::mt19937_64& rng);
/** The most likely allowed entry (ties: lowest index) with its log-probability. */
Draw argmax_row(std::span<const float> logits, const bool* keep);

/**
 * One categorical sample per row of `logits` [R, C] (entries where `allowed` is false never drawn;
 * allowed may be null). Uses rl's own inverse-CDF draw, so results are the same on every platform.
 */
Sampled sample_rows(const MatrixF& logits, const Mask* allowed, std::mt19937_64& rng);
/** The most likely allowed column of every row (ties: lowest index). */
std::vector<int32_t> argmax_rows(const MatrixF& logits, const Mask* allowed);

/** (a - mean) / (std + 1e-8); a single value becomes 0. */
std::vector<double> normalize(std::span<const double> a);

/** Exponential moving average baseline for REINFORCE (HDP): advantage = reward - baseline. */
class MovingBaseline {
 public:
  explicit MovingBaseline(double decay = 0.9) : decay_(decay) {}
  /** Advantages of `rewards` against the current baseline, then moves the baseline to their mean. */
  std::vector<double> advantages(std::span<const double> rewards);
  double value() const { return value_; }
  nlohmann::json state() const;
  void load_state(const nlohmann::json& state);

 private:
  double decay_;
  double value_ = 0;
  bool initialised_ = false;
};

/**
 * PPO's clipped surrogate (Schulman et al. 2017), negated to minimise:
 * -mean_i min(r_i A_i, clip(r_i, 1 - clip, 1 + clip) A_i), r_i = exp(logp_new_i - logp_old_i).
 * logp_new is [N, 1] on the tape; the rest are constants.
 */
Tensor ppo_loss(const Tensor& logp_new, std::span<const double> logp_old, std::span<const double> advantages,
                double clip = 0.2);
/** REINFORCE: -mean_i A_i logp_i, logp [N, 1] on the tape. */
Tensor reinforce_loss(const Tensor& logp, std::span<const double> advantages);
/** Sum of the rows of log_softmax(logits) picked by `choice` ([R, C] -> [1, 1]): a rollout's log-probability. */
Tensor log_prob(const Tensor& log_probs, const std::vector<int32_t>& choice);
/** Mean entropy of the rows of a [R, C] log-probability tensor (for the entropy bonus). */
Tensor entropy(const Tensor& log_probs);

/** Rollouts simulated and scored. */
struct Evaluation {
  std::vector<double> reward;
  std::vector<double> cost_s;
  std::vector<bool> oom;
};
/** Simulates op placements in parallel (simulate_batch, oneTBB) and scores each with reward(). */
Evaluation evaluate(const Task& task, std::span<const std::vector<int32_t>> op_placements,
                    const RewardOptions& options);
/** The same under the task's own reward options (task.reward). */
Evaluation evaluate(const Task& task, std::span<const std::vector<int32_t>> op_placements);

/**
 * Fills a step's rollout statistics from its evaluation: reward_mean, cost_mean_s, rollouts,
 * simulations (+= placements), and best_cost_s / best_placement over the rollouts that fit in memory
 * (untouched when none fits). Loss and entropy are the learner's.
 */
void record_rollouts(const Evaluation& evaluation, std::span<const std::vector<int32_t>> op_placements,
                     StepStats& stats);

/** Optimiser moments and step count as JSON (exact float round trip), and back. */
nlohmann::json optimizer_state(const nn::Optimizer& optimizer);
void load_optimizer_state(nn::Optimizer& optimizer, const nlohmann::json& state);
/** std::mt19937_64 state as a string, and back (exact); a bad state is an error naming `where`. */
std::string rng_state(const std::mt19937_64& rng);
void load_rng_state(std::mt19937_64& rng, const std::string& state, std::string_view where);

}  // namespace placelab::rl
