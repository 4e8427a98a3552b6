# The placelab._core bindings: round trips through files and dicts, numpy views of graphs and results,
# batch simulation against one-by-one runs, the placer registry, and the mapping of bad input to
# ValueError (never a crash of the interpreter).
import concurrent.futures
import copy
import json
import multiprocessing
import pickle
import subprocess
import sys

import numpy as np
import pytest

import placelab


def test_zoo_model_with_params_matches_its_stats(graph):
    s = graph.stats()
    assert graph.num_ops == s["ops"] == len(graph.op_names) == len(graph)
    assert graph.num_edges == s["edges"] == len(graph.edge_src)
    assert graph.flops.sum() == pytest.approx(s["flops"], rel=1e-12)
    assert graph.param_bytes.sum() == pytest.approx(s["param_bytes"], rel=1e-12)
    bigger = placelab.make_model("resnet50", {"batch": 4, "image_size": 75})
    assert bigger.flops.sum() == pytest.approx(2 * graph.flops.sum(), rel=1e-9)  # FLOPs scale with the batch


def test_graph_arrays_are_consistent(graph):
    order = graph.topo_order
    assert sorted(order.tolist()) == list(range(graph.num_ops))
    rank = np.empty(graph.num_ops, dtype=int)
    rank[order] = np.arange(graph.num_ops)
    assert (rank[graph.edge_src] < rank[graph.edge_dst]).all()
    assert graph.phase.dtype == np.int8 and (graph.phase == 0).all()
    assert graph.colocation.dtype == np.int32 and graph.layer.shape == (graph.num_ops,)
    first = graph.edge_src[0]
    assert graph.edge_dst[0] in graph.successors(first)
    assert graph.find_op(graph.op_names[5]) == 5


def test_graph_round_trips_through_dict_and_file(graph, tmp_path):
    doc = graph.to_dict()
    assert doc["format"] == "placelab.graph"
    again = placelab.graph_from_dict(doc)
    assert again.to_dict() == doc
    path = tmp_path / "g.json"
    graph.write(str(path))
    from_file = placelab.read_graph(str(path))
    assert from_file.to_dict() == doc
    assert json.loads(path.read_text())["name"] == graph.name


def _step_time_in_worker(graph, cluster, placement):
    return placelab.Simulator(graph, cluster).simulate(placement)["step_time_s"]


def test_graphs_and_clusters_pickle_into_worker_processes(graph, cluster, simulator):
    training = placelab.expand_training(graph)  # phases, colocation classes, update ops
    for obj in (graph, training, cluster):
        again = pickle.loads(pickle.dumps(obj))
        assert type(again) is type(obj) and again is not obj
        assert again.to_dict() == obj.to_dict()
        assert copy.copy(obj) is obj and copy.deepcopy([obj])[0] is obj  # immutable, like a tuple
    placements = simulator.random_placements(3, seed=5)
    # spawn: the worker starts afresh, so everything it gets came through pickle
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        remote = list(pool.map(_step_time_in_worker, [graph] * 3, [cluster] * 3, list(placements)))
    assert remote == [simulator.simulate(p)["step_time_s"] for p in placements]


@pytest.mark.parametrize("cls, comes_from", [("Graph", "make_model"), ("Cluster", "make_preset"),
                                             ("MsrInstance", "read_msr"), ("Coarsening", "group_by_size")])
def test_classes_without_a_constructor_refuse_new(cls, comes_from):
    # pybind11 would hand out an object with no C++ value behind it, which crashed on first use
    C = getattr(placelab, cls)
    for make in (lambda: C.__new__(C), lambda: C()):
        with pytest.raises(TypeError, match=f"{cls} objects come from .*{comes_from}"):
            make()


