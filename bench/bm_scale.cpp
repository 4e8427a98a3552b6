// The engine's cost per op as graphs grow (issue 51, 50k to 1M ops): full simulations of seeded random
// placements of one zoo graph, each beside bench::TopoSweep (schedule_anchors.h) over the same placement
// in the same run, so the engine's time is read as a multiple of a bare topological sweep, which does
// nothing but visit each op and edge once. The sweep is short (under a millisecond at 50k ops), so a
// preemption on a shared core can multiply one timing: each placement is swept --sweeps times and the
// fastest kept, and the ratio is given from the medians and from the minima. Prints one JSON object: ops,
// edges, times to build the graph and the simulator, each placement's engine and sweep times, medians,
// minima and ratios, simulations per second, and the process's peak resident memory. bench/llm_scale.py
// runs it once per graph size.
//   build/release/bench/bm_scale --graph 'llama:training=1,layers=24,micro_batches=64,batch=64'
//       [--cluster h100-nodes-8x8] [--sims 5] [--sweeps 10] [--seed 1]
#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "schedule_anchors.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"

namespace {

using namespace placelab;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

/** A zoo graph from NAME[:key=value,...] (training=1 expands it to the training step), as --graph takes it. */
graphs::Graph make_graph(const std::string& spec) {
  const size_t colon = spec.find(':');
  graphs::zoo::Params params;
  bool training = false;
  if (colon != std::string::npos) {
    size_t start = colon + 1;
    while (start < spec.size()) {
      const size_t comma = std::min(spec.find(',', start), spec.size());
      const std::string item = spec.substr(start, comma - start);
      const size_t eq = item.find('=');
      if (eq == std::string::npos) throw Error("bm_scale: --graph items are key=value, e.g. llama:training=1,layers=8");
      const double value = std::stod(item.substr(eq + 1));
      if (item.substr(0, eq) == "training") training = value != 0;
      else params[item.substr(0, eq)] = value;
      start = comma + 1;
    }
  }
  graphs::Graph g = graphs::zoo::make_model(spec.substr(0, colon), params);
  return training ? graphs::expand_training(g) : g;
}

/** Peak resident memory of this program: /proc/self/status VmHWM (getrusage's ru_maxrss survives exec, so
 * under a large parent such as Python it reports the parent's peak). */
double peak_rss_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.starts_with("VmHWM:")) return std::stod(line.substr(6)) * 1024.0;  // in kB
  return std::numeric_limits<double>::quiet_NaN();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("The engine's cost per op beside a topological sweep of the same graph, and peak memory");
  std::string graph_spec, cluster_spec = "h100-nodes-8x8";
  int sims = 5, sweeps = 10;
  uint64_t seed = 1;
  app.add_option("--graph", graph_spec, "Zoo graph NAME[:key=value,...], e.g. llama:training=1,layers=24")->required();
  app.add_option("--cluster", cluster_spec, "Cluster preset or file (default h100-nodes-8x8)");
  app.add_option("--sims", sims, "Random placements, each simulated once and swept once (default 5)")->check(CLI::Range(1, 1000));
  app.add_option("--sweeps", sweeps, "Sweeps of each placement, the fastest kept (default 10)")->check(CLI::Range(1, 1000));
  app.add_option("--seed", seed, "Seed of the random placements (default 1)");
  CLI11_PARSE(app, argc, argv);
  try {
    auto t0 = Clock::now();
    const graphs::Graph g = make_graph(graph_spec);
    const double build_graph_s = seconds_since(t0);
    const double rss_graph_bytes = peak_rss_bytes();
    const sim::Cluster c = sim::load_cluster(cluster_spec);
    t0 = Clock::now();
    const sim::Simulator simulator(g, c);
    const double build_simulator_s = seconds_since(t0);
    bench::TopoSweep sweep(simulator);
    auto scratch = simulator.make_scratch();
    sim::SimResult result;
    std::mt19937_64 rng(seed);
    std::vector<double> engine_s, sweep_s;
    double check = 0;
    for (int i = 0; i < sims; ++i) {  // interleaved, so that a change of machine load hits both alike
      const std::vector<int32_t> placement = sim::random_placement(simulator, rng);
      t0 = Clock::now();
      simulator.simulate(placement, *scratch, result);
      engine_s.push_back(seconds_since(t0));
      double fastest = std::numeric_limits<double>::infinity();
      for (int k = 0; k < sweeps; ++k) {
        t0 = Clock::now();
        check += sweep.run(placement.data());
        fastest = std::min(fastest, seconds_since(t0));
      }
      sweep_s.push_back(fastest);
    }
    const double engine = median(engine_s), floor = median(sweep_s);
    const double engine_min = *std::min_element(engine_s.begin(), engine_s.end());
    const double floor_min = *std::min_element(sweep_s.begin(), sweep_s.end());
    nlohmann::json out = {{"graph", graph_spec},
                          {"name", g.name()},
                          {"cluster", c.name()},
                          {"devices", c.num_devices()},
                          {"ops", g.num_ops()},
                          {"edges", g.num_edges()},
                          {"build_graph_s", build_graph_s},
                          {"build_simulator_s", build_simulator_s},
                          {"sims", sims},
                          {"sweeps", sweeps},
                          {"engine_s", engine_s},
                          {"sweep_s", sweep_s},
                          {"engine_s_median", engine},
                          {"sweep_s_median", floor},
                          {"engine_ns_per_op", engine / g.num_ops() * 1e9},
                          {"sweep_ns_per_op", floor / g.num_ops() * 1e9},
                          {"engine_over_sweep", engine / floor},
                          {"engine_s_min", engine_min},
                          {"sweep_s_min", floor_min},
                          {"engine_over_sweep_min", engine_min / floor_min},
                          {"sims_per_s", 1.0 / engine},
                          {"last_step_time_s", result.step_time_s},
                          {"sweep_makespans_sum_s", check},
                          {"rss_after_graph_bytes", rss_graph_bytes},
                          {"peak_rss_bytes", peak_rss_bytes()}};
    std::cout << out.dump() << std::endl;
  } catch (const std::exception& e) {
    std::cerr << "bm_scale: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
