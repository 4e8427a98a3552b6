// Tests of the shared RL parts: masked sampling, advantages, the PPO and REINFORCE losses against hand
// computations, rewards (memory penalty, throughput objective), parallel evaluation, optimiser state,
// and the trainer driving a toy learner (one softmax per unit over devices): it beats random placement,
// the memory penalty changes its choice, and k steps + resume equals an uninterrupted run.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "graphs/zoo/zoo.h"
#include "policy/nn/module.h"
#include "policy/nn/optim.h"
#include "policy/placer.h"
#include "policy/rl/comm.h"
#include "policy/rl/pg.h"
#include "policy/rl/replicas.h"
#include "policy/rl/reward.h"
#include "policy/rl/trainer.h"
#include "sim/pipeline.h"
#include "sim/presets.h"
#include "tests/test_util.h"

using namespace placelab;
using autodiff::Mask;
using autodiff::MatrixF;
using autodiff::Tensor;
using placelab::testing::error_of;

namespace {

// One softmax over devices per unit, trained by REINFORCE with a moving baseline or by PPO.
class ToyLearner : public rl::Learner {
 public:
  ToyLearner(const rl::Task& task, uint64_t seed, bool ppo = false, int32_t rollouts = 8)
      : rng_(seed), ppo_(ppo), rollouts_(rollouts) {
    logits_ = nn::constant_param<float>(task.problem->num_units(), task.problem->num_devices(), 0.0F);
    params_ = {{"logits", logits_}};
    optimizer_ = std::make_unique<nn::Adam>(nn::tensors_of(params_), nn::AdamOptions{.lr = 0.1});
  }
  std::string name() const override { return "toy"; }
  nlohmann::json options() const override { return {{"ppo", ppo_}, {"rollouts", rollouts_}}; }

  rl::StepStats train_step(const rl::Task& task, int64_t) override {
    const learned::Problem& problem = *task.problem;
    std::vector<std::vector<int32_t>> choices, placements;
    std::vector<double> logp_old;
    for (int32_t k = 0; k < rollouts_; ++k) {
      const rl::Sampled s = rl::sample_rows(logits_.value(), &problem.allowed(), rng_);
      double total = 0;
      for (double l : s.logp) total += l;
      logp_old.push_back(total);
      choices.push_back(s.choice);
      placements.push_back(problem.expand(s.choice));
    }
    const rl::Evaluation evaluation = rl::evaluate(task, placements);
    rl::StepStats stats;
    rl::record_rollouts(evaluation, placements, stats);
    const std::vector<double> advantages = ppo_ ? rl::normalize(evaluation.reward) : baseline_.advantages(evaluation.reward);
    for (int epoch = 0; epoch < (ppo_ ? 2 : 1); ++epoch) {
      const Tensor log_probs = autodiff::log_softmax_rows(logits_, &problem.allowed());
      std::vector<Tensor> per_rollout;
      for (const auto& c : choices) per_rollout.push_back(rl::log_prob(log_probs, c));
      const Tensor logp = autodiff::concat_rows(per_rollout);
      const Tensor loss = ppo_ ? rl::ppo_loss(logp, logp_old, advantages) : rl::reinforce_loss(logp, advantages);
      const Tensor ent = rl::entropy(log_probs);
      optimizer_->zero_grad();
      autodiff::backward(autodiff::sub(loss, autodiff::mul_scalar(ent, 0.01F)));
      optimizer_->step();
      stats.loss = loss.item();
      stats.entropy = ent.item();
    }
    return stats;
  }

  std::vector<int32_t> place(const rl::Task& task) override {
    return task.problem->expand(rl::argmax_rows(logits_.value(), &task.problem->allowed()));
  }
  nlohmann::json state() const override {
    return {{"params", nn::parameters_to_json(params_)},
            {"optimizer", rl::optimizer_state(*optimizer_)},
            {"rng", rl::rng_state(rng_)},
            {"baseline", baseline_.state()}};
  }
  void load_state(const nlohmann::json& state) override {
    nn::parameters_from_json(state.at("params"), "toy state", params_);
    rl::load_optimizer_state(*optimizer_, state.at("optimizer"));
    rl::load_rng_state(rng_, state.at("rng").get<std::string>(), "test state: rng");
    baseline_.load_state(state.at("baseline"));
  }
  const MatrixF& logits() const { return logits_.value(); }

 private:
  std::mt19937_64 rng_;
  bool ppo_;
  int32_t rollouts_;
  Tensor logits_;
  nn::ParamList<float> params_;
  std::unique_ptr<nn::Adam> optimizer_;
  rl::MovingBaseline baseline_{0.8};
};

// The toy, gone wrong from step `from` on, as a learner whose learning rate is far too high: its state
// holds NaN from that step, and the losses it reports from the next one.
class DivergingLearner : public ToyLearner {
 public:
  DivergingLearner(const rl::Task& task, int64_t from) : ToyLearner(task, 3), from_(from) {}
  rl::StepStats train_step(const rl::Task& task, int64_t step) override {
    rl::StepStats stats = ToyLearner::train_step(task, step);
    if (step > from_) stats.loss = std::numeric_limits<double>::quiet_NaN();
    diverged_ = diverged_ || step >= from_;
    return stats;
  }
  nlohmann::json state() const override {
    nlohmann::json s = ToyLearner::state();
    if (diverged_) s["baseline"]["mean"] = std::numeric_limits<double>::quiet_NaN();
    return s;
  }

