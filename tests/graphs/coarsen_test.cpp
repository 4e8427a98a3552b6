// Coarsening: hand-checked small graphs for each grouping, and properties on seeded random DAGs
// (acyclic, every op mapped, totals preserved, colocation kept, expand_placement consistent).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <random>
#include <set>

#include "graphs/coarsen.h"
#include "graphs/error.h"
#include "graphs/graph.h"
#include "graphs/msr.h"
#include "graphs/training.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::graphs;
using placelab::testing::error_of;

namespace {

OpSpec op(std::string name, double flops = 1, int32_t colocation = kNoClass, std::string type = "MatMul") {
  return OpSpec{.name = std::move(name), .type = std::move(type), .flops = flops, .colocation = colocation};
}

std::vector<OpId> members_of(const Coarsening& c, OpId group) {
  std::vector<OpId> out;
  for (OpId o = 0; o < static_cast<OpId>(c.group_of.size()); ++o)
    if (c.group_of[o] == group) out.push_back(o);
  return out;
}

// Coarse edges as (src group, dst group) -> bytes.
std::map<std::pair<OpId, OpId>, double> coarse_edges(const Graph& g) {
  std::map<std::pair<OpId, OpId>, double> out;
  for (EdgeId e = 0; e < g.num_edges(); ++e) out[{g.edge_src(e), g.edge_dst(e)}] = g.edge_bytes(e);
  return out;
}

uint64_t below(std::mt19937_64& rng, uint64_t n) { return rng() % n; }
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// A random DAG whose op ids are not in topological order; integer-valued amounts so sums are exact.
Graph random_dag(uint64_t seed, int32_t n) {
  std::mt19937_64 rng(seed);
  std::vector<OpId> position(n);  // position[op] in a hidden topological order
  std::iota(position.begin(), position.end(), 0);
  for (int32_t i = n - 1; i > 0; --i) std::swap(position[i], position[below(rng, i + 1)]);
  GraphBuilder b("random" + std::to_string(seed));
  for (OpId o = 0; o < n; ++o) {
    OpSpec s{.name = "op" + std::to_string(o),
             .type = below(rng, 2) ? "Conv" : "Add",
             .phase = below(rng, 4) == 0 ? Phase::backward : Phase::forward,
             .flops = static_cast<double>(below(rng, 100)),
             .bytes_read = static_cast<double>(below(rng, 50)),
             .bytes_written = static_cast<double>(below(rng, 50)),
             .output_bytes = static_cast<double>(below(rng, 64)),
             .param_bytes = static_cast<double>(below(rng, 3) * 16),
             .temp_bytes = static_cast<double>(below(rng, 8)),
             .colocation = below(rng, 3) == 0 ? static_cast<int32_t>(below(rng, n / 5 + 1)) : kNoClass,
             .layer = static_cast<int32_t>(below(rng, 3))};
    s.measured_s.emplace_back("gpu", static_cast<double>(below(rng, 10)));
    if (below(rng, 3) != 0) s.measured_s.emplace_back("cpu", static_cast<double>(below(rng, 10)));
    if (below(rng, 10) == 0) s.pinned_kind = "cpu";
    b.add_op(std::move(s));
  }
  std::vector<OpId> at(n);
  for (OpId o = 0; o < n; ++o) at[position[o]] = o;
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = i + 1; j < std::min(n, i + 8); ++j)
      if (unit(rng) < 0.3)
        b.add_edge(at[i], at[j], static_cast<double>(below(rng, 32)), below(rng, 2) ? 1.0 : kUnknown);
  return std::move(b).build();
}

