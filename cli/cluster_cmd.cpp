// placelab cluster (--preset NAME | --file F) [--out F] [--json] [--list]
#include <memory>

#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"
#include "sim/cluster.h"
#include "sim/presets.h"

namespace placelab::cli {

namespace {

struct ClusterArgs {
  std::string preset, file, out;
  bool json = false, list = false;
};

void print_presets(bool json) {
  if (json) {
    nlohmann::json families = nlohmann::json::array();
    for (const auto& f : sim::preset_families())
      families.push_back({{"family", f.family}, {"sizes", f.sizes}, {"summary", f.summary}});
    return print_json({{"presets", families}});
  }
  for (const auto& f : sim::preset_families()) {
    std::string sizes;
    for (int n : f.sizes) sizes += fmt::format("{}{}", sizes.empty() ? "" : "|", n);
    fmt::print("{:<14} {:<10} {}\n", f.family + "-N", "N=" + sizes, f.summary);
  }
}

void print_cluster(const sim::Cluster& c) {
  fmt::print("cluster {} ({} devices, {} links, transfers {})\n", c.name(), c.num_devices(), c.num_links(),
             sim::transfer_mode_name(c.transfer_mode()));
  fmt::print("  {:<10} {:<12} {:>14} {:>14} {:>12} {:>10} {:>6}\n", "device", "kind", "peak FLOP/s", "memory B/s",
             "memory", "launch", "eff");
  for (const auto& d : c.devices())
    fmt::print("  {:<10} {:<12} {:>14} {:>14} {:>12} {:>10} {:>6}\n", d.name, d.kind, human(d.peak_flops_per_s),
               human(d.memory_bandwidth_bytes_per_s), human(d.memory_bytes, "B"),
               fmt::format("{:g} us", d.launch_overhead_s * 1e6), d.efficiency);
  if (c.num_links() == 0) return;
  fmt::print("  {:<22} {:<26} {:>12} {:>10} {:>6}\n", "link", "ends", "B/s", "latency", "duplex");
  for (const auto& l : c.links())
    fmt::print("  {:<22} {:<26} {:>12} {:>10} {:>6}\n", l.name, l.end_a.empty() ? "(bus)" : l.end_a + " - " + l.end_b,
               human(l.bandwidth_bytes_per_s), fmt::format("{:g} us", l.latency_s * 1e6), sim::duplex_name(l.duplex));
}

void run(const ClusterArgs& a) {
  if (a.list) return print_presets(a.json);
  if (a.preset.empty() == a.file.empty())
    throw Error("cluster: give exactly one of --preset NAME or --file F (placelab cluster --list shows the presets)");
  if (!a.out.empty()) check_output("cluster", "--out", a.out, {a.file});
  sim::Cluster c = a.file.empty() ? sim::make_preset(a.preset) : sim::read_cluster(a.file);
  if (!a.out.empty()) {
    sim::write_cluster(c, a.out);
    note("wrote {} ({} devices, {} links)\n", a.out, c.num_devices(), c.num_links());
  }
  if (a.json) return print_json(sim::cluster_to_json(c));
  if (a.out.empty()) print_cluster(c);
}

}  // namespace

void add_cluster_command(CLI::App& app) {
  auto args = std::make_shared<ClusterArgs>();
  CLI::App* cmd = app.add_subcommand("cluster", "Build a preset or read a cluster file; print it or write it");
  cmd->add_option("--preset", args->preset, "Preset name, e.g. v100-nvlink-8 (see --list)");
  cmd->add_option("--file", args->file, "A placelab.cluster JSON file");
  cmd->add_option("--out", args->out, "Write the cluster as placelab.cluster JSON");
  cmd->add_flag("--json", args->json, "Print the placelab.cluster document as one JSON object");
  cmd->add_flag("--list", args->list, "List the preset families");
  cmd->callback([args] { run(*args); });
}

}  // namespace placelab::cli
