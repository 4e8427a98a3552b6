// Tests of the tape and of every op: finite-difference gradchecks in double, broadcast rules,
// masks, deep tapes, memory release and error messages.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>
#include <memory>
#include <tuple>

#include <fmt/format.h>

#include "graphs/error.h"
#include "policy/autodiff/ops.h"
#include "tests/policy/gradcheck.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::autodiff;
using placelab::testing::error_of;
using placelab::test::gradcheck;
using placelab::test::random_matrix;

namespace {

using Leaves = std::vector<TensorD>;

CsrPtr small_csr() {
  // 4 output rows over 5 input rows; row 2 is empty, row 3 repeats an index.
  auto csr = std::make_shared<Csr>(Csr::from_lists(5, {{0, 1, 4}, {2}, {}, {3, 3, 0}}));
  return csr;
}

CsrPtr weighted_csr() {
  auto csr = std::make_shared<Csr>(Csr::from_lists(5, {{0, 1, 4}, {2}, {}, {3, 0}}));
  csr->values = {0.5f, -1.25f, 2.0f, 0.75f, 1.5f, -0.5f};
  return csr;
}

}  // namespace

TEST_CASE("autodiff: gradcheck of products", "[policy][autodiff]") {
  gradcheck("matmul", {random_matrix(3, 4, 1), random_matrix(4, 5, 2)},
            [](const Leaves& x) { return matmul(x[0], x[1]); });
  gradcheck("affine", {random_matrix(3, 4, 1), random_matrix(4, 5, 2), random_matrix(1, 5, 3)},
            [](const Leaves& x) { return affine(x[0], x[1], x[2]); });
  gradcheck("affine without bias", {random_matrix(3, 4, 1), random_matrix(4, 5, 2)},
            [](const Leaves& x) { return affine(x[0], x[1], TensorD()); });
  gradcheck("matmul_nt", {random_matrix(3, 4, 1), random_matrix(5, 4, 2)},
            [](const Leaves& x) { return matmul_nt(x[0], x[1]); });
  gradcheck("block_matmul_nt", {random_matrix(6, 4, 1), random_matrix(8, 4, 2)},
            [](const Leaves& x) { return block_matmul_nt(x[0], x[1], 2); });
  gradcheck("block_matmul", {random_matrix(6, 4, 1), random_matrix(8, 5, 2)},
            [](const Leaves& x) { return block_matmul(x[0], x[1], 2); });
  Mask mask = Mask::Constant(6, 4, true);
  mask(0, 1) = mask(4, 0) = mask(4, 3) = false;
  mask.row(5).setConstant(false);
  const std::vector<MatrixD> qkv = {random_matrix(6, 4, 1), random_matrix(8, 4, 2), random_matrix(8, 4, 3)};
  gradcheck("block_attention", qkv, [&](const Leaves& x) { return block_attention(x[0], x[1], x[2], 2, 2, 0.7, &mask); });
  gradcheck("block_attention unmasked", qkv,
            [&](const Leaves& x) { return block_attention(x[0], x[1], x[2], 2, 1, 0.5); });
  {
    // The fused op equals its composition from block matmuls and a masked softmax, head by head.
    std::vector<TensorD> x;
    for (const auto& m : qkv) x.push_back(TensorD::leaf(m));
    const TensorD fused = block_attention(x[0], x[1], x[2], 2, 2, 0.7, &mask);
    for (Index j = 0; j < 2; ++j) {
      const auto head = [&](const TensorD& t) { return slice_cols(t, 2 * j, 2); };
      const TensorD p = softmax_rows(block_matmul_nt(head(x[0]) * 0.7, head(x[1]), 2), &mask);
      CHECK((block_matmul(p, head(x[2]), 2).value() - fused.value().middleCols(2 * j, 2)).norm() < 1e-14);
    }
  }
  gradcheck("spmm", {random_matrix(5, 3, 3)}, [](const Leaves& x) { return spmm(weighted_csr(), x[0]); });
  gradcheck("spmm unweighted", {random_matrix(5, 3, 3)}, [](const Leaves& x) { return spmm(small_csr(), x[0]); });
  gradcheck("transpose", {random_matrix(3, 4, 4)}, [](const Leaves& x) { return transpose(x[0]); });
}

