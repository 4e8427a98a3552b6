// Coarsening: a smaller graph whose ops are groups of the original ops, with the map back, so a
// placer can work on the coarse graph and expand its placement to the original. Three groupings
// (colocation classes, HSDAG chain fusion, size-bounded topological blocks) and their composition.
// Every result is acyclic; the aggregation rules are in docs/graph_transforms.md.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graphs/graph.h"

namespace placelab::graphs {

/** A coarse graph and, for each original op, the coarse op that contains it. */
struct Coarsening {
  Graph graph;
  std::vector<OpId> group_of;
};

/** One coarse op per colocation class (ops without a class stay alone); groups whose contraction
    would close a cycle are merged (strongly connected components), so the result is acyclic. */
Coarsening contract_colocation(const Graph& g);

/** Merges an op into its single successor when it is that successor's only predecessor (HSDAG),
    repeatedly: every group is a maximal such chain. Ops pinned to different kinds are not merged. */
Coarsening fuse_chains(const Graph& g);

/** At most `max_groups` groups, each contiguous in topological order (so never a cycle), minimising
    the largest group's weight (FLOPs; measured time or op count when the graph has no FLOPs), then
    split further until there are `max_groups` groups or single ops. Throws if max_groups < 1. */
Coarsening group_by_size(const Graph& g, int32_t max_groups);

/** Groups ops by an arbitrary label (same label, same group), merging groups that would form a
    cycle; the general form of the functions above. `label` has one entry per op. */
Coarsening contract_labels(const Graph& g, std::span<const int64_t> label, const std::string& name);

/** first then second: `second` coarsens first.graph; the result maps the original ops to second.graph. */
Coarsening compose(const Coarsening& first, const Coarsening& second);

/** Placement of the original graph from a placement of the coarse one. */
std::vector<int32_t> expand_placement(std::span<const int32_t> coarse_device_of, const Coarsening& c);

}  // namespace placelab::graphs
