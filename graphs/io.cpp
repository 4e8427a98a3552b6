// placelab.graph v1: {"format", "version", "name", "ops": [...], "edges": [...]}. Optional op fields
// are written only when they differ from their defaults, so files stay small and diffs readable.
#include "graphs/io.h"

#include <cmath>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "graphs/msr.h"

namespace placelab::graphs {

using nlohmann::json;

namespace {

constexpr std::string_view kFormat = "placelab.graph";

OpSpec read_op(const io::JsonNode& node) {
  node.check_fields({"name", "type", "phase", "flops", "bytes_read", "bytes_written", "output_bytes",
                     "param_bytes", "temp_bytes", "colocation", "layer", "pinned_kind", "gemm", "measured_s"});
  OpSpec op;
  op.name = node.at("name").as_string();
  op.type = node.get_string("type", "Op");
  if (node.has("phase")) op.phase = parse_phase(node.at("phase").as_string(), node.at("phase").where());
  op.flops = node.get_amount("flops", 0);
  op.bytes_read = node.get_amount("bytes_read", 0);
  op.bytes_written = node.get_amount("bytes_written", 0);
  op.output_bytes = node.get_amount("output_bytes", 0);
  op.param_bytes = node.get_amount("param_bytes", 0);
  op.temp_bytes = node.get_amount("temp_bytes", 0);
  auto class_field = [&](std::string_view key) {
    if (!node.has(key)) return kNoClass;
    int64_t v = node.at(key).as_int();
    if (v < 0 || v > INT32_MAX) node.at(key).fail(fmt::format("is {}, must be in 0..{}", v, INT32_MAX));
    return static_cast<int32_t>(v);
  };
  op.colocation = class_field("colocation");
  op.layer = class_field("layer");
  op.pinned_kind = node.get_string("pinned_kind", "");
  if (node.has("gemm")) op.gemm = gemm_dims_from_json(node.at("gemm"));
  if (node.has("measured_s")) {
    io::JsonNode measured = node.at("measured_s");
    measured.expect_object();
    for (auto& [kind, _] : measured.value().items())
      op.measured_s.emplace_back(kind, measured.at(kind).as_amount());
  }
  return op;
}

OpId read_endpoint(const io::JsonNode& node, const std::unordered_map<std::string, OpId>& ids, OpId num_ops) {
  if (node.value().is_string()) {
    auto it = ids.find(node.as_string());
    if (it == ids.end()) node.fail(fmt::format("no op is named \"{}\"", node.as_string()));
    return it->second;
  }
  int64_t id = node.as_int();
  if (id < 0 || id >= num_ops) node.fail(fmt::format("op index {} does not exist (ops are 0..{})", id, num_ops - 1));
  return static_cast<OpId>(id);
}

}  // namespace

GemmDims gemm_dims_from_json(const io::JsonNode& node) {
  if (!node.value().is_array() || node.size() != 4) node.fail("must be [batch, m, n, k]: four whole numbers >= 1");
  GemmDims d;
  int64_t* fields[] = {&d.batch, &d.m, &d.n, &d.k};
  for (size_t i = 0; i < 4; ++i) {
    *fields[i] = node.at(i).as_int();
    if (*fields[i] < 1 || *fields[i] > kMaxGemmDim) node.at(i).fail(fmt::format("is {}, must be in 1..{}", *fields[i], kMaxGemmDim));
  }
  return d;
}

nlohmann::json gemm_dims_to_json(const GemmDims& d) { return {d.batch, d.m, d.n, d.k}; }

Graph graph_from_json(const json& doc, const std::string& origin) {
  io::JsonNode root(doc, origin);
  root.check_header(kFormat, {1});
  root.check_fields({"format", "version", "name", "ops", "edges"});
  GraphBuilder builder(root.at("name").as_string());
  io::JsonNode ops = root.at("ops");
  const size_t n = ops.size();
  if (n == 0) ops.fail("has no ops (a graph needs at least one op)");
  std::unordered_map<std::string, OpId> ids;
  for (size_t i = 0; i < n; ++i) {
    io::JsonNode node = ops.at(i);
    node.expect_object();
    OpSpec op = read_op(node);
    // Re-check here (the builder checks too) to point at the JSON path, not just the op index.
    if (!ids.emplace(op.name, static_cast<OpId>(i)).second)
      node.at("name").fail(fmt::format("duplicate op name \"{}\" (names must be unique)", op.name));
    builder.add_op(std::move(op));
  }
  static const json kNoEdges = json::array();
  io::JsonNode edges = root.has("edges") ? root.at("edges") : io::JsonNode(kNoEdges, origin, "edges");
  for (size_t e = 0; e < edges.size(); ++e) {
    io::JsonNode node = edges.at(e);
    node.check_fields({"src", "dst", "bytes", "comm_s"});
    EdgeSpec edge;
    edge.src = read_endpoint(node.at("src"), ids, static_cast<OpId>(n));
    edge.dst = read_endpoint(node.at("dst"), ids, static_cast<OpId>(n));
    edge.bytes = node.get_amount("bytes", 0);
    edge.comm_s = node.has("comm_s") ? node.at("comm_s").as_amount() : kUnknown;
    builder.add_edge(edge);
  }
  try {
    return std::move(builder).build();
  } catch (const Error& e) {
    throw Error(fmt::format("{}: {}", origin, e.what()));
  }
}

Graph read_graph(const std::string& path) {
  const json doc = io::read_json_file(path);
  if (is_msr_instance(doc)) return msr_from_json(doc, path).graph;
  if (doc.is_object() && !doc.contains("format")) fail_unknown_format(path, kFormat);
  return graph_from_json(doc, path);
}

json graph_to_json(const Graph& g) {
  json ops = json::array();
  for (OpId i = 0; i < g.num_ops(); ++i) {
    json op = {{"name", g.op_name(i)}, {"type", g.op_type(i)}};
    if (g.phase(i) != Phase::forward) op["phase"] = phase_name(g.phase(i));
    auto put = [&](const char* key, double v) {
      if (v != 0) op[key] = v;
    };
    put("flops", g.flops(i));
    put("bytes_read", g.bytes_read(i));
    put("bytes_written", g.bytes_written(i));
    put("output_bytes", g.output_bytes(i));
    put("param_bytes", g.param_bytes(i));
    put("temp_bytes", g.temp_bytes(i));
    if (g.colocation(i) != kNoClass) op["colocation"] = g.colocation(i);
    if (g.layer(i) != kNoClass) op["layer"] = g.layer(i);
    if (!g.pinned_kind(i).empty()) op["pinned_kind"] = g.pinned_kind(i);
    if (g.gemm(i).known()) op["gemm"] = gemm_dims_to_json(g.gemm(i));
    json measured = json::object();
    for (size_t k = 0; k < g.measured_kinds().size(); ++k) {
      double t = g.measured_s(i, static_cast<int32_t>(k));
      if (!std::isnan(t)) measured[g.measured_kinds()[k]] = t;
    }
    if (!measured.empty()) op["measured_s"] = std::move(measured);
    ops.push_back(std::move(op));
  }
  json edges = json::array();
  for (EdgeId e = 0; e < g.num_edges(); ++e) {
    json edge = {{"src", g.edge_src(e)}, {"dst", g.edge_dst(e)}};
    if (g.edge_bytes(e) != 0) edge["bytes"] = g.edge_bytes(e);
    if (!std::isnan(g.edge_comm_s(e))) edge["comm_s"] = g.edge_comm_s(e);
    edges.push_back(std::move(edge));
  }
  return {{"format", kFormat}, {"version", 1}, {"name", g.name()}, {"ops", std::move(ops)}, {"edges", std::move(edges)}};
}

void write_graph(const Graph& graph, const std::string& path) {
  io::write_json_atomic(path, graph_to_json(graph));
}

}  // namespace placelab::graphs
