// HDP and the grouped-policy machinery it shares with HSDAG: groups and their device masks (pinned
// members that share no device fall back to their own), valid and deterministic placements, training
// that beats random placement, and exact checkpoint resume.
#include <map>

#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/hdp.h"
#include "policy/learned/learners.h"
#include "policy/rl/trainer.h"
#include "sim/presets.h"
#include "tests/test_util.h"

#include "tests/policy/learned_util.h"

using namespace placelab;
using namespace placelab::testing;

namespace {

// Small enough for Debug + ASan: 8 groups, width 16, 6 rollouts.
const nlohmann::json kSmall = {{"groups", 8}, {"hidden", 16}, {"rollouts", 6}};

// The training graph of a small random DAG with every 5th forward op pinned to the CPU.
graphs::Graph pinned_training_graph() {
  return graphs::expand_training(with_pins(graphs::zoo::make_model("random_dag", {{"ops", 12}, {"seed", 5}}), "cpu"));
}

}  // namespace

TEST_CASE("learned::make_grouping: non-empty labels numbered by first item", "[learned]") {
  const std::vector<int32_t> labels = {3, 1, 3, 0, 1};
  const learned::Grouping g = learned::make_grouping(labels, 4);
  REQUIRE(g.groups() == 3);
  REQUIRE(g.group_of == std::vector<int32_t>{0, 1, 0, 2, 1});
  REQUIRE(g.members->offsets == std::vector<int32_t>{0, 2, 4, 5});
  REQUIRE(g.members->indices == std::vector<int32_t>{0, 2, 1, 4, 3});
  const std::vector<int32_t> bad = {0, 4};
  REQUIRE_THROWS_AS(learned::make_grouping(bad, 4), Error);
}

TEST_CASE("learned::block_prior: positions prefer the group whose block holds them", "[learned]") {
  const std::vector<double> position = {0.0, 0.3, 0.55, 1.0};
  const autodiff::MatrixF prior = learned::block_prior(position, 4, 1.0);
  REQUIRE(prior.rows() == 4);
  REQUIRE(prior.cols() == 4);
  const std::vector<Eigen::Index> expected = {0, 1, 2, 3};
  for (Eigen::Index i = 0; i < 4; ++i) {
    Eigen::Index best = 0;
    prior.row(i).maxCoeff(&best);
    REQUIRE(best == expected[i]);
  }
  REQUIRE(learned::block_prior(position, 4, 0.0).isZero());
  const autodiff::MatrixF pe = learned::positional_encoding(position);
  REQUIRE(pe.cols() == learned::kPositionFeatures);
  REQUIRE(pe(0, 1) == Approx(1.0));   // cos(0)
  REQUIRE(pe(3, 0) == Approx(0.0).margin(1e-6));  // sin(pi)
}

TEST_CASE("learned::group_allowed: members pinned to different kinds fall back to their own devices", "[learned]") {
  // a (pinned to the CPU) -> b -> c (pinned to the GPU kind), on one CPU and one GPU.
  graphs::GraphBuilder b("pins");
  const sim::Cluster cluster = sim::make_preset("cpu-gpu-1");
  const std::string gpu_kind = cluster.device(1).kind;
  b.add_op({.name = "a", .type = "MatMul", .flops = 1e9, .output_bytes = 1e6, .pinned_kind = "cpu"});
  b.add_op({.name = "b", .type = "MatMul", .flops = 1e9, .output_bytes = 1e6});
  b.add_op({.name = "c", .type = "MatMul", .flops = 1e9, .output_bytes = 1e6, .pinned_kind = gpu_kind});
  b.add_edge(0, 1, 1e6);
  b.add_edge(1, 2, 1e6);
  const graphs::Graph graph = std::move(b).build();
  const sim::Simulator simulator(graph, cluster);
  const learned::Problem problem(simulator);
  REQUIRE(problem.num_units() == 3);

  const std::vector<int32_t> together = {0, 0, 0}, apart = {0, 1, 1};
  const learned::Grouping one = learned::make_grouping(together, 1), two = learned::make_grouping(apart, 2);
  // No device suits all three: the union; {b, c} share the GPU only.
  REQUIRE(learned::group_allowed(problem, one).all());
  const autodiff::Mask mask = learned::group_allowed(problem, two);
  REQUIRE(mask(0, 0));
  REQUIRE_FALSE(mask(0, 1));
  REQUIRE_FALSE(mask(1, 0));
  REQUIRE(mask(1, 1));

  const std::vector<int32_t> on_gpu = {1}, on_cpu = {0};
  REQUIRE(learned::unit_devices(problem, one, on_gpu) == std::vector<int32_t>{0, 1, 1});
  REQUIRE(learned::unit_devices(problem, one, on_cpu) == std::vector<int32_t>{0, 0, 1});

  // Pair features of a group are its members' mean.
  const autodiff::MatrixF pairs = learned::group_pair_x(problem, two);
  REQUIRE(pairs.rows() == 2 * 2);
  REQUIRE(pairs(2 + 1, 0) == Approx((problem.pair_x()(1 * 2 + 1, 0) + problem.pair_x()(2 * 2 + 1, 0)) / 2));
}