def test_new_of_classes_with_a_constructor_constructs(graph, cluster, simulator):
    # Cls.__new__(Cls) alone used to return an object with no C++ value, which crashed on first use
    for C in (placelab.Simulator, placelab.IncrementalSimulator):
        with pytest.raises(TypeError, match="incompatible constructor arguments"):
            C.__new__(C)
    placement = simulator.random_placement(seed=3)
    made = placelab.Simulator.__new__(placelab.Simulator, graph, cluster)
    assert made.simulate(placement)["step_time_s"] == simulator.simulate(placement)["step_time_s"]
    inc = placelab.IncrementalSimulator.__new__(placelab.IncrementalSimulator, made, placement, 2)
    assert inc.result["step_time_s"] == simulator.simulate(placement)["step_time_s"]

    for other in (placelab.Graph, placelab.Cluster, int):  # the base __new__ would make an empty one
        with pytest.raises(TypeError, match="must be Simulator or a subclass of it"):
            placelab.Simulator.__new__(other)

    class Plain(placelab.Simulator):  # keeps the constructor: __new__ runs it
        pass

    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        Plain.__new__(Plain)
    assert Plain(graph, cluster).simulate(placement)["step_time_s"] == made.simulate(placement)["step_time_s"]

    class Named(placelab.Simulator):  # a subclass's own __init__, with its own arguments, makes it
        def __init__(self, name, *args):
            super().__init__(*args)
            self.name = name

    named = Named("mine", graph, cluster)
    assert named.name == "mine" and named.simulate(placement)["step_time_s"] == made.simulate(placement)["step_time_s"]


def test_training_expansion_and_coarsening(graph):
    t = placelab.expand_training(graph)
    assert t.stats()["backward_ops"] == graph.num_ops
    assert (t.phase[: graph.num_ops] == 0).all() and (t.phase[graph.num_ops: 2 * graph.num_ops] == 1).all()
    c = placelab.group_by_size(graph, 8)
    assert c.graph.num_ops == 8 and c.group_of.shape == (graph.num_ops,)
    coarse_placement = np.arange(8) % 4
    fine = c.expand_placement(coarse_placement)
    assert (fine == coarse_placement[c.group_of]).all()
    fused = placelab.fuse_chains(graph)
    both = placelab.compose(fused, placelab.group_by_size(fused.graph, 4))
    assert both.graph.num_ops == 4 and both.group_of.max() == 3
    labels = np.arange(graph.num_ops) // 4
    assert placelab.contract_labels(graph, labels, "c").graph.num_ops <= len(set(labels.tolist()))
    with pytest.raises(ValueError, match="labels must hold integers"):
        placelab.contract_labels(graph, np.linspace(0, 3, graph.num_ops), "c")


def test_cluster_round_trips_and_presets(cluster, tmp_path):
    assert "v100-nvlink-4" in placelab.preset_names()
    assert any(f["family"] == "v100-nvlink" for f in placelab.preset_families())
    doc = cluster.to_dict()
    assert placelab.cluster_from_dict(doc).to_dict() == doc
    path = tmp_path / "c.json"
    cluster.write(str(path))
    assert placelab.load_cluster(str(path)).to_dict() == doc
    assert placelab.read_cluster(str(path)).device_names == cluster.device_names
    assert cluster.num_devices == 4 and len(cluster.device_kinds) == 4
    assert cluster.transfer_time_s(0, 1, 1e6) > cluster.transfer_time_s(0, 1, 1e3) > 0
    assert all(name in cluster.link_names for name in cluster.route(0, 1))


def test_simulate_returns_numpy_facts(simulator, cluster):
    p = simulator.random_placement(seed=1)
    assert p.dtype == np.int32 and p.shape == (simulator.num_ops,)
    r = simulator.simulate(p)
    assert r["step_time_s"] >= r["critical_path_s"] > 0
    assert r["device_busy_s"].shape == (cluster.num_devices,)
    assert r["link_bytes"].shape == (cluster.num_links,)
    assert r["device_busy_s"].max() <= r["step_time_s"] * (1 + 1e-12)
    single = simulator.simulate(np.zeros(simulator.num_ops, dtype=np.int64))
    assert single["num_transfers"] == 0 and single["total_bytes_moved"] == 0
    assert single["device_busy_s"][0] == pytest.approx(simulator.op_times()[:, 0].sum(), rel=1e-9)
    assert simulator.simulate(p.tolist())["step_time_s"] == r["step_time_s"]


