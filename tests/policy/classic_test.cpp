// Every classic placer on zoo graphs and clusters: valid placements (the simulator's check) that keep
// colocation classes together and pinned ops on their kinds, determinism with seeds, memory-aware placers
// under tight memory, and annealing never worse than its start.
#include <algorithm>
#include <map>
#include <set>

#include <catch2/catch.hpp>
#include <unistd.h>
#include <filesystem>

#include "graphs/error.h"
#include "graphs/msr.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "policy/memory_verdict.h"
#include "policy/placer.h"
#include "sim/engine.h"
#include "sim/pipeline.h"
#include "sim/presets.h"

using namespace placelab;

namespace {

// The classic placers of this file's scope (others may be registered too).
const std::vector<std::string> kClassic = {"single_device", "round_robin", "random", "human_expert", "metis",
                                           "scotch", "heft", "m_topo", "m_etf", "m_sct", "annealing"};

std::vector<std::string> registered_classic() {
  std::vector<std::string> out;
  for (const auto& name : kClassic)
    for (const auto& p : policy::placers())
      if (p.name == name) out.push_back(name);
  return out;
}

policy::PlaceResult run_placer(const std::string& name, const sim::Simulator& s, uint64_t seed = 1,
                               nlohmann::json options = nlohmann::json::object()) {
  if (name == "annealing" && options.empty()) options = {{"steps", 30}};
  policy::PlaceRequest request{s, options, seed, {}};
  return policy::make_placer(name)->place(request);
}

void check_valid(const sim::Simulator& s, const std::vector<int32_t>& device_of, const std::string& name) {
  INFO("placer " << name << " on " << s.graph().name() << " / " << s.cluster().name());
  REQUIRE_NOTHROW(s.check_placement(device_of));
  std::map<int32_t, int32_t> device_of_class;
  for (graphs::OpId op = 0; op < s.graph().num_ops(); ++op) {
    int32_t c = s.graph().colocation(op);
    if (c == graphs::kNoClass) continue;
    auto [it, fresh] = device_of_class.emplace(c, device_of[op]);
    if (!fresh) REQUIRE(it->second == device_of[op]);
  }
}

// `g` with every 7th op (from op 3) pinned to `kind`.
graphs::Graph with_pins(const graphs::Graph& g, const std::string& kind) {
  graphs::GraphBuilder b(g.name() + "_pinned");
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    graphs::OpSpec spec = g.op_spec(op);
    if (op % 7 == 3) spec.pinned_kind = kind;
    b.add_op(std::move(spec));
  }
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) b.add_edge(g.edge_spec(e));
  return std::move(b).build();
}

}  // namespace

TEST_CASE("policy::classic placers: valid placements keeping colocation and pins", "[policy]") {
  std::vector<graphs::Graph> graphs_;
  graphs_.push_back(graphs::zoo::make_model("inception_v3", {{"image_size", 75}}));
  graphs_.push_back(graphs::expand_training(graphs::zoo::make_model("gnmt", {{"layers", 2}, {"steps", 2}})));
  graphs_.push_back(graphs::zoo::make_model("wavenet", {{"layers", 8}, {"seq_len", 1000}}));
  graphs_.push_back(graphs::zoo::make_model("random_dag", {{"ops", 300}}));
  const sim::Cluster cpu_gpu = sim::make_preset("cpu-gpu-2");
  graphs_.push_back(with_pins(graphs::expand_training(graphs::zoo::make_model("random_dag", {{"ops", 80}})),
                              cpu_gpu.device(0).kind));
  const std::vector<sim::Cluster> clusters = {sim::make_preset("v100-nvlink-4"), cpu_gpu, sim::make_preset("k80-2")};
  const auto names = registered_classic();
  REQUIRE(names.size() >= 7);
  for (const auto& g : graphs_)
    for (const auto& c : clusters) {
      if (g.name().ends_with("_pinned") && c.name() != cpu_gpu.name()) continue;  // no device of the pinned kind
      sim::Simulator s(g, c);
      for (const auto& name : names) check_valid(s, run_placer(name, s).device_of, name);
    }
}

