// Pipelined (throughput) evaluation. The max-load model of Tarnawski et al. (NeurIPS 2020): with many
// samples in flight, the time per sample is the load of the busiest device, where a device's load is
// its ops' compute time plus the communication it takes part in; memory is the resident bytes of its
// ops. And a discrete-event run of a stream of independent micro-batches through the engine, which
// shows the same bottleneck with contention and pipeline fill. Semantics: docs/simulator.md.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "graphs/graph.h"
#include "sim/engine.h"

namespace placelab::sim {

/** Per-device loads of a placement under the max-load model. */
struct MaxLoadResult {
  double max_load_s = 0;             // the objective: time per sample in steady state
  int32_t bottleneck_device = 0;     // a device with the max load (the lowest index among ties)
  std::vector<double> load_s;        // compute_s + comm_s per device
  std::vector<double> compute_s;     // sum of op times
  std::vector<double> comm_s;        // communication the device pays
  std::vector<double> memory_bytes;  // resident bytes (param_bytes) of its ops
  std::vector<double> excess_bytes;  // max(0, memory - capacity)
  bool fits = true;                  // every device within capacity
  bool contiguous = true;            // every device's forward ops form a convex set (see is_contiguous)
};

/**
 * Tarnawski et al.'s load of every device, for any placement. For each op whose output reaches other
 * devices, the cost c of a device is the largest over the op's edges to it of the edge's measured comm_s
 * when known, else the idle-network transfer time of its bytes (control edges cost nothing); the sender
 * pays c once (the largest over receivers), each receiving device pays c once; devices of kind "cpu" pay
 * no communication (transfers go through their DRAM). Exactly the msr-dnn-partitioning model on its
 * inputs (msr_cluster, measured times, edge costs).
 */
MaxLoadResult max_load(const Simulator& simulator, std::span<const int32_t> device_of);

/** `result` as one JSON object, with device names and kinds from `cluster`. */
nlohmann::json max_load_to_json(const MaxLoadResult& result, const Cluster& cluster);

/**
 * Whether each device's forward ops form a convex set: no path of forward ops leaves the set and comes
 * back (for a graph of forward ops that is Tarnawski et al.'s contiguity, I \ I' for two ideals I' of I).
 */
bool is_contiguous(const graphs::Graph& graph, std::span<const int32_t> device_of, int32_t num_devices);

/** A stream of micro-batches through the discrete-event engine. */
struct StreamResult {
  int32_t micro_batches = 0;
  double makespan_s = 0;        // all micro-batches done
  double single_s = 0;          // one micro-batch alone
  double time_per_batch_s = 0;  // (makespan - single) / (micro_batches - 1): the steady-state period
  SimResult last;               // the full result of the stream run
};

/**
 * Runs `micro_batches` independent copies of the graph (same placement; parameters resident once, as the
 * copies share them) through `simulator`'s cluster, cost model and options, except that every device
 * starts, of its ready ops, the earliest micro-batch's first (then by upward rank: Priority::rank with
 * ranks ordered by micro-batch), as a pipeline runs them. `single_s` is one copy by the same rule.
 */
StreamResult simulate_stream(const Simulator& simulator, std::span<const int32_t> device_of, int32_t micro_batches);

}  // namespace placelab::sim
