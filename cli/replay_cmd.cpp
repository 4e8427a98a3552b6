// placelab replay --graph G --cluster C --placement P [--backend cpu|cuda] [--json]: simulates the
// placement, exports the schedule as a replay plan, runs it for real and prints predicted versus
// measured step time. `--plan F` replays a saved plan instead; `--plan-out F` saves the plan. Several
// --placement files run in turn in one process.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"
#include "graphs/json_util.h"
#include "sim/engine.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "sim/replay/executor.h"
#include "sim/replay/plan.h"

namespace placelab::cli {

namespace {

struct ReplayArgs {
  std::string graph, cluster, plan, plan_out, profile, trace, backend = "cpu";
  std::string gpu_kernels = "library", gpu_math = "tf32";
  std::vector<std::string> placements;
  sim::replay::ReplayOptions options;
  bool no_pin = false, json = false;
};

sim::replay::ReplayPlan make_plan(const ReplayArgs& a, const std::string& placement) {
  if (!a.plan.empty()) {
    if (!a.graph.empty() || !a.placements.empty() || !a.cluster.empty() || !a.profile.empty())
      throw Error("replay: a plan holds its graph, cluster and times: give either --plan F or --graph G --cluster C "
                  "--placement P [--profile F], not both");
    return reading("--plan", a.plan, [&] { return sim::replay::read_plan(a.plan); });
  }
  if (a.graph.empty() || a.cluster.empty() || placement.empty())
    throw Error("replay: give --graph G --cluster C --placement P (or --plan F, a saved replay plan)");
  graphs::Graph g = load_graph(a.graph);
  sim::Cluster c = load_cluster(a.cluster);
  std::shared_ptr<const sim::CostModel> cost = sim::default_cost_model();
  if (!a.profile.empty()) cost = reading("--profile", a.profile, [&] { return sim::read_profile(a.profile, cost); });
  sim::Simulator simulator(g, c, cost);
  return sim::replay::export_plan(simulator, read_placement_for(placement, simulator, "replaying"));
}

void print_text(const sim::replay::ReplayPlan& plan, const sim::replay::ReplayResult& r,
                const sim::replay::ReplayOptions& options);

void run(const ReplayArgs& a) {
  sim::replay::check_backend(a.backend);
  sim::replay::ReplayOptions options = a.options;
  options.pin_threads = !a.no_pin;
  options.gpu_kernels = sim::replay::parse_gpu_kernels(a.gpu_kernels, "replay --gpu-kernels");
  options.gpu_math = sim::replay::parse_gpu_math(a.gpu_math, "replay --gpu-math");
  auto last = std::chrono::steady_clock::now();
  options.progress = [&last](std::string_view status) {  // at most a line a second: quick replays print none
    const auto now = std::chrono::steady_clock::now();
    if (now - last < std::chrono::seconds(1)) return;
    last = now;
    note("replay: {}\n", status);
  };
  sim::replay::check_options(options);
  for (const auto& [option, path] : {std::pair{"--trace", &a.trace}, std::pair{"--plan-out", &a.plan_out}})
    if (!path->empty()) {
      if (a.placements.size() > 1)
        throw Error(fmt::format("replay: {} writes one run: give one --placement with it", option));
      check_output("replay", option, *path, {a.graph, a.cluster, a.placements.empty() ? "" : a.placements[0], a.plan, a.profile});
    }
  check_distinct_outputs("replay", "--trace", a.trace, "--plan-out", a.plan_out);
  // Several placements run in turn in one process (a GPU's libraries load once); --json: an object per line.
  if (a.placements.size() > 1) {
    for (const std::string& placement : a.placements) {
      const sim::replay::ReplayPlan plan = make_plan(a, placement);
      const sim::replay::ReplayResult r = sim::replay::run_replay(plan, a.backend, options);
      if (!a.json) {
        fmt::print("{}\n", placement);
        print_text(plan, r, options);
        continue;
      }
      nlohmann::json doc = sim::replay::replay_result_to_json(plan, r);
      doc["placement"] = placement, doc["warmup"] = options.warmup, doc["repeats"] = options.repeats;
      fmt::print("{}\n", doc.dump());
      std::fflush(stdout);
    }
    return;
  }
  const sim::replay::ReplayPlan plan = make_plan(a, a.placements.empty() ? "" : a.placements[0]);
  const sim::replay::ReplayResult r = sim::replay::run_replay(plan, a.backend, options);
  if (!a.plan_out.empty()) sim::replay::write_plan(plan, a.plan_out);  // after the run: a failed one leaves the old file
  if (!a.trace.empty()) io::write_json_atomic(a.trace, sim::replay::replay_trace_json(plan, r), -1);
  if (a.json) {
    nlohmann::json doc = sim::replay::replay_result_to_json(plan, r);
    doc["warmup"] = options.warmup;
    doc["repeats"] = options.repeats;
    return print_json(doc);
  }
  print_text(plan, r, options);
}

void print_text(const sim::replay::ReplayPlan& plan, const sim::replay::ReplayResult& r,
                const sim::replay::ReplayOptions& options) {
  fmt::print("replay of {} on {}: {} backend, {} ops, {} transfers, median of {} runs after {} warm-up\n", plan.graph,
             plan.cluster, r.backend, plan.ops.size(), plan.transfers.size(), options.repeats, options.warmup);
  fmt::print("predicted step {:>12}\n", human(plan.predicted_step_s, "s"));
  fmt::print("measured step  {:>12}  (min {}, max {})\n", human(r.step_time_s, "s"),
             human(*std::min_element(r.step_times_s.begin(), r.step_times_s.end()), "s"),
             human(*std::max_element(r.step_times_s.begin(), r.step_times_s.end()), "s"));
  if (plan.predicted_step_s > 0)
    fmt::print("error          {:>+11.1f}%  (measured / predicted - 1)\n", 100 * (r.step_time_s / plan.predicted_step_s - 1));
  if (!r.gpu_kernels.empty())
    fmt::print("GPU kernels    {} ({}): {} ops on cuBLASLt/cuDNN; {}\n", r.gpu_kernels, r.gpu_math, r.library_ops, r.gpu_versions);
  fmt::print("  {:<10} {:>6} {:>12} {:>12}\n", "device", "ops", "busy", "predicted");
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    double predicted = 0;
    for (int32_t i : plan.devices[d].ops) predicted += plan.ops[i].predicted_end_s - plan.ops[i].predicted_start_s;
    fmt::print("  {:<10} {:>6} {:>12} {:>12}\n", plan.devices[d].name, plan.devices[d].ops.size(),
               human(r.device_busy_s[d], "s"), human(predicted, "s"));
  }
}

}  // namespace

