// Bindings of sim/: clusters (presets, files, dicts), the Simulator (one run, batches with the GIL
// released, max-load, micro-batch streams, traces) and random placements. Results are dicts whose
// per-device and per-link values are numpy arrays.
#include <algorithm>
#include <climits>
#include <fstream>
#include <limits>
#include <optional>
#include <random>
#include <span>

#include <fmt/format.h>
#include <pybind11/stl.h>

#include "graphs/error.h"
#include "graphs/json_util.h"
#include "python/src/bindings.h"
#include "sim/cluster.h"
#include "sim/cost_model.h"
#include "sim/engine.h"
#include "sim/pipeline.h"
#include "sim/placement.h"
#include "sim/presets.h"
#include "sim/trace.h"

namespace placelab::python {

using graphs::Graph;
using sim::Cluster;
using sim::SimResult;
using sim::Simulator;

namespace {

py::dict result_dict(const SimResult& r) {
  py::dict d;
  d["step_time_s"] = r.step_time_s;
  d["busy_until_s"] = r.busy_until_s;
  d["critical_path_s"] = r.critical_path_s;
  d["total_bytes_moved"] = r.total_bytes_moved;
  d["num_transfers"] = r.num_transfers;
  d["oom"] = r.oom;
  d["device_busy_s"] = to_numpy(r.device_busy_s);
  d["device_peak_bytes"] = to_numpy(r.device_peak_bytes);
  d["device_excess_bytes"] = to_numpy(r.device_excess_bytes);
  d["link_busy_s"] = to_numpy(r.link_busy_s);
  d["link_bytes"] = to_numpy(r.link_bytes);
  return d;
}

/** The same facts as result_dict, stacked over a batch: scalars (N,), per-device (N, D), per-link (N, L). */
py::dict batch_dict(const std::vector<SimResult>& rs, const Cluster& c) {
  const auto n = static_cast<py::ssize_t>(rs.size());
  auto column = [&](auto field) {
    using T = std::decay_t<decltype(field(rs[0]))>;
    std::vector<T> v;
    for (const auto& r : rs) v.push_back(field(r));
    return to_numpy(v);
  };
  auto matrix = [&](auto field, py::ssize_t cols) {
    std::vector<double> v;
    for (const auto& r : rs) v.insert(v.end(), field(r).begin(), field(r).end());
    return to_numpy_2d(v, n, cols);
  };
  py::dict d;
  d["step_time_s"] = column([](const SimResult& r) { return r.step_time_s; });
  d["busy_until_s"] = column([](const SimResult& r) { return r.busy_until_s; });
  d["critical_path_s"] = column([](const SimResult& r) { return r.critical_path_s; });
  d["total_bytes_moved"] = column([](const SimResult& r) { return r.total_bytes_moved; });
  d["num_transfers"] = column([](const SimResult& r) { return r.num_transfers; });
  std::vector<uint8_t> oom;
  for (const auto& r : rs) oom.push_back(r.oom ? 1 : 0);
  d["oom"] = to_numpy(oom).attr("astype")("bool");
  const py::ssize_t devices = c.num_devices(), links = c.num_links();
  d["device_busy_s"] = matrix([](const SimResult& r) -> const auto& { return r.device_busy_s; }, devices);
  d["device_peak_bytes"] = matrix([](const SimResult& r) -> const auto& { return r.device_peak_bytes; }, devices);
  d["device_excess_bytes"] = matrix([](const SimResult& r) -> const auto& { return r.device_excess_bytes; }, devices);
  d["link_busy_s"] = matrix([](const SimResult& r) -> const auto& { return r.link_busy_s; }, links);
  d["link_bytes"] = matrix([](const SimResult& r) -> const auto& { return r.link_bytes; }, links);
  return d;
}

/** SimOptions from a dict {priority, use_measured, use_edge_comm, share_bandwidth}; unknown keys are errors. */
sim::SimOptions sim_options(const py::object& options) {
  sim::SimOptions o;
  if (options.is_none()) return o;
  nlohmann::json doc = to_json(options, "simulator options");
  io::JsonNode node(doc, "simulator options");
  node.check_fields({"priority", "use_measured", "use_edge_comm", "share_bandwidth"});
  if (node.has("priority")) {
    std::string p = node.at("priority").as_string();
    o.priority = sim::priority_from_name(p);
    if (!o.priority)
      node.at("priority").fail(fmt::format("unknown priority \"{}\" (use \"ready_time\", \"rank\" or \"fifo\")", p));
  }
  if (node.has("use_measured")) o.use_measured = node.at("use_measured").as_bool();
  if (node.has("use_edge_comm")) o.use_edge_comm = node.at("use_edge_comm").as_bool();
  if (node.has("share_bandwidth")) o.share_bandwidth = node.at("share_bandwidth").as_bool();
  return o;
}

std::vector<int32_t> placement_arg(const Simulator& s, const IntsArg& placement) {
  auto device_of = to_int32_vector(placement.obj, "placement");
  s.check_placement(device_of);
  return device_of;
}

py::dict trace_dict(const sim::TraceRecorder& rec) {
  std::vector<int32_t> op, dev, t_op, t_src, t_dst;
  std::vector<double> start, end, t_start, t_end, t_bytes;
  for (const auto& e : rec.ops()) {
    op.push_back(e.op);
    dev.push_back(e.device);
    start.push_back(e.start_s);
    end.push_back(e.end_s);
  }
  for (const auto& e : rec.transfers()) {
    t_op.push_back(e.op);
    t_src.push_back(e.src);
    t_dst.push_back(e.dst);
    t_start.push_back(e.start_s);
    t_end.push_back(e.end_s);
    t_bytes.push_back(e.bytes);
  }
  py::dict ops, transfers;
  ops["op"] = to_numpy(op);
  ops["device"] = to_numpy(dev);
  ops["start_s"] = to_numpy(start);
  ops["end_s"] = to_numpy(end);
  transfers["op"] = to_numpy(t_op);
  transfers["src"] = to_numpy(t_src);
  transfers["dst"] = to_numpy(t_dst);
  transfers["start_s"] = to_numpy(t_start);
  transfers["end_s"] = to_numpy(t_end);
  transfers["bytes"] = to_numpy(t_bytes);
  std::vector<int32_t> m_dev;
  std::vector<double> m_time;
  std::vector<int64_t> m_bytes;
  for (const auto& e : rec.memory()) {
    m_dev.push_back(e.device);
    m_time.push_back(e.time_s);
    m_bytes.push_back(e.bytes);
  }
  py::dict memory;
  memory["device"] = to_numpy(m_dev);
  memory["time_s"] = to_numpy(m_time);
  memory["bytes"] = to_numpy(m_bytes);
  py::dict d;
  d["ops"] = ops;
  d["transfers"] = transfers;
  d["memory"] = memory;
  return d;
}

void check_device(const Cluster& c, int64_t d) {
  if (d < 0 || d >= c.num_devices()) {
    throw Error(fmt::format("device index {} is out of range for cluster {} ({} devices)", d, c.name(), c.num_devices()));
  }
}

// The ops of a Python move as OpIds, range-checked before the narrowing casts (the simulator checks the
// device against the cluster).
std::vector<graphs::OpId> move_ops(const sim::IncrementalSimulator& inc, const std::vector<int64_t>& ops, int64_t device) {
  if (device < 0 || device > INT32_MAX) throw Error(fmt::format("move: device {} is out of range", device));
  std::vector<graphs::OpId> out;
  out.reserve(ops.size());
  for (int64_t op : ops) {
    if (op < 0 || op >= static_cast<int64_t>(inc.placement().size()))
      throw Error(fmt::format("move: op {} is out of range (the placement has {} ops)", op, inc.placement().size()));
    out.push_back(static_cast<graphs::OpId>(op));
  }
  return out;
}

// A move's simulate() dict, or None when it stopped at its limit.
py::object result_or_none(const sim::SimResult* r) { return r ? py::object(result_dict(*r)) : py::object(py::none()); }

// A limit in seconds; None: no limit.
double limit_s(std::optional<double> limit) { return limit.value_or(std::numeric_limits<double>::infinity()); }

py::object move_within(sim::IncrementalSimulator& inc, const std::vector<graphs::OpId>& ops, int64_t device,
                       std::optional<double> limit) {
  return result_or_none(inc.move_within(ops, static_cast<int32_t>(device), limit_s(limit)));
}

}  // namespace

void init_sim(py::module_& m) {
  py::class_<Cluster> cluster_class(m, "Cluster", "A validated cluster: devices, links and a route for every device pair.");
  made_only_by(cluster_class, "make_preset, load_cluster, read_cluster, cluster_from_dict or msr_cluster");
  cluster_class.def_property_readonly("name", &Cluster::name, "The cluster's name.")
      .def_property_readonly("num_devices", &Cluster::num_devices, "Number of devices.")
      .def_property_readonly("num_links", &Cluster::num_links, "Number of links.")
      .def("__repr__", [](const Cluster& c) {
        return fmt::format("<placelab.Cluster '{}': {} devices, {} links>", c.name(), c.num_devices(), c.num_links());
      })
      .def_property_readonly("device_names", [](const Cluster& c) {
        std::vector<std::string> v;
        for (const auto& d : c.devices()) v.push_back(d.name);
        return v;
      }, "Device names, indexed by device.")
      .def_property_readonly("device_kinds", [](const Cluster& c) {
        std::vector<std::string> v;
        for (const auto& d : c.devices()) v.push_back(d.kind);
        return v;
      }, "Device kinds, indexed by device.")
      .def_property_readonly("link_names", [](const Cluster& c) {
        std::vector<std::string> v;
        for (const auto& l : c.links()) v.push_back(l.name);
        return v;
      }, "Link names, indexed by link.")
      .def_property_readonly("kinds", &Cluster::kinds, "Distinct device kinds in first-seen order.")
      .def("find_device", [](const Cluster& c, const TextArg& name_arg) {
        const std::string name = text_arg(name_arg, "name");
        int32_t d = c.find_device(name);
        if (d < 0) throw Error(fmt::format("cluster {} has no device named \"{}\"", c.name(), name));
        return d;
      }, py::arg("name"), "Index of the device called `name`; ValueError when there is none.")
      .def("route", [](const Cluster& c, const IntArg& src_arg, const IntArg& dst_arg) {
        const auto src = int_arg<int64_t>(src_arg, "src device"), dst = int_arg<int64_t>(dst_arg, "dst device");
        check_device(c, src);
        check_device(c, dst);
        std::vector<std::string> v;
        for (int32_t ch : c.route(static_cast<int32_t>(src), static_cast<int32_t>(dst))) {
          v.push_back(c.link(Cluster::channel_link(ch)).name);
        }
        return v;
      }, py::arg("src"), py::arg("dst"), "Names of the links a transfer from src to dst crosses.")
      .def("transfer_time_s", [](const Cluster& c, const IntArg& src_arg, const IntArg& dst_arg, double bytes) {
        const auto src = int_arg<int64_t>(src_arg, "src device"), dst = int_arg<int64_t>(dst_arg, "dst device");
        check_device(c, src);
        check_device(c, dst);
        if (!(bytes >= 0)) throw Error(fmt::format("bytes must be a number >= 0, got {}", bytes));
        return c.transfer_time_s(static_cast<int32_t>(src), static_cast<int32_t>(dst), bytes);
      }, py::arg("src"), py::arg("dst"), py::arg("bytes"), "Seconds to move `bytes` from src to dst on an idle network.")
      .def("to_dict", [](const Cluster& c) { return py::dict(from_json(sim::cluster_to_json(c))); },
           "The placelab.cluster document as a dict; cluster_from_dict(c.to_dict()) rebuilds it.")
      .def("write", [](const Cluster& c, const Path& path) { sim::write_cluster(c, path); }, py::arg("path"),
           "Writes the cluster to a placelab.cluster JSON file.");

  m.def("preset_names", &sim::preset_names, "Every preset cluster name, e.g. 'v100-nvlink-4'.");
  m.def("preset_families", [] {
    py::list out;
    for (const auto& f : sim::preset_families()) {
      py::dict d;
      d["family"] = f.family;
      d["sizes"] = f.sizes;
      d["summary"] = f.summary;
      out.append(d);
    }
    return out;
  }, "Preset families: a list of {family, sizes, summary}.");
  m.def("make_preset", [](const TextArg& name) { return sim::make_preset(text_arg(name, "name")); }, py::arg("name"),
        "The preset cluster called `name`.");
  m.def("load_cluster", [](const Path& spec) { return sim::load_cluster(spec); }, py::arg("spec"),
        "A cluster from a placelab.cluster file path or a preset name.");
  m.def("read_cluster", [](const Path& path) { return sim::read_cluster(path); }, py::arg("path"),
        "Reads a placelab.cluster JSON file, or the machine of an msr-dnn-partitioning instance file (msr_cluster).");
  m.def("write_cluster", [](const Cluster& c, const Path& path) { sim::write_cluster(c, path); },
        py::arg("cluster"), py::arg("path"), "Writes a cluster to a placelab.cluster JSON file.");
  m.def("cluster_from_dict", [](const py::dict& doc, const TextArg& origin_arg) {
    const std::string origin = text_arg(origin_arg, "origin");
    return sim::cluster_from_json(to_json(doc, origin), origin);
  }, py::arg("doc"), py::arg("origin") = "cluster dict", "Builds a cluster from a placelab.cluster document (a dict).");

  m.def("msr_cluster", [](const graphs::MsrInstance& instance) { return sim::msr_cluster(instance); },
        py::arg("instance"), "The machine an msr instance allows: maxFPGAs accelerators, maxCPUs CPUs, maxSizePerFPGA.");
  m.def("msr_cluster", [](int accelerators, int cpus, double accelerator_memory_bytes) {
    return sim::msr_cluster(accelerators, cpus, accelerator_memory_bytes);  // the core checks counts and memory
  }, py::arg("accelerators"), py::arg("cpus"), py::arg("accelerator_memory_bytes"),
        "An msr machine of `accelerators` accelerators and `cpus` CPUs (device kinds 'accelerator' and 'cpu').");

  py::class_<Simulator> simulator_class(m, "Simulator",
                                        "The discrete-event simulator of one (graph, cluster, cost model, options); "
                                        "it keeps the graph and cluster alive.");
  simulator_class.def(py::init([](const Graph& g, const Cluster& c, const DictArg& options, const DictOrPathArg& profile_arg) {
             const py::object &profile = profile_arg.obj, &options_dict = dict_arg(options, "options");
             std::shared_ptr<const sim::CostModel> cost = sim::default_cost_model();
             if (!profile.is_none()) {
               cost = py::isinstance<py::dict>(profile)
                          ? sim::profile_from_json(to_json(profile, "profile"), "profile", cost)
                          : sim::read_profile(path_arg(profile, "profile"), cost);
             }
             return std::make_unique<Simulator>(g, c, cost, sim_options(options_dict));
           }),
           py::arg("graph"), py::arg("cluster"), py::arg("options") = py::none(), py::arg("profile") = py::none(),
           py::keep_alive<1, 2>(), py::keep_alive<1, 3>(),
           "Simulator(graph, cluster, options=None, profile=None): options is a dict {priority: 'ready_time'|'rank'|'fifo' (default: the cluster's), "
           "use_measured, use_edge_comm, share_bandwidth}; profile a placelab.profile path or dict (else roofline).")
      .def("__repr__", [](const Simulator& s) {
        return fmt::format("<placelab.Simulator '{}' on '{}' ({})>", s.graph().name(), s.cluster().name(),
                           s.cost_model()->name());
      })
      .def_property_readonly("graph", &Simulator::graph, py::return_value_policy::reference_internal, "The graph.")
      .def_property_readonly("cluster", &Simulator::cluster, py::return_value_policy::reference_internal, "The cluster.")
      .def_property_readonly("num_ops", &Simulator::num_ops, "Ops of the graph.")
      .def_property_readonly("num_devices", &Simulator::num_devices, "Devices of the cluster.")
      .def_property_readonly("cost_model", [](const Simulator& s) { return s.cost_model()->name(); },
                             "Name of the cost model ('roofline', 'profile').")
      .def("op_times", [](const Simulator& s) {
        std::vector<double> t;
        for (int32_t op = 0; op < s.num_ops(); ++op) {
          for (int32_t d = 0; d < s.num_devices(); ++d) t.push_back(s.op_time_s(op, d));
        }
        return to_numpy_2d(t, s.num_ops(), s.num_devices());
      }, "Seconds of every op on every device, an (ops, devices) array.")
      .def("upward_rank", [](const Simulator& s) {
        std::vector<double> r;
        for (int32_t op = 0; op < s.num_ops(); ++op) r.push_back(s.upward_rank(op));
        return to_numpy(r);
      }, "Placement-independent priority of every op.")
      .def("check_placement", [](const Simulator& s, const IntsArg& p) { placement_arg(s, p); }, py::arg("placement"),
           "ValueError when `placement` is not one valid device index per op.")
      .def("simulate", [](const Simulator& s, const IntsArg& p) {
        auto device_of = placement_arg(s, p);
        SimResult r;
        {
          py::gil_scoped_release release;
          r = s.simulate(device_of);
        }
        return result_dict(r);
      }, py::arg("placement"),
           "Simulates one step: a dict with step_time_s, critical_path_s, total_bytes_moved, num_transfers, oom "
           "and numpy arrays device_busy_s, device_peak_bytes, device_excess_bytes, link_busy_s, link_bytes.")
      .def("simulate_batch", [](const Simulator& s, const IntRowsArg& placements) {
        auto rows = to_int32_rows(placements.obj, s.num_ops(), "placements");
        for (size_t i = 0; i < rows.size(); ++i) {
          try {
            s.check_placement(rows[i]);
          } catch (const Error& e) {
            throw Error(fmt::format("placements row {}: {}", i, e.what()));
          }
        }
        // In chunks of about 4M op-simulations, checking for Ctrl-C between them (a notebook interrupt).
        const size_t chunk = std::clamp<size_t>((size_t{1} << 22) / std::max(1, s.num_ops()), 32, 65536);
        std::vector<SimResult> results, part;
        results.reserve(rows.size());
        for (size_t begin = 0; begin < rows.size(); begin += chunk) {
          const size_t count = std::min(chunk, rows.size() - begin);
          {
            py::gil_scoped_release release;  // oneTBB threads; nothing below touches Python
            s.simulate_batch(std::span(rows).subspan(begin, count), part);
          }
          if (PyErr_CheckSignals() != 0) throw py::error_already_set();
          results.insert(results.end(), part.begin(), part.end());
        }
        return batch_dict(results, s.cluster());
      }, py::arg("placements"),
           "Simulates an (N, ops) integer array of placements in parallel (GIL released); the dict of simulate() "
           "with every value stacked: scalars (N,), per-device (N, devices), per-link (N, links).")
      .def("max_load", [](const Simulator& s, const IntsArg& p) {
        auto device_of = placement_arg(s, p);
        sim::MaxLoadResult r = sim::max_load(s, device_of);
        py::dict d;
        d["max_load_s"] = r.max_load_s;
        d["bottleneck_device"] = r.bottleneck_device;
        d["load_s"] = to_numpy(r.load_s);
        d["compute_s"] = to_numpy(r.compute_s);
        d["comm_s"] = to_numpy(r.comm_s);
        d["memory_bytes"] = to_numpy(r.memory_bytes);
        d["excess_bytes"] = to_numpy(r.excess_bytes);
        d["fits"] = r.fits;
        d["contiguous"] = r.contiguous;
        return d;
      }, py::arg("placement"), "Tarnawski et al.'s max-load (pipelined time per sample) of a placement, as a dict.")
      .def("simulate_stream", [](const Simulator& s, const IntsArg& p, const IntArg& micro_batches_arg) {
        const auto micro_batches = int_arg<int32_t>(micro_batches_arg, "micro_batches");
        auto device_of = placement_arg(s, p);
        sim::StreamResult r;
        {
          py::gil_scoped_release release;
          r = sim::simulate_stream(s, device_of, micro_batches);
        }
        py::dict d;
        d["micro_batches"] = r.micro_batches;
        d["makespan_s"] = r.makespan_s;
        d["single_s"] = r.single_s;
        d["time_per_batch_s"] = r.time_per_batch_s;
        d["last"] = result_dict(r.last);
        return d;
      }, py::arg("placement"), py::arg("micro_batches"), "Runs a stream of micro-batches; the steady-state period and more.")
      .def("trace", [](const Simulator& s, const IntsArg& p) {
        auto device_of = placement_arg(s, p);
        sim::TraceRecorder rec(s);
        py::dict result = result_dict(s.simulate(device_of, &rec));
        py::dict d = trace_dict(rec);
        d["result"] = result;
        return d;
      }, py::arg("placement"),
           "Simulates and records the schedule: {'result': simulate()'s dict, 'ops': {op, device, start_s, end_s}, "
           "'transfers': {op, src, dst, start_s, end_s, bytes}, 'memory': {device, time_s, bytes}: bytes held after "
           "each memory change, in the engine's order} (numpy arrays, in the order decided).")
      .def("write_trace", [](const Simulator& s, const IntsArg& p, const Path& path, const TextArg& format_arg) {
        const std::string format = text_arg(format_arg, "format");
        auto device_of = placement_arg(s, p);
        if (format != "chrome" && format != "text") {
          throw Error(fmt::format("unknown trace format \"{}\" (use \"chrome\" or \"text\")", format));
        }
        sim::TraceRecorder rec(s);
        py::dict result = result_dict(s.simulate(device_of, &rec));
        if (format == "chrome") {
          rec.write_chrome(path);
        } else {
          std::ofstream out(path);
          out << rec.to_text();
          if (!out.flush()) throw Error(fmt::format("cannot write trace file {}", path.string()));
        }
        return result;
      }, py::arg("placement"), py::arg("path"), py::arg("format") = "chrome",
           "Simulates and writes the schedule: Chrome trace-event JSON (Perfetto) or the golden text format.")
      .def("is_contiguous", [](const Simulator& s, const IntsArg& p) {
        auto device_of = placement_arg(s, p);
        return sim::is_contiguous(s.graph(), device_of, s.num_devices());
      }, py::arg("placement"), "Whether every device's forward ops form a convex set.")
      .def("random_placement", [](const Simulator& s, const IntArg& seed) {
        std::mt19937_64 rng(int_arg<uint64_t>(seed, "seed"));
        return to_numpy(sim::random_placement(s, rng));
      }, py::arg("seed"), "A uniformly random valid placement (pins respected), fixed by `seed`.")
      .def("random_placements", [](const Simulator& s, const IntArg& n_arg, const IntArg& seed) {
        const auto n = int_arg<int64_t>(n_arg, "n");
        if (n < 0) throw Error(fmt::format("n must be >= 0, got {}", n));
        // Allocated first (a size too large fails at once, as numpy's MemoryError), filled in place, and
        // Ctrl-C is seen between rows.
        py::array_t<int32_t> out({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(s.num_ops())});
        int32_t* rows = out.mutable_data();
        std::mt19937_64 rng(int_arg<uint64_t>(seed, "seed"));
        for (int64_t i = 0; i < n; ++i) {
          const std::vector<int32_t> p = sim::random_placement(s, rng);
          std::copy(p.begin(), p.end(), rows + i * static_cast<int64_t>(s.num_ops()));
          if (i % 256 == 255 && PyErr_CheckSignals() != 0) throw py::error_already_set();
        }
        return out;
      }, py::arg("n"), py::arg("seed"), "An (n, ops) array of random valid placements from one seeded generator.");
  constructed_in_new(simulator_class);

  py::class_<sim::IncrementalSimulator> incremental_class(m, "IncrementalSimulator",
                                                          "A placement changed one op or one group of ops at a time "
                                                          "(local search, Placeto's MDP); each move re-simulates from a "
                                                          "saved state and equals a full simulate().");
  incremental_class.def(py::init([](const Simulator& s, const IntsArg& placement, const IntArg& checkpoints_arg) {
             const auto checkpoints = int_arg<int32_t>(checkpoints_arg, "checkpoints");
             if (checkpoints < 1) throw Error(fmt::format("checkpoints must be >= 1, got {}", checkpoints));
             return std::make_unique<sim::IncrementalSimulator>(s, placement_arg(s, placement), checkpoints);
           }),
           py::arg("simulator"), py::arg("placement"), py::arg("checkpoints") = 4, py::keep_alive<1, 2>(),
           "Simulates `placement` fully and keeps `checkpoints` saved states for later moves (4, as in C++: the "
           "fastest for random moves in bench/bm_sim.cpp).")
      .def_property_readonly("result", [](const sim::IncrementalSimulator& inc) { return result_dict(inc.result()); },
                             "simulate()'s dict for the current placement.")
      .def_property_readonly("placement", [](const sim::IncrementalSimulator& inc) { return to_numpy(inc.placement()); },
                             "The current placement.")
      .def_property_readonly("last_replayed_fraction", &sim::IncrementalSimulator::last_replayed_fraction,
                             "Fraction of a full run's events the last move replayed.")
      // Sequences take the group move; anything else (an int, a numpy integer) the single one.
      .def("move", [](sim::IncrementalSimulator& inc, const py::sequence& ops_arg, const IntArg& device_arg,
                      std::optional<double> limit) {
        const auto device = int_arg<int64_t>(device_arg, "device");
        std::vector<int64_t> ops;
        if (py::hasattr(ops_arg, "ndim") && py::cast<int64_t>(ops_arg.attr("ndim")) == 0) {  // a numpy scalar array: one op
          ops.push_back(int_arg<int64_t>(ops_arg, "op"));
        } else {
          const std::vector<int32_t> ops32 = to_int32_vector(ops_arg, "ops");
          ops.assign(ops32.begin(), ops32.end());
        }
        return move_within(inc, move_ops(inc, ops, device), device, limit);
      }, py::arg("ops"), py::arg("device"), py::arg("limit") = py::none(),
         "Moves every op of `ops` (a colocation group) to `device`, re-simulating once; returns the simulate() dict. "
         "With `limit` (seconds), returns None instead as soon as the new step time is sure to exceed it (the replay "
         "stops there); resume() or undo() must follow then.")
      .def("move", [](sim::IncrementalSimulator& inc, const IntArg& op_arg, const IntArg& device_arg,
                      std::optional<double> limit) {
        const auto op = int_arg<int64_t>(op_arg, "op"), device = int_arg<int64_t>(device_arg, "device");
        return move_within(inc, move_ops(inc, {op}, device), device, limit);
      }, py::arg("op"), py::arg("device"), py::arg("limit") = py::none(),
         "Moves `op` to `device` and returns the new simulate() dict; `limit` as for a group move.")
      .def("resume", [](sim::IncrementalSimulator& inc, std::optional<double> limit) {
        // The core's message names its C++ call; say it in the Python calls that lead here.
        if (!inc.stopped())
          throw Error("IncrementalSimulator.resume(): no move stopped at its limit; resume() continues a "
                      "move(..., limit=...) that returned None");
        return result_or_none(inc.resume(limit_s(limit)));
      }, py::arg("limit") = py::none(),
         "Continues the move that stopped at its limit, up to a new `limit` (None: to the end); returns the simulate() "
         "dict, or None when it stops again. Raises ValueError when no move stopped.")
      .def("undo", [](sim::IncrementalSimulator& inc) { return result_dict(inc.undo()); },
           "Reverts the last move exactly, without simulating (a rejected local-search move costs one replay, not "
           "two); returns the simulate() dict. Raises ValueError when there is nothing to revert.");
  constructed_in_new(incremental_class);
}

}  // namespace placelab::python
