// GDP as an rl::Learner (see gdp.h): the warm start, PPO steps for both decoders, self-imitation of the
// best placement found so far, placing, and the checkpointed state.
#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/learned/classical_start.h"
#include "policy/learned/gdp.h"
#include "policy/placer.h"
#include "policy/rl/pg.h"

namespace placelab::learned {
namespace {

namespace ad = autodiff;
using autodiff::Tensor;

nn::AdamOptions adam_options(const GdpOptions& options) {
  nn::AdamOptions adam;
  adam.lr = options.lr;
  return adam;
}

// Mean negative log-likelihood of `choice` under the rows of `log_probs`.
Tensor cross_entropy(const Tensor& log_probs, const std::vector<int32_t>& choice) {
  return rl::reinforce_loss(ad::select_per_row(log_probs, choice), std::vector<double>(choice.size(), 1.0));
}

// `decisions`, or at most `cap` of its rows drawn without replacement from `rng` (kept in order), with the
// same selection applied to `per_row` when given.
Decisions at_most(const Decisions& decisions, int64_t cap, std::mt19937_64& rng, std::vector<double>* per_row = nullptr) {
  const int64_t rows = decisions.rows();
  if (cap <= 0 || rows <= cap) return decisions;
  std::vector<int32_t> index(static_cast<size_t>(rows));
  std::iota(index.begin(), index.end(), 0);
  for (int64_t i = 0; i < cap; ++i) {  // partial Fisher-Yates
    const auto j = i + static_cast<int64_t>(rng() % static_cast<uint64_t>(rows - i));
    std::swap(index[static_cast<size_t>(i)], index[static_cast<size_t>(j)]);
  }
  index.resize(static_cast<size_t>(cap));
  std::sort(index.begin(), index.end());
  if (per_row != nullptr) {
    std::vector<double> kept;
    for (int32_t r : index) kept.push_back((*per_row)[static_cast<size_t>(r)]);
    *per_row = std::move(kept);
  }
  return select_decisions(decisions, index);
}

size_t best_index(const rl::Evaluation& evaluation) {
  return static_cast<size_t>(std::max_element(evaluation.reward.begin(), evaluation.reward.end()) -
                             evaluation.reward.begin());
}

}  // namespace

GdpLearner::GdpLearner(const GdpOptions& options, uint64_t seed)
    : options_(options),
      rng_(seed),
      network_(options_, rng_),
      adam_(nn::tensors_of(network_.params()), adam_options(options_)),
      entropy_coef_(options_.entropy) {}

void GdpLearner::steer_entropy(double entropy) {
  if (!(options_.entropy_target > 0) || !std::isfinite(entropy)) return;
  // Multiplicative, by the relative error, at most 5% a step: slow against PPO's own drift, so the two do not
  // oscillate; bounded, so a policy far from the target cannot make the bonus dominate the loss at once.
  const double step = std::clamp(0.05 * (options_.entropy_target - entropy) / options_.entropy_target, -0.05, 0.05);
  entropy_coef_ = std::clamp(entropy_coef_ * std::exp(step), 1e-5, 1.0);
}

GdpLearner::TaskCache& GdpLearner::cache(const rl::Task& task) {
  TaskCache& entry = cache_[task.problem];
  if (!entry.decoder && options_.decoder == "schedule") entry.decoder = std::make_unique<ScheduleDecoder>(*task.problem);
  return entry;
}

const std::vector<int32_t>& GdpLearner::warm_target(const rl::Task& task) {
  TaskCache& entry = cache(task);
  if (!entry.warm_target.empty()) return entry.warm_target;
  ClassicalStart start =
      best_classical_start(task, policy::split_placer_names(options_.warm_start), "gdp warm start");
  entry.warm_reward = start.reward;
  if (entry.decoder) entry.warm_decisions = entry.decoder->follow(start.units);
  entry.warm_target = std::move(start.units);
  return entry.warm_target;
}

void GdpLearner::offer_best(const rl::Task& task, const std::vector<std::vector<int32_t>>& units,
                            const rl::Evaluation& evaluation) {
  const size_t k = best_index(evaluation);
  auto [it, fresh] = best_.try_emplace(task.name);
  if (!fresh && evaluation.reward[k] <= it->second.reward) return;
  it->second.reward = evaluation.reward[k];
  it->second.units = units[k];
  it->second.decisions = {};  // followed again when next needed
}

std::vector<int32_t> GdpLearner::imitate(const rl::Task& task, const std::vector<int32_t>& target,
                                         const Decisions* decisions, rl::StepStats& stats) {
  const Problem& problem = *task.problem;
  std::vector<int32_t> greedy;
  Tensor loss, log_probs;
  if (decisions != nullptr) {
    const GdpEncoding encoding = network_.encode(problem);
    greedy = cache(task).decoder->decode(network_.scorer(encoding), DecodeMode::greedy).unit_device;
    if (decisions->rows() > 0) {  // none when every unit has a single device
      const Decisions sampled = at_most(*decisions, options_.decisions_per_step, rng_);
      log_probs = network_.decision_log_probs(encoding, sampled);
      loss = cross_entropy(log_probs, sampled.choice);
    }
  } else {
    const GdpOutput out = network_.forward(problem);
    greedy = rl::argmax_rows(out.log_probs.value(), &problem.allowed());
    log_probs = out.log_probs;
    loss = cross_entropy(log_probs, target);
  }
  if (loss.defined()) {
    stats.loss = loss.item();
    stats.entropy = rl::entropy(log_probs).item();
    update(loss);
  }
  return greedy;
}

void GdpLearner::update(const Tensor& loss) {
  ad::backward(loss);
  nn::clip_grad_norm(adam_.params(), options_.max_grad_norm);
  adam_.step();
  adam_.zero_grad();
}

void GdpLearner::log_rollouts(const rl::Task& task, const std::vector<std::vector<int32_t>>& units,
                              rl::StepStats& stats) {
  std::vector<std::vector<int32_t>> placements;
  for (const auto& u : units) placements.push_back(task.problem->expand(u));
  const rl::Evaluation evaluation = rl::evaluate(task, placements);
  offer_best(task, units, evaluation);
  rl::record_rollouts(evaluation, placements, stats);
}

rl::StepStats GdpLearner::imitation_step(const rl::Task& task) {
  rl::StepStats stats;
  // The warm_start placers' placements are simulated once per task: counted on its first step (a task has a
  // best from then on, which the state keeps, so a resumed run counts the same; it recomputes them uncounted).
  if (!best_.contains(task.name))
    stats.simulations += static_cast<int64_t>(policy::split_placer_names(options_.warm_start).size());
  const std::vector<int32_t>& target = warm_target(task);
  const TaskCache& entry = cache(task);
  const std::vector<int32_t> greedy = imitate(task, target, entry.decoder ? &entry.warm_decisions : nullptr, stats);
  // Logged like rollouts: the policy's greedy placement before this update, and the target.
  log_rollouts(task, {greedy, target}, stats);
  return stats;
}

rl::StepStats GdpLearner::distill_step(const rl::Task& task) {
  rl::StepStats stats;
  const std::vector<int32_t> target = best_.at(task.name).units;
  const std::vector<int32_t> greedy = imitate(task, target, &best_decisions(task), stats);
  log_rollouts(task, {greedy}, stats);  // a greedy placement better than the target becomes the target
  return stats;
}

int64_t GdpLearner::warm_start_runs(const rl::Task& task) const {
  const auto it = cache_.find(task.problem);
  if (it != cache_.end() && !it->second.warm_target.empty()) return 0;
  return static_cast<int64_t>(policy::split_placer_names(options_.warm_start).size());
}

// As train_step chooses its kind of step: the simulations each runs.
int64_t GdpLearner::max_step_simulations(const rl::Task& task, int64_t step) {
  if (step < options_.warm_steps) return warm_start_runs(task) + 2;  // the greedy placement and the target
  if (options_.decoder != "schedule") return options_.rollouts;
  const bool known = best_.contains(task.name);
  if (options_.distill_from > 0 && step >= options_.distill_from && known) return 1;  // the greedy placement
  return (!known && !options_.warm_start.empty() ? warm_start_runs(task) : 0) + options_.rollouts;
}

int64_t GdpLearner::max_place_simulations(const rl::Task& /*task*/) {
  const auto starts = static_cast<int64_t>(policy::split_placer_names(options_.place_starts).size());
  return options_.decoder == "schedule" ? 1 + std::max<int64_t>(options_.place_samples, 0) + starts : 0;
}

rl::StepStats GdpLearner::train_step(const rl::Task& task, int64_t step) {
  const bool warm = step < options_.warm_steps;
  adam_.set_lr(warm || options_.rl_lr <= 0 ? options_.lr : options_.rl_lr);
  if (warm) return imitation_step(task);
  if (options_.decoder != "schedule") return single_shot_step(task);
  const bool distill = options_.distill_from > 0 && step >= options_.distill_from && best_.contains(task.name);
  return distill ? distill_step(task) : schedule_step(task);
}

rl::StepStats GdpLearner::single_shot_step(const rl::Task& task) {
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
                                        ad::mul_scalar(entropy, static_cast<float>(entropy_coef_))),
                                ad::mul_scalar(value_error, static_cast<float>(options_.value_coef)));
    if (epoch == 0) {
      stats.loss = loss.item();
      stats.entropy = entropy.item();
    }
    update(loss);
  }
  steer_entropy(stats.entropy);

  rl::record_rollouts(evaluation, placements, stats);
  return stats;
}

