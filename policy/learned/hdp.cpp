// HDP (Mirhoseini et al. 2018) and the grouped-policy training shared with HSDAG: groups, group masks
// and features, the REINFORCE / PPO step over the joint log-probability, and the checkpoint state.
// Legend: U = units, G = grouper labels, Gn = non-empty groups of a rollout, D = devices, H = hidden,
// K = rollouts per step, F = group features.
#include "policy/learned/hdp.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <numbers>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/learned/learners.h"
#include "policy/nn/linear.h"
#include "policy/nn/lstm.h"

namespace placelab::learned {

namespace ad = autodiff;
using autodiff::Index;
using autodiff::Tensor;

// ================================================================================================
// Groups
// ================================================================================================

Grouping make_grouping(std::span<const int32_t> label_of, int32_t labels) {
  std::vector<int32_t> renumber(static_cast<size_t>(labels), -1);
  Grouping out;
  out.group_of.resize(label_of.size());
  std::vector<std::vector<int32_t>> lists;
  for (size_t i = 0; i < label_of.size(); ++i) {
    const int32_t label = label_of[i];
    if (label < 0 || label >= labels) throw Error(fmt::format("make_grouping: label {} outside [0, {})", label, labels));
    if (renumber[label] < 0) {
      renumber[label] = static_cast<int32_t>(lists.size());
      lists.emplace_back();
    }
    out.group_of[i] = renumber[label];
    lists[renumber[label]].push_back(static_cast<int32_t>(i));
  }
  out.members = std::make_shared<ad::Csr>(ad::Csr::from_lists(static_cast<int32_t>(label_of.size()), lists));
  return out;
}

Grouping compose_grouping(const Grouping& node_groups, const ad::Csr& unit_members, int32_t units) {
  Grouping out;
  out.group_of.assign(static_cast<size_t>(units), -1);
  std::vector<std::vector<int32_t>> lists(static_cast<size_t>(node_groups.groups()));
  for (int32_t node = 0; node < unit_members.rows; ++node) {
    const int32_t g = node_groups.group_of[node];
    for (int32_t k = unit_members.offsets[node]; k < unit_members.offsets[node + 1]; ++k) {
      out.group_of[unit_members.indices[k]] = g;
      lists[g].push_back(unit_members.indices[k]);
    }
  }
  for (auto& list : lists) std::sort(list.begin(), list.end());
  out.members = std::make_shared<ad::Csr>(ad::Csr::from_lists(units, lists));
  return out;
}

ad::Mask group_allowed(const Problem& problem, const Grouping& unit_groups) {
  const int32_t groups = unit_groups.groups(), devices = problem.num_devices();
  const ad::Csr& m = *unit_groups.members;
  ad::Mask all = ad::Mask::Constant(groups, devices, true), any = ad::Mask::Constant(groups, devices, false);
  for (int32_t g = 0; g < groups; ++g) {
    for (int32_t k = m.offsets[g]; k < m.offsets[g + 1]; ++k) {
      all.row(g) = all.row(g) && problem.allowed().row(m.indices[k]);
      any.row(g) = any.row(g) || problem.allowed().row(m.indices[k]);
    }
    if (!all.row(g).any()) all.row(g) = any.row(g);
  }
  return all;
}

ad::MatrixF group_pair_x(const Problem& problem, const Grouping& unit_groups) {
  const int32_t groups = unit_groups.groups(), devices = problem.num_devices();
  const ad::Csr& m = *unit_groups.members;
  ad::MatrixF out = ad::MatrixF::Zero(static_cast<Index>(groups) * devices, kPairFeatures);
  for (int32_t g = 0; g < groups; ++g) {
    const int32_t count = m.offsets[g + 1] - m.offsets[g];
    for (int32_t k = m.offsets[g]; k < m.offsets[g + 1]; ++k) {
      const int32_t u = m.indices[k];
      out.middleRows(static_cast<Index>(g) * devices, devices) +=
          problem.pair_x().middleRows(static_cast<Index>(u) * devices, devices);
    }
    if (count > 0) out.middleRows(static_cast<Index>(g) * devices, devices) /= static_cast<float>(count);
  }
  return out;
}

std::vector<int32_t> unit_devices(const Problem& problem, const Grouping& unit_groups,
                                  std::span<const int32_t> group_device) {
  const policy::Units& units = problem.units();
  std::vector<int32_t> out(static_cast<size_t>(problem.num_units()));
  for (int32_t u = 0; u < problem.num_units(); ++u) {
    const int32_t d = group_device[unit_groups.group_of[u]];
    // A group of units pinned to different kinds has no common device: the stragglers go to their fastest.
    out[u] = units.allowed(u, d) ? d : units.allowed_devices(u).front();
  }
  return out;
}

std::vector<int32_t> device_slots(const Problem& problem) {
  std::vector<int32_t> out(static_cast<size_t>(problem.num_devices()));
  for (int32_t d = 0; d < problem.num_devices(); ++d) out[d] = d % kDeviceSlots;
  return out;
}

ad::MatrixF positional_encoding(std::span<const double> position) {
  ad::MatrixF out(static_cast<Index>(position.size()), kPositionFeatures);
  for (size_t i = 0; i < position.size(); ++i) {
    for (int32_t s = 0; s < kPositionFeatures / 2; ++s) {
      const double angle = std::numbers::pi * (1 << s) * position[i];
      out(static_cast<Index>(i), 2 * s) = static_cast<float>(std::sin(angle));
      out(static_cast<Index>(i), 2 * s + 1) = static_cast<float>(std::cos(angle));
    }
  }
  return out;
}

ad::MatrixF block_prior(std::span<const double> position, int32_t groups, double strength) {
  ad::MatrixF out(static_cast<Index>(position.size()), groups);
  for (size_t i = 0; i < position.size(); ++i) {
    for (int32_t g = 0; g < groups; ++g) {
      const double offset = (position[i] - (g + 0.5) / groups) * groups;
      out(static_cast<Index>(i), g) = static_cast<float>(-strength * offset * offset / 2);
    }
  }
  return out;
}

// ================================================================================================
// GroupedLearner
// ================================================================================================

namespace {

const std::vector<std::string> kCommonKeys = {
    "groups",     "hidden",     "rollouts",        "lr",           "entropy",  "baseline_decay",  "max_grad_norm",
    "algorithm",  "ppo_epochs", "ppo_clip",        "place_samples", "block_prior", "logits_noise", "stop_noise_step",
    "tanh_constant", "lr_decay", "decay_steps", "start_decay_step", "failing_signal"};

/** std of `a` around its mean (0 for fewer than two values). */
double spread(std::span<const double> a) {
  if (a.size() < 2) return 0;
  double mean = 0, var = 0;
  for (double x : a) mean += x;
  mean /= static_cast<double>(a.size());
  for (double x : a) var += (x - mean) * (x - mean);
  return std::sqrt(var / static_cast<double>(a.size()));
}

}  // namespace

GroupedLearner::GroupedLearner(std::string name, const nlohmann::json& options, std::vector<std::string> own_keys,
                               uint64_t seed, GroupedOptions defaults)
    : opt_(std::move(defaults)), init_rng_(seed), name_(std::move(name)), user_options_(options.is_null() ? nlohmann::json::object() : options),
      options_json_(nlohmann::json::object()), rng_(seed ^ 0x9E3779B97F4A7C15ull) {
  std::vector<std::string> known = kCommonKeys;
  known.insert(known.end(), own_keys.begin(), own_keys.end());
  io::JsonNode(user_options_, fmt::format("placer {} options", name_)).check_fields(known);
  opt_.groups = static_cast<int32_t>(option_int("groups", opt_.groups, 1, policy::kMaxWidthOption));
  opt_.hidden = static_cast<int32_t>(option_int("hidden", opt_.hidden, 1, policy::kMaxWidthOption));
  opt_.rollouts = static_cast<int32_t>(option_int("rollouts", opt_.rollouts));
  opt_.lr = option_number("lr", opt_.lr);
  opt_.entropy = option_number("entropy", opt_.entropy);
  opt_.baseline_decay = option_number("baseline_decay", opt_.baseline_decay);
  if (opt_.baseline_decay >= 1) throw Error(fmt::format("placer {} options: baseline_decay must be below 1", name_));
  opt_.max_grad_norm = option_number("max_grad_norm", opt_.max_grad_norm);
  opt_.ppo_epochs = static_cast<int32_t>(option_int("ppo_epochs", opt_.ppo_epochs));
  opt_.ppo_clip = option_number("ppo_clip", opt_.ppo_clip);
  opt_.place_samples = static_cast<int32_t>(option_int("place_samples", opt_.place_samples, 0));
  opt_.block_prior = option_number("block_prior", opt_.block_prior);
  opt_.logits_noise = option_number("logits_noise", opt_.logits_noise);
  opt_.stop_noise_step = static_cast<int32_t>(option_int("stop_noise_step", opt_.stop_noise_step, 0));
  opt_.tanh_constant = option_number("tanh_constant", opt_.tanh_constant);
  opt_.lr_decay = option_number("lr_decay", opt_.lr_decay);
  if (opt_.lr_decay > 1) throw Error(fmt::format("placer {} options: lr_decay must be at most 1", name_));
  opt_.decay_steps = static_cast<int32_t>(option_int("decay_steps", opt_.decay_steps));
  opt_.start_decay_step = static_cast<int32_t>(option_int("start_decay_step", opt_.start_decay_step, 0));
  opt_.failing_signal = option_number("failing_signal", opt_.failing_signal);
  baseline_ = rl::MovingBaseline(opt_.baseline_decay);
}

int64_t GroupedLearner::option_int(const std::string& key, int64_t fallback, int64_t min_value, int64_t max_value) {
  int64_t value = fallback;
  if (user_options_.contains(key)) {
    const auto& v = user_options_[key];
    if (!v.is_number_integer() || v.get<int64_t>() < min_value || v.get<int64_t>() > max_value) {
      throw Error(fmt::format("placer {} options: {} is {}, must be an integer in [{}, {}]", name_, key, v.dump(),
                              min_value, max_value));
    }
    value = v.get<int64_t>();
  }
  options_json_[key] = value;
  return value;
}

double GroupedLearner::option_number(const std::string& key, double fallback, double min_value) {
  double value = fallback;
  if (user_options_.contains(key)) {
    const auto& v = user_options_[key];
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < min_value) {
      throw Error(fmt::format("placer {} options: {} must be a number >= {}", name_, key, min_value));
    }
    value = v.get<double>();
  }
  options_json_[key] = value;
  return value;
}