TEST_CASE("autodiff: gradcheck of broadcast binary ops", "[policy][autodiff]") {
  const std::vector<std::pair<int, int>> shapes = {{3, 4}, {1, 4}, {3, 1}, {1, 1}};
  for (auto [ra, ca] : shapes) {
    for (auto [rb, cb] : shapes) {
      const MatrixD a = random_matrix(ra, ca, 5), b = random_matrix(rb, cb, 6, 0.5, 2.0);  // b away from 0
      const std::string where = fmt::format(" [{},{}] with [{},{}]", ra, ca, rb, cb);
      gradcheck("add" + where, {a, b}, [](const Leaves& x) { return x[0] + x[1]; });
      gradcheck("sub" + where, {a, b}, [](const Leaves& x) { return x[0] - x[1]; });
      gradcheck("mul" + where, {a, b}, [](const Leaves& x) { return x[0] * x[1]; });
      gradcheck("div" + where, {a, b}, [](const Leaves& x) { return x[0] / x[1]; });
    }
  }
  // Broadcast values, not just gradients.
  const TensorD a = TensorD::leaf(random_matrix(3, 4, 7));
  const TensorD row = TensorD::leaf(random_matrix(1, 4, 8));
  const TensorD col = TensorD::leaf(random_matrix(3, 1, 9));
  CHECK((add(a, row).value() - (a.value().rowwise() + row.value().row(0))).norm() == 0);
  CHECK((sub(col, a).value() - ((-a.value()).colwise() + col.value().col(0))).norm() == 0);
  CHECK(error_of([&] { add(a, TensorD::leaf(MatrixD::Zero(2, 4))); }).find("add: shape [2, 4]") == 0);
}

TEST_CASE("autodiff: gradcheck of scalar and unary ops", "[policy][autodiff]") {
  const MatrixD x = random_matrix(3, 5, 10, -2, 2);
  gradcheck("add_scalar", {x}, [](const Leaves& v) { return v[0] + 1.5; });
  gradcheck("mul_scalar", {x}, [](const Leaves& v) { return 2.5 * v[0] / 4.0 - v[0]; });
  gradcheck("square", {x}, [](const Leaves& v) { return square(v[0]); });
  gradcheck("relu", {x}, [](const Leaves& v) { return relu(v[0]); });
  gradcheck("leaky_relu", {x}, [](const Leaves& v) { return leaky_relu(v[0], 0.2); });
  gradcheck("tanh", {x}, [](const Leaves& v) { return tanh(v[0]); });
  gradcheck("sigmoid", {x}, [](const Leaves& v) { return sigmoid(v[0]); });
  gradcheck("gelu", {x}, [](const Leaves& v) { return gelu(v[0]); });
  gradcheck("exp", {x}, [](const Leaves& v) { return exp(v[0]); });
  gradcheck("log", {random_matrix(3, 5, 11, 0.1, 3)}, [](const Leaves& v) { return log(v[0]); });
  CHECK(error_of([&] { log(TensorD::leaf(x)); }).find("log:") == 0);
  // GELU matches PyTorch's erf form at a few points (values from torch.nn.functional.gelu).
  const TensorD g = gelu(TensorD::leaf(MatrixD{{-1.0, 0.5, 2.0}}));
  CHECK(g.value()(0, 0) == Approx(-0.15865525393145707).epsilon(1e-12));
  CHECK(g.value()(0, 1) == Approx(0.34573123063700656).epsilon(1e-12));
  CHECK(g.value()(0, 2) == Approx(1.9544997361036416).epsilon(1e-12));
}