std::vector<Decisions> GdpLearner::sample_decodes(const rl::Task& task, const GdpEncoding& encoding, size_t count,
                                                  const std::vector<std::vector<int32_t>>& follow, double temperature) {
  const ScheduleDecoder& decoder = *cache(task).decoder;
  std::vector<uint64_t> seeds(count);
  for (uint64_t& seed : seeds) seed = rng_();  // drawn in order, so the decodes do not depend on the threads
  DecisionScorer scorer = network_.scorer(encoding);
  if (temperature != 1) {
    scorer = [scorer, scale = static_cast<float>(1 / temperature)](int32_t u, std::span<const float> f,
                                                                    std::span<float> logits) {
      scorer(u, f, logits);
      for (float& l : logits) l *= scale;
    };
  }
  std::vector<Decisions> out(count);
  tbb::parallel_for(size_t{0}, count, [&](size_t k) {
    std::mt19937_64 rng(seeds[k]);
    if (k < follow.size() && !follow[k].empty()) out[k] = decoder.decode(scorer, DecodeMode::follow, &rng, follow[k]);
    else out[k] = decoder.decode(scorer, DecodeMode::sample, &rng);
  });
  return out;
}

std::vector<std::vector<int32_t>> GdpLearner::windows(const std::vector<int32_t>& best, size_t count) {
  const auto windowed = static_cast<size_t>(std::llround(options_.window_share * static_cast<double>(count)));
  std::vector<std::vector<int32_t>> out(count);
  const auto units = static_cast<int64_t>(best.size());
  if (units == 0) return out;
  const double longest = std::max(1.0, 0.25 * static_cast<double>(units));
  for (size_t k = 0; k < windowed; ++k) {
    const auto length = std::min<int64_t>(units, std::llround(std::pow(longest, autodiff::uniform01(rng_))));
    const int64_t begin = static_cast<int64_t>(rng_() % static_cast<uint64_t>(units - length + 1));
    out[k] = best;
    std::fill(out[k].begin() + begin, out[k].begin() + begin + length, -1);
  }
  return out;
}

