// Named clusters of the papers' and today's machines, built from datasheet numbers (sources beside
// each in presets.cpp), and the cluster of an msr-dnn-partitioning instance (Tarnawski et al.).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "graphs/msr.h"
#include "sim/cluster.h"

namespace placelab::sim {

/** One preset family: names are `<family>-<n>` for each n in `sizes`. */
struct PresetInfo {
  std::string family;        // "v100-nvlink"
  std::vector<int> sizes;    // GPUs (or sockets, or devices) it comes in
  std::string summary;       // one line for `placelab cluster --list`
};

/** Every preset family. */
const std::vector<PresetInfo>& preset_families();

/** Every preset name, e.g. "k80-1" ... "placeto-8". */
std::vector<std::string> preset_names();

/** The preset called `name`; throws placelab::Error listing the names for anything else. */
Cluster make_preset(std::string_view name);

/** A cluster argument: a placelab.cluster file (an existing path or a name ending in .json) or a preset name. */
Cluster load_cluster(const std::string& spec);

/** Device kinds of the msr cluster; they match graphs::kMsrAcceleratorKind and kMsrCpuKind. */
inline constexpr std::string_view kAcceleratorKind = "accelerator";
inline constexpr std::string_view kCpuKind = "cpu";

/**
 * Tarnawski et al.'s machine: `accelerators` devices of kind "accelerator" with
 * `accelerator_memory_bytes` each, then `cpus` devices of kind "cpu" (unbounded memory), all on one
 * host switch. Op times come from the graph's measured times; the max-load evaluator uses the graph's
 * edge costs, and the discrete-event engine uses them too when SimOptions::use_edge_comm is set.
 */
Cluster msr_cluster(int accelerators, int cpus, double accelerator_memory_bytes);

/** The machine an msr instance allows: its maxFPGAs accelerators, maxCPUs CPUs and maxSizePerFPGA. */
Cluster msr_cluster(const graphs::MsrInstance& instance);

}  // namespace placelab::sim
