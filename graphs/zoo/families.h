// Internal to the zoo: validated parameter access, the zoo's seeded random numbers, and the
// generator functions of each model family (registered in zoo.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <string_view>
#include <vector>

#include "graphs/graph.h"
#include "graphs/zoo/zoo.h"

namespace placelab::graphs::zoo {

/** Parameter values of one make_model call, already checked against the model's ranges. */
class Args {
 public:
  Args(std::string_view model, Params values) : model_(model), values_(std::move(values)) {}

  std::string_view model() const { return model_; }
  /** Value of an integer param (validated as integral and in range). */
  int64_t integer(std::string_view name) const { return static_cast<int64_t>(real(name)); }
  int32_t int32(std::string_view name) const { return static_cast<int32_t>(real(name)); }
  double real(std::string_view name) const;
  /** Throws placelab::Error "model \"name\": message" for params that are valid alone but not together. */
  [[noreturn]] void fail(std::string_view message) const;

 private:
  std::string_view model_;
  Params values_;
};

/**
 * The zoo's random numbers: std::mt19937_64 with our own distributions, since the standard ones
 * differ across standard libraries and a seed must give the same graph everywhere.
 */
class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  /** Uniform in [0, 1). */
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  /** Uniform integer in [lo, hi]. */
  int64_t uniform_int(int64_t lo, int64_t hi);
  /** Log-uniform in [lo, hi] (lo > 0). */
  double log_uniform(double lo, double hi);
  /** A uniformly chosen element. */
  template <class T>
  const T& pick(const std::vector<T>& xs) {
    return xs[static_cast<size_t>(uniform_int(0, static_cast<int64_t>(xs.size()) - 1))];
  }

 private:
  std::mt19937_64 engine_;
};

// cnn.cpp
Graph build_resnet50(const Args& args);
Graph build_inception_v3(const Args& args);
Graph build_wavenet(const Args& args);
// decoder.cpp
Graph build_gpt(const Args& args);
Graph build_llama(const Args& args);  // and mixtral
Graph build_vit(const Args& args);
// nas.cpp
Graph build_nasnet(const Args& args);
Graph build_amoebanet(const Args& args);
Graph build_cifar10(const Args& args);
// rnn.cpp
Graph build_gnmt(const Args& args);
Graph build_rnnlm(const Args& args);
Graph build_nmt(const Args& args);
Graph build_ptb(const Args& args);
// transformer.cpp
Graph build_bert(const Args& args);
Graph build_transformer_xl(const Args& args);
// synthetic.cpp
Graph build_random_dag(const Args& args);

}  // namespace placelab::graphs::zoo