rl::StepStats GdpLearner::schedule_step(const rl::Task& task) {
  const Problem& problem = *task.problem;
  const auto k_rollouts = static_cast<size_t>(options_.rollouts);
  rl::StepStats stats;

  // A task met first here (no warm start: fine-tuning a trained policy) starts from the best warm_start
  // placement all the same, so windows search around it and the run is never worse than it.
  if (!best_.contains(task.name) && !options_.warm_start.empty()) {
    stats.simulations += static_cast<int64_t>(policy::split_placer_names(options_.warm_start).size());
    const std::vector<int32_t>& target = warm_target(task);
    rl::Evaluation evaluation;
    evaluation.reward = {cache(task).warm_reward};
    offer_best(task, {target}, evaluation);
  }
  GdpEncoding encoding = network_.encode(problem);
  const auto found = best_.find(task.name);
  const std::vector<std::vector<int32_t>> follow =
      found == best_.end() ? std::vector<std::vector<int32_t>>{} : windows(found->second.units, k_rollouts);
  std::vector<Decisions> decoded = sample_decodes(task, encoding, k_rollouts, follow);
  // Only the decisions a rollout drew are its actions (the rest followed the best placement).
  for (size_t k = 0; k < follow.size(); ++k) {
    if (follow[k].empty()) continue;
    std::vector<int32_t> drawn;
    for (int32_t r = 0; r < static_cast<int32_t>(decoded[k].rows()); ++r)
      if (follow[k][static_cast<size_t>(decoded[k].unit[static_cast<size_t>(r)])] < 0) drawn.push_back(r);
    std::vector<int32_t> unit_device = std::move(decoded[k].unit_device);
    decoded[k] = select_decisions(decoded[k], drawn);
    decoded[k].unit_device = std::move(unit_device);
  }
  std::vector<std::vector<int32_t>> units(k_rollouts), placements(k_rollouts);
  for (size_t k = 0; k < k_rollouts; ++k) {
    units[k] = decoded[k].unit_device;
    placements[k] = problem.expand(units[k]);
  }
  const rl::Evaluation evaluation = rl::evaluate(task, placements);
  offer_best(task, units, evaluation);

  // Advantages as the single-shot step's: reward minus the value head's prediction, normalised over the
  // batch, shared by every decision of a rollout.
  const double mean_reward = std::accumulate(evaluation.reward.begin(), evaluation.reward.end(), 0.0) /
                             static_cast<double>(k_rollouts);
  std::vector<double> centred(k_rollouts);
  for (size_t k = 0; k < k_rollouts; ++k) centred[k] = evaluation.reward[k] - encoding.value.item();
  const std::vector<double> rollout_advantage = rl::normalize(centred);
  std::vector<double> advantage;
  for (size_t k = 0; k < k_rollouts; ++k)
    advantage.insert(advantage.end(), static_cast<size_t>(decoded[k].rows()), rollout_advantage[k]);
  const Decisions joined = at_most(concat_decisions(decoded), options_.decisions_per_step, rng_, &advantage);

  // Self-imitation's target: the decisions that lead to the best placement found so far.
  const bool imitate = options_.self_imitation > 0;
  const Decisions imitated =
      imitate ? at_most(best_decisions(task), options_.decisions_per_step, rng_) : Decisions{};

  for (int64_t epoch = 0; epoch < options_.ppo_epochs; ++epoch) {
    if (epoch > 0) encoding = network_.encode(problem);
    Tensor loss = ad::mul_scalar(ad::square(ad::add_scalar(encoding.value, static_cast<float>(-mean_reward))),
                                 static_cast<float>(options_.value_coef));
    if (joined.rows() > 0) {
      const Tensor log_probs = network_.decision_log_probs(encoding, joined);
      const Tensor entropy = rl::entropy(log_probs);
      loss = ad::add(loss, ad::sub(rl::ppo_loss(ad::select_per_row(log_probs, joined.choice), joined.logp, advantage,
                                                options_.clip),
                                   ad::mul_scalar(entropy, static_cast<float>(entropy_coef_))));
      if (epoch == 0) stats.entropy = entropy.item();
    }
    if (imitated.rows() > 0) {
      loss = ad::add(loss, ad::mul_scalar(cross_entropy(network_.decision_log_probs(encoding, imitated),
                                                        imitated.choice),
                                          static_cast<float>(options_.self_imitation)));
    }
    if (epoch == 0) stats.loss = loss.item();
    update(loss);
  }
  if (joined.rows() > 0) steer_entropy(stats.entropy);

  rl::record_rollouts(evaluation, placements, stats);
  return stats;
}

