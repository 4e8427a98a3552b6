// placelab compare --graph G --cluster C [--placers a,b,c] [--seconds S] [--seed S] [--json] [--list]
#include <algorithm>
#include <array>
#include <memory>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/placing.h"
#include "graphs/error.h"
#include "policy/classic/bounds.h"
#include "sim/presets.h"

namespace placelab::cli {

namespace {

struct CompareArgs {
  std::string graph = "inception_v3:training=1", cluster = "v100-nvlink-4", placers;
  uint64_t seed = 1;
  double seconds = 0;  // > 0: the budgeted placers run with {"seconds": S}, and annealing and gdp join the defaults
  bool json = false, list = false;
};

// The placers that take a "seconds" budget (docs/placers.md#budgets), so that --seconds compares them at equal time.
constexpr std::array<std::string_view, 6> kBudgeted = {"annealing", "local_search", "gdp", "placeto", "hdp", "hsdag"};
bool budgeted(const std::string& name) {
  return std::find(kBudgeted.begin(), kBudgeted.end(), name) != kBudgeted.end();
}

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> out = policy::split_placer_names(text);
  if (out.empty()) throw Error(fmt::format("compare: --placers \"{}\" names no placer (e.g. --placers heft,metis)", text));
  return out;
}

void run(const CompareArgs& a) {
  if (a.list) {
    if (a.json) {
      nlohmann::json placers = nlohmann::json::array();
      for (const auto& p : policy::placers()) placers.push_back({{"name", p.name}, {"summary", p.summary}});
      return print_json({{"placers", placers}, {"fast", policy::fast_placers()}});
    }
    for (const auto& p : policy::placers()) fmt::print("{:<16} {}\n", p.name, p.summary);
    return;
  }
  std::vector<std::string> names;
  if (a.placers.empty()) {
    for (const auto& name : policy::fast_placers())
      for (const auto& p : policy::placers())
        if (p.name == name) names.push_back(name);
    if (a.seconds > 0) names.insert(names.end(), {"annealing", "gdp"});
  } else {
    names = split_names(a.placers);
    for (const auto& name : names) policy::make_placer(name);  // unknown names fail before any work
  }
  graphs::Graph g = load_graph(a.graph);
  sim::Cluster c = load_cluster(a.cluster);
  sim::Simulator simulator(g, c);
  // How fast any placement that fits could be (policy/classic/bounds.h): each row's distance to it.
  note("compare: lower bound\n");
  const policy::BoundParts bound = policy::lower_bound(simulator);
  // A placer that fails (no split fits, too many ideals...) costs its row, not the others'.
  nlohmann::json rows = nlohmann::json::array();
  std::vector<PlacerRun> runs;
  std::vector<std::pair<std::string, std::string>> failed;  // placer, error
  for (size_t i = 0; i < names.size(); ++i) {
    note("compare: {} ({} of {})\n", names[i], i + 1, names.size());
    try {
      const nlohmann::json options =
          a.seconds > 0 && budgeted(names[i]) ? nlohmann::json{{"seconds", a.seconds}} : nlohmann::json::object();
      runs.push_back(run_placer(simulator, names[i], options, a.seed));
      rows.push_back(run_to_json(runs.back(), c));
      const sim::SimResult& r = runs.back().sim;
      const bool judged = !r.oom && bound.fits && bound.bound_s > 0;  // the bound speaks of placements that fit
      rows.back()["ratio_to_bound"] = judged ? nlohmann::json(r.step_time_s / bound.bound_s) : nlohmann::json(nullptr);
    } catch (const Error& e) {
      note("compare: {} failed: {}\n", names[i], e.what());
      failed.emplace_back(names[i], e.what());
      rows.push_back({{"placer", names[i]}, {"error", e.what()}});
    }
  }
  if (a.json) {
    nlohmann::json doc = {{"graph", g.name()}, {"cluster", c.name()}, {"seed", a.seed},
                          {"bound", policy::bound_to_json(bound)}, {"rows", rows}};
    if (a.seconds > 0) doc["seconds"] = a.seconds;
    print_json(doc);
  } else {
    fmt::print("{} ({} ops) on {}{}\n", g.name(), g.num_ops(), c.name(),
               a.seconds > 0 ? fmt::format("; budgeted placers given {:g} s each", a.seconds) : "");
    if (bound.fits) {
      std::string parts = fmt::format("critical path {}, work {}", human(bound.path_s, "s"), human(bound.work_s, "s"));
      for (const auto& [name, value] : {std::pair{"forced cut", bound.cut_s}, std::pair{"busiest device", bound.device_s},
                                        std::pair{"busiest link", bound.link_s}})
        if (value > 0) parts += fmt::format(", {} {}", name, human(value, "s"));
      fmt::print("bound  {}: no placement that fits in memory is faster ({})\n", human(bound.bound_s, "s"), parts);
    } else {
      fmt::print("bound  none: no placement fits in memory (parameters and activations exceed what the devices hold)\n");
    }
    if (!runs.empty()) print_runs_table(runs, bound.fits ? bound.bound_s : 0);
    for (const auto& [placer, error] : failed) fmt::print("  {:<16} failed: {}\n", placer, error);
  }
  if (!failed.empty()) {
    std::string list;
    for (const auto& f : failed) list += (list.empty() ? "" : ", ") + f.first;
    throw Error(fmt::format("compare: {} of {} placers failed ({}); their errors are above", failed.size(),
                            names.size(), list));
  }
}

}  // namespace

void add_compare_command(CLI::App& app) {
  auto args = std::make_shared<CompareArgs>();
  CLI::App* cmd = app.add_subcommand("compare", "Run several placers on one graph and cluster and tabulate the results");
  cmd->add_option("--graph", args->graph, "Graph file or zoo name (NAME[:key=value,...]); default inception_v3:training=1");
  cmd->add_option("--cluster", args->cluster, "Cluster file or preset name; default v100-nvlink-4");
  cmd->add_option("--placers", args->placers, "Comma-separated placer names (default: every fast placer)");
  cmd->add_option("--seconds", args->seconds,
                  "Give the budgeted placers (annealing, local_search and the learned ones) S seconds each; without "
                  "--placers, annealing and gdp join the fast placers")
      ->check(CLI::PositiveNumber);
  add_seed(cmd, args->seed, "Seed of the placers' random choices (default 1)");
  cmd->add_flag("--json", args->json, "Print the table as one JSON object");
  cmd->add_flag("--list", args->list, "List every registered placer");
  cmd->callback([args] { run(*args); });
}

}  // namespace placelab::cli