 private:
  int64_t from_;
  bool diverged_ = false;
};

rl::Task dag_task(int ops = 24, const std::string& cluster = "v100-nvlink-4") {
  auto graph = std::make_shared<const graphs::Graph>(
      graphs::zoo::make_model("random_dag", {{"ops", ops}, {"width", 4}, {"seed", 5}}));
  auto c = std::make_shared<const sim::Cluster>(sim::make_preset(cluster));
  return rl::make_task("dag on " + cluster, graph, c);
}

// Two devices: device 0 is 4x faster but has 1 GB; the middle op of a chain holds 4 GB of parameters.
rl::Task memory_task(const rl::RewardOptions& reward) {
  sim::ClusterSpec spec = sim::make_preset("v100-nvlink-2").spec();
  spec.devices[0].memory_bytes = 1e9;
  spec.devices[1].peak_flops_per_s /= 4;
  spec.devices[1].memory_bandwidth_bytes_per_s /= 4;
  graphs::GraphBuilder b("big_middle");
  b.add_op({.name = "in", .type = "MatMul", .flops = 1e9, .output_bytes = 1e6});
  b.add_op({.name = "big", .type = "MatMul", .flops = 1e12, .output_bytes = 1e6, .param_bytes = 4e9});
  b.add_op({.name = "out", .type = "MatMul", .flops = 1e9, .output_bytes = 1e6});
  b.add_edge(0, 1, 1e6);
  b.add_edge(1, 2, 1e6);
  return rl::make_task("big_middle", std::make_shared<const graphs::Graph>(std::move(b).build()),
                       std::make_shared<const sim::Cluster>(std::move(spec)), reward);
}

std::vector<int32_t> random_placement(const rl::Task& task, std::mt19937_64& rng) {
  std::vector<int32_t> unit_device(task.problem->num_units());
  for (auto& d : unit_device) d = static_cast<int32_t>(rng() % static_cast<uint64_t>(task.problem->num_devices()));
  return task.problem->expand(unit_device);
}

// A fresh directory under the system's temporary folder, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() / ("placelab_rl_test_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string str(const std::string& sub = "") const { return sub.empty() ? path.string() : (path / sub).string(); }
};

std::vector<nlohmann::json> log_lines_without_wall(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> out;
  for (std::string line; std::getline(in, line);) {
    nlohmann::json entry = nlohmann::json::parse(line);
    entry.erase("wall_s");
    out.push_back(entry);
  }
  return out;
}

}  // namespace

TEST_CASE("rl::sample_rows: masks, frequencies, log-probabilities and determinism", "[rl]") {
  MatrixF logits(3, 4);
  logits << 0.5F, -1.0F, 2.0F, 0.0F,  //
      1.0F, 1.0F, 1.0F, 1.0F,         //
      -3.0F, 0.25F, 4.0F, 0.5F;
  Mask allowed = Mask::Constant(3, 4, true);
  allowed(0, 2) = false;
  allowed(2, 2) = false;
  allowed(2, 0) = false;
  std::mt19937_64 rng(7);
  std::vector<std::vector<int>> counts(3, std::vector<int>(4, 0));
  const int draws = 20000;
  for (int i = 0; i < draws; ++i) {
    const rl::Sampled s = rl::sample_rows(logits, &allowed, rng);
    for (int r = 0; r < 3; ++r) {
      REQUIRE(allowed(r, s.choice[r]));
      ++counts[r][s.choice[r]];
      // logp is the masked log-softmax of the chosen entry.
      double z = 0;
      for (int c = 0; c < 4; ++c) z += allowed(r, c) ? std::exp(static_cast<double>(logits(r, c))) : 0;
      REQUIRE(s.logp[r] == Approx(logits(r, s.choice[r]) - std::log(z)).margin(1e-9));
    }
  }
  // Row 0 keeps columns 0, 1, 3 with weights e^0.5, e^-1, e^0.
  const double z0 = std::exp(0.5) + std::exp(-1.0) + 1;
  CHECK(counts[0][0] / double(draws) == Approx(std::exp(0.5) / z0).margin(0.015));
  CHECK(counts[0][3] / double(draws) == Approx(1 / z0).margin(0.015));
  CHECK(counts[1][2] / double(draws) == Approx(0.25).margin(0.015));

  std::mt19937_64 a(3), b(3);
  for (int i = 0; i < 5; ++i) CHECK(rl::sample_rows(logits, &allowed, a).choice == rl::sample_rows(logits, &allowed, b).choice);
  CHECK(rl::argmax_rows(logits, &allowed) == std::vector<int32_t>{0, 0, 3});  // row 1 ties: lowest index
  CHECK(rl::argmax_rows(logits, nullptr) == std::vector<int32_t>{2, 0, 2});

  Mask none = allowed;
  none.row(1).setConstant(false);
  CHECK(error_of([&] { rl::sample_rows(logits, &none, rng); }).find("row 1 allows no column") != std::string::npos);
  const Mask wrong = Mask::Constant(2, 4, true);
  CHECK(error_of([&] { rl::argmax_rows(logits, &wrong); }).find("mask is [2, 4]") != std::string::npos);
}

