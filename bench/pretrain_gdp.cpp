// Batch pre-training of GDP (Zhou et al.'s "batch training") on a suite of zoo and synthetic graphs on
// 2- and 4-GPU clusters, and export of the committed checkpoint policy/learned/pretrained/gdp.json that
// the library embeds (learned::pretrained_gdp_checkpoint()). bench/pretrain_gdp.sh runs it in Release
// with the seed the committed file was made with.
//
// The export is the trainer's checkpoint format without the optimiser moments (fine-tuning starts a
// fresh Adam) and without the per-task best placements, so the file stays small.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/learned/gdp.h"
#include "sim/presets.h"

namespace {

using namespace placelab;

struct SuiteGraph {
  std::string label;  // as the CLI spells it
  std::string model;
  graphs::zoo::Params params;
  bool training;
};

// Small enough that one PPO step takes tens of milliseconds; training graphs where the papers train.
std::vector<SuiteGraph> suite() {
  return {
      {"inception_v3:training=1", "inception_v3", {}, true},
      {"rnnlm:layers=2,steps=20,training=1", "rnnlm", {{"layers", 2}, {"steps", 20}}, true},
      {"gnmt:layers=2,steps=10,training=1", "gnmt", {{"layers", 2}, {"steps", 10}}, true},
      {"transformer_xl:layers=4,training=1", "transformer_xl", {{"layers", 4}}, true},
      {"wavenet:layers=12,seq_len=4000,training=1", "wavenet", {{"layers", 12}, {"seq_len", 4000}}, true},
      {"cifar10:seed=1,training=1", "cifar10", {{"seed", 1}}, true},
      {"nmt:seed=2,training=1", "nmt", {{"seed", 2}}, true},
      {"random_dag:ops=300,seed=1", "random_dag", {{"ops", 300}, {"seed", 1}}, false},
      {"random_dag:ops=600,width=32,seed=2", "random_dag", {{"ops", 600}, {"width", 32}, {"seed", 2}}, false},
  };
}

const std::vector<std::string> kClusters = {"v100-nvlink-2", "v100-nvlink-4", "k80-4"};

std::vector<rl::Task> suite_tasks() {
  std::vector<rl::Task> tasks;
  for (const SuiteGraph& s : suite()) {
    graphs::Graph forward = graphs::zoo::make_model(s.model, s.params);
    auto graph =
        std::make_shared<const graphs::Graph>(s.training ? graphs::expand_training(forward) : std::move(forward));
    for (const std::string& cluster : kClusters) {
      tasks.push_back(rl::make_task(fmt::format("{} on {}", s.label, cluster), graph,
                                    std::make_shared<const sim::Cluster>(sim::make_preset(cluster))));
    }
  }
  return tasks;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Pre-trains GDP on the batch suite and writes the embeddable checkpoint"};
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);  // wrappers pass defaults first
  std::string out = "policy/learned/pretrained/gdp.json", options_text = "{}", work_dir;
  int64_t steps = 1000000;
  double minutes = 12;
  uint64_t seed = 1;
  app.add_option("--out", out, "Exported checkpoint (default policy/learned/pretrained/gdp.json)");
  app.add_option("--minutes", minutes, "Training time limit in minutes (default 12)");
  app.add_option("--steps", steps, "Training step limit (default: the time decides)");
  app.add_option("--seed", seed, "Seed of the policy (default 1)");
  app.add_option("--options", options_text, "GDP options as a JSON object (default: the policy's defaults)");
  app.add_option("--checkpoint", work_dir, "Also keep the trainer's full checkpoint and log.jsonl in this directory");
  CLI11_PARSE(app, argc, argv);

  try {
    const std::vector<rl::Task> tasks = suite_tasks();
    auto learner = learned::make_gdp_learner(io::parse_json(options_text, "--options"), seed);
    rl::TrainOptions train;
    train.steps = steps;
    train.minutes = minutes;
    train.checkpoint_dir = work_dir;
    train.checkpoint_every = 200;
    train.seed = seed;
    const auto progress = [](std::string_view line) {
      std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
    };
    const rl::TrainSummary summary = rl::train(*learner, tasks, train, {}, progress);

    nlohmann::json suite_names = nlohmann::json::array();
    for (size_t t = 0; t < tasks.size(); ++t) {
      suite_names.push_back({{"task", tasks[t].name},
                             {"best_cost_s", summary.best_cost_s[t]},
                             {"best_step", summary.best_step[t]},
                             {"greedy_cost_s", tasks[t].simulator->simulate(learner->place(tasks[t])).step_time_s}});
    }
    nlohmann::json state = learner->state();
    state.erase("optimizer");
    const nlohmann::json doc = {{"format", "placelab.checkpoint"},
                                {"version", 1},
                                {"policy", learner->name()},
                                {"options", learner->options()},
                                {"step", summary.steps},
                                {"learner", std::move(state)},
                                {"trainer",
                                 {{"seed", seed},
                                  {"wall_s", summary.wall_s},
                                  {"made_by", "bench/pretrain_gdp.sh"},
                                  {"suite", std::move(suite_names)}}}};
    io::write_json_atomic(out, doc, -1);
    std::fprintf(stderr, "pretrain_gdp: %lld steps in %.1f s on %zu tasks -> %s (%llu bytes)\n",
                 static_cast<long long>(summary.steps), summary.wall_s, tasks.size(), out.c_str(),
                 static_cast<unsigned long long>(std::filesystem::file_size(out)));
  } catch (const Error& e) {
    std::fprintf(stderr, "pretrain_gdp: %s\n", e.what());
    return 1;
  }
  return 0;
}
