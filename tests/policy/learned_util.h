// Helpers of the learned-placer tests: tasks on presets, small seeded DAGs, pinned variants, and the
// validity check every learned placement must pass (simulator-valid, colocation classes kept whole).
#pragma once

#include <map>
#include <random>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "graphs/graph.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/problem.h"
#include "policy/rl/trainer.h"
#include "sim/presets.h"

namespace placelab::testing {

inline rl::Task task_of(graphs::Graph graph, const std::string& preset) {
  std::string name = graph.name() + " on " + preset;
  return rl::make_task(std::move(name), std::make_shared<const graphs::Graph>(std::move(graph)),
                       std::make_shared<const sim::Cluster>(sim::make_preset(preset)));
}

/** A seeded random DAG of `ops` ops, 4 wide. */
inline graphs::Graph tiny_dag(double seed, double ops = 30) {
  return graphs::zoo::make_model("random_dag", {{"ops", ops}, {"width", 4}, {"seed", seed}});
}

/** `g` with every 5th op (from op 2) pinned to `kind`. */
inline graphs::Graph with_pins(const graphs::Graph& g, const std::string& kind) {
  graphs::GraphBuilder b(g.name() + "_pinned");
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    graphs::OpSpec spec = g.op_spec(op);
    if (op % 5 == 2) spec.pinned_kind = kind;
    b.add_op(std::move(spec));
  }
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) b.add_edge(g.edge_spec(e));
  return std::move(b).build();
}

/** Valid for the simulator (pins included), and every colocation class on one device. */
inline void check_valid(const rl::Task& task, const std::vector<int32_t>& device_of) {
  REQUIRE_NOTHROW(task.simulator->check_placement(device_of));
  std::map<int32_t, int32_t> device_of_class;
  for (graphs::OpId op = 0; op < task.graph->num_ops(); ++op) {
    const int32_t c = task.graph->colocation(op);
    if (c == graphs::kNoClass) continue;
    const auto [it, fresh] = device_of_class.emplace(c, device_of[op]);
    if (!fresh) REQUIRE(it->second == device_of[op]);
  }
}

inline double step_time_s(const rl::Task& task, const std::vector<int32_t>& device_of) {
  return task.simulator->simulate(device_of).step_time_s;
}

/** Mean step time of uniformly random unit placements (what "random placement" means for a unit policy). */
inline double mean_random_step_s(const rl::Task& task, int32_t samples) {
  std::mt19937_64 rng(99);
  const learned::Problem& p = *task.problem;
  double total = 0;
  for (int32_t s = 0; s < samples; ++s) {
    std::vector<int32_t> unit_device(static_cast<size_t>(p.num_units()));
    for (int32_t u = 0; u < p.num_units(); ++u) {
      const auto allowed = p.units().allowed_devices(u);
      unit_device[u] = allowed[rng() % allowed.size()];
    }
    total += step_time_s(task, p.expand(unit_device));
  }
  return total / samples;
}

/**
 * Trains `learner` on `task` for `steps` steps and checks that it learned: the last 5 steps' mean rollout
 * cost is below 0.95x the first 5's, and its placement beats random placement and device `single_device` alone.
 */
inline void check_training_beats_random(rl::Learner& learner, const rl::Task& task, int64_t steps,
                                        int32_t single_device) {
  double first_cost = 0, last_cost = 0;
  for (int64_t step = 0; step < steps; ++step) {
    const rl::StepStats stats = learner.train_step(task, step);
    if (step < 5) first_cost += stats.cost_mean_s / 5;
    if (step >= steps - 5) last_cost += stats.cost_mean_s / 5;
  }
  const double random_s = mean_random_step_s(task, 64);
  const double single_s =
      step_time_s(task, std::vector<int32_t>(static_cast<size_t>(task.graph->num_ops()), single_device));
  const double placed_s = step_time_s(task, learner.place(task));
  INFO("random " << random_s << " s, one device " << single_s << " s, first rollouts " << first_cost << " s, last "
                 << last_cost << " s, placed " << placed_s << " s");
  REQUIRE(last_cost < 0.95 * first_cost);
  REQUIRE(placed_s < random_s);
  REQUIRE(placed_s < single_s);
}

}  // namespace placelab::testing
