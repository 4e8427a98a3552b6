// Shared plumbing of the placelab verbs: resolving graph arguments, printing results for people
// (tables on stdout) and for scripts (one JSON object with --json).
#pragma once

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "graphs/graph.h"

namespace placelab::cli {

/**
 * A graph argument: a placelab.graph file, or a zoo model with optional parameters,
 * `NAME[:key=value,...]` (e.g. `gnmt:layers=8,steps=20`); the key `training=1` expands it to a
 * training graph.
 */
graphs::Graph load_graph(const std::string& spec);

/** Prints `doc` as one JSON object on stdout. */
void print_json(const nlohmann::json& doc);

/** "1.23 G" style numbers for tables. */
std::string human(double value, std::string_view unit = "");

// Each verb adds its subcommand; its callback runs the verb (errors propagate as placelab::Error).
void add_graph_command(CLI::App& app);
void add_place_command(CLI::App& app);
void add_compare_command(CLI::App& app);
void add_cluster_command(CLI::App& app);
void add_simulate_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_replay_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);

}  // namespace placelab::cli