TEST_CASE("autodiff: gradcheck of row softmax, log-softmax and layer norm", "[policy][autodiff]") {
  const MatrixD x = random_matrix(4, 5, 12, -3, 3);
  Mask mask = Mask::Constant(4, 5, true);
  mask(0, 1) = mask(0, 3) = false;
  mask.row(2).setConstant(false);  // a fully masked row
  mask(3, 4) = false;
  gradcheck("softmax_rows", {x}, [](const Leaves& v) { return softmax_rows(v[0]); });
  gradcheck("softmax_rows masked", {x}, [&](const Leaves& v) { return softmax_rows(v[0], &mask); });
  gradcheck("log_softmax_rows", {x}, [](const Leaves& v) { return log_softmax_rows(v[0]); });
  gradcheck("log_softmax_rows masked", {x}, [&](const Leaves& v) { return log_softmax_rows(v[0], &mask); });
  gradcheck("layer_norm", {x, random_matrix(1, 5, 13), random_matrix(1, 5, 14)},
            [](const Leaves& v) { return layer_norm(v[0], v[1], v[2]); });

  const TensorD p = softmax_rows(TensorD::leaf(x), &mask);
  CHECK(p.value()(0, 1) == 0);
  CHECK(p.value().row(2).norm() == 0);
  CHECK(p.value().row(0).sum() == Approx(1.0));
  CHECK(p.value().row(3).sum() == Approx(1.0));
  const TensorD lp = log_softmax_rows(TensorD::leaf(x), &mask);
  CHECK(lp.value()(3, 0) == Approx(std::log(p.value()(3, 0))));
  CHECK(lp.value()(0, 3) == 0);
  // Far tail: log-softmax stays finite and exact where softmax underflows.
  const TensorD tail = log_softmax_rows(TensorD::leaf(MatrixD{{0.0, -1000.0}}));
  CHECK(tail.value()(0, 1) == Approx(-1000.0));
  // An unmasked row of -inf (every choice ruled out by its logits) gives zeros, as a fully masked row.
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const TensorD none = softmax_rows(TensorD::leaf(MatrixD{{-kInf, -kInf}, {0.0, -kInf}}));
  CHECK(none.value().row(0).norm() == 0);
  CHECK(none.value()(1, 0) == 1);
  CHECK(none.value()(1, 1) == 0);
}

TEST_CASE("autodiff: gradcheck of structure ops", "[policy][autodiff]") {
  const MatrixD a = random_matrix(3, 4, 15), b = random_matrix(2, 4, 16), c = random_matrix(3, 2, 17);
  gradcheck("concat_rows", {a, b}, [](const Leaves& v) { return concat_rows<double>({v[0], v[1], v[0]}); });
  gradcheck("concat_cols", {a, c}, [](const Leaves& v) { return concat_cols<double>({v[1], v[0]}); });
  gradcheck("interleave_blocks", {random_matrix(4, 3, 1), random_matrix(6, 3, 2)},
            [](const Leaves& v) { return interleave_blocks(v[0], v[1], 2); });
  const TensorD mixed = interleave_blocks(TensorD::leaf(random_matrix(4, 3, 1)), TensorD::leaf(random_matrix(6, 3, 2)), 2);
  CHECK(mixed.value().row(5) == random_matrix(4, 3, 1).row(2));  // block 1 starts at row 5 with a's row 2
  CHECK(mixed.value().row(7) == random_matrix(6, 3, 2).row(3));
  gradcheck("slice_rows", {a}, [](const Leaves& v) { return slice_rows(v[0], 1, 2); });
  gradcheck("slice_cols", {a}, [](const Leaves& v) { return slice_cols(v[0], 1, 2) * slice_cols(v[0], 2, 2); });
  gradcheck("gather_rows", {a}, [](const Leaves& v) { return gather_rows(v[0], {2, 0, 2, 1}); });
  gradcheck("scatter_add_rows", {a}, [](const Leaves& v) { return scatter_add_rows(v[0], {4, 0, 4}, 5); });
  gradcheck("select_per_row", {a}, [](const Leaves& v) { return select_per_row(v[0], {3, 0, 3}); });
  gradcheck("embedding", {a}, [](const Leaves& v) { return embedding(v[0], {1, 1, 0}); });
  const TensorD xa = TensorD::leaf(a, true);
  backward(sum(xa * detach(xa)));
  CHECK(xa.grad() == a);  // the detached factor is a constant: d/dx (x * c) = c
  CHECK(error_of([&] { gather_rows(TensorD::leaf(a), {0, 3}); }) ==
        "gather_rows: index 3 at position 1 is outside [0, 3)");
  CHECK(error_of([&] { embedding(TensorD::leaf(a), {-1}); }).find("embedding: index -1") == 0);
  CHECK(error_of([&] { slice_cols(TensorD::leaf(a), 3, 2); }).find("slice_cols:") == 0);
}