// Properties every coarsening must have.
void check_coarsening(const Graph& g, const Coarsening& c, uint64_t seed) {
  const Graph& cg = c.graph;  // built, hence validated acyclic
  REQUIRE(c.group_of.size() == static_cast<size_t>(g.num_ops()));
  std::vector<int32_t> size(cg.num_ops(), 0);
  for (OpId group : c.group_of) {
    REQUIRE(group >= 0);
    REQUIRE(group < cg.num_ops());
    ++size[group];
  }
  CHECK(std::count(size.begin(), size.end(), 0) == 0);

  GraphStats s = g.stats(), cs = cg.stats();
  CHECK(cs.flops == s.flops);
  CHECK(cs.bytes_read == s.bytes_read);
  CHECK(cs.bytes_written == s.bytes_written);
  CHECK(cs.param_bytes == s.param_bytes);
  CHECK(cs.output_bytes <= s.output_bytes);
  auto total = [](const Graph& graph, auto field) {
    double sum = 0;
    for (OpId o = 0; o < graph.num_ops(); ++o) sum += field(graph, o);
    return sum;
  };
  auto temp = [](const Graph& graph, OpId o) { return graph.temp_bytes(o); };
  CHECK(total(cg, temp) == total(g, temp));
  auto gpu = [](const Graph& graph, OpId o) { return graph.measured_s(o, graph.measured_kind_index("gpu")); };
  if (g.measured_kind_index("gpu") >= 0) CHECK(total(cg, gpu) == total(g, gpu));

  // Per group: phase is the earliest member phase; a "cpu" time only where every member has one.
  const int32_t cpu = g.measured_kind_index("cpu"), coarse_cpu = cg.measured_kind_index("cpu");
  for (OpId group = 0; group < cg.num_ops(); ++group) {
    Phase phase = Phase::update;
    bool all_cpu = cpu >= 0;
    for (OpId o : members_of(c, group)) {
      phase = std::min(phase, g.phase(o));
      all_cpu = all_cpu && !std::isnan(g.measured_s(o, cpu));
    }
    CHECK(cg.phase(group) == phase);
    CHECK(all_cpu == (coarse_cpu >= 0 && !std::isnan(cg.measured_s(group, coarse_cpu))));
  }

  // Edges: a coarse edge exactly where an original edge crosses groups, with bytes between the largest
  // crossing edge and the sum of them.
  std::map<std::pair<OpId, OpId>, std::pair<double, double>> crossing;  // max, sum
  for (EdgeId e = 0; e < g.num_edges(); ++e) {
    const OpId a = c.group_of[g.edge_src(e)], b = c.group_of[g.edge_dst(e)];
    if (a == b) continue;
    auto& [mx, sum] = crossing[{a, b}];
    mx = std::max(mx, g.edge_bytes(e));
    sum += g.edge_bytes(e);
  }
  auto edges = coarse_edges(cg);
  REQUIRE(edges.size() == crossing.size());
  for (auto& [key, bytes] : edges) {
    REQUIRE(crossing.count(key) == 1);
    CHECK(bytes >= crossing[key].first);
    CHECK(bytes <= crossing[key].second);
  }

  // Colocation: ops of one class land in coarse ops of one (coarse) class.
  std::map<int32_t, int32_t> coarse_class_of;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    if (g.colocation(o) == kNoClass) continue;
    const int32_t cc = cg.colocation(c.group_of[o]);
    CHECK(cc != kNoClass);
    CHECK(coarse_class_of.emplace(g.colocation(o), cc).first->second == cc);
  }

  // Any coarse placement expands to one that puts each op where its group is.
  std::mt19937_64 rng(seed);
  std::vector<int32_t> coarse_device(cg.num_ops());
  for (auto& d : coarse_device) d = static_cast<int32_t>(below(rng, 4));
  std::vector<int32_t> device = expand_placement(coarse_device, c);
  REQUIRE(device.size() == c.group_of.size());
  for (OpId o = 0; o < g.num_ops(); ++o) CHECK(device[o] == coarse_device[c.group_of[o]]);
}

}  // namespace

