#include "cli/common.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/json_util.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "sim/placement.h"
#include "sim/presets.h"

namespace placelab::cli {

void check_output(std::string_view verb, std::string_view option, const std::string& path,
                  std::initializer_list<std::string_view> inputs) {
  namespace fs = std::filesystem;
  if (path.empty()) throw Error(fmt::format("{}: {} is empty; give a file name", verb, option));
  std::error_code ec;
  const fs::path folder = fs::path(path).parent_path();
  if (!folder.empty() && !fs::is_directory(folder, ec)) {
    throw Error(fmt::format("{}: {} {}: folder {} does not exist; create it first", verb, option, path,
                            folder.string()));
  }
  if (fs::is_directory(path, ec))
    throw Error(fmt::format("{}: {} {}: is a directory; give a file name", verb, option, path));
  for (std::string_view input : inputs) {
    if (!input.empty() && fs::equivalent(path, input, ec)) {
      throw Error(fmt::format("{}: {} {} is also an input of this run ({}); writing it would destroy that: give "
                              "another file name",
                              verb, option, path, input));
    }
  }
}

void check_distinct_outputs(std::string_view verb, std::string_view option_a, const std::string& a,
                            std::string_view option_b, const std::string& b) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (a.empty() || b.empty()) return;
  if (fs::absolute(a, ec).lexically_normal() == fs::absolute(b, ec).lexically_normal() || fs::equivalent(a, b, ec))
    throw Error(fmt::format("{}: {} and {} are both {}; give each its own file", verb, option_a, option_b, a));
}

graphs::Graph load_graph(const std::string& spec, std::string_view option) {
  if (io::names_a_file(spec)) return reading(option, spec, [&] { return graphs::read_graph(spec); });
  auto colon = spec.find(':');
  std::string name = spec.substr(0, colon);
  graphs::zoo::Params params;
  bool training = false;
  std::set<std::string> seen;
  if (colon != std::string::npos) {
    std::string rest = spec.substr(colon + 1);
    size_t start = 0;
    while (start <= rest.size()) {
      size_t comma = rest.find(',', start);
      std::string item = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      auto eq = item.find('=');
      if (eq == std::string::npos)
        throw Error(fmt::format("graph \"{}\": \"{}\" is not key=value (e.g. gnmt:layers=8,steps=20)", spec, item));
      std::string key = item.substr(0, eq), value = item.substr(eq + 1);
      double v = 0;
      try {  // decimal numbers only: stod would also take hex, "nan" and "inf"
        size_t used = 0;
        if (value.find_first_not_of("0123456789.eE+-") != std::string::npos) throw std::invalid_argument(value);
        v = std::stod(value, &used);
        if (used != value.size() || !std::isfinite(v)) throw std::invalid_argument(value);
      } catch (const std::exception&) {
        throw Error(fmt::format("graph \"{}\": value of {} is \"{}\", expected a decimal number", spec, key, value));
      }
      if (key == "training" && v != 0 && v != 1)
        throw Error(fmt::format("graph \"{}\": training is {}, expected 0 or 1", spec, value));
      if (!seen.insert(key).second) throw Error(fmt::format("graph \"{}\": {} is given twice; give it once", spec, key));
      if (key == "training") training = v == 1;
      else params[key] = v;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  try {
    graphs::zoo::model_info(name);  // unknown names: an error listing the models
  } catch (const Error& e) {
    throw Error(fmt::format("{}; no file \"{}\" exists either", e.what(), spec));
  }
  graphs::Graph g = graphs::zoo::make_model(name, params);
  return training ? graphs::expand_training(g) : g;
}

sim::Cluster load_cluster(const std::string& spec, std::string_view option) {
  return reading(option, spec, [&] { return sim::load_cluster(spec); });
}

void print_json(const nlohmann::json& doc) { fmt::print("{}\n", io::dump_json(doc)); }

std::vector<int32_t> read_placement_for(const std::string& path, const sim::Simulator& simulator, std::string_view verb) {
  sim::Placement p = reading("--placement", path, [&] { return sim::read_placement(path); });
  const std::string& graph = simulator.graph().name();
  const std::string& cluster = simulator.cluster().name();
  if (!p.graph.empty() && p.graph != graph)
    note("placelab: warning: {} was made for graph \"{}\", {} \"{}\"\n", path, p.graph, verb, graph);
  if (!p.cluster.empty() && p.cluster != cluster)
    note("placelab: warning: {} was made for cluster \"{}\", {} \"{}\"\n", path, p.cluster, verb, cluster);
  try {
    simulator.check_placement(p.device_of);
  } catch (const Error& e) {
    throw Error(fmt::format("--placement {}: {}", path, e.what()));
  }
  return std::move(p.device_of);
}

CLI::Option* add_seed(CLI::App* cmd, uint64_t& seed, const std::string& help) {
  auto decimal = [](const std::string& text) -> std::string {
    uint64_t v = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size())
      return fmt::format("\"{}\" is not an integer from 0 to {}", text, UINT64_MAX);
    return "";
  };
  return cmd->add_option("--seed", seed, help)->check(CLI::Validator(decimal, "UINT64"));
}

namespace {

// Edit distance (insertions, deletions, substitutions) between two names.
size_t distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// "; did you mean X?" for the nearest of `names` when it is near enough to be a typo of `word`.
std::string did_you_mean(std::string_view word, const std::vector<std::string>& names, std::string_view list) {
  const std::string* best = nullptr;
  size_t best_distance = 0;
  for (const std::string& name : names) {
    const size_t d = distance(word, name);
    if (best == nullptr || d < best_distance) best = &name, best_distance = d;
  }
  if (best != nullptr && best_distance <= std::max<size_t>(2, word.size() / 3))
    return fmt::format("; did you mean {}?", *best);
  return fmt::format(" ({})", list);
}

}  // namespace

std::string unknown_argument_hint(const CLI::App& app, const std::vector<std::string>& args) {
  const std::vector<CLI::App*> parsed = app.get_subcommands();
  if (parsed.empty()) {
    if (args.empty() || args[0].starts_with("-")) return "";
    std::vector<std::string> verbs;
    for (const CLI::App* verb : app.get_subcommands([](const CLI::App*) { return true; })) verbs.push_back(verb->get_name());
    if (std::find(verbs.begin(), verbs.end(), args[0]) != verbs.end()) return "";
    return fmt::format("placelab: unknown verb \"{}\"{}", args[0], did_you_mean(args[0], verbs, "placelab --help lists them"));
  }
  const CLI::App& verb = *parsed.front();
  std::vector<std::string> options = {"--help"};
  for (const CLI::Option* option : verb.get_options())
    for (const std::string& name : option->get_lnames()) options.push_back("--" + name);
  for (const std::string& arg : args) {
    if (!arg.starts_with("--") || arg == "--") continue;
    const std::string name = arg.substr(0, arg.find('='));
    if (std::find(options.begin(), options.end(), name) == options.end())
      return fmt::format("placelab {}: unknown option {}{}", verb.get_name(), name,
                         did_you_mean(name, options, fmt::format("placelab {} --help lists them", verb.get_name())));
  }
  return "";
}

std::string human(double value, std::string_view unit) {
  static const char* prefixes[] = {"", "K", "M", "G", "T", "P", "E"};
  int p = 0;
  while (std::abs(value) >= 1000 && p < 6) {
    value /= 1000;
    ++p;
  }
  return fmt::format("{:.4g} {}{}", value, prefixes[p], unit);
}

}  // namespace placelab::cli
