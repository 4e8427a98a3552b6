// How long an op takes on a device: a pure function of (graph, op, device). The roofline model is the
// default; a profile table (placelab.profile v1, from calibration) overrides it per op or op type; the
// graph's own measured times per device kind override both (the Simulator applies those itself, so every
// cost model gets them). Semantics: docs/simulator.md.
#pragma once

#include <array>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "graphs/graph.h"
#include "sim/cluster.h"

namespace placelab::sim {

/** Op time on a device; implementations are pure and thread-safe. */
class CostModel {
 public:
  virtual ~CostModel() = default;
  /** Seconds `op` of `graph` takes on `device`, launch overhead included. */
  virtual double op_time_s(const graphs::Graph& graph, graphs::OpId op, const Device& device) const = 0;
  /** A short name for reports ("roofline", "profile"). */
  virtual std::string name() const = 0;
};

/** The two bounds of the roofline for one op on one device, launch overhead excluded. */
struct RooflineBounds {
  double compute_s = 0;  // flops / (peak FLOP/s x efficiency)
  double memory_s = 0;   // bytes read and written / (bandwidth x efficiency)
};

/**
 * The bounds with the device's efficiency for this op: its calibrated curve (Device::efficiency_curves)
 * at the op's size where it has one, the arithmetic side from the op class's curve ("gemm" for any class
 * without one) at the op's FLOPs, the memory side from a memory class's curve ("elementwise" for any
 * class without one) at its bytes; else Device::efficiency. An op with known GemmDims has its arithmetic
 * side adjusted for its shape (shaped_time_s). Both rates are multiplied by `scale`.
 */
RooflineBounds roofline_bounds(const graphs::Graph& graph, graphs::OpId op, const Device& device, double scale = 1);

/**
 * Seconds of a product of shape `dims` that would take `square_s` as the square product of its FLOPs
 * (graphs::square_dims): plus the device's gemm_element_s for each element of A, B and C beyond the
 * square's (fewer elements take time off), never below the square's time.
 */
double shaped_time_s(double square_s, const graphs::GemmDims& dims, const Device& device);

/** Elements of A, B and C that `dims` has beyond the square product of its FLOPs (negative: fewer). */
std::array<double, 3> extra_elements(const graphs::GemmDims& dims);

/** Knobs of the roofline model. */
struct RooflineOptions {
  /** Multiplies the device efficiency for ops of this type (e.g. {"Softmax", 0.5}); other types: 1. */
  std::map<std::string, double> type_efficiency;
  /** Size at which an op reaches half its efficiency: eff * flops / (flops + half). 0 turns it off. */
  double half_efficiency_flops = 0;
};

/**
 * time = max(flops / (peak * e), (bytes_read + bytes_written) / (bandwidth * e)) + launch overhead,
 * with e = device efficiency (calibrated curves where the device has them: roofline_bounds) *
 * type_efficiency[type] * size factor (half_efficiency_flops, for devices without curves: a curve
 * already says how efficiency grows with size).
 */
class RooflineModel final : public CostModel {
 public:
  explicit RooflineModel(RooflineOptions options = {});
  double op_time_s(const graphs::Graph& graph, graphs::OpId op, const Device& device) const override;
  std::string name() const override { return "roofline"; }
  const RooflineOptions& options() const { return options_; }

 private:
  RooflineOptions options_;
};

/**
 * A measured table that overrides a fallback model: seconds per (device kind, op name) or per (device
 * kind, op type), looked up in that order; everything else goes to the fallback.
 */
class ProfileModel final : public CostModel {
 public:
  explicit ProfileModel(std::shared_ptr<const CostModel> fallback);
  /** Time of the op called `op_name` on `kind` (launch overhead included). */
  void set_op_time(const std::string& kind, const std::string& op_name, double seconds);
  /** Time of every op of type `op_type` on `kind` that has no per-op entry. */
  void set_type_time(const std::string& kind, const std::string& op_type, double seconds);
  double op_time_s(const graphs::Graph& graph, graphs::OpId op, const Device& device) const override;
  std::string name() const override { return "profile"; }
  size_t size() const { return by_op_.size() + by_type_.size(); }
  /** The placelab.profile document of the table. */
  nlohmann::json to_json() const;

 private:
  std::shared_ptr<const CostModel> fallback_;
  std::map<std::pair<std::string, std::string>, double> by_op_, by_type_;
};

/**
 * Reads placelab.profile v1: {"format": "placelab.profile", "version": 1, "entries": [{"device_kind": K,
 * "op": NAME | "op_type": TYPE, "time_s": S}]}; missing entries fall back to `fallback`.
 */
std::shared_ptr<ProfileModel> read_profile(const std::string& path, std::shared_ptr<const CostModel> fallback);
std::shared_ptr<ProfileModel> profile_from_json(const nlohmann::json& doc, const std::string& origin,
                                                std::shared_ptr<const CostModel> fallback);

/** The default: a roofline model with default options. */
std::shared_ptr<const CostModel> default_cost_model();

}  // namespace placelab::sim
