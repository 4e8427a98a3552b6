// The msr-fiddle/dnn-partitioning instance and split formats -> MsrInstance / MsrSplit. Field rules
// follow that repository's README and its reader (throughput-dp/dp.cpp); see docs/graph_transforms.md.
#include "graphs/msr.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"

namespace placelab::graphs {

using nlohmann::json;

namespace {

// The format's reader rejects a node whose out-edges disagree on `cost` by more than this.
constexpr double kCostTolerance = 1e-6;

// Adds "(msr node <id>)" to errors raised while reading one node's fields.
template <class F>
auto for_node(int64_t id, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(fmt::format("{} (msr node id {})", e.what(), id));
  }
}

// "Conv38" -> "Conv", "BatchNormalization13_saved_mean" -> "BatchNormalization": the leading
// capitalised word that ONNX-style operator names start with; "" for anything else.
std::string leading_word(std::string_view s) {
  if (s.empty() || !std::isupper(static_cast<unsigned char>(s[0]))) return "";
  size_t k = 1;
  while (k < s.size() && std::isalpha(static_cast<unsigned char>(s[k]))) ++k;
  return std::string(s.substr(0, k));
}

// Op type from an operator graph's node name; layer graphs ("node12", "node12grad") get "MsrNode".
// Backward operators are named "<Fwd>_Grad/<Op>_<k>...": their type is <Op> (ConvGrad, Gemm, ...).
std::string msr_op_type(std::string_view name) {
  constexpr std::string_view kGrad = "_Grad/";
  if (auto pos = name.find(kGrad); pos != std::string_view::npos) {
    std::string word = leading_word(name.substr(pos + kGrad.size()));
    if (!word.empty()) return word;
  }
  std::string word = leading_word(name);
  return word.empty() ? "MsrNode" : word;
}

int32_t as_int32(const io::JsonNode& node, int64_t max = INT32_MAX) {
  int64_t v = node.as_int();
  if (v < 0 || v > max) node.fail(fmt::format("is {}, must be in 0..{}", v, max));
  return static_cast<int32_t>(v);
}

// Devices of an instance's machine: a simulator keeps a route per pair of them (sim::kMaxDevices).
constexpr int64_t kMaxMsrDevices = 4096;

std::string graph_name_of(const std::string& origin) {
  std::string stem = std::filesystem::path(origin).stem().string();
  return stem.empty() || stem.front() == '<' ? "msr" : stem;
}

}  // namespace

OpId MsrInstance::op_of_msr_id(int64_t id) const {
  for (size_t op = 0; op < msr_id.size(); ++op)
    if (msr_id[op] == id) return static_cast<OpId>(op);
  return -1;
}

bool is_msr_instance(const json& doc) {
  return doc.is_object() && !doc.contains("format") && doc.contains("nodes") &&
         (doc.contains("maxFPGAs") || doc.contains("maxCPUs") || doc.contains("maxSizePerFPGA"));
}

void fail_unknown_format(const std::string& origin, std::string_view placelab_format) {
  throw Error(fmt::format("{}: missing \"format\": neither a {} file (\"format\": \"{}\") nor an msr-dnn-partitioning "
                          "instance (\"nodes\", \"edges\", \"maxFPGAs\", ...)",
                          origin, placelab_format, placelab_format));
}

