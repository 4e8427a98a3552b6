// placelab graph (--model NAME [--PARAM V ...] | --file F | --onnx F [--input-shape NAME=D,..]) [--training] [--stats]
//                [--out F] [--json]
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "cli/common.h"
#include "cli/onnx_import.h"
#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"

namespace placelab::cli {

namespace {

struct GraphArgs {
  std::string model, file, onnx, out;
  std::vector<std::string> input_shapes;
  graphs::zoo::Params params;
  bool training = false, stats = false, json = false, list = false;
};

/** Parameters of the model: the forward ops' resident bytes as float32 values (training adds optimizer state). */
double parameter_count(const graphs::Graph& g) {
  double bytes = 0;
  for (graphs::OpId op = 0; op < g.num_ops(); ++op)
    if (g.phase(op) == graphs::Phase::forward) bytes += g.param_bytes(op);
  return bytes / 4;
}

nlohmann::json stats_json(const graphs::Graph& g) {
  graphs::GraphStats s = g.stats();
  return {{"name", g.name()},
          {"ops", s.ops},
          {"edges", s.edges},
          {"op_types", s.op_types},
          {"forward_ops", s.forward_ops},
          {"backward_ops", s.backward_ops},
          {"update_ops", s.update_ops},
          {"colocation_classes", s.colocation_classes},
          {"depth", s.depth},
          {"flops", s.flops},
          {"bytes_read", s.bytes_read},
          {"bytes_written", s.bytes_written},
          {"output_bytes", s.output_bytes},
          {"param_bytes", s.param_bytes},
          {"parameters", parameter_count(g)},
          {"edge_bytes", s.edge_bytes}};
}

void print_stats(const graphs::Graph& g) {
  graphs::GraphStats s = g.stats();
  fmt::print("graph {}\n", g.name());
  fmt::print("  ops            {:>12}  (forward {}, backward {}, update {}; {} op types)\n", s.ops, s.forward_ops,
             s.backward_ops, s.update_ops, s.op_types);
  fmt::print("  edges          {:>12}\n", s.edges);
  fmt::print("  depth          {:>12}  ops on the longest path\n", s.depth);
  fmt::print("  colocation     {:>12}  classes\n", s.colocation_classes);
  fmt::print("  FLOPs          {:>12}\n", human(s.flops, "FLOP"));
  fmt::print("  memory traffic {:>12}  read, {} written\n", human(s.bytes_read, "B"), human(s.bytes_written, "B"));
  fmt::print("  outputs        {:>12}\n", human(s.output_bytes, "B"));
  fmt::print("  parameters     {:>12}  ({} float32 values in forward ops)\n", human(s.param_bytes, "B"),
             human(parameter_count(g), ""));
  fmt::print("  edge tensors   {:>12}\n", human(s.edge_bytes, "B"));
}

void print_models(bool json) {
  if (json) {
    nlohmann::json models = nlohmann::json::array();
    for (const auto& m : graphs::zoo::models()) {
      nlohmann::json params = nlohmann::json::array();
      for (const auto& p : m.params) params.push_back({{"name", p.name}, {"default", p.value}, {"help", p.help}});
      models.push_back({{"name", m.name}, {"summary", m.summary}, {"params", params}});
    }
    return print_json({{"models", models}});
  }
  for (const auto& m : graphs::zoo::models()) {
    fmt::print("{:<16} {}\n", m.name, m.summary);
    for (const auto& p : m.params) fmt::print("    --{:<14} {:<10} {}\n", p.name, p.value, p.help);
  }
}

void run(const GraphArgs& a) {
  if (a.list) return print_models(a.json);
  if (int{!a.model.empty()} + int{!a.file.empty()} + int{!a.onnx.empty()} != 1)
    throw Error("graph: give exactly one of --model NAME, --file F or --onnx F (placelab graph --list shows the "
                "models)");
  if (!a.out.empty()) check_output("graph", "--out", a.out, {a.file, a.onnx});
  if (!a.input_shapes.empty() && a.onnx.empty()) throw Error("graph: --input-shape only applies with --onnx");
  if (a.model.empty() && !a.params.empty()) throw Error("graph: model parameters only apply with --model");
  graphs::Graph g;
  if (!a.file.empty()) {
    g = graphs::read_graph(a.file);
  } else if (!a.onnx.empty()) {
    g = import_onnx(a.onnx, a.input_shapes);
  } else {
    g = graphs::zoo::make_model(a.model, a.params);
  }
  if (a.training) g = graphs::expand_training(g);
  if (!a.out.empty()) {
    graphs::write_graph(g, a.out);
    note("wrote {} ({} ops, {} edges)\n", a.out, g.num_ops(), g.num_edges());
  }
  if (a.json) return print_json(stats_json(g));
  if (a.stats || a.out.empty()) print_stats(g);
}

}  // namespace

void add_graph_command(CLI::App& app) {
  auto args = std::make_shared<GraphArgs>();
  CLI::App* cmd = app.add_subcommand("graph", "Build a zoo model, read a graph file or import an ONNX model; print its stats or write it");
  cmd->add_option("--model", args->model, "Zoo model name (see --list)");
  cmd->add_option("--file", args->file, "A placelab.graph JSON file");
  cmd->add_option("--onnx", args->onnx, "An ONNX model, imported by the Python package (needs python3-onnx)");
  cmd->add_option("--input-shape", args->input_shapes, "NAME=D,D,...: sizes of an ONNX input with symbolic ones")
      ->allow_extra_args(false);
  cmd->add_flag("--training", args->training, "Expand to a training graph (forward + backward + update)");
  cmd->add_flag("--stats", args->stats, "Print op counts, FLOPs and bytes (the default without --out)");
  cmd->add_option("--out", args->out, "Write the graph as placelab.graph JSON");
  cmd->add_flag("--json", args->json, "Print the stats as one JSON object");
  cmd->add_flag("--list", args->list, "List the zoo models and their parameters");
  // Every zoo parameter becomes an option; which models take it is checked by make_model.
  std::map<std::string, std::set<std::string>> takers;
  for (const auto& m : graphs::zoo::models())
    for (const auto& p : m.params) takers[p.name].insert(m.name);
  for (const auto& [name, models] : takers) {
    std::string help = "Model parameter (";
    for (const auto& m : models) help += (help.back() == '(' ? "" : ", ") + m;
    cmd->add_option_function<double>("--" + name, [args, name = name](double v) { args->params[name] = v; },
                                     help + ")")
        ->group("Model parameters");
  }
  cmd->callback([args] { run(*args); });
}

}  // namespace placelab::cli
