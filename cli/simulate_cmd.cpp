// placelab simulate --graph G --cluster C (--placement P | --random N [--seed S]) [--trace F] [--json],
// and pipelined: --placement P (--max-load | --micro-batches N). Synopsis and semantics: docs/cli.md.
#include <algorithm>
#include <chrono>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"
#include "sim/engine.h"
#include "sim/pipeline.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "sim/trace.h"

namespace placelab::cli {

namespace {

struct SimulateArgs {
  std::string graph, cluster, placement, trace, profile, priority;  // priority "": ready_time
  int64_t random = 0, micro_batches = 0;
  uint64_t seed = 1;
  bool json = false, edge_comm = false, no_measured = false, share_bandwidth = false, max_load = false;
  bool random_given = false;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

void print_result(const sim::SimResult& r, const sim::Cluster& c) {
  fmt::print("step time      {:>12}\n", human(r.step_time_s, "s"));
  if (r.busy_until_s > r.step_time_s)  // a trailing gap or link hold (Placeto reports this figure)
    fmt::print("all idle at    {:>12}  (after the last gap and link hold)\n", human(r.busy_until_s, "s"));
  fmt::print("critical path  {:>12}  (idle-network lower bound)\n", human(r.critical_path_s, "s"));
  fmt::print("bytes moved    {:>12}  in {} transfers\n", human(r.total_bytes_moved, "B"), r.num_transfers);
  fmt::print("  {:<10} {:<10} {:>12} {:>12} {:>12}  {}\n", "device", "kind", "busy", "peak mem", "capacity", "");
  for (int32_t d = 0; d < c.num_devices(); ++d)
    fmt::print("  {:<10} {:<10} {:>12} {:>12} {:>12}  {}\n", c.device(d).name, c.device(d).kind,
               human(r.device_busy_s[d], "s"), human(r.device_peak_bytes[d], "B"), human(c.device(d).memory_bytes, "B"),
               r.device_excess_bytes[d] > 0 ? "OUT OF MEMORY by " + human(r.device_excess_bytes[d], "B") : "");
  bool header = false;
  for (int32_t l = 0; l < c.num_links(); ++l) {
    if (r.link_bytes[l] <= 0) continue;
    if (!header) fmt::print("  {:<22} {:>12} {:>12}\n", "link", "busy", "bytes");
    header = true;
    fmt::print("  {:<22} {:>12} {:>12}\n", c.link(l).name, human(r.link_busy_s[l], "s"), human(r.link_bytes[l], "B"));
  }
}

void print_max_load(const sim::MaxLoadResult& r, const sim::Cluster& c) {
  fmt::print("max load       {:>12}  per sample in steady state, on {}\n", human(r.max_load_s, "s"),
             c.device(r.bottleneck_device).name);
  fmt::print("contiguous     {:>12}\n", r.contiguous ? "yes" : "no");
  fmt::print("  {:<10} {:<12} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n", "device", "kind", "load", "compute", "comm",
             "memory", "capacity", "");
  for (int32_t d = 0; d < c.num_devices(); ++d)
    fmt::print("  {:<10} {:<12} {:>12} {:>12} {:>12} {:>12} {:>12}  {}\n", c.device(d).name, c.device(d).kind,
               human(r.load_s[d], "s"), human(r.compute_s[d], "s"), human(r.comm_s[d], "s"),
               human(r.memory_bytes[d], "B"), human(c.device(d).memory_bytes, "B"),
               r.excess_bytes[d] > 0 ? "OUT OF MEMORY by " + human(r.excess_bytes[d], "B") : "");
}

void check_modes(const SimulateArgs& a) {
  if (a.random < 0 || (a.random_given && a.random == 0))
    throw Error(fmt::format("simulate: --random is {}, must be > 0", a.random));
  if (a.placement.empty() == (a.random == 0))
    throw Error("simulate: give exactly one of --placement P or --random N (random placements, with --seed S)");
  const bool pipelined = a.max_load || a.micro_batches > 0;
  if (pipelined && a.placement.empty())
    throw Error("simulate: --max-load and --micro-batches evaluate one placement: give --placement P, not --random");
  if (a.max_load && a.micro_batches > 0)
    throw Error("simulate: give one of --max-load (the analytic model) or --micro-batches N (a simulated stream)");
  if (a.micro_batches > 0 && !a.priority.empty())
    throw Error("simulate: a stream runs the earliest micro-batch's ready op first on every device (then by rank); "
                "leave out --priority with --micro-batches");
  if (a.max_load && (!a.priority.empty() || a.share_bandwidth))
    throw Error("simulate: --max-load is an analytic model with no schedule and no link contention; leave out "
                "--priority and --share-bandwidth with it");
  if (pipelined && !a.trace.empty())
    throw Error("simulate: --trace records one step; leave out --max-load and --micro-batches to trace it");
}

void run(const SimulateArgs& a) {
  check_modes(a);
  if (!a.trace.empty()) check_output("simulate", "--trace", a.trace, {a.graph, a.cluster, a.placement, a.profile});
  graphs::Graph g = load_graph(a.graph);
  sim::Cluster c = load_cluster(a.cluster);
  std::shared_ptr<const sim::CostModel> cost = sim::default_cost_model();
  if (!a.profile.empty()) cost = reading("--profile", a.profile, [&] { return sim::read_profile(a.profile, cost); });
  std::optional<sim::Priority> priority;  // unset: the cluster's
  if (!a.priority.empty()) {
    priority = sim::priority_from_name(a.priority);
    if (!priority)
      throw Error(fmt::format("simulate: --priority is \"{}\", expected ready_time, rank or fifo", a.priority));
  }
  sim::Simulator simulator(
      g, c, cost, sim::SimOptions{.priority = priority,
                                   .use_measured = !a.no_measured,
                                   .use_edge_comm = a.edge_comm,
                                   .share_bandwidth = a.share_bandwidth});

  if (!a.placement.empty()) {
    const std::vector<int32_t> device_of = read_placement_for(a.placement, simulator, "simulating");
    if (a.max_load) {
      const sim::MaxLoadResult r = sim::max_load(simulator, device_of);
      if (!a.json) return print_max_load(r, c);
      nlohmann::json doc = sim::max_load_to_json(r, c);
      doc["graph"] = g.name();
      doc["cluster"] = c.name();
      return print_json(doc);
    }
    if (a.micro_batches > 0) {
      const auto batches = static_cast<int32_t>(a.micro_batches);
      const sim::StreamResult r = sim::simulate_stream(simulator, device_of, batches);
      if (a.json) {
        nlohmann::json doc = {{"graph", g.name()},         {"cluster", c.name()},
                              {"micro_batches", batches},  {"makespan_s", r.makespan_s},
                              {"single_s", r.single_s},    {"time_per_batch_s", r.time_per_batch_s},
                              {"last", sim::result_to_json(r.last, c)}};
        return print_json(doc);
      }
      fmt::print("{} micro-batches in {}; one alone {}; steady state {} per micro-batch\n", batches,
                 human(r.makespan_s, "s"), human(r.single_s, "s"), human(r.time_per_batch_s, "s"));
      return print_result(r.last, c);
    }
    sim::TraceRecorder trace(simulator);
    sim::SimResult r = simulator.simulate(device_of, a.trace.empty() ? nullptr : &trace);
    if (!a.trace.empty()) trace.write_chrome(a.trace);
    if (a.json) {
      nlohmann::json doc = sim::result_to_json(r, c);
      doc["graph"] = g.name();
      doc["cluster"] = c.name();
      return print_json(doc);
    }
    return print_result(r, c);
  }

  // Random placements: the spread of step times and the speed of one simulation. Each is drawn as it
  // is simulated (memory stays that of one, however many), the first kept for --trace.
  std::mt19937_64 rng(a.seed);
  std::vector<int32_t> first;
  auto scratch = simulator.make_scratch();
  sim::SimResult r;
  std::vector<double> step_s, sim_s;
  int64_t ooms = 0;
  auto reported = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < a.random; ++i) {
    const std::vector<int32_t> p = sim::random_placement(simulator, rng);
    if (i == 0) first = p;
    auto t0 = std::chrono::steady_clock::now();
    simulator.simulate(p, *scratch, r);
    const auto t1 = std::chrono::steady_clock::now();
    sim_s.push_back(std::chrono::duration<double>(t1 - t0).count());
    if (t1 - reported >= std::chrono::seconds(1)) {  // long runs: a line a second
      reported = t1;
      note("simulate: {} of {} placements\n", sim_s.size(), a.random);
    }
    step_s.push_back(r.step_time_s);
    ooms += r.oom;
  }
  if (!a.trace.empty()) {
    sim::TraceRecorder trace(simulator);
    simulator.simulate(first, &trace);
    trace.write_chrome(a.trace);
  }
  const double sim_median_s = median(sim_s);
  const double ops_per_s = g.num_ops() / sim_median_s;
  if (a.json)
    return print_json({{"graph", g.name()},
                       {"cluster", c.name()},
                       {"ops", g.num_ops()},
                       {"placements", a.random},
                       {"seed", a.seed},
                       {"step_time_s_min", *std::min_element(step_s.begin(), step_s.end())},
                       {"step_time_s_median", median(step_s)},
                       {"step_time_s_max", *std::max_element(step_s.begin(), step_s.end())},
                       {"oom_placements", ooms},
                       {"sim_ms_median", sim_median_s * 1e3},
                       {"ops_per_s", ops_per_s}});
  fmt::print("{} random placements of {} ({} ops) on {} (seed {})\n", a.random, g.name(), g.num_ops(), c.name(), a.seed);
  fmt::print("step time      min {}  median {}  max {}\n", human(*std::min_element(step_s.begin(), step_s.end()), "s"),
             human(median(step_s), "s"), human(*std::max_element(step_s.begin(), step_s.end()), "s"));
  fmt::print("out of memory  {} of {}\n", ooms, a.random);
  fmt::print("simulation     {:.3f} ms median, {} ops/s\n", sim_median_s * 1e3, human(ops_per_s));
}

}  // namespace

void add_simulate_command(CLI::App& app) {
  auto args = std::make_shared<SimulateArgs>();
  CLI::App* cmd = app.add_subcommand("simulate", "Simulate one training or inference step of a placement");
  cmd->add_option("--graph", args->graph, "Graph file or zoo name (NAME[:key=value,...])")->required();
  cmd->add_option("--cluster", args->cluster, "Cluster file or preset name (placelab cluster --list)")->required();
  cmd->add_option("--placement", args->placement, "A placelab.placement file");
  cmd->add_flag("--max-load", args->max_load,
                "Pipelined: Tarnawski et al.'s max-load (time per sample in steady state) of the placement");
  cmd->add_option("--micro-batches", args->micro_batches,
                  "Pipelined: simulate a stream of N micro-batches of the placement and report the period")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000}));
  CLI::Option* random = cmd->add_option("--random", args->random, "Simulate N uniformly random placements instead");
  add_seed(cmd, args->seed, "Seed of the random placements (default 1)");
  cmd->add_option("--trace", args->trace, "Write a Chrome trace-event JSON (Perfetto) of the (first) placement");
  cmd->add_option("--profile", args->profile, "A placelab.profile table overriding the roofline model");
  cmd->add_option("--priority", args->priority, "Which ready op a free device starts: ready_time, rank or fifo (default: the cluster's, else ready_time)");
  cmd->add_flag("--share-bandwidth", args->share_bandwidth, "Links share bandwidth max-min fairly instead of FIFO");
  cmd->add_flag("--edge-comm", args->edge_comm, "Use the graph's measured edge transfer times where present");
  cmd->add_flag("--no-measured", args->no_measured, "Ignore the graph's measured op times");
  cmd->add_flag("--json", args->json, "Print the result as one JSON object");
  cmd->callback([args, random] {
    args->random_given = random->count() > 0;
    run(*args);
  });
}

}  // namespace placelab::cli