TEST_CASE("policy::classic placers: the same seed gives the same placement", "[policy]") {
  const graphs::Graph g = graphs::zoo::make_model("random_dag", {{"ops", 200}});
  const sim::Cluster c = sim::make_preset("v100-pcie-4");
  sim::Simulator s(g, c);
  for (const auto& name : registered_classic())
    CHECK(run_placer(name, s, 7).device_of == run_placer(name, s, 7).device_of);
  CHECK(run_placer("random", s, 7).device_of != run_placer("random", s, 8).device_of);
}

TEST_CASE("policy::classic placers: memory-aware placers avoid OOM when a placement fits", "[policy]") {
  // 12 ops in a chain, 3 GB of weights each (36 GB), on 4 x 16 GB V100s: one device cannot hold it.
  graphs::GraphBuilder b("heavy_chain");
  for (int i = 0; i < 12; ++i)
    b.add_op({.name = "op" + std::to_string(i), .type = "MatMul", .flops = 1e11, .output_bytes = 1e6,
              .param_bytes = 3e9});
  for (int i = 0; i + 1 < 12; ++i) b.add_edge(i, i + 1, 1e6);
  const graphs::Graph g = std::move(b).build();
  const sim::Cluster c = sim::make_preset("v100-nvlink-4");
  REQUIRE(c.device(0).memory_bytes < 36e9);
  sim::Simulator s(g, c);
  CHECK(s.simulate(run_placer("heft", s).device_of).oom);  // the case needs memory awareness
  for (const auto& name : {"m_topo", "m_etf", "m_sct"}) {
    INFO(name);
    policy::PlaceResult r = run_placer(name, s);
    CHECK(r.info["fits_memory"] == true);
    CHECK_FALSE(s.simulate(r.device_of).oom);
  }
  // single_device: no GPU holds it, so the fastest device is reported as not fitting; beside a CPU with
  // enough memory, the (slower) CPU is the fastest device that fits.
  CHECK(run_placer("single_device", s).info["fits_memory"] == false);
  const sim::Cluster cpu_gpu = sim::make_preset("cpu-gpu-2");
  REQUIRE(cpu_gpu.device(0).memory_bytes > 36e9);
  sim::Simulator host(g, cpu_gpu);
  policy::PlaceResult r = run_placer("single_device", host);
  CHECK(r.info["fits_memory"] == true);
  CHECK(r.info["device"] == cpu_gpu.device(0).name);
  CHECK_FALSE(host.simulate(r.device_of).oom);
}

TEST_CASE("policy: memory-aware placers fit a decoder's training step where single_device and HEFT do not",
          "[policy]") {
  // GPU 0 is 4x faster than the other three but holds 60 MB, they 150 MB; the step needs about 215 MB on
  // one device, so nothing holds it alone, and HEFT, blind to memory, piles work on the fast GPU.
  sim::ClusterSpec spec = sim::make_preset("h100-4").spec();
  for (size_t d = 0; d < spec.devices.size(); ++d) {
    spec.devices[d].memory_bytes = d == 0 ? 60e6 : 150e6;
    if (d == 0) continue;
    spec.devices[d].peak_flops_per_s /= 4;
    spec.devices[d].memory_bandwidth_bytes_per_s /= 4;
  }
  const sim::Cluster c(spec);
  auto decoder = [](int64_t micro_batches) {
    return graphs::expand_training(graphs::zoo::make_model(
        "llama", {{"layers", 4}, {"hidden", 256}, {"heads", 4}, {"kv_heads", 2}, {"ffn", 512}, {"seq_len", 256},
                  {"vocab", 1000}, {"micro_batches", micro_batches}, {"batch", 8}}));
  };
  // Four micro-batches for the list schedulers and GDP; the DP enumerates ideals, which micro-batches multiply
  // past its limit, so it places the one-micro-batch step.
  const graphs::Graph piped = decoder(4), single = decoder(1);
  const std::vector<std::pair<const graphs::Graph*, std::vector<std::string>>> cases = {
      {&piped, {"m_etf", "m_sct", "gdp"}}, {&single, {"m_etf", "dp"}}};
  for (const auto& [g, aware] : cases) {
    sim::Simulator s(*g, c);
    for (const auto& blind : {"single_device", "heft"}) {
      INFO(blind << " on " << g->num_ops() << " ops");
      const sim::SimResult r = s.simulate(run_placer(blind, s).device_of);
      REQUIRE(r.oom);  // the case needs memory awareness
      nlohmann::json info;
      policy::add_memory_verdict(info, r, c);
      CHECK(info["oom"] == true);
      CHECK(info["oom_excess_bytes"].get<double>() > 0);
      CHECK(info["oom_devices"].contains(c.device(0).name));
    }
    for (const auto& name : aware) {
      INFO(name << " on " << g->num_ops() << " ops");
      nlohmann::json options = name == "gdp" ? nlohmann::json{{"steps", 10}} : nlohmann::json::object();
      const sim::SimResult r = s.simulate(run_placer(name, s, 1, options).device_of);
      CHECK_FALSE(r.oom);
      nlohmann::json info;
      policy::add_memory_verdict(info, r, c);
      CHECK(info == nlohmann::json{{"oom", false}});
    }
  }
}

