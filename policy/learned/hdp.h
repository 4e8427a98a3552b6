// HDP, the hierarchical device placer (Mirhoseini et al., "A Hierarchical Model for Device Placement",
// ICLR 2018), and the machinery it shares with HSDAG: a policy that samples every unit into a group,
// then a device for every group, trained on the joint log-probability of both choices by REINFORCE
// with an exponential moving baseline (HDP) or PPO's clipped objective.
//
// HDP's grouper is a feed-forward net over unit features giving a softmax over `groups` groups; its
// placer is a sequence-to-sequence model over the non-empty groups (LSTM encoder, attentional LSTM
// decoder) whose output at step t scores every device by its features, so one policy places on
// clusters of any size. Architecture, defaults and differences from the paper: docs/learned.md#hdp.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/autodiff/ops.h"
#include "policy/classic/units.h"
#include "policy/learned/problem.h"
#include "policy/nn/module.h"
#include "policy/nn/optim.h"
#include "policy/rl/pg.h"
#include "policy/rl/trainer.h"

namespace placelab::learned {

/** Items (units or coarse nodes) gathered into groups; empty groups dropped, groups numbered by first item. */
struct Grouping {
  std::vector<int32_t> group_of;  // per item, in [0, groups)
  autodiff::CsrPtr members;       // [groups, items]: the items of each group, ascending
  int32_t groups() const { return members->rows; }
};

/** The grouping of items labelled `label_of` (labels in [0, labels)); non-empty labels in order of first item. */
Grouping make_grouping(std::span<const int32_t> label_of, int32_t labels);

/** Units of each group of coarse nodes: `unit_members` [nodes, U] composed with `node_groups`. */
Grouping compose_grouping(const Grouping& node_groups, const autodiff::Csr& unit_members, int32_t units);

/**
 * [groups, D]: the devices every member unit of a group may run on; a group whose members share no
 * device gets the union (its members off the chosen device then fall back, see unit_devices).
 */
autodiff::Mask group_allowed(const Problem& problem, const Grouping& unit_groups);

/** [groups * D, kPairFeatures], row g * D + d: the mean of Problem::pair_x over the members of g on d. */
autodiff::MatrixF group_pair_x(const Problem& problem, const Grouping& unit_groups);

/** Unit placement: each unit takes its group's device, or its fastest allowed device if it may not run there. */
std::vector<int32_t> unit_devices(const Problem& problem, const Grouping& unit_groups,
                                  std::span<const int32_t> group_device);

/**
 * Devices also get a learned embedding of their index modulo this many slots: identical devices have
 * identical features, and a policy that scores only features could never tell GPU 0 from GPU 1.
 */
inline constexpr int32_t kDeviceSlots = 16;
/** The slot of every device of `problem` (index mod kDeviceSlots). */
std::vector<int32_t> device_slots(const Problem& problem);

/** Columns of positional_encoding(). */
inline constexpr int32_t kPositionFeatures = 6;
/** Column of Problem::unit_x holding the topological position in [0, 1]. */
inline constexpr int32_t kPositionColumn = 6;
/** [n, kPositionFeatures]: sin and cos of pi * 2^s * position for s = 0, 1, 2 (positions in [0, 1]). */
autodiff::MatrixF positional_encoding(std::span<const double> position);

/**
 * [n, groups]: the grouper's topological prior, added to its logits: -strength * ((p_i - c_g) * groups)^2 / 2
 * for item position p_i in [0, 1] and group centre c_g = (g + 0.5) / groups. It starts the grouping as
 * contiguous blocks of the topological order (strength 0: the paper's unbiased grouper).
 */
autodiff::MatrixF block_prior(std::span<const double> position, int32_t groups, double strength);

/** One placement decision of a grouped policy: group labels of its items and a device per group. */
struct GroupedRollout {
  std::vector<int32_t> label_of;      // sampled group label of each item (unit or coarse node)
  Grouping unit_groups;               // the resulting groups of units
  std::vector<int32_t> group_device;  // device of each group
  double logp = 0;                    // log-probability of the whole decision when sampled
};

/** Training settings shared by HDP and HSDAG (the "options" of both, with their own keys added). The
 *  reward (objective, memory penalty) is the task's: rl::Task::reward. */
struct GroupedOptions {
  int32_t groups = 8;            // labels of the grouper (fewer groups learn faster; see docs)
  int32_t hidden = 64;           // width of every hidden layer
  int32_t rollouts = 8;          // K placements sampled and simulated per step
  double lr = 3e-3;              // Adam's learning rate
  double entropy = 1e-2;         // entropy bonus coefficient
  double baseline_decay = 0.9;   // exponential moving baseline
  double max_grad_norm = 1.0;    // global gradient clipping
  std::string algorithm = "reinforce";  // or "ppo"
  int32_t ppo_epochs = 2;        // PPO updates per batch of rollouts
  double ppo_clip = 0.2;
  int32_t place_samples = 16;    // place(): the best of the greedy decision and this many samples
  double block_prior = 1;        // strength of the grouper's topological prior (block_prior())
  // The TensorFlow implementation's exploration and schedule (tensorflow/python/grappler/hierarchical_controller.py):
  double logits_noise = 0;       // Gaussian noise on sampled logits, this many times their RMS, ...
  int32_t stop_noise_step = 750;  // ... until this step
  double tanh_constant = 0;      // > 0: device logits become tanh_constant * tanh(logits) (bounded)
  double lr_decay = 1;           // the learning rate times lr_decay every decay_steps steps ...
  int32_t decay_steps = 50;
  int32_t start_decay_step = 400;  // ... from this step on
  double failing_signal = 0;     // > 0: an out-of-memory rollout costs this many times the reference
};

/**
 * A policy that groups items and places groups, with its optimiser, RNG and baseline. Subclasses
 * give the model (sample and log_probs); this class does the training step, greedy placement and
 * the exact checkpoint state.
 */
class GroupedLearner : public rl::Learner {
 public:
  GroupedLearner(std::string name, const nlohmann::json& options, std::vector<std::string> own_keys, uint64_t seed,
                 GroupedOptions defaults = {});

