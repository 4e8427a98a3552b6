// GDP, generalized device placement (Zhou et al. 2019, arXiv 1910.01578): a GraphSAGE encoder over the
// graph's units, a segment-recurrent Transformer-XL placer over the units in topological order, and a
// head that scores (unit, device) pairs from the unit's embedding, the device's features and the pair's
// features, so one set of parameters places graphs of any size on clusters of any size. A graph
// embedding modulates the placer's inputs (the superposition network, as FiLM) and feeds a value head.
//
// Two decoders share the network: "schedule" (the default) places the units one by one inside HEFT's
// list schedule, scoring each device from the pair's schedule features (schedule_decoder.h), so each
// choice sees where its neighbours went; "single_shot" (SGDP, IEEE Micro 2020) scores every pair from
// static features in one pass (independent categoricals). Trained by PPO against the simulator, with
// imitation of the best placement found so far; docs/learned.md ("gdp") describes it in full.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/learned/learners.h"
#include "policy/learned/problem.h"
#include "policy/learned/schedule_decoder.h"
#include "policy/nn/attention.h"
#include "policy/nn/graphsage.h"
#include "policy/nn/optim.h"
#include "policy/rl/pg.h"
#include "policy/rl/trainer.h"

namespace placelab::learned {

/** Device-index embedding rows: device d uses row d mod kGdpDeviceSlots (breaks the symmetry of equal devices). */
inline constexpr int kGdpDeviceSlots = 64;
/** Sinusoid frequencies of the topological position fed to the pair scores (sin and cos of pi * k * pos). */
inline constexpr int kGdpPositionFrequencies = 4;

/** Architecture and PPO settings of GDP; every field is a JSON option of the same name. */
struct GdpOptions {
  // Network.
  int64_t hidden = 32;            // width of the encoder and the placer
  int64_t sage_layers = 2;        // GraphSAGE layers
  std::string aggregator = "mean";  // "mean" or "max_pool"
  int64_t segment = 64;           // units per Transformer-XL segment
  int64_t attention_layers = 2;   // Transformer-XL blocks
  int64_t heads = 2;
  int64_t ff = 64;                // feed-forward width of a block
  int64_t head_hidden = 32;       // hidden width of the pair-scoring MLP
  bool superposition = true;      // graph-conditioned FiLM on every placer layer's input
  std::string decoder = "schedule";  // "schedule" (inside HEFT's list schedule) or "single_shot" (SGDP)
  // PPO.
  int64_t rollouts = 12;          // placements sampled per step
  int64_t ppo_epochs = 3;         // gradient steps per batch of rollouts
  double clip = 0.2;
  double entropy = 0.01;          // entropy bonus coefficient (the starting one when entropy_target is set)
  // Nats per decision the rollouts' mean entropy is steered to (0: off, the coefficient stays `entropy`): after
  // each PPO step the coefficient moves by at most 5% towards it, so the policy keeps exploring without the
  // runaway of a fixed large bonus. Self-imitation otherwise drives a trained policy nearly deterministic.
  double entropy_target = 0;
  double value_coef = 0.5;        // weight of the value head's squared error
  double lr = 1e-2;               // Adam (1e-3 barely moves the policy in a few hundred steps)
  double rl_lr = 0;               // Adam's rate after the warm start (0: lr): DOPPLER imitates fast, then learns slowly
  double max_grad_norm = 1.0;     // global gradient-norm clip
  // Self-imitation (schedule decoder): weight of the cross-entropy towards the best placement found so far
  // on the task, added to every PPO step, so the policy stays centred on what search has found.
  double self_imitation = 0.5;
  int64_t place_samples = 16;     // place(): the greedy decode and this many samples, keeping the best
  double place_temperature = 1;   // place()'s samples draw from softmax(logits / this)
  // place(): these classical placers' placements (comma-separated) are candidates too, so that placing never
  // returns worse than they do; "" (default): the policy's decodes alone.
  std::string place_starts;
  // Schedule decoder: this share of a step's rollouts re-place a random window of units (contiguous in
  // topological order, of log-uniform length up to a quarter of them) of the best placement so far and
  // follow it elsewhere (a large-neighbourhood search with the policy as repair); the rest sample anew.
  double window_share = 0.5;
  // Schedule decoder: a step's losses use at most this many decisions of the rollouts (and as many of the
  // self-imitation target), drawn at random; 0: all. The tape's size, hence a step's time, follows it.
  int64_t decisions_per_step = 2048;
  // Warm start (ours, not the paper's): the run's steps 0 .. warm_steps-1 imitate the cheapest placement
  // of the `warm_start` placers on their task under its reward (cross-entropy), then PPO goes on
  // from a policy that already places like them (from a uniform one, 100 PPO steps stay near uniform).
  std::string warm_start = "metis,m_etf,heft";  // comma-separated classical placers
  int64_t warm_steps = 20;                       // 0: none (the paper's training from scratch)
  // Distillation (expert iteration): from this step on, a step only imitates the task's best placement found so
  // far (cross-entropy, no rollouts), so that a policy trained on many tasks places like what search found on
  // each, not like the average of its last PPO updates; 0: never.
  int64_t distill_from = 0;
};

/** Options from JSON (missing keys take defaults); throws placelab::Error naming a bad or unknown key. */
GdpOptions gdp_options_from_json(const nlohmann::json& options);
/** Every option as JSON (round-trips through gdp_options_from_json). */
nlohmann::json to_json(const GdpOptions& options);

/** The network's pass up to the head, on a problem with U units and D devices. */
struct GdpEncoding {
  autodiff::Tensor unit_proj;        // [U, head_hidden] the unit side of the pair scores
  autodiff::Tensor device_proj;      // [D, head_hidden] the device side
  autodiff::Tensor value;            // [1, 1] predicted mean reward of the graph
  autodiff::Tensor graph_embedding;  // [1, hidden] mean of the encoder's unit embeddings
};

/** What one single-shot forward pass gives on a problem with U units and D devices. */
struct GdpOutput {
  autodiff::Tensor log_probs;        // [U, D] log-softmax over allowed devices (disallowed entries 0)
  autodiff::Tensor value;            // [1, 1] predicted mean reward of the graph
  autodiff::Tensor graph_embedding;  // [1, hidden] mean of the encoder's unit embeddings
};

/** The GDP network (parameters only; no optimiser or RNG). */
class GdpNetwork {
 public:
  /** Draws every parameter from `rng`; throws placelab::Error on inconsistent sizes. */
  GdpNetwork(const GdpOptions& options, std::mt19937_64& rng);
  /** Encoder, placer and both sides of the head (records a tape unless under autodiff::NoGradGuard). */
  GdpEncoding encode(const Problem& problem) const;
  /** Single-shot decoder: log-probabilities of every (unit, device) pair from static pair features. */
  GdpOutput forward(const Problem& problem) const;
  /** Schedule decoder: [R, D] log-probabilities of the devices at each decision of `decisions`. */
  autodiff::Tensor decision_log_probs(const GdpEncoding& encoding, const Decisions& decisions) const;
  /** The same logits off the tape, one decision at a time, for a decode (reads `encoding`'s values). */
  DecisionScorer scorer(const GdpEncoding& encoding) const;
  /** Every parameter with its dotted name, in a fixed order. */
  const nn::ParamList<float>& params() const { return params_; }