TEST_CASE("policy::classic placers: bad options are errors naming the placer and key", "[policy]") {
  const graphs::Graph g = graphs::zoo::make_model("random_dag", {{"ops", 20}});
  const sim::Cluster c = sim::make_preset("v100-nvlink-2");
  sim::Simulator s(g, c);
  CHECK_THROWS_WITH(run_placer("heft", s, 1, {{"bogus", 1}}), Catch::Contains("bogus") && Catch::Contains("heft"));
  CHECK_THROWS_WITH(policy::make_placer("no_such"), Catch::Contains("round_robin"));
}

TEST_CASE("policy::split_placer_names: commas separate, blanks and empty items are dropped", "[policy]") {
  CHECK(policy::split_placer_names("heft, metis,,m_etf ") == std::vector<std::string>{"heft", "metis", "m_etf"});
  CHECK(policy::split_placer_names("heft") == std::vector<std::string>{"heft"});
  CHECK(policy::split_placer_names(" , ").empty());
  CHECK(policy::split_placer_names("").empty());
}

TEST_CASE("policy::annealing: never worse than its start, and it searches", "[policy]") {
  const graphs::Graph g = graphs::expand_training(graphs::zoo::make_model("random_dag", {{"ops", 150}}));
  const sim::Cluster c = sim::make_preset("v100-pcie-4");
  sim::Simulator s(g, c);
  policy::PlaceResult r = run_placer("annealing", s, 3, {{"steps", 200}, {"temperature", 0.02}});
  const double step_s = s.simulate(r.device_of).step_time_s;
  CHECK(r.info["steps"] == 200);
  CHECK(step_s <= r.info["start_cost_s"].get<double>() + 1e-12);
  CHECK(step_s == Approx(r.info["best_cost_s"].get<double>()));
  CHECK(step_s <= s.simulate(run_placer("heft", s).device_of).step_time_s + 1e-12);
  CHECK(r.info["accepted"].get<int64_t>() > 0);
  CHECK_THROWS_WITH(run_placer("annealing", s, 1, {{"steps", -1}}), Catch::Contains("steps"));
}

TEST_CASE("policy::annealing: stopping rejected replays early changes nothing but the time", "[policy]") {
  // At several temperatures (uphill moves accepted often, rarely, never) and on an out-of-memory cluster
  // (the cost is then more than the step time the stop looks at).
  const graphs::Graph g = graphs::expand_training(graphs::zoo::make_model("random_dag", {{"ops", 120}}));
  int64_t stopped = 0;
  for (const auto& [preset, temperature] : std::vector<std::pair<const char*, double>>{
           {"v100-nvlink-4", 0.02}, {"v100-nvlink-4", 0.002}, {"v100-nvlink-4", 0.0}, {"k80-8", 0.01}}) {
    const sim::Cluster c = sim::make_preset(preset);
    sim::Simulator s(g, c);
    const nlohmann::json options = {{"steps", 300}, {"temperature", temperature}};
    nlohmann::json full_options = options;
    full_options["stop_early"] = false;
    const policy::PlaceResult early = run_placer("annealing", s, 5, options);
    const policy::PlaceResult full = run_placer("annealing", s, 5, full_options);
    CHECK(early.device_of == full.device_of);
    for (const char* key : {"best_cost_s", "accepted", "improvements", "steps"}) CHECK(early.info[key] == full.info[key]);
    CHECK(full.info["stopped_early"] == 0);
    CHECK(early.info["stopped_early"].get<int64_t>() <= 300 - early.info["accepted"].get<int64_t>());
    stopped += early.info["stopped_early"].get<int64_t>();
  }
  CHECK(stopped > 0);  // the stop happens
}

