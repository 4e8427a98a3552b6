// Placements (one device index per op) and the placelab.placement JSON format (version 1):
// {"format": "placelab.placement", "version": 1, "graph": NAME, "cluster": NAME, "device_of": [...]}.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace placelab::sim {

class Simulator;

/** A placement with the names of the graph and cluster it was made for. */
struct Placement {
  std::string graph, cluster;
  std::vector<int32_t> device_of;
};

/** Reads a placelab.placement file; throws placelab::Error naming the file and JSON path at fault. */
Placement read_placement(const std::string& path);

/** Parses a placelab.placement document; `origin` names it in errors. */
Placement placement_from_json(const nlohmann::json& doc, const std::string& origin);

/** The placelab.placement document of `placement`. */
nlohmann::json placement_to_json(const Placement& placement);

/** Writes `placement` to `path` atomically. */
void write_placement(const Placement& placement, const std::string& path);

/** A uniformly random valid placement: every op on a device of its pinned kind (any device if unpinned). */
std::vector<int32_t> random_placement(const Simulator& simulator, std::mt19937_64& rng);

}  // namespace placelab::sim
