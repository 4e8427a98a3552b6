// A placement problem as every learned policy sees it: the graph's units (colocation classes, so no
// policy can split one), their neighbourhoods, per-unit features, per-device features and per
// (unit, device) features. Device features are what let one policy score node-device pairs on
// clusters of any size and mix of devices, instead of GDP's fixed output head.
//
// Everything is built once per (graph, cluster) and is read-only afterwards, so rollouts on many
// threads share one Problem.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "policy/autodiff/ops.h"
#include "policy/classic/units.h"
#include "sim/engine.h"

namespace placelab::learned {

using autodiff::CsrPtr;
using autodiff::Mask;
using autodiff::MatrixF;

/** Columns of Problem::unit_x, in order (all log-scaled or in [0, 1]). */
inline constexpr int kUnitFeatures = 12;
/** Columns of Problem::device_x. */
inline constexpr int kDeviceFeatures = 7;
/** Columns of Problem::pair_x (one row per unit-device pair, row u * D + d). */
inline constexpr int kPairFeatures = 3;
/** Op types are hashed into this many buckets, so graphs with unseen types still embed. */
inline constexpr int kOpTypeBuckets = 64;

/** The bucket of an op type name (FNV-1a, the same on every platform). */
int32_t op_type_bucket(std::string_view type);

class Problem {
 public:
  /** Throws placelab::Error like policy::Units (an op pinned to a kind the cluster lacks). */
  explicit Problem(const sim::Simulator& simulator);

  const sim::Simulator& simulator() const { return units_.simulator(); }
  const policy::Units& units() const { return units_; }
  int32_t num_units() const { return units_.num_units(); }
  int32_t num_devices() const { return units_.num_devices(); }

  /**
   * [U, kUnitFeatures]: log FLOPs, log bytes read + written, log output bytes, log parameter bytes,
   * log in- and out-degree (in units), topological position in [0, 1], depth in [0, 1], log mean time
   * over allowed devices, log op count, whether the graph has measured times, fraction of allowed devices.
   */
  const MatrixF& unit_x() const { return unit_x_; }
  /** Op-type bucket of each unit (its first op's type), for an embedding table of kOpTypeBuckets rows. */
  const std::vector<int32_t>& unit_type() const { return unit_type_; }
  /**
   * [D, kDeviceFeatures]: log peak FLOP/s, log memory bandwidth, log memory, log launch overhead,
   * log mean bandwidth and mean latency to the other devices, whether it is a CPU.
   */
  const MatrixF& device_x() const { return device_x_; }
  /**
   * [U * D, kPairFeatures]: log(time on d / mean time) (0 where not allowed), allowed (0/1),
   * log(memory of the unit / memory of d).
   */
  const MatrixF& pair_x() const { return pair_x_; }
  /** [U, D], true where unit u may run on device d (pinned kinds). */
  const Mask& allowed() const { return allowed_; }
  /** Unit neighbourhoods over both edge directions (self loops and duplicates dropped). */
  const CsrPtr& neighbors() const { return neighbors_; }
  /** Predecessor units of each unit (rows of a [U, U] CSR), for message passing along data flow. */
  const CsrPtr& predecessors() const { return predecessors_; }
  /** Bytes a unit sends to other units (sum over its ops' out-edges that leave the unit). */
  double out_bytes(int32_t u) const { return out_bytes_[u]; }

  /** The op placement of a unit placement (checked by the simulator when simulated). */
  std::vector<int32_t> expand(std::span<const int32_t> unit_device) const { return units_.expand(unit_device); }

 private:
  policy::Units units_;
  MatrixF unit_x_, device_x_, pair_x_;
  std::vector<int32_t> unit_type_;
  Mask allowed_;
  CsrPtr neighbors_, predecessors_;
  std::vector<double> out_bytes_;
};

}  // namespace placelab::learned
