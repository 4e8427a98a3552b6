// GDP (policy/learned/gdp.h) on tiny random DAGs: forward shapes and masks, valid placements that keep
// colocation classes and pins, determinism, learning beats random placement, exact resume, one
// parameter set on 2 and 4 devices, and the embedded pre-trained checkpoint.
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <random>

#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/classic/units.h"
#include "policy/learned/gdp.h"
#include "policy/placer.h"
#include "policy/rl/pg.h"
#include "sim/presets.h"
#include "tests/policy/learned_util.h"

using namespace placelab;
using namespace placelab::testing;

namespace {

// Small and fast settings for the tests (the defaults are only a little larger); PPO from scratch, as the
// paper trains, unless a test turns the warm start on.
nlohmann::json small_options() {
  return {{"hidden", 16}, {"heads", 2}, {"ff", 32}, {"head_hidden", 16}, {"segment", 8}, {"lr", 1e-3},
          {"warm_steps", 0}};
}

}  // namespace

TEST_CASE("learned::gdp: options are checked and completed", "[policy][gdp]") {
  const nlohmann::json full = learned::to_json(learned::gdp_options_from_json(nlohmann::json::object()));
  CHECK(full.at("superposition") == true);
  CHECK(learned::to_json(learned::gdp_options_from_json(full)) == full);
  CHECK_THROWS_AS(learned::gdp_options_from_json({{"hiden", 8}}), Error);
  CHECK_THROWS_AS(learned::gdp_options_from_json({{"hidden", 10}, {"heads", 4}}), Error);
  CHECK_THROWS_AS(learned::gdp_options_from_json({{"aggregator", "sum"}}), Error);
  CHECK_THROWS_AS(learned::gdp_options_from_json({{"rollouts", 0}}), Error);
  CHECK_THROWS_AS(learned::make_gdp_learner(nlohmann::json::array(), 1), Error);
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"warm_start", "metis,nosuch"}}), Catch::Contains("\"warm_start\": unknown placer \"nosuch\""));
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"warm_start", "heft,hdp"}}), Catch::Contains("learned placer"));
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"warm_start", 3}}), Catch::Contains("warm_start"));
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"warm_steps", -1}}), Catch::Contains("warm_steps"));
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"warm_start", " "}, {"warm_steps", 5}}),
                    Catch::Contains("needs at least one placer"));
  CHECK(learned::gdp_options_from_json({{"warm_start", ""}, {"warm_steps", 0}}).warm_start.empty());
}

TEST_CASE("learned::GdpLearner: the warm start imitates the cheapest heuristic, then PPO keeps it", "[policy][gdp]") {
  const rl::Task task = task_of(tiny_dag(7, 40), "v100-pcie-4");
  double cheapest_s = std::numeric_limits<double>::infinity();
  std::vector<int32_t> cheapest;
  for (const char* name : {"metis", "m_etf", "heft"}) {
    std::vector<int32_t> p = policy::make_placer(name)->place(policy::PlaceRequest{*task.simulator}).device_of;
    if (const double s = step_time_s(task, p); s < cheapest_s) cheapest_s = s, cheapest = std::move(p);
  }
  nlohmann::json options = small_options();
  options["lr"] = 0.01;
  options["warm_steps"] = 15;
  options["warm_start"] = "metis,m_etf,heft";
  auto learner = learned::make_gdp_learner(options, 3);
  double best_s = std::numeric_limits<double>::infinity(), first_loss = 0, last_loss = 0;
  for (int64_t step = 0; step < 15; ++step) {
    const rl::StepStats stats = learner->train_step(task, step);
    CHECK(stats.rollouts == 2);  // the greedy placement and the target
    best_s = std::min(best_s, stats.best_cost_s);
    (step == 0 ? first_loss : last_loss) = stats.loss;
  }
  CHECK(best_s == Approx(cheapest_s));  // the target is the cheapest heuristic's placement
  CHECK(last_loss < 0.5 * first_loss);  // cross-entropy towards it fell
  // The policy now places about as well as the target (equal GPUs make many placements equivalent, so the
  // cost is compared, not the devices), where random placements are far worse.
  const double placed_s = step_time_s(task, learner->place(task)), random_s = mean_random_step_s(task, 32);
  INFO("placed " << placed_s << " s, target " << cheapest_s << " s, random " << random_s << " s");
  CHECK(placed_s <= 1.05 * cheapest_s);
  CHECK(cheapest_s < 0.8 * random_s);
  // PPO from there samples placements much closer to the target than to random ones.
  const rl::StepStats ppo = learner->train_step(task, 15);
  CHECK(ppo.rollouts == 12);
  CHECK(ppo.cost_mean_s < 0.5 * (cheapest_s + random_s));
}

