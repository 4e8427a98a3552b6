// HSDAG: chain-fusion coarsening of the unit graph, valid and deterministic placements on a CPU + GPU
// host with pinned ops, the GPU found where it is clearly faster, training that beats random
// placement, and exact checkpoint resume.
#include <map>

#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/hsdag.h"
#include "policy/learned/learners.h"
#include "policy/rl/trainer.h"
#include "sim/presets.h"
#include "tests/policy/learned_util.h"

using namespace placelab;
using namespace placelab::testing;

namespace {

const nlohmann::json kSmall = {{"groups", 8}, {"hidden", 16}, {"rollouts", 6}};

// ops[i] -> ops[i + 1] for the edges listed, each op 1 GFLOP; `pins` maps ops to kinds.
graphs::Graph small_graph(int32_t ops, const std::vector<std::pair<int32_t, int32_t>>& edges,
                          const std::map<int32_t, std::string>& pins = {}) {
  graphs::GraphBuilder b("small");
  for (int32_t i = 0; i < ops; ++i) {
    graphs::OpSpec spec{.name = "op" + std::to_string(i), .type = "MatMul", .flops = 1e9, .output_bytes = 1e5};
    if (pins.count(i)) spec.pinned_kind = pins.at(i);
    b.add_op(std::move(spec));
  }
  for (const auto& [src, dst] : edges) b.add_edge(src, dst, 1e5);
  return std::move(b).build();
}

std::vector<std::pair<int32_t, int32_t>> chain_edges(int32_t ops) {
  std::vector<std::pair<int32_t, int32_t>> edges;
  for (int32_t i = 0; i + 1 < ops; ++i) edges.emplace_back(i, i + 1);
  return edges;
}

}  // namespace

TEST_CASE("learned::fuse_unit_chains: chains fuse up to max_chain, forks and pins break them", "[learned]") {
  const sim::Cluster cluster = sim::make_preset("cpu-gpu-1");
  SECTION("a chain of 10 in chains of at most 4") {
    const graphs::Graph g = small_graph(10, chain_edges(10));
    const sim::Simulator s(g, cluster);
    const learned::Problem p(s);
    const learned::UnitCoarsening c = learned::fuse_unit_chains(p, 4);
    REQUIRE(c.nodes() == 3);
    REQUIRE(c.node_of == std::vector<int32_t>{0, 0, 0, 0, 1, 1, 1, 1, 2, 2});
    REQUIRE(c.predecessors->indices == std::vector<int32_t>{0, 1});
    REQUIRE(learned::fuse_unit_chains(p, 1).nodes() == 10);
    REQUIRE(learned::fuse_unit_chains(p, 100).nodes() == 1);
  }
  SECTION("a diamond with a tail: only the tail fuses") {
    // 0 -> {1, 2} -> 3 -> 4 -> 5
    const graphs::Graph g = small_graph(6, {{0, 1}, {0, 2}, {1, 3}, {2, 3}, {3, 4}, {4, 5}});
    const sim::Simulator s(g, cluster);
    const learned::Problem p(s);
    const learned::UnitCoarsening c = learned::fuse_unit_chains(p, 8);
    REQUIRE(c.node_of == std::vector<int32_t>{0, 1, 2, 3, 3, 3});
    REQUIRE(c.neighbors->offsets.back() == 2 * 4);  // 4 undirected coarse edges
  }
  SECTION("a pinned op ends a chain") {
    const graphs::Graph g = small_graph(4, chain_edges(4), {{2, "cpu"}});
    const sim::Simulator s(g, cluster);
    const learned::Problem p(s);
    REQUIRE(learned::fuse_unit_chains(p, 8).node_of == std::vector<int32_t>{0, 0, 1, 2});
  }
  SECTION("max_chain below 1 is an error") {
    const graphs::Graph g = small_graph(2, chain_edges(2));
    const sim::Simulator s(g, cluster);
    const learned::Problem p(s);
    REQUIRE_THROWS_AS(learned::fuse_unit_chains(p, 0), Error);
  }
}