TEST_CASE("policy::human_expert: the papers' rules per zoo model", "[policy]") {
  const sim::Cluster c = sim::make_preset("v100-nvlink-4");
  SECTION("GNMT layer-wise, attention on the last GPU, softmax slices over all; training ops follow") {
    const graphs::Graph fwd = graphs::zoo::make_model("gnmt", {{"layers", 4}, {"steps", 3}});  // 8 slices
    for (const graphs::Graph& g : {fwd, graphs::expand_training(fwd)}) {
      sim::Simulator s(g, c);
      auto where = run_placer("human_expert", s).device_of;
      for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
        const std::string& name = g.op_name(op);
        INFO(name);
        if (name.starts_with("softmax/shard"))  // slice k of 8 on GPU k * 4 / 8
          CHECK(where[op] == (name[13] - '0') / 2);
        else if (g.layer(op) >= 0)
          CHECK(where[op] == std::min(g.layer(op), 3));
      }
    }
  }
  SECTION("Inception-v3 on one GPU") {
    const graphs::Graph g = graphs::zoo::make_model("inception_v3", {{"image_size", 75}});
    sim::Simulator s(g, c);
    auto where = run_placer("human_expert", s).device_of;
    CHECK(std::set<int32_t>(where.begin(), where.end()).size() == 1);
  }
  SECTION("BERT in contiguous balanced blocks of layers") {
    const graphs::Graph g = graphs::zoo::make_model("bert", {{"layers", 8}});
    sim::Simulator s(g, c);
    auto where = run_placer("human_expert", s).device_of;
    std::map<int32_t, std::set<int32_t>> devices_of_layer;
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) devices_of_layer[g.layer(op)].insert(where[op]);
    int32_t last = 0;
    for (const auto& [layer, devices] : devices_of_layer) {
      CHECK(devices.size() == 1);  // a layer is never split
      CHECK(*devices.begin() >= last);  // blocks are contiguous and in order
      last = *devices.begin();
    }
    CHECK(last == 3);
    CHECK(std::set<int32_t>(where.begin(), where.end()).size() == 4);
  }
}

TEST_CASE("policy::human_expert: decoders in equal pipeline stages, shards tensor-parallel in a node", "[policy]") {
  auto decoder = [](int64_t layers, int64_t shards) {
    return graphs::expand_training(graphs::zoo::make_model(
        "llama", {{"layers", layers}, {"hidden", 64}, {"heads", 4}, {"kv_heads", 4}, {"ffn", 128}, {"seq_len", 16},
                  {"vocab", 100}, {"shards", shards}, {"micro_batches", 2}, {"batch", 2}}));
  };
  // The shard or micro-batch an op belongs to from its name (".../shard<k>/...", "mb<r>/..."), or -1.
  auto index_of = [](const std::string& name, const std::string& what) {
    const size_t at = ("/" + name).find("/" + what);
    return at == std::string::npos ? -1 : name[at + what.size()] - '0';
  };
  SECTION("16 layers on 8 GPUs: two layers a stage, embeddings first, head last, micro-batches with their layer") {
    const graphs::Graph g = decoder(16, 1);
    const sim::Cluster c = sim::make_preset("h100-8");
    sim::Simulator s(g, c);
    auto r = run_placer("human_expert", s);
    CHECK(r.info["stages"] == 8);
    CHECK(r.info["tensor_parallel"] == 1);
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
      INFO(g.op_name(op));
      if (g.layer(op) >= 0) CHECK(r.device_of[op] == std::min(g.layer(op) / 2, 7));
    }
    const graphs::OpId embedding = g.find_op("mb1/embeddings/token/Embedding"), head = g.find_op("mb1/head/MatMul");
    REQUIRE(embedding >= 0);
    REQUIRE(head >= 0);
    CHECK(r.device_of[embedding] == 0);
    CHECK(r.device_of[head] == 7);
  }
  SECTION("8 layers in 2 shards on 2 nodes of 8: stage l on GPUs 2l and 2l + 1, shard k of it on GPU 2l + k, "
          "micro-batch r's other ops on GPU 2l + r") {
    const graphs::Graph g = decoder(8, 2);
    const sim::Cluster c = sim::make_preset("h100-nodes-2x8");
    sim::Simulator s(g, c);
    auto r = run_placer("human_expert", s);
    CHECK(r.info["stages"] == 8);
    CHECK(r.info["tensor_parallel"] == 2);
    int32_t sharded = 0;
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
      INFO(g.op_name(op));
      const int32_t layer = g.layer(op), shard = index_of(g.op_name(op), "shard");
      const int32_t in_group = shard >= 0 ? shard : std::max(index_of(g.op_name(op), "mb"), 0);
      if (layer < 0) continue;
      CHECK(r.device_of[op] == 2 * std::min(layer, 7) + in_group);  // the head (layer 8) with the last stage
      sharded += shard >= 0;
    }
    CHECK(sharded > 0);
  }
  SECTION("4 layers on 8 GPUs: two data-parallel replicas of a 4-stage pipeline, micro-batch r on replica r mod 2") {
    const graphs::Graph g = decoder(4, 1);
    const sim::Cluster c = sim::make_preset("h100-8");
    sim::Simulator s(g, c);
    auto r = run_placer("human_expert", s);
    CHECK(r.info["stages"] == 4);
    CHECK(r.info["data_parallel"] == 2);
    for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
      INFO(g.op_name(op));
      const int32_t mb = index_of(g.op_name(op), "mb");
      if (g.layer(op) >= 0) CHECK(r.device_of[op] == 4 * std::max(mb, 0) + std::min(g.layer(op), 3));
    }
  }
  SECTION("shards that do not divide a node's GPUs stay on their stage's GPU") {
    const graphs::Graph g = decoder(4, 4);
    const sim::Cluster c = sim::make_preset("h100-nodes-2x2");  // nodes of 2 GPUs: 4 shards do not fit in one
    sim::Simulator s(g, c);
    auto r = run_placer("human_expert", s);
    CHECK(r.info["tensor_parallel"] == 1);
    for (graphs::OpId op = 0; op < g.num_ops(); ++op)
      if (g.layer(op) >= 0) CHECK(r.device_of[op] == std::min(g.layer(op), 3));
  }
}

