# Claims of docs/python.md (the `import placelab` API), checked from that page alone (plus the semantics
# it links to: docs/simulator.md "Batch and incremental simulation" / "Pipelined mode", the graph format of
# docs/formats.md, the coarsenings of docs/graph_transforms.md, the training run of docs/learned.md):
# names, argument names and defaults, return types and shapes, documented keys, the errors promised
# (ValueError with the core's one-line message naming what is at fault, TypeError for wrong Python
# types), str/pathlib.Path file arguments, seeded determinism, simulate_batch == one-by-one simulate,
# IncrementalSimulator move/group move/undo against full simulations, dict and file round trips,
# placers/compare (against the CLI's compare), training (callbacks, early stop, exact resume,
# checkpoint header, callback exceptions), torch.fx import (FLOP and parameter-byte rules, state
# restored), viz/tables with Agg, msr inputs, and Ctrl-C (a real SIGINT) for simulate_batch and the
# long placers. Small graphs and clusters; no wall-clock assertions.
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import warnings

import numpy as np
import pytest

import placelab as pl

REPO = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("PLACELAB_SHARED_DATA", str(REPO.parent / "shared" / "data")))
MSR = SHARED / "msr-dnn-partitioning"
BERT_LAYERS = MSR / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"
BERT_EXPERT = MSR / "human-experts" / "bert24_inference_expert.json"
needs_msr = pytest.mark.skipif(not BERT_LAYERS.exists(), reason="msr-dnn-partitioning data not found")


def same_result(a, b):
    assert set(a) == set(b)
    for k in a:
        va, vb = a[k], b[k]
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            np.testing.assert_array_equal(np.asarray(va), np.asarray(vb), err_msg=k)
        else:
            assert va == vb, k


def tiny_graph(pinned=False):
    ops = [{"name": "a", "type": "MatMul", "measured_s": {"v100": 1.0}, "output_bytes": 1000, "param_bytes": 100},
           {"name": "b", "type": "MatMul", "measured_s": {"v100": 2.0}, "output_bytes": 1000},
           {"name": "c", "type": "Relu", "measured_s": {"v100": 1.0}, "output_bytes": 1000}]
    if pinned:
        ops[2]["pinned_kind"] = "cpu"
    return pl.graph_from_dict({"format": "placelab.graph", "version": 1, "name": "tiny", "ops": ops,
                               "edges": [{"src": "a", "dst": "b", "bytes": 1000},
                                         {"src": "b", "dst": "c", "bytes": 1000}]})


def small_dag(seed, ops=24):
    return pl.make_model("random_dag", {"seed": seed, "ops": ops, "width": 4})


# ---------------------------------------------------------------------------------------------- graphs


def test_models_lists_the_zoo():
    names = [m["name"] if isinstance(m, dict) else m[0] if isinstance(m, tuple) else m for m in pl.models()]
    assert "resnet50" in names and "gnmt" in names


def test_graph_arrays_are_numpy_indexed_by_op_id(graph):
    n, m = graph.num_ops, graph.num_edges
    assert isinstance(n, int) and isinstance(m, int) and n > 0 and m > 0
    for name in ["flops", "output_bytes", "param_bytes", "phase", "colocation", "layer", "topo_order"]:
        a = getattr(graph, name)
        assert isinstance(a, np.ndarray), name
        assert a.shape == (n,), name
    for name in ["edge_src", "edge_dst", "edge_bytes"]:
        a = getattr(graph, name)
        assert isinstance(a, np.ndarray) and a.shape == (m,), name
    assert len(graph.op_names) == n
    assert graph.stats()["flops"] == pytest.approx(float(graph.flops.sum()), rel=1e-9)


def test_topo_order_is_a_topological_permutation(graph):
    order = graph.topo_order
    assert sorted(order.tolist()) == list(range(graph.num_ops))
    pos = np.empty(graph.num_ops, dtype=np.int64)
    pos[order] = np.arange(graph.num_ops)
    assert np.all(pos[graph.edge_src] < pos[graph.edge_dst])


def test_find_op_head_matmul_is_the_classifier(graph):
    i = graph.find_op("head/MatMul")
    assert graph.op_names[i] == "head/MatMul"
    # the classifier is the only MatMul of resnet50 and carries FLOPs
    assert graph.flops[i] > 0


def test_find_op_unknown_name_raises_valueerror_naming_it(graph):
    with pytest.raises(ValueError, match="no_such_op_xyz"):
        graph.find_op("no_such_op_xyz")


def test_graph_dict_round_trip(graph):
    doc = graph.to_dict()
    assert doc["format"] == "placelab.graph" and doc["version"] == 1
    same = pl.graph_from_dict(doc)
    assert same.to_dict() == doc
    assert pl.graph_to_dict(graph) == doc
    np.testing.assert_array_equal(same.flops, graph.flops)
    np.testing.assert_array_equal(same.edge_src, graph.edge_src)


def test_graph_file_round_trip_str_and_path(graph, tmp_path):
    p1 = tmp_path / "g1.json"
    graph.write(str(p1))
    graph.write(tmp_path / "g3.json")
    assert pl.read_graph(tmp_path / "g3.json").to_dict() == graph.to_dict()
    g1 = pl.read_graph(p1)  # pathlib.Path
    p2 = tmp_path / "g2.json"
    pl.write_graph(graph, p2)
    g2 = pl.read_graph(str(p2))
    assert g1.to_dict() == graph.to_dict() == g2.to_dict()
    assert json.loads(p1.read_text())["format"] == "placelab.graph"


