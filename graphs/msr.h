// Importer of the msr-fiddle/dnn-partitioning JSON format (Tarnawski et al., NeurIPS 2020): the
// throughput-problem instances and the human-expert splits. Everything their model needs is kept
// (latencies per device kind, sizes, colour classes, backward flags, edge costs), so the simulator's
// max-load evaluator and the optimal DP reproduce the paper's numbers. Rules: docs/graph_transforms.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "graphs/graph.h"

namespace placelab::graphs {

/** Device kinds under which the importer stores cpuLatency and fpgaLatency. */
inline constexpr std::string_view kMsrCpuKind = "cpu";
inline constexpr std::string_view kMsrAcceleratorKind = "accelerator";
/** The format's latencies and costs are in milliseconds; the Graph stores seconds = value * kMsrSecondsPerUnit. */
inline constexpr double kMsrSecondsPerUnit = 1e-3;

/** One instance of Tarnawski et al.'s throughput problem. */
struct MsrInstance {
  Graph graph;
  std::vector<int64_t> msr_id;          // msr node id of each op (op ids are 0..n-1 in file order)
  int32_t max_accelerators = 0;         // maxFPGAs
  int32_t max_cpus = 0;                 // maxCPUs
  double accelerator_memory_bytes = 0;  // maxSizePerFPGA

  /** Op with msr node id `id`, or -1 (a linear scan). */
  OpId op_of_msr_id(int64_t id) const;
};

/**
 * Whether `doc` is an msr instance rather than a placelab document (read_graph and sim::read_cluster
 * accept such files): an object with no "format", with "nodes" and one of the machine fields
 * (maxFPGAs, maxCPUs, maxSizePerFPGA), so that other node lists (networkx node-link files) are not.
 */
bool is_msr_instance(const nlohmann::json& doc);

/** Throws the error for a document with no "format" that is no msr instance either, naming both formats. */
[[noreturn]] void fail_unknown_format(const std::string& origin, std::string_view placelab_format);

/** Reads an msr instance file; throws placelab::Error naming the file, JSON path and msr id at fault. */
MsrInstance read_msr(const std::string& path);

/** Builds an instance from a parsed msr document; `origin` names it in errors and gives the graph's name. */
MsrInstance msr_from_json(const nlohmann::json& doc, const std::string& origin);

/** A split: for each accelerator and each CPU, its ops. */
struct MsrSplit {
  std::vector<std::vector<OpId>> accelerators, cpus;
};

/** Reads a human-expert split file (ids are msr ids) and, for training graphs, extends the forward
    split to backward nodes through colour classes, as the paper's README describes. */
MsrSplit read_msr_split(const std::string& path, const MsrInstance& instance);

/** The same from a parsed split document; `origin` names it in errors. */
MsrSplit msr_split_from_json(const nlohmann::json& doc, const std::string& origin, const MsrInstance& instance);

/** The split as a placement on msr_cluster(instance): accelerator d is device d, CPU c is device
    max_accelerators + c; ops the split leaves out get -1. */
std::vector<int32_t> split_placement(const MsrSplit& split, const MsrInstance& instance);

}  // namespace placelab::graphs