def test_batch_equals_one_by_one(simulator):
    ps = simulator.random_placements(6, seed=7)
    assert ps.shape == (6, simulator.num_ops)
    assert (ps[0] != ps[1]).any()
    batch = simulator.simulate_batch(ps)
    for i, p in enumerate(ps):
        one = simulator.simulate(p)
        for key, value in one.items():
            assert np.array_equal(batch[key][i], value), key
    assert batch["device_peak_bytes"].shape == (6, simulator.num_devices)
    assert batch["oom"].dtype == bool
    again = simulator.random_placements(6, seed=7)
    assert np.array_equal(ps, again)  # seeded


def test_max_load_stream_and_trace(simulator, tmp_path):
    p = simulator.random_placement(seed=3)
    ml = simulator.max_load(p)
    assert ml["max_load_s"] == pytest.approx(ml["load_s"].max())
    s = simulator.simulate_stream(p, 3)
    assert s["micro_batches"] == 3 and s["makespan_s"] >= s["single_s"]
    tr = simulator.trace(p)
    assert sorted(tr["ops"]["op"].tolist()) == list(range(simulator.num_ops))
    assert len(tr["transfers"]["op"]) == tr["result"]["num_transfers"]
    assert tr["ops"]["end_s"].max() == pytest.approx(tr["result"]["step_time_s"])
    path = tmp_path / "t.json"
    simulator.write_trace(p, str(path))
    events = json.loads(path.read_text())
    assert len(events["traceEvents"] if isinstance(events, dict) else events) >= simulator.num_ops
    text = tmp_path / "t.txt"
    simulator.write_trace(p, str(text), format="text")
    assert text.read_text().count("\nop ") + text.read_text().startswith("op ") == simulator.num_ops


def test_simulator_options_change_behaviour(graph, cluster):
    fifo = placelab.Simulator(graph, cluster, {"priority": "rank", "share_bandwidth": False})
    shared = placelab.Simulator(graph, cluster, options={"share_bandwidth": True})
    p = fifo.random_placement(seed=5)
    assert fifo.simulate(p)["step_time_s"] > 0 and shared.simulate(p)["step_time_s"] > 0
    assert fifo.cost_model == "roofline"


def test_simulator_keeps_its_graph_and_cluster_alive():
    sim = placelab.Simulator(placelab.make_model("resnet50", {"batch": 1, "image_size": 75}),
                             placelab.make_preset("v100-pcie-2"))
    import gc
    gc.collect()
    assert sim.graph.num_ops == sim.num_ops
    assert sim.simulate(sim.random_placement(0))["step_time_s"] > 0


def test_placer_registry_by_name(simulator):
    names = [name for name, summary in placelab.placers()]
    assert len(names) == len(set(names)) and all(isinstance(s, str) for _, s in placelab.placers())
    for name in ("round_robin", "single_device", "random"):
        if name not in names:
            continue
        statuses = []
        p, info = placelab.place(simulator, name, {}, seed=1, progress=statuses.append)
        assert p.dtype == np.int32 and p.shape == (simulator.num_ops,)
        assert isinstance(info, dict)
        simulator.check_placement(p)
    if "random" in names:
        a, _ = placelab.place(simulator, "random", seed=4)
        b, _ = placelab.place(simulator, "random", seed=4)
        assert np.array_equal(a, b)