TEST_CASE("rl::normalize and MovingBaseline", "[rl]") {
  const std::vector<double> a = {1, 2, 3, 6};
  const std::vector<double> n = rl::normalize(a);
  double mean = 0, sq = 0;
  for (double x : n) mean += x / 4;
  for (double x : n) sq += (x - mean) * (x - mean) / 4;
  CHECK(mean == Approx(0).margin(1e-12));
  CHECK(sq == Approx(1).epsilon(1e-6));
  CHECK(n[3] == Approx((6 - 3) / std::sqrt(3.5)).epsilon(1e-7));
  CHECK(rl::normalize(std::vector<double>{5}) == std::vector<double>{0});
  CHECK(rl::normalize(std::vector<double>{}).empty());

  rl::MovingBaseline baseline(0.5);
  CHECK(baseline.advantages(std::vector<double>{1, 3}) == std::vector<double>{-1, 1});  // starts at the first mean
  CHECK(baseline.value() == 2);
  CHECK(baseline.advantages(std::vector<double>{4, 6}) == std::vector<double>{2, 4});
  CHECK(baseline.value() == 3.5);  // 0.5 * 2 + 0.5 * 5
  rl::MovingBaseline restored(0.5);
  restored.load_state(nlohmann::json::parse(baseline.state().dump()));
  CHECK(restored.advantages(std::vector<double>{1}) == baseline.advantages(std::vector<double>{1}));
  rl::MovingBaseline other(0.9);
  CHECK(error_of([&] { other.load_state(baseline.state()); }).find("decay") != std::string::npos);
}

TEST_CASE("rl::ppo_loss and reinforce_loss: values and gradients by hand, clipping included", "[rl]") {
  // Ratios e^0.1 (A = 1, inside the clip range), e^0.5 (A = 2, clipped at 1.2), e^-0.5 (A = -1, clipped at
  // 0.8), e^0.5 (A = -1: the unclipped term is smaller, so it counts with its gradient).
  const std::vector<double> old = {-1.0, -2.0, -0.5, -1.5};
  const std::vector<double> adv = {1, 2, -1, -1};
  MatrixF v(4, 1);
  v << -0.9F, -1.5F, -1.0F, -1.0F;
  const Tensor logp = Tensor::leaf(v, true);
  const Tensor loss = rl::ppo_loss(logp, old, adv, 0.2);
  std::vector<double> r(4);
  for (int i = 0; i < 4; ++i) r[i] = std::exp(static_cast<double>(v(i, 0)) - old[i]);
  const double expected = -(r[0] * 1 + 1.2 * 2 + 0.8 * -1 + r[3] * -1) / 4;
  CHECK(loss.item() == Approx(expected).epsilon(1e-6));
  autodiff::backward(loss);
  CHECK(logp.grad()(0, 0) == Approx(-r[0] / 4).epsilon(1e-6));
  CHECK(logp.grad()(1, 0) == 0);
  CHECK(logp.grad()(2, 0) == 0);
  CHECK(logp.grad()(3, 0) == Approx(r[3] / 4).epsilon(1e-6));

  const Tensor logp2 = Tensor::leaf(v, true);
  const Tensor reinforce = rl::reinforce_loss(logp2, adv);
  CHECK(reinforce.item() == Approx(-(-0.9 * 1 + -1.5 * 2 + -1.0 * -1 + -1.0 * -1) / 4).epsilon(1e-6));
  autodiff::backward(reinforce);
  for (int i = 0; i < 4; ++i) CHECK(logp2.grad()(i, 0) == Approx(-adv[i] / 4).epsilon(1e-6));

  CHECK(error_of([&] { rl::ppo_loss(logp, std::vector<double>{1}, adv); }).find("old log-probabilities") !=
        std::string::npos);
  CHECK(error_of([&] { rl::reinforce_loss(logp, std::vector<double>{1, 2}); }).find("[N, 1]") != std::string::npos);
}

TEST_CASE("rl::log_prob and entropy of masked rows", "[rl]") {
  MatrixF logits = MatrixF::Zero(2, 4);
  Mask allowed = Mask::Constant(2, 4, true);
  allowed(1, 0) = allowed(1, 1) = false;
  const Tensor x = Tensor::leaf(logits, true);
  const Tensor lp = autodiff::log_softmax_rows(x, &allowed);
  CHECK(rl::log_prob(lp, {3, 2}).item() == Approx(std::log(0.25) + std::log(0.5)));
  CHECK(rl::entropy(lp).item() == Approx((std::log(4.0) + std::log(2.0)) / 2));
}