TEST_CASE("graphs::contract_colocation: A -> X -> B with A, B colocated merges all three", "[graphs]") {
  GraphBuilder b("sandwich");
  OpId a = b.add_op(op("A", 1, 4));
  OpId x = b.add_op(op("X", 2, kNoClass, "Relu"));
  OpId bb = b.add_op(op("B", 4, 4));
  OpId y = b.add_op(op("Y", 8));
  b.add_edge(a, x, 10);
  b.add_edge(x, bb, 20);
  b.add_edge(bb, y, 30);
  Graph g = std::move(b).build();
  Coarsening c = contract_colocation(g);
  REQUIRE(c.graph.num_ops() == 2);
  CHECK(c.group_of == std::vector<OpId>{0, 0, 0, 1});
  CHECK(c.graph.op_name(0) == "A+2");
  CHECK(c.graph.op_type(0) == "Group");
  CHECK(c.graph.op_name(1) == "Y");
  CHECK(c.graph.op_type(1) == "MatMul");
  CHECK(c.graph.flops(0) == 7);
  CHECK(c.graph.colocation(0) == 4);
  CHECK(c.graph.colocation(1) == kNoClass);
  REQUIRE(c.graph.num_edges() == 1);
  CHECK(c.graph.edge_bytes(0) == 30);
  CHECK(c.graph.name() == "sandwich/colocation");
  check_coarsening(g, c, 1);
}

TEST_CASE("graphs::contract_colocation: classes, aggregation and one tensor per destination group", "[graphs]") {
  // p feeds q and r (both class 2) with one tensor: the coarse edge carries it once.
  GraphBuilder b("agg");
  OpSpec p = op("p", 1);
  p.output_bytes = 100;
  p.measured_s = {{"gpu", 0.5}, {"cpu", 2}};
  p.layer = 3;
  OpSpec q = op("q", 2, 2);
  q.output_bytes = 7;  // consumed only inside its group
  q.measured_s = {{"gpu", 0.25}};
  q.layer = 3;
  q.phase = Phase::backward;
  OpSpec r = op("r", 4, 2);
  r.output_bytes = 9;  // a sink: its output leaves the graph
  r.measured_s = {{"gpu", 1}, {"cpu", 3}};
  r.layer = 3;
  r.phase = Phase::backward;
  r.pinned_kind = "cpu";
  b.add_op(p);
  b.add_op(q);
  b.add_op(r);
  b.add_edge(0, 1, 100, 0.5);
  b.add_edge(0, 2, 100, 0.5);
  b.add_edge(1, 2, 7);
  Graph g = std::move(b).build();
  Coarsening c = contract_colocation(g);
  const Graph& cg = c.graph;
  REQUIRE(cg.num_ops() == 2);
  CHECK(cg.op_name(1) == "q+1");
  CHECK(cg.phase(1) == Phase::backward);
  CHECK(cg.layer(1) == 3);
  CHECK(cg.pinned_kind(1) == "cpu");
  CHECK(cg.output_bytes(1) == 9);
  CHECK(cg.measured_s(1, cg.measured_kind_index("gpu")) == 1.25);
  CHECK(std::isnan(cg.measured_s(1, cg.measured_kind_index("cpu"))));  // q has no cpu time
  CHECK(cg.measured_s(0, cg.measured_kind_index("cpu")) == 2);
  REQUIRE(cg.num_edges() == 1);
  CHECK(cg.edge_bytes(0) == 100);
  CHECK(cg.edge_comm_s(0) == 0.5);
  check_coarsening(g, c, 2);
}

