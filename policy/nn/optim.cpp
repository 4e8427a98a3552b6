// SGD, Adam(W), gradient clipping and schedules. Updates are whole-matrix Eigen expressions.
#include "policy/nn/optim.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::nn {

using autodiff::MatrixF;
using autodiff::Tensor;

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

void Sgd::step() {
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

Adam::Adam(std::vector<Tensor> params, AdamOptions options) : Optimizer(std::move(params)), options_(options) {
  if (!(options.lr > 0) || !(options.beta1 >= 0 && options.beta1 < 1) || !(options.beta2 >= 0 && options.beta2 < 1) ||
      !(options.eps > 0) || options.weight_decay < 0) {
    throw Error("Adam: need lr > 0, betas in [0, 1), eps > 0 and weight_decay >= 0");
  }
  m_.resize(params_.size());
  v_.resize(params_.size());
}

void Adam::step() {
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
