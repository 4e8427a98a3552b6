// Policy-gradient pieces: masked categorical sampling with our own inverse-CDF draw (identical on every
// platform), advantages, the PPO and REINFORCE losses on the autodiff tape, parallel rollout evaluation,
// and the optimiser and RNG state that checkpoints need for an exact resume.
#include "policy/rl/pg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include <fmt/format.h>
#include <tbb/parallel_for.h>

#include "graphs/error.h"
#include "graphs/json_util.h"

namespace placelab::rl {

namespace {

// Checks that `allowed` (when given) has the logits' shape and that every row keeps some entry.
void check_rows(const char* op, const MatrixF& logits, const Mask* allowed) {
  if (logits.rows() == 0 || logits.cols() == 0) {
    throw Error(fmt::format("{}: logits are [{}, {}]; need at least one row and column", op, logits.rows(), logits.cols()));
  }
  if (allowed == nullptr) return;
  if (allowed->rows() != logits.rows() || allowed->cols() != logits.cols()) {
    throw Error(fmt::format("{}: mask is [{}, {}] but logits are [{}, {}]", op, allowed->rows(), allowed->cols(),
                            logits.rows(), logits.cols()));
  }
  for (Eigen::Index r = 0; r < logits.rows(); ++r) {
    if (!allowed->row(r).any()) throw Error(fmt::format("{}: row {} allows no column", op, r));
  }
}

}  // namespace

Draw sample_row(std::span<const float> logits, const bool* keep, std::mt19937_64& rng) {
  const auto kept = [&](size_t c) { return keep == nullptr || keep[c]; };
  double top = -std::numeric_limits<double>::infinity();
  for (size_t c = 0; c < logits.size(); ++c)
    if (kept(c)) top = std::max(top, static_cast<double>(logits[c]));
  double total = 0;
  for (size_t c = 0; c < logits.size(); ++c)
    if (kept(c)) total += std::exp(static_cast<double>(logits[c]) - top);
  // One draw per row whatever the mask, so the stream of draws does not depend on the masks.
  const double u = autodiff::uniform01(rng) * total;
  int32_t pick = -1;
  double cumulative = 0;
  for (size_t c = 0; c < logits.size(); ++c) {
    if (!kept(c)) continue;
    const double weight = std::exp(static_cast<double>(logits[c]) - top);
    if (weight == 0) continue;
    pick = static_cast<int32_t>(c);  // the last allowed column absorbs rounding at the top end
    cumulative += weight;
    if (u < cumulative) break;
  }
  return {pick, static_cast<double>(logits[static_cast<size_t>(pick)]) - top - std::log(total)};
}

Draw argmax_row(std::span<const float> logits, const bool* keep) {
  int32_t best = -1;
  double top = -std::numeric_limits<double>::infinity(), total = 0;
  for (size_t c = 0; c < logits.size(); ++c)
    if ((keep == nullptr || keep[c]) && (best < 0 || logits[c] > logits[static_cast<size_t>(best)]))
      best = static_cast<int32_t>(c), top = logits[c];
  for (size_t c = 0; c < logits.size(); ++c)
    if (keep == nullptr || keep[c]) total += std::exp(static_cast<double>(logits[c]) - top);
  return {best, -std::log(total)};
}

Sampled sample_rows(const MatrixF& logits, const Mask* allowed, std::mt19937_64& rng) {
  check_rows("sample_rows", logits, allowed);
  const Eigen::Index rows = logits.rows(), cols = logits.cols();
  Sampled out;
  out.choice.resize(static_cast<size_t>(rows));
  out.logp.resize(static_cast<size_t>(rows));
  for (Eigen::Index r = 0; r < rows; ++r) {
    const Draw draw = sample_row({logits.data() + r * cols, static_cast<size_t>(cols)},
                                 allowed == nullptr ? nullptr : allowed->data() + r * cols, rng);
    out.choice[r] = draw.choice;
    out.logp[r] = draw.logp;
  }
  return out;
}

std::vector<int32_t> argmax_rows(const MatrixF& logits, const Mask* allowed) {
  check_rows("argmax_rows", logits, allowed);
  const Eigen::Index cols = logits.cols();
  std::vector<int32_t> out(static_cast<size_t>(logits.rows()));
  for (Eigen::Index r = 0; r < logits.rows(); ++r)
    out[r] = argmax_row({logits.data() + r * cols, static_cast<size_t>(cols)},
                        allowed == nullptr ? nullptr : allowed->data() + r * cols).choice;
  return out;
}

std::vector<double> normalize(std::span<const double> a) {
  std::vector<double> out(a.begin(), a.end());
  if (a.empty()) return out;
  double mean = 0;
  for (double x : a) mean += x;
  mean /= static_cast<double>(a.size());
  double var = 0;
  for (double x : a) var += (x - mean) * (x - mean);
  const double std_dev = std::sqrt(var / static_cast<double>(a.size()));
  for (double& x : out) x = (x - mean) / (std_dev + 1e-8);
  return out;
}

std::vector<double> MovingBaseline::advantages(std::span<const double> rewards) {
  if (rewards.empty()) return {};
  double mean = 0;
  for (double r : rewards) mean += r;
  mean /= static_cast<double>(rewards.size());
  // The first batch starts the baseline at its own mean, so early advantages are not all of one sign.
  if (!initialised_) {
    value_ = mean;
    initialised_ = true;
  }
  std::vector<double> out;
  out.reserve(rewards.size());
  for (double r : rewards) out.push_back(r - value_);
  value_ = decay_ * value_ + (1 - decay_) * mean;
  return out;
}

nlohmann::json MovingBaseline::state() const {
  return {{"decay", decay_}, {"value", value_}, {"initialised", initialised_}};
}

void MovingBaseline::load_state(const nlohmann::json& state) {
  const io::JsonNode root(state, "baseline state");
  root.expect_object();
  root.check_fields({"decay", "value", "initialised"});
  const double decay = root.at("decay").as_number();
  if (decay != decay_) root.at("decay").fail(fmt::format("is {} but this baseline decays by {}", decay, decay_));
  value_ = root.at("value").as_number();
  initialised_ = root.at("initialised").as_bool();
}

namespace {

// A column [N, 1] holding `values`, off the tape.
Tensor column(std::span<const double> values) {
  MatrixF m(static_cast<Eigen::Index>(values.size()), 1);
  for (size_t i = 0; i < values.size(); ++i) m(static_cast<Eigen::Index>(i), 0) = static_cast<float>(values[i]);
  return Tensor::leaf(std::move(m));
}

void check_column(const char* op, const Tensor& logp, size_t n, const char* what) {
  if (!logp.defined() || logp.cols() != 1 || logp.rows() == 0 || static_cast<size_t>(logp.rows()) != n) {
    throw Error(fmt::format("{}: log-probabilities must be [N, 1] with N = {} {} (got [{}, {}])", op, n, what,
                            logp.defined() ? logp.rows() : 0, logp.defined() ? logp.cols() : 0));
  }
}

}  // namespace

Tensor ppo_loss(const Tensor& logp_new, std::span<const double> logp_old, std::span<const double> advantages,
                double clip) {
  check_column("ppo_loss", logp_new, advantages.size(), "advantages");
  if (logp_old.size() != advantages.size()) {
    throw Error(fmt::format("ppo_loss: {} old log-probabilities for {} advantages", logp_old.size(), advantages.size()));
  }
  if (!(clip > 0)) throw Error(fmt::format("ppo_loss: clip {} must be > 0", clip));
  const size_t n = advantages.size();
  // d loss / d logp_new_i = -A_i r_i / N where the unclipped term is the minimum, 0 where the clipped one
  // is strictly smaller (its ratio is constant there).
  std::vector<float> d_logp(n);
  double total = 0;
  for (size_t i = 0; i < n; ++i) {
    const double ratio = std::exp(static_cast<double>(logp_new.value()(static_cast<Eigen::Index>(i), 0)) - logp_old[i]);
    const double unclipped = ratio * advantages[i];
    const double clipped = std::clamp(ratio, 1 - clip, 1 + clip) * advantages[i];
    total += std::min(unclipped, clipped);
    d_logp[i] = unclipped <= clipped ? static_cast<float>(-unclipped / static_cast<double>(n)) : 0.0F;
  }
  MatrixF value = MatrixF::Constant(1, 1, static_cast<float>(-total / static_cast<double>(n)));
  return autodiff::make_result<float>("ppo_loss", std::move(value), {logp_new},
                                      [d_logp = std::move(d_logp)](autodiff::Node<float>& self) {
                                        const float g = self.grad(0, 0);
                                        autodiff::Node<float>& in = *self.inputs[0].node();
                                        const Eigen::Map<const MatrixF> d(d_logp.data(),
                                                                          static_cast<Eigen::Index>(d_logp.size()), 1);
                                        autodiff::accumulate(in, g * d);
                                      });
}

Tensor reinforce_loss(const Tensor& logp, std::span<const double> advantages) {
  check_column("reinforce_loss", logp, advantages.size(), "advantages");
  return autodiff::mul_scalar(autodiff::mean(autodiff::mul(logp, column(advantages))), -1.0F);
}

Tensor log_prob(const Tensor& log_probs, const std::vector<int32_t>& choice) {
  return autodiff::sum(autodiff::select_per_row(log_probs, choice));
}

Tensor entropy(const Tensor& log_probs) {
  const float rows = static_cast<float>(log_probs.rows());
  return autodiff::mul_scalar(autodiff::sum(autodiff::mul(autodiff::exp(log_probs), log_probs)), -1.0F / rows);
}

Evaluation evaluate(const Task& task, std::span<const std::vector<int32_t>> op_placements,
                    const RewardOptions& options) {
  const sim::Simulator& simulator = *task.simulator;
  std::vector<sim::SimResult> results;
  simulator.simulate_batch(op_placements, results);
  const size_t n = op_placements.size();
  Evaluation out;
  out.reward.resize(n);
  out.cost_s.resize(n);
  out.oom.resize(n);
  std::vector<Score> scores(n);
  // Scoring is cheap for step time but runs max_load for the throughput objective: parallel too.
  tbb::parallel_for(size_t{0}, n, [&](size_t i) { scores[i] = score(simulator, op_placements[i], results[i], options); });
  for (size_t i = 0; i < n; ++i) {
    out.reward[i] = reward(scores[i], task.reference_s, options);
    out.cost_s[i] = scores[i].cost_s;
    out.oom[i] = scores[i].oom;
  }
  return out;
}

Evaluation evaluate(const Task& task, std::span<const std::vector<int32_t>> op_placements) {
  return evaluate(task, op_placements, task.reward);
}

void record_rollouts(const Evaluation& evaluation, std::span<const std::vector<int32_t>> op_placements,
                     StepStats& stats) {
  const size_t n = evaluation.reward.size();
  if (op_placements.size() != n) {
    throw Error(fmt::format("record_rollouts: {} placements for {} evaluations", op_placements.size(), n));
  }
  double reward_sum = 0, cost_sum = 0;
  for (size_t i = 0; i < n; ++i) {
    reward_sum += evaluation.reward[i];
    cost_sum += evaluation.cost_s[i];
    if (!evaluation.oom[i] && evaluation.cost_s[i] < stats.best_cost_s) {
      stats.best_cost_s = evaluation.cost_s[i];
      stats.best_placement = op_placements[i];
    }
  }
  if (n > 0) {
    stats.reward_mean = reward_sum / static_cast<double>(n);
    stats.cost_mean_s = cost_sum / static_cast<double>(n);
  }
  stats.rollouts = static_cast<int64_t>(n);
  stats.simulations += static_cast<int64_t>(n);
}

nlohmann::json optimizer_state(const nn::Optimizer& optimizer) { return optimizer.state(); }

void load_optimizer_state(nn::Optimizer& optimizer, const nlohmann::json& state) { optimizer.load_state(state); }

std::string rng_state(const std::mt19937_64& rng) {
  std::ostringstream out;
  out << rng;
  return out.str();
}

void load_rng_state(std::mt19937_64& rng, const std::string& state, std::string_view where) {
  std::istringstream in(state);
  std::mt19937_64 restored;
  in >> restored;
  const bool read = !in.fail() && (in >> std::ws).eof();  // and nothing after it
  std::mt19937_64 probe = restored;  // an all-zero state only ever draws 0
  if (!read || (probe() | probe() | probe() | probe()) == 0) {
    throw Error(fmt::format("{}: is not a saved random generator state (312 numbers, as a learner writes them); the "
                            "checkpoint is damaged or of another policy", where));
  }
  rng = restored;
}

}  // namespace placelab::rl