void GroupedLearner::set_params(nn::ParamList<float> params) {
  // The algorithm is read here so that subclasses can change its default before.
  if (user_options_.contains("algorithm")) {
    const auto& v = user_options_["algorithm"];
    if (!v.is_string() || (v.get<std::string>() != "reinforce" && v.get<std::string>() != "ppo")) {
      throw Error(fmt::format("placer {} options: algorithm must be \"reinforce\" or \"ppo\"", name_));
    }
    opt_.algorithm = v.get<std::string>();
  }
  options_json_["algorithm"] = opt_.algorithm;
  params_ = std::move(params);
  nn::AdamOptions adam;
  adam.lr = opt_.lr;
  optimizer_ = std::make_unique<nn::Adam>(nn::tensors_of(params_), adam);
}

rl::Sampled GroupedLearner::choose(const ad::MatrixF& logits, const ad::Mask* allowed, bool greedy) {
  if (!greedy && noise_ > 0) {
    // The TensorFlow HDP's exploration: noise of `noise_` times the logits' RMS on what is sampled from.
    const float rms = std::sqrt(logits.squaredNorm() / static_cast<float>(std::max<Index>(1, logits.size())));
    std::normal_distribution<float> normal(0.0f, static_cast<float>(noise_) * rms);
    ad::MatrixF noisy = logits;
    for (Index i = 0; i < noisy.size(); ++i) noisy.data()[i] += normal(rng_);
    return rl::sample_rows(noisy, allowed, rng_);
  }
  if (!greedy) return rl::sample_rows(logits, allowed, rng_);
  rl::Sampled out;
  out.choice = rl::argmax_rows(logits, allowed);
  out.logp.assign(out.choice.size(), 0.0);
  return out;
}