TEST_CASE("graphs::contract_colocation: cycles through several classes merge them", "[graphs]") {
  // a(1) -> b(2) -> c(1) -> d(2): contracting 1 and 2 gives 1 <-> 2, so both classes form one group.
  GraphBuilder b("twoclass");
  b.add_op(op("a", 1, 1));
  b.add_op(op("b", 1, 2));
  b.add_op(op("c", 1, 1));
  b.add_op(op("d", 1, 2));
  b.add_op(op("e", 1));
  b.add_edge(0, 1, 1);
  b.add_edge(1, 2, 1);
  b.add_edge(2, 3, 1);
  b.add_edge(4, 0, 1);
  Graph g = std::move(b).build();
  Coarsening c = contract_colocation(g);
  REQUIRE(c.graph.num_ops() == 2);
  CHECK(c.group_of == std::vector<OpId>{1, 1, 1, 1, 0});  // numbered in topological order
  CHECK(c.graph.colocation(1) == 1);                      // classes 1 and 2 joined under the smaller
  check_coarsening(g, c, 3);

  GraphBuilder pins("pins");
  OpSpec x = op("x", 1, 5);
  x.pinned_kind = "cpu";
  OpSpec y = op("y", 1, 5);
  y.pinned_kind = "gpu";
  pins.add_op(x);
  pins.add_op(y);
  Graph pg = std::move(pins).build();
  std::string msg = error_of([&] { contract_colocation(pg); });
  CHECK(msg.find("\"x\" (pinned to \"cpu\")") != std::string::npos);
  CHECK(msg.find("\"y\" (pinned to \"gpu\")") != std::string::npos);
}

TEST_CASE("graphs::fuse_chains: fuses single-successor, single-predecessor links only", "[graphs]") {
  // a -> b -> c -> {d, e} -> f -> g: chains {a, b, c}, {d}, {e}, {f, g}.
  GraphBuilder b("chains");
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g"}) b.add_op(op(name, 1));
  b.add_edge(0, 1, 1);
  b.add_edge(1, 2, 2);
  b.add_edge(2, 3, 3);
  b.add_edge(2, 4, 4);
  b.add_edge(3, 5, 5);
  b.add_edge(4, 5, 6);
  b.add_edge(5, 6, 7);
  Graph g = std::move(b).build();
  Coarsening c = fuse_chains(g);
  REQUIRE(c.graph.num_ops() == 4);
  CHECK(c.group_of == std::vector<OpId>{0, 0, 0, 1, 2, 3, 3});
  CHECK(c.graph.op_name(0) == "a+2");
  CHECK(c.graph.op_type(0) == "MatMul");
  CHECK(c.graph.flops(0) == 3);
  CHECK(coarse_edges(c.graph) ==
        std::map<std::pair<OpId, OpId>, double>{{{0, 1}, 3}, {{0, 2}, 4}, {{1, 3}, 5}, {{2, 3}, 6}});
  check_coarsening(g, c, 4);

  // A pin conflict stops a chain: u (cpu) -> v -> w (gpu) fuses u with v only.
  GraphBuilder p("pinned");
  OpSpec u = op("u");
  u.pinned_kind = "cpu";
  OpSpec w = op("w");
  w.pinned_kind = "gpu";
  p.add_op(u);
  p.add_op(op("v"));
  p.add_op(w);
  p.add_edge(0, 1);
  p.add_edge(1, 2);
  Coarsening pc = fuse_chains(std::move(p).build());
  CHECK(pc.group_of == std::vector<OpId>{0, 0, 1});
  CHECK(pc.graph.pinned_kind(0) == "cpu");
}

