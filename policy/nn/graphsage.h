// Graph layers over CSR neighbourhoods built once per graph: GraphSAGE (mean and max-pool
// aggregators, GDP's encoder) and GCN (Kipf and Welling, symmetric normalisation).
// Legend: n = graph nodes, i = input features, o = output features.
#pragma once

#include "graphs/graph.h"
#include "policy/nn/linear.h"

namespace placelab::nn {

/** Which edges make a node's neighbourhood. */
enum class Neighbors { in, out, both };

/** Row v lists the neighbours of op v (predecessors, successors or both, duplicates kept once). */
autodiff::CsrPtr neighbor_csr(const graphs::Graph& graph, Neighbors which = Neighbors::both);

/** D^-1/2 (A + I) D^-1/2 over the undirected graph, with weights: GCN's propagation matrix. */
autodiff::CsrPtr gcn_csr(const graphs::Graph& graph);
/** The same from an n x n neighbourhood CSR (symmetrised, self loops added). */
autodiff::CsrPtr gcn_csr(const autodiff::Csr& neighbors);

/** GraphSAGE neighbourhood aggregator. */
enum class Aggregator { mean, max_pool };

/**
 * One GraphSAGE layer (PyTorch Geometric's SAGEConv): y[n,o] = agg(x)[n,.] W_neigh + b + x[n,i] W_self,
 * where agg is the neighbour mean of x, or, for max_pool, the neighbour max of relu(x W_pool + b_pool).
 * No activation: callers choose it.
 */
template <class T>
class GraphSageT {
 public:
  GraphSageT() = default;
  GraphSageT(Index in, Index out, Aggregator aggregator, std::mt19937_64& rng);
  /** x[n,i], neighbours: CSR [n, n] -> [n, o]. */
  TensorT<T> forward(const TensorT<T>& x, const autodiff::CsrPtr& neighbors) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;
  LinearT<T>& neigh() { return neigh_; }
  LinearT<T>& self() { return self_; }
  LinearT<T>& pool() { return pool_; }

 private:
  Aggregator aggregator_ = Aggregator::mean;
  LinearT<T> pool_;   // max_pool only: i -> i
  LinearT<T> neigh_;  // i -> o, with bias
  LinearT<T> self_;   // i -> o, no bias
};

/** One GCN layer: y[n,o] = A_hat (x[n,i] W) + b with A_hat from gcn_csr(). */
template <class T>
class GcnT {
 public:
  GcnT() = default;
  GcnT(Index in, Index out, std::mt19937_64& rng);
  TensorT<T> forward(const TensorT<T>& x, const autodiff::CsrPtr& propagation) const;
  void collect(const std::string& prefix, ParamList<T>& out) const;

 private:
  LinearT<T> linear_;  // no bias; the bias is added after propagation
  TensorT<T> bias_;
};

using GraphSage = GraphSageT<float>;
using Gcn = GcnT<float>;

}  // namespace placelab::nn