TEST_CASE("hdp: valid placements keeping colocation and pins, deterministic for a seed", "[learned]") {
  const rl::Task task = task_of(pinned_training_graph(), "cpu-gpu-2");
  const auto run = [&](uint64_t seed) {
    auto learner = learned::make_hdp_learner(kSmall, seed);
    std::vector<std::vector<int32_t>> placements;
    for (int64_t step = 0; step < 2; ++step) {
      const rl::StepStats stats = learner->train_step(task, step);
      REQUIRE(stats.rollouts == 6);
      REQUIRE(std::isfinite(stats.loss));
      REQUIRE(stats.entropy > 0);
      if (!stats.best_placement.empty()) check_valid(task, stats.best_placement);
      placements.push_back(stats.best_placement);
    }
    placements.push_back(learner->place(task));
    check_valid(task, placements.back());
    return std::make_pair(placements, learner->state());
  };
  const auto [first, first_state] = run(7);
  const auto [second, second_state] = run(7);
  REQUIRE(first == second);
  REQUIRE(first_state == second_state);
  REQUIRE(run(8).second["params"] != first_state["params"]);
}

TEST_CASE("hdp: training beats random placement", "[learned]") {
  // A CPU and two GPUs: random placement puts a third of the work on the slow CPU, one device idles two.
  auto learner = learned::make_hdp_learner(kSmall, 3);
  check_training_beats_random(
      *learner, task_of(graphs::zoo::make_model("random_dag", {{"ops", 30}, {"seed", 11}, {"min_flops", 1e8}}),
                        "cpu-gpu-2"),
      30, 1);
}

TEST_CASE("hdp: bounded device logits keep every device in play, unbounded ones collapse", "[learned]") {
  // With tanh_constant 1 a device's logit is in [-1, 1], so on 2 devices no group's device probability
  // exceeds e^2 / (e^2 + 1) and the placer's entropy stays above 0.36 nats however training pushes it; a
  // high learning rate collapses the unbounded placer (the failure the TensorFlow HDP's bound prevents).
  // One group: the grouper has no choice (entropy 0), so the step's entropy is the placer's.
  // Two devices of different speed (a CPU and its integrated GPU), so one is better for the whole graph.
  const rl::Task task = task_of(graphs::zoo::make_model("random_dag", {{"ops", 30}, {"seed", 11}, {"min_flops", 1e8}}),
                                "desktop-igpu-1");
  auto entropy_after = [&](double tanh_constant) {
    auto learner = learned::make_hdp_learner(
        {{"groups", 1}, {"hidden", 16}, {"rollouts", 6}, {"lr", 0.05}, {"entropy", 0}, {"logits_noise", 0},
         {"tanh_constant", tanh_constant}, {"block_prior", 0}},
        2);
    double entropy = 0;
    for (int64_t step = 0; step < 40; ++step) entropy = learner->train_step(task, step).entropy;
    return entropy;
  };
  const double p = std::exp(2.0) / (std::exp(2.0) + 1);
  const double floor = -(p * std::log(p) + (1 - p) * std::log(1 - p));
  REQUIRE(entropy_after(1) >= floor);
  REQUIRE(entropy_after(0) < floor);
}

TEST_CASE("hdp: checkpoint resume continues exactly", "[learned]") {
  const rl::Task task = task_of(pinned_training_graph(), "cpu-gpu-2");
  auto straight = learned::make_hdp_learner(kSmall, 4);
  for (int64_t step = 0; step < 4; ++step) straight->train_step(task, step);

  auto first = learned::make_hdp_learner(kSmall, 4);
  for (int64_t step = 0; step < 2; ++step) first->train_step(task, step);
  const nlohmann::json saved = nlohmann::json::parse(first->state().dump());  // through text, as a checkpoint
  auto resumed = learned::make_hdp_learner(kSmall, 123);  // the seed is restored from the state
  resumed->load_state(saved);
  for (int64_t step = 2; step < 4; ++step) resumed->train_step(task, step);

  REQUIRE(resumed->state() == straight->state());
  REQUIRE(resumed->place(task) == straight->place(task));
}

