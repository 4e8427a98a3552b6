// Training-graph expansion on graphs small enough to check every op and edge by hand.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <set>
#include <tuple>

#include "graphs/error.h"
#include "graphs/graph.h"
#include "graphs/training.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::graphs;

namespace {

OpSpec fwd(std::string name, double flops, double output_bytes, double param_bytes) {
  return OpSpec{.name = std::move(name),
                .type = "MatMul",
                .flops = flops,
                .bytes_read = 3 * flops,
                .bytes_written = output_bytes,
                .output_bytes = output_bytes,
                .param_bytes = param_bytes,
                .temp_bytes = 5};
}

// Edges as (src name, dst name, bytes), for order-free comparison.
std::set<std::tuple<std::string, std::string, double>> edge_set(const Graph& g) {
  std::set<std::tuple<std::string, std::string, double>> out;
  for (EdgeId e = 0; e < g.num_edges(); ++e)
    out.emplace(g.op_name(g.edge_src(e)), g.op_name(g.edge_dst(e)), g.edge_bytes(e));
  return out;
}

std::string error_of(const Graph& g, const TrainingOptions& options = {}) {
  return placelab::testing::error_of([&] { expand_training(g, options); });
}

}  // namespace

TEST_CASE("graphs::expand_training: chain a -> b -> c, every op and edge by hand", "[graphs]") {
  GraphBuilder b("chain");
  OpSpec a = fwd("a", 10, 100, 0);
  a.layer = 0;
  OpSpec bb = fwd("b", 20, 200, 1000);
  bb.layer = 1;
  bb.colocation = 7;  // kept; a and c get fresh classes above 7
  bb.measured_s = {{"gpu", 0.5}};
  b.add_op(a);
  b.add_op(bb);
  b.add_op(fwd("c", 30, 300, 4000));
  b.add_edge(0, 1, 100, 0.25);
  b.add_edge(1, 2, 200);
  Graph g = expand_training(std::move(b).build(), TrainingOptions{.optimizer_state_factor = 2,
                                                                  .backward_flops_factor = 2,
                                                                  .update_flops_per_param_byte = 2.5});

  CHECK(g.name() == "chain_training");
  REQUIRE(g.num_ops() == 3 + 3 + 2);
  REQUIRE(g.num_edges() == 2 + 2 + 3 + 2);
  GraphStats s = g.stats();
  CHECK(s.forward_ops == 3);
  CHECK(s.backward_ops == 3);
  CHECK(s.update_ops == 2);

  // Forward ops keep their ids and fields (measured times included); backward op of f is 3 + f.
  CHECK(g.op_name(1) == "b");
  CHECK(g.measured_s(1, g.measured_kind_index("gpu")) == 0.5);
  CHECK(g.op_name(4) == "b/grad");
  CHECK(g.op_type(4) == "MatMulGrad");
  CHECK(g.phase(4) == Phase::backward);
  CHECK(g.flops(4) == 40);
  CHECK(g.bytes_read(4) == 120);
  CHECK(g.bytes_written(4) == 400);
  CHECK(g.output_bytes(4) == 100 + 1000);  // gradient of its input plus of its weights
  CHECK(g.output_bytes(3) == 0);           // a has no inputs and no weights
  CHECK(g.param_bytes(4) == 0);
  CHECK(g.temp_bytes(4) == 5);
  CHECK(std::isnan(g.measured_s(4, g.measured_kind_index("gpu"))));
  CHECK(g.layer(4) == 1);
  CHECK(g.layer(3) == 0);

  OpId bu = g.find_op("b/update");
  OpId cu = g.find_op("c/update");
  REQUIRE(bu >= 0);
  REQUIRE(cu >= 0);
  CHECK(g.find_op("a/update") == -1);
  CHECK(g.phase(bu) == Phase::update);
  CHECK(g.op_type(cu) == "MatMulUpdate");
  CHECK(g.param_bytes(bu) == 2000);
  CHECK(g.param_bytes(cu) == 8000);
  CHECK(g.flops(cu) == 10000);
  CHECK(g.bytes_read(cu) == 4000 + 4000 + 8000);
  CHECK(g.bytes_written(cu) == 4000 + 8000);

  // Colocation: b keeps 7; a and c get fresh classes; backward/update share their forward op's.
  CHECK(g.colocation(1) == 7);
  CHECK(g.colocation(4) == 7);
  CHECK(g.colocation(bu) == 7);
  CHECK(g.colocation(0) == 8);
  CHECK(g.colocation(3) == 8);
  CHECK(g.colocation(2) == 9);
  CHECK(g.colocation(5) == 9);
  CHECK(g.colocation(cu) == 9);

  using E = std::tuple<std::string, std::string, double>;
  CHECK(edge_set(g) == std::set<E>{
                           {"a", "b", 100},           {"b", "c", 200},            // forward
                           {"b/grad", "a/grad", 100}, {"c/grad", "b/grad", 200},  // gradients
                           {"a", "a/grad", 100},      {"b", "b/grad", 200},       // saved activations
                           {"c", "c/grad", 300},
                           {"b/grad", "b/update", 1000}, {"c/grad", "c/update", 4000},  // weight gradients
                       });
  CHECK(g.edge_comm_s(0) == 0.25);  // forward edges keep their measured transfer time
  // The backward pass starts at the last forward op and runs in reverse.
  CHECK(g.topo_rank(g.find_op("c")) < g.topo_rank(g.find_op("c/grad")));
  CHECK(g.topo_rank(g.find_op("c/grad")) < g.topo_rank(g.find_op("a/grad")));
  CHECK(s.param_bytes == 5000 + 2 * 5000);
  CHECK(s.flops == 60 + 2 * 60 + 2.5 * 5000);
}