rl::StepStats GroupedLearner::train_step(const rl::Task& task, int64_t step) {
  const Problem& problem = *task.problem;
  noise_ = step < opt_.stop_noise_step ? opt_.logits_noise : 0;
  const std::vector<GroupedRollout> rollouts = sample(problem, opt_.rollouts, false);
  noise_ = 0;
  if (opt_.lr_decay < 1 && step >= opt_.start_decay_step)
    optimizer_->set_lr(opt_.lr * std::pow(opt_.lr_decay, static_cast<double>((step - opt_.start_decay_step) / opt_.decay_steps)));
  std::vector<std::vector<int32_t>> placements;
  placements.reserve(rollouts.size());
  for (const auto& r : rollouts) placements.push_back(problem.expand(unit_devices(problem, r.unit_groups, r.group_device)));
  rl::Evaluation eval = rl::evaluate(task, placements);
  if (opt_.failing_signal > 0) {
    // HDP's failing signal: a placement that does not fit costs a fixed, large time (100 s there).
    const double failing = rl::reward(rl::Score{.cost_s = opt_.failing_signal * task.reference_s}, task.reference_s, task.reward);
    for (size_t i = 0; i < eval.reward.size(); ++i)
      if (eval.oom[i]) eval.reward[i] = failing;
  }

  // Advantages against the moving baseline (HDP), in units of this batch's reward spread so the step size
  // does not depend on the graph; the floor keeps a batch of equal rewards from exploding.
  std::vector<double> advantages = baseline_.advantages(eval.reward);
  const double scale = std::max(spread(eval.reward), 1e-2);
  for (double& a : advantages) a /= scale;
  std::vector<double> logp_old;
  for (const auto& r : rollouts) logp_old.push_back(r.logp);

  rl::StepStats stats;
  const bool ppo = opt_.algorithm == "ppo";
  for (int32_t epoch = 0; epoch < (ppo ? opt_.ppo_epochs : 1); ++epoch) {
    auto [logp, entropy] = log_probs(problem, rollouts);
    const Tensor pg = ppo ? rl::ppo_loss(logp, logp_old, advantages, opt_.ppo_clip) : rl::reinforce_loss(logp, advantages);
    const Tensor loss = ad::sub(pg, ad::mul_scalar(entropy, static_cast<float>(opt_.entropy)));
    if (epoch == 0) {
      stats.loss = loss.item();
      stats.entropy = entropy.item();
    }
    optimizer_->zero_grad();
    ad::backward(loss);
    if (opt_.max_grad_norm > 0) nn::clip_grad_norm(optimizer_->params(), opt_.max_grad_norm);
    optimizer_->step();
  }
  optimizer_->zero_grad();
  rl::record_rollouts(eval, placements, stats);
  return stats;
}

