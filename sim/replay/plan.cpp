// Replay plans: export from a simulated schedule, validation (indices and deadlock freedom) and the
// placelab.replay v1 JSON format.
#include "sim/replay/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include <fmt/format.h>

#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/json_util.h"
#include "sim/cost_model.h"
#include "sim/trace.h"

namespace placelab::sim::replay {

std::string_view kernel_kind_name(KernelKind kind) {
  switch (kind) {
    case KernelKind::compute: return "compute";
    case KernelKind::memory: return "memory";
    case KernelKind::none: break;
  }
  return "none";
}

namespace {

// The bound the cost model says the op is under, with the device's calibrated efficiencies where it has
// them: the kernel that then runs is the one whose time the prediction counts.
KernelKind kernel_for(const graphs::Graph& g, graphs::OpId op, const Device& device) {
  const RooflineBounds b = roofline_bounds(g, op, device);
  if (g.flops(op) > 0 && b.compute_s >= b.memory_s) return KernelKind::compute;
  return g.bytes_read(op) + g.bytes_written(op) > 0 ? KernelKind::memory : KernelKind::none;
}

void add_unique(std::vector<int32_t>& v, int32_t x) {
  if (std::find(v.begin(), v.end(), x) == v.end()) v.push_back(x);
}

}  // namespace

ReplayPlan export_plan(const Simulator& simulator, std::span<const int32_t> device_of) {
  const graphs::Graph& g = simulator.graph();
  const Cluster& c = simulator.cluster();
  TraceRecorder trace(simulator);
  const SimResult result = simulator.simulate(device_of, &trace);  // checks the placement

  ReplayPlan plan{.graph = g.name(), .cluster = c.name(), .predicted_step_s = result.step_time_s};
  for (const Device& d : c.devices()) plan.devices.push_back({.name = d.name, .kind = d.kind, .ops = {}});
  plan.ops.resize(g.num_ops());
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    PlanOp& p = plan.ops[op];
    p.name = g.op_name(op);
    p.type = g.op_type(op);
    p.device = device_of[op];
    p.kernel = kernel_for(g, op, c.device(p.device));
    p.flops = g.flops(op);
    p.bytes = g.bytes_read(op) + g.bytes_written(op);
    p.gemm = g.gemm(op);
  }
  // The engine reports events in the order it decides them, which is each device's (and each
  // channel's) run order, and causal: every dependency is reported before what waits for it.
  for (const TraceRecorder::OpEvent& e : trace.ops()) {
    plan.devices[e.device].ops.push_back(e.op);
    plan.ops[e.op].predicted_start_s = e.start_s;
    plan.ops[e.op].predicted_end_s = e.end_s;
  }
  std::map<std::pair<int32_t, int32_t>, int32_t> transfer_of;  // (producer, dst) -> transfer
  for (const TraceRecorder::TransferEvent& e : trace.transfers()) {
    transfer_of[{e.op, e.dst}] = static_cast<int32_t>(plan.transfers.size());
    plan.transfers.push_back({.producer = e.op, .src = e.src, .dst = e.dst, .bytes = e.bytes,
                              .predicted_start_s = e.start_s, .predicted_end_s = e.end_s});
  }
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    PlanOp& p = plan.ops[op];
    for (graphs::EdgeId e : g.in_edges(op)) {
      const graphs::OpId q = g.edge_src(e);
      if (device_of[q] == p.device || g.edge_bytes(e) <= 0) {
        add_unique(p.after_ops, q);  // local input, or a control edge (no tensor to move)
        continue;
      }
      auto it = transfer_of.find({q, p.device});
      if (it == transfer_of.end())
        throw Error(fmt::format("replay plan: the simulator reported no transfer of \"{}\" to device {} for \"{}\"",
                                g.op_name(q), p.device, p.name));
      add_unique(p.after_transfers, it->second);
    }
  }
  validate_plan(plan, fmt::format("replay plan of \"{}\"", g.name()));
  return plan;
}