TEST_CASE("graphs::expand_training: diamond totals and reversed gradient edges", "[graphs]") {
  GraphBuilder b("diamond");
  b.add_op(fwd("in", 1, 8, 0));
  b.add_op(fwd("l", 2, 16, 64));
  b.add_op(fwd("r", 3, 32, 0));
  b.add_op(fwd("out", 4, 4, 128));
  b.add_edge(0, 1, 8);
  b.add_edge(0, 2, 8);
  b.add_edge(1, 3, 16);
  b.add_edge(2, 3, 32);
  Graph f = std::move(b).build();
  Graph g = expand_training(f, TrainingOptions{.optimizer_state_factor = 1,
                                               .backward_flops_factor = 3,
                                               .update_flops_per_param_byte = 0});
  REQUIRE(g.num_ops() == 4 + 4 + 2);
  REQUIRE(g.num_edges() == 4 + 4 + 4 + 2);
  // The input's backward op gathers two gradients, one per consumer.
  OpId in_grad = g.find_op("in/grad");
  CHECK(g.in_degree(in_grad) == 3);  // l/grad, r/grad, saved activation
  CHECK(g.out_degree(in_grad) == 0);
  CHECK(g.output_bytes(g.find_op("out/grad")) == 16 + 32 + 128);
  GraphStats s = g.stats();
  CHECK(s.flops == 10 + 3 * 10);
  CHECK(s.param_bytes == 192 + 192);
  CHECK(s.edge_bytes == 64 + 64 + (8 + 16 + 32 + 4) + 192);
  CHECK(s.colocation_classes == 4);
  // Sources of the training graph are exactly the forward sources; the sink side is backward/update.
  for (OpId op = 0; op < g.num_ops(); ++op)
    if (g.in_degree(op) == 0) CHECK(g.op_name(op) == "in");
  CHECK(s.depth == 3 + 3);  // in, l, out, out/grad, l/grad, in/grad
}

TEST_CASE("graphs::expand_training: rejects non-forward graphs and bad options", "[graphs]") {
  GraphBuilder b("twice");
  b.add_op(fwd("x", 1, 1, 1));
  Graph once = expand_training(std::move(b).build());
  std::string msg = error_of(once);
  CHECK(msg.find("\"x/grad\"") != std::string::npos);
  CHECK(msg.find("forward-only") != std::string::npos);

  GraphBuilder c("ok");
  c.add_op(fwd("x", 1, 1, 1));
  Graph ok = std::move(c).build();
  CHECK(error_of(ok, TrainingOptions{.optimizer_state_factor = -1}).find("optimizer_state_factor") !=
        std::string::npos);
  CHECK(error_of(ok, TrainingOptions{.backward_flops_factor = NAN}).find("backward_flops_factor") !=
        std::string::npos);

  GraphBuilder d("clash");  // a forward op already named like a generated one
  d.add_op(fwd("x", 1, 1, 0));
  d.add_op(fwd("x/grad", 1, 1, 0));
  Graph clash = std::move(d).build();
  msg = error_of(clash);
  CHECK(msg.find("clash") != std::string::npos);
  CHECK(msg.find("duplicate name \"x/grad\"") != std::string::npos);
}

TEST_CASE("graphs::expand_training: classes up to INT32_MAX do not overflow", "[graphs]") {
  // x has class `x_class`; y, without one, needs a new class above every existing one.
  auto graph = [](int32_t x_class, bool with_y) {
    GraphBuilder b("top");
    b.add_op(fwd("x", 1, 1, 1));
    b.op(0).colocation = x_class;
    if (with_y) b.add_op(fwd("y", 1, 1, 1));
    return std::move(b).build();
  };
  Graph g = expand_training(graph(INT32_MAX - 1, true));
  CHECK(g.colocation(g.find_op("y/grad")) == INT32_MAX);
  g = expand_training(graph(INT32_MAX, false));
  CHECK(g.colocation(g.find_op("x/grad")) == INT32_MAX);
  CHECK_THAT(error_of(graph(INT32_MAX, true)),
             Catch::Contains("graph \"top\": op \"y\" needs a new colocation class, but class 2147483647 is already the largest"));
}

TEST_CASE("graphs::expand_training: a product's gradients are products of its shape", "[graphs]") {
  // dA = dC B^T and dB = A^T dC multiply the forward's three matrices: twice its products at the default factor.
  auto graph = [] {
    GraphBuilder b("mm");
    OpSpec mm = fwd("mm", 2.0 * 3 * 64 * 32 * 16, 1, 1);
    mm.gemm = {.batch = 3, .m = 64, .n = 32, .k = 16};
    b.add_op(mm);
    b.add_op(fwd("relu", 1, 1, 0));
    b.add_edge(0, 1, 4);
    return std::move(b).build();
  };
  Graph g = expand_training(graph());
  CHECK(g.gemm(g.find_op("mm")) == GemmDims{3, 64, 32, 16});
  CHECK(g.gemm(g.find_op("mm/grad")) == GemmDims{6, 64, 32, 16});
  CHECK(g.gemm(g.find_op("mm/grad")).flops() == g.flops(g.find_op("mm/grad")));
  CHECK_FALSE(g.gemm(g.find_op("relu/grad")).known());
  CHECK_FALSE(g.gemm(g.find_op("mm/update")).known());
  // A factor that is no whole number of products leaves the gradient's shape unknown.
  Graph odd = expand_training(graph(), TrainingOptions{.backward_flops_factor = 1.5});
  CHECK_FALSE(odd.gemm(odd.find_op("mm/grad")).known());
}