int64_t GroupedLearner::max_step_simulations(const rl::Task& /*task*/, int64_t /*step*/) { return opt_.rollouts; }

int64_t GroupedLearner::max_place_simulations(const rl::Task& /*task*/) {
  return opt_.place_samples > 0 ? 1 + opt_.place_samples : 0;  // one greedy placement alone is not simulated
}

std::vector<int32_t> GroupedLearner::place(const rl::Task& task) {
  const Problem& problem = *task.problem;
  std::vector<GroupedRollout> rollouts = sample(problem, 1, true);
  if (opt_.place_samples > 0) {
    // A greedy grouper puts every unit in its most likely group, often the same one: sampling finds more.
    const std::mt19937_64 saved = rng_;
    std::vector<GroupedRollout> sampled = sample(problem, opt_.place_samples, false);
    rng_ = saved;
    std::move(sampled.begin(), sampled.end(), std::back_inserter(rollouts));
  }
  std::vector<std::vector<int32_t>> placements;
  for (const auto& r : rollouts) placements.push_back(problem.expand(unit_devices(problem, r.unit_groups, r.group_device)));
  if (placements.size() == 1) return std::move(placements[0]);
  const rl::Evaluation eval = rl::evaluate(task, placements);
  const size_t best = static_cast<size_t>(std::max_element(eval.reward.begin(), eval.reward.end()) - eval.reward.begin());
  return std::move(placements[best]);
}

nlohmann::json GroupedLearner::state() const {
  return {{"params", nn::parameters_to_json(params_)},
          {"optimizer", rl::optimizer_state(*optimizer_)},
          {"rng", rl::rng_state(rng_)},
          {"baseline", baseline_.state()}};
}

