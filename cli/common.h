// Shared plumbing of the placelab verbs: resolving graph arguments, printing results for people
// (tables on stdout) and for scripts (one JSON object with --json).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "graphs/error.h"
#include "graphs/graph.h"
#include "sim/engine.h"

namespace placelab::cli {

/**
 * A graph argument: a placelab.graph file, or a zoo model with optional parameters,
 * `NAME[:key=value,...]` (e.g. `gnmt:layers=8,steps=20`); the key `training=1` expands it to a
 * training graph.
 */
graphs::Graph load_graph(const std::string& spec, std::string_view option = "--graph");
/** A cluster argument: a placelab.cluster (or msr instance) file, or a preset name; errors about the file name `option`. */
sim::Cluster load_cluster(const std::string& spec, std::string_view option = "--cluster");

/**
 * The placement file `path` checked against `simulator` (errors name the file); a warning on stderr when
 * it was made for another graph or cluster, saying what `verb` ("simulating", "replaying") uses instead.
 */
std::vector<int32_t> read_placement_for(const std::string& path, const sim::Simulator& simulator, std::string_view verb);

/**
 * Writes a note (progress, a warning, an error) on stderr. A failed write, to a full disk or a closed
 * stream, is ignored: losing a note must not stop the work, nor an error report end in an abort.
 */
template <class... Args>
void note(fmt::format_string<Args...> format, Args&&... args) {
  std::fputs(fmt::format(format, std::forward<Args>(args)...).c_str(), stderr);
}

/**
 * Checks, before the work, that `verb` can write the file `path` given as `option`: a name, in a folder
 * that exists, not a folder itself; and that it is none of `inputs` (files or zoo/preset names), which
 * writing it would destroy. Outputs are written last, so a run that fails leaves the old files intact.
 */
void check_output(std::string_view verb, std::string_view option, const std::string& path,
                  std::initializer_list<std::string_view> inputs = {});
/** Refuses two outputs of one run that name the same file (the second would replace the first). */
void check_distinct_outputs(std::string_view verb, std::string_view option_a, const std::string& a,
                            std::string_view option_b, const std::string& b);

/** Prints `doc` as one JSON object on stdout. */
void print_json(const nlohmann::json& doc);

/** Adds `--seed` to `cmd`: a decimal integer in 0..2^64-1 (the parser alone would wrap -1 and saturate). */
CLI::Option* add_seed(CLI::App* cmd, uint64_t& seed, const std::string& help);

/**
 * For a usage error: when `args` (argv after the program) hold an unknown verb, or an option the verb does not
 * take, a line naming it and the nearest valid name ("placelab place: unknown option --clusters; did you
 * mean --cluster?"); "" otherwise.
 */
std::string unknown_argument_hint(const CLI::App& app, const std::vector<std::string>& args);

/**
 * Runs `read` (which reads the file `path` given as `option`), prefixing an error about that file with the
 * option: "--placement missing.json: no such file".
 */
template <class Read>
auto reading(std::string_view option, const std::string& path, Read&& read) -> decltype(read()) {
  try {
    return read();
  } catch (const Error& e) {
    const std::string_view message = e.what();
    if (!message.starts_with(path + ":")) throw;
    throw Error(fmt::format("{} {}", option, message));
  }
}

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
