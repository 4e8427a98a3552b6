// The placelab.graph JSON format (version 1), documented in docs/formats.md.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "graphs/graph.h"
#include "graphs/json_util.h"

namespace placelab::graphs {

/**
 * Reads a placelab.graph file, or imports the graph of an msr-dnn-partitioning instance file
 * (graphs::read_msr; the other peer format, torch.fx, is Python's). Throws placelab::Error naming the
 * file and JSON path at fault.
 */
Graph read_graph(const std::string& path);

/** Builds a Graph from a parsed placelab.graph document; `origin` names it in errors. */
Graph graph_from_json(const nlohmann::json& doc, const std::string& origin);

/** The placelab.graph document of `graph`; graph_from_json(graph_to_json(g)) equals g exactly. */
nlohmann::json graph_to_json(const Graph& graph);

/** Reads an op's "gemm": [batch, m, n, k], each a whole number in 1..kMaxGemmDim; errors name the JSON path. */
GemmDims gemm_dims_from_json(const io::JsonNode& node);

/** [batch, m, n, k]. */
nlohmann::json gemm_dims_to_json(const GemmDims& dims);

/** Writes `graph` to `path` atomically. */
void write_graph(const Graph& graph, const std::string& path);

}  // namespace placelab::graphs