@pytest.mark.parametrize("call, message", [
    (lambda s: placelab.make_model("no_such_model"), "no_such_model"),
    (lambda s: placelab.make_model("resnet50", {"no_such_param": 1}), "no_such_param"),
    (lambda s: placelab.make_preset("v100-nvlink-3"), "v100-nvlink-3"),
    (lambda s: placelab.read_graph("/nonexistent/g.json"), "/nonexistent/g.json"),
    (lambda s: placelab.graph_from_dict({"format": "placelab.graph", "version": 1, "name": "x", "ops": []}), "op"),
    (lambda s: placelab.graph_from_dict({"format": "placelab.graph", "version": 1, "name": "x",
                                         "ops": [{"name": "a", "flops": float("nan")}]}), "JSON-able"),
    (lambda s: placelab.Simulator(s.graph, s.cluster, {"priority": 10**400}), "number too large for JSON"),
    (lambda s: placelab.cluster_from_dict({"format": "placelab.cluster"}), "cluster dict: missing \"version\""),
    (lambda s: s.simulate([0, 1]), "placement"),
    (lambda s: s.simulate(np.full(s.num_ops, 99)), "99"),
    (lambda s: s.simulate(np.full(s.num_ops, -1)), "-1"),
    (lambda s: s.simulate(np.zeros(s.num_ops) + 0.5), "integers"),
    (lambda s: s.simulate(np.zeros((2, s.num_ops), dtype=int)), "1-dimensional"),
    (lambda s: s.simulate(np.full(s.num_ops, 2**40)), "int32"),
    (lambda s: s.simulate_batch(np.zeros((3, 2), dtype=int)), "one column per op"),
    (lambda s: s.simulate_batch(np.vstack([np.zeros(s.num_ops, int), np.full(s.num_ops, 7)])), "row 1"),
    (lambda s: s.simulate_stream(np.zeros(s.num_ops, int), 0), "micro-batches"),
    (lambda s: s.write_trace(np.zeros(s.num_ops, int), "/tmp/x", format="svg"), "svg"),
    (lambda s: s.write_trace(np.zeros(s.num_ops, int), "/nonexistent/dir/t.json"), "/nonexistent/dir"),
    (lambda s: s.graph.find_op("nope"), "nope"),
    (lambda s: s.graph.successors(10**6), "out of range"),
    (lambda s: s.cluster.route(0, 9), "out of range"),
    (lambda s: s.random_placements(-1, 0), "n must be"),
    (lambda s: placelab.Simulator(s.graph, s.cluster, {"priority": "fastest"}), "fastest"),
    (lambda s: placelab.Simulator(s.graph, s.cluster, {"speed": 1}), "speed"),
    (lambda s: placelab.place(s, "no_such_placer"), "no_such_placer"),
    (lambda s: placelab.place(s, placelab.placers()[0][0] if placelab.placers() else "x", {"bogus": 1}), "bogus"),
    (lambda s: placelab.group_by_size(s.graph, 0), "max_groups"),
    (lambda s: placelab.group_by_size(s.graph, 4).expand_placement([0, 1]), "coarse placement"),
    (lambda s: (lambda c: c.expand_placement([-5] + [0] * (c.graph.num_ops - 1)))(placelab.group_by_size(s.graph, 4)),
     "on device -5; devices are indices from 0"),
    (lambda s: placelab.compose(placelab.group_by_size(s.graph, 4), placelab.group_by_size(s.graph, 2)), "compose"),
    (lambda s: placelab.expand_training(placelab.expand_training(s.graph)), "forward"),
])
def test_bad_input_raises_value_error_with_the_message(simulator, call, message):
    with pytest.raises(ValueError, match=None) as e:
        call(simulator)
    assert message in str(e.value)


@pytest.mark.parametrize("call, argument", [
    (lambda s: s.graph.find_op("\ud800"), "name"),
    (lambda s: placelab.make_model("\ud800"), "name"),
    (lambda s: placelab.make_preset("\ud800"), "name"),
    (lambda s: placelab.place(s, "\ud800"), "placer name"),
    (lambda s: placelab.train("\ud800", [(s.graph, s.cluster)]), "policy"),
    (lambda s: placelab.graph_from_dict(s.graph.to_dict(), "\ud800"), "origin"),
    (lambda s: s.cluster.find_device("\ud800"), "name"),
    (lambda s: s.graph.successors(2**70), "op"),
    (lambda s: s.graph.predecessors(-2**70), "op"),
    (lambda s: s.cluster.transfer_time_s(2**70, 1, 1.0), "src device"),
])
def test_names_and_integers_out_of_reach_are_value_errors_naming_the_argument(simulator, call, argument):
    # these took pybind11's multi-line "incompatible function arguments" TypeError
    with pytest.raises(ValueError, match=f"^{argument} (is |'\\\\ud800' is not valid Unicode)"):
        call(simulator)