def test_expand_training_adds_backward_and_update(graph):
    train = pl.expand_training(graph)
    assert train.num_ops > graph.num_ops
    assert len(set(train.phase.tolist())) == 3  # forward, backward, update
    assert len(set(graph.phase.tolist())) == 1


def test_group_by_size_coarsening(graph):
    c = pl.group_by_size(graph, 16)
    assert c.graph.num_ops == 16  # min(max_groups, num_ops) groups (graph_transforms.md)
    g_of = np.asarray(c.group_of)
    assert g_of.shape == (graph.num_ops,)
    # contiguous runs of topo_order, numbered by first member in that order
    along = g_of[graph.topo_order]
    assert np.all(np.diff(along) >= 0) and along[0] == 0
    coarse = np.arange(16, dtype=np.int32) % 4
    fine = np.asarray(c.expand_placement(coarse))
    assert fine.shape == (graph.num_ops,)
    np.testing.assert_array_equal(fine, coarse[g_of])


def test_other_coarsenings_and_compose(graph):
    chains = pl.fuse_chains(graph)
    coloc = pl.contract_colocation(graph)
    for c in (chains, coloc):
        assert 0 < c.graph.num_ops <= graph.num_ops
        assert len(c.group_of) == graph.num_ops
    labels = [i // 10 for i in graph.topo_order.argsort()]  # runs of 10 ops in topological order
    lab = pl.contract_labels(graph, labels, "tens")
    g_of = np.asarray(lab.group_of)
    for i in range(graph.num_ops):
        for j in range(graph.num_ops):
            if labels[i] == labels[j]:
                assert g_of[i] == g_of[j]
    second = pl.group_by_size(chains.graph, 5)
    both = pl.compose(chains, second)
    assert both.graph.num_ops == second.graph.num_ops
    np.testing.assert_array_equal(np.asarray(both.group_of),
                                  np.asarray(second.group_of)[np.asarray(chains.group_of)])


# ---------------------------------------------------------------------------------------------- clusters


def test_cluster_presets_and_round_trips(tmp_path):
    names = pl.preset_names()
    assert "v100-nvlink-4" in names
    fams = pl.preset_families()
    assert len(fams) > 0
    c = pl.make_preset("v100-nvlink-4")
    assert list(c.device_names) == [d["name"] for d in c.to_dict()["devices"]]
    assert c.num_devices == len(c.device_names) == 4
    assert pl.cluster_from_dict(c.to_dict()).to_dict() == c.to_dict()
    pl.write_cluster(c, tmp_path / "c.json")
    pl.write_cluster(c, str(tmp_path / "d.json"))
    assert pl.read_cluster(str(tmp_path / "c.json")).to_dict() == c.to_dict()
    assert pl.read_cluster(tmp_path / "d.json").to_dict() == c.to_dict()
    assert pl.load_cluster("v100-nvlink-4").to_dict() == c.to_dict()
    assert pl.load_cluster(tmp_path / "c.json").to_dict() == c.to_dict()


def test_route_and_transfer_time():
    c = pl.make_preset("v100-nvlink-8")
    links = {l["name"] for l in c.to_dict().get("links", [])}
    route = c.route(0, 5)
    assert len(route) >= 1 and all(isinstance(n, str) and n in links for n in route)
    t1, t2, t3 = c.transfer_time_s(0, 5, 1e6), c.transfer_time_s(0, 5, 2e6), c.transfer_time_s(0, 5, 3e6)
    assert 0 < t1 < t2 < t3
    assert t3 - t2 == pytest.approx(t2 - t1, rel=1e-9)  # idle network: affine in the bytes


def test_placers_match_cli_list():
    binary = os.environ.get("PLACELAB_BIN")
    if not binary:
        pytest.skip("PLACELAB_BIN not set")
    out = subprocess.run([binary, "compare", "--list", "--json"], capture_output=True, text=True, check=True)
    doc = json.loads(out.stdout)
    assert sorted(n for n, _ in pl.placers()) == sorted(p["name"] for p in doc["placers"])
    assert list(pl.fast_placers()) == doc["fast"]


# ---------------------------------------------------------------------------------------------- simulator


def test_simulator_options_accepted_and_unknown_rejected(graph, cluster):
    p = pl.Simulator(graph, cluster).random_placement(seed=0)
    for opts in [{"priority": "rank", "share_bandwidth": True}, {"use_measured": True},
                 {"use_edge_comm": False}]:
        r = pl.Simulator(graph, cluster, opts).simulate(p)
        assert r["step_time_s"] > 0
    with pytest.raises(ValueError, match="no_such_option"):
        pl.Simulator(graph, cluster, {"no_such_option": 1})


def test_random_placement_int32_seeded(simulator, graph, cluster):
    p = simulator.random_placement(seed=0)
    assert isinstance(p, np.ndarray) and p.dtype == np.int32 and p.shape == (graph.num_ops,)
    assert p.min() >= 0 and p.max() < cluster.num_devices
    np.testing.assert_array_equal(p, simulator.random_placement(seed=0))
    assert not np.array_equal(p, simulator.random_placement(seed=1))


def test_simulate_result_dict(simulator, cluster):
    p = simulator.random_placement(seed=0)
    r = simulator.simulate(p)
    assert isinstance(r, dict)
    assert r["step_time_s"] > 0 and isinstance(r["step_time_s"], float)
    assert isinstance(r["oom"], bool)
    assert isinstance(r["device_peak_bytes"], np.ndarray) and r["device_peak_bytes"].shape == (cluster.num_devices,)
    assert r["device_busy_s"].shape == (cluster.num_devices,)
    # deterministic
    same_result(r, simulator.simulate(p))
    # a list placement is accepted as well as the array
    same_result(r, simulator.simulate(p.tolist()))


def test_simulate_batch_equals_one_by_one(simulator, graph):
    P = simulator.random_placements(24, seed=1)
    assert isinstance(P, np.ndarray) and P.shape == (24, graph.num_ops) and P.dtype == np.int32
    np.testing.assert_array_equal(P, simulator.random_placements(24, seed=1))
    batch = simulator.simulate_batch(P)
    for i in range(24):
        one = simulator.simulate(P[i])
        for k, v in one.items():
            b = np.asarray(batch[k])
            assert b.shape[0] == 24, k
            np.testing.assert_array_equal(b[i], np.asarray(v), err_msg=k)


def test_simulate_batch_invalid_throws_first_invalid_error(simulator, graph):
    P = simulator.random_placements(6, seed=3)
    P[2, 7] = 99
    P[4, 3] = -1
    with pytest.raises(ValueError) as e_one:
        simulator.simulate(P[2])
    with pytest.raises(ValueError) as e_batch:
        simulator.simulate_batch(P)
    # the error of the first invalid row (row 2, not row 4), with the row named as context
    assert str(e_batch.value).endswith(str(e_one.value))
    assert "2" in str(e_batch.value)[: -len(str(e_one.value))]
    assert graph.op_names[7] in str(e_one.value)


def test_simulate_rejects_bad_placements_with_one_line_valueerror(simulator, graph):
    p = simulator.random_placement(seed=0)
    with pytest.raises(ValueError) as e:
        simulator.simulate(p[:-1])
    assert "\n" not in str(e.value)
    q = p.copy()
    q[5] = 4
    with pytest.raises(ValueError, match=graph.op_names[5].replace("/", ".")) as e:
        simulator.simulate(q)
    assert "\n" not in str(e.value)


def test_wrong_python_types_raise_typeerror(simulator, cluster):
    with pytest.raises(TypeError):
        pl.make_model(42)
    with pytest.raises(TypeError):
        pl.Simulator("resnet50", cluster)
    with pytest.raises(TypeError):
        simulator.simulate(None)
    with pytest.raises(TypeError):
        simulator.simulate({"not": "a placement"})


def test_bad_inputs_raise_valueerror_naming_the_fault(tmp_path):
    missing = tmp_path / "missing_graph.json"
    with pytest.raises(ValueError, match="missing_graph.json"):
        pl.read_graph(missing)
    bad = tmp_path / "bad.json"
    doc = tiny_graph().to_dict()
    doc["ops"][1]["flops"] = -2
    bad.write_text(json.dumps(doc))
    with pytest.raises(ValueError) as e:
        pl.read_graph(bad)
    assert "bad.json" in str(e.value) and "ops[1].flops" in str(e.value)
    with pytest.raises(ValueError, match="no_such_model"):
        pl.make_model("no_such_model")
    with pytest.raises(ValueError, match="batch"):
        pl.make_model("resnet50", {"batch": 0})
    with pytest.raises(ValueError, match="no_such_preset"):
        pl.make_preset("no_such_preset")


def test_max_load_single_device_is_its_compute():
    g = tiny_graph()
    c = pl.make_preset("v100-nvlink-2")
    sim = pl.Simulator(g, c)
    p = np.zeros(g.num_ops, dtype=np.int32)
    ml = sim.max_load(p)
    assert ml["max_load_s"] == pytest.approx(4.0)
    assert sim.is_contiguous(p) is True
    # a -> b -> c with a, c on d0 and b on d1 is not contiguous
    assert sim.is_contiguous(np.array([0, 1, 0], dtype=np.int32)) is False


def test_simulate_stream_period_formula(simulator):
    p = simulator.random_placement(seed=2)
    one = simulator.simulate_stream(p, 1)
    assert one["time_per_batch_s"] == pytest.approx(one["makespan_s"], rel=1e-12)
    s = simulator.simulate_stream(p, 16)
    assert s["makespan_s"] >= one["makespan_s"]
    assert s["time_per_batch_s"] == pytest.approx((s["makespan_s"] - one["makespan_s"]) / 15, rel=1e-9)


def test_trace_arrays_result_and_memory(simulator, graph, cluster):
    p = simulator.random_placement(seed=0)
    r = simulator.simulate(p)
    trace = simulator.trace(p)
    same_result(trace["result"], r)
    ops = trace["ops"]
    arrays = list(ops.values()) if isinstance(ops, dict) else [ops]
    assert arrays and all(isinstance(a, np.ndarray) and len(a) == graph.num_ops for a in arrays)
    tr = trace["transfers"]
    tarrays = list(tr.values()) if isinstance(tr, dict) else [tr]
    assert all(isinstance(a, np.ndarray) and len(a) == r["num_transfers"] for a in tarrays)
    from placelab import viz
    times, per_dev = viz.memory_over_time(simulator, trace, p)
    per_dev = np.asarray(per_dev)
    assert len(times) == per_dev.shape[-1] or len(times) == per_dev.shape[0]
    dev_axis_max = per_dev.max(axis=-1) if per_dev.shape[0] == cluster.num_devices else per_dev.max(axis=0)
    np.testing.assert_array_equal(dev_axis_max, r["device_peak_bytes"])
    mem = trace["memory"]
    peak = [max([b for d, b in zip(mem["device"], mem["bytes"]) if d == k], default=0)
            for k in range(cluster.num_devices)]
    np.testing.assert_array_equal(np.asarray(peak, dtype=float), r["device_peak_bytes"])


def test_trace_memory_peak_with_zero_time_ops():
    ops = [{"name": "a", "measured_s": {"v100": 0.0}, "output_bytes": 10, "param_bytes": 100, "temp_bytes": 5},
           {"name": "b", "measured_s": {"v100": 0.0}, "output_bytes": 20, "temp_bytes": 7},
           {"name": "c", "measured_s": {"v100": 0.0}, "temp_bytes": 50}]
    g = pl.graph_from_dict({"format": "placelab.graph", "version": 1, "name": "z", "ops": ops,
                            "edges": [{"src": "a", "dst": "b", "bytes": 10}, {"src": "b", "dst": "c", "bytes": 20}]})
    sim = pl.Simulator(g, pl.make_preset("v100-nvlink-2"))
    p = np.zeros(3, dtype=np.int32)
    trace = sim.trace(p)
    r = sim.simulate(p)
    assert r["device_peak_bytes"][0] == 170  # the memory example of simulator.md
    from placelab import viz
    _, per_dev = viz.memory_over_time(sim, trace, p)
    np.testing.assert_array_equal(np.asarray(per_dev).max(axis=-1), r["device_peak_bytes"])


def test_write_trace_chrome_json_str_and_path(simulator, tmp_path):
    p = simulator.random_placement(seed=0)
    simulator.write_trace(p, tmp_path / "step.json")
    simulator.write_trace(p, str(tmp_path / "step2.json"))
    doc = json.loads((tmp_path / "step.json").read_text())
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    assert any(e.get("ph") == "X" for e in events)
    assert (tmp_path / "step.json").read_text() == (tmp_path / "step2.json").read_text()


def test_profile_table_path_or_dict(tmp_path):
    g = tiny_graph()
    c = pl.make_preset("v100-nvlink-2")
    g2 = pl.graph_from_dict({**g.to_dict(), "ops": [{k: v for k, v in o.items() if k != "measured_s"}
                                                    for o in g.to_dict()["ops"]]})
    prof = {"format": "placelab.profile", "version": 1,
            "entries": [{"device_kind": "v100", "op_type": "MatMul", "time_s": 0.5},
                        {"device_kind": "v100", "op": "c", "time_s": 0.25}]}
    (tmp_path / "calib.json").write_text(json.dumps(prof))
    p = np.zeros(3, dtype=np.int32)
    r_path = pl.Simulator(g2, c, profile=str(tmp_path / "calib.json")).simulate(p)
    r_pathlib = pl.Simulator(g2, c, profile=tmp_path / "calib.json").simulate(p)
    r_dict = pl.Simulator(g2, c, profile=prof).simulate(p)
    assert r_path["step_time_s"] == pytest.approx(1.25)
    same_result(r_path, r_dict)
    same_result(r_path, r_pathlib)


def test_simulate_from_threads_is_consistent(simulator):
    P = simulator.random_placements(8, seed=5)
    expect = [simulator.simulate(p)["step_time_s"] for p in P]
    got = [None] * 8

    def run(i):
        got[i] = simulator.simulate(P[i])["step_time_s"]

    ts = [threading.Thread(target=run, args=(i,)) for i in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert got == expect


# ---------------------------------------------------------------------------------------------- incremental


def test_incremental_moves_equal_full_simulation(simulator, graph, cluster):
    p = simulator.random_placement(seed=0)
    inc = pl.IncrementalSimulator(simulator, p)
    same_result(inc.result, simulator.simulate(p))
    rng = np.random.default_rng(4)
    cur = p.copy()
    for _ in range(15):
        op, dev = int(rng.integers(graph.num_ops)), int(rng.integers(cluster.num_devices))
        r = inc.move(op, dev)
        cur[op] = dev
        same_result(r, simulator.simulate(cur))
        same_result(inc.result, r)
        assert 0.0 <= inc.last_replayed_fraction <= 1.0


def test_incremental_undo_restores_exactly(simulator, graph):
    p = simulator.random_placement(seed=1)
    inc = pl.IncrementalSimulator(simulator, p, checkpoints=4)
    before = inc.result
    op = int(graph.topo_order[graph.num_ops // 2])
    inc.move(op, (int(p[op]) + 1) % 4)
    inc.undo()
    same_result(inc.result, before)
    # state really is the old one: a later move equals a full run from the old placement
    q = p.copy()
    q[3] = (q[3] + 2) % 4
    same_result(inc.move(3, int(q[3])), simulator.simulate(q))
    # only the last move, once
    inc.undo()
    with pytest.raises(ValueError):
        inc.undo()
    same_result(inc.result, before)


def test_incremental_undo_without_move_raises(simulator):
    inc = pl.IncrementalSimulator(simulator, simulator.random_placement(seed=0))
    with pytest.raises(ValueError):
        inc.undo()


def test_incremental_group_move(simulator, graph):
    p = simulator.random_placement(seed=2)
    inc = pl.IncrementalSimulator(simulator, p)
    ops = [int(o) for o in graph.topo_order[10:14]]
    r = inc.move(ops, 3)
    q = p.copy()
    q[ops] = 3
    same_result(r, simulator.simulate(q))
    inc.undo()
    same_result(inc.result, simulator.simulate(p))


def test_incremental_invalid_move_raises_and_changes_nothing(simulator, graph):
    p = simulator.random_placement(seed=3)
    inc = pl.IncrementalSimulator(simulator, p)
    before = inc.result
    with pytest.raises(ValueError):
        inc.move(0, 17)
    with pytest.raises(ValueError):
        inc.move(graph.num_ops + 5, 0)
    with pytest.raises(ValueError):
        inc.move([1, 2, graph.num_ops], 0)  # one op out of range: none moves
    same_result(inc.result, before)
    q = p.copy()
    q[1] = (q[1] + 1) % 4
    same_result(inc.move(1, int(q[1])), simulator.simulate(q))


def test_incremental_pinned_group_move_changes_nothing():
    g = tiny_graph(pinned=True)
    c = pl.make_preset("cpu-gpu-1")
    kinds = [d["kind"] for d in c.to_dict()["devices"]]
    cpu, gpu = kinds.index("cpu"), 1 - kinds.index("cpu")
    sim = pl.Simulator(g, c)
    p = np.array([gpu, gpu, cpu], dtype=np.int32)
    inc = pl.IncrementalSimulator(sim, p)
    before = inc.result
    with pytest.raises(ValueError, match="c"):
        inc.move([1, 2], gpu)
    same_result(inc.result, before)
    q = p.copy()
    q[1] = cpu
    same_result(inc.move(1, cpu), sim.simulate(q))


def test_greedy_local_search_example(simulator, cluster):
    rng = np.random.default_rng(0)
    cur = simulator.random_placement(seed=0)
    inc = pl.IncrementalSimulator(simulator, cur)
    best = inc.result["step_time_s"]
    for _ in range(20):
        op, dev = int(rng.integers(simulator.num_ops)), int(rng.integers(cluster.num_devices))
        r = inc.move(op, dev)
        if r["step_time_s"] < best:
            best = r["step_time_s"]
            cur[op] = dev
        else:
            inc.undo()
    assert inc.result["step_time_s"] == best
    same_result(inc.result, simulator.simulate(cur))


# ---------------------------------------------------------------------------------------------- placers


def test_placers_list_and_place(simulator, graph):
    lst = pl.placers()
    assert all(isinstance(t, tuple) and len(t) == 2 and all(isinstance(x, str) for x in t) for t in lst)
    names = [n for n, _ in lst]
    for n in ["m_etf", "single_device", "round_robin", "dp", "annealing", "gdp"]:
        assert n in names
    seen = []
    placement, info = pl.place(simulator, "m_etf", options={}, seed=0, progress=lambda *a: seen.append(a))
    assert seen and all(isinstance(a[0], str) for a in seen)  # progress=print works: lines of text
    placement = np.asarray(placement)
    assert placement.shape == (graph.num_ops,)
    assert isinstance(info, dict)
    simulator.simulate(placement)
    a, _ = pl.place(simulator, "random", seed=7)
    b, _ = pl.place(simulator, "random", seed=7)
    np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_place_bad_name_or_option_valueerror(simulator):
    with pytest.raises(ValueError, match="no_such_placer"):
        pl.place(simulator, "no_such_placer")
    with pytest.raises(ValueError, match="no_such_opt"):
        pl.place(simulator, "m_etf", options={"no_such_opt": 1})


def test_fast_placers_and_compare(simulator):
    fast = list(pl.fast_placers())
    assert fast == ["single_device", "round_robin", "random", "human_expert", "metis", "scotch", "heft",
                    "m_topo", "m_etf", "m_sct"]
    df = pl.compare(simulator, ["single_device", "round_robin", "m_etf"])
    assert len(df) == 3
    text = df.to_string()
    for n in ["single_device", "round_robin", "m_etf"]:
        assert n in text
    full = pl.compare(simulator)
    assert len(full) == len(fast)


def test_compare_matches_cli_with_seed_0(simulator):
    binary = os.environ.get("PLACELAB_BIN")
    if not binary:
        pytest.skip("PLACELAB_BIN not set")
    out = subprocess.run([binary, "compare", "--graph", "resnet50:batch=2,image_size=75", "--cluster",
                          "v100-nvlink-4", "--seed", "0", "--json"], capture_output=True, text=True, check=True)
    rows = {r["placer"]: r["step_time_s"] for r in json.loads(out.stdout)["rows"]}
    df = pl.compare(simulator)
    col = "placer" if "placer" in df.columns else None
    names = list(df[col]) if col else list(df.index)
    steps = dict(zip(names, df["step_time_s"]))
    assert set(steps) == set(rows)
    for n in rows:
        assert steps[n] == pytest.approx(rows[n], rel=1e-12), n


# ---------------------------------------------------------------------------------------------- interrupts


def _sigint_after(delay):
    return subprocess.Popen(["/bin/sh", "-c", f"sleep {delay}; kill -INT {os.getpid()}"])


def _interrupted_inside(call):
    """Runs call() while a real SIGINT arrives; True when KeyboardInterrupt came out of call() itself."""
    done = []
    killer = _sigint_after(0.3)
    try:
        try:
            done.append(call())
        finally:
            try:  # a SIGINT that the call ignored (or that came after it failed) lands here instead
                killer.wait()
                time.sleep(1.0)
            except KeyboardInterrupt:
                pass
    except KeyboardInterrupt:
        pass
    return not done


def test_ctrl_c_stops_simulate_batch():
    g = pl.make_model("gnmt", {"layers": 2, "steps": 20, "batch": 8, "hidden": 64, "vocab": 100})
    sim = pl.Simulator(g, pl.make_preset("v100-nvlink-8"))
    P = sim.random_placements(6000, seed=0)
    assert _interrupted_inside(lambda: sim.simulate_batch(P))


def test_ctrl_c_stops_annealing():
    g = pl.make_model("gnmt", {"layers": 2, "steps": 20, "batch": 8, "hidden": 64, "vocab": 100})
    sim = pl.Simulator(g, pl.make_preset("v100-nvlink-8"))
    assert _interrupted_inside(lambda: pl.place(sim, "annealing", options={"steps": 10 ** 9, "seconds": 8}, seed=0))


def test_ctrl_c_inside_progress_callback_raises_keyboardinterrupt():
    g = pl.make_model("gnmt", {"layers": 2, "steps": 20, "batch": 8, "hidden": 64, "vocab": 100})
    sim = pl.Simulator(g, pl.make_preset("v100-nvlink-8"))
    calls = []

    def progress(*args):
        calls.append(args)
        if len(calls) == 1:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)

    with pytest.raises(KeyboardInterrupt):
        pl.place(sim, "annealing", options={"steps": 10 ** 9, "seconds": 8}, seed=0, progress=progress)
    assert calls


def test_ctrl_c_stops_local_search():
    g = pl.make_model("gnmt", {"layers": 2, "steps": 20, "batch": 8, "hidden": 64, "vocab": 100})
    sim = pl.Simulator(g, pl.make_preset("v100-nvlink-8"))
    assert _interrupted_inside(lambda: pl.place(sim, "local_search", options={"restarts": 10 ** 6}, seed=0))


def test_ctrl_c_ends_training_after_a_step_with_checkpoint(tmp_path):
    steps = []
    c = pl.make_preset("v100-nvlink-2")
    tasks = [(pl.make_model("random_dag", {"seed": 1, "ops": 200, "width": 8}), c)]

    # on_step is a builtin, as in the doc's example (history.append): Python code in the callback could itself be
    # interrupted before it records the step (the doc says so); a builtin runs no bytecode, so it always records.
    def call():
        return pl.train("gdp", tasks, steps=10 ** 6, minutes=0.2, seed=0, checkpoint=tmp_path / "ck",
                        checkpoint_every=10 ** 6, options={"rollouts": 2}, on_step=steps.append)

    _interrupted_inside(call)
    assert steps, "no step finished"
    head = pl.read_checkpoint(tmp_path / "ck")
    log = (tmp_path / "ck" / "log.jsonl").read_text().splitlines()
    assert head["step"] == len(log)  # the step under way finished and was checkpointed
    # ... and on_step (the history of the doc's example) saw every step the run recorded
    assert len(steps) == head["step"], "on_step missed the step that the checkpoint and log.jsonl hold"


# ---------------------------------------------------------------------------------------------- training


def _tasks():
    c = pl.make_preset("v100-nvlink-2")
    return [(small_dag(1), c), ("second", small_dag(2), c)]


def test_learners_list():
    names = [n for n, _ in pl.learners()]
    assert set(["gdp", "placeto", "hdp", "hsdag"]) <= set(names)


def test_train_summary_callbacks_and_checkpoint(tmp_path):
    history, prog = [], []
    ck = tmp_path / "gdp"
    summary = pl.train("gdp", _tasks(), steps=4, seed=0, checkpoint=str(ck), checkpoint_every=2,
                       options={"rollouts": 2}, reward={"objective": "step_time", "oom_penalty": 1.0},
                       on_step=history.append, progress=lambda *a: prog.append(a))
    assert len(history) == 4 and all("reward" in h for h in history)
    for key in ["best_cost_s", "best_placement", "best_step"]:
        assert len(summary[key]) == 2, key
    assert len(summary["best_placement"][0]) == _tasks()[0][0].num_ops
    head = pl.read_checkpoint(ck)
    assert head["policy"] == "gdp" and head["step"] == 4
    assert "options" in head and "trainer" in head
    assert [t["name"] for t in head["trainer"]["tasks"]][1] == "second"
    # a new run refuses a folder that holds a checkpoint
    with pytest.raises(ValueError, match="resume"):
        pl.train("gdp", _tasks(), steps=1, seed=0, checkpoint=ck, options={"rollouts": 2})
    for i, (g, c) in enumerate([(t[-2], t[-1]) for t in _tasks()]):
        best = np.asarray(summary["best_placement"][i])
        assert summary["best_cost_s"][i] == pytest.approx(pl.Simulator(g, c).simulate(best)["step_time_s"], rel=1e-12)
    assert head["options"]["rollouts"] == 2
    sim = pl.Simulator(*_tasks()[0])
    p, info = pl.place(sim, "gdp", {"checkpoint": str(ck), "steps": 0})
    sim.simulate(np.asarray(p))


def test_train_is_deterministic_and_on_step_false_stops(tmp_path):
    h1, h2, h3 = [], [], []
    s1 = pl.train("gdp", _tasks(), steps=3, seed=5, options={"rollouts": 2}, on_step=h1.append)
    s2 = pl.train("gdp", _tasks(), steps=3, seed=5, options={"rollouts": 2}, on_step=h2.append)
    assert [h["reward"] for h in h1] == [h["reward"] for h in h2]
    assert s1["best_cost_s"] == s2["best_cost_s"]

    def stop(h):
        h3.append(h)
        return len(h3) < 2

    pl.train("gdp", _tasks(), steps=10, seed=5, options={"rollouts": 2}, on_step=stop)
    assert len(h3) == 2


def test_train_resume_continues_exactly(tmp_path):
    full, part = [], []
    s_full = pl.train("gdp", _tasks(), steps=4, seed=3, checkpoint=tmp_path / "a", options={"rollouts": 2},
                      on_step=full.append)
    pl.train("gdp", _tasks(), steps=2, seed=3, checkpoint=tmp_path / "b", options={"rollouts": 2},
             on_step=part.append)
    s_res = pl.train("gdp", _tasks(), steps=4, checkpoint=tmp_path / "b", resume=True, on_step=part.append)
    assert [h["reward"] for h in part] == [h["reward"] for h in full]
    assert s_res["best_cost_s"] == s_full["best_cost_s"]
    assert pl.read_checkpoint(tmp_path / "b")["step"] == 4


def test_train_callback_exception_reaches_caller_with_note():
    class Boom(Exception):
        pass

    def bad(h):
        raise Boom("from on_step")

    with pytest.raises(Boom) as e:
        pl.train("gdp", _tasks(), steps=5, seed=0, options={"rollouts": 2}, on_step=bad)
    notes = " ".join(getattr(e.value, "__notes__", []))
    assert "on_step" in notes


# ---------------------------------------------------------------------------------------------- torch


def _torch_net():
    import torch
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                               torch.nn.Dropout(0.5), torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 10))


def test_from_torch_small_module_rules():
    import torch
    torch.manual_seed(0)
    m = _torch_net().train()
    x = torch.randn(2, 3, 8, 8)
    bn = m[1]
    mean_before = bn.running_mean.clone()
    nbt_before = bn.num_batches_tracked.clone()
    rng_before = torch.get_rng_state()
    g = pl.from_torch(m, x)
    assert m.training
    assert torch.equal(bn.running_mean, mean_before) and torch.equal(bn.num_batches_tracked, nbt_before)
    assert torch.equal(torch.get_rng_state(), rng_before)
    expect_params = sum(t.numel() * t.element_size() for t in list(m.parameters()) + list(m.buffers()))
    assert float(g.param_bytes.sum()) == expect_params
    types = [o.get("type") for o in g.to_dict()["ops"]]
    # one op per leaf module (plus the input)
    for t in ["Conv2d", "BatchNorm2d", "ReLU", "Dropout", "Flatten", "Linear"]:
        assert types.count(t) == 1, t
    # a linear layer of 144 -> 10 on 2 examples: 2 * 144 * 10 multiply-adds, counted as 2 FLOPs each
    lin = types.index("Linear")
    assert 2 * 2 * 144 * 10 <= g.flops[lin] <= 2 * 2 * 144 * 10 + 2 * 2 * 10
    assert g.param_bytes[lin] == (144 * 10 + 10) * 4
    # a 3x3 convolution 3 -> 4 channels on 2 x 6 x 6 outputs
    conv = types.index("Conv2d")
    assert 2 * 2 * 4 * 6 * 6 * 3 * 3 * 3 <= g.flops[conv] <= 2 * 2 * 4 * 6 * 6 * (3 * 3 * 3 + 1)
    # views cost 0: Flatten is a view
    assert g.flops[types.index("Flatten")] == 0
    gt = pl.from_torch(m, x, training=True)
    assert gt.num_ops > g.num_ops and len(set(gt.phase.tolist())) == 3
    g2, info = pl.import_torch(m, x)
    for k in ["unsupported", "op_types", "constants_skipped"]:
        assert k in info
    assert g2.to_dict()["ops"] == g.to_dict()["ops"]


def test_from_torch_shape_arithmetic_folded_and_method_calls_are_ops():
    import torch

    class V(torch.nn.Module):
        def forward(self, x):
            return x.view(x.size(0), -1) * 2

    g, info = pl.import_torch(V(), torch.randn(2, 3, 4))
    types = [o.get("type") for o in g.to_dict()["ops"]]
    assert not any("size" in (t or "").lower() for t in types)
    assert g.num_ops == 3  # the input, view, mul
    assert g.flops[types.index("view")] == 0
    assert g.flops.sum() > 0


def test_from_torch_tied_weight_held_once():
    import torch

    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 8, bias=False)
            self.b = torch.nn.Linear(8, 8, bias=False)
            self.b.weight = self.a.weight

        def forward(self, x):
            return self.b(self.a(x))

    m = Tied()
    g = pl.from_torch(m, torch.randn(1, 8))
    assert float(g.param_bytes.sum()) == 8 * 8 * 4