TEST_CASE("policy::human_expert: msr split files give the README's expert loads", "[policy]") {
  const std::string root = std::string(PLACELAB_SHARED_DATA) + "/msr-dnn-partitioning/";
  // README table, column "expert" (milliseconds per sample under the max-load model).
  const std::vector<std::pair<std::string, double>> cases = {
      {"gnmt_inference", 46.2085}, {"resnet50_inference", 43.9183}, {"bert24_training", 49.4049}};
  for (const auto& [name, expert_ms] : cases) {
    INFO(name);
    graphs::MsrInstance instance = graphs::read_msr(root + "throughput-inputs/LayerGraphs/" + name + ".json");
    const sim::Cluster c = sim::msr_cluster(instance);
    sim::Simulator s(instance.graph, c);
    auto r = run_placer("human_expert", s, 1, {{"split_file", root + "human-experts/" + name + "_expert.json"}});
    REQUIRE_NOTHROW(s.check_placement(r.device_of));
    CHECK(sim::max_load(s, r.device_of).max_load_s / graphs::kMsrSecondsPerUnit == Approx(expert_ms).epsilon(1e-4));
  }
  graphs::MsrInstance other = graphs::read_msr(root + "throughput-inputs/LayerGraphs/resnet50_inference.json");
  const sim::Cluster c = sim::msr_cluster(other);
  sim::Simulator s(other.graph, c);
  CHECK_THROWS_WITH(run_placer("human_expert", s, 1, {{"split_file", root + "human-experts/gnmt_inference_expert.json"}}),
                    Catch::Contains("ops"));
  CHECK_THROWS_WITH(run_placer("human_expert", s, 1, {{"split_file", "/nonexistent/x_expert.json"}}),
                    Catch::Contains("split file /nonexistent/x_expert.json not found"));
  // A split whose instance is not beside it (nor given) names the instance option.
  const auto lone = std::filesystem::temp_directory_path() / ("placelab_lone_split_" + std::to_string(::getpid()));
  std::filesystem::create_directories(lone);
  std::filesystem::copy_file(root + "human-experts/gnmt_inference_expert.json", lone / "x_expert.json");
  CHECK_THROWS_WITH(run_placer("human_expert", s, 1, {{"split_file", (lone / "x_expert.json").string()}}),
                    Catch::Contains("give its path as option \"instance\""));
  std::filesystem::remove_all(lone);
}
