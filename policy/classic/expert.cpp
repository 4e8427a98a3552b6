// The human experts' placements the papers compare against, keyed by the zoo graph's name: GNMT, RNNLM
// and the NMT family layer-wise over the GPUs with the attention and softmax (the last `layer`) on the last
// GPU (Wu et al. 2016, as GDP and Placeto ran it), except that the slices of a sharded softmax
// (softmax/shard<k>/) are spread over all GPUs, as GNMT partitions its softmax (Wu et al. 2016, section 3,
// figure 1); Inception-v3 and ResNet-50 on one GPU; Transformer-XL,
// WaveNet, AmoebaNet, NASNet and BERT in contiguous blocks of layers balanced by compute; today's decoders
// (GPT, Llama, Mixtral, ViT) in equal pipeline stages of layers, with their tensor-parallel shards spread
// over a group of GPUs inside a node (Megatron-LM, Narayanan et al. 2021); any other graph in contiguous
// balanced blocks of its topological order. Training graphs follow their forward ops through
// colocation. With {"split_file": F}, an msr-dnn-partitioning human-expert split (Tarnawski et al.).
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <map>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/msr.h"
#include "policy/classic/units.h"

namespace placelab::policy {

namespace {

enum class Rule { layer_wise, one_gpu, layer_blocks, pipeline, topo_blocks };

Rule rule_of(std::string_view name) {
  for (std::string_view m : {"gnmt", "rnnlm", "nmt_"})
    if (name.starts_with(m)) return Rule::layer_wise;
  for (std::string_view m : {"inception_v3", "resnet"})
    if (name.starts_with(m)) return Rule::one_gpu;
  for (std::string_view m : {"transformer_xl", "wavenet", "amoebanet", "nasnet", "bert"})
    if (name.starts_with(m)) return Rule::layer_blocks;
  for (std::string_view m : {"gpt", "llama", "mixtral", "vit"})
    if (name.starts_with(m)) return Rule::pipeline;
  return Rule::topo_blocks;
}

std::string_view rule_name(Rule r) {
  switch (r) {
    case Rule::layer_wise: return "layer-wise, head on the last GPU, softmax slices over all GPUs";
    case Rule::one_gpu: return "one GPU";
    case Rule::layer_blocks: return "contiguous layer blocks balanced by compute";
    case Rule::pipeline: return "pipeline stages of equal layer counts, shards tensor-parallel inside a node";
    case Rule::topo_blocks: return "contiguous topological blocks balanced by compute";
  }
  return "";
}

/** The GPUs (devices whose kind is not "cpu"), or every device when there are none. */
std::vector<int32_t> gpus_of(const sim::Cluster& c) {
  std::vector<int32_t> out;
  for (int32_t d = 0; d < c.num_devices(); ++d)
    if (c.device(d).kind != "cpu") out.push_back(d);
  if (out.empty())
    for (int32_t d = 0; d < c.num_devices(); ++d) out.push_back(d);
  return out;
}

/** A unit's layer: the smallest layer of its forward ops (backward and update ops follow them), or -1. */
std::vector<int32_t> unit_layers(const Units& units) {
  const graphs::Graph& g = units.simulator().graph();
  std::vector<int32_t> layer(units.num_units(), graphs::kNoClass);
  for (int32_t u = 0; u < units.num_units(); ++u)
    for (graphs::OpId op : units.ops(u))
      if (g.layer(op) != graphs::kNoClass && (layer[u] == graphs::kNoClass || g.layer(op) < layer[u]))
        layer[u] = g.layer(op);
  return layer;
}

/**
 * Per unit: k if one of its ops sits under "<prefix><k>/" (prefix "softmax/shard": a slice of GNMT's sharded
 * softmax; "shard": a decoder's tensor-parallel shard), the prefix starting a path segment, else -1.
 */
std::vector<int32_t> unit_shards(const Units& units, std::string_view prefix) {
  const graphs::Graph& g = units.simulator().graph();
  std::vector<int32_t> shard(units.num_units(), -1);
  for (int32_t u = 0; u < units.num_units(); ++u)
    for (graphs::OpId op : units.ops(u)) {
      const std::string& name = g.op_name(op);
      const size_t at = name.find(prefix);
      if (at == std::string::npos || (at > 0 && name[at - 1] != '/')) continue;
      const char* digits = name.data() + at + prefix.size();
      int32_t k = -1;
      auto [end, ec] = std::from_chars(digits, name.data() + name.size(), k);
      if (ec == std::errc() && end != digits && (*end == '/' || end == name.data() + name.size())) {
        shard[u] = k;
        break;
      }
    }
  return shard;
}

/** Units still at -1 take the device of their first op's first predecessor (in topological order), else `fallback`. */
void fill_unplaced(const Units& units, std::vector<int32_t>& where, int32_t fallback) {
  const graphs::Graph& g = units.simulator().graph();
  for (graphs::OpId op : g.topo_order()) {
    const int32_t u = units.unit_of(op);
    if (where[u] >= 0) continue;
    auto preds = g.predecessors(op);
    where[u] = preds.empty() ? fallback : where[units.unit_of(preds[0])];
  }
}

/**
 * GPUs in the first GPU's node: it and the GPUs after it whose route from it is as fast as its fastest
 * (NVLink or NVSwitch inside a DGX node, where the nodes presets number GPUs node by node).
 */
int32_t first_node_gpus(const sim::Cluster& c, const std::vector<int32_t>& gpus) {
  double fastest = 0;
  for (size_t i = 1; i < gpus.size(); ++i) fastest = std::max(fastest, c.route_bandwidth_bytes_per_s(gpus[0], gpus[i]));
  size_t n = 1;
  while (n < gpus.size() && c.route_bandwidth_bytes_per_s(gpus[0], gpus[n]) >= fastest) ++n;
  return static_cast<int32_t>(n);
}

std::vector<double> speeds_of(const Units& units, const std::vector<int32_t>& gpus) {
  std::vector<double> all = device_speeds(units), out;
  for (int32_t d : gpus) out.push_back(all[d]);
  return out;
}

std::vector<int32_t> place_by_rule(const Units& units, Rule rule, nlohmann::json& info) {
  const std::vector<int32_t> gpus = gpus_of(units.simulator().cluster());
  const int32_t n = units.num_units(), G = static_cast<int32_t>(gpus.size());
  std::vector<int32_t> where(n, -1);
  const std::vector<int32_t> layer = unit_layers(units);
  const int32_t head = n == 0 ? 0 : *std::max_element(layer.begin(), layer.end());
  auto mean_gpu_s = [&](int32_t u) {
    double sum = 0;
    for (int32_t d : gpus) sum += units.allowed(u, d) ? units.time_s(u, d) : units.mean_time_s(u);
    return sum / G;
  };
  switch (rule) {
    case Rule::layer_wise: {
      const std::vector<int32_t> shard = unit_shards(units, "softmax/shard");
      const int64_t shards = n == 0 ? 0 : *std::max_element(shard.begin(), shard.end()) + 1;
      for (int32_t u = 0; u < n; ++u)
        if (shard[u] >= 0)  // slice k of K on GPU k * G / K: every GPU holds a share of the vocabulary
          where[u] = gpus[shard[u] * G / shards];
        else if (layer[u] >= 0)
          where[u] = layer[u] >= head ? gpus[G - 1] : gpus[static_cast<int64_t>(layer[u]) * G / std::max(head, 1)];
      break;
    }
    case Rule::one_gpu: {
      std::vector<double> speed = speeds_of(units, gpus);
      int32_t best = static_cast<int32_t>(std::max_element(speed.begin(), speed.end()) - speed.begin());
      std::fill(where.begin(), where.end(), gpus[best]);
      break;
    }
    case Rule::layer_blocks: {
      std::map<int32_t, double> weight_of_layer;
      for (int32_t u = 0; u < n; ++u)
        if (layer[u] >= 0) weight_of_layer[layer[u]] += mean_gpu_s(u);
      std::vector<double> weights;
      for (const auto& [l, w] : weight_of_layer) weights.push_back(w);
      std::vector<int32_t> block = contiguous_blocks(weights, speeds_of(units, gpus));
      std::map<int32_t, int32_t> device_of_layer;
      int32_t i = 0;
      for (const auto& [l, w] : weight_of_layer) device_of_layer[l] = gpus[block[i++]];
      for (int32_t u = 0; u < n; ++u)
        if (layer[u] >= 0) where[u] = device_of_layer[layer[u]];
      break;
    }
    case Rule::pipeline: {
      // Megatron-LM's tensor x pipeline x data parallelism: a stage's `tp` GPUs of one node hold shard g of
      // each of its layers on its g-th GPU; stages of equal layer counts, embeddings in the first, head in the
      // last; GPUs left over (more than layers x tp) form data-parallel replicas of the pipeline, micro-batch
      // r on replica r mod R (weights on the first, their copies and gradients sent over the weight ops'
      // edges). Micro-batch r's ops outside the shards (norms, residual adds, the all-reduce's sum) go on
      // its stage's (r mod tp)-th GPU, spreading what Megatron's sequence parallelism spreads.
      const std::vector<int32_t> shard = unit_shards(units, "shard"), micro_batch = unit_shards(units, "mb");
      const int32_t shards = 1 + std::max(0, n == 0 ? 0 : *std::max_element(shard.begin(), shard.end()));
      const int32_t copies = 1 + std::max(0, n == 0 ? 0 : *std::max_element(micro_batch.begin(), micro_batch.end()));
      const int32_t node = first_node_gpus(units.simulator().cluster(), gpus);
      const int32_t tp = shards > 1 && G % shards == 0 && node % shards == 0 ? shards : 1;
      const int32_t layers = std::max(head, 1), stages = std::min(G / tp, layers);
      const int32_t replicas = std::min(G / (tp * stages), copies);
      for (int32_t u = 0; u < n; ++u)
        if (layer[u] >= 0) {
          const int64_t stage = layer[u] >= head ? stages - 1 : static_cast<int64_t>(layer[u]) * stages / layers;
          const int32_t r = std::max(micro_batch[u], 0), g = shard[u] >= 0 ? shard[u] : r;
          where[u] = gpus[(static_cast<int64_t>(r % replicas) * stages + stage) * tp + g % tp];
        }
      info["stages"] = stages;
      info["tensor_parallel"] = tp;
      info["data_parallel"] = replicas;
      info["layers_per_stage"] = fmt::format("{}-{}", layers / stages, (layers + stages - 1) / stages);
      break;
    }
    case Rule::topo_blocks: {
      std::vector<double> weights;  // units are in topological order of their first ops
      for (int32_t u = 0; u < n; ++u) weights.push_back(mean_gpu_s(u));
      std::vector<int32_t> block = contiguous_blocks(weights, speeds_of(units, gpus));
      for (int32_t u = 0; u < n; ++u) where[u] = gpus[block[u]];
      break;
    }
  }
  fill_unplaced(units, where, gpus[0]);
  for (int32_t u = 0; u < n; ++u)  // pinned elsewhere: the fastest device of the pinned kind
    if (!units.allowed(u, where[u])) where[u] = units.allowed_devices(u)[0];
  return where;
}

/** The msr instance a split file belongs to: the option, else ../throughput-inputs/LayerGraphs/<name>.json. */
std::string instance_path(const nlohmann::json& options, const std::string& split_file) {
  if (options.contains("instance")) return options["instance"].get<std::string>();
  std::filesystem::path p(split_file);
  std::string stem = p.stem().string();
  if (stem.ends_with("_expert")) stem.resize(stem.size() - 7);
  return (p.parent_path().parent_path() / "throughput-inputs" / "LayerGraphs" / (stem + ".json")).string();
}

std::vector<int32_t> place_by_split(const PlaceRequest& request, const std::string& split_file) {
  std::error_code ec;
  if (!std::filesystem::exists(split_file, ec))
    throw Error(fmt::format("placer human_expert: split file {} not found (option \"split_file\")", split_file));
  const std::string instance_file = instance_path(request.options, split_file);
  if (!std::filesystem::exists(instance_file, ec))
    throw Error(fmt::format("placer human_expert: msr instance {} of split {} not found: give its path as option "
                            "\"instance\"",
                            instance_file, split_file));
  graphs::MsrInstance instance = graphs::read_msr(instance_file);
  const graphs::Graph& g = request.graph();
  if (instance.graph.num_ops() != g.num_ops())
    throw Error(fmt::format("placer human_expert: instance {} has {} ops but graph \"{}\" has {}: place the graph read "
                            "from that instance",
                            instance_file, instance.graph.num_ops(), g.name(), g.num_ops()));
  graphs::MsrSplit split = graphs::read_msr_split(split_file, instance);
  const sim::Cluster& c = request.cluster();
  std::vector<int32_t> accelerators, cpus;
  for (int32_t d = 0; d < c.num_devices(); ++d) (c.device(d).kind == "cpu" ? cpus : accelerators).push_back(d);
  auto assign = [&](const std::vector<std::vector<graphs::OpId>>& parts, const std::vector<int32_t>& devices,
                    std::string_view what, std::vector<int32_t>& where) {
    for (size_t i = 0; i < parts.size(); ++i) {
      if (parts[i].empty()) continue;
      if (i >= devices.size())
        throw Error(fmt::format("placer human_expert: split {} uses {} {} but cluster \"{}\" has {} of them",
                                split_file, what, i, c.name(), devices.size()));
      for (graphs::OpId op : parts[i]) where[op] = devices[i];
    }
  };
  std::vector<int32_t> where(g.num_ops(), -1);
  assign(split.accelerators, accelerators, "accelerator", where);
  assign(split.cpus, cpus, "cpu", where);
  for (graphs::OpId op : g.topo_order())
    if (where[op] < 0) {
      auto preds = g.predecessors(op);
      where[op] = preds.empty() ? (accelerators.empty() ? 0 : accelerators[0]) : where[preds[0]];
    }
  return where;
}

class HumanExpertPlacer final : public Placer {
 public:
  PlaceResult place(const PlaceRequest& request) const override {
    check_options("human_expert", request.options, {"split_file", "instance"});
    for (const char* key : {"split_file", "instance"})
      if (request.options.contains(key) && !request.options[key].is_string())
        throw Error(fmt::format("placer human_expert options: \"{}\" is {}, expected a file path", key,
                                request.options[key].dump()));
    if (request.options.contains("split_file")) {
      const std::string file = request.options["split_file"].get<std::string>();
      return {place_by_split(request, file), {{"rule", "msr split file"}, {"split_file", file}}};
    }
    if (request.options.contains("instance"))
      throw Error("placer human_expert options: \"instance\" only applies with \"split_file\"");
    Units units(request.simulator);
    const Rule rule = rule_of(request.graph().name());
    nlohmann::json info = {{"rule", rule_name(rule)}};
    std::vector<int32_t> where = place_by_rule(units, rule, info);
    return {units.expand(where), std::move(info)};
  }
};

}  // namespace

std::unique_ptr<Placer> make_human_expert_placer() { return std::make_unique<HumanExpertPlacer>(); }

}  // namespace placelab::policy