TEST_CASE("rl::reward: memory penalty ordering and options", "[rl]") {
  const rl::RewardOptions options;
  auto fits = [](double cost) { return rl::Score{cost, false, 0, 10e9}; };
  auto oom = [](double cost, double excess) { return rl::Score{cost, true, excess, 10e9}; };
  CHECK(rl::reward(fits(4), 4, options) == -1);
  CHECK(rl::reward(fits(1), 4, options) == -0.5);
  // Any OOM is worse than a fitting placement of the same (or twice the) cost; less excess is better.
  CHECK(rl::reward(oom(1, 1e6), 1, options) < rl::reward(fits(1), 1, options));
  CHECK(rl::reward(oom(1, 1e6), 1, options) < rl::reward(fits(2), 1, options));
  CHECK(rl::reward(oom(1, 1e9), 1, options) < rl::reward(oom(1, 1e6), 1, options));
  CHECK(rl::reward(oom(1, 5e9), 1, options) == Approx(-1 - (1 + 0.5)));
  CHECK(rl::reward(oom(1, 5e9), 1, {.oom_penalty = 0}) == rl::reward(fits(1), 1, options));
  CHECK(error_of([&] { rl::reward(fits(1), 0, options); }).find("reference") != std::string::npos);

  const rl::RewardOptions parsed =
      rl::reward_options_from_json({{"objective", "throughput"}, {"oom_penalty", 2.5}}, "placer gdp options.reward");
  CHECK(parsed.objective == rl::Objective::throughput);
  CHECK(parsed.oom_penalty == 2.5);
  CHECK(rl::to_json(parsed) == nlohmann::json{{"objective", "throughput"}, {"oom_penalty", 2.5}});
  const std::string bad = error_of([] { rl::reward_options_from_json({{"objective", "speed"}}, "placer gdp options.reward"); });
  CHECK(bad.find("placer gdp options.reward") != std::string::npos);
  CHECK(bad.find("step_time, throughput") != std::string::npos);
  CHECK(error_of([] { rl::reward_options_from_json({{"penalty", 1}}, "x"); }).find("penalty") != std::string::npos);
}

TEST_CASE("rl::evaluate equals one-by-one simulation and reward, throughput is max_load", "[rl]") {
  const rl::Task task = dag_task();
  // The reference is the cheaper of single_device and round_robin.
  double reference_s = std::numeric_limits<double>::infinity();
  for (const char* name : {"single_device", "round_robin"}) {
    const auto device_of = policy::make_placer(name)->place(policy::PlaceRequest{*task.simulator}).device_of;
    reference_s = std::min(reference_s, task.simulator->simulate(device_of).step_time_s);
  }
  CHECK(task.reference_s == reference_s);
  std::mt19937_64 rng(11);
  std::vector<std::vector<int32_t>> placements;
  for (int i = 0; i < 12; ++i) placements.push_back(random_placement(task, rng));
  for (rl::Objective objective : {rl::Objective::step_time, rl::Objective::throughput}) {
    const rl::RewardOptions options{.objective = objective};
    const rl::Evaluation evaluation = rl::evaluate(task, placements, options);
    REQUIRE(evaluation.reward.size() == placements.size());
    for (size_t i = 0; i < placements.size(); ++i) {
      const sim::SimResult result = task.simulator->simulate(placements[i]);
      CHECK(evaluation.reward[i] == rl::reward(*task.simulator, placements[i], result, task.reference_s, options));
      const double cost = objective == rl::Objective::throughput
                              ? sim::max_load(*task.simulator, placements[i]).max_load_s
                              : result.step_time_s;
      CHECK(evaluation.cost_s[i] == cost);
      CHECK(rl::cost_s(*task.simulator, placements[i], result, options) == cost);
    }
  }
  // The task's own reward options are the default of evaluate.
  CHECK(rl::evaluate(task, placements).reward == rl::evaluate(task, placements, task.reward).reward);
  rl::StepStats stats;
  const rl::Evaluation evaluation = rl::evaluate(task, placements);
  rl::record_rollouts(evaluation, placements, stats);
  CHECK(stats.rollouts == 12);
  CHECK(stats.best_cost_s == *std::min_element(evaluation.cost_s.begin(), evaluation.cost_s.end()));
}