TEST_CASE("learned::GdpLearner: place_starts adds classical placements to the candidates of placing", "[policy][gdp]") {
  const rl::Task task = task_of(tiny_dag(7, 40), "v100-pcie-4");
  nlohmann::json options = small_options();
  options["place_samples"] = 0;  // the untrained policy's greedy decode alone
  const double alone_s = step_time_s(task, learned::make_gdp_learner(options, 3)->place(task));
  const double heft_s = step_time_s(task, policy::make_placer("heft")->place(policy::PlaceRequest{*task.simulator}).device_of);
  const double single_s =
      step_time_s(task, policy::make_placer("single_device")->place(policy::PlaceRequest{*task.simulator}).device_of);
  REQUIRE(std::min(heft_s, single_s) < alone_s);  // what the option is for: the untrained decode is worse
  options["place_starts"] = "heft,single_device";
  auto learner = learned::make_gdp_learner(options, 3);
  CHECK(step_time_s(task, learner->place(task)) == Approx(std::min({alone_s, heft_s, single_s})));
  CHECK(learner->max_place_simulations(task) == 3);  // the decode and the two starts
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"place_starts", "heft,nosuch"}}),
                    Catch::Contains("\"place_starts\": unknown placer \"nosuch\""));
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"place_starts", "gdp"}}), Catch::Contains("learned placer"));
}

TEST_CASE("learned::GdpNetwork: shapes, masked probabilities, pinned units never sampled off their kind",
          "[policy][gdp]") {
  // 1 CPU + 2 GPUs; every 5th forward op pinned to the CPU, and training expansion adds colocation.
  const rl::Task task = task_of(with_pins(graphs::expand_training(tiny_dag(3)), "cpu"), "cpu-gpu-2");
  const learned::Problem& problem = *task.problem;
  for (const std::string aggregator : {"mean", "max_pool"}) {
    for (const bool superposition : {true, false}) {
      nlohmann::json options = small_options();
      options["decoder"] = "single_shot";
      options["aggregator"] = aggregator;
      options["superposition"] = superposition;
      std::mt19937_64 rng(5);
      const learned::GdpNetwork net(learned::gdp_options_from_json(options), rng);
      const learned::GdpOutput out = net.forward(problem);
      REQUIRE(out.log_probs.rows() == problem.num_units());
      REQUIRE(out.log_probs.cols() == 3);
      CHECK(out.value.rows() == 1);
      CHECK(out.value.cols() == 1);
      CHECK(out.graph_embedding.cols() == 16);
      int32_t restricted = 0;
      for (int32_t u = 0; u < problem.num_units(); ++u) {
        double total = 0;
        for (int32_t d = 0; d < 3; ++d) {
          if (problem.allowed()(u, d)) total += std::exp(out.log_probs.value()(u, d));
          else CHECK(out.log_probs.value()(u, d) == 0.f);
        }
        CHECK(total == Approx(1.0).epsilon(1e-5));
        restricted += !problem.allowed().row(u).all();
      }
      REQUIRE(restricted > 0);  // the case really has pinned units
      std::mt19937_64 sample_rng(9);
      for (int k = 0; k < 20; ++k) {
        const rl::Sampled s = rl::sample_rows(out.log_probs.value(), &problem.allowed(), sample_rng);
        for (int32_t u = 0; u < problem.num_units(); ++u) REQUIRE(problem.allowed()(u, s.choice[u]));
        check_valid(task, problem.expand(s.choice));
      }
    }
  }
  // The learner's greedy placement and its training rollouts are valid too.
  auto learner = learned::make_gdp_learner(small_options(), 2);
  const rl::StepStats stats = learner->train_step(task, 0);
  check_valid(task, stats.best_placement);
  check_valid(task, learner->place(task));
  CHECK(stats.rollouts == 12);
  CHECK(std::isfinite(stats.loss));
}

