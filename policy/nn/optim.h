// Optimisers over a model's parameter tensors (float): SGD with momentum, Adam and AdamW, global
// gradient-norm clipping and learning-rate schedules. step() reads each parameter's gradient
// (parameters that got none are skipped) and zero_grad() drops them for the next step.
#pragma once

#include <functional>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/autodiff/tensor.h"

namespace placelab::nn {

/** SGD settings; weight_decay is L2 added to the gradient. */
struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

/** Adam settings; decoupled weight decay makes it AdamW (Loshchilov and Hutter). */
struct AdamOptions {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  bool decoupled_weight_decay = false;
};

/** Common interface, so training code holds any optimiser. */
class Optimizer {
 public:
  explicit Optimizer(std::vector<autodiff::Tensor> params) : params_(std::move(params)) {}
  virtual ~Optimizer() = default;
  /** Applies one update from the current gradients, after this thread's gradient hook (if any) saw them. */
  void step();
  /** Drops every parameter's gradient. */
  void zero_grad();
  virtual double lr() const = 0;
  virtual void set_lr(double lr) = 0;
  const std::vector<autodiff::Tensor>& params() const { return params_; }
  /**
   * Moments, step count and learning rate as JSON (floats print with round-trip precision), so that a
   * checkpointed run continues bit for bit: {"kind", "lr", per-parameter matrices ([] where unset)}.
   */
  virtual nlohmann::json state() const = 0;
  /** Restores state(); throws placelab::Error naming the field for another kind or other shapes. */
  virtual void load_state(const nlohmann::json& state) = 0;

 protected:
  /** The update rule proper: step() without the hook. */
  virtual void apply() = 0;
  std::vector<autodiff::Tensor> params_;
};

/**
 * What every optimizer step on this thread does to the gradients first. Data-parallel training (rl::train
 * under MPI) installs one that averages them over the processes, so every replica applies the same update
 * without the learners knowing.
 */
using GradientHook = std::function<void(const std::vector<autodiff::Tensor>& params)>;

/** Installs a gradient hook for this thread's optimizer steps while alive (the previous one comes back after). */
class ScopedGradientHook {
 public:
  explicit ScopedGradientHook(GradientHook hook);
  ~ScopedGradientHook();
  ScopedGradientHook(const ScopedGradientHook&) = delete;
  ScopedGradientHook& operator=(const ScopedGradientHook&) = delete;

 private:
  GradientHook previous_;
};

/** Stochastic gradient descent with optional (Nesterov) momentum, as torch.optim.SGD. */
class Sgd : public Optimizer {
 public:
  Sgd(std::vector<autodiff::Tensor> params, SgdOptions options);
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

 private:
  void apply() override;
  SgdOptions options_;
  std::vector<autodiff::MatrixF> velocity_;
};

/** Adam / AdamW with bias correction, as torch.optim.Adam and AdamW. */
class Adam : public Optimizer {
 public:
  Adam(std::vector<autodiff::Tensor> params, AdamOptions options);
  double lr() const override { return options_.lr; }
  void set_lr(double lr) override { options_.lr = lr; }
  int64_t steps() const { return steps_; }
  nlohmann::json state() const override;
  void load_state(const nlohmann::json& state) override;

 private:
  void apply() override;
  AdamOptions options_;
  int64_t steps_ = 0;
  std::vector<autodiff::MatrixF> m_, v_;
};

/** Scales all gradients so their joint L2 norm is at most max_norm; returns the norm before. */
double clip_grad_norm(const std::vector<autodiff::Tensor>& params, double max_norm);

/** Learning rate as a function of the step: constant, linear warm-up then cosine or step decay. */
struct LrSchedule {
  enum class Kind { constant, warmup_cosine, step_decay };
  Kind kind = Kind::constant;
  double base_lr = 1e-3;
  int64_t warmup_steps = 0;   // linear ramp from 0 (warmup_cosine)
  int64_t total_steps = 1;    // cosine reaches min_lr here
  double min_lr = 0;
  int64_t decay_every = 1;    // step_decay: multiply by gamma every decay_every steps
  double gamma = 0.1;

  /** The learning rate at `step` (0-based). */
  double lr_at(int64_t step) const;
};

}  // namespace placelab::nn
