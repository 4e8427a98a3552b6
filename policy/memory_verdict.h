// The simulator's memory verdict on a placer's placement, added to the placer's result: memory is the
// constraint that binds on today's models, and a placement that does not fit must say so wherever its
// result goes (placelab place and compare, Python's place()), not only in a separate simulation.
#pragma once

#include <algorithm>

#include <nlohmann/json.hpp>

#include "sim/cluster.h"
#include "sim/engine.h"

namespace placelab::policy {

/**
 * Sets info["oom"] from `result` (the simulation of the placement); when out of memory, also
 * info["oom_excess_bytes"] (the largest excess over a device's capacity) and info["oom_devices"] (each
 * device over its capacity, by name, with its excess bytes).
 */
inline void add_memory_verdict(nlohmann::json& info, const sim::SimResult& result, const sim::Cluster& cluster) {
  if (!info.is_object()) info = nlohmann::json::object();
  info["oom"] = result.oom;
  if (!result.oom) return;
  nlohmann::json over = nlohmann::json::object();
  double worst = 0;
  for (int32_t d = 0; d < cluster.num_devices(); ++d)
    if (result.device_excess_bytes[d] > 0) {
      over[cluster.device(d).name] = result.device_excess_bytes[d];
      worst = std::max(worst, result.device_excess_bytes[d]);
    }
  info["oom_excess_bytes"] = worst;
  info["oom_devices"] = std::move(over);
}

}  // namespace placelab::policy
