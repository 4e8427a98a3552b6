// Budgets are budgets (policy/budget.h): no budgeted placer runs more simulations than its "simulations"
// option, counted by the simulator itself (Simulator::runs), and none reports more time than its "seconds",
// checked on a fake clock (PlaceRequest::clock), so nothing here is timed.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "../test_util.h"
#include "learned_util.h"
#include "policy/budget.h"
#include "policy/placer.h"
#include "policy/rl/trainer.h"
#include "sim/presets.h"

using namespace placelab;
using placelab::testing::error_of;

namespace {

// A clock that moves `tick` seconds at each read, and `jump` more at read number `jump_at` (a slow unit).
struct FakeClock {
  double now = 0, tick = 0.001, jump = 0;
  int64_t reads = 0, jump_at = -1;
  std::function<double()> fn() {
    return [this] {
      now += tick + (reads++ == jump_at ? jump : 0);
      return now;
    };
  }
};

struct Placed {
  nlohmann::json info;
  int64_t runs = 0;  // simulations the simulator counted during the call
};

Placed place(const sim::Simulator& sim, const std::string& placer, const nlohmann::json& options,
             FakeClock* clock = nullptr) {
  policy::PlaceRequest request{sim, options, 3};
  if (clock != nullptr) request.clock = clock->fn();
  const int64_t before = sim.runs();
  policy::PlaceResult r = policy::make_placer(placer)->place(request);
  REQUIRE_NOTHROW(sim.check_placement(r.device_of));
  return {r.info, sim.runs() - before};
}

struct Case {
  std::string placer;
  nlohmann::json options;
  std::vector<int64_t> budgets = {40, 97};
};

// Every placer of the registry with a simulations budget (policy/registry.cpp), each kind of GDP step too.
const Case kSimulationBudgets[] = {
    {"annealing", {}},
    {"gdp", {}},
    {"gdp", {{"pretrained", false}}},
    {"gdp", {{"pretrained", false}, {"warm_steps", 2}, {"decoder", "single_shot"}}},
    {"gdp", {{"pretrained", false}, {"distill_from", 2}}},
    {"placeto", {{"episodes", 2}}, {150, 260}},  // an episode: one simulation, then one per unit moved
    {"hdp", {}},
    {"hsdag", {}}};

}  // namespace

TEST_CASE("Budget: forecasts a unit by the longest so far, keeps reserves, drops a late unit", "[budget]") {
  const graphs::Graph g = placelab::testing::tiny_dag(1, 12);
  const sim::Cluster c = sim::make_preset("v100-nvlink-2");
  const sim::Simulator sim(g, c);
  FakeClock clock;
  policy::PlaceRequest request{sim};
  request.clock = clock.fn();
  policy::Budget budget(request, 3, 0.010);  // times below are since this start, each read 1 ms later
  CHECK(budget.allows(3));                    // at 1 ms
  CHECK_FALSE(budget.allows(4));              // simulations are checked first: no read
  CHECK_FALSE(budget.allows(2, 2));           // two kept aside
  sim.simulate(std::vector<int32_t>(12, 0));
  CHECK(budget.used() == 1);
  CHECK_FALSE(budget.allows(3));
  clock.now += 0.002;
  CHECK(budget.end_unit());             // at 4 ms: a unit of 4 ms (from the start)
  CHECK(budget.allows(1));              // at 5 ms: 5 + 4 <= 10
  CHECK_FALSE(budget.allows(1, 0, 1));  // at 6 ms: 6 + 4 + 4 > 10, no time for one more unit after it
  clock.now += 0.004;
  CHECK_FALSE(budget.end_unit());  // ends at 11 ms, past the budget: dropped
  CHECK(budget.end_unit(false));   // unless it cannot be: at 12 ms
  nlohmann::json info;
  budget.report(info);
  CHECK(info["simulations"] == 1);
  CHECK(info["seconds"].get<double>() == Approx(0.012));
}

