// Throughput (pipelined) placers for the max-load model of Tarnawski et al. (NeurIPS 2020): the optimal
// dynamic program over ideals for contiguous splits, PipeDream's linearise-then-DP baseline and the
// local-search baseline. The objective is sim::max_load: the load of the busiest device, where a
// device's load is its ops' time plus the communication it pays. Semantics: docs/placers.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "policy/placer.h"
#include "sim/engine.h"

namespace placelab::policy {

/** Knobs of the ideal DP (options of the `dp` and `pipedream` placers). */
struct IdealDpOptions {
  /** Enumerating more ideals than this is an error that suggests coarsening (graphs/coarsen.h). */
  int64_t max_ideals = 2'000'000;
  /** Wall-clock limit of the whole solve; exceeding it is an error. 0: none. */
  double time_limit_s = 0;
  /** PipeDream's baseline: ideals are the prefixes of one linear order of the forward graph. */
  bool linearize = false;
  /** With linearize: first fuse the classes of each biconnected component's edge tails (PipeDream's blocks). */
  bool fuse_biconnected = true;
};

/** An optimal contiguous split under the max-load model. */
struct IdealDpResult {
  std::vector<int32_t> device_of;  // one device per op
  double max_load_s = 0;           // the model's optimum: sim::max_load of device_of on msr inputs, else >= it
  int64_t num_ideals = 0;
  int32_t num_groups = 0;          // forward groups after contracting colour classes and cycles
  int32_t attempts = 0;            // thresholds tried (each one a pruned DP)
  int64_t pairs_evaluated = 0;     // (I, I') pairs whose load was evaluated in the last attempt
};

/**
 * The dynamic program over ideals of Tarnawski et al.: the contiguous split of `simulator`'s graph over
 * its cluster's devices minimising sim::max_load. Devices of kind "cpu" pay no communication; devices
 * with equal kind, capacity and op times are interchangeable. Throws placelab::Error when no contiguous
 * split fits memory, when there are too many ideals, or past the time limit; throws Interrupted when
 * `interrupted` (polled between steps) says so.
 */
IdealDpResult solve_ideal_dp(const sim::Simulator& simulator, const IdealDpOptions& options,
                             const std::function<void(std::string_view)>& progress = {},
                             const std::function<bool()>& interrupted = {});

/** `dp`: the optimal contiguous split. Options: max_ideals, time_limit_s. */
std::unique_ptr<Placer> make_dp_placer();
/** `pipedream`: linearise the forward graph, then the DP over prefixes. Options: max_ideals, time_limit_s. */
std::unique_ptr<Placer> make_pipedream_placer();
/** `local_search`: steepest single colour-class moves, restarted. Options: restarts, contiguous, max_steps, use_cpus. */
std::unique_ptr<Placer> make_local_search_placer();
/** `milp`: the max-load integer program with CBC. Options: contiguous (default false), time_limit_s (default 60). */
std::unique_ptr<Placer> make_milp_placer();

}  // namespace placelab::policy