MsrInstance msr_from_json(const json& doc, const std::string& origin) {
  io::JsonNode root(doc, origin);
  root.check_fields({"maxSizePerFPGA", "maxFPGAs", "maxCPUs", "nodes", "edges"});
  MsrInstance instance;
  instance.accelerator_memory_bytes = root.at("maxSizePerFPGA").as_amount();
  instance.max_accelerators = as_int32(root.at("maxFPGAs"), kMaxMsrDevices);
  instance.max_cpus = as_int32(root.at("maxCPUs"), kMaxMsrDevices - instance.max_accelerators);

  GraphBuilder builder(graph_name_of(origin));
  io::JsonNode nodes = root.at("nodes");
  std::unordered_map<int64_t, OpId> op_of_id;
  std::unordered_map<std::string, OpId> op_of_name;
  if (nodes.size() == 0) nodes.fail("is empty; an instance needs at least one node");
  for (size_t i = 0; i < nodes.size(); ++i) {
    io::JsonNode node = nodes.at(i);
    const int64_t id = node.at("id").as_int();
    auto [it, fresh] = op_of_id.emplace(id, static_cast<OpId>(i));
    if (!fresh)
      node.at("id").fail(fmt::format("duplicate msr node id {} (also nodes[{}]; ids must be unique)", id, it->second));
    OpSpec op = for_node(id, [&] {
      node.check_fields({"id", "supportedOnFpga", "cpuLatency", "fpgaLatency", "isBackwardNode", "colorClass",
                         "size", "name", "layerId"});
      OpSpec spec;
      spec.name = node.has("name") ? node.at("name").as_string() : fmt::format("node{}", id);
      spec.type = msr_op_type(spec.name);
      spec.phase = node.at("isBackwardNode").as_bool() ? Phase::backward : Phase::forward;
      if (node.has("colorClass")) spec.colocation = as_int32(node.at("colorClass"));
      if (node.has("layerId")) spec.layer = as_int32(node.at("layerId"));
      spec.param_bytes = node.get_amount("size", 0);
      if (!node.at("supportedOnFpga").as_bool()) spec.pinned_kind = kMsrCpuKind;
      spec.measured_s = {{std::string(kMsrCpuKind), node.at("cpuLatency").as_amount() * kMsrSecondsPerUnit},
                         {std::string(kMsrAcceleratorKind), node.at("fpgaLatency").as_amount() * kMsrSecondsPerUnit}};
      return spec;
    });
    auto [nit, fresh_name] = op_of_name.emplace(op.name, static_cast<OpId>(i));
    if (!fresh_name)
      node.fail(fmt::format("msr node id {}: duplicate name \"{}\" (also nodes[{}]; names must be unique)", id,
                            op.name, nit->second));
    instance.msr_id.push_back(id);
    builder.add_op(std::move(op));
  }

  io::JsonNode edges = root.at("edges");
  std::set<std::pair<OpId, OpId>> seen;
  std::unordered_map<OpId, std::pair<double, size_t>> cost_of_source;  // cost and the edge that set it
  for (size_t e = 0; e < edges.size(); ++e) {
    io::JsonNode edge = edges.at(e);
    edge.check_fields({"sourceId", "destId", "cost", "size"});
    auto endpoint = [&](std::string_view key) {
      io::JsonNode field = edge.at(key);
      int64_t id = field.as_int();
      auto it = op_of_id.find(id);
      if (it == op_of_id.end()) field.fail(fmt::format("no node has msr id {} (a dangling edge)", id));
      return it->second;
    };
    const OpId src = endpoint("sourceId"), dst = endpoint("destId");
    const int64_t src_id = instance.msr_id[src], dst_id = instance.msr_id[dst];
    if (src == dst) edge.fail(fmt::format("is a self-loop on msr node id {}", src_id));
    if (!seen.emplace(src, dst).second)
      edge.fail(fmt::format("duplicates an earlier edge {} -> {} (msr ids)", src_id, dst_id));
    if (builder.op(src).phase == Phase::backward && builder.op(dst).phase == Phase::forward)
      edge.fail(fmt::format("goes from backward msr node id {} to forward msr node id {} (forward nodes cannot "
                            "depend on backward ones)", src_id, dst_id));
    const double cost = edge.at("cost").as_amount();
    auto [cit, first] = cost_of_source.emplace(src, std::pair{cost, e});
    if (!first && std::abs(cit->second.first - cost) > kCostTolerance)
      edge.at("cost").fail(fmt::format("is {} but edges[{}] from the same msr node id {} has cost {} (a node's "
                                       "out-edges must share one cost)", cost, cit->second.second, src_id,
                                       cit->second.first));
    builder.add_edge(src, dst, edge.get_amount("size", 0), cost * kMsrSecondsPerUnit);
  }
  try {
    instance.graph = std::move(builder).build();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", origin, e.what()));
  }
  return instance;
}

MsrInstance read_msr(const std::string& path) { return msr_from_json(io::read_json_file(path), path); }

