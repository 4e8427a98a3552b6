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

TEST_CASE("The search option: known values only, and no training steps with the annealing search", "[gdp]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(13, 12), "v100-nvlink-2");
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"search", "genetic"}}); }),
             Catch::Contains("search") && Catch::Contains("\"train\" or \"anneal\""));
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"search", "anneal"}, {"steps", 3}}); }),
             Catch::Contains("steps") && Catch::Contains("leave out one of them"));
}
