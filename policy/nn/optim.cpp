// SGD, Adam(W), gradient clipping and schedules. Updates are whole-matrix Eigen expressions.
#include "policy/nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <utility>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/nn/module.h"

namespace placelab::nn {

using autodiff::Index;
using autodiff::MatrixF;
using autodiff::Tensor;

namespace {

// Per-parameter state matrices as flat float lists ([] for a parameter that never got a gradient).
nlohmann::json matrices_to_json(const std::vector<MatrixF>& matrices) {
  nlohmann::json out = nlohmann::json::array();
  for (const MatrixF& m : matrices) out.push_back(std::vector<float>(m.data(), m.data() + m.size()));
  return out;
}

std::vector<MatrixF> matrices_from_json(const io::JsonNode& node, const std::vector<Tensor>& params) {
  if (node.size() != params.size()) {
    node.fail(fmt::format("has {} entries but the optimiser has {} parameters (state of another model?)", node.size(),
                          params.size()));
  }
  std::vector<MatrixF> out(params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    const io::JsonNode entry = node.at(i);
    const size_t n = entry.size();
    if (n == 0) continue;
    if (static_cast<Index>(n) != params[i].size()) {
      entry.fail(fmt::format("has {} numbers but parameter {} has {} (state of another model?)", n, i, params[i].size()));
    }
    MatrixF m(params[i].rows(), params[i].cols());
    for (size_t k = 0; k < n; ++k) m.data()[k] = float_from_json(entry.at(k));
    out[i] = std::move(m);
  }
  return out;
}

// Checks the kind of a saved state and reads its learning rate.
double read_lr(const io::JsonNode& root, std::string_view kind) {
  if (root.at("kind").as_string() != kind) {
    root.at("kind").fail(fmt::format("is \"{}\" but this optimiser is {}", root.at("kind").as_string(), kind));
  }
  const double lr = root.at("lr").as_number();
  if (!(lr > 0)) root.at("lr").fail("must be > 0");
  return lr;
}

}  // namespace

namespace {
thread_local GradientHook gradient_hook;
}  // namespace

ScopedGradientHook::ScopedGradientHook(GradientHook hook) : previous_(std::exchange(gradient_hook, std::move(hook))) {}
ScopedGradientHook::~ScopedGradientHook() { gradient_hook = std::move(previous_); }

void Optimizer::step() {
  if (gradient_hook) gradient_hook(params_);
  apply();
}

void Optimizer::zero_grad() {
  for (const Tensor& p : params_) p.zero_grad();
}

Sgd::Sgd(std::vector<Tensor> params, SgdOptions options) : Optimizer(std::move(params)), options_(options) {
  if (!(options.lr > 0) || options.momentum < 0 || options.weight_decay < 0) {
    throw Error(fmt::format("Sgd: lr {} must be > 0, momentum {} and weight_decay {} >= 0", options.lr,
                            options.momentum, options.weight_decay));
  }
  velocity_.resize(params_.size());
}

void Sgd::apply() {
  const float lr = static_cast<float>(options_.lr), mu = static_cast<float>(options_.momentum);
  const float wd = static_cast<float>(options_.weight_decay);
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor p = params_[i];
    if (p.grad().size() == 0) continue;
    MatrixF d = p.grad() + wd * p.value();
    if (mu != 0) {
      MatrixF& vel = velocity_[i];
      if (vel.size() == 0) {
        vel = d;
      } else {
        vel = mu * vel + d;
      }
      d = options_.nesterov ? MatrixF(d + mu * vel) : vel;
    }
    p.mutable_value() -= lr * d;
  }
}

nlohmann::json Sgd::state() const {
  return {{"kind", "sgd"}, {"lr", options_.lr}, {"velocity", matrices_to_json(velocity_)}};
}

