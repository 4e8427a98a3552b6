// The msr-fiddle/dnn-partitioning importer on every published instance and expert split, checked
// against the raw JSON and against the README's expert max-load values, plus its bad-input errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "graphs/msr.h"
#include "tests/test_util.h"

using namespace placelab;
using namespace placelab::graphs;
using placelab::testing::replace_once;
using nlohmann::json;

namespace {

const std::string kMsrDir = std::string(PLACELAB_SHARED_DATA) + "/msr-dnn-partitioning";

std::vector<std::string> instance_files() {
  std::vector<std::string> files;
  for (const char* folder : {"LayerGraphs", "OperatorGraphs"})
    for (const auto& entry : std::filesystem::directory_iterator(kMsrDir + "/throughput-inputs/" + folder))
      if (entry.path().extension() == ".json") files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The README's model, in the file's units (milliseconds): an accelerator's load is the sum of its
// nodes' fpgaLatency plus, for each node whose output goes to another device, the node's cost once
// on the sender and once on each distinct receiving accelerator; a CPU's load is the sum of its
// nodes' cpuLatency and it pays no communication. The objective is the maximum load.
double max_load_ms(const MsrInstance& instance, const MsrSplit& split) {
  const Graph& g = instance.graph;
  const auto num_acc = static_cast<int32_t>(split.accelerators.size());
  std::vector<int32_t> device_of(g.num_ops(), -1);
  for (size_t d = 0; d < split.accelerators.size(); ++d)
    for (OpId op : split.accelerators[d]) device_of[op] = static_cast<int32_t>(d);
  for (size_t d = 0; d < split.cpus.size(); ++d)
    for (OpId op : split.cpus[d]) device_of[op] = num_acc + static_cast<int32_t>(d);
  const int32_t acc = g.measured_kind_index(kMsrAcceleratorKind), cpu = g.measured_kind_index(kMsrCpuKind);
  std::vector<double> load_s(split.accelerators.size() + split.cpus.size(), 0.0);
  for (OpId op = 0; op < g.num_ops(); ++op) {
    const int32_t d = device_of[op];
    load_s[d] += g.measured_s(op, d < num_acc ? acc : cpu);
    std::set<int32_t> receivers;
    for (OpId next : g.successors(op))
      if (device_of[next] != d) receivers.insert(device_of[next]);
    if (receivers.empty()) continue;
    const double cost_s = g.edge_comm_s(g.out_edges(op)[0]);
    if (d < num_acc) load_s[d] += cost_s;
    for (int32_t r : receivers)
      if (r < num_acc) load_s[r] += cost_s;
  }
  return *std::max_element(load_s.begin(), load_s.end()) / kMsrSecondsPerUnit;
}

std::string msr_error(const std::string& text) {
  try {
    msr_from_json(json::parse(text), "bad.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// A valid three-node training-style instance; tests break one thing at a time.
const char* kSmall = R"({"maxSizePerFPGA": 100, "maxFPGAs": 2, "maxCPUs": 1,
  "nodes": [
    {"id": 10, "name": "Conv1", "supportedOnFpga": 1, "cpuLatency": 5, "fpgaLatency": 0.5,
     "isBackwardNode": 0, "colorClass": 3, "size": 40, "layerId": 2},
    {"id": 20, "supportedOnFpga": false, "cpuLatency": 2.5, "fpgaLatency": 0.25, "isBackwardNode": false},
    {"id": 30, "name": "Conv1_Grad/ConvGrad_0", "supportedOnFpga": true, "cpuLatency": 7, "fpgaLatency": 1.75,
     "isBackwardNode": true, "colorClass": 3, "size": 40}],
  "edges": [
    {"sourceId": 10, "destId": 20, "cost": 0.125, "size": 64},
    {"sourceId": 10, "destId": 30, "cost": 0.125},
    {"sourceId": 20, "destId": 30, "cost": 1}]})";

}  // namespace

TEST_CASE("graphs::msr_from_json: maps every field of a small instance", "[graphs]") {
  MsrInstance inst = msr_from_json(json::parse(kSmall), "dir/small.json");
  const Graph& g = inst.graph;
  CHECK(g.name() == "small");
  CHECK(inst.max_accelerators == 2);
  CHECK(inst.max_cpus == 1);
  CHECK(inst.accelerator_memory_bytes == 100);
  REQUIRE(g.num_ops() == 3);
  REQUIRE(g.num_edges() == 3);
  CHECK(inst.msr_id == std::vector<int64_t>{10, 20, 30});
  CHECK(inst.op_of_msr_id(30) == 2);
  CHECK(inst.op_of_msr_id(99) == -1);

  CHECK(g.op_name(0) == "Conv1");
  CHECK(g.op_type(0) == "Conv");
  CHECK(g.op_name(1) == "node20");
  CHECK(g.op_type(1) == "MsrNode");
  CHECK(g.op_type(2) == "ConvGrad");
  CHECK(g.phase(0) == Phase::forward);
  CHECK(g.phase(1) == Phase::forward);
  CHECK(g.phase(2) == Phase::backward);
  CHECK(g.colocation(0) == 3);
  CHECK(g.colocation(1) == kNoClass);
  CHECK(g.colocation(2) == 3);
  CHECK(g.layer(0) == 2);
  CHECK(g.layer(1) == kNoClass);
  CHECK(g.param_bytes(0) == 40);
  CHECK(g.param_bytes(1) == 0);
  CHECK(g.pinned_kind(0).empty());
  CHECK(g.pinned_kind(1) == "cpu");
  const int32_t cpu = g.measured_kind_index("cpu"), acc = g.measured_kind_index("accelerator");
  REQUIRE(cpu >= 0);
  REQUIRE(acc >= 0);
  CHECK(g.measured_s(1, cpu) == 2.5 * 1e-3);
  CHECK(g.measured_s(2, acc) == 1.75 * 1e-3);
  CHECK(g.edge_bytes(0) == 64);
  CHECK(g.edge_bytes(1) == 0);
  CHECK(g.edge_comm_s(0) == 0.125 * 1e-3);
  CHECK(g.edge_comm_s(2) == 1e-3);
}

TEST_CASE("graphs::read_msr: every published instance survives import exactly", "[graphs]") {
  const auto files = instance_files();
  REQUIRE(files.size() == 12);
  for (const std::string& path : files) {
    INFO(path);
    json raw = io::read_json_file(path);
    MsrInstance inst = read_msr(path);
    const Graph& g = inst.graph;
    REQUIRE(g.num_ops() == static_cast<int32_t>(raw["nodes"].size()));
    REQUIRE(g.num_edges() == static_cast<int32_t>(raw["edges"].size()));
    CHECK(inst.max_accelerators == raw["maxFPGAs"].get<int>());
    CHECK(inst.max_cpus == raw["maxCPUs"].get<int>());
    CHECK(inst.accelerator_memory_bytes == raw["maxSizePerFPGA"].get<double>());
    const int32_t cpu = g.measured_kind_index("cpu"), acc = g.measured_kind_index("accelerator");
    double raw_fpga = 0, raw_cpu = 0, raw_size = 0, got_fpga = 0, got_cpu = 0;
    int64_t raw_backward = 0, mismatches = 0;
    for (size_t i = 0; i < raw["nodes"].size(); ++i) {
      const json& node = raw["nodes"][i];
      const auto op = static_cast<OpId>(i);
      raw_fpga += node["fpgaLatency"].get<double>();
      raw_cpu += node["cpuLatency"].get<double>();
      raw_size += node.value("size", 0.0);
      got_fpga += g.measured_s(op, acc);
      got_cpu += g.measured_s(op, cpu);
      bool backward = node["isBackwardNode"].is_boolean() ? node["isBackwardNode"].get<bool>()
                                                          : node["isBackwardNode"].get<int>() == 1;
      raw_backward += backward;
      // Exactly value * 1e-3, node by node (counted, so a failure does not print thousands of lines).
      mismatches += inst.msr_id[op] != node["id"].get<int64_t>() ||
                    g.measured_s(op, acc) != node["fpgaLatency"].get<double>() * kMsrSecondsPerUnit ||
                    g.measured_s(op, cpu) != node["cpuLatency"].get<double>() * kMsrSecondsPerUnit ||
                    g.param_bytes(op) != node.value("size", 0.0) ||
                    g.colocation(op) != node.value("colorClass", kNoClass) ||
                    (g.phase(op) == Phase::backward) != backward || g.op_name(op) != node["name"].get<std::string>();
    }
    CHECK(mismatches == 0);
    CHECK(got_fpga / kMsrSecondsPerUnit == Approx(raw_fpga).epsilon(1e-12));
    CHECK(got_cpu / kMsrSecondsPerUnit == Approx(raw_cpu).epsilon(1e-12));
    GraphStats s = g.stats();
    CHECK(s.param_bytes == Approx(raw_size).epsilon(1e-12));
    CHECK(s.backward_ops == raw_backward);
    CHECK(s.forward_ops == g.num_ops() - raw_backward);
    double raw_cost = 0, got_cost = 0, raw_edge_bytes = 0;
    for (size_t e = 0; e < raw["edges"].size(); ++e) {
      const json& edge = raw["edges"][e];
      const auto id = static_cast<EdgeId>(e);
      CHECK(inst.msr_id[g.edge_src(id)] == edge["sourceId"].get<int64_t>());
      CHECK(inst.msr_id[g.edge_dst(id)] == edge["destId"].get<int64_t>());
      raw_cost += edge["cost"].get<double>();
      raw_edge_bytes += edge.value("size", 0.0);
      got_cost += g.edge_comm_s(id);
    }
    CHECK(got_cost / kMsrSecondsPerUnit == Approx(raw_cost).epsilon(1e-12));
    CHECK(s.edge_bytes == Approx(raw_edge_bytes).epsilon(1e-12));
  }
}

TEST_CASE("graphs::read_msr_split: expert splits give the README's max-load", "[graphs]") {
  struct Case {
    std::string instance, split;
    double expert_max_load;  // README, "expert" column; NaN: no published value
  };
  const std::vector<Case> cases = {
      {"bert24_inference", "bert24_inference", 20.084},
      {"bert24_training", "bert24_training", 49.4049},
      {"bert24_training", "bert24_inference", 49.4049},  // backward pass inferred through colour classes
      {"gnmt_inference", "gnmt_inference", 46.2085},
      {"gnmt_training", "gnmt_training", 137.154},
      {"gnmt_training", "gnmt_inference", 137.154},
      {"resnet50_inference", "resnet50_inference", 43.9183},
      {"resnet50_training", "resnet50_inference", 112.108},
      {"inceptionv3_inference", "inceptionv3_inference", NAN},
      {"inceptionv3_training", "inceptionv3_inference", NAN},
  };
  std::set<std::string> splits_read;
  for (const Case& c : cases) {
    INFO(c.instance << " with " << c.split << "_expert.json");
    MsrInstance inst = read_msr(kMsrDir + "/throughput-inputs/LayerGraphs/" + c.instance + ".json");
    MsrSplit split = read_msr_split(kMsrDir + "/human-experts/" + c.split + "_expert.json", inst);
    splits_read.insert(c.split + "_expert.json");
    // Every op, forward and backward, on exactly one device.
    std::vector<int> times_assigned(inst.graph.num_ops(), 0);
    for (const auto* devices : {&split.accelerators, &split.cpus})
      for (const auto& ops : *devices)
        for (OpId op : ops) ++times_assigned[op];
    CHECK(std::count(times_assigned.begin(), times_assigned.end(), 1) == inst.graph.num_ops());
    CHECK(split.accelerators.size() == 6);
    CHECK(split.cpus.size() == 1);
    if (!std::isnan(c.expert_max_load)) CHECK(max_load_ms(inst, split) == Approx(c.expert_max_load).epsilon(1e-4));
  }
  std::set<std::string> all_splits;
  for (const auto& entry : std::filesystem::directory_iterator(kMsrDir + "/human-experts"))
    all_splits.insert(entry.path().filename().string());
  CHECK(splits_read == all_splits);
}

TEST_CASE("graphs::msr_from_json: bad instances name the file, JSON path and msr id", "[graphs]") {
  std::string s = kSmall;
  auto has = [](const std::string& msg, std::initializer_list<const char*> parts) {
    INFO(msg);
    for (const char* p : parts) CHECK(msg.find(p) != std::string::npos);
  };
  has(msr_error(replace_once(s, R"("id": 20)", R"("id": 10)")), {"bad.json: nodes[1].id", "duplicate msr node id 10"});
  has(msr_error(replace_once(s, R"("sourceId": 20)", R"("sourceId": 21)")),
      {"bad.json: edges[2].sourceId", "msr id 21", "dangling"});
  has(msr_error(replace_once(s, R"("sourceId": 20, "destId": 30)", R"("sourceId": 20, "destId": 20)")),
      {"edges[2]", "self-loop", "20"});
  has(msr_error(replace_once(s, R"("sourceId": 20, "destId": 30)", R"("sourceId": 10, "destId": 30)")),
      {"edges[2]", "duplicates"});
  has(msr_error(replace_once(s, R"("sourceId": 10, "destId": 30, "cost": 0.125)",
                        R"("sourceId": 10, "destId": 30, "cost": 0.5)")),
      {"edges[1].cost", "edges[0]", "msr node id 10"});
  has(msr_error(replace_once(s, R"("sourceId": 20, "destId": 30, "cost": 1)", R"("sourceId": 30, "destId": 20, "cost": 1)")),
      {"edges[2]", "backward msr node id 30", "forward msr node id 20"});
  has(msr_error(replace_once(s, R"("layerId": 2)", R"("layerId": 2, "flops": 3)")),
      {"bad.json: nodes[0]", "unknown field \"flops\"", "msr node id 10"});
  has(msr_error(replace_once(s, R"("size": 64)", R"("bytes": 64)")), {"edges[0]", "unknown field \"bytes\""});
  has(msr_error(replace_once(s, R"("maxCPUs": 1,)", R"("maxCPUs": 1, "extra": 0,)")), {"unknown field \"extra\""});
  has(msr_error(replace_once(s, R"("isBackwardNode": false)", R"("isBackwardNode": 2)")),
      {"nodes[1].isBackwardNode", "true/false", "msr node id 20"});
  has(msr_error(replace_once(s, R"("cpuLatency": 2.5)", R"("cpuLatency": -2.5)")),
      {"nodes[1].cpuLatency", ">= 0", "msr node id 20"});
  has(msr_error(replace_once(s, R"("fpgaLatency": 0.25, )", "")), {"nodes[1]", "missing field \"fpgaLatency\"", "20"});
  has(msr_error(replace_once(s, R"("colorClass": 3, "size": 40, "layerId": 2)", R"("colorClass": -3)")),
      {"nodes[0].colorClass", "-3"});
  has(msr_error(replace_once(s, R"("maxFPGAs": 2)", R"("maxFPGAs": 2.5)")), {"maxFPGAs", "integer"});
  has(msr_error(replace_once(s, R"("id": 20, )", R"("id": 20, "name": "Conv1", )")),
      {"nodes[1]", "duplicate name \"Conv1\""});
  // A cycle through three edges: 10 -> 20 -> 40 -> 10 (the builder names the ops on it).
  std::string cyclic = replace_once(s, R"("edges": [)", R"("edges": [{"sourceId": 20, "destId": 40, "cost": 1},
    {"sourceId": 40, "destId": 10, "cost": 0},)");
  cyclic = replace_once(cyclic, R"("nodes": [)", R"("nodes": [{"id": 40, "supportedOnFpga": 1, "cpuLatency": 0,
    "fpgaLatency": 0, "isBackwardNode": 0},)");
  has(msr_error(cyclic), {"bad.json", "cycle", "\"node40\"", "\"Conv1\""});
  has(msr_error(R"({"maxSizePerFPGA": 1, "maxFPGAs": 1, "maxCPUs": 1, "nodes": [], "edges": []})"),
      {"bad.json: nodes:", "at least one node"});
  try {
    read_msr(kMsrDir + "/no-such-file.json");
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(std::string(e.what()).find("no-such-file.json: no such file") != std::string::npos);
  }
}

TEST_CASE("graphs::msr_split_from_json: extends through colour classes and rejects bad splits", "[graphs]") {
  MsrInstance inst = msr_from_json(json::parse(kSmall), "small.json");
  auto split_of = [&](const std::string& text) {
    return msr_split_from_json(json::parse(text), "split.json", inst);
  };
  auto split_error = [&](const std::string& text) -> std::string {
    try {
      split_of(text);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  // Node 30 (backward, class 3) follows node 10 onto fpgas[1]; node 20 is pinned to the CPU.
  MsrSplit split = split_of(R"({"fpgas": [{"nodes": []}, {"load": -1, "nodes": [10]}],
                                "cpus": [{"nodes": [20]}], "maxLoad": -1})");
  CHECK(split.accelerators == std::vector<std::vector<OpId>>{{}, {0, 2}});
  CHECK(split.cpus == std::vector<std::vector<OpId>>{{1}});
  // Loads (ms): fpgas[1] = 0.5 + 1.75, + 0.125 for sending node 10's output to the CPU, + 1 for
  // receiving node 20's output = 3.375; the CPU runs 2.5 and pays no communication.
  CHECK(max_load_ms(inst, split) == Approx(3.375));

  CHECK(split_error(R"({"fpgas": [{"nodes": [10, 99]}], "cpus": [{"nodes": [20]}]})")
            .find("split.json: fpgas[0].nodes[1]: no node of the instance has msr id 99") != std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": [10]}], "cpus": [{"nodes": [20, 10]}]})")
            .find("cpus[0].nodes[1]: msr node id 10 is already assigned to fpgas[0]") != std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": [10, 20]}], "cpus": []})").find("not supported on an accelerator") !=
        std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": [10]}], "cpus": [{"nodes": []}]})")
            .find("msr node id 20 (\"node20\") is not in the split and has no colour class") != std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": [20]}], "cpus": []})").find("not supported") != std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": [10]}, {"nodes": [30]}], "cpus": [{"nodes": [20]}]})")
            .find("colour class 3 is split between fpgas[0] and fpgas[1]") != std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": []}, {"nodes": []}, {"nodes": [10]}], "cpus": [{"nodes": [20]}]})")
            .find("fpgas: lists 3 accelerators but the instance has maxFPGAs = 2") != std::string::npos);
  CHECK(split_error(R"({"fpgas": [], "cpus": [{"nodes": [20]}], "extra": 1})").find("unknown field \"extra\"") !=
        std::string::npos);
  CHECK(split_error(R"({"fpgas": [{"nodes": [30]}], "cpus": [{"nodes": [20]}]})").empty());  // 10 follows 30
}