TEST_CASE("rl optimiser state: Adam and SGD continue identically after save and load", "[rl]") {
  auto run = [](auto make, int before, int after, bool reload) {
    std::mt19937_64 rng(4);
    nn::ParamList<float> params = {{"w", nn::uniform_param<float>(3, 2, 1.0, rng)}, {"b", nn::uniform_param<float>(1, 2, 1.0, rng)},
                                   {"unused", nn::uniform_param<float>(2, 2, 1.0, rng)}};
    auto optimizer = make(nn::tensors_of(params));
    const auto step = [&](int i) {
      optimizer->zero_grad();
      const Tensor x = Tensor::leaf(MatrixF::Constant(4, 3, 0.1F * static_cast<float>(i + 1)));
      autodiff::backward(autodiff::sum(autodiff::square(autodiff::add(autodiff::matmul(x, params[0].tensor), params[1].tensor))));
      optimizer->step();
    };
    for (int i = 0; i < before; ++i) step(i);
    if (reload) {
      const std::string saved_params = nn::parameters_to_json(params).dump(), saved = rl::optimizer_state(*optimizer).dump();
      std::mt19937_64 other(99);
      params = {{"w", nn::uniform_param<float>(3, 2, 1.0, other)}, {"b", nn::uniform_param<float>(1, 2, 1.0, other)},
                {"unused", nn::uniform_param<float>(2, 2, 1.0, other)}};
      optimizer = make(nn::tensors_of(params));
      nn::parameters_from_json(nlohmann::json::parse(saved_params), "saved", params);
      rl::load_optimizer_state(*optimizer, nlohmann::json::parse(saved));
    }
    for (int i = before; i < before + after; ++i) step(i);
    return std::make_pair(params[0].tensor.value(), params[1].tensor.value());
  };
  auto adam = [](std::vector<Tensor> p) { return std::make_unique<nn::Adam>(std::move(p), nn::AdamOptions{.lr = 0.05}); };
  auto sgd = [](std::vector<Tensor> p) {
    return std::make_unique<nn::Sgd>(std::move(p), nn::SgdOptions{.lr = 0.01, .momentum = 0.9});
  };
  CHECK(run(adam, 3, 4, false) == run(adam, 3, 4, true));
  CHECK(run(sgd, 3, 4, false) == run(sgd, 3, 4, true));
  CHECK(run(adam, 3, 4, false) != run(adam, 2, 4, false));  // the comparison sees a lost step

  std::mt19937_64 rng(1);
  nn::Adam a({nn::uniform_param<float>(2, 2, 1.0, rng)}, {});
  nn::Sgd s({nn::uniform_param<float>(2, 2, 1.0, rng)}, {});
  CHECK(error_of([&] { a.load_state(s.state()); }).find("kind") != std::string::npos);
  nlohmann::json wrong = a.state();
  wrong["m"] = nlohmann::json::array({std::vector<float>{1, 2, 3}});
  wrong["v"] = wrong["m"];
  CHECK(error_of([&] { a.load_state(wrong); }).find("has 3 numbers but parameter 0 has 4") != std::string::npos);
  wrong["m"] = nlohmann::json::array();
  CHECK(error_of([&] { a.load_state(wrong); }).find("has 0 entries but the optimiser has 1") != std::string::npos);

  std::mt19937_64 g(5);
  g();
  std::mt19937_64 h;
  rl::load_rng_state(h, rl::rng_state(g), "h");
  CHECK(g() == h());
  CHECK(error_of([&] { rl::load_rng_state(h, "1 2 3", "ck.json: learner.rng"); })
            .starts_with("ck.json: learner.rng: is not a saved random generator state"));
  CHECK(error_of([&] { rl::load_rng_state(h, rl::rng_state(g) + " 7", "rng"); }).find("random generator state") != std::string::npos);
  std::string zeros;
  for (int i = 0; i < 312; ++i) zeros += "0 ";
  CHECK(error_of([&] { rl::load_rng_state(h, zeros + "0", "rng"); }).find("random generator state") != std::string::npos);

  // Saved floats beyond a float's range are an error, not inf.
  nlohmann::json huge = a.state();
  huge["m"] = nlohmann::json::array({std::vector<double>{1, 2, 1e39, 4}});
  huge["v"] = huge["m"];
  CHECK(error_of([&] { a.load_state(huge); }).find("m[0][2]: is 1e+39, beyond a float's range") != std::string::npos);
  nlohmann::json params = nn::parameters_to_json(nn::ParamList<float>{{"w", nn::uniform_param<float>(2, 2, 1.0, rng)}});
  params["params"][0]["data"][1] = -1e39;
  CHECK(error_of([&] {
          nn::parameters_from_json(params, "p", nn::ParamList<float>{{"w", nn::uniform_param<float>(2, 2, 1.0, rng)}});
        }).find("beyond a float's range") != std::string::npos);
}

TEST_CASE("rl data-parallel pieces: tasks per rank, and a single process is rank 0 of 1", "[rl]") {
  // A step of N ranks covers N consecutive tasks; one rank trains on step mod tasks.
  CHECK(rl::task_of(5, 0, 1, 3) == 2);
  CHECK(rl::task_of(0, 1, 2, 3) == 1);
  CHECK(rl::task_of(1, 0, 2, 3) == 2);
  CHECK(rl::task_of(1, 1, 2, 3) == 0);
  // Not started by a launcher (ctest): every exchange leaves its data as it is.
  rl::comm::init();
  CHECK(rl::comm::rank() == 0);
  CHECK(rl::comm::size() == 1);
  std::vector<float> values = {1.5f, -2.0f};
  rl::comm::sum(values, "test");
  CHECK(values == std::vector<float>{1.5f, -2.0f});
  CHECK(rl::comm::any(true, "test"));
  CHECK(!rl::comm::any(false, "test"));
  std::string text = "rank 0";
  rl::comm::broadcast(text, "test");
  CHECK(text == "rank 0");
}

TEST_CASE("rl::train: a toy learner beats random placement and the memory penalty changes its choice", "[rl]") {
  const rl::Task task = dag_task();
  std::mt19937_64 rng(2);
  double random_mean_s = 0;
  for (int i = 0; i < 32; ++i) random_mean_s += task.simulator->simulate(random_placement(task, rng)).step_time_s / 32;
  for (bool ppo : {false, true}) {
    ToyLearner learner(task, 3, ppo);
    const double before_s = task.simulator->simulate(learner.place(task)).step_time_s;
    rl::TrainOptions options;
    options.steps = 60;
    const rl::TrainSummary summary = rl::train(learner, {task}, options);
    CHECK(summary.steps == 60);
    const double after_s = task.simulator->simulate(learner.place(task)).step_time_s;
    INFO("ppo " << ppo << ": random mean " << random_mean_s << " s, before " << before_s << " s, after " << after_s
                << " s, best rollout " << summary.best_cost_s[0] << " s");
    CHECK(after_s < random_mean_s);
    CHECK(summary.best_cost_s[0] == task.simulator->simulate(summary.best_placement[0]).step_time_s);
  }

  // A callback that returns false, or a time limit, ends the run after the current step.
  ToyLearner stopped(task, 3);
  std::vector<int64_t> seen;
  rl::TrainOptions limits;
  limits.steps = 50;
  CHECK(rl::train(stopped, {task}, limits, [&](const rl::LogEntry& e) {
          seen.push_back(e.step);
          return e.step < 2;
        }).steps == 3);
  CHECK(seen == std::vector<int64_t>{0, 1, 2});
  limits.minutes = 1e-9;
  CHECK(rl::train(stopped, {task}, limits).steps == 1);

  // With no memory penalty the fast small device wins the 4 GB op (and runs out of memory); with it, the
  // policy moves that op to the slower device that holds it.
  for (double penalty : {0.0, 1.0}) {
    const rl::Task t = memory_task({.oom_penalty = penalty});
    ToyLearner learner(t, 5);
    rl::TrainOptions options;
    options.steps = 40;
    rl::train(learner, {t}, options);
    const std::vector<int32_t> placement = learner.place(t);
    INFO("penalty " << penalty << ": logits " << learner.logits());
    CHECK(placement[1] == (penalty == 0 ? 0 : 1));
    CHECK(t.simulator->simulate(placement).oom == (penalty == 0));
  }
}

