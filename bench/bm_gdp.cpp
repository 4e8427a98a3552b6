// GDP's speed and quality figures for bench/results/learned.md:
//  1. placement of the 8-layer GNMT training graph (over 50k ops) on 8 V100s by the pre-trained policy:
//     time to build the features (learned::Problem) and to place (one encoder pass, the greedy
//     schedule-aware decode, and none or 16 sampled decodes simulated to keep the best), median of a few runs;
//  2. on the embedded default (Inception-v3 training on v100-nvlink-4), and on ResNet-50 and BERT
//     training graphs that the pre-training suite does not have, the pre-trained policy zero-shot and
//     fine-tuned for a few steps against HEFT, METIS and the human expert.
// Build in Release; prints markdown on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/gdp.h"
#include "policy/placer.h"
#include "sim/presets.h"

namespace {

using namespace placelab;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The embedded policy, placing with its greedy decode and `samples` sampled decodes.
std::unique_ptr<rl::Learner> pretrained_learner(int64_t samples) {
  const nlohmann::json& checkpoint = learned::pretrained_gdp_checkpoint();
  nlohmann::json options = checkpoint.at("options");
  options["place_samples"] = samples;
  auto learner = learned::make_gdp_learner(options, 0);
  learner->load_state(checkpoint.at("learner"));
  return learner;
}

void placement_speed(int64_t layers, const std::string& cluster_name, int repeats, int64_t samples) {
  auto graph = std::make_shared<const graphs::Graph>(
      graphs::expand_training(graphs::zoo::make_model("gnmt", {{"layers", static_cast<double>(layers)}})));
  auto cluster = std::make_shared<const sim::Cluster>(sim::make_preset(cluster_name));
  const rl::Task task = rl::make_task("gnmt", graph, cluster);
  auto learner = pretrained_learner(samples);
  std::vector<double> problem_s, place_s;
  std::vector<int32_t> placement;
  for (int r = 0; r < repeats; ++r) {
    auto start = Clock::now();
    const learned::Problem problem(*task.simulator);
    problem_s.push_back(seconds_since(start));
    start = Clock::now();
    placement = learner->place(task);
    place_s.push_back(seconds_since(start));
  }
  const sim::SimResult result = task.simulator->simulate(placement);
  std::printf("| gnmt:layers=%lld,training=1 on %s | %d | %d | %lld | %.3f | %.3f | %.3f | %.4g |\n",
              static_cast<long long>(layers), cluster_name.c_str(), graph->num_ops(), task.problem->num_units(),
              static_cast<long long>(samples), median(problem_s), median(place_s), median(problem_s) + median(place_s),
              result.step_time_s * 1e3);
}

void quality(const std::string& model, const std::string& cluster_name, int64_t finetune_steps) {
  const graphs::Graph graph = graphs::expand_training(graphs::zoo::make_model(model));
  const sim::Cluster cluster = sim::make_preset(cluster_name);
  const sim::Simulator simulator(graph, cluster);
  struct Row {
    std::string placer;
    nlohmann::json options;
  };
  const std::vector<Row> rows = {{"human_expert", nlohmann::json::object()},
                                 {"metis", nlohmann::json::object()},
                                 {"heft", nlohmann::json::object()},
                                 {"gdp", {{"steps", 0}}},
                                 {"gdp", {{"steps", finetune_steps}}}};
  for (const Row& row : rows) {
    const auto start = Clock::now();
    const auto placer = row.placer == "gdp" ? learned::make_learned_placer("gdp") : policy::make_placer(row.placer);
    const policy::PlaceResult result = placer->place({simulator, row.options, 1, {}});
    const double wall_s = seconds_since(start);
    const sim::SimResult sim = simulator.simulate(result.device_of);
    std::string label = row.placer;
    if (row.placer == "gdp") {
      const int64_t steps = row.options.at("steps").get<int64_t>();
      label = steps == 0 ? "gdp (pre-trained, zero-shot)" : fmt::format("gdp (pre-trained + {} steps)", steps);
    }
    std::printf("| %s | %.4g | %s | %.2f |\n", label.c_str(), sim.step_time_s * 1e3, sim.oom ? "yes" : "no", wall_s);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"GDP placement speed on GNMT and quality on the embedded default"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // wrappers pass defaults first
  int64_t layers = 8, finetune_steps = 100;
  int repeats = 5;
  std::string speed_cluster = "v100-nvlink-8", quality_cluster = "v100-nvlink-4";
  app.add_option("--layers", layers, "GNMT layers of the speed case (default 8)");
  app.add_option("--repeats", repeats, "Runs of the speed case; the median is reported (default 5)");
  app.add_option("--finetune-steps", finetune_steps, "Fine-tuning steps of the quality case (default 100)");
  CLI11_PARSE(app, argc, argv);
  // Freed step buffers stay in the heap (glibc thresholds set when placelab's autodiff loads; a forward pass
  // over 26k units allocates and frees MB-sized blocks per op). docs/autodiff.md, "Memory".
  try {
    std::printf("| graph | ops | units | samples | features (s) | place: encode, decode, simulate (s) | total (s) "
                "| step time (ms) |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for (const int64_t samples : {0, 16}) placement_speed(layers, speed_cluster, repeats, samples);
    // Inception-v3 is in the pre-training suite; ResNet-50 and BERT are not (zero-shot on unseen graphs).
    for (const std::string model : {"inception_v3", "resnet50", "bert"}) {
      std::printf("\n| placer (%s:training=1 on %s) | step time (ms) | OOM | wall (s) |\n", model.c_str(),
                  quality_cluster.c_str());
      std::printf("| --- | ---: | --- | ---: |\n");
      quality(model, quality_cluster, finetune_steps);
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bm_gdp: %s\n", e.what());
    return 1;
  }
  return 0;
}