TEST_CASE("learned::GdpNetwork: the schedule decoder's masked distributions, on the tape and in the decode",
          "[policy][gdp]") {
  const rl::Task task = task_of(with_pins(graphs::expand_training(tiny_dag(3)), "cpu"), "cpu-gpu-2");
  const learned::Problem& problem = *task.problem;
  std::mt19937_64 rng(5);
  const learned::GdpNetwork net(learned::gdp_options_from_json(small_options()), rng);
  CHECK_THROWS_WITH(net.forward(problem), Catch::Contains("schedule"));
  const learned::GdpEncoding encoding = net.encode(problem);
  const learned::ScheduleDecoder decoder(problem);
  std::mt19937_64 draw(9);
  const learned::Decisions sampled = decoder.decode(net.scorer(encoding), learned::DecodeMode::sample, &draw);
  check_valid(task, problem.expand(sampled.unit_device));
  REQUIRE(sampled.rows() > 0);
  const autodiff::Tensor log_probs = net.decision_log_probs(encoding, sampled);
  REQUIRE(log_probs.rows() == sampled.rows());
  REQUIRE(log_probs.cols() == 3);
  for (int64_t r = 0; r < sampled.rows(); ++r) {
    double total = 0;
    for (int32_t d = 0; d < 3; ++d) {
      if (sampled.allowed(r, d)) total += std::exp(log_probs.value()(r, d));
      else CHECK(log_probs.value()(r, d) == 0.f);
    }
    CHECK(total == Approx(1.0).epsilon(1e-5));
    CHECK(sampled.allowed(r, sampled.choice[r]));
    // The decode's one-row scorer and the batched tape agree on the probability of what was drawn.
    CHECK(log_probs.value()(r, sampled.choice[r]) == Approx(sampled.logp[r]).margin(1e-4));
  }
}

TEST_CASE("learned::GdpLearner: RL improves on the warm start of a small graph", "[policy][gdp]") {
  // The start is the best of METIS, m-ETF and HEFT; 30 PPO steps with self-imitation and windows find better
  // (about 25% faster at seeds 5 and 6).
  const rl::Task task = task_of(graphs::expand_training(graphs::zoo::make_model(
                                    "rnnlm", {{"layers", 2}, {"steps", 4}, {"hidden", 512}, {"batch", 32}})),
                                "v100-nvlink-4");
  nlohmann::json options = small_options();
  options["lr"] = 0.01;
  options["warm_steps"] = 10;
  auto learner = learned::make_gdp_learner(options, 5);
  double warm_best_s = std::numeric_limits<double>::infinity(), rl_best_s = warm_best_s;
  for (int64_t step = 0; step < 40; ++step) {
    const rl::StepStats stats = learner->train_step(task, step);
    (step < 10 ? warm_best_s : rl_best_s) = std::min(step < 10 ? warm_best_s : rl_best_s, stats.best_cost_s);
  }
  INFO("best after the warm start " << warm_best_s << " s, after RL " << rl_best_s << " s");
  CHECK(rl_best_s < 0.9 * warm_best_s);
}

