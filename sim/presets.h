// Named clusters of the papers' and today's machines, built from datasheet numbers (sources beside
// each in presets.cpp): single hosts, multi-node DGX clusters (h100-nodes-4x8), and the cluster of an
// msr-dnn-partitioning instance (Tarnawski et al.).
#pragma once

#include <optional>
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

/** Every single-host preset name, e.g. "k80-1" ... "placeto-8"; multi-node names follow kMultiNodeGrammar. */
std::vector<std::string> preset_names();

/**
 * The preset called `name`: a single-host preset or a multi-node name (parse_multinode_name); throws
 * placelab::Error naming the valid forms for anything else.
 */
Cluster make_preset(std::string_view name);

/**
 * N DGX nodes of G GPUs each: NVSwitch inside a node, one InfiniBand NIC per GPU, GPU i of every node on
 * leaf switch ("rail") i, leaves joined through a spine (docs/simulator.md, "Multi-node presets").
 */
struct MultiNodeSpec {
  std::string kind = "h100";  // "h100" (DGX H100) or "a100" (DGX A100, A100 SXM4 80GB)
  int nodes = 1;              // N, 1..kMaxNodes
  int gpus_per_node = 8;      // G, 1, 2, 4 or 8
  int oversubscription = 1;   // R: a leaf has ceil(N / R) uplinks to the spine, one per R nodes; 1: non-blocking
};

/** The most nodes of a multi-node preset: one leaf switch per rail holds them all (one SuperPOD scalable unit). */
inline constexpr int kMaxNodes = 32;
/** Multi-node preset names, for lists and errors. */
inline constexpr std::string_view kMultiNodeGrammar =
    "KIND-nodes-NxG[-osR] (KIND h100|a100|v100, N 1..32 nodes, G 1|2|4|8 GPUs per node, R 1..32 leaf uplink "
    "oversubscription R:1, default 1: non-blocking; e.g. h100-nodes-4x8)";

/** One multi-node family for `placelab cluster --list`. */
struct MultiNodeFamily {
  std::string family;   // "h100-nodes"
  std::string summary;  // one line
};
const std::vector<MultiNodeFamily>& multinode_families();

/** The name of `spec`'s cluster: "h100-nodes-4x8", with "-osR" when R > 1. */
std::string multinode_name(const MultiNodeSpec& spec);

/**
 * The spec named `name` when it has the form KIND-nodes-... (nullopt otherwise); throws placelab::Error
 * naming the grammar when that form is malformed or out of range.
 */
std::optional<MultiNodeSpec> parse_multinode_name(std::string_view name);

/** The multi-node cluster of `spec`; throws placelab::Error naming the field at fault and the grammar. */
Cluster make_multinode(const MultiNodeSpec& spec);

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