TEST_CASE("rl::train: k steps, a checkpoint and a resume equal an uninterrupted run", "[rl]") {
  // One graph on two clusters of two devices: the toy's per-unit logits fit both, and steps alternate.
  const std::vector<rl::Task> tasks = {dag_task(20, "v100-nvlink-2"), dag_task(20, "v100-pcie-2")};
  TempDir straight_dir("straight"), resumed_dir("resumed");
  rl::TrainOptions options;
  options.steps = 9;
  options.checkpoint_every = 4;
  options.checkpoint_dir = straight_dir.str();
  auto fresh = [&] { return ToyLearner(tasks[0], 8, true); };
  ToyLearner straight = fresh();
  std::vector<std::string> progress;
  const rl::TrainSummary a = rl::train(straight, tasks, options, {}, [&](std::string_view s) {
    progress.emplace_back(s);
  });
  CHECK(!progress.empty());
  CHECK(progress.back().find("step 9/9") != std::string::npos);

  options.checkpoint_dir = resumed_dir.str();
  options.steps = 5;
  {
    ToyLearner first = fresh();
    rl::train(first, tasks, options);
  }
  // A crash after the checkpoint leaves later and half-written lines: resume cuts them.
  {
    std::ofstream log(resumed_dir.str("log.jsonl"), std::ios::app);
    log << R"({"step": 5, "task": "x", "reward": 0})" << "\n" << R"({"step": 6, "ta)";
  }
  options.steps = 9;
  options.resume = true;
  ToyLearner resumed = fresh();
  const rl::TrainSummary b = rl::train(resumed, tasks, options);

  CHECK(resumed.state() == straight.state());
  CHECK(resumed.state().dump() == straight.state().dump());
  CHECK(b.steps == 9);
  CHECK(b.best_cost_s == a.best_cost_s);
  CHECK(b.best_placement == a.best_placement);
  CHECK(b.best_step == a.best_step);
  const auto lines = log_lines_without_wall(resumed_dir.str("log.jsonl"));
  CHECK(lines.size() == 9);
  CHECK(lines == log_lines_without_wall(straight_dir.str("log.jsonl")));
  const nlohmann::json checkpoint = rl::read_checkpoint(resumed_dir.str());
  CHECK(checkpoint["step"] == 9);
  CHECK(checkpoint["policy"] == "toy");
  CHECK(checkpoint["learner"] == straight.state());

  // Resuming a finished run does nothing; a fresh run refuses to overwrite; mismatches name the fix.
  ToyLearner again = fresh();
  CHECK(rl::train(again, tasks, options).steps == 9);
  CHECK(again.state() == straight.state());
  options.resume = false;
  CHECK(error_of([&] { auto l = fresh(); rl::train(l, tasks, options); }).find("--resume") != std::string::npos);
  options.resume = true;
  options.steps = 12;
  CHECK(error_of([&] { auto l = ToyLearner(tasks[0], 8, false); rl::train(l, tasks, options); })
            .find("checkpoint's options") != std::string::npos);
  CHECK(error_of([&] { auto l = fresh(); rl::train(l, {tasks[1], tasks[0]}, options); }).find("same graphs") !=
        std::string::npos);
  TempDir empty("empty");
  options.checkpoint_dir = empty.str();
  CHECK(error_of([&] { auto l = fresh(); rl::train(l, tasks, options); }).find("no checkpoint there") !=
        std::string::npos);
}

TEST_CASE("rl::train: a run that diverges stops with an error and keeps its last good checkpoint", "[rl]") {
  // It used to train on NaN to the end and write a checkpoint (NaN as null) that nothing could read back.
  const rl::Task task = dag_task(12, "v100-nvlink-2");
  TempDir dir("diverging");
  rl::TrainOptions options{.steps = 10, .checkpoint_dir = dir.str(), .checkpoint_every = 1};
  DivergingLearner saving(task, 2);  // its state goes bad in step 2, saved at its end
  CHECK_THAT(error_of([&] { rl::train(saving, {task}, options); }),
             Catch::Contains("the checkpoint of step 3 is not written: learner.baseline.mean is not a finite number") &&
                 Catch::Contains("lower the learning rate"));
  CHECK(rl::read_checkpoint(dir.str())["step"] == 2);  // the last good one, readable
  CHECK_FALSE(std::filesystem::exists(dir.str("lock")));  // a run that failed removes its lock file too

  options.checkpoint_every = 100;
  options.resume = true;
  DivergingLearner reporting(task, 3);  // resumes at step 2; its loss is NaN at step 4, before any save
  CHECK_THAT(error_of([&] { rl::train(reporting, {task}, options); }),
             Catch::Contains("training diverged at step 4 (dag on v100-nvlink-2): the loss is nan") &&
                 Catch::Contains("the last checkpoint in " + dir.str() + " is kept"));
  CHECK(rl::read_checkpoint(dir.str())["step"] == 2);
}