void GroupedLearner::load_state(const nlohmann::json& state) {
  const auto field = [&](const char* key) -> const nlohmann::json& {
    if (!state.is_object() || !state.contains(key)) {
      throw Error(fmt::format("{} state: missing field \"{}\" (a checkpoint of another policy?)", name_, key));
    }
    return state.at(key);
  };
  const nlohmann::json &params = field("params"), &optimizer = field("optimizer"), &rng = field("rng"),
                       &baseline = field("baseline");
  io::JsonNode(state, fmt::format("{} state", name_)).check_fields({"params", "optimizer", "rng", "baseline"});
  if (!rng.is_string()) throw Error(fmt::format("{} state: rng must be a string", name_));
  nn::parameters_from_json(params, fmt::format("{} state: params", name_), params_);
  rl::load_optimizer_state(*optimizer_, optimizer);
  rl::load_rng_state(rng_, rng.get<std::string>(), fmt::format("{} state: rng", name_));
  baseline_.load_state(baseline);
}

// ================================================================================================
// HDP
// ================================================================================================

namespace {

constexpr int32_t kTypeEmbed = 8;  // width of the op-type embedding
constexpr int32_t kUnitInput = kUnitFeatures + kPositionFeatures + kTypeEmbed;

/**
 * Grouper: an MLP over [unit_x, position sinusoids, type embedding] -> G logits per unit. Placer: group
 * features -> LSTM encoder over the groups in order of their first unit; an LSTM decoder whose input at
 * step t is [embedding of the previous group's device, encoder state of group t, previous attention
 * context]; Bahdanau attention over the encoder states; logits of step t = query([h_t; context_t]) .
 * key([device d embedding, share of the graph's time already on d]) / sqrt(H) + w . (mean pair features
 * of group t on d), so the output works for any number of devices and sees the load it has built.
 */
class HdpLearner final : public GroupedLearner {
 public:
  /**
   * The TensorFlow implementation's exploration (hierarchical_controller.py): many groups (80 = 20 x 4
   * devices; per cluster min(256, 20 x devices), hdp_run_defaults), device logits bounded by tanh,
   * and noise of half their RMS on the logits sampled from, until step 300 (or 30% of a run's planned
   * steps; 750 there, in runs of thousands of steps). Without them the placer collapsed onto one device
   * within 20 steps and never left it; measurements in docs/learned.md#hdp.
   */
  static GroupedOptions hdp_defaults() {
    GroupedOptions d;
    d.groups = 80;
    d.tanh_constant = 1;
    d.logits_noise = 0.5;
    d.stop_noise_step = 300;
    return d;
  }

  HdpLearner(const nlohmann::json& options, uint64_t seed) : GroupedLearner("hdp", options, {}, seed, hdp_defaults()) {
    const Index h = opt_.hidden, g = opt_.groups;
    std::mt19937_64& rng = init_rng_;
    type_embed_ = nn::Embedding(kOpTypeBuckets, kTypeEmbed, rng);
    grouper_ = nn::Mlp({kUnitInput, h, g}, rng);
    group_in_ = nn::Linear(kUnitInput + 1 + 2 * g, h, rng);
    encoder_ = nn::LstmCell(h, h, rng);
    device_in_ = nn::Linear(kDeviceFeatures, h, rng);
    device_slot_ = nn::Embedding(kDeviceSlots, h, rng);
    start_ = nn::uniform_param<float>(1, h, 1.0, rng);
    decoder_ = nn::LstmCell(3 * h, h, rng);
    att_enc_ = nn::Linear(h, h, rng, false);
    att_dec_ = nn::Linear(h, h, rng);
    att_v_ = nn::Linear(h, 1, rng, false);
    query_ = nn::Linear(2 * h, h, rng);
    key_ = nn::Linear(h + 1, h, rng);
    pair_ = nn::Linear(kPairFeatures, 1, rng);
    nn::ParamList<float> params;
    type_embed_.collect("type_embed", params);
    grouper_.collect("grouper", params);
    group_in_.collect("placer.group_in", params);
    encoder_.collect("placer.encoder", params);
    device_in_.collect("placer.device_in", params);
    device_slot_.collect("placer.device_slot", params);
    params.push_back({"placer.start", start_});
    decoder_.collect("placer.decoder", params);
    att_enc_.collect("placer.att_enc", params);
    att_dec_.collect("placer.att_dec", params);
    att_v_.collect("placer.att_v", params);
    query_.collect("placer.query", params);
    key_.collect("placer.key", params);
    pair_.collect("placer.pair", params);
    set_params(std::move(params));
  }

