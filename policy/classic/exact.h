// The exact placer: the placement of a graph's units (colocation classes) with the least simulated step
// time among those that fit in memory, proven by branch and bound under the simulator's own semantics.
// Units are placed in topological order; a partial placement is cut off when its lower bound
// (policy/classic/bounds.h, admissible: never above the step time of any completion) reaches the best step
// time simulated so far. Devices that no bound can tell apart (StepBound::symmetry_class) are used in index
// order, and every leaf is simulated under each relabelling of those devices, since the engine breaks ties
// at equal instants by device index and a relabelled placement may differ at an exact tie: so the optimum
// is over all placements, not one per symmetry class. The optimum holds to a relative 1e-9.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "policy/placer.h"
#include "sim/engine.h"

namespace placelab::policy {

/** Knobs of the search (options of the `exact` placer). */
struct ExactOptions {
  /** Wall-clock seconds of the search (the starting heuristics' time included); 0: none. */
  double time_limit_s = 60;
  /** Stop after this many nodes (bound evaluations); 0: none. A limit that does not depend on the clock. */
  int64_t max_nodes = 0;
  /** Use interchangeable devices in index order only (every leaf then simulated under their relabellings). */
  bool symmetry = true;
  /**
   * Start from the best of the heuristics and improve each new best by single unit moves; off, the search alone
   * (the first incumbent is its first leaf).
   */
  bool starts = true;
};

/** What the search proved. */
struct ExactResult {
  std::vector<int32_t> device_of;  // the best placement found (one device per op); empty when none fits
  double step_time_s = std::numeric_limits<double>::infinity();  // its step time
  /** Every placement that fits in memory takes at least this long (to 1e-9); equals step_time_s when proven. */
  double bound_s = 0;
  bool proven = false;        // the search finished: device_of is optimal, or (empty) no placement fits
  double root_bound_s = 0;    // the bound before any unit is placed
  std::string start;          // the heuristic whose placement was the first incumbent
  double start_step_s = std::numeric_limits<double>::infinity();
  std::string stopped;        // why it stopped early: "time_limit", "max_nodes", or "" (finished)
  int64_t nodes = 0, leaves = 0, simulations = 0;
  int32_t units = 0, branch_units = 0;  // branch units: those with a choice of device
  std::vector<int32_t> symmetry_class;  // per device
  double wall_s = 0;  // wall-clock time of the call
};

/**
 * The best placement of `simulator`'s graph on its cluster within the limits. Throws Interrupted when
 * `interrupted` (polled between nodes) says so.
 */
ExactResult solve_exact(const sim::Simulator& simulator, const ExactOptions& options, uint64_t seed = 0,
                        const std::function<void(std::string_view)>& progress = {},
                        const std::function<bool()>& interrupted = {});

/** `exact`: solve_exact. Options: time_limit_s, max_nodes, symmetry. */
std::unique_ptr<Placer> make_exact_placer();

}  // namespace placelab::policy
