# The simulator's cost models against docs/simulator.md ("Cost models", "Using it" and its CLI lines,
# "The engine: semantics" where op times feed the schedule, "Clusters" for the device fields),
# docs/formats.md (the graph's `measured_s`, `bytes_read`/`bytes_written`, the strict readers' rules),
# docs/graph_transforms.md (the msr kinds `accelerator`/`cpu`), docs/python.md (Simulator options
# `use_measured`, `profile=` as a path or dict, `op_times`) and docs/cli.md (`placelab simulate
# --profile/--no-measured`, `--max-load`), written from the docs alone. Checked: the roofline formula
# (compute and memory terms, bytes read + written, efficiency on both terms, launch overhead, the size
# factor off by default, the doc's worked example), measured times used exactly and only on their kind,
# `use_measured`, the profile table (per op name, then per op type, fallback to roofline for other
# kinds and ops, unused entries, precedence under measured times), the 1e9 s limits and the errors for
# malformed profiles and measured times. Every expected value is computed here from the documented
# formulas; comparisons are exact or rel=1e-12.
import json
import math
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

import placelab as pl

BIN = Path(os.environ.get("PLACELAB_BIN", "placelab-binary-not-given"))
needs_cli = pytest.mark.skipif(not BIN.exists(), reason=f"placelab binary not found at {BIN} (set PLACELAB_BIN)")


def approx(x):
    return pytest.approx(x, rel=1e-12, abs=0)


# ---------------------------------------------------------------------------------------------
# Hand-built graphs, clusters and profiles

def dev(name, kind="gpu", peak=1e12, bw=1e12, launch=0.0, eff=1.0, gap=0.0, mem=1e15):
    return {"name": name, "kind": kind, "peak_flops_per_s": peak, "memory_bandwidth_bytes_per_s": bw,
            "memory_bytes": mem, "launch_overhead_s": launch, "gap_after_op_s": gap, "efficiency": eff}


def cluster_doc(devices, links=None, name="c"):
    if links is None:  # one switch joining every device
        links = [{"name": f"l{i}", "ends": [d["name"], "sw"], "bandwidth_bytes_per_s": 1e12}
                 for i, d in enumerate(devices)]
    return {"format": "placelab.cluster", "version": 1, "name": name, "devices": devices, "links": links}


def graph_doc(ops, edges=(), name="g"):
    return {"format": "placelab.graph", "version": 1, "name": name, "ops": list(ops), "edges": list(edges)}


def profile_doc(entries):
    return {"format": "placelab.profile", "version": 1, "entries": list(entries)}


def build(ops, devices, edges=(), options=None, profile=None):
    g = pl.graph_from_dict(graph_doc(ops, edges))
    c = pl.cluster_from_dict(cluster_doc(devices))
    return pl.Simulator(g, c, options, profile=profile)


def roofline(op, d):
    """docs/simulator.md, "Cost models": max(flops / (peak * e), (bytes_read + bytes_written) /
    (bandwidth * e)) + launch_overhead, e = efficiency * type_efficiency (1) * size factor (off)."""
    e = d["efficiency"]
    flops = op.get("flops", 0.0)
    nbytes = op.get("bytes_read", 0.0) + op.get("bytes_written", 0.0)
    return max(flops / (d["peak_flops_per_s"] * e), nbytes / (d["memory_bandwidth_bytes_per_s"] * e)) \
        + d["launch_overhead_s"]


# Devices with different peaks, bandwidths, efficiencies and launch overheads, two kinds.
DEVS = [dev("g0", "gpu", peak=1.57e13, bw=9e11, launch=5e-6, eff=0.7),
        dev("g1", "gpu", peak=3e12, bw=2.5e11, launch=1e-6, eff=1.0),
        dev("c0", "cpu", peak=2.94e12, bw=2.048e11, launch=2e-6, eff=0.5),
        dev("t0", "tpu", peak=7e13, bw=1.2e12, launch=0.0, eff=0.35)]

# Ops covering compute-bound, memory-bound, read-only, write-only, zero-work and mixed cases.
OPS = [{"name": "mm", "type": "MatMul", "flops": 2e9, "bytes_read": 8e6, "bytes_written": 4e6},
       {"name": "add", "type": "Add", "flops": 1e6, "bytes_read": 8e6, "bytes_written": 4e6},
       {"name": "rd", "type": "Relu", "bytes_read": 3.3e7},
       {"name": "wr", "type": "Relu", "bytes_written": 3.3e7},
       {"name": "nop", "type": "Identity"},
       {"name": "cv", "type": "Conv2D", "flops": 1.23456789e11, "bytes_read": 1e9, "bytes_written": 7e8},
       {"name": "plain", "flops": 4.4e8, "bytes_read": 1.1e8}]


def test_roofline_doc_example_2gflop_op_takes_4ms_plus_10us():
    # "a 2 GFLOP op reading and writing 1 GB on a 1 TFLOP/s, 1 TB/s device with efficiency 0.5 and
    # 10 us launch takes max(4 ms, 2 ms) + 10 us" (1 GB of traffic in all: read + written).
    d = dev("d0", peak=1e12, bw=1e12, launch=10e-6, eff=0.5)
    sim = build([{"name": "a", "flops": 2e9, "bytes_read": 5e8, "bytes_written": 5e8}], [d])
    assert sim.cost_model == "roofline"
    assert sim.op_times()[0, 0] == approx(4e-3 + 10e-6)


