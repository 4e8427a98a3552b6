// Annealing from any start (policy/classic/annealing.h): cooling over a time budget when it is the only one, and
// the learned placers' annealing search ("search": "anneal"), which starts it from the policy's placement.
// Time budgets run on a fake clock (PlaceRequest::clock), so nothing here is timed.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "learned_util.h"
#include "policy/classic/annealing.h"
#include "policy/learned/gdp.h"
#include "policy/learned/learners.h"
#include "policy/placer.h"

using namespace placelab;
using placelab::testing::error_of;

namespace {

// Moves `tick` seconds at each read.
std::function<double()> ticking(double tick) {
  return [now = 0.0, tick]() mutable { return now += tick; };
}

policy::PlaceResult place(const sim::Simulator& sim, const std::string& placer, const nlohmann::json& options,
                          double tick = 0) {
  policy::PlaceRequest request{sim, options, 7};
  if (tick > 0) request.clock = ticking(tick);
  policy::PlaceResult r = policy::make_placer(placer)->place(request);
  REQUIRE_NOTHROW(sim.check_placement(r.device_of));
  return r;
}

double cost(const sim::Simulator& sim, const std::vector<int32_t>& placement) {
  return policy::annealing_cost(sim.simulate(placement), sim.cluster());
}

}  // namespace

TEST_CASE("With only a time budget, annealing moves until it is spent, cooling over it", "[annealing][budget]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(11, 40), "v100-pcie-4");
  const sim::Simulator& sim = *task.simulator;
  // 10 microseconds a clock read: a 0.2 s budget is thousands of moves, past the 1,000 steps of the default.
  const policy::PlaceResult timed = place(sim, "annealing", {{"seconds", 0.2}}, 1e-5);
  CHECK(timed.info["cooling"] == "seconds");
  CHECK(timed.info["steps"].get<int64_t>() > 1000);
  CHECK(timed.info["seconds"].get<double>() <= 0.2);
  CHECK(timed.info["best_cost_s"].get<double>() <= timed.info["start_cost_s"].get<double>());
  // Steps given: they set the cooling, and the time budget only stops it.
  const policy::PlaceResult stepped = place(sim, "annealing", {{"seconds", 0.2}, {"steps", 50}}, 1e-5);
  CHECK(stepped.info["cooling"] == "steps");
  CHECK(stepped.info["steps"] == 50);
  // The same fake clock gives the same moves: the result depends on the clock alone, not on the machine.
  CHECK(place(sim, "annealing", {{"seconds", 0.2}}, 1e-5).device_of == timed.device_of);
}

TEST_CASE("anneal(): from any start, never worse than it, and cooling over time needs a time budget",
          "[annealing][budget]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(12, 40), "v100-pcie-4");
  const sim::Simulator& sim = *task.simulator;
  policy::PlaceRequest request{sim, nlohmann::json::object(), 3};
  policy::AnnealingStart start{"round_robin", policy::make_placer("round_robin")->place(request).device_of, 0};
  start.cost = cost(sim, start.placement);
  policy::Budget budget(request, 0, 0);
  policy::AnnealingSettings settings;
  settings.steps = 300;
  const policy::PlaceResult r = policy::anneal(request, budget, start, settings);
  CHECK(r.info["start"] == "round_robin");
  CHECK(cost(sim, r.device_of) == r.info["best_cost_s"].get<double>());
  CHECK(r.info["best_cost_s"].get<double>() < start.cost);  // round robin is far from good: it improves
  settings.steps = 0;  // cooling over a time budget, which this budget does not have
  CHECK_THAT(error_of([&] { policy::anneal(request, budget, start, settings); }), Catch::Contains("needs \"seconds\""));
  const policy::AnnealingStart best = policy::best_annealing_start(request, policy::annealing_start_placers());
  CHECK(std::find_if(policy::annealing_start_placers().begin(), policy::annealing_start_placers().end(),
                     [&](const char* name) { return best.name == name; }) != policy::annealing_start_placers().end());
  CHECK(best.cost == cost(sim, best.placement));
}

