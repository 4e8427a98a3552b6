// The Placeto learner on tiny random DAGs: per-move rewards from incremental re-simulation telescope to
// the episode's improvement (and every step equals a full simulation), placements are valid and keep
// colocation classes and pins, the seed fixes everything, training beats the untrained policy and random
// placement, checkpoints resume exactly, and a policy trained on two graphs places a third.
#include <limits>
#include <map>
#include <numeric>

#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/learners.h"
#include "policy/learned/placeto.h"
#include "policy/rl/trainer.h"
#include "sim/presets.h"
#include "tests/policy/learned_util.h"

using namespace placelab;
using namespace placelab::testing;

namespace {

graphs::Graph dag(int64_t seed, int64_t ops = 24) { return tiny_dag(static_cast<double>(seed), static_cast<double>(ops)); }

double cost_of(const rl::Task& task, const std::vector<int32_t>& device_of) {
  return rl::cost_s(*task.simulator, device_of, task.simulator->simulate(device_of), task.reward);
}

// Mean final cost of `count` episodes sampled from the policy, from random starts drawn with a fixed seed,
// and the mean cost of those starts.
std::pair<double, double> sampled_final_cost(learned::PlacetoLearner& learner, const rl::Task& task, int count = 8) {
  std::mt19937_64 rng(12345);
  double final_cost = 0, start_cost = 0;
  for (int i = 0; i < count; ++i) {
    const learned::PlacetoEpisode ep = learner.sample_episode(task, learner.initial_placement(task, rng), rng);
    final_cost += (ep.costs_s.empty() ? ep.initial_cost_s : ep.costs_s.back()) / count;
    start_cost += ep.initial_cost_s / count;
  }
  return {final_cost, start_cost};
}

// Small enough for fast tests (the defaults are wider), and quick to learn.
const nlohmann::json kSmall = {{"hidden", 16}, {"rounds", 2}, {"lr", 0.02}, {"gamma", 0.5}};
// Training steps of the learning tests (4 episodes each).
constexpr int64_t kTrainSteps = 20;

// A learner with kSmall's sizes unless `options` says otherwise.
learned::PlacetoLearner make(uint64_t seed, const nlohmann::json& options = nlohmann::json::object()) {
  nlohmann::json all = kSmall;
  all.update(options);
  return learned::PlacetoLearner(learned::placeto_options_from_json(all), seed);
}

}  // namespace

TEST_CASE("learned::Placeto: per-move rewards telescope to the episode's improvement", "[policy][placeto]") {
  const rl::Task task = task_of(dag(7), "v100-pcie-4");
  learned::PlacetoLearner learner = make(3);
  std::mt19937_64 rng(5);
  const learned::PlacetoEpisode ep = learner.sample_episode(task, learner.initial_placement(task, rng), rng);
  const learned::Problem& p = *task.problem;
  REQUIRE(static_cast<int32_t>(ep.units.size()) == p.num_units());  // every unit may move on 4 GPUs
  std::vector<int32_t> units = ep.initial;
  int moves = 0;
  for (size_t t = 0; t < ep.units.size(); ++t) {
    moves += units[ep.units[t]] != ep.devices[t];
    units[ep.units[t]] = ep.devices[t];
    // The incremental simulator's result after each move is a full simulation's, bit for bit.
    const std::vector<int32_t> ops = p.expand(units);
    REQUIRE(task.simulator->simulate(ops).step_time_s == ep.step_times_s[t]);
    REQUIRE(cost_of(task, ops) == ep.costs_s[t]);
  }
  REQUIRE(moves > 0);
  REQUIRE(units == ep.final_placement);
  const std::vector<int32_t> first = p.expand(ep.initial), last = p.expand(units);
  const double r0 = rl::reward(*task.simulator, first, task.simulator->simulate(first), task.reference_s, task.reward);
  const double r1 = rl::reward(*task.simulator, last, task.simulator->simulate(last), task.reference_s, task.reward);
  REQUIRE(ep.initial_reward == r0);
  const double sum = std::accumulate(ep.rewards.begin(), ep.rewards.end(), 0.0);
  REQUIRE(sum == Approx(r1 - r0).margin(1e-12));
  // The best seen is the best of the start and every step.
  double best = ep.initial_cost_s;
  for (double c : ep.costs_s) best = std::min(best, c);
  REQUIRE(ep.best_cost_s == best);
  REQUIRE(cost_of(task, ep.best_placement) == best);
}

