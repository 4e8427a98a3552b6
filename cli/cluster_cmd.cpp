// placelab cluster (--preset NAME | --file F | --nodes N [--gpus G] [--kind K] [--oversubscription R])
//                  [--out F] [--json] [--list]
#include <algorithm>
#include <cctype>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "cli/common.h"
#include "graphs/error.h"
#include "sim/cluster.h"
#include "sim/presets.h"

namespace placelab::cli {

namespace {

struct ClusterArgs {
  std::string preset, file, out;
  sim::MultiNodeSpec nodes;
  bool json = false, list = false;
};

// Up to this many devices and links every one gets a line (every single-host preset); beyond, runs of
// alike ones share one.
constexpr int kFullTableDevices = 16, kFullTableLinks = 32;

void print_presets(bool json) {
  if (json) {
    nlohmann::json families = nlohmann::json::array(), multi = nlohmann::json::array();
    for (const auto& f : sim::preset_families())
      families.push_back({{"family", f.family}, {"sizes", f.sizes}, {"summary", f.summary}});
    for (const auto& f : sim::multinode_families())
      multi.push_back({{"family", f.family}, {"grammar", f.family + "-NxG[-osR]"}, {"nodes", {1, sim::kMaxNodes}},
                       {"gpus_per_node", {1, 2, 4, 8}}, {"oversubscription", {1, sim::kMaxNodes}},
                       {"summary", f.summary}});
    return print_json({{"presets", families}, {"multi_node", multi}});
  }
  for (const auto& f : sim::preset_families()) {
    std::string sizes;
    for (int n : f.sizes) sizes += fmt::format("{}{}", sizes.empty() ? "" : "|", n);
    fmt::print("{:<14} {:<10} {}\n", f.family + "-N", "N=" + sizes, f.summary);
  }
  fmt::print("\nmulti-node: {}\n", sim::kMultiNodeGrammar);
  for (const auto& f : sim::multinode_families())
    fmt::print("{:<22} {}\n", f.family + "-NxG[-osR]", f.summary);
}

// A name with its digits left out: "n0.gpu3-nic" -> "n.gpu-nic", so that only entries of one role share a line.
std::string shape(std::string_view name) {
  std::string out;
  for (char ch : name)
    if (!std::isdigit(static_cast<unsigned char>(ch))) out += ch;
  return out;
}

// The part of a device name before its last '.', "n3" of "n3.gpu5": devices are grouped by it (by node).
std::string_view node_of(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
}

bool alike(const sim::Device& a, const sim::Device& b) {
  return shape(a.name) == shape(b.name) && node_of(a.name) == node_of(b.name) && a.kind == b.kind &&
         a.peak_flops_per_s == b.peak_flops_per_s && a.memory_bandwidth_bytes_per_s == b.memory_bandwidth_bytes_per_s &&
         a.memory_bytes == b.memory_bytes && a.launch_overhead_s == b.launch_overhead_s && a.efficiency == b.efficiency;
}

bool alike(const sim::Link& a, const sim::Link& b) {
  return shape(a.name) == shape(b.name) && a.end_a.empty() == b.end_a.empty() &&
         a.bandwidth_bytes_per_s == b.bandwidth_bytes_per_s && a.latency_s == b.latency_s && a.duplex == b.duplex &&
         a.busy_after_s == b.busy_after_s;
}

// Calls print(first, last, count) for each run of consecutive alike items; every item alone when `full`.
template <class T, class Print>
void runs(const std::vector<T>& items, bool full, Print print) {
  for (size_t i = 0; i < items.size();) {
    size_t j = i + 1;
    while (!full && j < items.size() && alike(items[i], items[j])) ++j;
    print(items[i], items[j - 1], j - i);
    i = j;
  }
}

std::string span(const std::string& first, const std::string& last, size_t count) {
  return count == 1 ? first : fmt::format("{} .. {}", first, last);
}

// `spec`: the multi-node preset it was built from, if any (a file's name is not trusted to say so).
void print_cluster(const sim::Cluster& c, const std::optional<sim::MultiNodeSpec>& spec) {
  fmt::print("cluster {} ({} devices, {} links, transfers {})\n", c.name(), c.num_devices(), c.num_links(),
             sim::transfer_mode_name(c.transfer_mode()));
  const bool full = c.num_devices() <= kFullTableDevices && c.num_links() <= kFullTableLinks;
  if (spec) {
    fmt::print("  {} nodes x {} {} GPUs: within a node over NVSwitch; GPU i of every node on leaf switch i (rail i) "
               "over its NIC; across rails through the spine, {}\n",
               spec->nodes, spec->gpus_per_node, spec->kind,
               spec->oversubscription == 1 ? "non-blocking"
                                           : fmt::format("leaf uplinks oversubscribed {}:1", spec->oversubscription));
  }
  const std::string count_head = full ? "" : fmt::format("{:>5} ", "count");
  auto count_col = [&](size_t n) { return full ? std::string() : fmt::format("{:>5} ", n); };
  const int name_w = full ? 10 : 22;
  fmt::print("  {:<{}} {}{:<12} {:>14} {:>14} {:>12} {:>10} {:>6}\n", "device", name_w, count_head, "kind",
             "peak FLOP/s", "memory B/s", "memory", "launch", "eff");
  runs(c.devices(), full, [&](const sim::Device& d, const sim::Device& last, size_t n) {
    fmt::print("  {:<{}} {}{:<12} {:>14} {:>14} {:>12} {:>10} {:>6}\n", span(d.name, last.name, n), name_w, count_col(n),
               d.kind, human(d.peak_flops_per_s), human(d.memory_bandwidth_bytes_per_s), human(d.memory_bytes, "B"),
               fmt::format("{:g} us", d.launch_overhead_s * 1e6), d.efficiency);
  });
  if (c.num_links() == 0) return;
  const int link_w = full ? 22 : 44;
  fmt::print("  {:<{}} {}{:<26} {:>12} {:>10} {:>6}\n", "link", link_w, count_head, full ? "ends" : "ends (first)",
             "B/s", "latency", "duplex");
  runs(c.links(), full, [&](const sim::Link& l, const sim::Link& last, size_t n) {
    fmt::print("  {:<{}} {}{:<26} {:>12} {:>10} {:>6}\n", span(l.name, last.name, n), link_w, count_col(n),
               l.end_a.empty() ? "(bus)" : l.end_a + " - " + l.end_b, human(l.bandwidth_bytes_per_s),
               fmt::format("{:g} us", l.latency_s * 1e6), sim::duplex_name(l.duplex));
  });
}

void run(const ClusterArgs& a, bool multi_node, bool node_options) {
  if (a.list) return print_presets(a.json);
  if (node_options && !multi_node)
    throw Error("cluster: --gpus, --kind and --oversubscription shape a multi-node cluster; give --nodes N with them");
  if (int(!a.preset.empty()) + int(!a.file.empty()) + int(multi_node) != 1)
    throw Error("cluster: give exactly one of --preset NAME, --file F or --nodes N [--gpus G] [--kind h100|a100|v100] "
                "(placelab cluster --list shows the presets)");
  if (!a.out.empty()) check_output("cluster", "--out", a.out, {a.file});
  const std::optional<sim::MultiNodeSpec> spec =
      multi_node ? std::optional(a.nodes) : a.file.empty() ? sim::parse_multinode_name(a.preset) : std::nullopt;
  sim::Cluster c = spec ? sim::make_multinode(*spec) : a.file.empty() ? sim::make_preset(a.preset) : sim::read_cluster(a.file);
  if (!a.out.empty()) {
    sim::write_cluster(c, a.out);
    note("wrote {} ({} devices, {} links)\n", a.out, c.num_devices(), c.num_links());
  }
  if (a.json) return print_json(sim::cluster_to_json(c));
  if (a.out.empty()) print_cluster(c, spec);
}

}  // namespace

void add_cluster_command(CLI::App& app) {
  auto args = std::make_shared<ClusterArgs>();
  CLI::App* cmd = app.add_subcommand("cluster", "Build a preset or read a cluster file; print it or write it");
  cmd->add_option("--preset", args->preset,
                  "Preset name, e.g. v100-nvlink-8 or h100-nodes-4x8 (see --list)");
  cmd->add_option("--file", args->file, "A placelab.cluster JSON file");
  CLI::Option* nodes = cmd->add_option("--nodes", args->nodes.nodes,
                                       "Multi-node cluster of N DGX nodes (1..32), the same as preset KIND-nodes-NxG");
  CLI::Option* gpus = cmd->add_option("--gpus", args->nodes.gpus_per_node, "With --nodes: GPUs per node, 1|2|4|8 (default 8)");
  CLI::Option* kind = cmd->add_option("--kind", args->nodes.kind, "With --nodes: h100 (DGX H100, default), a100 (DGX A100) or v100 (DGX-2-style V100 nodes)");
  CLI::Option* over = cmd->add_option("--oversubscription", args->nodes.oversubscription,
                                      "With --nodes: leaf uplinks oversubscribed R:1 (default 1: non-blocking)");
  cmd->add_option("--out", args->out, "Write the cluster as placelab.cluster JSON");
  cmd->add_flag("--json", args->json, "Print the placelab.cluster document as one JSON object");
  cmd->add_flag("--list", args->list, "List the preset families and the multi-node grammar");
  cmd->callback([args, nodes, gpus, kind, over] {
    run(*args, nodes->count() > 0, gpus->count() + kind->count() + over->count() > 0);
  });
}

}  // namespace placelab::cli