MsrSplit msr_split_from_json(const json& doc, const std::string& origin, const MsrInstance& instance) {
  const Graph& g = instance.graph;
  io::JsonNode root(doc, origin);
  root.check_fields({"cpus", "fpgas", "maxLoad"});
  io::JsonNode fpgas = root.at("fpgas"), cpus = root.at("cpus");
  const auto num_acc = static_cast<int32_t>(fpgas.size());
  const auto num_cpu = static_cast<int32_t>(cpus.size());
  if (num_acc > instance.max_accelerators)
    fpgas.fail(fmt::format("lists {} accelerators but the instance has maxFPGAs = {}", num_acc,
                           instance.max_accelerators));
  if (num_cpu > instance.max_cpus)
    cpus.fail(fmt::format("lists {} CPUs but the instance has maxCPUs = {}", num_cpu, instance.max_cpus));

  // Devices 0..num_acc-1 are accelerators, then CPUs.
  auto device_path = [&](int32_t d) {
    return d < num_acc ? fmt::format("fpgas[{}]", d) : fmt::format("cpus[{}]", d - num_acc);
  };
  std::unordered_map<int64_t, OpId> op_of_id;
  for (OpId op = 0; op < g.num_ops(); ++op) op_of_id.emplace(instance.msr_id[op], op);
  std::vector<int32_t> device_of(g.num_ops(), -1);
  MsrSplit split;
  split.accelerators.resize(num_acc);
  split.cpus.resize(num_cpu);
  auto ops_of = [&](int32_t d) -> std::vector<OpId>& {
    return d < num_acc ? split.accelerators[d] : split.cpus[d - num_acc];
  };
  for (int32_t d = 0; d < num_acc + num_cpu; ++d) {
    io::JsonNode machine = d < num_acc ? fpgas.at(d) : cpus.at(d - num_acc);
    machine.check_fields({"nodes", "load"});
    io::JsonNode ids = machine.at("nodes");
    for (size_t k = 0; k < ids.size(); ++k) {
      io::JsonNode entry = ids.at(k);
      const int64_t id = entry.as_int();
      auto it = op_of_id.find(id);
      if (it == op_of_id.end()) entry.fail(fmt::format("no node of the instance has msr id {}", id));
      const OpId op = it->second;
      if (device_of[op] >= 0)
        entry.fail(fmt::format("msr node id {} is already assigned to {} (list each node once)", id,
                               device_path(device_of[op])));
      if (d < num_acc && g.pinned_kind(op) == kMsrCpuKind)
        entry.fail(fmt::format("msr node id {} is not supported on an accelerator (supportedOnFpga is false)", id));
      device_of[op] = d;
      ops_of(d).push_back(op);
    }
  }

  // Unlisted nodes (the backward pass of a training graph) follow their colour class.
  std::unordered_map<int32_t, int32_t> device_of_class;
  for (OpId op = 0; op < g.num_ops(); ++op) {
    const int32_t c = g.colocation(op);
    if (c == kNoClass || device_of[op] < 0) continue;
    auto [it, fresh] = device_of_class.emplace(c, device_of[op]);
    if (!fresh && it->second != device_of[op])
      root.fail(fmt::format("colour class {} is split between {} and {} (msr node id {} is on the latter); a "
                            "class must stay on one device", c, device_path(it->second), device_path(device_of[op]),
                            instance.msr_id[op]));
  }
  for (OpId op = 0; op < g.num_ops(); ++op) {
    if (device_of[op] >= 0) continue;
    const int32_t c = g.colocation(op);
    auto it = c == kNoClass ? device_of_class.end() : device_of_class.find(c);
    if (it == device_of_class.end())
      root.fail(fmt::format(
          "msr node id {} (\"{}\") is not in the split and {} (list it under a device)", instance.msr_id[op],
          g.op_name(op), c == kNoClass ? "has no colour class" : fmt::format("no node of its colour class {} is", c)));
    if (it->second < num_acc && g.pinned_kind(op) == kMsrCpuKind)
      root.fail(fmt::format("msr node id {} is not supported on an accelerator (supportedOnFpga is false) but its "
                            "colour class {} is on {}", instance.msr_id[op], c, device_path(it->second)));
    device_of[op] = it->second;
    ops_of(it->second).push_back(op);
  }
  return split;
}

MsrSplit read_msr_split(const std::string& path, const MsrInstance& instance) {
  return msr_split_from_json(io::read_json_file(path), path, instance);
}

std::vector<int32_t> split_placement(const MsrSplit& split, const MsrInstance& instance) {
  std::vector<int32_t> device_of(instance.graph.num_ops(), -1);
  for (size_t d = 0; d < split.accelerators.size(); ++d)
    for (OpId op : split.accelerators[d]) device_of[op] = static_cast<int32_t>(d);
  for (size_t c = 0; c < split.cpus.size(); ++c)
    for (OpId op : split.cpus[c]) device_of[op] = instance.max_accelerators + static_cast<int32_t>(c);
  return device_of;
}

}  // namespace placelab::graphs