const Decisions& GdpLearner::best_decisions(const rl::Task& task) {
  Best& best = best_.at(task.name);
  if (best.units.size() != static_cast<size_t>(task.problem->num_units())) {
    throw Error(fmt::format("gdp: the saved best placement of task \"{}\" has {} units, the task {}", task.name,
                            best.units.size(), task.problem->num_units()));
  }
  if (best.decisions.devices == 0) best.decisions = cache(task).decoder->follow(best.units);
  return best.decisions;
}

std::vector<int32_t> GdpLearner::place(const rl::Task& task) {
  const autodiff::NoGradGuard no_grad;
  const Problem& problem = *task.problem;
  if (options_.decoder != "schedule") {
    const GdpOutput out = network_.forward(problem);
    return problem.expand(rl::argmax_rows(out.log_probs.value(), &problem.allowed()));
  }
  const GdpEncoding encoding = network_.encode(problem);
  std::vector<std::vector<int32_t>> candidates = {
      problem.expand(cache(task).decoder->decode(network_.scorer(encoding), DecodeMode::greedy).unit_device)};
  if (options_.place_samples > 0) {
    const std::mt19937_64 saved = rng_;  // placing does not change training
    for (const Decisions& d :
         sample_decodes(task, encoding, static_cast<size_t>(options_.place_samples), {}, options_.place_temperature))
      candidates.push_back(problem.expand(d.unit_device));
    rng_ = saved;
  }
  for (const std::string& name : policy::split_placer_names(options_.place_starts))
    candidates.push_back(policy::make_placer(name)->place(policy::PlaceRequest{*task.simulator}).device_of);
  return std::move(candidates[best_index(rl::evaluate(task, candidates))]);
}