TEST_CASE("autodiff: gradcheck of segment aggregation", "[policy][autodiff]") {
  const MatrixD x = random_matrix(5, 3, 18);
  gradcheck("segment_sum", {x}, [](const Leaves& v) { return segment_sum(v[0], small_csr()); });
  gradcheck("segment_mean", {x}, [](const Leaves& v) { return segment_mean(v[0], small_csr()); });
  gradcheck("segment_max", {x}, [](const Leaves& v) { return segment_max(v[0], small_csr()); });
  const TensorD mean_out = segment_mean(TensorD::leaf(x), small_csr());
  CHECK((mean_out.value().row(0) - (x.row(0) + x.row(1) + x.row(4)) / 3).norm() < 1e-15);
  CHECK(mean_out.value().row(2).norm() == 0);
  const TensorD max_out = segment_max(TensorD::leaf(x), small_csr());
  CHECK(max_out.value()(3, 1) == std::max(x(3, 1), x(0, 1)));
  CHECK(error_of([&] { segment_sum(TensorD::leaf(random_matrix(4, 3, 1)), small_csr()); }).find("segment_sum:") == 0);
  CHECK(error_of([] { Csr::from_lists(2, {{0, 2}}); }).find("Csr::from_lists: index 2") == 0);
}

TEST_CASE("autodiff: gradcheck of reductions and dropout", "[policy][autodiff]") {
  const MatrixD x = random_matrix(3, 4, 19);
  gradcheck("sum", {x}, [](const Leaves& v) { return sum(v[0]); });
  gradcheck("mean", {x}, [](const Leaves& v) { return mean(v[0]); });
  gradcheck("sum axis 0", {x}, [](const Leaves& v) { return sum(v[0], 0); });
  gradcheck("sum axis 1", {x}, [](const Leaves& v) { return sum(v[0], 1); });
  gradcheck("mean axis 0", {x}, [](const Leaves& v) { return mean(v[0], 0); });
  gradcheck("mean axis 1", {x}, [](const Leaves& v) { return mean(v[0], 1); });
  gradcheck("dropout", {x}, [](const Leaves& v) {
    std::mt19937_64 rng(5);  // re-seeded per evaluation: the same mask every time
    return dropout(v[0], 0.5, rng);
  });
  std::mt19937_64 rng_a(42), rng_b(42);
  const TensorD big = TensorD::leaf(MatrixD::Ones(100, 100));
  const TensorD da = dropout(big, 0.3, rng_a), db = dropout(big, 0.3, rng_b);
  CHECK(da.value() == db.value());
  const double kept = (da.value().array() != 0).cast<double>().mean();
  CHECK(kept == Approx(0.7).margin(0.03));
  CHECK(da.value().maxCoeff() == Approx(1 / 0.7));
  CHECK(dropout(big, 0.3, rng_a, false).node() == big.node());
}

TEST_CASE("autodiff: gradients accumulate over reuse and across backward calls", "[policy][autodiff]") {
  const TensorD x = TensorD::leaf(MatrixD{{2.0}}, true);
  backward(x * x + x);  // d/dx = 2x + 1 = 5
  CHECK(x.grad()(0, 0) == 5);
  backward(x * 3.0);  // accumulates
  CHECK(x.grad()(0, 0) == 8);
  x.zero_grad();
  CHECK(x.grad().size() == 0);
}