def test_from_torch_unsupported_op_warns():
    import torch

    class Odd(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(x, 1) * 2

    with pytest.warns(pl.UnsupportedOpWarning, match="cumsum"):
        g, info = pl.import_torch(Odd(), torch.randn(2, 5))
    assert any("cumsum" in str(u) for u in info["unsupported"])
    assert issubclass(pl.UnsupportedOpWarning, Warning)


def test_from_torch_resnet50_flops_published():
    import torch
    import torchvision
    m = torchvision.models.resnet50(weights=None).eval()
    g = pl.from_torch(m, torch.randn(1, 3, 224, 224))
    assert round(float(g.flops.sum()) / 2 / 1e9, 2) == 4.13
    expect = sum(t.numel() * t.element_size() for t in list(m.parameters()) + list(m.buffers()))
    assert float(g.param_bytes.sum()) == expect


def test_from_torch_inception_v3_flops_published():
    import torch
    import torchvision
    m = torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False).eval()
    g = pl.from_torch(m, torch.randn(1, 3, 299, 299))
    assert round(float(g.flops.sum()) / 2 / 1e9, 2) == 5.75


# ---------------------------------------------------------------------------------------------- plots


def test_matplotlib_uses_agg_without_display():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "MPLBACKEND", "WAYLAND_DISPLAY")}
    code = ("import placelab.viz as viz, matplotlib\n"
            "ax = viz.training_curves([{'step': 0, 'reward': 1.0}, {'step': 1, 'reward': 2.0}])\n"
            "print(type(ax.figure.canvas).__name__, matplotlib.get_backend())")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    canvas, backend = out.stdout.split()
    assert canvas == "FigureCanvasAgg" and backend.lower() == "agg"
    assert out.stderr == ""