  std::string name() const override { return name_; }
  nlohmann::json options() const override { return options_json_; }
  rl::StepStats train_step(const rl::Task& task, int64_t step) override;
  /** The best (by the task's reward) of the greedy decision and place_samples sampled ones; the RNG is
   *  restored afterwards, so placing never changes training. */
  std::vector<int32_t> place(const rl::Task& task) override;
  int64_t max_step_simulations(const rl::Task& task, int64_t step) override;
  int64_t max_place_simulations(const rl::Task& task) override;
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

  /** Every parameter with its dotted name. */
  const nn::ParamList<float>& params() const { return params_; }

 protected:
  /** `count` decisions on `problem` under no gradient: sampled from rng_, or the most likely one when greedy. */
  virtual std::vector<GroupedRollout> sample(const Problem& problem, int32_t count, bool greedy) = 0;
  /** On the tape: the log-probability [K, 1] of each rollout under the current parameters and a mean entropy [1, 1]. */
  virtual std::pair<autodiff::Tensor, autodiff::Tensor> log_probs(const Problem& problem,
                                                                  const std::vector<GroupedRollout>& rollouts) = 0;
  /** Call once at the end of the subclass constructor, with every parameter. */
  void set_params(nn::ParamList<float> params);

  /** A categorical draw per row of logits (argmax when greedy), from rng_. */
  rl::Sampled choose(const autodiff::MatrixF& logits, const autodiff::Mask* allowed, bool greedy);
  /** The option `key` of the user's options as an integer in [min_value, max_value], or `fallback`. */
  int64_t option_int(const std::string& key, int64_t fallback, int64_t min_value = 1,
                     int64_t max_value = policy::kMaxCountOption);
  /** The option `key` as a finite number >= min_value, or `fallback`. */
  double option_number(const std::string& key, double fallback, double min_value = 0);

  GroupedOptions opt_;
  std::mt19937_64 init_rng_;  // parameter initialisation (seeded like rng_, used only by constructors)

 private:
  std::string name_;
  nlohmann::json user_options_;
  nlohmann::json options_json_;  // completed with defaults, filled as options are read
  nn::ParamList<float> params_;
  std::unique_ptr<nn::Adam> optimizer_;
  std::mt19937_64 rng_;
  double noise_ = 0;  // logit noise of the rollouts being sampled (training only)
  rl::MovingBaseline baseline_;
};

}  // namespace placelab::learned
