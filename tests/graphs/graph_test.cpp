#include <catch2/catch.hpp>

#include "graphs/error.h"
#include "graphs/graph.h"

using namespace placelab;
using namespace placelab::graphs;

namespace {

OpSpec op(std::string name, double flops = 1) {
  return OpSpec{.name = std::move(name), .type = "MatMul", .flops = flops};
}

std::string build_error(GraphBuilder& b) {
  try {
    std::move(b).build();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("graphs::Graph: diamond has CSR both ways, topological order and depth", "[graphs]") {
  GraphBuilder b("diamond");
  OpId d = b.add_op(op("d"));  // ids out of topological order on purpose
  OpId a = b.add_op(op("a"));
  OpId bb = b.add_op(op("b"));
  OpId c = b.add_op(op("c"));
  b.add_edge(a, bb, 10);
  b.add_edge(a, c, 20);
  b.add_edge(bb, d, 30);
  b.add_edge(c, d, 40);
  Graph g = std::move(b).build();

  REQUIRE(g.num_ops() == 4);
  REQUIRE(g.num_edges() == 4);
  CHECK(g.out_degree(a) == 2);
  CHECK(g.in_degree(d) == 2);
  CHECK(std::vector<OpId>(g.successors(a).begin(), g.successors(a).end()) == std::vector<OpId>{bb, c});
  CHECK(std::vector<OpId>(g.predecessors(d).begin(), g.predecessors(d).end()) == std::vector<OpId>{bb, c});
  CHECK(std::vector<OpId>(g.topo_order().begin(), g.topo_order().end()) == std::vector<OpId>{a, bb, c, d});
  CHECK(g.topo_rank(d) == 3);
  CHECK(g.depth(a) == 0);
  CHECK(g.depth(d) == 2);
  CHECK(g.find_op("c") == c);
  CHECK(g.find_op("zz") == -1);
  for (EdgeId e : g.in_edges(d)) CHECK(g.edge_dst(e) == d);

  GraphStats s = g.stats();
  CHECK(s.depth == 3);
  CHECK(s.flops == 4);
  CHECK(s.edge_bytes == 100);
}

TEST_CASE("graphs::Graph: op types, pins and measured times are interned", "[graphs]") {
  GraphBuilder b("kinds");
  OpSpec x = op("x");
  x.measured_s = {{"gpu", 1e-3}, {"cpu", 5e-3}};
  x.pinned_kind = "cpu";
  OpSpec y = op("y");
  y.type = "Relu";
  y.measured_s = {{"cpu", 2e-3}};
  b.add_op(x);
  b.add_op(y);
  Graph g = std::move(b).build();
  CHECK(g.type_names() == std::vector<std::string>{"MatMul", "Relu"});
  CHECK(g.measured_kinds() == std::vector<std::string>{"gpu", "cpu"});
  CHECK(g.measured_s(0, g.measured_kind_index("gpu")) == 1e-3);
  CHECK(std::isnan(g.measured_s(1, g.measured_kind_index("gpu"))));
  CHECK(g.measured_s(1, g.measured_kind_index("cpu")) == 2e-3);
  CHECK(g.pinned_kind(0) == "cpu");
  CHECK(g.pinned_kind(1).empty());
  CHECK(g.op_spec(0).measured_s.size() == 2);
}

TEST_CASE("graphs::GraphBuilder: invalid graphs give errors naming the place", "[graphs]") {
  SECTION("empty graph") {
    GraphBuilder b("nothing");
    CHECK_THAT(build_error(b), Catch::Contains("has no ops"));
  }
  SECTION("cycle lists its ops in order") {
    GraphBuilder b("loop");
    b.add_op(op("src"));
    b.add_op(op("p"));
    b.add_op(op("q"));
    b.add_op(op("r"));
    b.add_edge(0, 1);
    b.add_edge(1, 2);
    b.add_edge(2, 3);
    b.add_edge(3, 1);
    CHECK_THAT(build_error(b), Catch::Contains("cycle: \"p\" -> \"q\" -> \"r\" -> \"p\""));
  }
  SECTION("dangling edge") {
    GraphBuilder b("dangle");
    b.add_op(op("a"));
    b.add_edge(0, 7);
    CHECK_THAT(build_error(b), Catch::Contains("edge 0 (0 -> 7): refers to a missing op"));
  }
  SECTION("self loop") {
    GraphBuilder b("self");
    b.add_op(op("a"));
    b.add_edge(0, 0);
    CHECK_THAT(build_error(b), Catch::Contains("self-loop"));
  }
  SECTION("duplicate edge") {
    GraphBuilder b("twice");
    b.add_op(op("a"));
    b.add_op(op("b"));
    b.add_edge(0, 1);
    b.add_edge(0, 1);
    CHECK_THAT(build_error(b), Catch::Contains("edge 1 (\"a\" -> \"b\"): duplicates"));
  }
  SECTION("duplicate name") {
    GraphBuilder b("dup");
    b.add_op(op("a"));
    b.add_op(op("a"));
    CHECK_THAT(build_error(b), Catch::Contains("op 1: duplicate name \"a\""));
  }
  SECTION("negative, NaN and infinite numbers") {
    for (double bad : {-1.0, std::nan(""), double(INFINITY)}) {
      GraphBuilder b("bad");
      b.add_op(op("a", bad));
      CHECK_THAT(build_error(b), Catch::Contains("op 0 (\"a\"): flops is"));
    }
    GraphBuilder b("badedge");
    b.add_op(op("a"));
    b.add_op(op("b"));
    b.add_edge(0, 1, -5);
    CHECK_THAT(build_error(b), Catch::Contains("bytes is -5"));
  }
  SECTION("amounts whose total overflows") {
    GraphBuilder b("huge");
    b.add_op(op("a", 1e308));
    b.add_op(op("b", 1e308));
    CHECK_THAT(build_error(b), Catch::Contains("op 1 (\"b\"): flops is 1e+308, which takes the graph's total flops past"));
    GraphBuilder e("hugeedges");
    for (const char* name : {"a", "b", "c"}) e.add_op(op(name));
    e.add_edge(0, 1, 1.5e308);
    e.add_edge(1, 2, 1.5e308);
    CHECK_THAT(build_error(e), Catch::Contains("edge 1 (\"b\" -> \"c\"): bytes is 1.5e+308, which takes"));
  }
}