TEST_CASE("learned::GdpLearner: same seed, same training and placements", "[policy][gdp]") {
  const rl::Task task = task_of(tiny_dag(4), "v100-nvlink-4");
  auto a = learned::make_gdp_learner(small_options(), 11);
  auto b = learned::make_gdp_learner(small_options(), 11);
  for (int64_t step = 0; step < 3; ++step) {
    const rl::StepStats sa = a->train_step(task, step), sb = b->train_step(task, step);
    CHECK(sa.reward_mean == sb.reward_mean);
    CHECK(sa.best_placement == sb.best_placement);
  }
  CHECK(a->place(task) == b->place(task));
  CHECK(a->state() == b->state());
  auto c = learned::make_gdp_learner(small_options(), 12);
  CHECK(c->state() != a->state());
}

TEST_CASE("learned::GdpLearner: training beats the mean of random placements", "[policy][gdp]") {
  // PCIe: scattering units costs a lot, so a policy that learned to keep neighbours together shows.
  const rl::Task task = task_of(tiny_dag(7, 40), "v100-pcie-4");
  const learned::Problem& problem = *task.problem;
  std::mt19937_64 rng(1);
  double random_mean_s = 0;
  constexpr int kRandom = 30;
  for (int k = 0; k < kRandom; ++k) {
    std::vector<int32_t> unit_device(problem.num_units());
    for (auto& d : unit_device) d = policy::uniform_index(rng, problem.num_devices());
    random_mean_s += step_time_s(task, problem.expand(unit_device)) / kRandom;
  }
  auto learner = learned::make_gdp_learner(small_options(), 3);
  double first_cost_s = 0, last_cost_s = 0;
  for (int64_t step = 0; step < 30; ++step) {
    const rl::StepStats stats = learner->train_step(task, step);
    if (step == 0) first_cost_s = stats.cost_mean_s;
    last_cost_s = stats.cost_mean_s;
  }
  const double trained_s = step_time_s(task, learner->place(task));
  INFO("random mean " << random_mean_s << " s, rollouts at step 0 " << first_cost_s << " s, at step 29 "
                      << last_cost_s << " s, trained greedy " << trained_s << " s");
  CHECK(last_cost_s < 0.8 * first_cost_s);  // the sampling distribution itself improved
  CHECK(trained_s < 0.8 * random_mean_s);
}

TEST_CASE("learned::GdpLearner: state round trip resumes exactly", "[policy][gdp]") {
  const rl::Task task = task_of(tiny_dag(5), "v100-nvlink-2");
  auto straight = learned::make_gdp_learner(small_options(), 21);
  for (int64_t step = 0; step < 4; ++step) straight->train_step(task, step);

  auto first = learned::make_gdp_learner(small_options(), 21);
  for (int64_t step = 0; step < 2; ++step) first->train_step(task, step);
  const nlohmann::json saved = nlohmann::json::parse(first->state().dump());
  auto resumed = learned::make_gdp_learner(small_options(), 99);  // other seed: everything comes from the state
  resumed->load_state(saved);
  CHECK(resumed->state() == first->state());
  for (int64_t step = 2; step < 4; ++step) resumed->train_step(task, step);
  CHECK(resumed->state() == straight->state());
  CHECK(resumed->place(task) == straight->place(task));

  // Another architecture is refused, and nothing changes.
  nlohmann::json other = small_options();
  other["hidden"] = 8;
  auto wrong = learned::make_gdp_learner(other, 21);
  const nlohmann::json before = wrong->state();
  CHECK_THROWS_AS(wrong->load_state(saved), Error);
  CHECK(wrong->state() == before);
  nlohmann::json broken = saved;
  broken["params"]["params"][0]["data"][0] = "x";
  CHECK_THROWS_AS(resumed->load_state(broken), Error);
}