TEST_CASE("hsdag: valid placements keeping colocation and pins, deterministic for a seed", "[learned]") {
  // Training graph (colocation classes) with every 4th forward op pinned to the CPU.
  const graphs::Graph forward = graphs::zoo::make_model("random_dag", {{"ops", 12}, {"seed", 2}});
  graphs::GraphBuilder b("pinned");
  for (graphs::OpId op = 0; op < forward.num_ops(); ++op) {
    graphs::OpSpec spec = forward.op_spec(op);
    if (op % 4 == 1) spec.pinned_kind = "cpu";
    b.add_op(std::move(spec));
  }
  for (graphs::EdgeId e = 0; e < forward.num_edges(); ++e) b.add_edge(forward.edge_spec(e));
  const rl::Task task = task_of(graphs::expand_training(std::move(b).build()), "cpu-gpu-2");

  const auto run = [&](uint64_t seed) {
    auto learner = learned::make_hsdag_learner(kSmall, seed);
    std::vector<std::vector<int32_t>> placements;
    for (int64_t step = 0; step < 2; ++step) placements.push_back(learner->train_step(task, step).best_placement);
    placements.push_back(learner->place(task));
    for (const auto& device_of : placements) {
      if (device_of.empty()) continue;
      REQUIRE_NOTHROW(task.simulator->check_placement(device_of));
      for (graphs::OpId op = 0; op < task.graph->num_ops(); ++op)
        for (graphs::OpId other = 0; other < task.graph->num_ops(); ++other)
          if (task.graph->colocation(op) != graphs::kNoClass && task.graph->colocation(op) == task.graph->colocation(other))
            REQUIRE(device_of[op] == device_of[other]);
    }
    return std::make_pair(placements, learner->state());
  };
  const auto [first, first_state] = run(5);
  const auto [second, second_state] = run(5);
  REQUIRE(first == second);
  REQUIRE(first_state == second_state);
}

TEST_CASE("hsdag: on a CPU + GPU host it beats CPU-only where the GPU is clearly faster", "[learned]") {
  const rl::Task task = task_of(
      graphs::zoo::make_model("random_dag", {{"ops", 30}, {"seed", 4}, {"min_flops", 1e9}, {"max_flops", 1e11}}),
      "cpu-gpu-1");
  REQUIRE(task.cluster->device(0).kind == "cpu");
  const std::vector<int32_t> cpu_only(static_cast<size_t>(task.graph->num_ops()), 0);
  auto learner = learned::make_hsdag_learner(kSmall, 1);
  for (int64_t step = 0; step < 10; ++step) learner->train_step(task, step);
  const double cpu_s = step_time_s(task, cpu_only), placed_s = step_time_s(task, learner->place(task));
  INFO("cpu only " << cpu_s << " s, hsdag " << placed_s << " s");
  REQUIRE(placed_s < 0.5 * cpu_s);
}

TEST_CASE("hsdag: training beats random placement", "[learned]") {
  auto learner = learned::make_hsdag_learner(kSmall, 3);
  check_training_beats_random(
      *learner, task_of(graphs::zoo::make_model("random_dag", {{"ops", 30}, {"seed", 11}, {"min_flops", 1e8}}),
                        "cpu-gpu-2"),
      30, 1);
}

TEST_CASE("hsdag: checkpoint resume continues exactly, options are checked", "[learned]") {
  const rl::Task task = task_of(graphs::zoo::make_model("random_dag", {{"ops", 20}, {"seed", 6}}), "cpu-gpu-2");
  auto straight = learned::make_hsdag_learner(kSmall, 9);
  for (int64_t step = 0; step < 4; ++step) straight->train_step(task, step);
  auto first = learned::make_hsdag_learner(kSmall, 9);
  for (int64_t step = 0; step < 2; ++step) first->train_step(task, step);
  auto resumed = learned::make_hsdag_learner(kSmall, 77);
  resumed->load_state(nlohmann::json::parse(first->state().dump()));
  for (int64_t step = 2; step < 4; ++step) resumed->train_step(task, step);
  REQUIRE(resumed->state() == straight->state());

  auto registered = rl::make_learner("hsdag", nlohmann::json::object(), 1);
  REQUIRE(registered->options()["algorithm"] == "ppo");
  REQUIRE(registered->options()["max_chain"] == 4);
  REQUIRE_THROWS_AS(learned::make_hsdag_learner({{"max_chain", 0}}, 1), Error);
  REQUIRE_THROWS_AS(learned::make_hsdag_learner({{"chain", 2}}, 1), Error);
  // An HDP state does not fit.
  REQUIRE_THROWS_AS(registered->load_state(learned::make_hdp_learner(kSmall, 1)->state()), Error);
}
