// Finite-difference gradient check shared by the autodiff and layer tests (the manif
// MANIF_TEST_JACOBIANS pattern): the analytic VJP of every input is compared, entry by entry, with
// central differences of a random projection of the output, in double precision.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "policy/autodiff/ops.h"

namespace placelab::test {

using autodiff::MatrixD;
using autodiff::TensorD;

/** A seeded matrix with entries uniform in [lo, hi). */
inline MatrixD random_matrix(autodiff::Index rows, autodiff::Index cols, uint64_t seed, double lo = -1,
                             double hi = 1) {
  std::mt19937_64 rng(seed);
  MatrixD m(rows, cols);
  for (autodiff::Index i = 0; i < m.size(); ++i) m.data()[i] = lo + (hi - lo) * autodiff::uniform01(rng);
  return m;
}

/**
 * Checks d(sum(W * f(x...)))/dx against central differences for every entry of every input (and of
 * every extra tensor in `params`, e.g. a layer's weights). `f` builds the output from leaf tensors.
 */
inline void gradcheck(const std::string& name, const std::vector<MatrixD>& inputs,
                      const std::function<TensorD(const std::vector<TensorD>&)>& f,
                      std::vector<TensorD> params = {}, double h = 1e-6, double tol = 1e-6) {
  INFO("gradcheck of " << name);
  std::vector<TensorD> leaves;
  for (const auto& value : inputs) leaves.push_back(TensorD::leaf(value, true));
  for (auto& p : params) p.zero_grad();
  const TensorD out = f(leaves);
  const MatrixD weight = random_matrix(out.rows(), out.cols(), 99);
  const auto loss_of = [&](const TensorD& y) { return (y.value().array() * weight.array()).sum(); };
  autodiff::backward(out, weight);

  std::vector<TensorD> checked = leaves;
  checked.insert(checked.end(), params.begin(), params.end());
  int64_t compared = 0;
  for (size_t t = 0; t < checked.size(); ++t) {
    TensorD& x = checked[t];
    const MatrixD analytic = x.grad().size() ? x.grad() : MatrixD::Zero(x.rows(), x.cols());
    for (autodiff::Index i = 0; i < x.size(); ++i) {
      double& v = x.mutable_value().data()[i];
      const double saved = v;
      autodiff::NoGradGuard no_grad;
      v = saved + h;
      const double plus = loss_of(f(leaves));
      v = saved - h;
      const double minus = loss_of(f(leaves));
      v = saved;
      const double numeric = (plus - minus) / (2 * h);
      if (!(std::abs(analytic.data()[i] - numeric) <= tol * (1 + std::abs(numeric)))) {
        FAIL("tensor " << t << " entry " << i << ": analytic " << analytic.data()[i] << ", numeric " << numeric);
      }
      ++compared;
    }
  }
  CHECK(compared > 0);
}

}  // namespace placelab::test
