// The roofline and profile cost models and the placelab.profile format.
#include "sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "graphs/op_class.h"

namespace placelab::sim {

RooflineModel::RooflineModel(RooflineOptions options) : options_(std::move(options)) {
  for (const auto& [type, e] : options_.type_efficiency)
    if (!(e > 0 && e <= 1))
      throw Error(fmt::format("roofline: type_efficiency of \"{}\" is {}, must be in (0, 1]", type, e));
  if (!(options_.half_efficiency_flops >= 0 && std::isfinite(options_.half_efficiency_flops)))
    throw Error(fmt::format("roofline: half_efficiency_flops is {}, must be finite and >= 0",
                            options_.half_efficiency_flops));
}

RooflineBounds roofline_bounds(const graphs::Graph& graph, graphs::OpId op, const Device& device, double scale) {
  const double flops = graph.flops(op), bytes = graph.bytes_read(op) + graph.bytes_written(op);
  double compute_e = device.efficiency, memory_e = device.efficiency;
  if (!device.efficiency_curves.empty()) {
    const graphs::OpClass c = graphs::op_class_of_type(graph.op_type(op));
    auto curve = [&](graphs::OpClass own, graphs::OpClass fallback) -> const EfficiencyCurve* {
      for (graphs::OpClass k : {own, fallback}) {
        auto it = device.efficiency_curves.find(std::string(graphs::op_class_name(k)));
        if (it != device.efficiency_curves.end()) return &it->second;
      }
      return nullptr;
    };
    const bool compute = graphs::is_compute_class(c);
    if (const EfficiencyCurve* k = curve(compute ? c : graphs::OpClass::gemm, graphs::OpClass::gemm); k && flops > 0)
      compute_e = k->at(flops);
    if (const EfficiencyCurve* k = curve(compute ? graphs::OpClass::elementwise : c, graphs::OpClass::elementwise); k && bytes > 0)
      memory_e = k->at(bytes);
  }
  double compute_s = flops > 0 ? flops / (device.peak_flops_per_s * compute_e) : 0;
  if (const graphs::GemmDims& d = graph.gemm(op); d.known() && flops > 0) compute_s = shaped_time_s(compute_s, d, device);
  return {compute_s / scale, bytes > 0 ? bytes / (device.memory_bandwidth_bytes_per_s * memory_e * scale) : 0};
}

std::array<double, 3> extra_elements(const graphs::GemmDims& d) {
  const graphs::GemmDims sq = graphs::square_dims(d.flops());
  auto elements = [](const graphs::GemmDims& g, int64_t rows, int64_t cols) {
    return static_cast<double>(g.batch) * static_cast<double>(rows) * static_cast<double>(cols);
  };
  return {elements(d, d.m, d.k) - elements(sq, sq.m, sq.k), elements(d, d.k, d.n) - elements(sq, sq.k, sq.n),
          elements(d, d.m, d.n) - elements(sq, sq.m, sq.n)};
}

double shaped_time_s(double square_s, const graphs::GemmDims& d, const Device& device) {
  const auto& [a_s, b_s, c_s] = device.gemm_element_s;
  if (a_s == 0 && b_s == 0 && c_s == 0) return square_s;
  const auto [a, b, c] = extra_elements(d);
  const double extra = a_s * a + b_s * b + c_s * c;
  // The square product has the fewest elements for its FLOPs: no shape runs faster (measured: 0.28-1.0 of its rate).
  return std::max(square_s + extra, square_s);
}

double RooflineModel::op_time_s(const graphs::Graph& graph, graphs::OpId op, const Device& device) const {
  double scale = 1;
  if (!options_.type_efficiency.empty()) {
    auto it = options_.type_efficiency.find(graph.op_type(op));
    if (it != options_.type_efficiency.end()) scale *= it->second;
  }
  const double flops = graph.flops(op);
  if (options_.half_efficiency_flops > 0 && flops > 0 && device.efficiency_curves.empty())
    scale *= flops / (flops + options_.half_efficiency_flops);
  const RooflineBounds b = roofline_bounds(graph, op, device, scale);
  return std::max(b.compute_s, b.memory_s) + device.launch_overhead_s;
}

ProfileModel::ProfileModel(std::shared_ptr<const CostModel> fallback) : fallback_(std::move(fallback)) {
  if (!fallback_) throw Error("profile model: needs a fallback cost model");
}

void ProfileModel::set_op_time(const std::string& kind, const std::string& op_name, double seconds) {
  by_op_[{kind, op_name}] = seconds;
}

void ProfileModel::set_type_time(const std::string& kind, const std::string& op_type, double seconds) {
  by_type_[{kind, op_type}] = seconds;
}

double ProfileModel::op_time_s(const graphs::Graph& graph, graphs::OpId op, const Device& device) const {
  if (!by_op_.empty()) {
    auto it = by_op_.find({device.kind, graph.op_name(op)});
    if (it != by_op_.end()) return it->second;
  }
  if (!by_type_.empty()) {
    auto it = by_type_.find({device.kind, graph.op_type(op)});
    if (it != by_type_.end()) return it->second;
  }
  return fallback_->op_time_s(graph, op, device);
}

nlohmann::json ProfileModel::to_json() const {
  nlohmann::json entries = nlohmann::json::array();
  for (const auto& [key, s] : by_op_) entries.push_back({{"device_kind", key.first}, {"op", key.second}, {"time_s", s}});
  for (const auto& [key, s] : by_type_)
    entries.push_back({{"device_kind", key.first}, {"op_type", key.second}, {"time_s", s}});
  return {{"format", "placelab.profile"}, {"version", 1}, {"entries", entries}};
}

std::shared_ptr<ProfileModel> profile_from_json(const nlohmann::json& doc, const std::string& origin,
                                                std::shared_ptr<const CostModel> fallback) {
  io::JsonNode root(doc, origin);
  root.check_header("placelab.profile", {1});
  root.check_fields({"format", "version", "entries"});
  auto model = std::make_shared<ProfileModel>(std::move(fallback));
  io::JsonNode entries = root.at("entries");
  std::map<std::tuple<std::string, std::string, std::string>, size_t> seen;  // (key, kind, name) -> entry
  for (size_t i = 0; i < entries.size(); ++i) {
    io::JsonNode e = entries.at(i);
    e.check_fields({"device_kind", "op", "op_type", "time_s"});
    // An empty name would match no device or op: say so instead of ignoring the entry.
    auto name_of = [&](const char* field) {
      io::JsonNode node = e.at(field);
      std::string name = node.as_string();
      if (name.empty()) node.fail("is empty; give the name it means");
      return name;
    };
    std::string kind = name_of("device_kind");
    double s = e.at("time_s").as_amount();
    if (e.has("op") == e.has("op_type")) e.fail("give exactly one of \"op\" (an op name) or \"op_type\"");
    const std::string key = e.has("op") ? "op" : "op_type", name = name_of(key.c_str());
    const auto [it, fresh] = seen.emplace(std::tuple{key, kind, name}, i);
    if (!fresh) e.fail(fmt::format("repeats the time of {} \"{}\" on \"{}\" (entries[{}]); keep one", key, name, kind, it->second));
    if (e.has("op")) model->set_op_time(kind, name, s);
    else model->set_type_time(kind, name, s);
  }
  return model;
}

std::shared_ptr<ProfileModel> read_profile(const std::string& path, std::shared_ptr<const CostModel> fallback) {
  return profile_from_json(io::read_json_file(path), path, std::move(fallback));
}

std::shared_ptr<const CostModel> default_cost_model() { return std::make_shared<RooflineModel>(); }

}  // namespace placelab::sim
