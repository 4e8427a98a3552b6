// Dense layers: Linear, MLP, LayerNorm, Embedding, and feature-wise modulation (FiLM) conditioned
// on a graph embedding, which GDP's superposition uses to specialise one policy to each graph.
// Legend: n = rows (nodes), i = input features, o = output features, c = condition features.
#pragma once

#include "policy/nn/module.h"

namespace placelab::nn {

/** y[n,o] = x[n,i] W[i,o] + b[1,o]; W is stored input-major (PyTorch's weight transposed). */
template <class T>
class LinearT {
 public:
  LinearT() = default;
  /** PyTorch's default init: W, b uniform in +-1/sqrt(in). */
  LinearT(Index in, Index out, std::mt19937_64& rng, bool bias = true);
  TensorT<T> forward(const TensorT<T>& x) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;
  Index in_features() const { return weight_.rows(); }
  Index out_features() const { return weight_.cols(); }
  const TensorT<T>& weight() const { return weight_; }
  /** Undefined when built without bias. */
  const TensorT<T>& bias() const { return bias_; }

 private:
  TensorT<T> weight_, bias_;
};

/** Nonlinearity between MLP layers. */
enum class Activation { relu, tanh, gelu };

/** Applies `act` to x. */
template <class T>
TensorT<T> activate(const TensorT<T>& x, Activation act);

/** Linear layers with `act` between them (none after the last). sizes = {in, hidden..., out}. */
template <class T>
class MlpT {
 public:
  MlpT() = default;
  MlpT(const std::vector<Index>& sizes, std::mt19937_64& rng, Activation act = Activation::relu);
  TensorT<T> forward(const TensorT<T>& x) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;

 private:
  std::vector<LinearT<T>> layers_;
  Activation act_ = Activation::relu;
};

/** Row-wise layer normalisation with learned gain (ones) and bias (zeros). */
template <class T>
class LayerNormT {
 public:
  LayerNormT() = default;
  explicit LayerNormT(Index dim, T eps = T(1e-5));
  TensorT<T> forward(const TensorT<T>& x) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;

 private:
  TensorT<T> gamma_, beta_;
  T eps_ = T(1e-5);
};

/** A table of `vocab` learned rows of `dim` features, initialised uniform with unit variance. */
template <class T>
class EmbeddingT {
 public:
  EmbeddingT() = default;
  EmbeddingT(Index vocab, Index dim, std::mt19937_64& rng);
  /** ids[e] in [0, vocab) -> [e, dim]. */
  TensorT<T> forward(const std::vector<int32_t>& ids) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;

 private:
  TensorT<T> table_;
};

/**
 * Feature-wise linear modulation: y[n,f] = x[n,f] * (1 + gamma(cond)) + beta(cond), cond[1,c] a graph
 * embedding. The projections start at zero, so a fresh FiLM is the identity and fine-tuning starts
 * from the pre-trained policy.
 */
template <class T>
class FilmT {
 public:
  FilmT() = default;
  FilmT(Index cond_dim, Index feature_dim, std::mt19937_64& rng);
  TensorT<T> forward(const TensorT<T>& x, const TensorT<T>& cond) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;
  LinearT<T>& gamma() { return gamma_; }
  LinearT<T>& beta() { return beta_; }

 private:
  LinearT<T> gamma_, beta_;
};

using Linear = LinearT<float>;
using Mlp = MlpT<float>;
using LayerNorm = LayerNormT<float>;
using Embedding = EmbeddingT<float>;
using Film = FilmT<float>;

}  // namespace placelab::nn
