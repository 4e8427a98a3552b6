// GDP / SGDP: network, PPO step, state and the embedded pre-trained checkpoint (see gdp.h).
// Legend: U = units, D = devices, h = hidden width, p = pair-MLP width, K = rollouts per step,
// B = segments, L = units per segment.
#include "policy/learned/gdp.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/classic/units.h"
#include "policy/placer.h"
#include "policy/rl/pg.h"

namespace placelab::learned {
namespace {

namespace ad = autodiff;
using autodiff::Index;
using autodiff::Tensor;

constexpr const char* kName = "gdp";
constexpr Index kTopologicalPositionColumn = 6;  // of Problem::unit_x

int64_t positive_option(const nlohmann::json& options, std::string_view key, int64_t fallback,
                        int64_t max_value = policy::kMaxCountOption) {
  const int64_t value = policy::option_int(kName, options, key, fallback, max_value);
  if (value < 1) throw Error(fmt::format("placer gdp options: \"{}\" is 0, expected at least 1", key));
  return value;
}

std::string string_option(const nlohmann::json& options, std::string_view key, const std::string& fallback,
                          std::initializer_list<std::string_view> known) {
  const auto it = options.find(key);
  if (it == options.end()) return fallback;
  std::string list;
  for (std::string_view k : known) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", k);
  if (!it->is_string() || std::find(known.begin(), known.end(), it->get<std::string>()) == known.end()) {
    throw Error(fmt::format("placer gdp options: \"{}\" is {}, expected one of {}", key, it->dump(), list));
  }
  return it->get<std::string>();
}

bool bool_option(const nlohmann::json& options, std::string_view key, bool fallback) {
  const auto it = options.find(key);
  if (it == options.end()) return fallback;
  if (!it->is_boolean()) {
    throw Error(fmt::format("placer gdp options: \"{}\" is {}, expected true or false", key, it->dump()));
  }
  return it->get<bool>();
}

// [U*D, 1] pair scores (row u*D + d) -> [U, D]: one gather per device column (D is small).
Tensor pairs_to_matrix(const Tensor& scores, Index units, Index devices) {
  if (devices == 1) return scores;
  std::vector<Tensor> columns;
  columns.reserve(static_cast<size_t>(devices));
  for (Index d = 0; d < devices; ++d) {
    std::vector<int32_t> rows(static_cast<size_t>(units));
    for (Index u = 0; u < units; ++u) rows[static_cast<size_t>(u)] = static_cast<int32_t>(u * devices + d);
    columns.push_back(ad::gather_rows(scores, std::move(rows)));
  }
  return ad::concat_cols(columns);
}

nn::AdamOptions adam_options(const GdpOptions& options) {
  nn::AdamOptions adam;
  adam.lr = options.lr;
  return adam;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------------

GdpOptions gdp_options_from_json(const nlohmann::json& options) {
  if (!options.is_object()) {
    throw Error(fmt::format("placer gdp options: expected a JSON object, got {}", options.dump()));
  }
  policy::check_options(kName, options,
                        {"hidden", "sage_layers", "aggregator", "segment", "attention_layers", "heads", "ff",
                         "head_hidden", "superposition", "rollouts", "ppo_epochs", "clip", "entropy", "value_coef",
                         "lr", "max_grad_norm", "warm_start", "warm_steps"});
  GdpOptions o;
  o.hidden = positive_option(options, "hidden", o.hidden, policy::kMaxWidthOption);
  o.sage_layers = policy::option_int(kName, options, "sage_layers", o.sage_layers);
  o.aggregator = string_option(options, "aggregator", o.aggregator, {"mean", "max_pool"});
  o.segment = positive_option(options, "segment", o.segment);
  o.attention_layers = policy::option_int(kName, options, "attention_layers", o.attention_layers);
  o.heads = positive_option(options, "heads", o.heads, policy::kMaxWidthOption);
  o.ff = positive_option(options, "ff", o.ff, policy::kMaxWidthOption);
  o.head_hidden = positive_option(options, "head_hidden", o.head_hidden, policy::kMaxWidthOption);
  o.superposition = bool_option(options, "superposition", o.superposition);
  o.rollouts = positive_option(options, "rollouts", o.rollouts);
  o.ppo_epochs = positive_option(options, "ppo_epochs", o.ppo_epochs);
  o.clip = policy::option_number(kName, options, "clip", o.clip);
  o.entropy = policy::option_number(kName, options, "entropy", o.entropy);
  o.value_coef = policy::option_number(kName, options, "value_coef", o.value_coef);
  o.lr = policy::option_number(kName, options, "lr", o.lr);
  o.max_grad_norm = policy::option_number(kName, options, "max_grad_norm", o.max_grad_norm);
  o.warm_steps = policy::option_int(kName, options, "warm_steps", o.warm_steps);
  if (o.warm_steps < 0) throw Error("placer gdp options: \"warm_steps\" is negative, expected 0 or more");
  if (auto it = options.find("warm_start"); it != options.end()) {
    if (!it->is_string()) {
      throw Error(fmt::format("placer gdp options: \"warm_start\" is {}, expected a string of comma-separated "
                              "placer names such as \"heft,metis\"", it->dump()));
    }
    o.warm_start = it->get<std::string>();
  }
  const std::vector<std::string> warm_placers = policy::split_placer_names(o.warm_start);
  for (const std::string& name : warm_placers) {
    try {
      policy::make_placer(name);
    } catch (const Error& e) {  // lists the known placers; say which option named it
      throw Error(fmt::format("placer gdp options: \"warm_start\": {}", e.what()));
    }
    if (rl::is_learned_policy(name))
      throw Error(fmt::format("placer gdp options: \"warm_start\" names the learned placer \"{}\"; use classical "
                              "ones such as \"heft,metis\"", name));
  }
  if (o.warm_steps > 0 && warm_placers.empty())
    throw Error("placer gdp options: \"warm_steps\" > 0 needs at least one placer in \"warm_start\"");
  if (o.hidden % o.heads != 0) {
    throw Error(
        fmt::format("placer gdp options: \"hidden\" ({}) must be a multiple of \"heads\" ({})", o.hidden, o.heads));
  }
  return o;
}

nlohmann::json to_json(const GdpOptions& o) {
  return {{"hidden", o.hidden},
          {"sage_layers", o.sage_layers},
          {"aggregator", o.aggregator},
          {"segment", o.segment},
          {"attention_layers", o.attention_layers},
          {"heads", o.heads},
          {"ff", o.ff},
          {"head_hidden", o.head_hidden},
          {"superposition", o.superposition},
          {"rollouts", o.rollouts},
          {"ppo_epochs", o.ppo_epochs},
          {"clip", o.clip},
          {"entropy", o.entropy},
          {"value_coef", o.value_coef},
          {"lr", o.lr},
          {"max_grad_norm", o.max_grad_norm},
          {"warm_start", o.warm_start},
          {"warm_steps", o.warm_steps}};
}

// ------------------------------------------------------------------------------------------------
// Network
// ------------------------------------------------------------------------------------------------

GdpNetwork::GdpNetwork(const GdpOptions& options, std::mt19937_64& rng) : options_(options) {
  const Index h = options.hidden, p = options.head_hidden;
  const auto aggregator = options.aggregator == "max_pool" ? nn::Aggregator::max_pool : nn::Aggregator::mean;
  type_embed_ = nn::Embedding(kOpTypeBuckets, h, rng);
  unit_in_ = nn::Linear(kUnitFeatures, h, rng);
  for (int64_t i = 0; i < options.sage_layers; ++i) sage_.emplace_back(h, h, aggregator, rng);
  for (int64_t i = 0; i < options.attention_layers; ++i) {
    if (options.superposition) film_.emplace_back(h, h, rng);
    blocks_.emplace_back(h, options.heads, options.ff, rng);
  }
  device_embed_ = nn::Embedding(kGdpDeviceSlots, h, rng);
  device_in_ = nn::Linear(kDeviceFeatures, h, rng);
  pair_unit_ = nn::Linear(h, p, rng);
  pair_device_ = nn::Linear(h, p, rng, false);
  pair_features_ = nn::Linear(kPairFeatures, p, rng, false);
  pair_position_ = nn::Linear(2 * kGdpPositionFrequencies, p, rng, false);
  pair_out_ = nn::Linear(p, 1, rng);
  value_ = nn::Mlp({h, h, 1}, rng, nn::Activation::tanh);

  type_embed_.collect("encoder.type", params_);
  unit_in_.collect("encoder.input", params_);
  for (size_t i = 0; i < sage_.size(); ++i) sage_[i].collect(fmt::format("encoder.sage{}", i), params_);
  for (size_t i = 0; i < film_.size(); ++i) film_[i].collect(fmt::format("superposition.film{}", i), params_);
  for (size_t i = 0; i < blocks_.size(); ++i) blocks_[i].collect(fmt::format("placer.block{}", i), params_);
  device_embed_.collect("head.device_id", params_);
  device_in_.collect("head.device_input", params_);
  pair_unit_.collect("head.unit", params_);
  pair_device_.collect("head.device", params_);
  pair_features_.collect("head.pair", params_);
  pair_position_.collect("head.position", params_);
  pair_out_.collect("head.out", params_);
  value_.collect("value", params_);
}

GdpOutput GdpNetwork::forward(const Problem& problem) const {
  const Index units = problem.num_units(), devices = problem.num_devices(), h = options_.hidden;

  // Encoder: op type + unit features, then GraphSAGE over unit neighbourhoods.   [U, h]
  Tensor x = ad::relu(
      ad::add(type_embed_.forward(problem.unit_type()), unit_in_.forward(Tensor::leaf(problem.unit_x()))));
  for (const auto& layer : sage_) x = ad::relu(layer.forward(x, problem.neighbors()));
  const Tensor graph = ad::mean(x, 0);  // [1, h]

  // Placer: units in topological order, B segments of L rows (the last one zero-padded), each
  // attending to itself and to the previous segment's layer input (detached memory).
  const Index rows = std::min<Index>(options_.segment, units), segments = (units + rows - 1) / rows;
  const Index padded = segments * rows;
  Tensor z = padded > units ? ad::concat_rows<float>({x, Tensor::constant(padded - units, h, 0.f)}) : x;
  const autodiff::Mask mask = nn::segment_mask(segments, rows, rows, units, false);
  for (size_t l = 0; l < blocks_.size(); ++l) {
    if (!film_.empty()) z = film_[l].forward(z, graph);
    z = blocks_[l].forward(z, nn::previous_segment_memory(z, segments), segments, &mask);
  }
  if (padded > units) z = ad::slice_rows(z, 0, units);

  // Head: score(u, d) = w^T relu(A z_u + B dev_d + C pair_ud + b) + c over all U*D pairs, plus a bilinear term.
  std::vector<int32_t> slot(static_cast<size_t>(devices)), unit_of_pair, device_of_pair;
  for (Index d = 0; d < devices; ++d) slot[static_cast<size_t>(d)] = static_cast<int32_t>(d % kGdpDeviceSlots);
  unit_of_pair.reserve(static_cast<size_t>(units * devices));
  device_of_pair.reserve(static_cast<size_t>(units * devices));
  for (Index u = 0; u < units; ++u)
    for (Index d = 0; d < devices; ++d) {
      unit_of_pair.push_back(static_cast<int32_t>(u));
      device_of_pair.push_back(static_cast<int32_t>(d));
    }
  const Tensor device =
      ad::relu(ad::add(device_in_.forward(Tensor::leaf(problem.device_x())), device_embed_.forward(slot)));
  // The unit side also sees its topological position through sinusoids, so one parameter can move a
  // contiguous stretch of units to another device (the expert's and the pipeline's kind of split).
  autodiff::MatrixF position(units, 2 * kGdpPositionFrequencies);
  for (Index u = 0; u < units; ++u)
    for (Index k = 0; k < kGdpPositionFrequencies; ++k) {
      const double angle =
          std::numbers::pi * static_cast<double>(k + 1) * problem.unit_x()(u, kTopologicalPositionColumn);
      position(u, 2 * k) = static_cast<float>(std::sin(angle));
      position(u, 2 * k + 1) = static_cast<float>(std::cos(angle));
    }
  const Tensor unit_proj = ad::add(pair_unit_.forward(z), pair_position_.forward(Tensor::leaf(std::move(position))));
  const Tensor device_proj = pair_device_.forward(device);  // [U, p], [D, p]
  const Tensor pre = ad::relu(ad::add(ad::add(ad::gather_rows(unit_proj, std::move(unit_of_pair)),
                                              ad::gather_rows(device_proj, std::move(device_of_pair))),
                                      pair_features_.forward(Tensor::leaf(problem.pair_x()))));
  // Plus a bilinear unit-device term (GDP's per-device output weights, made from device embeddings),
  // which lets units with similar embeddings share a device without the pair MLP learning it.
  const float scale = 1.f / std::sqrt(static_cast<float>(options_.head_hidden));
  const Tensor bilinear = ad::mul_scalar(ad::matmul_nt(unit_proj, device_proj), scale);  // [U, D]
  const Tensor logits = ad::add(bilinear, pairs_to_matrix(pair_out_.forward(pre), units, devices));

  GdpOutput out;
  out.log_probs = ad::log_softmax_rows(logits, &problem.allowed());
  // The value head reads a detached embedding: its squared error is orders of magnitude larger than
  // the policy's gradients early on and would otherwise dominate Adam's scaling of the shared encoder.
  out.value = value_.forward(ad::detach(graph));
  out.graph_embedding = graph;
  return out;
}

// ------------------------------------------------------------------------------------------------
// Learner
// ------------------------------------------------------------------------------------------------

GdpLearner::GdpLearner(const GdpOptions& options, uint64_t seed)
    : options_(options),
      rng_(seed),
      network_(options_, rng_),
      adam_(nn::tensors_of(network_.params()), adam_options(options_)) {}

const std::vector<int32_t>& GdpLearner::warm_target(const rl::Task& task) {
  if (auto it = warm_targets_.find(task.problem); it != warm_targets_.end()) return it->second;
  const Problem& problem = *task.problem;
  const std::vector<std::string> names = policy::split_placer_names(options_.warm_start);
  std::vector<std::vector<int32_t>> candidates;
  for (const std::string& name : names)
    candidates.push_back(policy::make_placer(name)->place(policy::PlaceRequest{*task.simulator}).device_of);
  const rl::Evaluation evaluation = rl::evaluate(task, candidates);
  const size_t best = static_cast<size_t>(
      std::max_element(evaluation.reward.begin(), evaluation.reward.end()) - evaluation.reward.begin());
  std::vector<int32_t> choice(static_cast<size_t>(problem.num_units()));
  for (int32_t u = 0; u < problem.num_units(); ++u) {
    const int32_t d = candidates[best][static_cast<size_t>(problem.units().ops(u)[0])];
    if (!problem.allowed()(u, d)) {
      throw Error(fmt::format("gdp warm start: placer \"{}\" put unit {} on device {}, which it may not use",
                              names[best], u, d));
    }
    choice[static_cast<size_t>(u)] = d;
  }
  return warm_targets_.emplace(task.problem, std::move(choice)).first->second;
}

rl::StepStats GdpLearner::imitation_step(const rl::Task& task) {
  const std::vector<int32_t>& target = warm_target(task);
  const GdpOutput out = network_.forward(*task.problem);
  // Mean negative log-likelihood of the target's unit choices.
  const Tensor loss = rl::reinforce_loss(ad::select_per_row(out.log_probs, target),
                                         std::vector<double>(target.size(), 1.0));
  rl::StepStats stats;
  stats.loss = loss.item();
  stats.entropy = rl::entropy(out.log_probs).item();
  ad::backward(loss);
  nn::clip_grad_norm(adam_.params(), options_.max_grad_norm);
  adam_.step();
  adam_.zero_grad();
  // Logged like rollouts: the policy's greedy placement (before this step's update) and the target.
  const std::vector<std::vector<int32_t>> placements{
      task.problem->expand(rl::argmax_rows(out.log_probs.value(), &task.problem->allowed())),
      task.problem->expand(target)};
  rl::record_rollouts(rl::evaluate(task, placements), placements, stats);
  return stats;
}

rl::StepStats GdpLearner::train_step(const rl::Task& task, int64_t step) {
  if (step < options_.warm_steps) return imitation_step(task);
  const Problem& problem = *task.problem;
  const auto units = static_cast<size_t>(problem.num_units());
  const auto k_rollouts = static_cast<size_t>(options_.rollouts);

  // Sample K placements from the current policy (one thread, the learner's rng), then simulate them.
  GdpOutput out = network_.forward(problem);
  std::vector<std::vector<int32_t>> choices(k_rollouts), placements(k_rollouts);
  std::vector<double> logp_old;
  logp_old.reserve(k_rollouts * units);
  for (size_t k = 0; k < k_rollouts; ++k) {
    rl::Sampled sampled = rl::sample_rows(out.log_probs.value(), &problem.allowed(), rng_);
    logp_old.insert(logp_old.end(), sampled.logp.begin(), sampled.logp.end());
    placements[k] = problem.expand(sampled.choice);
    choices[k] = std::move(sampled.choice);
  }
  const rl::Evaluation evaluation = rl::evaluate(task, placements);

  // Advantages: reward minus the value head's prediction, normalised over the batch; every unit
  // decision of a rollout shares its rollout's advantage (per-unit PPO ratios).
  const double mean_reward = std::accumulate(evaluation.reward.begin(), evaluation.reward.end(), 0.0) /
                             static_cast<double>(k_rollouts);
  const double predicted = out.value.item();
  std::vector<double> centred(k_rollouts);
  for (size_t k = 0; k < k_rollouts; ++k) centred[k] = evaluation.reward[k] - predicted;
  const std::vector<double> rollout_advantage = rl::normalize(centred);
  std::vector<double> advantage;
  advantage.reserve(k_rollouts * units);
  for (size_t k = 0; k < k_rollouts; ++k) advantage.insert(advantage.end(), units, rollout_advantage[k]);

  rl::StepStats stats;
  for (int64_t epoch = 0; epoch < options_.ppo_epochs; ++epoch) {
    if (epoch > 0) out = network_.forward(problem);
    std::vector<Tensor> picked;
    picked.reserve(k_rollouts);
    for (size_t k = 0; k < k_rollouts; ++k) picked.push_back(ad::select_per_row(out.log_probs, choices[k]));
    const Tensor logp_new = picked.size() == 1 ? picked[0] : ad::concat_rows(picked);
    const Tensor entropy = rl::entropy(out.log_probs);
    const Tensor value_error = ad::square(ad::add_scalar(out.value, static_cast<float>(-mean_reward)));
    const Tensor loss = ad::add(ad::sub(rl::ppo_loss(logp_new, logp_old, advantage, options_.clip),
                                        ad::mul_scalar(entropy, static_cast<float>(options_.entropy))),
                                ad::mul_scalar(value_error, static_cast<float>(options_.value_coef)));
    if (epoch == 0) {
      stats.loss = loss.item();
      stats.entropy = entropy.item();
    }
    ad::backward(loss);
    nn::clip_grad_norm(adam_.params(), options_.max_grad_norm);
    adam_.step();
    adam_.zero_grad();
  }

  rl::record_rollouts(evaluation, placements, stats);
  return stats;
}

std::vector<int32_t> GdpLearner::place(const rl::Task& task) {
  const autodiff::NoGradGuard no_grad;
  const GdpOutput out = network_.forward(*task.problem);
  return task.problem->expand(rl::argmax_rows(out.log_probs.value(), &task.problem->allowed()));
}

nlohmann::json GdpLearner::state() const {
  return {{"params", nn::parameters_to_json(network_.params())},
          {"optimizer", rl::optimizer_state(adam_)},
          {"rng", rl::rng_state(rng_)}};
}

void GdpLearner::load_state(const nlohmann::json& state) {
  const io::JsonNode root(state, "gdp learner state");
  root.expect_object();
  root.check_fields({"params", "optimizer", "rng"});
  const std::string rng_text = root.at("rng").as_string();
  std::mt19937_64 rng;
  rl::load_rng_state(rng, rng_text, "gdp learner state: rng");  // validates before anything changes
  // Moments are shaped like the parameters, so they can be checked before any parameter changes.
  nn::Adam adam(nn::tensors_of(network_.params()), adam_options(options_));
  if (root.has("optimizer")) rl::load_optimizer_state(adam, root.at("optimizer").value());
  nn::parameters_from_json(root.at("params").value(), "gdp learner state: params", network_.params());
  adam_ = std::move(adam);
  rng_ = rng;
}

std::unique_ptr<rl::Learner> make_gdp_learner(const nlohmann::json& options, uint64_t seed) {
  return std::make_unique<GdpLearner>(gdp_options_from_json(options), seed);
}

const nlohmann::json& pretrained_gdp_checkpoint() {
  static const nlohmann::json checkpoint = [] {
    const std::string_view text = pretrained_gdp_text();
    if (text.empty()) {
      throw Error("no pre-trained GDP checkpoint was embedded at build time: run bench/pretrain_gdp.sh, which writes "
                  "policy/learned/pretrained/gdp.json, and rebuild");
    }
    return io::parse_json(text, "embedded policy/learned/pretrained/gdp.json");
  }();
  return checkpoint;
}

}  // namespace placelab::learned
