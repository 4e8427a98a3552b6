// The optimal pipelined DP (policy `dp`) on every msr-dnn-partitioning instance, next to the reference
// implementation's time and values from the data README; writes a markdown table (default
// bench/results/dp.md; with --skip-slow, which leaves rows out, dp_skip_slow.md in the current folder so
// that it never replaces the full table). Usage: bm_dp [output.md] [--skip-slow]. Build in Release.
#include <chrono>
#include <ctime>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <tbb/info.h>

#include "graphs/error.h"
#include "graphs/msr.h"
#include "policy/placer.h"
#include "sim/pipeline.h"
#include "sim/presets.h"

using namespace placelab;

namespace {

const std::string kMsrDir = std::string(PLACELAB_SHARED_DATA) + "/msr-dnn-partitioning";

/** A README row: reference values in milliseconds and the reference DP's time in seconds (nullopt: none). */
struct Reference {
  std::string name;
  std::optional<double> optimum_ms, pipedream_ms, expert_ms, one_accelerator_ms, time_s;
};

const std::vector<Reference> kReadme = {
    {"LayerGraphs/bert24_inference", 17.7899, 17.7899, 20.084, 92.406, 0.01},
    {"LayerGraphs/bert24_training", 41.7458, 187.914, 49.4049, 217.813, 0.01},
    {"LayerGraphs/gnmt_inference", 32.9107, 33.0311, 46.2085, 182.563, 12.2},
    {"LayerGraphs/gnmt_training", 107.004, 294.905, 137.154, 520.453, 21.9},
    {"LayerGraphs/resnet50_inference", 33.7747, 39.3981, 43.9183, 201.45, 0.09},
    {"LayerGraphs/resnet50_training", 78.6318, 83.6744, 112.108, 462.381, 0.13},
    {"LayerGraphs/inceptionv3_inference", {}, {}, {}, {}, {}},
    {"LayerGraphs/inceptionv3_training", {}, {}, {}, {}, {}},
    {"OperatorGraphs/bert_l-3_inference", 27.9186, 37.4557, {}, 49.3526, 0.65},
    {"OperatorGraphs/bert_l-3_training", 65.3031, 122.987, {}, 122.987, 3.75},
    {"OperatorGraphs/resnet50_inference", 124.349, 129.155, {}, 325.132, 0.10},
    {"OperatorGraphs/resnet50_training", 255.194, {}, {}, {}, 0.24},
};

std::string cell(std::optional<double> v, const char* format = "{:.6g}") {
  return v ? fmt::format(fmt::runtime(format), *v) : std::string("-");
}

/** Relative difference as a short mark: "=" within 1e-4, else the signed difference in percent. */
std::string versus(double ours, std::optional<double> theirs) {
  if (!theirs) return "";
  const double rel = (ours - *theirs) / *theirs;
  return std::abs(rel) <= 1e-4 ? " (=)" : fmt::format(" ({:+.2f}%)", 100 * rel);
}

double ms(double s) { return s / graphs::kMsrSecondsPerUnit; }

double load_average() {
  double load[1] = {0};
  return getloadavg(load, 1) == 1 ? load[0] : -1;
}

/** The MILP (CBC, 60 s limit) on the small layer graphs, contiguous and not, next to the DP. */
std::string milp_section(bool skip) {
  if (skip) return "";
  std::string rows;
  for (const char* name : {"LayerGraphs/bert24_inference", "LayerGraphs/bert24_training"}) {
    const graphs::MsrInstance inst = graphs::read_msr(kMsrDir + "/throughput-inputs/" + name + ".json");
    const sim::Cluster cluster = sim::msr_cluster(inst);
    const sim::Simulator simulator(inst.graph, cluster);
    auto run = [&](const char* placer, nlohmann::json options) {
      policy::PlaceRequest request{.simulator = simulator, .options = std::move(options), .seed = 0, .progress = {}};
      const auto start = std::chrono::steady_clock::now();
      policy::PlaceResult r = policy::make_placer(placer)->place(request);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      return std::make_pair(std::move(r), seconds);
    };
    const double dp = ms(run("dp", nlohmann::json::object()).first.info.at("objective").get<double>());
    for (bool contiguous : {true, false}) {
      const auto [r, seconds] = run("milp", {{"contiguous", contiguous}, {"time_limit_s", 60}});
      rows += fmt::format("| {} | {} | {:.6g} | {:.6g} | {:.6g} | {:.2e} | {} | {:.1f} s |\n", name,
                          contiguous ? "contiguous" : "any", dp, ms(r.info.at("objective").get<double>()),
                          ms(r.info.at("bound").get<double>()), r.info.at("gap").get<double>(),
                          r.info.at("status").get<std::string>(), seconds);
      std::fprintf(stderr, "milp %s %s: %.1f s\n", name, contiguous ? "contiguous" : "any", seconds);
    }
  }
  return "\n## The MILP (policy `milp`, CBC, 60 s limit) next to the DP\n\n"
         "| instance | variant | DP optimum | MILP objective | MILP bound | gap | status | time |\n"
         "| --- | --- | --- | --- | --- | --- | --- | --- |\n" + rows;
}

// "2026-11-22 00:10" for the results header.
std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", std::gmtime(&now));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::string out;
  bool skip_slow = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--skip-slow") skip_slow = true;
    else out = argv[i];
  }
  if (out.empty()) out = skip_slow ? "dp_skip_slow.md" : "bench/results/dp.md";
  std::string command = "bm_dp";
  for (int i = 1; i < argc; ++i) command += std::string(" ") + argv[i];
  try {
    std::string rows;
    for (const Reference& ref : kReadme) {
      if (skip_slow && !ref.time_s) continue;
      const graphs::MsrInstance inst = graphs::read_msr(kMsrDir + "/throughput-inputs/" + ref.name + ".json");
      const sim::Cluster cluster = sim::msr_cluster(inst);
      const sim::Simulator simulator(inst.graph, cluster);
      auto run = [&](const char* placer) {
        policy::PlaceRequest request{.simulator = simulator, .options = nlohmann::json::object(), .seed = 0,
                                     .progress = [](std::string_view line) {
                                       std::fprintf(stderr, "  %.*s\n", static_cast<int>(line.size()), line.data());
                                     }};
        const auto start = std::chrono::steady_clock::now();
        policy::PlaceResult r = policy::make_placer(placer)->place(request);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        return std::make_pair(std::move(r), seconds);
      };
      const auto [dp, dp_s] = run("dp");
      const double optimum = ms(sim::max_load(simulator, dp.device_of).max_load_s);
      const auto [pd, pd_s] = run("pipedream");
      const double pipedream = ms(sim::max_load(simulator, pd.device_of).max_load_s);
      std::vector<int32_t> one(inst.graph.num_ops(), 0);
      const double one_acc = ms(sim::max_load(simulator, one).max_load_s);
      std::optional<double> expert;
      const std::string base = std::filesystem::path(ref.name).filename().string();
      const std::string expert_file = kMsrDir + "/human-experts/" + base + "_expert.json";
      if (ref.name.starts_with("LayerGraphs/") && std::filesystem::exists(expert_file)) {
        const graphs::MsrSplit split = graphs::read_msr_split(expert_file, inst);
        expert = ms(sim::max_load(simulator, graphs::split_placement(split, inst)).max_load_s);
      }
      const std::string ratio = ref.time_s ? fmt::format("{:.0f}x", *ref.time_s / dp_s) : "reference unfinished";
      rows += fmt::format("| {} | {} | {} | {:.6g}{} | {:.6g}{} | {}{} | {:.6g}{} | {:.3f} s | {} | {} | {:.3f} s |\n",
                          ref.name, dp.info.at("groups").get<int>(), dp.info.at("ideals").get<int64_t>(), optimum,
                          versus(optimum, ref.optimum_ms), pipedream, versus(pipedream, ref.pipedream_ms),
                          cell(expert), expert ? versus(*expert, ref.expert_ms) : "", one_acc,
                          versus(one_acc, ref.one_accelerator_ms), dp_s, cell(ref.time_s, "{} s"), ratio, pd_s);
      std::fprintf(stderr, "%s: %.6g ms in %.3f s (%s)\n", ref.name.c_str(), optimum, dp_s, dp.info.dump().c_str());
    }
    std::string md = fmt::format(
        "# The optimal pipelined DP on the msr-dnn-partitioning inputs\n\n"
        "Written by `bench/bm_dp.cpp` (Release build, {} hardware threads, oneTBB) on {} UTC with\n"
        "`{}`. Values are max-load in ms,\n"
        "evaluated by `sim::max_load` on the returned split; in brackets, the difference to the data README's\n"
        "reference value ((=): within 1e-4 relative). \"groups\": forward groups after contracting colour\n"
        "classes; \"ideals\": ideals of the group DAG. The reference DP time is the README's (g++ -O2, 2 cores).\n\n"
        "| instance | groups | ideals | optimum (DP) | PipeDream | expert | one accelerator | DP time | reference DP "
        "time | speed-up | PipeDream time |\n"
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n{}\n"
        "Times are wall-clock on a shared machine (1-minute load average {:.1f} when the run ended), so they\n"
        "are noisy; the Inception-v3 rows have no reference (the README's DP did not finish in 25 minutes).\n"
        "PipeDream differs from the README on bert24_inference and gnmt_inference (the reference drops the\n"
        "edges out of hand-picked node ids of those models before its biconnected-component step) and on\n"
        "bert_l-3_inference (its linear order comes from unordered_map iteration); see docs/placers.md.\n",
        std::thread::hardware_concurrency(), utc_now(), command, rows, load_average());
    md += milp_section(skip_slow);
    std::ofstream(out) << md;
    std::fprintf(stderr, "wrote %s\n", out.c_str());
  } catch (const Error& e) {
    std::fprintf(stderr, "bm_dp: %s\n", e.what());
    return 1;
  }
  return 0;
}