TEST_CASE("Placers never pass their simulations budget, counted by the simulator", "[budget]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(2, 24), "v100-nvlink-4");
  const sim::Simulator& sim = *task.simulator;
  for (const Case& c : kSimulationBudgets) {
    for (const int64_t budget : c.budgets) {
      INFO(c.placer << " " << c.options.dump() << " on a budget of " << budget);
      nlohmann::json options = c.options;
      options["simulations"] = budget;
      const Placed p = place(sim, c.placer, options);
      CHECK(p.runs <= budget);
      CHECK(p.info["simulations"] == p.runs);  // the info counts every simulation, placing included
      CHECK(p.info["steps"].get<int64_t>() > 0);  // a budget above the minimum buys search
      if (c.placer == "annealing") CHECK(p.runs == budget);  // one run per move: all of it is used
    }
  }
}

TEST_CASE("The README's GDP budget: 1,000 simulations are at most 1,000", "[budget]") {
  // It ran 1,011: training stopped after the step that passed the budget, and placing was not counted.
  const rl::Task task = placelab::testing::task_of(
      graphs::zoo::make_model("rnnlm", {{"layers", 2}, {"steps", 4}}), "v100-nvlink-4");
  const Placed p = place(*task.simulator, "gdp", {{"simulations", 200}});
  CHECK(p.runs <= 200);
  CHECK(p.runs > 200 - 12);  // stops only when one step more (12 rollouts) would pass it
  CHECK(p.info["simulations"] == p.runs);
}

TEST_CASE("A simulations budget below what placing alone takes is an error naming the minimum", "[budget]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(3, 12), "v100-nvlink-2");
  CHECK_THAT(error_of([&] { place(*task.simulator, "annealing", {{"simulations", 7}}); }),
             Catch::Contains("\"simulations\" is 7, but starting takes 7") && Catch::Contains("give at least 8"));
  // The reward's 2 reference placements, GDP's greedy decode and 16 samples, and the final comparison (2).
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"simulations", 20}}); }),
             Catch::Contains("\"simulations\" is 20, but placing alone takes up to 21") &&
                 Catch::Contains("give at least 21"));
  const Placed p = place(*task.simulator, "gdp", {{"simulations", 21}});
  CHECK(p.runs <= 21);
  CHECK(p.info["steps"] == 0);
  CHECK_THAT(error_of([&] { place(*task.simulator, "gdp", {{"seconds", 1}, {"minutes", 1}}); }),
             Catch::Contains("gives both \"seconds\" and \"minutes\""));
}

TEST_CASE("Placers never report more time than their seconds budget (a fake clock)", "[budget]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(4, 24), "v100-nvlink-4");
  const sim::Simulator& sim = *task.simulator;
  const Case cases[] = {{"annealing", {{"steps", 1000000}}},
                        {"local_search", {{"restarts", 1000000}}},
                        {"gdp", {{"pretrained", false}}},
                        {"placeto", {{"episodes", 1}}},
                        {"hdp", {}},
                        {"hsdag", {}}};
  for (const Case& c : cases) {
    INFO(c.placer);
    nlohmann::json options = c.options;
    options["seconds"] = 0.05;  // 50 ticks of the clock
    FakeClock clock;
    const Placed p = place(sim, c.placer, options, &clock);
    CHECK(p.info["seconds"].get<double>() <= 0.05);
    CHECK(p.info["seconds"].get<double>() > 0.05 / 2);  // and it used the budget, not stopped at once
    CHECK(p.info["steps"].get<int64_t>() > 0);
  }
}

TEST_CASE("A unit that ends past the time budget is dropped where it can be", "[budget]") {
  const rl::Task task = placelab::testing::task_of(placelab::testing::tiny_dag(5, 24), "v100-nvlink-4");
  const sim::Simulator& sim = *task.simulator;
  for (const std::string placer : {"annealing", "local_search"}) {
    INFO(placer);
    FakeClock steady, slow;
    const nlohmann::json options = {{placer == "annealing" ? "steps" : "restarts", 1000000}, {"seconds", 0.05}};
    const Placed a = place(sim, placer, options, &steady);
    // Two reads per unit (may it start, its end) after those before the search (annealing three, local search
    // one): read 14 ends annealing's sixth move, read 13 local search's sixth unit, and takes 40 ms.
    slow.jump_at = placer == "annealing" ? 14 : 13;
    slow.jump = 0.04;
    const Placed b = place(sim, placer, options, &slow);
    CHECK(b.info["seconds"].get<double>() <= 0.05);
    CHECK(b.info["steps"].get<int64_t>() < a.info["steps"].get<int64_t>());
    if (placer == "annealing") CHECK(b.info["steps"] == 5);
  }
}