void validate_plan(const ReplayPlan& plan, const std::string& origin) {
  const auto num_devices = static_cast<int32_t>(plan.devices.size());
  const auto num_ops = static_cast<int32_t>(plan.ops.size());
  const auto num_transfers = static_cast<int32_t>(plan.transfers.size());
  auto fail = [&](const std::string& what) { throw Error(fmt::format("{}: {}", origin, what)); };
  if (num_devices == 0) fail("no devices (a plan needs at least one)");
  auto check_amount = [&](double v, std::string_view what) {
    if (!(v >= 0 && std::isfinite(v))) fail(fmt::format("{} is {}, must be finite and >= 0", what, v));
  };
  auto check_work = [&](double v, std::string_view what) {
    check_amount(v, what);
    if (v > kMaxAmount)
      fail(fmt::format("{} is {}, must be at most {} (2^62: the replay kernels count work in int64)", what, v, kMaxAmount));
  };
  check_amount(plan.predicted_step_s, "predicted_step_s");
  // The predicted times are compared with the measured ones: an end before its start is a broken plan.
  auto check_times = [&](double start_s, double end_s, const std::string& what) {
    check_amount(start_s, what + " start_s");
    if (!(end_s >= start_s && std::isfinite(end_s)))
      fail(fmt::format("{} ends at {} s, before it starts at {} s; fix its end_s", what, end_s, start_s));
  };

  std::set<std::string_view> names;
  for (int32_t d = 0; d < num_devices; ++d) {
    const std::string& name = plan.devices[d].name;
    if (name.empty()) fail(fmt::format("devices[{}]: empty name; give every device a unique name", d));
    if (!names.insert(name).second)
      fail(fmt::format("devices[{}]: name \"{}\" is used twice; give every device a unique name", d, name));
  }

  auto op_place = [&](int32_t i) { return fmt::format("ops[{}] (\"{}\")", i, plan.ops[i].name); };
  for (int32_t i = 0; i < num_ops; ++i)
    if (plan.ops[i].device < 0 || plan.ops[i].device >= num_devices)
      fail(fmt::format("{}: device is {}, but the plan has {} devices; give an index in 0..{}", op_place(i),
                       plan.ops[i].device, num_devices, num_devices - 1));
  std::vector<int32_t> listed(num_ops, 0);
  for (int32_t d = 0; d < num_devices; ++d) {
    const std::string where = fmt::format("devices[{}] (\"{}\").ops", d, plan.devices[d].name);
    for (int32_t op : plan.devices[d].ops) {
      if (op < 0 || op >= num_ops)
        fail(fmt::format("{}: op {}, but the plan has {} ops; list op indices in 0..{}", where, op, num_ops, num_ops - 1));
      if (plan.ops[op].device != d)
        fail(fmt::format("{}: lists {}, whose device is {}; list each op under its own device", where, op_place(op),
                         plan.ops[op].device));
      if (listed[op]++) fail(fmt::format("{}: lists {} twice; list each op once", where, op_place(op)));
    }
  }
  for (int32_t i = 0; i < num_ops; ++i) {
    const PlanOp& p = plan.ops[i];
    const std::string what = op_place(i);
    if (!listed[i])
      fail(fmt::format("{}: not in devices[{}].ops; add it where it should run in that device's order", what, p.device));
    check_work(p.flops, what + " flops");
    check_work(p.bytes, what + " bytes");
    if (p.gemm.known()) check_work(p.gemm.flops(), what + " gemm FLOPs (2 batch m n k)");
    check_times(p.predicted_start_s, p.predicted_end_s, what);
    for (int32_t q : p.after_ops)
      if (q < 0 || q >= num_ops || q == i)
        fail(fmt::format("{}: after_ops names {}, not another op of the plan; give indices in 0..{} other than {}", what,
                         q, num_ops - 1, i));
    for (int32_t t : p.after_transfers) {
      if (t < 0 || t >= num_transfers)
        fail(fmt::format("{}: after_transfers names transfer {}, but the plan has {}; give indices in 0..{}", what, t,
                         num_transfers, num_transfers - 1));
      if (plan.transfers[t].dst != p.device)
        fail(fmt::format("{}: after_transfers names transfers[{}], which goes to device {}, not to its device {}; wait "
                         "only for transfers into the op's device",
                         what, t, plan.transfers[t].dst, p.device));
    }
  }
  for (int32_t t = 0; t < num_transfers; ++t) {
    const PlanTransfer& x = plan.transfers[t];
    const std::string where = fmt::format("transfers[{}]", t);
    if (x.producer < 0 || x.producer >= num_ops)
      fail(fmt::format("{}: producer is {}, but the plan has {} ops; give an index in 0..{}", where, x.producer, num_ops,
                       num_ops - 1));
    if (x.dst < 0 || x.dst >= num_devices || x.dst == x.src)
      fail(fmt::format("{}: goes to device {}; give another device of the plan than its source {}", where, x.dst, x.src));
    if (x.src != plan.ops[x.producer].device)
      fail(fmt::format("{}: leaves device {}, but its producer {} is on device {}; set src to the producer's device",
                       where, x.src, op_place(x.producer), plan.ops[x.producer].device));
    check_work(x.bytes, where + " bytes");
    check_times(x.predicted_start_s, x.predicted_end_s, where);
  }

  // Deadlock freedom: Kahn's algorithm over ops (0..n) and transfers (n..n+t) with the dependencies,
  // each device's order and each device pair's transfer order as edges.
  const int32_t n = num_ops + num_transfers;
  std::vector<std::vector<int32_t>> next(n);
  std::vector<int32_t> indegree(n, 0);
  auto edge = [&](int32_t a, int32_t b) {
    next[a].push_back(b);
    ++indegree[b];
  };
  for (const PlanDevice& d : plan.devices)
    for (size_t k = 1; k < d.ops.size(); ++k) edge(d.ops[k - 1], d.ops[k]);
  std::map<std::pair<int32_t, int32_t>, int32_t> last_on_pair;
  for (int32_t t = 0; t < num_transfers; ++t) {
    auto [it, fresh] = last_on_pair.try_emplace({plan.transfers[t].src, plan.transfers[t].dst}, t);
    if (!fresh) edge(num_ops + it->second, num_ops + t);
    it->second = t;
    edge(plan.transfers[t].producer, num_ops + t);
  }
  for (int32_t i = 0; i < num_ops; ++i) {
    for (int32_t q : plan.ops[i].after_ops) edge(q, i);
    for (int32_t t : plan.ops[i].after_transfers) edge(num_ops + t, i);
  }
  std::vector<int32_t> ready;
  for (int32_t v = 0; v < n; ++v)
    if (indegree[v] == 0) ready.push_back(v);
  int32_t done = 0;
  while (!ready.empty()) {
    const int32_t v = ready.back();
    ready.pop_back();
    ++done;
    for (int32_t w : next[v])
      if (--indegree[w] == 0) ready.push_back(w);
  }
  if (done < n) {
    int32_t stuck = 0;
    while (indegree[stuck] == 0) ++stuck;
    fail(stuck < num_ops
             ? fmt::format("{} can never start: its after_ops and after_transfers, the devices' op orders and the "
                           "transfer order form a cycle; reorder devices[{}].ops (\"{}\") or drop a dependency",
                           op_place(stuck), plan.ops[stuck].device, plan.devices[plan.ops[stuck].device].name)
             : fmt::format("transfers[{}] can never start: the dependencies and orders form a cycle; reorder the "
                           "transfers or drop a dependency",
                           stuck - num_ops));
  }
}