TEST_CASE("GDP's annealing search: from the better of the policy's placement and the heuristics, within budget",
          "[gdp][budget]") {
  const rl::Task task = placelab::testing::task_of(
      graphs::zoo::make_model("rnnlm", {{"layers", 2}, {"steps", 3}, {"batch", 32}}), "v100-pcie-4");
  const sim::Simulator& sim = *task.simulator;
  const int64_t before = sim.runs();
  const policy::PlaceResult r = place(sim, "gdp", {{"search", "anneal"}, {"simulations", 120}});
  CHECK(sim.runs() - before <= 120);
  CHECK(r.info["simulations"] == sim.runs() - before);
  CHECK(r.info["search"] == "anneal");
  CHECK(r.info["start"] == "pretrained");
  CHECK(r.info["steps"].get<int64_t>() > 50);  // what placing and the starts leave goes to moves
  // Its start is the better of the policy's placement and the best heuristic, and the search never loses it.
  const policy::PlaceRequest plain{sim, nlohmann::json::object(), 7};
  const double heuristic = policy::best_annealing_start(plain, policy::annealing_start_placers()).cost;
  const double policy_cost = r.info["policy_cost_s"].get<double>();
  CHECK(r.info["start_cost_s"].get<double>() == std::min(policy_cost, heuristic));
  if (policy_cost <= heuristic) CHECK(r.info["anneal_start"] == "policy");  // ties go to the policy
  else CHECK(r.info["anneal_start"] != "policy");
  CHECK(cost(sim, r.device_of) <= std::min(policy_cost, heuristic));
  // With a time budget alone, the moves cool over it.
  const policy::PlaceResult timed = place(sim, "gdp", {{"search", "anneal"}, {"seconds", 0.5}}, 1e-5);
  CHECK(timed.info["cooling"] == "seconds");
  CHECK(timed.info["seconds"].get<double>() <= 0.5);
}

TEST_CASE("GDP's train-then-anneal search: training's share of the budget, then moves from its best",
          "[gdp][budget]") {
  const rl::Task task = placelab::testing::task_of(
      graphs::zoo::make_model("rnnlm", {{"layers", 2}, {"steps", 3}, {"batch", 32}}), "v100-pcie-4");
  const sim::Simulator& sim = *task.simulator;
  const int64_t before = sim.runs();
  const policy::PlaceResult r =
      place(sim, "gdp", {{"search", "train_anneal"}, {"simulations", 200}, {"train_share", 0.4}, {"curve", true}});
  const int64_t runs = sim.runs() - before;
  CHECK(runs <= 200);
  CHECK(r.info["simulations"] == runs);
  CHECK(r.info["search"] == "train_anneal");
  CHECK(r.info["train_steps"].get<int64_t>() > 0);  // training ran, within its 80 simulations
  CHECK(r.info["steps"].get<int64_t>() > 50);       // and the moves had the rest
  CHECK(cost(sim, r.device_of) <= r.info["start_cost_s"].get<double>());
  // The curve runs through both: training's steps, then the moves, in order of simulations.
  const auto& sims = r.info["curve_simulations"];
  CHECK(sims.size() == r.info["train_steps"].get<size_t>() + r.info["steps"].get<size_t>());
  CHECK(std::is_sorted(sims.begin(), sims.end()));
  CHECK(sims.back() == runs);
}

TEST_CASE("The search option: known values only, and no training steps with the annealing search", "[gdp]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(13, 12), "v100-nvlink-2");
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"search", "genetic"}}); }),
             Catch::Contains("search") && Catch::Contains("\"anneal\" or \"train_anneal\""));
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"search", "train_anneal"}, {"train_share", 1}}); }),
             Catch::Contains("train_share") && Catch::Contains("below 1"));
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"train_share", 0.5}}); }),
             Catch::Contains("train_share") && Catch::Contains("give that search"));
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"search", "anneal"}, {"steps", 3}}); }),
             Catch::Contains("steps") && Catch::Contains("leave out one of them"));
}