TEST_CASE("rl::train resume: changed files, damaged logs, a second run at once, and the seed", "[rl]") {
  const rl::Task task = dag_task(20, "v100-nvlink-2");
  TempDir dir("resume_checks");
  rl::TrainOptions options;
  options.steps = 4;
  options.seed = 7;
  options.checkpoint_dir = dir.str();
  {
    ToyLearner first(task, 8);
    CHECK(rl::train(first, {task}, options).seed == 7);
  }
  options.steps = 6;
  options.resume = true;
  auto resume = [&](const rl::Task& t) {
    ToyLearner l(task, 8);
    return rl::train(l, {t}, options);
  };

  // The same task name on another graph, or on a cluster of slower GPUs, is not the run that was saved.
  const rl::Task other_graph = rl::make_task(task.name, std::make_shared<const graphs::Graph>(graphs::zoo::make_model(
                                                            "random_dag", {{"ops", 20}, {"width", 4}, {"seed", 6}})),
                                             task.cluster);
  sim::ClusterSpec slower = task.cluster->spec();
  for (auto& device : slower.devices) device.peak_flops_per_s /= 10;
  const rl::Task other_cluster =
      rl::make_task(task.name, task.graph, std::make_shared<const sim::Cluster>(std::move(slower)));
  CHECK(error_of([&] { resume(other_graph); }).find("a file changed since the checkpoint") != std::string::npos);
  CHECK(error_of([&] { resume(other_cluster); }).find("fingerprint") != std::string::npos);

  // A log damaged before the checkpoint's step is an error naming the line; nothing is dropped silently.
  const std::string log = dir.str("log.jsonl");
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  in.close();
  std::ofstream(log) << placelab::testing::replace_once(text.str(), "{\"best_cost_s\"", "garbage{\"best_cost_s\"");
  CHECK(error_of([&] { resume(task); }).find("log.jsonl:1: is not a log line") != std::string::npos);
  std::ofstream(log) << text.str().substr(0, text.str().find('\n') + 1);
  CHECK(error_of([&] { resume(task); }).find("has steps 0 to 0 only but the checkpoint is at step 4") !=
        std::string::npos);
  std::ofstream(log) << text.str();

  // A finished run leaves no lock file; a second run on the directory while the first holds it is refused.
  CHECK_FALSE(std::filesystem::exists(dir.str("lock")));
  {
    const int fd = ::open(dir.str("lock").c_str(), O_RDWR | O_CREAT, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
    CHECK(error_of([&] { resume(task); }).find("another training run is using this directory") != std::string::npos);
    ::close(fd);
  }

  // A resumed run keeps the seed it started with, whatever it is given now.
  options.seed = 99;
  const rl::TrainSummary resumed = resume(task);
  CHECK(resumed.steps == 6);
  CHECK(resumed.seed == 7);
  CHECK(rl::read_checkpoint(dir.str())["trainer"]["seed"] == 7);
  CHECK(log_lines_without_wall(log).size() == 6);

  // Saved bests that cannot be this task's are refused.
  const std::string file = dir.str("checkpoint.json");
  nlohmann::json doc = rl::read_checkpoint(file);
  nlohmann::json& best = doc["trainer"]["tasks"][0];
  REQUIRE(best["best_placement"].size() == 20);
  best["best_placement"][3] = 2;
  placelab::io::write_json_atomic(file, doc, -1);
  options.steps = 8;
  CHECK(error_of([&] { resume(task); }).find("best_placement[3]: is 2, expected a device in 0..1") != std::string::npos);
  best["best_placement"] = nlohmann::json::array({0, 1});
  placelab::io::write_json_atomic(file, doc, -1);
  CHECK(error_of([&] { resume(task); }).find("has 2 entries, expected 20") != std::string::npos);
}

TEST_CASE("rl checkpoints: malformed files fail with the file and the fix", "[rl]") {
  TempDir dir("malformed");
  std::filesystem::create_directories(dir.path);
  const rl::Task task = dag_task(12, "v100-nvlink-2");
  ToyLearner learner(task, 1);
  rl::save_checkpoint(dir.str("good"), learner, 3, {{"seed", 1}});
  const std::string good = dir.str("good/checkpoint.json");
  CHECK(rl::read_checkpoint(dir.str("good"))["step"] == 3);
  CHECK(rl::read_checkpoint(good)["policy"] == "toy");
  std::ifstream in(good);
  std::stringstream text;
  text << in.rdbuf();
  const auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir.str(name)) << content;
    return dir.str(name);
  };
  using placelab::testing::replace_once;
  const std::string wrong_format = write("f.json", replace_once(text.str(), "placelab.checkpoint", "placelab.params"));
  CHECK(error_of([&] { rl::read_checkpoint(wrong_format); }).find(wrong_format) != std::string::npos);
  std::string versioned = text.str();  // the top-level version is the last key (nlohmann sorts them)
  versioned.replace(versioned.rfind("\"version\":1"), 11, "\"version\":7");
  const std::string wrong_version = write("v.json", versioned);
  const std::string version_error = error_of([&] { rl::read_checkpoint(wrong_version); });
  CHECK(version_error.find(wrong_version) != std::string::npos);
  CHECK(version_error.find("7") != std::string::npos);
  const std::string truncated = write("t.json", text.str().substr(0, text.str().size() / 2));
  const std::string truncated_error = error_of([&] { rl::read_checkpoint(truncated); });
  CHECK(truncated_error.find(truncated) != std::string::npos);
  CHECK(truncated_error.find("truncated") != std::string::npos);
  const std::string unknown = write("u.json", replace_once(text.str(), "\"policy\":\"toy\"", "\"policy\":\"nope\""));
  const std::string unknown_error = error_of([&] { rl::load_learner(unknown); });
  CHECK(unknown_error.find(unknown) != std::string::npos);
  CHECK(unknown_error.find("unknown learned policy \"nope\"") != std::string::npos);
  const std::string extra = write("x.json", replace_once(text.str(), "\"step\":3", "\"step\":3,\"steps\":4"));
  CHECK(error_of([&] { rl::read_checkpoint(extra); }).find("steps") != std::string::npos);
  CHECK(error_of([&] { rl::read_checkpoint(dir.str("missing")); }).find("no checkpoint there") != std::string::npos);
  // A state of other shapes is refused by the learner, naming the parameter.
  const rl::Task bigger = dag_task(20, "v100-nvlink-2");
  ToyLearner other(bigger, 1);
  const std::string shape_error = error_of([&] { other.load_state(rl::read_checkpoint(good)["learner"]); });
  CHECK(shape_error.find("logits") != std::string::npos);
}

