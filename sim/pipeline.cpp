// The max-load evaluator, the contiguity check and the micro-batch stream.
#include "sim/pipeline.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "graphs/error.h"

namespace placelab::sim {

MaxLoadResult max_load(const Simulator& simulator, std::span<const int32_t> device_of) {
  simulator.check_placement(device_of);
  const graphs::Graph& g = simulator.graph();
  const Cluster& c = simulator.cluster();
  const int32_t D = c.num_devices();
  MaxLoadResult r;
  r.load_s.assign(D, 0.0);
  r.compute_s.assign(D, 0.0);
  r.comm_s.assign(D, 0.0);
  r.memory_bytes.assign(D, 0.0);
  r.excess_bytes.assign(D, 0.0);
  std::vector<bool> pays(D);
  for (int32_t d = 0; d < D; ++d) pays[d] = c.device(d).kind != "cpu";
  std::vector<int32_t> seen(D, -1);
  std::vector<double> cost_to(D, 0.0);
  std::vector<int32_t> receivers;
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) {
    const int32_t d = device_of[op];
    r.compute_s[d] += simulator.op_time_s(op, d);
    r.memory_bytes[d] += g.param_bytes(op);
    // Receiving devices and what each pays: the edge's cost, else the transfer of the largest edge tensor.
    receivers.clear();
    for (graphs::EdgeId e : g.out_edges(op)) {
      const int32_t to = device_of[g.edge_dst(e)];
      if (to == d || g.is_control_edge(e)) continue;
      const double comm = std::isnan(g.edge_comm_s(e)) ? c.transfer_time_s(d, to, g.edge_bytes(e)) : g.edge_comm_s(e);
      if (seen[to] != op) {
        seen[to] = op;
        cost_to[to] = comm;
        receivers.push_back(to);
      } else {
        cost_to[to] = std::max(cost_to[to], comm);
      }
    }
    double send = 0;
    for (int32_t to : receivers) {
      send = std::max(send, cost_to[to]);
      if (pays[to]) r.comm_s[to] += cost_to[to];
    }
    if (pays[d]) r.comm_s[d] += send;
  }
  for (int32_t d = 0; d < D; ++d) {
    r.load_s[d] = r.compute_s[d] + r.comm_s[d];
    if (r.load_s[d] > r.max_load_s) r.max_load_s = r.load_s[d], r.bottleneck_device = d;
    r.excess_bytes[d] = std::max(0.0, r.memory_bytes[d] - c.device(d).memory_bytes);
    r.fits = r.fits && r.excess_bytes[d] == 0;
  }
  r.contiguous = is_contiguous(g, device_of, D);
  return r;
}

nlohmann::json max_load_to_json(const MaxLoadResult& r, const Cluster& c) {
  nlohmann::json devices = nlohmann::json::array();
  for (int32_t d = 0; d < c.num_devices(); ++d)
    devices.push_back({{"name", c.device(d).name},
                       {"kind", c.device(d).kind},
                       {"load_s", r.load_s[d]},
                       {"compute_s", r.compute_s[d]},
                       {"comm_s", r.comm_s[d]},
                       {"memory_bytes", r.memory_bytes[d]},
                       {"capacity_bytes", c.device(d).memory_bytes},
                       {"excess_bytes", r.excess_bytes[d]}});
  return {{"max_load_s", r.max_load_s},
          {"bottleneck_device", c.device(r.bottleneck_device).name},
          {"fits", r.fits},
          {"contiguous", r.contiguous},
          {"devices", devices}};
}

bool is_contiguous(const graphs::Graph& g, std::span<const int32_t> device_of, int32_t num_devices) {
  // For device d, left[v]: some path from an op of d reaches v after leaving d's set. A violation is
  // an op of d with such a predecessor.
  std::vector<char> left(g.num_ops());
  for (int32_t d = 0; d < num_devices; ++d) {
    std::fill(left.begin(), left.end(), 0);
    for (graphs::OpId v : g.topo_order()) {
      if (g.phase(v) != graphs::Phase::forward) continue;
      const bool mine = device_of[v] == d;
      for (graphs::OpId u : g.predecessors(v)) {
        if (g.phase(u) != graphs::Phase::forward) continue;
        const bool from_mine = device_of[u] == d;
        if (mine && !from_mine && left[u]) return false;
        if (!mine && (from_mine || left[u])) left[v] = 1;
      }
    }
  }
  return true;
}

namespace {

// `batches` copies of the graph; parameters are resident once (copy 0), as the micro-batches share them.
graphs::Graph stream_graph(const graphs::Graph& g, int32_t batches) {
  const int32_t n = g.num_ops();
  graphs::GraphBuilder b(fmt::format("{}x{}", g.name(), batches));
  for (int32_t k = 0; k < batches; ++k) {
    for (graphs::OpId op = 0; op < n; ++op) {
      graphs::OpSpec spec = g.op_spec(op);
      spec.name = fmt::format("{}#{}", spec.name, k);
      if (k > 0) spec.param_bytes = 0;
      b.add_op(std::move(spec));
    }
    for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) {
      graphs::EdgeSpec edge = g.edge_spec(e);
      edge.src += k * n;
      edge.dst += k * n;
      b.add_edge(edge);
    }
  }
  return std::move(b).build();
}

}  // namespace

StreamResult simulate_stream(const Simulator& simulator, std::span<const int32_t> device_of, int32_t micro_batches) {
  if (micro_batches < 1) throw Error(fmt::format("stream: {} micro-batches, need at least 1", micro_batches));
  simulator.check_placement(device_of);
  // A stream's graph and engine take ~600 bytes per op (17.7M ops: 10.5 GB), and the period settles within a
  // few micro-batches.
  constexpr int64_t kMaxStreamOps = 4'000'000;
  if (int64_t{simulator.num_ops()} * micro_batches > kMaxStreamOps)
    throw Error(fmt::format("stream: {} micro-batches of {} ops are {} ops, over the {} a stream may have (about 600 "
                            "bytes each); give fewer micro-batches: the period settles within a few (8-32 suffice)",
                            micro_batches, simulator.num_ops(), int64_t{simulator.num_ops()} * micro_batches,
                            kMaxStreamOps));
  // Same cluster, cost model and options, micro-batches in order on every device.
  auto run_stream = [&](int32_t batches) {
    const graphs::Graph stream = stream_graph(simulator.graph(), batches);
    std::vector<int32_t> place;
    place.reserve(static_cast<size_t>(stream.num_ops()));
    for (int32_t k = 0; k < batches; ++k) place.insert(place.end(), device_of.begin(), device_of.end());
    SimOptions options = simulator.options();
    options.priority = Priority::rank;
    Simulator sim(stream, simulator.cluster(), simulator.cost_model(), options);
    sim.take_batches_of(simulator);
    return sim.simulate(place);
  };
  StreamResult r;
  r.micro_batches = micro_batches;
  r.last = run_stream(micro_batches);
  r.makespan_s = r.last.step_time_s;
  r.single_s = micro_batches == 1 ? r.makespan_s : run_stream(1).step_time_s;
  r.time_per_batch_s = micro_batches > 1 ? (r.makespan_s - r.single_s) / (micro_batches - 1) : r.makespan_s;
  return r;
}

}  // namespace placelab::sim
