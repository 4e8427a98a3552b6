#include "cli/common.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"

namespace placelab::cli {

graphs::Graph load_graph(const std::string& spec) {
  if (std::filesystem::exists(spec) || spec.ends_with(".json")) return graphs::read_graph(spec);
  auto colon = spec.find(':');
  std::string name = spec.substr(0, colon);
  graphs::zoo::Params params;
  bool training = false;
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
      try {
        size_t used = 0;
        v = std::stod(value, &used);
        if (used != value.size()) throw std::invalid_argument(value);
      } catch (const std::exception&) {
        throw Error(fmt::format("graph \"{}\": value of {} is \"{}\", expected a number", spec, key, value));
      }
      if (key == "training") training = v != 0;
      else params[key] = v;
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
  graphs::zoo::model_info(name);  // unknown names: an error listing the models (and "no such file")
  graphs::Graph g = graphs::zoo::make_model(name, params);
  return training ? graphs::expand_training(g) : g;
}

// Names come from file paths, which need not be UTF-8: such bytes print as U+FFFD instead of throwing.
void print_json(const nlohmann::json& doc) {
  fmt::print("{}\n", doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
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