def test_roofline_matrix_matches_formula_for_every_op_and_device():
    sim = build(OPS, DEVS)
    t = sim.op_times()
    assert t.shape == (len(OPS), len(DEVS))
    for i, op in enumerate(OPS):
        for j, d in enumerate(DEVS):
            assert t[i, j] == approx(roofline(op, d)), (op["name"], d["name"])


def test_roofline_memory_term_counts_bytes_read_plus_bytes_written():
    d = dev("d0", peak=1e15, bw=1e9, launch=0.0, eff=1.0)
    sim = build([{"name": "r", "bytes_read": 3e6}, {"name": "w", "bytes_written": 3e6},
                 {"name": "rw", "bytes_read": 3e6, "bytes_written": 3e6}], [d])
    t = sim.op_times()[:, 0]
    assert t[0] == approx(3e-3) and t[1] == approx(3e-3) and t[2] == approx(6e-3)


def test_roofline_efficiency_divides_both_compute_and_memory_terms():
    ops = [{"name": "c", "flops": 1e9}, {"name": "m", "bytes_read": 1e9}]
    full = build(ops, [dev("d0", peak=1e12, bw=1e11, eff=1.0)]).op_times()[:, 0]
    part = build(ops, [dev("d0", peak=1e12, bw=1e11, eff=0.25)]).op_times()[:, 0]
    assert full[0] == approx(1e-3) and full[1] == approx(1e-2)
    assert part[0] == approx(4e-3) and part[1] == approx(4e-2)


def test_roofline_zero_work_op_costs_exactly_its_launch_overhead():
    sim = build([{"name": "z"}, {"name": "z2", "type": "NoOp"}], [dev("d0", launch=7.5e-6), dev("d1")])
    t = sim.op_times()
    assert t[0, 0] == 7.5e-6 and t[1, 0] == 7.5e-6
    assert t[0, 1] == 0.0 and t[1, 1] == 0.0


def test_roofline_size_factor_is_off_by_default_time_is_linear_in_flops():
    # The size factor flops / (flops + half_efficiency_flops) is "off by default": tiny and huge ops
    # run at the same effective peak, so time minus launch is exactly proportional to FLOPs.
    d = dev("d0", peak=1e13, bw=1e15, launch=3e-6, eff=0.6)
    ops = [{"name": f"o{k}", "type": "MatMul", "flops": 10.0 ** k} for k in (0, 3, 6, 9, 12)]
    t = build(ops, [d]).op_times()[:, 0]
    for k, tk in zip((0, 3, 6, 9, 12), t):
        assert tk == approx(10.0 ** k / (1e13 * 0.6) + 3e-6)


def test_roofline_type_efficiency_defaults_to_one_for_every_op_type():
    # type_efficiency[op type] is a RooflineOptions entry with no documented default other than
    # "the doc example" behaviour; assumed 1 for every type (see report).
    d = dev("d0", peak=1e12, bw=1e12, eff=0.5)
    types = ["Op", "MatMul", "Conv2D", "Relu", "Add", "Softmax", "LSTM", "Input", "MatMulGrad", "ApplyAdam"]
    ops = [{"name": f"o{i}", "type": ty, "flops": 2e9} for i, ty in enumerate(types)]
    t = build(ops, [d]).op_times()[:, 0]
    for ty, ti in zip(types, t):
        assert ti == approx(4e-3), ty


# ---------------------------------------------------------------------------------------------
# Measured times

MEASURED_OPS = [
    {"name": "a", "type": "MatMul", "flops": 2e9, "bytes_read": 1e6, "measured_s": {"gpu": 1.2345678901234567e-4}},
    {"name": "b", "type": "MatMul", "flops": 2e9, "measured_s": {"gpu": 0.0, "cpu": 0.0371}},
    {"name": "c", "type": "Add", "flops": 1e6, "bytes_read": 1e8, "measured_s": {"npu": 5.0}},
    {"name": "d", "type": "Add", "flops": 1e6},
]


def test_measured_time_is_used_exactly_on_its_kind_without_launch_overhead():
    sim = build(MEASURED_OPS, DEVS)
    t = sim.op_times()
    kinds = [d["kind"] for d in DEVS]
    for i, op in enumerate(MEASURED_OPS):
        for j, d in enumerate(DEVS):
            m = op.get("measured_s", {})
            if kinds[j] in m:
                assert t[i, j] == m[kinds[j]], (op["name"], d["name"])  # bit for bit, no launch added
            else:
                assert t[i, j] == approx(roofline(op, d)), (op["name"], d["name"])


def test_measured_time_for_a_kind_the_cluster_lacks_is_unused():
    sim = build([MEASURED_OPS[2]], DEVS)
    t = sim.op_times()[0]
    for j, d in enumerate(DEVS):
        assert t[j] == approx(roofline(MEASURED_OPS[2], d))


def test_use_measured_false_ignores_measured_times():
    sim = build(MEASURED_OPS, DEVS, options={"use_measured": False})
    t = sim.op_times()
    for i, op in enumerate(MEASURED_OPS):
        for j, d in enumerate(DEVS):
            assert t[i, j] == approx(roofline(op, d))