TEST_CASE("graphs::group_by_size: contiguous, FLOP-balanced groups", "[graphs]") {
  auto chain = [](std::vector<double> flops) {
    GraphBuilder b("chain");
    for (size_t i = 0; i < flops.size(); ++i) b.add_op(op("op" + std::to_string(i), flops[i]));
    for (size_t i = 0; i + 1 < flops.size(); ++i) b.add_edge(static_cast<OpId>(i), static_cast<OpId>(i + 1), 1);
    return std::move(b).build();
  };
  Graph g = chain({1, 1, 1, 1, 4});
  CHECK(group_by_size(g, 1).group_of == std::vector<OpId>{0, 0, 0, 0, 0});
  CHECK(group_by_size(g, 2).group_of == std::vector<OpId>{0, 0, 0, 0, 1});
  // Capacity 4 needs two groups; the third splits the heavier-and-larger {op0..op3} in the middle.
  CHECK(group_by_size(g, 3).group_of == std::vector<OpId>{0, 0, 1, 1, 2});
  CHECK(group_by_size(g, 5).group_of == std::vector<OpId>{0, 1, 2, 3, 4});
  CHECK(group_by_size(g, 50).graph.num_ops() == 5);
  CHECK(group_by_size(g, 2).graph.name() == "chain/groups");
  // Without FLOPs the ops are counted.
  CHECK(group_by_size(chain({0, 0, 0, 0, 0, 0}), 3).group_of == std::vector<OpId>{0, 0, 1, 1, 2, 2});
  CHECK(error_of([&] { group_by_size(g, 0); }).find("max_groups is 0") != std::string::npos);
  check_coarsening(g, group_by_size(g, 3), 5);
}

TEST_CASE("graphs::compose and expand_placement: maps through two levels", "[graphs]") {
  // s -> {a1 -> a2 (class 0), b} -> c1 -> c2 (class 1) -> t: classes contract to S, A, B, C, T; then
  // the chain C -> T fuses.
  GraphBuilder b("two_levels");
  for (auto [name, cls] : {std::pair{"s", kNoClass}, {"a1", 0}, {"a2", 0}, {"b", kNoClass}, {"c1", 1}, {"c2", 1},
                           {"t", kNoClass}})
    b.add_op(op(name, 1, cls));
  for (auto [src, dst] : {std::pair{0, 1}, {1, 2}, {0, 3}, {2, 4}, {3, 4}, {4, 5}, {5, 6}}) b.add_edge(src, dst, 1);
  Graph g = std::move(b).build();
  Coarsening first = contract_colocation(g);
  CHECK(first.group_of == std::vector<OpId>{0, 1, 1, 2, 3, 3, 4});
  Coarsening second = fuse_chains(first.graph);
  CHECK(second.group_of == std::vector<OpId>{0, 1, 2, 3, 3});
  Coarsening both = compose(first, second);
  CHECK(both.group_of == std::vector<OpId>{0, 1, 1, 2, 3, 3, 3});
  CHECK(both.graph.num_ops() == 4);
  CHECK(both.graph.op_name(3) == "c1+1+1");  // the fused group of "c1+1" and "t"
  CHECK(both.graph.colocation(3) == 1);
  check_coarsening(g, both, 6);
  std::vector<int32_t> device = expand_placement(std::vector<int32_t>{7, 5, 6, 8}, both);
  CHECK(device == std::vector<int32_t>{7, 5, 5, 6, 8, 8, 8});

  CHECK(error_of([&] { compose(second, first); }).find("compose") != std::string::npos);
  CHECK(error_of([&] { expand_placement(std::vector<int32_t>(99, 0), both); }).find("has 99 entries") !=
        std::string::npos);
  CHECK(error_of([&] { contract_labels(g, std::vector<int64_t>(3, 0), "x"); }).find("3 labels") != std::string::npos);
}

TEST_CASE("graphs::contract_colocation: a training graph's layers collapse (forward and gradient edges)", "[graphs]") {
  // l_i -> l_{i+1} and l_{i+1}/grad -> l_i/grad put classes i and i+1 on a cycle: an acyclic
  // contraction of whole classes must merge them, so a chain's training graph becomes one op.
  GraphBuilder b("mlp");
  for (int i = 0; i < 4; ++i) {
    OpSpec s = op("l" + std::to_string(i), 10);
    s.param_bytes = 8;
    s.output_bytes = 4;
    b.add_op(s);
  }
  for (OpId i = 0; i < 3; ++i) b.add_edge(i, i + 1, 4);
  Graph g = expand_training(std::move(b).build());
  Coarsening c = contract_colocation(g);
  CHECK(c.graph.num_ops() == 1);
  CHECK(c.graph.colocation(0) == 0);
  check_coarsening(g, c, 7);
}

