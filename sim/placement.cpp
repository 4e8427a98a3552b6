// The placelab.placement format and random placements.
#include "sim/placement.h"

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/engine.h"

namespace placelab::sim {

Placement placement_from_json(const nlohmann::json& doc, const std::string& origin) {
  io::JsonNode root(doc, origin);
  root.check_header("placelab.placement", {1});
  root.check_fields({"format", "version", "graph", "cluster", "device_of"});
  Placement p{.graph = root.get_string("graph", ""), .cluster = root.get_string("cluster", "")};
  io::JsonNode devices = root.at("device_of");
  p.device_of.reserve(devices.size());
  for (size_t i = 0; i < devices.size(); ++i) {
    io::JsonNode d = devices.at(i);
    int64_t v = d.as_int();
    if (v < 0 || v > INT32_MAX) d.fail(fmt::format("is {}, expected a device index >= 0", v));
    p.device_of.push_back(static_cast<int32_t>(v));
  }
  return p;
}

Placement read_placement(const std::string& path) { return placement_from_json(io::read_json_file(path), path); }

nlohmann::json placement_to_json(const Placement& placement) {
  return {{"format", "placelab.placement"},
          {"version", 1},
          {"graph", placement.graph},
          {"cluster", placement.cluster},
          {"device_of", placement.device_of}};
}

void write_placement(const Placement& placement, const std::string& path) {
  io::write_json_atomic(path, placement_to_json(placement), -1);
}

std::vector<int32_t> random_placement(const Simulator& simulator, std::mt19937_64& rng) {
  const graphs::Graph& g = simulator.graph();
  const Cluster& c = simulator.cluster();
  std::vector<std::vector<int32_t>> of_kind;  // devices per pinned kind, built on first use
  std::vector<std::string> kinds;
  std::vector<int32_t> out(g.num_ops());
  auto pick = [&](uint64_t count) {
    // Lemire-free modulo is fine here: counts are tiny, the bias is < count / 2^64.
    return static_cast<int32_t>(rng() % count);
  };
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    const std::string& pin = g.pinned_kind(op);
    if (pin.empty()) {
      out[op] = pick(static_cast<uint64_t>(c.num_devices()));
      continue;
    }
    size_t k = 0;
    while (k < kinds.size() && kinds[k] != pin) ++k;
    if (k == kinds.size()) {
      kinds.push_back(pin);
      of_kind.emplace_back();
      for (int32_t d = 0; d < c.num_devices(); ++d)
        if (c.device(d).kind == pin) of_kind.back().push_back(d);
    }
    if (of_kind[k].empty())
      throw Error(fmt::format("random placement: op \"{}\" is pinned to kind \"{}\" but cluster \"{}\" has none",
                              g.op_name(op), pin, c.name()));
    out[op] = of_kind[k][pick(of_kind[k].size())];
  }
  return out;
}

}  // namespace placelab::sim
