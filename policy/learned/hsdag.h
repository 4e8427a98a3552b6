// HSDAG, the structure-aware device placement framework (Duan et al., NeurIPS 2024): the unit graph is
// coarsened by chain fusion, a GCN embeds the coarse nodes from structural features, the nodes are
// sampled into groups from their embeddings, the groups are pooled and a policy scores every
// (group, device) pair with the device's features, all trained end to end on the simulator's step time
// (CPU + GPU clusters included: the CPU is one more device with its own features).
// Architecture, defaults and differences from the paper: docs/learned.md#hsdag.
#pragma once

#include <cstdint>
#include <vector>

#include "policy/autodiff/ops.h"
#include "policy/learned/problem.h"

namespace placelab::learned {

/** Coarse nodes over a problem's units: every node is a chain of units fused by fuse_unit_chains. */
struct UnitCoarsening {
  std::vector<int32_t> node_of;  // per unit
  autodiff::CsrPtr members;      // [nodes, U]: units of each node, in chain order
  autodiff::CsrPtr neighbors;    // [nodes, nodes]: coarse nodes joined by an edge between their units
  autodiff::CsrPtr predecessors; // [nodes, nodes]: coarse nodes feeding each node
  int32_t nodes() const { return members->rows; }
};

/**
 * Chain fusion (HSDAG's coarsening) on the unit graph: unit v joins the chain of unit u when u's only
 * successor unit is v, v's only predecessor unit is u, both may run on the same devices, and the chain
 * has fewer than `max_chain` units (so long chains stay splittable). Chains start at units in order.
 */
UnitCoarsening fuse_unit_chains(const Problem& problem, int32_t max_chain);

}  // namespace placelab::learned