void Sgd::load_state(const nlohmann::json& state) {
  const io::JsonNode root(state, "optimizer state");
  root.expect_object();
  root.check_fields({"kind", "lr", "velocity"});
  const double lr = read_lr(root, "sgd");
  velocity_ = matrices_from_json(root.at("velocity"), params_);
  options_.lr = lr;
}

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Optimizer(std::move(params)), options_(options) {
  if (!(options.lr > 0) || !(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1) ||
      !(options.eps > 0) || options.weight_decay < 0) {
    throw Error("Adam: need lr > 0, betas in [0, 1), eps > 0 and weight_decay >= 0");
  }
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::apply() {
  ++steps_;
  const float lr = static_cast<float>(options_.lr), b1 = static_cast<float>(options_.beta1);
  const float b2 = static_cast<float>(options_.beta2), eps = static_cast<float>(options_.eps);
  const float wd = static_cast<float>(options_.weight_decay);
  const float correction1 = 1 - static_cast<float>(std::pow(options_.beta1, static_cast<double>(steps_)));
  const float correction2 = 1 - static_cast<float>(std::pow(options_.beta2, static_cast<double>(steps_)));
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor p = params_[i];
    if (p.grad().size() == 0) continue;
    MatrixF& value = p.mutable_value();
    if (m_[i].size() == 0) {
      m_[i] = MatrixF::Zero(value.rows(), value.cols());
      v_[i] = MatrixF::Zero(value.rows(), value.cols());
    }
    if (options_.decoupled_weight_decay) {
      value *= 1 - lr * wd;
      m_[i] = b1 * m_[i] + (1 - b1) * p.grad();
      v_[i].array() = b2 * v_[i].array() + (1 - b2) * p.grad().array().square();
    } else {
      const MatrixF d = p.grad() + wd * value;
      m_[i] = b1 * m_[i] + (1 - b1) * d;
      v_[i].array() = b2 * v_[i].array() + (1 - b2) * d.array().square();
    }
    value.array() -= (lr / correction1) * m_[i].array() / ((v_[i].array() / correction2).sqrt() + eps);
  }
}

nlohmann::json Adam::state() const {
  return {{"kind", "adam"}, {"lr", options_.lr}, {"steps", steps_}, {"m", matrices_to_json(m_)}, {"v", matrices_to_json(v_)}};
}

void Adam::load_state(const nlohmann::json& state) {
  const io::JsonNode root(state, "optimizer state");
  root.expect_object();
  root.check_fields({"kind", "lr", "steps", "m", "v"});
  const double lr = read_lr(root, "adam");
  const int64_t steps = root.at("steps").as_int();
  if (steps < 0) root.at("steps").fail("must be >= 0");
  std::vector<MatrixF> m = matrices_from_json(root.at("m"), params_);
  std::vector<MatrixF> v = matrices_from_json(root.at("v"), params_);
  for (size_t i = 0; i < m.size(); ++i) {
    if ((m[i].size() == 0) != (v[i].size() == 0)) root.at("v").at(i).fail("is set where m is not, or the reverse");
  }
  m_ = std::move(m);
  v_ = std::move(v);
  steps_ = steps;
  options_.lr = lr;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  if (!(max_norm > 0)) throw Error(fmt::format("clip_grad_norm: max_norm {} must be > 0", max_norm));
  double squared = 0;
  for (const Tensor& p : params) {
    if (p.grad().size()) squared += p.grad().cast<double>().squaredNorm();
  }
  const double norm = std::sqrt(squared);
  if (norm > max_norm) {
    const float scale = static_cast<float>(max_norm / (norm + 1e-6));
    for (Tensor p : params) {
      if (p.grad().size()) p.mutable_grad() *= scale;
    }
  }
  return norm;
}

double LrSchedule::lr_at(int64_t step) const {
  switch (kind) {
    case Kind::constant: return base_lr;
    case Kind::warmup_cosine: {
      if (step < warmup_steps) return base_lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
      const double span = static_cast<double>(std::max<int64_t>(1, total_steps - warmup_steps));
      const double t = std::min(1.0, static_cast<double>(step - warmup_steps) / span);
      return min_lr + 0.5 * (base_lr - min_lr) * (1 + std::cos(std::numbers::pi * t));
    }
    case Kind::step_decay:
      return base_lr * std::pow(gamma, static_cast<double>(step / std::max<int64_t>(1, decay_every)));
  }
  return base_lr;
}

}  // namespace placelab::nn