TEST_CASE("learned::Placeto: placements are valid, keep colocation classes and pins", "[policy][placeto]") {
  const sim::Cluster cpu_gpu = sim::make_preset("cpu-gpu-2");
  const rl::Task task =
      task_of(with_pins(graphs::expand_training(dag(3, 12)), cpu_gpu.device(0).kind), "cpu-gpu-2");
  REQUIRE(task.problem->num_units() < task.graph->num_ops());  // classes of forward, backward and update
  learned::PlacetoLearner learner = make(1, {{"episodes", 2}});
  for (int64_t step = 0; step < 2; ++step) {
    const rl::StepStats stats = learner.train_step(task, step);
    check_valid(task, stats.best_placement);
    REQUIRE(stats.rollouts == 2);
    REQUIRE(std::isfinite(stats.loss));
    REQUIRE(stats.best_cost_s == cost_of(task, stats.best_placement));
  }
  check_valid(task, learner.place(task));
}

TEST_CASE("learned::Placeto: the seed fixes training and placing", "[policy][placeto]") {
  const rl::Task task = task_of(dag(11), "v100-nvlink-2");
  auto run = [&](uint64_t seed) {
    learned::PlacetoLearner learner = make(seed, {{"episodes", 2}});
    for (int64_t step = 0; step < 2; ++step) learner.train_step(task, step);
    return std::pair{learner.state(), learner.place(task)};
  };
  const auto a = run(4), b = run(4), c = run(5);
  REQUIRE(a.first == b.first);
  REQUIRE(a.second == b.second);
  REQUIRE(a.first["params"] != c.first["params"]);
}

TEST_CASE("learned::Placeto: training beats the untrained policy and random placement", "[policy][placeto]") {
  const rl::Task task = task_of(dag(21), "v100-pcie-4");
  learned::PlacetoLearner learner = make(2, {{"embed_every", 2}});
  const auto [untrained, random_start] = sampled_final_cost(learner, task);
  double best_s = std::numeric_limits<double>::infinity();
  for (int64_t step = 0; step < kTrainSteps; ++step)
    best_s = std::min(best_s, learner.train_step(task, step).best_cost_s);
  const auto [trained, same_start] = sampled_final_cost(learner, task);
  REQUIRE(same_start == random_start);
  INFO("random " << random_start << " s, untrained " << untrained << " s, trained " << trained << " s, best seen "
                 << best_s << " s");
  REQUIRE(trained < untrained);
  REQUIRE(trained < random_start);
  REQUIRE(best_s < 0.8 * random_start);
  REQUIRE(cost_of(task, learner.place(task)) < random_start);
}

TEST_CASE("learned::Placeto: resuming from a saved state continues exactly", "[policy][placeto]") {
  const rl::Task task = task_of(dag(13), "v100-nvlink-4");
  const nlohmann::json options = {{"episodes", 2}, {"embed_every", 3}};
  learned::PlacetoLearner straight = make(8, options);
  for (int64_t step = 0; step < 4; ++step) straight.train_step(task, step);

  learned::PlacetoLearner first = make(8, options);
  for (int64_t step = 0; step < 2; ++step) first.train_step(task, step);
  const std::string saved = first.state().dump();
  learned::PlacetoLearner resumed = make(99, options);  // another seed: everything must come from the state
  resumed.load_state(nlohmann::json::parse(saved));
  for (int64_t step = 2; step < 4; ++step) resumed.train_step(task, step);

  const auto& p1 = straight.parameters();
  const auto& p2 = resumed.parameters();
  REQUIRE(p1.size() == p2.size());
  for (size_t i = 0; i < p1.size(); ++i) {
    INFO(p1[i].name);
    REQUIRE(p1[i].tensor.value() == p2[i].tensor.value());  // bit for bit
  }
  REQUIRE(straight.state() == resumed.state());

  // Another architecture's state is refused, naming what differs.
  learned::PlacetoLearner wider = make(8, {{"hidden", 24}});
  REQUIRE_THROWS_AS(wider.load_state(nlohmann::json::parse(saved)), Error);
  REQUIRE_THROWS_WITH(wider.load_state(nlohmann::json::object()), Catch::Contains("params"));
}