TEST_CASE("rl::learner_from_checkpoint: a seed restarts the random stream, none keeps the saved one", "[rl]") {
  TempDir dir("reseed");
  const auto saved = rl::make_learner("hdp", {{"rollouts", 2}}, 5);
  rl::save_checkpoint(dir.str(), *saved, 0, {{"seed", 5}});
  const nlohmann::json doc = rl::read_checkpoint(dir.str());
  const auto rng_of = [&](std::optional<uint64_t> seed) {
    return rl::learner_from_checkpoint(doc, "c", nlohmann::json::object(), seed)->state()["rng"];
  };
  CHECK(rng_of(std::nullopt) == doc["learner"]["rng"]);
  CHECK(rng_of(5) == doc["learner"]["rng"]);  // the run was seeded with 5
  CHECK(rng_of(1) != doc["learner"]["rng"]);
  CHECK(rng_of(1) == rng_of(1));
  CHECK(rng_of(1) != rng_of(2));
  // Only the stream changes: the trained parameters are the checkpoint's.
  CHECK(rl::learner_from_checkpoint(doc, "c", nlohmann::json::object(), 1)->state()["params"] == doc["learner"]["params"]);
}

TEST_CASE("rl::learner_from_init: a new run starts from a checkpoint's policy, on other tasks", "[rl]") {
  TempDir dir("init");
  const auto saved = rl::make_learner("hdp", {{"rollouts", 2}}, 5);
  rl::save_checkpoint(dir.str(), *saved, 7, {{"seed", 5}});
  const nlohmann::json doc = rl::read_checkpoint(dir.str());
  // The saved parameters, options given over the saved ones, the run's own random stream.
  const auto started = rl::learner_from_init(dir.str(), "hdp", {{"rollouts", 3}}, 1);
  CHECK(started->state()["params"] == doc["learner"]["params"]);
  CHECK(started->state()["rng"] != doc["learner"]["rng"]);
  CHECK(started->state()["rng"] == rl::learner_from_init(dir.str(), "hdp", nlohmann::json::object(), 1)->state()["rng"]);
  // Trained on tasks the checkpoint never saw, from step 0, the run's steps and checkpoint are its own.
  TempDir run("init_run");
  rl::TrainOptions options;
  options.steps = 2;
  options.checkpoint_dir = run.str();
  const rl::TrainSummary summary = rl::train(*started, {dag_task(20, "v100-pcie-2")}, options);
  CHECK(summary.steps == 2);
  CHECK(rl::read_checkpoint(run.str())["step"] == 2);
  CHECK(rl::read_checkpoint(run.str())["learner"]["params"] != doc["learner"]["params"]);
  // Another policy's checkpoint, a missing one, or an option that changes the architecture: errors naming the file.
  CHECK_THAT(error_of([&] { rl::learner_from_init(dir.str(), "gdp", nlohmann::json::object(), 1); }),
             Catch::Contains("checkpoint.json: policy: is \"hdp\" but this run trains gdp"));
  TempDir empty("init_empty");
  CHECK_THAT(error_of([&] { rl::learner_from_init(empty.str(), "hdp", nlohmann::json::object(), 1); }),
             Catch::Contains("no checkpoint there"));
  CHECK_THAT(error_of([&] { rl::learner_from_init(dir.str(), "hdp", {{"hidden", 7}}, 1); }),
             Catch::Contains("checkpoint.json"));
}