nlohmann::json plan_to_json(const ReplayPlan& plan) {
  nlohmann::json devices = nlohmann::json::array(), ops = nlohmann::json::array(), transfers = nlohmann::json::array();
  for (const PlanDevice& d : plan.devices) devices.push_back({{"name", d.name}, {"kind", d.kind}, {"ops", d.ops}});
  for (const PlanOp& p : plan.ops) {
    ops.push_back({{"name", p.name}, {"type", p.type}, {"device", p.device}, {"kernel", kernel_kind_name(p.kernel)},
                   {"flops", p.flops}, {"bytes", p.bytes}, {"after_ops", p.after_ops},
                   {"after_transfers", p.after_transfers}, {"start_s", p.predicted_start_s}, {"end_s", p.predicted_end_s}});
    if (p.gemm.known()) ops.back()["gemm"] = graphs::gemm_dims_to_json(p.gemm);
  }
  for (const PlanTransfer& x : plan.transfers)
    transfers.push_back({{"producer", x.producer}, {"src", x.src}, {"dst", x.dst}, {"bytes", x.bytes},
                         {"start_s", x.predicted_start_s}, {"end_s", x.predicted_end_s}});
  return {{"format", "placelab.replay"}, {"version", 1},        {"graph", plan.graph},
          {"cluster", plan.cluster},     {"predicted_step_s", plan.predicted_step_s},
          {"devices", devices},          {"ops", ops},          {"transfers", transfers}};
}