TEST_CASE("graphs::coarsening: properties on seeded random DAGs", "[graphs]") {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    INFO("seed " << seed);
    const auto n = static_cast<int32_t>(5 + seed * 7);
    Graph g = random_dag(seed, n);

    Coarsening colocated = contract_colocation(g);
    check_coarsening(g, colocated, seed);
    for (OpId a = 0; a < n; ++a)  // every class inside one group
      for (OpId b : {static_cast<OpId>((a * 7 + 3) % n), static_cast<OpId>(n - 1 - a)})
        if (g.colocation(a) != kNoClass && g.colocation(a) == g.colocation(b))
          CHECK(colocated.group_of[a] == colocated.group_of[b]);

    Coarsening chains = fuse_chains(g);
    check_coarsening(g, chains, seed);
    // Maximal: no coarse link is still a sole-successor / sole-predecessor pair (all pins are "cpu").
    const Graph& cg = chains.graph;
    int32_t fusable = 0;
    for (OpId x = 0; x < cg.num_ops(); ++x) fusable += cg.out_degree(x) == 1 && cg.in_degree(cg.successors(x)[0]) == 1;
    CHECK(fusable == 0);

    for (int32_t max_groups : {1, 3, 10, n}) {
      Coarsening grouped = group_by_size(g, max_groups);
      check_coarsening(g, grouped, seed);
      CHECK(grouped.graph.num_ops() <= max_groups);
      CHECK(grouped.graph.num_ops() == std::min(max_groups, n));
      // Contiguous in topological order: group ids never decrease along it.
      for (int32_t r = 1; r < n; ++r)
        CHECK(grouped.group_of[g.topo_order()[r - 1]] <= grouped.group_of[g.topo_order()[r]]);
      double max_flops = 0, max_group = 0;
      for (OpId o = 0; o < n; ++o) max_flops = std::max(max_flops, g.flops(o));
      for (OpId o = 0; o < grouped.graph.num_ops(); ++o) max_group = std::max(max_group, grouped.graph.flops(o));
      CHECK(max_group <= g.stats().flops / max_groups + max_flops);
    }

    Coarsening both = compose(colocated, fuse_chains(colocated.graph));
    check_coarsening(g, both, seed);
  }
}

TEST_CASE("graphs::contract_colocation: msr training graphs keep their measured totals", "[graphs]") {
  MsrInstance inst = read_msr(std::string(PLACELAB_SHARED_DATA) +
                              "/msr-dnn-partitioning/throughput-inputs/OperatorGraphs/bert_l-3_training.json");
  const Graph& g = inst.graph;
  Coarsening c = contract_colocation(g);
  std::set<int32_t> classes;
  int32_t unclassed = 0;
  for (OpId o = 0; o < g.num_ops(); ++o) {
    if (g.colocation(o) == kNoClass) ++unclassed;
    else classes.insert(g.colocation(o));
  }
  CHECK(c.graph.num_ops() <= static_cast<int32_t>(classes.size()) + unclassed);
  const int32_t acc = g.measured_kind_index("accelerator"), cacc = c.graph.measured_kind_index("accelerator");
  double total = 0, coarse_total = 0;
  for (OpId o = 0; o < g.num_ops(); ++o) total += g.measured_s(o, acc);
  for (OpId o = 0; o < c.graph.num_ops(); ++o) coarse_total += c.graph.measured_s(o, cacc);
  CHECK(coarse_total == Approx(total).epsilon(1e-12));
  CHECK(c.graph.stats().param_bytes == g.stats().param_bytes);
  for (OpId o = 0; o < g.num_ops(); ++o)
    for (OpId next : g.successors(o)) CHECK(c.graph.topo_rank(c.group_of[o]) <= c.graph.topo_rank(c.group_of[next]));
}