void add_replay_command(CLI::App& app) {
  auto args = std::make_shared<ReplayArgs>();
  CLI::App* cmd = app.add_subcommand("replay", "Run a placement's simulated schedule for real and compare");
  cmd->add_option("--graph", args->graph, "Graph file or zoo name (NAME[:key=value,...])");
  cmd->add_option("--cluster", args->cluster, "Cluster file (e.g. from placelab calibrate) or preset name");
  cmd->add_option("--placement", args->placements,
                  "A placelab.placement file (several: each replayed in turn in one process; --json then prints an "
                  "object per line, with its \"placement\")");
  cmd->add_option("--plan", args->plan, "Replay a saved placelab.replay plan instead");
  cmd->add_option("--plan-out", args->plan_out, "Write the replay plan (placelab.replay) to this file");
  cmd->add_option("--trace", args->trace, "Write a Chrome trace (Perfetto) of the measured run beside the prediction");
  cmd->add_option("--profile", args->profile, "A placelab.profile table overriding the roofline model");
  cmd->add_option("--backend", args->backend, "cpu (threads per device) or cuda (GPUs); default cpu");
  cmd->add_option("--repeats", args->options.repeats, "Measured runs; the step time is their median (default 10)");
  cmd->add_option("--warmup", args->options.warmup, "Runs before measuring (default 2)");
  cmd->add_option("--threads-per-device", args->options.threads_per_device, "CPU backend: threads per device (default 1)");
  cmd->add_flag("--no-pin", args->no_pin, "CPU backend: do not pin device threads to cores");
  cmd->add_flag("--copy-threads", args->options.copy_threads, "CPU backend: a copy thread per device pair (else the producer copies)");
  cmd->add_option("--gpu-kernels", args->gpu_kernels,
                  "CUDA backend: library (products on cuBLASLt, convolutions on cuDNN; default) or own (the project's GEMM kernel)");
  cmd->add_option("--gpu-math", args->gpu_math, "CUDA backend: the libraries' arithmetic, tf32 (tensor cores; default) or fp32");
  cmd->add_flag("--share-gpus", args->options.share_gpus,
                "CUDA backend: GPU devices beyond the GPUs here run as further streams of them (round-robin)");
  cmd->add_flag("--json", args->json, "Print the result as one JSON object");
  cmd->callback([args] { run(*args); });
}

}  // namespace placelab::cli