std::vector<std::vector<float>> GdpLearner::device_preferences(const rl::Task& task) {
  if (options_.decoder != "schedule") return {};
  const autodiff::NoGradGuard no_grad;
  const GdpEncoding encoding = network_.encode(*task.problem);
  std::vector<std::vector<float>> out(static_cast<size_t>(task.problem->num_units()));
  const DecisionScorer scorer = network_.scorer(encoding);
  const DecisionScorer recording = [&](int32_t u, std::span<const float> f, std::span<float> logits) {
    scorer(u, f, logits);
    std::vector<float>& p = out[static_cast<size_t>(u)];
    p.assign(logits.begin(), logits.end());
    const float top = *std::max_element(p.begin(), p.end());
    float sum = 0;
    for (float& x : p) sum += (x = std::exp(x - top));
    for (float& x : p) x /= sum;  // over every device: callers keep the ones the unit may use
  };
  cache(task).decoder->decode(recording, DecodeMode::greedy);
  return out;
}

nlohmann::json GdpLearner::state() const {
  nlohmann::json out = {{"params", nn::parameters_to_json(network_.params())},
                        {"optimizer", rl::optimizer_state(adam_)},
                        {"rng", rl::rng_state(rng_)}};
  if (!best_.empty()) {
    nlohmann::json best = nlohmann::json::object();
    for (const auto& [name, b] : best_) best[name] = {{"reward", b.reward}, {"units", b.units}};
    out["best"] = std::move(best);
  }
  if (options_.entropy_target > 0) out["entropy_coef"] = entropy_coef_;
  return out;
}

void GdpLearner::load_state(const nlohmann::json& state) {
  const io::JsonNode root(state, "gdp learner state");
  root.expect_object();
  root.check_fields({"params", "optimizer", "rng", "best", "entropy_coef"});
  const double entropy_coef = root.has("entropy_coef") ? root.at("entropy_coef").as_number() : options_.entropy;
  if (!(entropy_coef > 0) && options_.entropy_target > 0) root.at("entropy_coef").fail("must be above 0");
  const std::string rng_text = root.at("rng").as_string();
  std::mt19937_64 rng;
  rl::load_rng_state(rng, rng_text, "gdp learner state: rng");  // validates before anything changes
  std::map<std::string, Best> best;
  if (root.has("best")) {
    const io::JsonNode saved = root.at("best");
    saved.expect_object();
    for (const auto& [name, value] : saved.value().items()) {
      const io::JsonNode entry = saved.at(name);
      entry.expect_object();
      entry.check_fields({"reward", "units"});
      Best& b = best[name];
      b.reward = entry.at("reward").as_number();
      const io::JsonNode units = entry.at("units");
      for (size_t i = 0; i < units.size(); ++i) {
        const int64_t d = units.at(i).as_int();
        if (d < 0 || d >= static_cast<int64_t>(sim::kMaxDevices)) units.at(i).fail("is not a device index");
        b.units.push_back(static_cast<int32_t>(d));
      }
    }
  }
  // Moments are shaped like the parameters, so they can be checked before any parameter changes.
  nn::Adam adam(nn::tensors_of(network_.params()), adam_options(options_));
  if (root.has("optimizer")) rl::load_optimizer_state(adam, root.at("optimizer").value());
  nn::parameters_from_json(root.at("params").value(), "gdp learner state: params", network_.params());
  adam_ = std::move(adam);
  rng_ = rng;
  best_ = std::move(best);
  entropy_coef_ = entropy_coef;
}

std::unique_ptr<rl::Learner> make_gdp_learner(const nlohmann::json& options, uint64_t seed) {
  return std::make_unique<GdpLearner>(gdp_options_from_json(options), seed);
}

}  // namespace placelab::learned