TEST_CASE("autodiff: deep tapes run and free without recursion", "[policy][autodiff]") {
  const TensorD x = TensorD::leaf(MatrixD::Constant(1, 1, 1.0), true);
  TensorD y = x;
  const int depth = 100000;  // far beyond what a recursive sort or destructor survives
  for (int i = 0; i < depth; ++i) y = y + 1.0;
  CHECK(tape_size(y) == depth + 1);
  backward(y);
  CHECK(x.grad()(0, 0) == 1);
  CHECK(y.value()(0, 0) == depth + 1);
  // The sweep cut the tape: the root no longer holds its inputs.
  CHECK(y.node()->inputs.empty());
  // Destruction of an un-swept deep tape is iterative too.
  TensorD z = x;
  for (int i = 0; i < depth; ++i) z = z * 1.0;
  z = TensorD();
  CHECK(!z.defined());
}

TEST_CASE("autodiff: backward releases intermediate values, retain_graph keeps them", "[policy][autodiff]") {
  const TensorD w = TensorD::leaf(random_matrix(4, 4, 20), true);
  std::weak_ptr<Node<double>> hidden;
  TensorD loss;
  {
    const TensorD h = tanh(matmul(TensorD::leaf(random_matrix(2, 4, 21)), w));
    hidden = h.node_ptr();
    loss = sum(h);
  }
  backward(loss, {.retain_graph = true});
  CHECK(!hidden.expired());
  const MatrixD first = w.grad();
  backward(loss);
  CHECK(w.grad().isApprox(2 * first));
  CHECK(hidden.expired());
  CHECK(w.grad().size() == 16);  // leaves keep their gradients
}

TEST_CASE("autodiff: no-grad mode and release_tape record nothing", "[policy][autodiff]") {
  const TensorD w = TensorD::leaf(random_matrix(3, 3, 22), true);
  {
    NoGradGuard guard;
    const TensorD y = relu(matmul(w, w));
    CHECK(!y.requires_grad());
    CHECK(y.node()->inputs.empty());
  }
  CHECK(grad_enabled());
  const TensorD y = sum(relu(matmul(w, w)));
  CHECK(tape_size(y) == 4);
  release_tape(y);
  CHECK(tape_size(y) == 1);
  backward(y);  // nothing left to reach
  CHECK(w.grad().size() == 0);
  CHECK(error_of([&] { backward(matmul(w, w)); }).find("backward: root from op 'matmul' has shape [3, 3]") == 0);
}

TEST_CASE("autodiff: products are deterministic for a fixed BLAS thread count", "[policy][autodiff]") {
  // docs/autodiff.md: the same inputs give the same bits for a given thread count of the products (one by
  // default); another count may change the last bits (OpenBLAS may then split a long sum). Shapes large
  // enough for OpenBLAS to thread, a matrix-vector product and a long inner dimension.
  const int before = blas_threads();
  auto run = [](int threads) {
    set_blas_threads(threads);
    REQUIRE(blas_threads() >= 1);
    std::vector<MatrixF> out;
    for (const auto& [m, k, n] : {std::tuple{512, 256, 384}, std::tuple{2000, 128, 1}, std::tuple{64, 3000, 96}}) {
      const Tensor a = Tensor::leaf(random_matrix(m, k, 11).cast<float>(), true);
      const Tensor b = Tensor::leaf(random_matrix(k, n, 12).cast<float>(), true);
      const Tensor y = matmul(a, b);
      backward(sum(y * y));
      out.insert(out.end(), {y.value(), a.grad(), b.grad()});
    }
    return out;
  };
  for (const int threads : {1, 2}) {
    const std::vector<MatrixF> first = run(threads), second = run(threads);
    REQUIRE(first.size() == second.size());
    for (size_t i = 0; i < first.size(); ++i) {
      INFO(threads << " threads, result " << i);
      REQUIRE(first[i].size() > 0);
      CHECK(std::memcmp(first[i].data(), second[i].data(), sizeof(float) * static_cast<size_t>(first[i].size())) == 0);
    }
  }
  set_blas_threads(before);
  CHECK(error_of([] { set_blas_threads(0); }).find("blas threads: 0 is not a positive count") != std::string::npos);
  CHECK_FALSE(blas_name().empty());
}
