// What `place` and `compare` share: running one placer on a simulator, timing it, and judging its
// placement with the simulator.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

#include "policy/placer.h"
#include "sim/engine.h"

namespace placelab::cli {

/** One placer's placement and the simulator's verdict on it. */
struct PlacerRun {
  std::string placer;
  policy::PlaceResult result;
  sim::SimResult sim;
  double placement_time_s = 0;
};

/** Parses --options: a JSON object; throws placelab::Error naming the flag and showing an example. */
nlohmann::json parse_options(const std::string& text);

/** Runs `placer` on `simulator` (progress lines on stderr), checks its placement and simulates it. */
PlacerRun run_placer(const sim::Simulator& simulator, const std::string& placer, const nlohmann::json& options,
                     uint64_t seed);

/** The facts of a run as JSON: placer, step time, peak memory, OOM, bytes moved, placement time, info. */
nlohmann::json run_to_json(const PlacerRun& run, const sim::Cluster& cluster);

/**
 * One line per run: placer, step time, speed-up over the slowest row, peak memory, OOM, bytes moved, placement
 * time (and with a bound > 0, each row's step time over it: "x bound", "-" out of memory); then a line naming
 * that slowest row.
 */
void print_runs_table(std::span<const PlacerRun> runs, double bound_s = 0);

}  // namespace placelab::cli