def test_wrong_python_types_raise_type_error(simulator):
    with pytest.raises(TypeError):
        placelab.make_model(3)
    with pytest.raises(TypeError):
        placelab.make_model("resnet50", {"batch": "two"})
    with pytest.raises(TypeError):
        placelab.Simulator("graph", simulator.cluster)
    # A placement that is not an array of numbers at all; numbers that are wrong stay ValueError.
    for not_numbers in ("abc", None, {"op": 0}, 3, 2.5, [None] * simulator.num_ops):
        with pytest.raises(TypeError, match="placement must be an array of integers"):
            simulator.simulate(not_numbers)
    with pytest.raises(TypeError, match="placements must be an array of integers"):
        simulator.simulate_batch("abc")
    with pytest.raises(TypeError, match="progress callback must be callable, got int"):
        placelab.place(simulator, "random", progress=3)
    with pytest.raises(TypeError, match="name must be a str, got NoneType"):
        placelab.make_preset(None)


def test_bad_input_never_kills_the_interpreter():
    # Run the worst cases in a child interpreter: a crash would show as a signal exit code.
    code = """
import numpy as np, placelab
g = placelab.make_model("resnet50", {"batch": 1, "image_size": 75})
s = placelab.Simulator(g, placelab.make_preset("v100-pcie-2"))
bad = [np.array([], dtype=np.int32), np.full(g.num_ops, 2**31 - 1), np.full(g.num_ops, -2**31),
       np.zeros(g.num_ops, dtype=np.uint64) + 2**63, None, [None] * g.num_ops, np.zeros((0, g.num_ops))]
for b in bad:
    for f in (s.simulate, s.max_load, s.trace, s.simulate_batch):
        try:
            f(b)
        except (ValueError, TypeError):
            pass
print(s.simulate_batch(np.zeros((0, g.num_ops), dtype=np.int32))["step_time_s"].shape)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "(0,)"


def test_numpy_values_are_accepted_in_dicts(graph, cluster):
    sim = placelab.Simulator(graph, cluster, {"share_bandwidth": np.bool_(True)})
    assert sim.simulate(np.zeros(sim.num_ops, dtype=np.int16))["num_transfers"] == 0
    g = placelab.graph_from_dict({"format": "placelab.graph", "version": np.int64(1), "name": "n",
                                  "ops": [{"name": "a", "flops": np.float32(2.0)}, {"name": "b"}],
                                  "edges": [{"src": 0, "dst": 1, "bytes": np.arange(3)[2]}]})
    assert g.flops[0] == 2.0 and g.edge_bytes[0] == 2.0


def test_incremental_moves_equal_full_runs(simulator):
    p = simulator.random_placement(seed=11)
    inc = placelab.IncrementalSimulator(simulator, p, checkpoints=8)
    assert inc.result["step_time_s"] == simulator.simulate(p)["step_time_s"]
    for op, device in [(simulator.num_ops - 1, 0), (simulator.num_ops // 2, 3), (0, 1)]:
        r = inc.move(op, device)
        p[op] = device
        full = simulator.simulate(p)
        for key, value in full.items():
            assert np.array_equal(r[key], value), key
        assert np.array_equal(inc.placement, p)
        assert 0 < inc.last_replayed_fraction <= 1
    with pytest.raises(ValueError, match="out of range"):
        inc.move(-1, 0)
    with pytest.raises(ValueError, match="device"):
        inc.move(0, 17)
    # A group moves at once and equals a full run; a refused group changes none of its ops.
    group = [1, simulator.num_ops // 3, simulator.num_ops - 2]
    r = inc.move(group, 2)
    p[group] = 2
    for key, value in simulator.simulate(p).items():
        assert np.array_equal(r[key], value), key
    with pytest.raises(ValueError, match="device"):
        inc.move([3, 4], 17)
    assert np.array_equal(inc.placement, p)
    # undo reverts the last move exactly, once.
    before = inc.result
    inc.move([5, 6], 3)
    r = inc.undo()
    assert np.array_equal(inc.placement, p)
    for key, value in before.items():
        assert np.array_equal(r[key], value), key
    with pytest.raises(ValueError, match="nothing to revert"):
        inc.undo()


def test_incremental_move_within_a_limit(simulator):
    p = simulator.random_placement(seed=12)
    inc = placelab.IncrementalSimulator(simulator, p)
    before = inc.result
    q = p.copy()
    q[[2, 3]] = (p[2] + 1) % simulator.num_devices
    full = simulator.simulate(q)
    # Under a limit far below the new step time the replay stops: None, and the last result stays.
    assert inc.move([2, 3], int(q[2]), limit=full["step_time_s"] / 10) is None
    assert inc.result["step_time_s"] == before["step_time_s"]
    with pytest.raises(ValueError, match="resume"):
        inc.move(4, 0)
    assert inc.resume(full["step_time_s"] / 10) is None  # the same limit stops again
    r = inc.resume()  # no limit: to the end, equal to a full run
    for key, value in full.items():
        assert np.array_equal(r[key], value), key
    with pytest.raises(ValueError, match="no move stopped") as error:
        inc.resume()
    # It names the Python calls, not the C++ move_within().
    assert "IncrementalSimulator.resume()" in str(error.value) and "move(..., limit=...)" in str(error.value)
    assert "move_within" not in str(error.value)
    # A stopped move is undone like any other; a limit above the step time changes nothing.
    assert inc.move(5, (int(q[5]) + 1) % simulator.num_devices, limit=0.0) is None
    assert inc.undo()["step_time_s"] == full["step_time_s"]
    assert np.array_equal(inc.placement, q)
    r = inc.move(5, (int(q[5]) + 1) % simulator.num_devices, limit=float("inf"))
    assert r is not None and r["step_time_s"] == inc.result["step_time_s"]


def test_profile_cost_model(graph, cluster):
    kind, op_type = cluster.device_kinds[0], graph.op_types[1]
    profile = {"format": "placelab.profile", "version": 1,
               "entries": [{"device_kind": kind, "op_type": op_type, "time_s": 0.125}]}
    sim = placelab.Simulator(graph, cluster, profile=profile)
    assert sim.cost_model == "profile"
    same_type = np.array(graph.op_types) == op_type
    assert (sim.op_times()[same_type, 0] == 0.125).all()
    default = placelab.Simulator(graph, cluster)
    assert np.array_equal(sim.op_times()[~same_type], default.op_times()[~same_type])


def test_an_interrupt_stops_a_long_batch():
    import _thread
    import threading

    g = placelab.make_model("gnmt", {"layers": 2})  # 8k ops: 2000 placements take seconds
    sim = placelab.Simulator(g, placelab.make_preset("v100-nvlink-4"))
    placements = sim.random_placements(2000, seed=0)
    timer = threading.Timer(0.05, _thread.interrupt_main)  # what Ctrl-C or a Jupyter interrupt does
    timer.start()
    with pytest.raises(KeyboardInterrupt):  # raised between chunks, before the whole batch is done
        sim.simulate_batch(placements)
    timer.join()


def test_an_error_quoting_bytes_that_are_not_utf8_keeps_its_message(tmp_path):
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"format":"placelab.graph","version":1,"name":"caf\xe9","ops":[{"name":"a"}]}')
    with pytest.raises(ValueError) as e:
        placelab.read_graph(str(path))
    assert str(path) in str(e.value) and "UTF-8" in str(e.value)  # was an empty ValueError


def test_paths_may_be_pathlib_paths(tmp_path, simulator):
    graph = simulator.graph
    graph.write(tmp_path / "g.json")
    placelab.write_cluster(simulator.cluster, tmp_path / "c.json")
    assert placelab.read_graph(tmp_path / "g.json").num_ops == graph.num_ops
    assert placelab.load_cluster(tmp_path / "c.json").name == simulator.cluster.name
    simulator.write_trace(simulator.random_placement(seed=1), tmp_path / "t.json")
    assert (tmp_path / "t.json").exists()
    with pytest.raises(TypeError):
        placelab.read_graph(3)
    with pytest.raises(ValueError, match=str(tmp_path / "none")):  # a Path option reaches the placer as text
        placelab.place(simulator, "hdp", {"checkpoint": tmp_path / "none"})


def test_a_callback_exception_reaches_the_caller_as_itself(simulator):
    class Stop(Exception):
        pass

    def progress(status):
        raise Stop(status)

    with pytest.raises(Stop) as raised:
        placelab.place(simulator, "annealing", {"steps": 50}, progress=progress)
    assert raised.value.__notes__ == ["raised in the progress callback"]


def test_argument_checks_keep_what_worked(simulator, tmp_path):
    # The stricter argument checks must not refuse what is valid, nor hang on what json.dumps refuses.
    import io

    cyclic = []
    cyclic.append(cyclic)
    cyclic.append(cyclic)
    with pytest.raises(ValueError, match="Circular reference"):
        placelab.place(simulator, "heft", options={"x": cyclic})
    n = simulator.num_ops
    as_objects = np.zeros(n, dtype=object)  # Python ints kept as objects are still integers
    assert simulator.simulate(as_objects)["step_time_s"] == simulator.simulate(np.zeros(n, int))["step_time_s"]
    with pytest.raises(ValueError, match="placement has a value outside int32"):
        simulator.simulate([np.int64(0)] * (n - 1) + [2**70])
    inc = placelab.IncrementalSimulator(simulator, np.zeros(n, int))
    assert inc.move(np.array(3), 1)["step_time_s"] == inc.move(3, 1)["step_time_s"]  # a 0-d array is one op
    assert inc.move(ops=[1, 2], device=1)["step_time_s"] > 0 and inc.move(op=np.int32(4), device=1)
    with pytest.raises(ValueError, match="steps is 18446744073709551616, outside"):
        placelab.train("gdp", [(simulator.graph, simulator.cluster)], steps=2**64)
    from placelab import viz

    buffer = io.BytesIO()  # savefig takes file objects
    viz.link_utilisation(simulator, simulator.simulate(np.zeros(n, int)), path=buffer)
    assert buffer.getvalue().startswith(b"\x89PNG")
    viz.training_curves([{"step": 0, "reward": 1.0}, {"step": 1, "reward": 2.0}], keys="reward")


def test_signatures_name_the_types_arguments_take():
    # help() shows what an argument must be, not pybind11's `object`.
    assert "seed: int = 0" in placelab.train.__doc__
    assert "checkpoint: str | os.PathLike | None = None" in placelab.train.__doc__
    assert "placement: Sequence[int] | numpy.ndarray" in placelab.Simulator.simulate.__doc__
    assert "options: dict | None = None" in placelab.place.__doc__
    assert "-> dict" in placelab.read_checkpoint.__doc__


def test_dict_arguments_of_another_type_are_type_errors():
    # docs/python.md: wrong Python types raise TypeError (a list of options was a ValueError).
    sim = placelab.Simulator(placelab.make_model("random_dag", {"ops": 10}), placelab.make_preset("cpu-gpu-2"))
    task = [(sim.graph, sim.cluster)]
    for call in (lambda: placelab.place(sim, "heft", [1, 2]), lambda: placelab.place(sim, "heft", "x"),
                 lambda: placelab.Simulator(sim.graph, sim.cluster, options=[1]),
                 lambda: placelab.train("gdp", task, steps=1, options=[1])):
        with pytest.raises(TypeError, match="^options must be a dict or None, got (list|str)$"):
            call()
    with pytest.raises(TypeError, match="^reward must be a dict or None, got list$"):
        placelab.train("gdp", task, steps=1, reward=[1])
    assert len(placelab.place(sim, "heft", None)[0]) == len(placelab.place(sim, "heft", {})[0]) == 10
