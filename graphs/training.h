// Training-graph expansion: a forward (inference) graph becomes one training step, with a backward
// op per forward op, an optimizer update op per op that holds parameters, and the gradient edges
// between them. The exact rules are in docs/graph_transforms.md.
#pragma once

#include "graphs/graph.h"

namespace placelab::graphs {

/** Knobs of expand_training; the defaults model Adam on fp32 parameters. */
struct TrainingOptions {
  double optimizer_state_factor = 2.0;  // Adam: two moments per parameter
  double backward_flops_factor = 2.0;   // backward costs ~2x forward (input and weight gradients)
  double update_flops_per_param_byte = 2.5;  // Adam: ~10 flops per 4-byte parameter
};

/**
 * Forward graph -> forward + backward + update ops, with gradient edges; backward and update ops share
 * a colocation class with their forward op. Throws placelab::Error if `forward` has non-forward ops.
 * Op ids: forward op f keeps id f, its backward op is num_ops() + f, update ops follow in op order.
 */
Graph expand_training(const Graph& forward, const TrainingOptions& options = {});

}  // namespace placelab::graphs
