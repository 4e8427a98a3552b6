// placelab place --graph G --cluster C --placer NAME [--options JSON] [--seed S] [--out F] [--json]
// With no --placer it runs the pre-trained GDP policy and shows it beside HEFT, METIS and the human expert.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/placing.h"
#include "graphs/error.h"
#include "graphs/json_util.h"
#include "policy/memory_verdict.h"
#include "policy/rl/comm.h"
#include "sim/placement.h"
#include "sim/presets.h"

namespace placelab::cli {

namespace {

// What the default run (no --placer) is shown beside.
const std::vector<std::string> kBaselines = {"heft", "metis", "human_expert"};

struct PlaceArgs {
  // The defaults make `placelab place` alone show a real run: the pre-trained GDP policy placing a
  // training graph on a 4-GPU server, beside the classic baselines. Empty placer = that default.
  std::string graph = "inception_v3:training=1", cluster = "v100-nvlink-4", placer, options = "{}", out;
  uint64_t seed = 1;
  bool json = false;
};

void print_run(const PlacerRun& r, const sim::Cluster& c) {
  fmt::print("placer         {:>12}\n", r.placer);
  fmt::print("step time      {:>12}\n", human(r.sim.step_time_s, "s"));
  fmt::print("bytes moved    {:>12}  in {} transfers\n", human(r.sim.total_bytes_moved, "B"), r.sim.num_transfers);
  fmt::print("out of memory  {:>12}\n", r.sim.oom ? "YES" : "no");
  fmt::print("placement time {:>12}\n", human(r.placement_time_s, "s"));
  fmt::print("  {:<10} {:<10} {:>8} {:>12} {:>12} {:>12}\n", "device", "kind", "ops", "busy", "peak mem", "capacity");
  for (int32_t d = 0; d < c.num_devices(); ++d)
    fmt::print("  {:<10} {:<10} {:>8} {:>12} {:>12} {:>12}{}\n", c.device(d).name, c.device(d).kind,
               std::count(r.result.device_of.begin(), r.result.device_of.end(), d), human(r.sim.device_busy_s[d], "s"),
               human(r.sim.device_peak_bytes[d], "B"), human(c.device(d).memory_bytes, "B"),
               r.sim.device_excess_bytes[d] > 0 ? "  OUT OF MEMORY" : "");
  if (!r.result.info.empty()) fmt::print("info           {}\n", r.result.info.dump());
}

void run(const PlaceArgs& a) {
  nlohmann::json options = parse_options(a.options);
  const bool with_baselines = a.placer.empty();
  const std::string placer = with_baselines ? "gdp" : a.placer;
  policy::make_placer(placer);  // unknown names fail before any work
  if (!a.out.empty()) check_output("place", "--out", a.out, {a.graph, a.cluster});
  graphs::Graph g = load_graph(a.graph);
  sim::Cluster c = load_cluster(a.cluster);
  sim::Simulator simulator(g, c);
  PlacerRun r = run_placer(simulator, placer, options, a.seed);
  // Under mpirun a learned placer trains data-parallel over the ranks (rl::train); rank 0 answers.
  if (rl::comm::rank() != 0) return;
  std::vector<PlacerRun> baselines;
  if (with_baselines)
    for (const auto& name : kBaselines) baselines.push_back(run_placer(simulator, name, nlohmann::json::object(), a.seed));
  if (!a.out.empty()) {
    sim::write_placement({g.name(), c.name(), r.result.device_of}, a.out);
    note("wrote {}\n", a.out);
  }
  if (a.json) {
    nlohmann::json doc = run_to_json(r, c);
    doc["graph"] = g.name();
    doc["cluster"] = c.name();
    doc["seed"] = a.seed;
    doc["simulation"] = sim::result_to_json(r.sim, c);
    if (with_baselines) {
      doc["baselines"] = nlohmann::json::array();
      for (const auto& b : baselines) doc["baselines"].push_back(run_to_json(b, c));
    }
    return print_json(doc);
  }
  fmt::print("graph          {:>12}  ({} ops)\ncluster        {:>12}\n", g.name(), g.num_ops(), c.name());
  print_run(r, c);
  if (with_baselines) {
    baselines.insert(baselines.begin(), r);
    fmt::print("\nbeside the classic baselines (placelab compare runs more):\n");
    print_runs_table(baselines);
  }
}

}  // namespace

nlohmann::json parse_options(const std::string& text) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("--options is not valid JSON ({}): give an object, e.g. --options '{{\"steps\": 100}}'",
                            e.what()));
  }
  if (!doc.is_object()) {
    std::string shown = doc.dump();
    if (shown.size() > 60) shown = shown.substr(0, 57) + "...";  // the message stays one readable line
    throw Error(fmt::format("--options is {}, expected a JSON object, e.g. --options '{{\"steps\": 100}}'", shown));
  }
  return io::parse_json(text, "--options");  // the syntax is fine: this rejects a key given twice
}