 protected:
  std::vector<GroupedRollout> sample(const Problem& problem, int32_t count, bool greedy) override {
    ad::NoGradGuard no_grad;
    const Tensor unit_in = unit_input(problem);
    const Tensor grouper_logits = grouper_logits_of(problem, unit_in);
    std::vector<GroupedRollout> out(static_cast<size_t>(count));
    for (GroupedRollout& r : out) {
      const rl::Sampled labels = choose(grouper_logits.value(), nullptr, greedy);
      r.label_of = labels.choice;
      r.unit_groups = make_grouping(r.label_of, opt_.groups);
      const ad::Mask allowed = group_allowed(problem, r.unit_groups);
      double placer_logp = 0;
      placer_logits(problem, unit_in, r.unit_groups, r.group_device, [&](const Tensor& logits, Index t) {
        const ad::Mask row = allowed.row(t);
        const rl::Sampled d = choose(logits.value(), &row, greedy);
        placer_logp += d.logp[0];
        return d.choice[0];
      });
      r.logp = placer_logp;
      for (double lp : labels.logp) r.logp += lp;
    }
    return out;
  }

  std::pair<Tensor, Tensor> log_probs(const Problem& problem, const std::vector<GroupedRollout>& rollouts) override {
    const Tensor unit_in = unit_input(problem);
    const Tensor grouper_lp = ad::log_softmax_rows(grouper_logits_of(problem, unit_in));
    std::vector<Tensor> logp, entropy{rl::entropy(grouper_lp)};
    for (const GroupedRollout& r : rollouts) {
      const ad::Mask allowed = group_allowed(problem, r.unit_groups);
      std::vector<int32_t> devices = r.group_device;
      const Tensor placer_lp = ad::log_softmax_rows(
          placer_logits(problem, unit_in, r.unit_groups, devices, [&](const Tensor&, Index t) { return devices[t]; }),
          &allowed);
      logp.push_back(ad::add(rl::log_prob(grouper_lp, r.label_of), rl::log_prob(placer_lp, r.group_device)));
      entropy.push_back(ad::mul_scalar(rl::entropy(placer_lp), 1.0f / static_cast<float>(rollouts.size())));
    }
    Tensor total_entropy = entropy[0];
    for (size_t i = 1; i < entropy.size(); ++i) total_entropy = ad::add(total_entropy, entropy[i]);
    return {ad::concat_rows(logp), total_entropy};
  }

 private:
  static std::vector<double> positions(const Problem& problem) {
    std::vector<double> position(static_cast<size_t>(problem.num_units()));
    for (int32_t u = 0; u < problem.num_units(); ++u) position[u] = problem.unit_x()(u, kPositionColumn);
    return position;
  }

  /** [U, kUnitInput]: unit features, sinusoids of the topological position, op-type embedding. */
  Tensor unit_input(const Problem& problem) const {
    return ad::concat_cols<float>({Tensor::leaf(problem.unit_x()), Tensor::leaf(positional_encoding(positions(problem))),
                                   type_embed_.forward(problem.unit_type())});
  }

  /** [U, G]: the grouper's MLP plus the topological block prior. */
  Tensor grouper_logits_of(const Problem& problem, const Tensor& unit_in) const {
    return ad::add(grouper_.forward(unit_in), Tensor::leaf(block_prior(positions(problem), opt_.groups, opt_.block_prior)));
  }

  /** [Gn, 1 + 2G]: log group size and log edge counts from and to every other group (HDP's adjacency). */
  ad::MatrixF group_structure(const Problem& problem, const Grouping& groups) const {
    const Index g = opt_.groups;
    ad::MatrixF out = ad::MatrixF::Zero(groups.groups(), 1 + 2 * g);
    const ad::Csr& pred = *problem.predecessors();
    for (int32_t u = 0; u < problem.num_units(); ++u) {
      const int32_t gu = groups.group_of[u];
      out(gu, 0) += 1;
      for (int32_t k = pred.offsets[u]; k < pred.offsets[u + 1]; ++k) {
        const int32_t gp = groups.group_of[pred.indices[k]];
        if (gp == gu) continue;
        out(gu, 1 + gp) += 1;      // edges into gu from gp
        out(gp, 1 + g + gu) += 1;  // edges out of gp into gu
      }
    }
    return out.array().log1p().matrix();
  }