TEST_CASE("learned::Placeto: a policy trained on two graphs places a third", "[policy][placeto]") {
  const std::vector<rl::Task> family = {task_of(dag(31), "v100-pcie-4"), task_of(dag(32), "v100-pcie-4")};
  const rl::Task unseen = task_of(dag(33, 28), "v100-pcie-4");
  learned::PlacetoLearner learner = make(6, {{"embed_every", 2}});
  const auto [untrained, random_start] = sampled_final_cost(learner, unseen);
  for (int64_t step = 0; step < kTrainSteps; ++step) learner.train_step(family[step % 2], step);
  const auto [trained, same_start] = sampled_final_cost(learner, unseen);
  INFO("random " << random_start << " s, untrained " << untrained << " s, trained " << trained << " s");
  REQUIRE(trained < untrained);
  REQUIRE(trained < random_start);
  const std::vector<int32_t> placed = learner.place(unseen);
  check_valid(unseen, placed);
  REQUIRE(cost_of(unseen, placed) < random_start);
}

TEST_CASE("learned::Placeto: refining classical placements, it places unseen graphs better than them", "[policy][placeto]") {
  // Episodes start from the best of HEFT and Scotch; the best placement seen is never worse than that
  // start, and after training on two graphs the moves improve an unseen third.
  const std::vector<rl::Task> family = {task_of(dag(31), "v100-pcie-4"), task_of(dag(32), "v100-pcie-4")};
  const rl::Task unseen = task_of(dag(33, 28), "v100-pcie-4");
  learned::PlacetoLearner learner = make(6, {{"embed_every", 2}, {"initial", "heft,scotch"}});
  double classical = std::numeric_limits<double>::infinity();
  for (const char* name : {"heft", "scotch"})
    classical = std::min(classical, cost_of(unseen, policy::make_placer(name)->place(policy::PlaceRequest{*unseen.simulator}).device_of));
  std::mt19937_64 rng(1);
  const learned::PlacetoEpisode start = learner.greedy_episode(unseen, learner.initial_placement(unseen, rng));
  REQUIRE(start.initial_cost_s == Approx(classical).epsilon(1e-12));
  for (int64_t step = 0; step < kTrainSteps; ++step) learner.train_step(family[step % 2], step);
  const double placed = cost_of(unseen, learner.place(unseen));
  INFO("best of HEFT and Scotch " << classical << " s, Placeto " << placed << " s");
  REQUIRE(placed < classical);
}

TEST_CASE("learned::Placeto: options are checked and round-trip", "[policy][placeto]") {
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"hiden", 8}}, 1), Catch::Contains("hiden"));
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"episodes", 0}}, 1), Catch::Contains("episodes"));
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"gamma", 1.5}}, 1), Catch::Contains("gamma"));
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"initial", "zeros"}}, 1), Catch::Contains("initial"));
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"initial", "heft,hdp"}}, 1),
                      Catch::Contains("initial") && Catch::Contains("learned placer"));
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"initial", ","}}, 1), Catch::Contains("initial"));
  REQUIRE_THROWS_WITH(learned::make_placeto_learner({{"embed_every", -1}}, 1), Catch::Contains("embed_every"));
  const auto learner = learned::make_placeto_learner({{"hidden", 16}, {"initial", "single"}}, 1);
  REQUIRE(learner->name() == "placeto");
  REQUIRE(learner->options()["hidden"] == 16);
  REQUIRE(learned::make_placeto_learner(learner->options(), 1)->options() == learner->options());
  REQUIRE(rl::make_learner("placeto", nlohmann::json::object(), 1)->name() == "placeto");
}

TEST_CASE("learned::Placeto: a step whose tape would not fit fails up front, naming the fix", "[policy][placeto]") {
  // 300 units re-embedded before every move, 64 episodes of width 512: hundreds of GiB of tape.
  const rl::Task task = task_of(dag(2, 300), "v100-pcie-4");
  learned::PlacetoLearner every_move = make(1, {{"embed_every", 1}, {"hidden", 512}, {"episodes", 64}});
  REQUIRE_THROWS_WITH(every_move.train_step(task, 0),
                      Catch::Contains("GiB of autodiff tape") && Catch::Contains("\"embed_every\""));
  // The automatic interval (64 passes per episode) keeps a step of the default sizes small, and on
  // graphs of at most 64 movable units it re-embeds before every move as the paper does: same training.
  learned::PlacetoLearner automatic = make(1);
  REQUIRE(automatic.options()["embed_every"] == 0);
  REQUIRE_NOTHROW(automatic.train_step(task, 0));
  const rl::Task small = task_of(dag(3), "v100-pcie-4");
  learned::PlacetoLearner a = make(5), b = make(5, {{"embed_every", 1}});
  for (int64_t step = 0; step < 2; ++step) REQUIRE(a.train_step(small, step).loss == b.train_step(small, step).loss);
  REQUIRE(a.place(small) == b.place(small));
}