def test_use_measured_is_on_by_default():
    on = build(MEASURED_OPS, DEVS, options={"use_measured": True}).op_times()
    default = build(MEASURED_OPS, DEVS).op_times()
    default_dict = build(MEASURED_OPS, DEVS, options={}).op_times()
    assert np.array_equal(on, default) and np.array_equal(on, default_dict)
    assert on[0, 0] == MEASURED_OPS[0]["measured_s"]["gpu"]


def test_measured_times_from_a_graph_file_are_used_exactly(tmp_path):
    p = tmp_path / "g.json"
    p.write_text(json.dumps(graph_doc(MEASURED_OPS)))
    g = pl.read_graph(p)
    sim = pl.Simulator(g, pl.cluster_from_dict(cluster_doc(DEVS)))
    assert sim.op_times()[0, 0] == 1.2345678901234567e-4
    assert sim.op_times()[1, 2] == 0.0371


def test_msr_cluster_kinds_take_the_graphs_accelerator_and_cpu_times():
    # docs/simulator.md: msr_cluster's devices are of kind `accelerator` then `cpu`; "Their op times
    # come from the instance's measured accelerator/cpu latencies".
    ops = [{"name": "x", "flops": 1e12, "measured_s": {"accelerator": 0.003, "cpu": 0.011}},
           {"name": "y", "flops": 1e12, "measured_s": {"accelerator": 2.5e-5, "cpu": 1e-3}}]
    g = pl.graph_from_dict(graph_doc(ops, [{"src": "x", "dst": "y", "bytes": 10}]))
    c = pl.msr_cluster(2, 1, 1e9)
    t = pl.Simulator(g, c).op_times()
    kinds = [d["kind"] for d in c.to_dict()["devices"]]
    assert kinds == ["accelerator", "accelerator", "cpu"]
    for i, op in enumerate(ops):
        for j, k in enumerate(kinds):
            assert t[i, j] == op["measured_s"][k]


# ---------------------------------------------------------------------------------------------
# The engine uses the op times

def test_one_op_step_time_and_busy_time_are_its_op_time_on_each_device():
    ops = [{"name": "a", "flops": 3e9, "bytes_read": 1e7, "measured_s": {"cpu": 0.125}}]
    sim = build(ops, DEVS)
    t = sim.op_times()
    for j in range(len(DEVS)):
        r = sim.simulate(np.array([j], dtype=np.int32))
        assert r["step_time_s"] == t[0, j]
        assert r["device_busy_s"][j] == t[0, j]
    assert t[0, 2] == 0.125


def test_chain_on_one_device_is_the_sum_of_profile_and_measured_and_roofline_times():
    d = dev("d0", peak=1e12, bw=1e12, launch=0.5, eff=1.0, gap=0.25)
    ops = [{"name": "a", "flops": 1e12},                                   # roofline 1 + 0.5
           {"name": "b", "type": "MatMul", "flops": 1e12},                 # profile by type: 2
           {"name": "c", "flops": 1e12, "measured_s": {"gpu": 3.0}}]      # measured: 3
    edges = [{"src": "a", "dst": "b", "bytes": 8}, {"src": "b", "dst": "c", "bytes": 8}]
    sim = build(ops, [d], edges, profile=profile_doc([{"device_kind": "gpu", "op_type": "MatMul", "time_s": 2.0}]))
    assert list(sim.op_times()[:, 0]) == [1.5, 2.0, 3.0]
    r = sim.simulate(np.zeros(3, dtype=np.int32))
    assert r["step_time_s"] == approx(1.5 + 2.0 + 3.0 + 2 * 0.25)
    assert r["device_busy_s"][0] == approx(6.5)