def test_plots_return_ax_and_write_files(simulator, tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from placelab import viz
    p = simulator.random_placement(seed=0)
    trace = simulator.trace(p)
    assert viz.timeline(simulator, trace, path=tmp_path / "gantt.png") is not None
    assert viz.memory(simulator, trace, p, path=str(tmp_path / "memory.png")) is not None
    assert viz.link_utilisation(simulator, trace["result"], path=tmp_path / "links.png") is not None
    for f in ["gantt.png", "memory.png", "links.png"]:
        assert (tmp_path / f).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    fig, ax = plt.subplots()
    assert viz.timeline(simulator, trace, ax=ax) is ax
    fig2, ax2 = plt.subplots()
    assert viz.memory(simulator, trace, p, ax=ax2) is ax2
    fig3, ax3 = plt.subplots()
    assert viz.link_utilisation(simulator, trace["result"], ax=ax3) is ax3
    plt.close("all")


def test_training_curves_accepts_three_shapes(tmp_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd
    from placelab import viz
    history = [{"step": i, "reward": -float(i), "cost_s": 1.0 + i} for i in range(5)]
    as_dict = {k: [h[k] for h in history] for k in history[0]}
    for h in (history, as_dict, pd.DataFrame(history)):
        fig, ax = plt.subplots()
        assert viz.training_curves(h, keys=["reward"], ax=ax) is ax
    viz.training_curves(history, path=tmp_path / "train.png")
    assert (tmp_path / "train.png").exists()
    plt.close("all")


def test_results_and_devices_frames(simulator, cluster):
    import pandas as pd
    r = simulator.simulate(simulator.random_placement(seed=0))
    r2 = simulator.simulate(simulator.random_placement(seed=1))
    df = pl.results_frame({"random": r, "heft": r2})
    assert isinstance(df, pd.DataFrame) and len(df) == 2
    assert "random" in df.to_string() and "heft" in df.to_string()
    dv = pl.devices_frame(simulator, r)
    assert isinstance(dv, pd.DataFrame) and len(dv) == cluster.num_devices


# ---------------------------------------------------------------------------------------------- msr


@needs_msr
def test_read_msr_and_cluster_forms():
    inst = pl.read_msr(BERT_LAYERS)
    assert inst.graph.num_ops > 0
    assert inst.max_accelerators >= 1 and inst.max_cpus >= 0 and inst.accelerator_memory_bytes > 0
    assert isinstance(inst.msr_id, str) or inst.msr_id is not None
    c1 = pl.msr_cluster(inst)
    c2 = pl.msr_cluster(inst.max_accelerators, inst.max_cpus, inst.accelerator_memory_bytes)
    assert c1.to_dict() == c2.to_dict()
    assert pl.read_msr(str(BERT_LAYERS)).graph.to_dict() == inst.graph.to_dict()


@needs_msr
def test_msr_dp_and_expert_split():
    inst = pl.read_msr(BERT_LAYERS)
    sim = pl.Simulator(inst.graph, pl.msr_cluster(inst))
    p, info = pl.place(sim, "dp")
    p = np.asarray(p)
    assert sim.is_contiguous(p)
    e, _ = pl.place(sim, "human_expert", {"split_file": str(BERT_EXPERT)})
    split = pl.read_msr_split(BERT_EXPERT, inst)
    np.testing.assert_array_equal(np.asarray(e), np.asarray(split))
    np.testing.assert_array_equal(np.asarray(split), pl.read_msr_split(str(BERT_EXPERT), inst))
    expert = sim.max_load(np.asarray(split))["max_load_s"]
    assert expert == pytest.approx(20.084e-3, rel=1e-4)  # the README's expert value (simulator.md)
    assert sim.max_load(p)["max_load_s"] <= expert * (1 + 1e-12)