TEST_CASE("learned::GdpLearner: entropy_target steers the entropy bonus, and resumes with it", "[policy][gdp]") {
  const rl::Task task = task_of(tiny_dag(5), "v100-nvlink-4");
  const auto trained = [&](double target, int64_t steps, uint64_t seed) {
    nlohmann::json options = small_options();
    options["entropy_target"] = target;
    auto learner = learned::make_gdp_learner(options, seed);
    double entropy = 0;
    for (int64_t step = 0; step < steps; ++step) entropy = learner->train_step(task, step).entropy;
    return std::pair{std::move(learner), entropy};
  };
  // A fresh policy's entropy is near log(4) = 1.39 nats: a higher target raises the coefficient, a lower one
  // lowers it, each by at most 5% a step.
  const auto [high, high_entropy] = trained(5.0, 6, 2);
  const auto [low, low_entropy] = trained(0.05, 6, 2);
  INFO("entropy " << high_entropy << " and " << low_entropy << " nats");
  const double high_coef = high->state().at("entropy_coef"), low_coef = low->state().at("entropy_coef");
  CHECK(high_coef > 0.01 * 1.2);
  CHECK(high_coef <= 0.01 * std::exp(0.05 * 6) + 1e-12);
  CHECK(low_coef < 0.01 / 1.2);
  CHECK(low_coef >= 0.01 * std::exp(-0.05 * 6) - 1e-12);
  // Off (the default), the state has no coefficient and it stays `entropy`.
  CHECK_FALSE(learned::make_gdp_learner(small_options(), 2)->state().contains("entropy_coef"));

  // The coefficient is part of the state: a resumed run goes on exactly.
  nlohmann::json options = small_options();
  options["entropy_target"] = 5.0;
  auto first = learned::make_gdp_learner(options, 2);
  for (int64_t step = 0; step < 3; ++step) first->train_step(task, step);
  auto resumed = learned::make_gdp_learner(options, 9);
  resumed->load_state(nlohmann::json::parse(first->state().dump()));
  for (int64_t step = 3; step < 6; ++step) resumed->train_step(task, step);
  CHECK(resumed->state() == high->state());

  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"entropy_target", -1}}), Catch::Contains("entropy_target"));
  CHECK_THROWS_WITH(learned::gdp_options_from_json({{"entropy_target", 0.1}, {"entropy", 0}}),
                    Catch::Contains("must then be above 0"));
}

TEST_CASE("learned::GdpLearner: one parameter set trains and places on 2 and 4 devices", "[policy][gdp]") {
  const std::vector<rl::Task> tasks = {task_of(tiny_dag(8), "v100-nvlink-2"), task_of(tiny_dag(9), "v100-nvlink-4"),
                                       task_of(tiny_dag(10), "v100-pcie-4")};
  auto learner = learned::make_gdp_learner(small_options(), 4);
  for (int64_t step = 0; step < 6; ++step) {
    const rl::Task& task = tasks[static_cast<size_t>(step) % tasks.size()];
    const rl::StepStats stats = learner->train_step(task, step);
    check_valid(task, stats.best_placement);
  }
  for (const rl::Task& task : tasks) {
    const std::vector<int32_t> placement = learner->place(task);
    check_valid(task, placement);
    for (int32_t d : placement) CHECK(d < task.cluster->num_devices());
  }
}

TEST_CASE("learned::pretrained_gdp_checkpoint: loads and places an unseen graph", "[policy][gdp]") {
  const nlohmann::json& checkpoint = learned::pretrained_gdp_checkpoint();
  REQUIRE(checkpoint.at("policy") == "gdp");
  auto learner = learned::make_gdp_learner(checkpoint.at("options"), 0);
  learner->load_state(checkpoint.at("learner"));
  // A training graph with pins on a cluster mix the suite never had.
  const rl::Task task = task_of(with_pins(graphs::expand_training(tiny_dag(123, 50)), "cpu"), "cpu-gpu-4");
  check_valid(task, learner->place(task));
  const rl::Task plain = task_of(tiny_dag(321, 60), "v100-nvlink-8");
  check_valid(plain, learner->place(plain));
}