TEST_CASE("hdp: options are checked and completed, the registry builds it", "[learned]") {
  auto learner = rl::make_learner("hdp", {{"rollouts", 2}}, 1);
  REQUIRE(learner->name() == "hdp");
  REQUIRE(learner->options()["rollouts"] == 2);
  REQUIRE(learner->options()["groups"] == 80);  // 20 x 4 devices: the TensorFlow implementation's count
  REQUIRE(learner->options()["block_prior"] == 1.0);
  REQUIRE(learner->options()["tanh_constant"] == 1.0);
  REQUIRE(learner->options()["logits_noise"] == 0.5);
  REQUIRE(learner->options()["stop_noise_step"] == 300);
  // For a run: min(256, 20 x devices) groups and noise for 30% of the planned steps, unless given.
  REQUIRE(rl::make_learner("hdp", nlohmann::json::object(), 1, 2, 0)->options()["groups"] == 40);
  REQUIRE(rl::make_learner("hdp", nlohmann::json::object(), 1, 2, 0)->options()["stop_noise_step"] == 300);
  REQUIRE(rl::make_learner("hdp", nlohmann::json::object(), 1, 16, 100)->options()["groups"] == 256);
  REQUIRE(rl::make_learner("hdp", nlohmann::json::object(), 1, 16, 100)->options()["stop_noise_step"] == 30);
  REQUIRE(rl::make_learner("hdp", {{"groups", 5}, {"stop_noise_step", 7}}, 1, 16, 100)->options()["groups"] == 5);
  REQUIRE(rl::make_learner("hdp", {{"groups", 5}, {"stop_noise_step", 7}}, 1, 16, 100)->options()["stop_noise_step"] == 7);
  REQUIRE(rl::make_learner("hsdag", nlohmann::json::object(), 1, 16, 100)->options()["groups"] == 8);  // HDP's rule only
  REQUIRE_THAT(testing::error_of([] { learned::make_hdp_learner({{"lr_decay", 1.5}}, 1); }), Catch::Contains("lr_decay"));
  REQUIRE(learner->options()["algorithm"] == "reinforce");
  REQUIRE_THAT(testing::error_of([] { learned::make_hdp_learner({{"grups", 4}}, 1); }),
               Catch::Contains("grups") && Catch::Contains("groups"));
  REQUIRE_THAT(testing::error_of([] { learned::make_hdp_learner({{"rollouts", 0}}, 1); }),
               Catch::Contains("rollouts"));
  REQUIRE_THAT(testing::error_of([] { learned::make_hdp_learner({{"algorithm", "a2c"}}, 1); }),
               Catch::Contains("algorithm"));
  // Values past 32 bits are refused, not wrapped (4294967297 would read as 1), and widths are bounded.
  REQUIRE_THAT(testing::error_of([] { learned::make_hdp_learner({{"rollouts", 4294967297LL}}, 1); }),
               Catch::Contains("rollouts is 4294967297"));
  REQUIRE_THAT(testing::error_of([] { learned::make_hdp_learner({{"hidden", 5000}}, 1); }),
               Catch::Contains("hidden is 5000, must be an integer in [1, 4096]"));
  REQUIRE_THAT(testing::error_of([] { rl::make_learner("gdp", {{"ff", 1 << 20}}, 1); }),
               Catch::Contains("\"ff\" is 1048576, expected at most 4096"));
  REQUIRE_THAT(testing::error_of([] { rl::make_learner("placeto", {{"episodes", 1LL << 40}}, 1); }),
               Catch::Contains("expected at most 2147483647"));
  // A state of another architecture is refused, naming what does not fit.
  auto wide = learned::make_hdp_learner({{"hidden", 8}}, 1);
  REQUIRE_THAT(testing::error_of([&] { learner->load_state(wide->state()); }), Catch::Contains("shape"));
  REQUIRE_THAT(testing::error_of([&] { learner->load_state(nlohmann::json::object()); }), Catch::Contains("params"));
}
