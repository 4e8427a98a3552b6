// Replay plans: a simulated schedule written down so that an executor can run it for real. Per device
// the ordered ops with their kernel specs (FLOPs, bytes, which kernel), per cross-device tensor a
// transfer with its bytes, and every dependency; also what the simulator predicted for each event, so
// measured and predicted times can be compared. JSON format placelab.replay v1; see docs/replay.md.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/engine.h"

namespace placelab::sim::replay {

/** What an op's replay kernel does: a GEMM of the op's FLOPs, a stream of its bytes, or nothing. */
enum class KernelKind : uint8_t {
  none,     // no work: only the dispatch (and the dependencies) of the op
  compute,  // a GEMM with the op's FLOPs (the op is compute-bound on its device)
  memory,   // a streaming kernel reading and writing the op's bytes (memory-bound)
};

/** Largest FLOPs or bytes of one op or transfer (2^62, about 4.6e18): the executors count work in int64. */
inline constexpr double kMaxAmount = 0x1p62;

/** "none", "compute" or "memory". */
std::string_view kernel_kind_name(KernelKind kind);

/** A device of the plan (the cluster's device of the same index). */
struct PlanDevice {
  std::string name, kind;
  /** Plan-op indices in the order the device runs them. */
  std::vector<int32_t> ops;
  bool operator==(const PlanDevice&) const = default;
};

/** One op, run on its device after every op in `after_ops` and every transfer in `after_transfers`. */
struct PlanOp {
  std::string name, type;
  int32_t device = 0;
  KernelKind kernel = KernelKind::none;
  double flops = 0;  // the graph op's FLOPs
  double bytes = 0;  // the graph op's bytes read + written
  graphs::GemmDims gemm;  // the graph op's matrix products, when known: a compute kernel runs that shape
  std::vector<int32_t> after_ops;        // same-device inputs and control edges (plan-op indices)
  std::vector<int32_t> after_transfers;  // inputs from other devices (transfer indices)
  double predicted_start_s = 0, predicted_end_s = 0;
  bool operator==(const PlanOp&) const = default;
};

/** The product a compute kernel runs for `op`: its known shape, else square_dims of its FLOPs. */
inline graphs::GemmDims replay_dims(const PlanOp& op) { return op.gemm.known() ? op.gemm : graphs::square_dims(op.flops); }

/**
 * Where the operands of the compute op after one of `dims` start, from `cursor`, in a region of `region`
 * floats: past this op's (batch k max(m, n) floats), wrapping, so that each op reads operands of its own.
 */
inline int64_t next_operands(int64_t cursor, const graphs::GemmDims& dims, int64_t region) {
  const double floats = static_cast<double>(dims.batch) * static_cast<double>(dims.k) * static_cast<double>(std::max(dims.m, dims.n));
  return (cursor + static_cast<int64_t>(std::fmod(floats, static_cast<double>(region)))) % region;
}

/** The output of op `producer` copied from device `src` to device `dst` once the producer has ended. */
struct PlanTransfer {
  int32_t producer = 0, src = 0, dst = 0;
  double bytes = 0;
  double predicted_start_s = 0, predicted_end_s = 0;
  bool operator==(const PlanTransfer&) const = default;
};

/**
 * A schedule to replay. Ops are in graph-op order (op i of the plan is op i of the graph); each device
 * runs its ops in `devices[d].ops` order, and the transfers of each ordered device pair run one at a
 * time in the order of `transfers` (the simulator's FIFO order).
 */
struct ReplayPlan {
  std::string graph, cluster;
  double predicted_step_s = 0;
  std::vector<PlanDevice> devices;
  std::vector<PlanOp> ops;
  std::vector<PlanTransfer> transfers;
  bool operator==(const ReplayPlan&) const = default;
};

/**
 * Simulates `device_of` with `simulator` and writes its schedule as a plan. An op's kernel is the
 * bound of the roofline on its device: compute when flops / peak >= bytes / bandwidth (and flops > 0),
 * memory when it has bytes, else none.
 */
ReplayPlan export_plan(const Simulator& simulator, std::span<const int32_t> device_of);

/**
 * Checks names, indices, amounts and orders: device names are unique and non-empty, FLOPs and bytes
 * are at most kMaxAmount, every device lists exactly its own ops once, every transfer goes between
 * two distinct devices from its producer's device, every dependency exists, and the per-device and
 * per-pair orders together with the dependencies can run without deadlock. Throws placelab::Error
 * naming `origin`, the device, op or transfer at fault, and the fix.
 */
void validate_plan(const ReplayPlan& plan, const std::string& origin = "replay plan");

/** The placelab.replay v1 document of `plan`; plan_from_json(plan_to_json(p)) == p exactly. */
nlohmann::json plan_to_json(const ReplayPlan& plan);

/** Reads a placelab.replay document strictly (unknown fields are errors) and validates it. */
ReplayPlan plan_from_json(const nlohmann::json& doc, const std::string& origin);

/** Reads a placelab.replay file; errors name the file and JSON path. */
ReplayPlan read_plan(const std::string& path);

/** Writes `plan` to `path` atomically. */
void write_plan(const ReplayPlan& plan, const std::string& path);

}  // namespace placelab::sim::replay