TEST_CASE("GDP's device preferences: the greedy decode's distributions, and moves drawn from them", "[gdp]") {
  const rl::Task task = placelab::testing::task_of(
      graphs::zoo::make_model("rnnlm", {{"layers", 2}, {"steps", 3}, {"batch", 32}}), "v100-pcie-4");
  std::unique_ptr<rl::Learner> gdp =
      rl::learner_from_checkpoint(learned::pretrained_gdp_checkpoint(), "pretrained", nlohmann::json::object(), 5);
  const std::vector<std::vector<float>> preferences = gdp->device_preferences(task);
  REQUIRE(preferences.size() == static_cast<size_t>(task.problem->num_units()));
  // The greedy placement (place() keeps the better of it and 16 samples: compare with the decode itself).
  learned::GdpOptions greedy_only = learned::gdp_options_from_json(gdp->options());
  greedy_only.place_samples = 0;
  learned::GdpLearner greedy(greedy_only, 5);
  greedy.load_state(gdp->state());
  const std::vector<int32_t> placed = greedy.place(task);
  int decided = 0;
  for (int32_t u = 0; u < task.problem->num_units(); ++u) {
    const std::vector<float>& p = preferences[static_cast<size_t>(u)];
    if (p.empty()) continue;
    ++decided;
    double sum = 0;
    for (float x : p) sum += x;
    CHECK(sum == Approx(1).epsilon(1e-5));
    const auto top = static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin());
    CHECK(top == placed[static_cast<size_t>(task.problem->units().ops(u)[0])]);  // every GPU is allowed
  }
  CHECK(decided > 10);
  const policy::PlaceResult r =
      place(*task.simulator, "gdp", {{"search", "anneal"}, {"proposals", "policy"}, {"simulations", 120}});
  CHECK(r.info["simulations"].get<int64_t>() <= 120);
  CHECK(cost(*task.simulator, r.device_of) <= r.info["start_cost_s"].get<double>());
  CHECK_THAT(error_of([&] { place(*task.simulator, "hdp", {{"search", "anneal"}, {"proposals", "policy"}}); }),
             Catch::Contains("device preferences"));
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"proposals", "policy"}}); }),
             Catch::Contains("annealing searches"));
}

TEST_CASE("A GDP annealing search whose start took the whole time budget returns that start, where annealing fails",
          "[gdp][budget]") {
  const rl::Task task = placelab::testing::task_of(
      graphs::zoo::make_model("rnnlm", {{"layers", 2}, {"steps", 3}, {"batch", 32}}), "v100-pcie-4");
  const sim::Simulator& sim = *task.simulator;
  // A clock read costs 30 ms: the policy's placing and the heuristics spend the 0.05 s before a move.
  for (const char* search : {"anneal", "train_anneal"}) {
    const policy::PlaceResult r = place(sim, "gdp", {{"search", search}, {"seconds", 0.05}}, 0.03);
    INFO(search << ": " << r.info.dump());
    CHECK(r.info["late_start"] == true);
    CHECK(r.info["steps"] == 0);
    CHECK(cost(sim, r.device_of) == r.info["start_cost_s"].get<double>());
    CHECK(r.info["start_cost_s"].get<double>() <= r.info["policy_cost_s"].get<double>());
  }
  // Annealing alone has nothing worth keeping but its heuristics' start, so it says to raise the budget.
  CHECK_THROWS_WITH(place(sim, "annealing", {{"seconds", 0.05}}, 0.03), Catch::Contains("raise it"));
  CHECK(!place(sim, "gdp", {{"search", "anneal"}, {"seconds", 0.5}}, 1e-5).info.contains("late_start"));
}