  /**
   * Runs the placer over the groups of `groups`; `pick(logits_t, t)` returns the device of group t
   * (sampled, or the recorded one when teacher forcing), stored in `devices`. Returns logits [Gn, D].
   */
  template <class Pick>
  Tensor placer_logits(const Problem& problem, const Tensor& unit_in, const Grouping& groups,
                       std::vector<int32_t>& devices, Pick&& pick) const {
    const Index n = groups.groups(), d = problem.num_devices();
    const Tensor x = ad::concat_cols<float>(
        {ad::segment_mean(unit_in, groups.members), Tensor::leaf(group_structure(problem, groups))});
    const Tensor enc_in = ad::tanh(group_in_.forward(x));
    nn::LstmState<float> enc_state = encoder_.zero_state(1);
    std::vector<Tensor> enc_rows;
    for (Index t = 0; t < n; ++t) {
      enc_state = encoder_.forward(ad::slice_rows(enc_in, t, 1), enc_state);
      enc_rows.push_back(enc_state.h);
    }
    const Tensor enc = ad::concat_rows(enc_rows);
    const Tensor enc_proj = att_enc_.forward(enc);
    const Tensor dev_emb =
        ad::tanh(ad::add(device_in_.forward(Tensor::leaf(problem.device_x())), device_slot_.forward(device_slots(problem))));
    // Each group's share of the graph's time (mean over devices): the load column of the device keys.
    std::vector<double> group_time_s(static_cast<size_t>(n), 0.0);
    double total_s = 0;
    for (int32_t u = 0; u < problem.num_units(); ++u) {
      group_time_s[groups.group_of[u]] += problem.units().mean_time_s(u);
      total_s += problem.units().mean_time_s(u);
    }
    ad::MatrixF load = ad::MatrixF::Zero(d, 1);
    const Tensor pair_score = pair_.forward(Tensor::leaf(group_pair_x(problem, groups)));
    const float inv_sqrt_h = 1.0f / std::sqrt(static_cast<float>(opt_.hidden));

    devices.resize(static_cast<size_t>(n));
    nn::LstmState<float> state = decoder_.zero_state(1);
    Tensor context = Tensor::constant(1, opt_.hidden, 0.0f), previous = start_;
    std::vector<Tensor> logits;
    for (Index t = 0; t < n; ++t) {
      state = decoder_.forward(ad::concat_cols<float>({previous, ad::slice_rows(enc, t, 1), context}), state);
      const Tensor scores = att_v_.forward(ad::tanh(ad::add(enc_proj, att_dec_.forward(state.h))));
      context = ad::matmul(ad::softmax_rows(ad::transpose(scores)), enc);
      const Tensor query = query_.forward(ad::concat_cols<float>({state.h, context}));
      const Tensor keys = key_.forward(ad::concat_cols<float>({dev_emb, Tensor::leaf(load)}));
      Tensor scores_t = ad::add(ad::mul_scalar(ad::matmul_nt(query, keys), inv_sqrt_h),
                                ad::transpose(ad::slice_rows(pair_score, t * d, d)));
      if (opt_.tanh_constant > 0)  // bounded: no device is ever ruled out (TensorFlow HDP's tanh_constant)
        scores_t = ad::mul_scalar(ad::tanh(scores_t), static_cast<float>(opt_.tanh_constant));
      logits.push_back(scores_t);
      devices[t] = pick(logits.back(), t);
      if (total_s > 0) load(devices[t], 0) += static_cast<float>(group_time_s[t] / total_s);
      previous = ad::slice_rows(dev_emb, devices[t], 1);
    }
    return ad::concat_rows(logits);
  }

  nn::Embedding type_embed_, device_slot_;
  nn::Mlp grouper_;
  nn::Linear group_in_, device_in_, att_enc_, att_dec_, att_v_, query_, key_, pair_;
  nn::LstmCell encoder_, decoder_;
  Tensor start_;
};

}  // namespace

std::unique_ptr<rl::Learner> make_hdp_learner(const nlohmann::json& options, uint64_t seed) {
  return std::make_unique<HdpLearner>(options, seed);
}

void hdp_run_defaults(nlohmann::json& options, int32_t devices, int64_t steps) {
  if (devices > 0 && !options.contains("groups")) options["groups"] = std::min(256, 20 * devices);
  if (steps > 0 && !options.contains("stop_noise_step"))
    options["stop_noise_step"] = std::clamp<int64_t>(3 * steps / 10, 1, policy::kMaxCountOption);
}

}  // namespace placelab::learned