PlacerRun run_placer(const sim::Simulator& simulator, const std::string& placer, const nlohmann::json& options,
                     uint64_t seed) {
  std::unique_ptr<policy::Placer> p = policy::make_placer(placer);
  policy::PlaceRequest request{simulator, options, seed,
                               [&placer](std::string_view status) { note("{}: {}\n", placer, status); }};
  const auto t0 = std::chrono::steady_clock::now();
  PlacerRun r{placer, p->place(request), {}, 0};
  r.placement_time_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  try {
    simulator.check_placement(r.result.device_of);
  } catch (const Error& e) {
    throw Error(fmt::format("placer {} returned an invalid placement: {}", placer, e.what()));
  }
  r.sim = simulator.simulate(r.result.device_of);
  policy::add_memory_verdict(r.result.info, r.sim, simulator.cluster());
  return r;
}

void print_runs_table(std::span<const PlacerRun> runs, double bound_s) {
  double slowest = 0;
  std::string slowest_name;
  for (const auto& r : runs)
    if (r.sim.step_time_s > slowest) slowest = r.sim.step_time_s, slowest_name = r.placer;
  // OOM: "no", or the largest excess of a device over its capacity.
  fmt::print("{:<16} {:>12} {:>8} {:>12} {:>11} {:>12} {:>12}{}\n", "placer", "step time", "speed-up", "peak mem", "OOM",
             "bytes moved", "place time", bound_s > 0 ? fmt::format(" {:>8}", "x bound") : "");
  for (const auto& r : runs)
    fmt::print("{:<16} {:>12} {:>7.2f}x {:>12} {:>11} {:>12} {:>12}{}\n", r.placer, human(r.sim.step_time_s, "s"),
               r.sim.step_time_s > 0 ? slowest / r.sim.step_time_s : 1.0,
               human(*std::max_element(r.sim.device_peak_bytes.begin(), r.sim.device_peak_bytes.end()), "B"),
               r.sim.oom ? "+" + human(*std::max_element(r.sim.device_excess_bytes.begin(),
                                                         r.sim.device_excess_bytes.end()), "B")
                         : std::string("no"),
               human(r.sim.total_bytes_moved, "B"), human(r.placement_time_s, "s"),
               bound_s <= 0 ? "" : r.sim.oom ? fmt::format(" {:>8}", "-")
                                             : fmt::format(" {:>7.3f}x", r.sim.step_time_s / bound_s));
  if (!slowest_name.empty())
    fmt::print("speed-up: against the slowest row, {} ({})\n", slowest_name, human(slowest, "s"));
}

nlohmann::json run_to_json(const PlacerRun& r, const sim::Cluster& c) {
  nlohmann::json peaks = nlohmann::json::object();
  for (int32_t d = 0; d < c.num_devices(); ++d) peaks[c.device(d).name] = r.sim.device_peak_bytes[d];
  return {{"placer", r.placer},
          {"step_time_s", r.sim.step_time_s},
          {"peak_memory_bytes", *std::max_element(r.sim.device_peak_bytes.begin(), r.sim.device_peak_bytes.end())},
          {"device_peak_bytes", peaks},
          {"oom", r.sim.oom},
          {"bytes_moved", r.sim.total_bytes_moved},
          {"placement_time_s", r.placement_time_s},
          {"info", r.result.info}};
}

void add_place_command(CLI::App& app) {
  auto args = std::make_shared<PlaceArgs>();
  CLI::App* cmd = app.add_subcommand("place", "Place a graph on a cluster with a named placer and simulate the result");
  cmd->add_option("--graph", args->graph, "Graph file or zoo name (NAME[:key=value,...]); default inception_v3:training=1");
  cmd->add_option("--cluster", args->cluster, "Cluster file or preset name; default v100-nvlink-4");
  cmd->add_option("--placer", args->placer,
                  "Placer name (placelab compare --list shows them); default: the pre-trained gdp policy, shown "
                  "beside heft, metis and human_expert");
  cmd->add_option("--options", args->options, "Placer options as a JSON object, e.g. '{\"steps\": 100}'");
  add_seed(cmd, args->seed, "Seed of the placer's random choices (default 1)");
  cmd->add_option("--out", args->out, "Write the placement as a placelab.placement file");
  cmd->add_flag("--json", args->json, "Print the result as one JSON object");
  cmd->callback([args] {
    rl::comm::init();
    try {
      run(*args);
    } catch (const std::exception& e) {
      if (rl::comm::size() > 1) rl::comm::fail(e.what());  // other ranks may wait for this one: end them all
      throw;
    }
  });
}

}  // namespace placelab::cli
