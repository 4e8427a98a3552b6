// GDP, generalized device placement (Zhou et al. 2019, arXiv 1910.01578), in its single-shot form
// (SGDP, IEEE Micro 2020): a GraphSAGE encoder over the graph's units, a segment-recurrent
// Transformer-XL placer over the units in topological order, and a head that scores every
// (unit, device) pair from the unit's embedding, the device's features and the pair's features, so
// one set of parameters places graphs of any size on clusters of any size. Every unit is placed in
// one forward pass (independent categoricals given the attention outputs). A graph embedding
// modulates the placer's inputs (the superposition network, as FiLM) and feeds a value head.
// Trained by PPO against the simulator; docs/learned.md ("gdp") describes it in full.
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
#include "policy/nn/attention.h"
#include "policy/nn/graphsage.h"
#include "policy/nn/optim.h"
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
  // PPO.
  int64_t rollouts = 12;          // placements sampled per step
  int64_t ppo_epochs = 3;         // gradient steps per batch of rollouts
  double clip = 0.2;
  double entropy = 0.01;          // entropy bonus coefficient
  double value_coef = 0.5;        // weight of the value head's squared error
  double lr = 1e-2;               // Adam (1e-3 barely moves the policy in a few hundred steps)
  double max_grad_norm = 1.0;     // global gradient-norm clip
  // Warm start (ours, not the paper's): the run's steps 0 .. warm_steps-1 imitate the cheapest placement
  // of the `warm_start` placers on their task under its reward (cross-entropy), then PPO goes on
  // from a policy that already places like them (from a uniform one, 100 PPO steps stay near uniform).
  std::string warm_start = "metis,m_etf,heft";  // comma-separated classical placers
  int64_t warm_steps = 20;                       // 0: none (the paper's training from scratch)
};

/** Options from JSON (missing keys take defaults); throws placelab::Error naming a bad or unknown key. */
GdpOptions gdp_options_from_json(const nlohmann::json& options);
/** Every option as JSON (round-trips through gdp_options_from_json). */
nlohmann::json to_json(const GdpOptions& options);

/** What one forward pass gives on a problem with U units and D devices. */
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
  /** One pass over the whole problem (records a tape unless under autodiff::NoGradGuard). */
  GdpOutput forward(const Problem& problem) const;
  /** Every parameter with its dotted name, in a fixed order. */
  const nn::ParamList<float>& params() const { return params_; }

 private:
  GdpOptions options_;
  nn::Embedding type_embed_, device_embed_;
  nn::Linear unit_in_;
  std::vector<nn::GraphSage> sage_;
  std::vector<nn::Film> film_;
  std::vector<nn::TransformerXlBlock> blocks_;
  nn::Linear device_in_, pair_unit_, pair_device_, pair_features_, pair_position_, pair_out_;
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
  /** {"params": [...], "optimizer": ..., "rng": ...}; "optimizer" may be absent on load (fresh moments). */
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

  const GdpNetwork& network() const { return network_; }

 private:
  /** One cross-entropy step towards warm_target(task). */
  rl::StepStats imitation_step(const rl::Task& task);
  /** Unit choices of the cheapest warm_start placement on `task` (computed once per task). */
  const std::vector<int32_t>& warm_target(const rl::Task& task);

  GdpOptions options_;
  std::mt19937_64 rng_;
  GdpNetwork network_;
  nn::Adam adam_;
  // Deterministic functions of the task, so not part of the checkpointed state. Keyed by the task's problem,
  // not its name (two tasks may share a name), and holding it so that its address is never reused.
  std::map<std::shared_ptr<const Problem>, std::vector<int32_t>> warm_targets_;
};

/** The text of policy/learned/pretrained/gdp.json as embedded at build time (empty when there was none). */
std::string_view pretrained_gdp_text();

}  // namespace placelab::learned