def test_max_load_compute_is_the_sum_of_the_cost_models_op_times():
    ops = [{"name": "a", "flops": 2e9}, {"name": "b", "type": "MatMul", "flops": 1e9},
           {"name": "c", "measured_s": {"gpu": 0.5}}]
    sim = build(ops, [dev("d0", launch=1e-3)], [{"src": "a", "dst": "b", "bytes": 4}],
                profile=profile_doc([{"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.25}]))
    ml = sim.max_load(np.zeros(3, dtype=np.int32))
    assert ml["max_load_s"] == approx(2e-3 + 1e-3 + 0.25 + 0.5)


def test_upward_rank_is_built_from_the_cost_models_op_times():
    # docs/simulator.md, "The engine": upward rank = mean op time over all devices plus the largest
    # rank of a successor; the op times are the cost model's (measured, profile, roofline).
    ops = [{"name": "a", "flops": 3e9}, {"name": "b", "type": "MatMul", "flops": 1e9},
           {"name": "c", "measured_s": {"cpu": 0.5}}, {"name": "d", "bytes_read": 2e8}]
    edges = [{"src": "a", "dst": "b", "bytes": 8}, {"src": "a", "dst": "c", "bytes": 8},
             {"src": "b", "dst": "d", "bytes": 8}]
    sim = build(ops, DEVS, edges, profile=profile_doc([{"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.25}]))
    t = sim.op_times()
    assert t[1, 0] == 0.25 and t[1, 1] == 0.25 and t[2, 2] == 0.5
    mean = t.mean(axis=1)
    rank = sim.upward_rank()
    assert rank[3] == approx(mean[3]) and rank[2] == approx(mean[2])
    assert rank[1] == approx(mean[1] + rank[3])
    assert rank[0] == approx(mean[0] + max(rank[1], rank[2]))


def test_incremental_simulator_uses_the_same_op_times():
    ops = [{"name": "a", "measured_s": {"gpu": 0.375}}, {"name": "b", "type": "MatMul"}]
    sim = build(ops, [dev("d0"), dev("d1", "cpu")], [{"src": "a", "dst": "b"}],
                profile=profile_doc([{"device_kind": "cpu", "op_type": "MatMul", "time_s": 0.125}]))
    inc = pl.IncrementalSimulator(sim, np.array([0, 0], dtype=np.int32))
    r = inc.move(1, 1)  # a control edge: b may start on d1 once a has ended
    assert r["step_time_s"] == approx(0.375 + 0.125)


def test_misspelt_simulator_option_is_an_error():
    # docs/python.md: options {priority, use_measured, use_edge_comm, share_bandwidth}; bad input of
    # any kind raises ValueError - a typo must not silently keep measured times on.
    g = pl.graph_from_dict(graph_doc(MEASURED_OPS))
    c = pl.cluster_from_dict(cluster_doc(DEVS))
    with pytest.raises(ValueError, match="use_mesured"):
        pl.Simulator(g, c, {"use_mesured": False})


MSR = Path(os.environ.get("PLACELAB_SHARED_DATA", Path(__file__).resolve().parents[3] / "shared" / "data")) \
    / "msr-dnn-partitioning" / "throughput-inputs" / "LayerGraphs" / "gnmt_inference.json"


@pytest.mark.skipif(not MSR.exists(), reason=f"msr-dnn-partitioning data not found at {MSR}")
def test_msr_instance_op_times_are_its_latencies_in_ms_times_1e_minus_3():
    # docs/graph_transforms.md: cpuLatency -> measured_s["cpu"] = value * 1e-3, fpgaLatency ->
    # measured_s["accelerator"] = value * 1e-3; docs/simulator.md: msr_cluster's op times come from them.
    inst = pl.read_msr(MSR)
    raw = json.loads(MSR.read_text())
    node = {n["id"]: n for n in raw["nodes"]}
    c = pl.msr_cluster(inst)
    kinds = [d["kind"] for d in c.to_dict()["devices"]]
    t = pl.Simulator(inst.graph, c).op_times()
    assert t.shape == (inst.graph.num_ops, len(kinds))
    for op in range(inst.graph.num_ops):
        n = node[int(inst.msr_id[op])]
        for j, k in enumerate(kinds):
            if k == "cpu":
                assert t[op, j] == n["cpuLatency"] * 1e-3
            elif n["supportedOnFpga"]:
                assert t[op, j] == n["fpgaLatency"] * 1e-3


# ---------------------------------------------------------------------------------------------
# Profile tables

PROF_OPS = [{"name": "enc/mm", "type": "MatMul", "flops": 2e9},
            {"name": "dec/mm", "type": "MatMul", "flops": 4e9},
            {"name": "relu", "type": "Relu", "bytes_read": 1e6},
            {"name": "mm_measured", "type": "MatMul", "flops": 1e9, "measured_s": {"gpu": 0.0625}}]
PROF_DEVS = [dev("g0", "gpu", launch=5e-6, eff=0.7), dev("c0", "cpu", peak=1e11, launch=2e-6, eff=0.5),
             dev("g1", "gpu", launch=5e-6, eff=0.7)]
PROF = profile_doc([
    {"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.5},
    {"device_kind": "gpu", "op": "dec/mm", "time_s": 0.25},
    {"device_kind": "gpu", "op": "mm_measured", "time_s": 0.75},
    {"device_kind": "tpu", "op_type": "Relu", "time_s": 9.0},        # kind the cluster lacks: unused
    {"device_kind": "gpu", "op": "not/in/graph", "time_s": 9.0},     # op the graph lacks: unused
    {"device_kind": "cpu", "op_type": "Conv2D", "time_s": 9.0},      # type the graph lacks: unused
])


def expected_profile_times(use_measured=True):
    exp = np.empty((len(PROF_OPS), len(PROF_DEVS)))
    for i, op in enumerate(PROF_OPS):
        for j, d in enumerate(PROF_DEVS):
            if use_measured and d["kind"] in op.get("measured_s", {}):
                exp[i, j] = op["measured_s"][d["kind"]]
            elif d["kind"] == "gpu" and op["name"] == "dec/mm":
                exp[i, j] = 0.25
            elif d["kind"] == "gpu" and op["name"] == "mm_measured":
                exp[i, j] = 0.75
            elif d["kind"] == "gpu" and op["type"] == "MatMul":
                exp[i, j] = 0.5
            else:
                exp[i, j] = roofline(op, d)
    return exp


def check_times(t, exp):
    assert t.shape == exp.shape
    for i in range(exp.shape[0]):
        for j in range(exp.shape[1]):
            assert t[i, j] == approx(exp[i, j]), (PROF_OPS[i]["name"], PROF_DEVS[j]["name"])


def test_profile_by_name_then_by_type_then_roofline_and_measured_first():
    sim = build(PROF_OPS, PROF_DEVS, profile=PROF)
    assert sim.cost_model == "profile"
    t = sim.op_times()
    check_times(t, expected_profile_times())
    # profile times are the op's seconds, exactly (no launch overhead added)
    assert t[0, 0] == 0.5 and t[1, 0] == 0.25 and t[1, 2] == 0.25
    assert t[3, 0] == 0.0625  # measured beats the profile's entry by name and by type


def test_profile_with_use_measured_false_uses_the_profile_entries():
    sim = build(PROF_OPS, PROF_DEVS, options={"use_measured": False}, profile=PROF)
    check_times(sim.op_times(), expected_profile_times(use_measured=False))
    assert sim.op_times()[3, 0] == 0.75


def test_profile_from_str_path_pathlib_path_and_dict_agree(tmp_path):
    p = tmp_path / "prof.json"
    p.write_text(json.dumps(PROF))
    g = pl.graph_from_dict(graph_doc(PROF_OPS))
    c = pl.cluster_from_dict(cluster_doc(PROF_DEVS))
    a = pl.Simulator(g, c, profile=str(p)).op_times()
    b = pl.Simulator(g, c, profile=p).op_times()
    d = pl.Simulator(g, c, profile=PROF).op_times()
    assert np.array_equal(a, b) and np.array_equal(a, d)
    check_times(a, expected_profile_times())


def test_profile_kind_missing_from_the_profile_falls_back_to_roofline():
    # Only cpu entries: every gpu and tpu time is the roofline's, even for ops the profile names.
    prof = profile_doc([{"device_kind": "cpu", "op": "mm", "time_s": 0.125},
                        {"device_kind": "cpu", "op_type": "Relu", "time_s": 0.0}])
    sim = build(OPS, DEVS, profile=prof)
    t = sim.op_times()
    for i, op in enumerate(OPS):
        for j, d in enumerate(DEVS):
            if d["kind"] == "cpu" and op["name"] == "mm":
                assert t[i, j] == 0.125
            elif d["kind"] == "cpu" and op.get("type", "Op") == "Relu":
                assert t[i, j] == 0.0
            else:
                assert t[i, j] == approx(roofline(op, d)), (op["name"], d["name"])


def test_profile_whose_entries_match_nothing_equals_roofline():
    prof = profile_doc([{"device_kind": "fpga", "op": "mm", "time_s": 1.0},
                        {"device_kind": "gpu", "op": "nothing", "time_s": 1.0},
                        {"device_kind": "gpu", "op_type": "Nothing", "time_s": 1.0}])
    assert np.array_equal(build(OPS, DEVS, profile=prof).op_times(), build(OPS, DEVS).op_times())


def test_profile_with_no_entries_equals_roofline():
    assert np.array_equal(build(OPS, DEVS, profile=profile_doc([])).op_times(), build(OPS, DEVS).op_times())


def test_profile_op_name_key_and_op_type_key_with_the_same_text_are_different_keys():
    # Entries "per (device kind, op name), then per (device kind, op type)": two tables, so a name
    # and a type spelled alike are not a repeated key. The op named "MatMul" is of type "Op".
    ops = [{"name": "MatMul", "flops": 1.0}, {"name": "x", "type": "MatMul", "flops": 1.0}]
    prof = profile_doc([{"device_kind": "gpu", "op": "MatMul", "time_s": 0.125},
                        {"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.375},
                        {"device_kind": "cpu", "op": "MatMul", "time_s": 0.5}])
    t = build(ops, [dev("g0"), dev("c0", "cpu")], profile=prof).op_times()
    assert t[0, 0] == 0.125 and t[1, 0] == 0.375 and t[0, 1] == 0.5
    assert t[1, 1] == approx(1.0 / 1e12)


def test_profile_entries_apply_to_every_device_of_the_kind():
    prof = profile_doc([{"device_kind": "gpu", "op": "plain", "time_s": 0.0078125}])
    t = build(OPS, DEVS, profile=prof).op_times()
    assert t[6, 0] == 0.0078125 and t[6, 1] == 0.0078125
    assert t[6, 2] == approx(roofline(OPS[6], DEVS[2]))


# ---------------------------------------------------------------------------------------------
# Profile errors (docs/simulator.md "Cost models" and the strict readers of docs/formats.md)

def profile_error(tmp_path, text):
    p = tmp_path / "bad_profile.json"
    p.write_text(text)
    g = pl.graph_from_dict(graph_doc(PROF_OPS))
    c = pl.cluster_from_dict(cluster_doc(PROF_DEVS))
    with pytest.raises(ValueError) as e:
        pl.Simulator(g, c, profile=p)
    msg = str(e.value)
    assert "bad_profile.json" in msg, msg
    return msg


def entries_text(*entries):
    return json.dumps(profile_doc(entries))


def test_profile_repeated_op_name_entry_is_an_error_naming_the_entry(tmp_path):
    msg = profile_error(tmp_path, entries_text({"device_kind": "gpu", "op": "enc/mm", "time_s": 0.5},
                                               {"device_kind": "cpu", "op": "enc/mm", "time_s": 0.5},
                                               {"device_kind": "gpu", "op": "enc/mm", "time_s": 0.25}))
    assert "entries[2]" in msg, msg


def test_profile_repeated_op_type_entry_is_an_error_even_for_unused_keys(tmp_path):
    # "An entry repeated for the same key is an error" (whether or not the key is used).
    msg = profile_error(tmp_path, entries_text({"device_kind": "tpu", "op_type": "Conv2D", "time_s": 0.5},
                                               {"device_kind": "tpu", "op_type": "Conv2D", "time_s": 0.5}))
    assert "entries[1]" in msg, msg


def test_profile_negative_time_is_an_error_naming_the_path(tmp_path):
    msg = profile_error(tmp_path, entries_text({"device_kind": "gpu", "op": "enc/mm", "time_s": -0.5}))
    assert "entries[0].time_s" in msg, msg


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_profile_non_finite_time_is_an_error(tmp_path, literal):
    text = ('{"format": "placelab.profile", "version": 1, "entries": '
            '[{"device_kind": "gpu", "op": "enc/mm", "time_s": %s}]}' % literal)
    profile_error(tmp_path, text)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0])
def test_profile_dict_with_bad_time_raises_valueerror(value):
    g = pl.graph_from_dict(graph_doc(PROF_OPS))
    c = pl.cluster_from_dict(cluster_doc(PROF_DEVS))
    with pytest.raises(ValueError):
        pl.Simulator(g, c, profile=profile_doc([{"device_kind": "gpu", "op": "enc/mm", "time_s": value}]))


def test_profile_unknown_entry_field_is_an_error_listing_known_fields(tmp_path):
    msg = profile_error(tmp_path, entries_text({"device_kind": "gpu", "op": "enc/mm", "time_s": 0.5,
                                                "time_ms": 500}))
    assert "time_ms" in msg and "entries[0]" in msg, msg
    for known in ("device_kind", "op_type", "time_s"):
        assert known in msg, msg


def test_profile_unknown_top_level_field_is_an_error(tmp_path):
    doc = profile_doc([])
    doc["device"] = "gpu"
    msg = profile_error(tmp_path, json.dumps(doc))
    assert "device" in msg and "entries" in msg, msg


def test_profile_wrong_format_is_an_error(tmp_path):
    doc = profile_doc([])
    doc["format"] = "placelab.graph"
    msg = profile_error(tmp_path, json.dumps(doc))
    assert "placelab.profile" in msg, msg


def test_profile_unsupported_version_is_an_error_naming_supported_versions(tmp_path):
    doc = profile_doc([])
    doc["version"] = 2
    msg = profile_error(tmp_path, json.dumps(doc))
    assert "supported" in msg and "1" in msg.replace("bad_profile.json", ""), msg


def test_profile_key_given_twice_in_one_object_is_an_error_naming_it(tmp_path):
    text = ('{"format": "placelab.profile", "version": 1, "entries": '
            '[{"device_kind": "gpu", "op": "enc/mm", "time_s": 0.5, "time_s": 0.25}]}')
    msg = profile_error(tmp_path, text)
    assert "time_s" in msg, msg


@pytest.mark.parametrize("entry", [{"op": "enc/mm", "time_s": 0.5},
                                   {"device_kind": "gpu", "op": "enc/mm"}])
def test_profile_entry_missing_a_required_field_is_an_error(tmp_path, entry):
    msg = profile_error(tmp_path, entries_text(entry))
    assert "entries[0]" in msg, msg


def test_profile_missing_file_is_an_error_naming_it(tmp_path):
    g = pl.graph_from_dict(graph_doc(PROF_OPS))
    c = pl.cluster_from_dict(cluster_doc(PROF_DEVS))
    with pytest.raises(ValueError, match="no_such_profile.json"):
        pl.Simulator(g, c, profile=tmp_path / "no_such_profile.json")


# ---------------------------------------------------------------------------------------------
# Measured-time errors (docs/formats.md: numbers finite and >= 0, errors name file and JSON path)

def graph_error(tmp_path, text):
    p = tmp_path / "bad_graph.json"
    p.write_text(text)
    with pytest.raises(ValueError) as e:
        pl.read_graph(p)
    msg = str(e.value)
    assert "bad_graph.json" in msg, msg
    return msg


def test_measured_negative_time_is_an_error_naming_the_path(tmp_path):
    msg = graph_error(tmp_path, json.dumps(graph_doc([{"name": "a"}, {"name": "b", "measured_s": {"gpu": -1e-3}}])))
    assert "ops[1].measured_s" in msg, msg


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "1e999"])
def test_measured_non_finite_time_is_an_error(tmp_path, literal):
    text = ('{"format": "placelab.graph", "version": 1, "name": "g", '
            '"ops": [{"name": "a", "measured_s": {"gpu": %s}}]}' % literal)
    graph_error(tmp_path, text)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -2.0])
def test_measured_bad_time_in_a_dict_raises_valueerror(value):
    with pytest.raises(ValueError):
        pl.graph_from_dict(graph_doc([{"name": "a", "measured_s": {"gpu": value}}]))


@pytest.mark.parametrize("measured", [0.5, [0.5], {"gpu": "0.5"}, {"gpu": None}])
def test_measured_not_an_object_of_numbers_is_an_error(tmp_path, measured):
    msg = graph_error(tmp_path, json.dumps(graph_doc([{"name": "a", "measured_s": measured}])))
    assert "ops[0].measured_s" in msg, msg


def test_measured_kind_given_twice_is_an_error_naming_it(tmp_path):
    text = ('{"format": "placelab.graph", "version": 1, "name": "g", '
            '"ops": [{"name": "a", "measured_s": {"gpu": 0.5, "gpu": 0.25}}]}')
    msg = graph_error(tmp_path, text)
    assert "gpu" in msg.replace("bad_graph.json", ""), msg


def test_misspelt_measured_field_is_an_error_listing_known_fields(tmp_path):
    msg = graph_error(tmp_path, json.dumps(graph_doc([{"name": "a", "measured": {"gpu": 0.5}}])))
    assert "measured_s" in msg and "bytes_read" in msg, msg


def test_measured_times_survive_a_write_read_round_trip_bit_for_bit(tmp_path):
    g = pl.graph_from_dict(graph_doc(MEASURED_OPS))
    p = tmp_path / "rt.json"
    g.write(p)
    c = pl.cluster_from_dict(cluster_doc(DEVS))
    assert np.array_equal(pl.Simulator(pl.read_graph(p), c).op_times(), pl.Simulator(g, c).op_times())


# ---------------------------------------------------------------------------------------------
# Limits: every op time, largest tensor per route, gaps and busy times at most 1e9 s

def test_op_times_of_exactly_1e9_s_are_accepted_from_every_model():
    ops = [{"name": "m", "measured_s": {"gpu": 1e9}}, {"name": "p", "type": "Big"},
           {"name": "r", "flops": 1e21}]
    sim = build(ops, [dev("d0", peak=1e12, eff=1.0)],
                profile=profile_doc([{"device_kind": "gpu", "op_type": "Big", "time_s": 1e9}]))
    assert list(sim.op_times()[:, 0]) == [1e9, 1e9, 1e9]


@pytest.mark.parametrize("which", ["measured", "profile", "roofline"])
def test_op_time_over_1e9_s_is_a_constructor_error_naming_op_and_device(which):
    op = {"name": "slow_op", "type": "Slow"}
    prof = None
    if which == "measured":
        op["measured_s"] = {"gpu": 2e9}
    elif which == "profile":
        prof = profile_doc([{"device_kind": "gpu", "op_type": "Slow", "time_s": 2e9}])
    else:
        op["flops"] = 2e21
    g = pl.graph_from_dict(graph_doc([{"name": "first"}, op]))
    c = pl.cluster_from_dict(cluster_doc([dev("dev_a"), dev("dev_b")]))
    with pytest.raises(ValueError) as e:
        pl.Simulator(g, c, profile=prof)
    assert "slow_op" in str(e.value) and ("dev_a" in str(e.value) or "dev_b" in str(e.value)), str(e.value)


def test_a_measured_time_over_1e9_s_that_is_not_used_is_no_error():
    # With use_measured off, or for a kind the cluster lacks, the measured time gives no op time.
    g = pl.graph_from_dict(graph_doc([{"name": "a", "flops": 1e9, "measured_s": {"gpu": 2e9, "npu": 5e9}}]))
    c = pl.cluster_from_dict(cluster_doc([dev("d0")]))
    assert pl.Simulator(g, c, {"use_measured": False}).op_times()[0, 0] == approx(1e-3)
    c2 = pl.cluster_from_dict(cluster_doc([dev("d0", "cpu")]))
    assert pl.Simulator(g, c2).op_times()[0, 0] == approx(1e-3)


def test_largest_tensor_transfer_over_1e9_s_is_a_constructor_error():
    g = pl.graph_from_dict(graph_doc([{"name": "a"}, {"name": "b"}], [{"src": "a", "dst": "b", "bytes": 2e11}]))
    links = [{"name": "slowlink", "ends": ["dev_a", "dev_b"], "bandwidth_bytes_per_s": 100.0}]
    c = pl.cluster_from_dict(cluster_doc([dev("dev_a"), dev("dev_b")], links))
    with pytest.raises(ValueError) as e:
        pl.Simulator(g, c)
    msg = str(e.value)
    assert ("dev_a" in msg and "dev_b" in msg) or "slowlink" in msg, msg
    # 1e11 bytes at 100 B/s is exactly 1e9 s: accepted.
    g2 = pl.graph_from_dict(graph_doc([{"name": "a"}, {"name": "b"}], [{"src": "a", "dst": "b", "bytes": 1e11}]))
    pl.Simulator(g2, c)


def test_gap_or_busy_after_over_1e9_s_is_an_error_naming_device_or_link():
    g = pl.graph_from_dict(graph_doc([{"name": "a"}]))
    with pytest.raises(ValueError, match="slowgap"):
        pl.Simulator(g, pl.cluster_from_dict(cluster_doc([dev("slowgap", gap=2e9), dev("d1")])))
    links = [{"name": "busylink", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": 1e9, "busy_after_s": 2e9}]
    with pytest.raises(ValueError, match="busylink"):
        pl.Simulator(g, pl.cluster_from_dict(cluster_doc([dev("d0"), dev("d1")], links)))


# ---------------------------------------------------------------------------------------------
# The command line: placelab simulate --profile / --no-measured (docs/cli.md, docs/simulator.md)

def cli(*args):
    return subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture()
def cli_files(tmp_path):
    d = dev("d0", "gpu", peak=1e12, bw=1e12, launch=10e-6, eff=0.5)
    ops = [{"name": "a", "type": "MatMul", "flops": 2e9, "bytes_read": 5e8, "bytes_written": 5e8},
           {"name": "b", "type": "Add", "flops": 1e9, "measured_s": {"gpu": 0.0625}}]
    files = {"graph": tmp_path / "g.json", "cluster": tmp_path / "c.json", "placement": tmp_path / "p.json",
             "profile": tmp_path / "prof.json"}
    files["graph"].write_text(json.dumps(graph_doc(ops, [{"src": "a", "dst": "b", "bytes": 16}])))
    files["cluster"].write_text(json.dumps(cluster_doc([d])))
    files["placement"].write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": [0, 0]}))
    files["profile"].write_text(json.dumps(profile_doc([{"device_kind": "gpu", "op_type": "MatMul", "time_s": 0.5},
                                                        {"device_kind": "gpu", "op": "b", "time_s": 0.125}])))
    return files


def sim_json(f, *extra):
    proc = cli("simulate", "--graph", f["graph"], "--cluster", f["cluster"], "--placement", f["placement"],
               "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@needs_cli
def test_cli_simulate_default_uses_roofline_and_measured_times(cli_files):
    r = sim_json(cli_files)
    assert r["step_time_s"] == approx(4e-3 + 10e-6 + 0.0625)


@needs_cli
def test_cli_no_measured_uses_roofline_for_every_op(cli_files):
    r = sim_json(cli_files, "--no-measured")
    assert r["step_time_s"] == approx(4e-3 + 10e-6 + (1e9 / (1e12 * 0.5) + 10e-6))


@needs_cli
def test_cli_profile_with_measured_first(cli_files):
    r = sim_json(cli_files, "--profile", cli_files["profile"])
    assert r["step_time_s"] == approx(0.5 + 0.0625)


@needs_cli
def test_cli_profile_and_no_measured(cli_files):
    r = sim_json(cli_files, "--profile", cli_files["profile"], "--no-measured")
    assert r["step_time_s"] == approx(0.5 + 0.125)


@needs_cli
def test_cli_max_load_takes_the_profile_and_no_measured(cli_files):
    base = ["simulate", "--graph", cli_files["graph"], "--cluster", cli_files["cluster"],
            "--placement", cli_files["placement"], "--max-load", "--json"]
    p1 = cli(*base, "--profile", cli_files["profile"])
    p2 = cli(*base, "--profile", cli_files["profile"], "--no-measured")
    assert p1.returncode == 0 and p2.returncode == 0, p1.stderr + p2.stderr
    assert json.loads(p1.stdout)["max_load_s"] == approx(0.5 + 0.0625)
    assert json.loads(p2.stdout)["max_load_s"] == approx(0.5 + 0.125)


@needs_cli
def test_cli_bad_profile_fails_naming_the_file_and_path(cli_files, tmp_path):
    bad = tmp_path / "broken_prof.json"
    bad.write_text(json.dumps(profile_doc([{"device_kind": "gpu", "op": "a", "time_s": -1}])))
    proc = cli("simulate", "--graph", cli_files["graph"], "--cluster", cli_files["cluster"],
               "--placement", cli_files["placement"], "--profile", bad)
    assert proc.returncode != 0
    assert "broken_prof.json" in proc.stderr and "entries[0].time_s" in proc.stderr, proc.stderr


@needs_cli
def test_cli_micro_batch_stream_single_step_takes_the_profile(cli_files):
    proc = cli("simulate", "--graph", cli_files["graph"], "--cluster", cli_files["cluster"],
               "--placement", cli_files["placement"], "--micro-batches", 4, "--json",
               "--profile", cli_files["profile"], "--no-measured")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["single_s"] == approx(0.5 + 0.125)  # one micro-batch alone: both ops on d0, gap 0


@needs_cli
def test_cli_replay_prediction_takes_the_profile_and_measured_times(tmp_path):
    # docs/cli.md: `placelab replay ... [--profile F]`; the predicted step time is the simulator's.
    # Tiny ops so that the real CPU run takes milliseconds; only the prediction is checked.
    ops = [{"name": "a", "type": "MatMul", "flops": 2e5, "bytes_read": 5e3},
           {"name": "b", "type": "Add", "flops": 1e4, "measured_s": {"cpu": 0.0625}}]
    g, c, p, prof = (tmp_path / n for n in ("g.json", "c.json", "p.json", "prof.json"))
    g.write_text(json.dumps(graph_doc(ops, [{"src": "a", "dst": "b", "bytes": 16}])))
    c.write_text(json.dumps(cluster_doc([dev("cpu0", "cpu", peak=1e12, bw=1e12, launch=1e-5, eff=0.5)])))
    p.write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": [0, 0]}))
    prof.write_text(json.dumps(profile_doc([{"device_kind": "cpu", "op_type": "MatMul", "time_s": 0.5}])))
    base = ["replay", "--graph", g, "--cluster", c, "--placement", p, "--backend", "cpu", "--json",
            "--repeats", 1, "--warmup", 0, "--threads-per-device", 1, "--no-pin"]
    plain, profiled = cli(*base), cli(*base, "--profile", prof)
    assert plain.returncode == 0 and profiled.returncode == 0, plain.stderr + profiled.stderr
    assert json.loads(plain.stdout)["predicted_step_s"] == approx(max(2e5 / 5e11, 5e3 / 5e11) + 1e-5 + 0.0625)
    assert json.loads(profiled.stdout)["predicted_step_s"] == approx(0.5 + 0.0625)
