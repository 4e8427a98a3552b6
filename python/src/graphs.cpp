// Bindings of graphs/: the Graph IR (per-op and per-edge arrays as numpy), the model zoo, the
// placelab.graph format (files and dicts), training expansion and coarsening.
#include <fmt/format.h>
#include <pybind11/stl.h>

#include "graphs/coarsen.h"
#include "graphs/error.h"
#include "graphs/io.h"
#include "graphs/msr.h"
#include "graphs/training.h"
#include "graphs/zoo/zoo.h"
#include "python/src/bindings.h"

namespace placelab::python {

using graphs::Coarsening;
using graphs::Graph;

namespace {

/** One value per op, read through a Graph accessor. */
template <class T, class F>
py::array_t<T> per_op(const Graph& g, F value) {
  py::array_t<T> out(g.num_ops());
  T* data = out.mutable_data();
  for (graphs::OpId op = 0; op < g.num_ops(); ++op) data[op] = static_cast<T>(value(op));
  return out;
}

/** One value per edge, read through a Graph accessor. */
template <class T, class F>
py::array_t<T> per_edge(const Graph& g, F value) {
  py::array_t<T> out(g.num_edges());
  T* data = out.mutable_data();
  for (graphs::EdgeId e = 0; e < g.num_edges(); ++e) data[e] = static_cast<T>(value(e));
  return out;
}

/** A property getter returning one value per op (or per edge) of a Graph accessor, as a numpy array. */
template <class T>
auto op_array(T (Graph::*get)(graphs::OpId) const) {
  return [get](const Graph& g) { return per_op<T>(g, [&](graphs::OpId op) { return (g.*get)(op); }); };
}
template <class T>
auto edge_array(T (Graph::*get)(graphs::EdgeId) const) {
  return [get](const Graph& g) { return per_edge<T>(g, [&](graphs::EdgeId e) { return (g.*get)(e); }); };
}

py::dict stats_dict(const graphs::GraphStats& s) {
  py::dict d;
  d["ops"] = s.ops;
  d["edges"] = s.edges;
  d["op_types"] = s.op_types;
  d["forward_ops"] = s.forward_ops;
  d["backward_ops"] = s.backward_ops;
  d["update_ops"] = s.update_ops;
  d["colocation_classes"] = s.colocation_classes;
  d["depth"] = s.depth;
  d["flops"] = s.flops;
  d["bytes_read"] = s.bytes_read;
  d["bytes_written"] = s.bytes_written;
  d["output_bytes"] = s.output_bytes;
  d["param_bytes"] = s.param_bytes;
  d["edge_bytes"] = s.edge_bytes;
  return d;
}

void check_op(const Graph& g, int64_t op) {
  if (op < 0 || op >= g.num_ops()) {
    throw Error(fmt::format("op index {} is out of range for graph {} ({} ops)", op, g.name(), g.num_ops()));
  }
}

}  // namespace

void init_graphs(py::module_& m) {
  py::class_<Graph> graph_class(m, "Graph", "An immutable op graph (placelab.graph IR); build it with make_model, "
                                            "read_graph, graph_from_dict or placelab.from_torch.");
  made_only_by(graph_class, "make_model, read_graph, graph_from_dict, expand_training or placelab.from_torch");
  graph_class.def_property_readonly("name", &Graph::name, "The graph's name.")
      .def_property_readonly("num_ops", &Graph::num_ops, "Number of ops.")
      .def_property_readonly("num_edges", &Graph::num_edges, "Number of edges.")
      .def("__len__", &Graph::num_ops, "Number of ops.")
      .def("__repr__", [](const Graph& g) {
        return fmt::format("<placelab.Graph '{}': {} ops, {} edges>", g.name(), g.num_ops(), g.num_edges());
      })
      .def_property_readonly("op_names", [](const Graph& g) {
        std::vector<std::string> v;
        for (graphs::OpId op = 0; op < g.num_ops(); ++op) v.push_back(g.op_name(op));
        return v;
      }, "Op names, indexed by op id.")
      .def_property_readonly("op_types", [](const Graph& g) {
        std::vector<std::string> v;
        for (graphs::OpId op = 0; op < g.num_ops(); ++op) v.push_back(g.op_type(op));
        return v;
      }, "Op types, indexed by op id.")
      .def_property_readonly("type_names", &Graph::type_names, "Distinct op types in first-seen order.")
      .def_property_readonly("pinned_kinds", [](const Graph& g) {
        std::vector<std::string> v;
        for (graphs::OpId op = 0; op < g.num_ops(); ++op) v.push_back(g.pinned_kind(op));
        return v;
      }, "Device kind each op is pinned to ('' when any kind may run it).")
      .def("find_op", [](const Graph& g, const TextArg& name_arg) {
        const std::string name = text_arg(name_arg, "name");
        graphs::OpId op = g.find_op(name);
        if (op < 0) throw Error(fmt::format("graph {} has no op named \"{}\"", g.name(), name));
        return op;
      }, py::arg("name"), "Id of the op called `name`; ValueError when there is none.")
      .def("successors", [](const Graph& g, const IntArg& op_arg) {
        const auto op = int_arg<int64_t>(op_arg, "op");
        check_op(g, op);
        return to_numpy(g.successors(static_cast<graphs::OpId>(op)));
      }, py::arg("op"), "Ids of the ops that consume `op`'s output.")
      .def("predecessors", [](const Graph& g, const IntArg& op_arg) {
        const auto op = int_arg<int64_t>(op_arg, "op");
        check_op(g, op);
        return to_numpy(g.predecessors(static_cast<graphs::OpId>(op)));
      }, py::arg("op"), "Ids of the ops `op` depends on.")
      .def_property_readonly("flops", op_array(&Graph::flops), "FLOPs per op (float64 array).")
      .def_property_readonly("bytes_read", op_array(&Graph::bytes_read), "Bytes read per op.")
      .def_property_readonly("bytes_written", op_array(&Graph::bytes_written), "Bytes written per op.")
      .def_property_readonly("output_bytes", op_array(&Graph::output_bytes), "Bytes of each op's output tensor.")
      .def_property_readonly("param_bytes", op_array(&Graph::param_bytes),
                             "Resident bytes per op (weights, optimizer state).")
      .def_property_readonly("temp_bytes", op_array(&Graph::temp_bytes), "Scratch bytes per op.")
      .def_property_readonly("gemm", [](const Graph& g) {
        std::vector<int64_t> dims;
        for (graphs::OpId op = 0; op < g.num_ops(); ++op)
          for (int64_t v : {g.gemm(op).batch, g.gemm(op).m, g.gemm(op).n, g.gemm(op).k}) dims.push_back(v);
        return to_numpy_2d(dims, g.num_ops(), 4);
      }, "Matrix-product shape per op, an (ops, 4) int64 array of [batch, m, n, k]; zeros where unknown.")
      .def_property_readonly("phase", [](const Graph& g) {
        return per_op<int8_t>(g, [&](int op) { return static_cast<int>(g.phase(op)); });
      }, "Phase per op: 0 forward, 1 backward, 2 update (int8 array).")
      .def_property_readonly("colocation", op_array(&Graph::colocation), "Colocation class per op (-1 for none).")
      .def_property_readonly("layer", op_array(&Graph::layer), "Layer (model block) per op (-1 for none).")
      .def_property_readonly("depth", op_array(&Graph::depth), "Longest path in ops from any source to each op.")
      .def_property_readonly("topo_order", [](const Graph& g) { return to_numpy(g.topo_order()); },
                             "Op ids in topological order (ties by smaller id).")
      .def_property_readonly("edge_src", edge_array(&Graph::edge_src), "Source op of each edge.")
      .def_property_readonly("edge_dst", edge_array(&Graph::edge_dst), "Destination op of each edge.")
      .def_property_readonly("edge_bytes", edge_array(&Graph::edge_bytes),
                             "Bytes of each edge (0 for a control edge).")
      .def("stats", [](const Graph& g) { return stats_dict(g.stats()); }, "Totals as a dict (as `placelab graph --stats`).")
      .def("to_dict", [](const Graph& g) { return py::dict(from_json(graphs::graph_to_json(g))); },
           "The placelab.graph document as a dict; graph_from_dict(g.to_dict()) equals g.")
      .def("write", [](const Graph& g, const Path& path) { graphs::write_graph(g, path); }, py::arg("path"),
           "Writes the graph to a placelab.graph JSON file.");

  m.def("models", [] {
    py::list out;
    for (const auto& info : graphs::zoo::models()) {
      py::dict params;
      for (const auto& p : info.params) params[py::str(p.name)] = py::make_tuple(p.value, p.help);
      py::dict d;
      d["name"] = info.name;
      d["summary"] = info.summary;
      d["params"] = params;
      out.append(d);
    }
    return out;
  }, "The model zoo: a list of {name, summary, params: {param: (default, help)}}.");
  m.def("make_model", [](const TextArg& name, const std::map<std::string, double>& params) {
    graphs::zoo::Params p(params.begin(), params.end());
    return graphs::zoo::make_model(text_arg(name, "name"), p);
  }, py::arg("name"), py::arg("params") = std::map<std::string, double>{},
        "Builds a zoo model's forward graph; `params` maps parameter names to numbers.");
  m.def("read_graph", [](const Path& path) { return graphs::read_graph(path); }, py::arg("path"),
        "Reads a placelab.graph JSON file, or the graph of an msr-dnn-partitioning instance file (read_msr).");
  m.def("write_graph", [](const Graph& g, const Path& path) { graphs::write_graph(g, path); },
        py::arg("graph"), py::arg("path"), "Writes a graph to a placelab.graph JSON file.");
  m.def("graph_from_dict", [](const py::dict& doc, const TextArg& origin_arg) {
    const std::string origin = text_arg(origin_arg, "origin");
    return graphs::graph_from_json(to_json(doc, origin), origin);
  }, py::arg("doc"), py::arg("origin") = "graph dict", "Builds a graph from a placelab.graph document (a dict).");
  m.def("graph_to_dict", [](const Graph& g) { return py::dict(from_json(graphs::graph_to_json(g))); }, py::arg("graph"),
        "The placelab.graph document of a graph, as a dict.");

  m.def("expand_training", [](const Graph& g, double optimizer_state_factor, double backward_flops_factor,
                              double update_flops_per_param_byte) {
    graphs::TrainingOptions o;
    o.optimizer_state_factor = optimizer_state_factor;
    o.backward_flops_factor = backward_flops_factor;
    o.update_flops_per_param_byte = update_flops_per_param_byte;
    return graphs::expand_training(g, o);
  }, py::arg("graph"), py::arg("optimizer_state_factor") = 2.0, py::arg("backward_flops_factor") = 2.0,
        py::arg("update_flops_per_param_byte") = 2.5,
        "One training step of a forward graph: backward op per forward op (id num_ops + f), update ops after.");

  py::class_<graphs::MsrInstance> msr_class(m, "MsrInstance",
                                            "An msr-dnn-partitioning throughput instance (Tarnawski et al. 2020): its "
                                            "graph and the machine it allows; place it on msr_cluster(instance).");
  made_only_by(msr_class, "read_msr");
  msr_class.def("__repr__", [](const graphs::MsrInstance& i) {
        return fmt::format("<placelab.MsrInstance '{}': {} ops, {} accelerators, {} CPUs>", i.graph.name(),
                           i.graph.num_ops(), i.max_accelerators, i.max_cpus);
      })
      .def_property_readonly("graph", [](const graphs::MsrInstance& i) -> const Graph& { return i.graph; },
                             py::return_value_policy::reference_internal,
                             "The graph (measured times per device kind in seconds, edge costs, colour classes).")
      .def_property_readonly("msr_id", [](const graphs::MsrInstance& i) { return to_numpy(i.msr_id); },
                             "msr node id of each op (int64 array).")
      .def_readonly("max_accelerators", &graphs::MsrInstance::max_accelerators, "maxFPGAs: accelerators allowed.")
      .def_readonly("max_cpus", &graphs::MsrInstance::max_cpus, "maxCPUs: CPUs allowed.")
      .def_readonly("accelerator_memory_bytes", &graphs::MsrInstance::accelerator_memory_bytes,
                    "maxSizePerFPGA: memory of each accelerator.")
      .def("op_of_msr_id", [](const graphs::MsrInstance& i, const IntArg& id_arg) {
        const auto id = int_arg<int64_t>(id_arg, "id");
        graphs::OpId op = i.op_of_msr_id(id);
        if (op < 0) throw Error(fmt::format("msr instance {} has no node with id {}", i.graph.name(), id));
        return op;
      }, py::arg("id"), "The op of msr node `id`; ValueError when there is none.");
  m.def("read_msr", [](const Path& path) { return graphs::read_msr(path); }, py::arg("path"),
        "Reads an msr-dnn-partitioning instance file (throughput-inputs/*/NAME.json).");
  m.def("read_msr_split", [](const Path& path, const graphs::MsrInstance& instance) {
    return to_numpy(graphs::split_placement(graphs::read_msr_split(path, instance), instance));
  }, py::arg("path"), py::arg("instance"),
        "Reads a human-expert split (human-experts/NAME_expert.json) of `instance` as a placement on "
        "msr_cluster(instance) (int32 array; -1 for ops the split leaves out).");

  py::class_<Coarsening> coarsening_class(m, "Coarsening",
                                          "A coarse graph and, for each original op, the coarse op holding it.");
  made_only_by(coarsening_class, "contract_colocation, fuse_chains, group_by_size, contract_labels or compose");
  coarsening_class.def("__repr__", [](const Coarsening& c) {
        return fmt::format("<placelab.Coarsening {} ops -> {} groups>", c.group_of.size(), c.graph.num_ops());
      })
      .def_property_readonly("graph", [](const Coarsening& c) -> const Graph& { return c.graph; },
                             py::return_value_policy::reference_internal, "The coarse graph.")
      .def_property_readonly("group_of", [](const Coarsening& c) { return to_numpy(c.group_of); },
                             "Coarse op of each original op (int32 array).")
      .def("expand_placement", [](const Coarsening& c, const IntsArg& coarse) {
        auto device_of = to_int32_vector(coarse.obj, "coarse placement");
        if (static_cast<int64_t>(device_of.size()) != c.graph.num_ops()) {
          throw Error(fmt::format("coarse placement has {} entries, the coarse graph {} ops", device_of.size(),
                                  c.graph.num_ops()));
        }
        return to_numpy(graphs::expand_placement(device_of, c));
      }, py::arg("coarse_placement"), "Placement of the original graph from one of the coarse graph.");

  m.def("contract_colocation", &graphs::contract_colocation, py::arg("graph"),
        "One coarse op per colocation class (acyclic).");
  m.def("fuse_chains", &graphs::fuse_chains, py::arg("graph"), "HSDAG chain fusion.");
  m.def("group_by_size", [](const Graph& g, const IntArg& max_groups) {
          return graphs::group_by_size(g, int_arg<int32_t>(max_groups, "max_groups"));
        },
        py::arg("graph"), py::arg("max_groups"), "At most max_groups groups contiguous in topological order.");
  m.def("contract_labels", [](const Graph& g, const IntsArg& labels, const TextArg& name_arg) {
    const std::string name = text_arg(name_arg, "name");
    const std::vector<int32_t> v32 = to_int32_vector(labels.obj, "labels");  // integers only, as placements
    if (v32.size() != static_cast<size_t>(g.num_ops())) {
      throw Error(fmt::format("labels has {} entries; give one per op ({})", v32.size(), g.num_ops()));
    }
    return graphs::contract_labels(g, std::vector<int64_t>(v32.begin(), v32.end()), name);
  }, py::arg("graph"), py::arg("labels"), py::arg("name"), "Groups ops by label, merging groups that would form a cycle.");
  m.def("compose", [](const Coarsening& first, const Coarsening& second) {
    if (second.group_of.size() != static_cast<size_t>(first.graph.num_ops())) {
      throw Error(fmt::format("compose: second coarsens a graph of {} ops, first.graph has {}",
                              second.group_of.size(), first.graph.num_ops()));
    }
    return graphs::compose(first, second);
  }, py::arg("first"), py::arg("second"),
        "first then second: maps the original ops to second.graph.");
}

}  // namespace placelab::python