 private:
  /** [rows, D] logits from each row's unit side [rows, p], the device side and [rows * D, F] pair features. */
  autodiff::Tensor head_logits(const autodiff::Tensor& unit_rows, const autodiff::Tensor& device_proj,
                               const autodiff::MatrixF& pair_features) const;

  GdpOptions options_;
  bool schedule_ = true;  // options_.decoder == "schedule"
  nn::Embedding type_embed_, device_embed_;
  nn::Linear unit_in_;
  std::vector<nn::GraphSage> sage_;
  std::vector<nn::Film> film_;
  std::vector<nn::TransformerXlBlock> blocks_;
  // pair_features_ reads kPairFeatures static columns (single shot) or kDecisionFeatures (schedule), which
  // also have a linear path straight to the logit (pair_skip_), so "earliest finish" is one weight away.
  nn::Linear device_in_, pair_unit_, pair_device_, pair_features_, pair_skip_, pair_position_, pair_out_;
  nn::Mlp value_;
  nn::ParamList<float> params_;
};

/** GDP as an rl::Learner: PPO on K sampled placements per step, greedy argmax placement. */
class GdpLearner : public rl::Learner {
 public:
  GdpLearner(const GdpOptions& options, uint64_t seed);
  std::string name() const override { return "gdp"; }
  nlohmann::json options() const override { return to_json(options_); }
  rl::StepStats train_step(const rl::Task& task, int64_t step) override;
  std::vector<int32_t> place(const rl::Task& task) override;
  int64_t max_step_simulations(const rl::Task& task, int64_t step) override;
  int64_t max_place_simulations(const rl::Task& task) override;
  /** The softmax of the greedy schedule-aware decode's logits at each unit's decision (none single-shot). */
  std::vector<std::vector<float>> device_preferences(const rl::Task& task) override;
  /**
   * {"params": [...], "optimizer": ..., "rng": ..., "best": ..., "entropy_coef": ...}; "optimizer" may be absent
   * on load (fresh moments), "entropy_coef" (saved when steered) too (the option's `entropy`).
   */
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