namespace {

int32_t as_index(const io::JsonNode& node) {
  const int64_t v = node.as_int();
  if (v < 0 || v > INT32_MAX) node.fail(fmt::format("is {}, expected an index >= 0", v));
  return static_cast<int32_t>(v);
}

std::vector<int32_t> index_list(const io::JsonNode& parent, std::string_view key) {
  std::vector<int32_t> out;
  if (!parent.has(key)) return out;
  io::JsonNode list = parent.at(key);
  for (size_t i = 0; i < list.size(); ++i) out.push_back(as_index(list.at(i)));
  return out;
}

KernelKind parse_kernel(const io::JsonNode& node) {
  const std::string s = node.as_string();
  for (KernelKind k : {KernelKind::none, KernelKind::compute, KernelKind::memory})
    if (s == kernel_kind_name(k)) return k;
  node.fail(fmt::format("is \"{}\", expected \"compute\", \"memory\" or \"none\"", s));
}

}  // namespace

ReplayPlan plan_from_json(const nlohmann::json& doc, const std::string& origin) {
  io::JsonNode root(doc, origin);
  root.check_header("placelab.replay", {1});
  root.check_fields({"format", "version", "graph", "cluster", "predicted_step_s", "devices", "ops", "transfers"});
  ReplayPlan plan{.graph = root.get_string("graph", ""),
                  .cluster = root.get_string("cluster", ""),
                  .predicted_step_s = root.get_amount("predicted_step_s", 0)};
  io::JsonNode devices = root.at("devices");
  for (size_t i = 0; i < devices.size(); ++i) {
    io::JsonNode d = devices.at(i);
    d.check_fields({"name", "kind", "ops"});
    plan.devices.push_back({.name = d.at("name").as_string(), .kind = d.get_string("kind", ""), .ops = index_list(d, "ops")});
  }
  io::JsonNode ops = root.at("ops");
  for (size_t i = 0; i < ops.size(); ++i) {
    io::JsonNode o = ops.at(i);
    o.check_fields({"name", "type", "device", "kernel", "flops", "bytes", "gemm", "after_ops", "after_transfers", "start_s",
                    "end_s"});
    plan.ops.push_back({.name = o.at("name").as_string(),
                        .type = o.get_string("type", ""),
                        .device = as_index(o.at("device")),
                        .kernel = parse_kernel(o.at("kernel")),
                        .flops = o.get_amount("flops", 0),
                        .bytes = o.get_amount("bytes", 0),
                        .gemm = o.has("gemm") ? graphs::gemm_dims_from_json(o.at("gemm")) : graphs::GemmDims{},
                        .after_ops = index_list(o, "after_ops"),
                        .after_transfers = index_list(o, "after_transfers"),
                        .predicted_start_s = o.get_amount("start_s", 0),
                        .predicted_end_s = o.get_amount("end_s", 0)});
  }
  if (root.has("transfers")) {
    io::JsonNode transfers = root.at("transfers");
    for (size_t i = 0; i < transfers.size(); ++i) {
      io::JsonNode x = transfers.at(i);
      x.check_fields({"producer", "src", "dst", "bytes", "start_s", "end_s"});
      plan.transfers.push_back({.producer = as_index(x.at("producer")),
                                .src = as_index(x.at("src")),
                                .dst = as_index(x.at("dst")),
                                .bytes = x.at("bytes").as_amount(),
                                .predicted_start_s = x.get_amount("start_s", 0),
                                .predicted_end_s = x.get_amount("end_s", 0)});
    }
  }
  validate_plan(plan, origin);
  return plan;
}

ReplayPlan read_plan(const std::string& path) { return plan_from_json(io::read_json_file(path), path); }

void write_plan(const ReplayPlan& plan, const std::string& path) { io::write_json_atomic(path, plan_to_json(plan), -1); }

}  // namespace placelab::sim::replay