  const GdpNetwork& network() const { return network_; }

 private:
  // What is a deterministic function of a task, so not part of the checkpointed state.
  struct TaskCache {
    std::vector<int32_t> warm_target;  // unit choices of the cheapest warm_start placement (empty until asked)
    double warm_reward = 0;            // its reward
    std::unique_ptr<ScheduleDecoder> decoder;
    Decisions warm_decisions;          // the decisions that lead to warm_target (schedule decoder)
  };
  // The best placement found so far on a task (self-imitation's target): part of the state.
  struct Best {
    double reward = 0;
    std::vector<int32_t> units;
    Decisions decisions;  // that lead to `units` (recomputed on load)
  };

  TaskCache& cache(const rl::Task& task);
  /** Simulations warm_target(task) runs: the warm_start placers' placements, once per task. */
  int64_t warm_start_runs(const rl::Task& task) const;
  /** One cross-entropy step towards warm_target(task). */
  rl::StepStats imitation_step(const rl::Task& task);
  /** Unit choices of the cheapest warm_start placement on `task` (computed once per task). */
  const std::vector<int32_t>& warm_target(const rl::Task& task);
  /**
   * One Adam step on the cross-entropy of `target` (unit devices; with the schedule decoder, the `decisions`
   * that lead to it); adds loss and entropy to `stats` and returns the policy's greedy placement before it.
   */
  std::vector<int32_t> imitate(const rl::Task& task, const std::vector<int32_t>& target, const Decisions* decisions,
                               rl::StepStats& stats);
  /** One Adam step on `loss` (backward, global gradient-norm clip, step, zero the gradients). */
  void update(const autodiff::Tensor& loss);
  /** Simulates unit placements `units` as a step's rollouts (offered as the best placement) into `stats`. */
  void log_rollouts(const rl::Task& task, const std::vector<std::vector<int32_t>>& units, rl::StepStats& stats);
  /** One cross-entropy step towards the task's best placement so far (distillation). */
  rl::StepStats distill_step(const rl::Task& task);
  /** The decisions that lead to the task's best placement (followed when first needed). */
  const Decisions& best_decisions(const rl::Task& task);
  rl::StepStats single_shot_step(const rl::Task& task);
  rl::StepStats schedule_step(const rl::Task& task);
  /**
   * `count` decodes sampled from `encoding` in parallel, each from its own seed drawn from rng_; decode k
   * follows `follow[k]` where given and not empty (DecodeMode::follow, -1 entries sampled).
   */
  std::vector<Decisions> sample_decodes(const rl::Task& task, const GdpEncoding& encoding, size_t count,
                                        const std::vector<std::vector<int32_t>>& follow = {}, double temperature = 1);
  /** Per rollout, a copy of the best units with a random window of them freed (-1), or none (a full sample). */
  std::vector<std::vector<int32_t>> windows(const std::vector<int32_t>& best, size_t count);
  /** Moves entropy_coef_ towards the coefficient that holds the rollouts' entropy at options_.entropy_target. */
  void steer_entropy(double entropy);
  /** Keeps the best of unit placements `units` (by reward) as the task's self-imitation target when it beats the last. */
  void offer_best(const rl::Task& task, const std::vector<std::vector<int32_t>>& units, const rl::Evaluation& evaluation);

  GdpOptions options_;
  std::mt19937_64 rng_;
  GdpNetwork network_;
  nn::Adam adam_;
  double entropy_coef_;  // the entropy bonus's weight now: options_.entropy, steered when entropy_target > 0
  // Keyed by the task's problem, not its name (two tasks may share a name), and holding it so that its
  // address is never reused.
  std::map<std::shared_ptr<const Problem>, TaskCache> cache_;
  std::map<std::string, Best> best_;  // by task name (names are unique within a run)
};

/** The text of policy/learned/pretrained/gdp.json as embedded at build time (empty when there was none). */
std::string_view pretrained_gdp_text();

}  // namespace placelab::learned
