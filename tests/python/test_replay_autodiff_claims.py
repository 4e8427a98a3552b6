# Checks the replay executor (docs/replay.md, the `replay` and `calibrate` verbs of docs/cli.md, the
# replay and calibration formats of docs/formats.md) and the autodiff's golden fixtures
# (docs/autodiff.md) against their documentation, written from the docs alone. Replay is not exposed
# to Python, so it is driven through the `placelab` binary (PLACELAB_BIN, which ctest sets;
# the tests skip when it is absent). Timing is noisy, so nothing here compares wall-clock numbers with
# thresholds: the checks are on structure, exact bookkeeping (plan vs simulator, JSON vs trace) and the
# orders the executor promises. The autodiff is not exposed to Python either; its documented contract
# with PyTorch lives in tests/golden/autodiff/, which is re-derived here from the fixtures' own numbers.
import importlib.util
import itertools
import json
import os
import random
import re
import subprocess
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import placelab

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("PLACELAB_BIN", "placelab-binary-not-given"))  # ctest sets it
needs_cli = pytest.mark.skipif(not BIN.exists(), reason=f"placelab binary not found at {BIN} (set PLACELAB_BIN)")

# A cluster with exact numbers: P = W = 1e9 (so the kernel rule is a plain comparison of FLOPs with
# bytes), efficiency 1, a launch overhead so that no op takes zero time (per-device orders are then
# unambiguous by start time), three devices with a full-duplex link per pair.
P_FLOPS, W_BYTES, LAUNCH = 1e9, 1e9, 1e-6


def cluster_doc(n=3):
    names = [f"cpu{i}" for i in range(n)]
    return {
        "format": "placelab.cluster", "version": 1, "name": f"exact-{n}", "transfer_mode": "per_destination",
        "devices": [{"name": d, "kind": "cpu", "peak_flops_per_s": P_FLOPS, "memory_bandwidth_bytes_per_s": W_BYTES,
                     "memory_bytes": 1 << 34, "launch_overhead_s": LAUNCH, "gap_after_op_s": 0.0,
                     "efficiency": 1.0} for d in names],
        "links": [{"name": f"{a}-{b}", "ends": [a, b], "bandwidth_bytes_per_s": 2e9, "latency_s": 5e-7,
                   "busy_after_s": 0.0, "duplex": "full"} for a, b in itertools.combinations(names, 2)],
    }


def run(*args, check=True):
    proc = subprocess.run([str(BIN), *map(str, args)], capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def random_graph(rng, n):
    """A seeded DAG: compute, memory and dispatch-only ops (bytes multiples of 8), data edges and
    control edges (0 bytes), fan-out to several ops of one remote device."""
    ops = []
    for i in range(n):
        kind = rng.choice(["compute", "memory", "none", "mixed"])
        op = {"name": f"op{i}", "type": {"compute": "MatMul", "memory": "Add", "none": "NoOp", "mixed": "Conv2D"}[kind],
              "output_bytes": 8 * rng.randint(0, 512)}
        if kind in ("compute", "mixed"):
            op["flops"] = float(rng.randint(1, 40) * 1000)
        if kind in ("memory", "mixed"):
            op["bytes_read"] = 8 * rng.randint(1, 3000)
            op["bytes_written"] = 8 * rng.randint(0, 1000)
        ops.append(op)
    edges = []
    for d in range(1, n):
        for s in range(d):
            if rng.random() < 0.3:
                edges.append({"src": s, "dst": d, "bytes": 0 if rng.random() < 0.25 else 8 * rng.randint(1, 2000)})
    return {"format": "placelab.graph", "version": 1, "name": "rand", "ops": ops, "edges": edges}


def op_bytes(op):
    return op.get("bytes_read", 0) + op.get("bytes_written", 0)


def expected_kernel(op):
    # replay.md: "`compute` when `flops / peak >= bytes / bandwidth` (and FLOPs > 0), else `memory`
    # when it has bytes, else `none`".
    f, b = op.get("flops", 0.0), op_bytes(op)
    if f > 0 and f / P_FLOPS >= b / W_BYTES:
        return "compute"
    return "memory" if b > 0 else "none"


@pytest.fixture(scope="module")
def exact_cluster(tmp_path_factory):
    path = tmp_path_factory.mktemp("cluster") / "exact3.json"
    path.write_text(json.dumps(cluster_doc(3)))
    return path


def export(tmp, graph_doc, placement, cluster, extra=(), repeats=1, warmup=0):
    """Writes graph and placement, runs one cheap replay with --plan-out, returns (plan, json result)."""
    tmp.mkdir(parents=True, exist_ok=True)
    g, p, plan = tmp / "g.json", tmp / "p.json", tmp / "plan.json"
    g.write_text(json.dumps(graph_doc))
    p.write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": list(map(int, placement))}))
    out = run("replay", "--graph", g, "--cluster", cluster, "--placement", p, "--plan-out", plan,
              "--repeats", repeats, "--warmup", warmup, "--json", *extra)
    return json.loads(plan.read_text()), json.loads(out.stdout)


CASES = [(seed, 8 + seed % 7) for seed in range(5)]


@pytest.fixture(scope="module")
def random_plans(tmp_path_factory, exact_cluster):
    if not BIN.exists():
        pytest.skip(f"placelab binary not found at {BIN} (set PLACELAB_BIN)")
    out = []
    for seed, n in CASES:
        rng = random.Random(seed)
        doc = random_graph(rng, n)
        placement = [rng.randrange(3) for _ in range(n)]
        plan, _ = export(tmp_path_factory.mktemp(f"plan{seed}"), doc, placement, exact_cluster)
        out.append((doc, placement, plan))
    return out


# ---------------------------------------------------------------- the plan


@needs_cli
def test_plan_header_and_ops_in_graph_order(random_plans):
    """replay.md: 'ops in graph order (plan op i is graph op i): name, type, device, kernel (...), the
    op's FLOPs and bytes (read + written), the simulator's start and end'; the kernel rule is the
    roofline's bound on the op's device."""
    for doc, placement, plan in random_plans:
        assert plan["format"] == "placelab.replay" and plan["version"] == 1
        assert plan["graph"] == doc["name"] and plan["cluster"] == "exact-3"
        assert [d["name"] for d in plan["devices"]] == ["cpu0", "cpu1", "cpu2"]
        assert all(d["kind"] == "cpu" for d in plan["devices"])
        assert len(plan["ops"]) == len(doc["ops"])
        for i, (gop, pop) in enumerate(zip(doc["ops"], plan["ops"])):
            assert (pop["name"], pop["type"], pop["device"]) == (gop["name"], gop["type"], placement[i])
            assert pop["flops"] == gop.get("flops", 0.0) and pop["bytes"] == op_bytes(gop)
            assert pop["kernel"] == expected_kernel(gop), (i, gop)
            assert pop["end_s"] >= pop["start_s"] >= 0


@needs_cli
def test_kernel_rule_boundaries(tmp_path, exact_cluster):
    """replay.md: compute when flops/peak >= bytes/bandwidth (and FLOPs > 0); memory when it has bytes;
    else none. With peak == bandwidth: a tie is compute, one byte more is memory."""
    ops = [{"name": "tie", "type": "T", "flops": 1000.0, "bytes_read": 600, "bytes_written": 400},
           {"name": "membound", "type": "T", "flops": 1000.0, "bytes_read": 1008},
           {"name": "flopsonly", "type": "T", "flops": 8.0},
           {"name": "bytesonly", "type": "T", "bytes_written": 8},
           {"name": "nothing", "type": "T"}]
    plan, _ = export(tmp_path, {"format": "placelab.graph", "version": 1, "name": "k", "ops": ops},
                     [0] * len(ops), exact_cluster)
    assert [o["kernel"] for o in plan["ops"]] == ["compute", "memory", "compute", "memory", "none"]


def expected_transfers(doc, placement):
    """replay.md: 'one per (producer, destination device) ... (once per destination, the size of the
    largest edge to it)'. Control edges (0 bytes) carry no tensor."""
    want = {}
    for e in doc["edges"]:
        s, d = e["src"], e["dst"]
        if e["bytes"] > 0 and placement[s] != placement[d]:
            key = (s, placement[d])
            want[key] = max(want.get(key, 0), e["bytes"])
    return want


@needs_cli
def test_plan_transfers_one_per_producer_and_destination(random_plans):
    """replay.md: transfers 'one per (producer, destination device) ... the size of the largest edge to
    it, with source, destination, bytes and predicted times'."""
    for doc, placement, plan in random_plans:
        want = expected_transfers(doc, placement)
        got = {}
        for t in plan["transfers"]:
            key = (t["producer"], t["dst"])
            assert key not in got, f"two transfers for {key}"
            got[key] = t["bytes"]
            assert t["src"] == placement[t["producer"]] != t["dst"]
            assert t["end_s"] >= t["start_s"] >= plan["ops"][t["producer"]]["end_s"]
        assert got == want


@needs_cli
def test_plan_dependencies(random_plans):
    """replay.md: 'after_ops (inputs produced on the same device, and control edges from any device:
    they carry no tensor) and after_transfers (inputs from other devices)'."""
    for doc, placement, plan in random_plans:
        index = {(t["producer"], t["dst"]): k for k, t in enumerate(plan["transfers"])}
        for i, pop in enumerate(plan["ops"]):
            ops, transfers = set(), set()
            for e in doc["edges"]:
                if e["dst"] != i:
                    continue
                s = e["src"]
                if e["bytes"] == 0 or placement[s] == placement[i]:
                    ops.add(s)
                else:
                    transfers.add(index[(s, placement[i])])
            assert set(pop["after_ops"]) == ops, (i, pop)
            assert set(pop["after_transfers"]) == transfers, (i, pop)
            # the consumer starts no earlier than its inputs are there, in the prediction
            for s in pop["after_ops"]:
                assert pop["start_s"] >= plan["ops"][s]["end_s"]
            for k in pop["after_transfers"]:
                assert pop["start_s"] >= plan["transfers"][k]["end_s"]


def simulator_for(doc, cluster_path):
    g = placelab.graph_from_dict(doc)
    return placelab.Simulator(g, placelab.read_cluster(str(cluster_path)))


@needs_cli
def test_plan_is_the_simulators_schedule(random_plans, exact_cluster):
    """replay.md: export_plan 'simulates the placement with a TraceRecorder and writes ... the simulator's
    start and end', 'devices: per device, its ops in the order the simulator ran them', transfers 'as the
    simulator sends them ... with predicted times'; predicted_step_s is the simulated step time."""
    for doc, placement, plan in random_plans:
        sim = simulator_for(doc, exact_cluster)
        p = np.array(placement, dtype=np.int32)
        tr = sim.trace(p)
        assert plan["predicted_step_s"] == sim.simulate(p)["step_time_s"]
        ops = tr["ops"]
        for k in range(len(ops["op"])):
            pop = plan["ops"][int(ops["op"][k])]
            assert (pop["start_s"], pop["end_s"]) == (float(ops["start_s"][k]), float(ops["end_s"][k]))
        for d, dev in enumerate(plan["devices"]):
            mine = sorted((i for i in range(len(placement)) if placement[i] == d), key=lambda i: plan["ops"][i]["start_s"])
            assert dev["ops"] == mine
        t = tr["transfers"]
        sim_set = sorted((int(t["op"][k]), int(t["src"][k]), int(t["dst"][k]), float(t["bytes"][k]),
                          float(t["start_s"][k]), float(t["end_s"][k])) for k in range(len(t["op"])))
        plan_set = sorted((x["producer"], x["src"], x["dst"], x["bytes"], x["start_s"], x["end_s"])
                          for x in plan["transfers"])
        assert plan_set == sim_set


def kahn_runs_all(plan):
    """Kahn's algorithm over dependencies plus device orders plus per-pair transfer orders."""
    nodes = [("op", i) for i in range(len(plan["ops"]))] + [("tr", k) for k in range(len(plan["transfers"]))]
    preds = defaultdict(set)
    for i, op in enumerate(plan["ops"]):
        preds[("op", i)] |= {("op", j) for j in op["after_ops"]} | {("tr", k) for k in op["after_transfers"]}
    for k, t in enumerate(plan["transfers"]):
        preds[("tr", k)].add(("op", t["producer"]))
    for dev in plan["devices"]:
        for a, b in zip(dev["ops"], dev["ops"][1:]):
            preds[("op", b)].add(("op", a))
    pairs = defaultdict(list)
    for k, t in enumerate(plan["transfers"]):
        pairs[(t["src"], t["dst"])].append(k)
    for ks in pairs.values():
        for a, b in zip(ks, ks[1:]):
            preds[("tr", b)].add(("tr", a))
    done, ready = set(), [n for n in nodes if not preds[n]]
    while ready:
        n = ready.pop()
        done.add(n)
        ready += [m for m in nodes if m not in done and m not in ready and preds[m] <= done]
    return len(done) == len(nodes), pairs


@needs_cli
def test_exported_orders_can_always_run(random_plans):
    """replay.md: 'The simulator reports events in the order it decides them, which is causal ... So the
    exported orders can always run'; 'each ordered device pair runs its transfers one at a time in that
    order' (so the predicted times of one pair's transfers follow that order without overlap)."""
    for _, _, plan in random_plans:
        ok, pairs = kahn_runs_all(plan)
        assert ok
        for dev in plan["devices"]:
            for a, b in zip(dev["ops"], dev["ops"][1:]):
                assert plan["ops"][b]["start_s"] >= plan["ops"][a]["end_s"]
        for ks in pairs.values():
            for a, b in zip(ks, ks[1:]):
                assert plan["transfers"][b]["start_s"] >= plan["transfers"][a]["end_s"]


@needs_cli
def test_plan_file_round_trip(tmp_path, random_plans):
    """replay.md: 'plan_from_json(plan_to_json(p)) == p exactly'; cli.md: `--plan` replays a saved plan
    and `--plan-out` saves one, so re-saving a read plan gives the same document."""
    for n, (_, _, plan) in enumerate(random_plans[:2]):
        a, b = tmp_path / f"a{n}.json", tmp_path / f"b{n}.json"
        a.write_text(json.dumps(plan))
        res = json.loads(run("replay", "--plan", a, "--plan-out", b, "--repeats", 1, "--warmup", 0, "--json").stdout)
        assert json.loads(b.read_text()) == plan
        assert res["predicted_step_s"] == plan["predicted_step_s"]  # the saved prediction, not a new one


@needs_cli
def test_plan_key_given_twice_is_an_error(tmp_path, random_plans):
    """formats.md: 'a key given twice in one object is an error naming it'."""
    text = json.dumps(random_plans[0][2])
    assert text.startswith("{")
    path = tmp_path / "dup.json"
    path.write_text('{"predicted_step_s": 1.0, ' + text[1:])
    proc = run("replay", "--plan", path, "--repeats", 1, "--warmup", 0, check=False)
    assert proc.returncode == 1
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("placelab: error: ") and "dup.json" in line and "predicted_step_s" in line, line


# ---------------------------------------------------------------- running it


FORK = {"format": "placelab.graph", "version": 1, "name": "fork", "ops": [
    {"name": "a", "type": "MatMul", "flops": 2e5, "bytes_read": 4096, "output_bytes": 4096},
    {"name": "b", "type": "Add", "bytes_read": 65536, "bytes_written": 4096, "output_bytes": 4096},
    {"name": "c", "type": "MatMul", "flops": 3e5, "output_bytes": 8192},
    {"name": "e", "type": "Add", "bytes_read": 8000, "bytes_written": 8000},
    {"name": "d", "type": "NoOp"}],
    "edges": [{"src": 0, "dst": 1, "bytes": 4096}, {"src": 0, "dst": 2, "bytes": 4096},
              {"src": 0, "dst": 3, "bytes": 1000}, {"src": 2, "dst": 3, "bytes": 8000},
              {"src": 1, "dst": 4, "bytes": 100}, {"src": 3, "dst": 4, "bytes": 0}]}
FORK_PLACEMENT = [0, 0, 1, 2, 0]


@pytest.fixture(scope="module")
def fork_runs(tmp_path_factory, exact_cluster):
    """The fork graph replayed with a trace, by default (producer copies) and with --copy-threads."""
    if not BIN.exists():
        pytest.skip(f"placelab binary not found at {BIN} (set PLACELAB_BIN)")
    out = {}
    for mode, extra in (("default", ()), ("copy_threads", ("--copy-threads",))):
        tmp = tmp_path_factory.mktemp(mode)
        trace = tmp / "trace.json"
        plan, res = export(tmp, FORK, FORK_PLACEMENT, exact_cluster,
                           repeats=4, warmup=1, extra=("--trace", trace, *extra))
        out[mode] = (plan, res, json.loads(trace.read_text()))
    return out


@needs_cli
def test_replay_json_result(fork_runs):
    """cli.md: replay prints 'the predicted and the measured step time (median of --repeats runs after
    --warmup runs), the relative error and each device's busy time. --json adds every run's step time,
    the FLOPs, bytes streamed and bytes copied, and per-device checksums'. replay.md: the median is 'the
    lower one for an even count, so it is a measured run'; error = measured / predicted - 1; memory
    kernels stream bytes / 8 floats, 4 bytes read and 4 written; GEMMs match the op's FLOPs within 5%."""
    for plan, res, _ in fork_runs.values():
        assert res["repeats"] == 4 and res["warmup"] == 1 and res["backend"] == "cpu"
        runs = res["step_times_s"]
        assert len(runs) == 4 and all(t > 0 for t in runs)
        assert res["measured_step_s"] == sorted(runs)[1]  # lower median of an even count
        assert res["predicted_step_s"] == plan["predicted_step_s"]
        assert res["relative_error"] == pytest.approx(res["measured_step_s"] / res["predicted_step_s"] - 1, rel=1e-9)
        assert res["ops"] == len(plan["ops"]) and res["transfers"] == len(plan["transfers"])
        assert res["bytes_copied"] == sum(t["bytes"] for t in plan["transfers"])
        assert res["bytes_streamed"] == sum(o["bytes"] for o in plan["ops"] if o["kernel"] == "memory")
        flops = sum(o["flops"] for o in plan["ops"] if o["kernel"] == "compute")
        assert abs(res["flops_done"] - flops) <= 0.05 * flops
        assert [d["name"] for d in res["devices"]] == [d["name"] for d in plan["devices"]]
        assert [d["ops"] for d in res["devices"]] == [len(d["ops"]) for d in plan["devices"]]
        for d in res["devices"]:
            # a device's busy time in a run fits in that run (which run is not said: any of them)
            assert np.isfinite(d["checksum"]) and 0 < d["busy_s"] <= max(runs) * (1 + 1e-9)


def trace_events(doc):
    """Splits a Chrome trace into {process name: {thread name: [events]}} using its metadata events."""
    pname, tname = {}, {}
    for e in doc["traceEvents"]:
        if e.get("ph") == "M" and e["name"] == "process_name":
            pname[e["pid"]] = e["args"]["name"]
        elif e.get("ph") == "M" and e["name"] == "thread_name":
            tname[(e["pid"], e["tid"])] = e["args"]["name"]
    out = defaultdict(lambda: defaultdict(list))
    for e in doc["traceEvents"]:
        if e.get("ph") == "X":
            out[pname[e["pid"]]][tname[(e["pid"], e["tid"])]].append(e)
    return out


EPS_US = 1e-3  # 1 ns, for the double arithmetic of microsecond timestamps


def measured_schedule(plan, trace):
    ev = trace_events(trace)
    measured = [v for k, v in ev.items() if "measured" in k]
    predicted = [v for k, v in ev.items() if "predicted" in k]
    assert len(measured) == 1 and len(predicted) == 1, list(ev)
    return measured[0], predicted[0]


def op_times(plan, threads):
    names = [d["name"] for d in plan["devices"]]
    times = {}
    for d, dev in enumerate(plan["devices"]):
        evs = sorted(threads[names[d]], key=lambda e: e["ts"])
        assert [e["name"] for e in evs] == [plan["ops"][i]["name"] for i in dev["ops"]], "device order not the plan's"
        for i, e in zip(dev["ops"], evs):
            times[i] = (e["ts"], e["ts"] + e["dur"])
    tr_times = {}
    for k, t in enumerate(plan["transfers"]):
        cands = [th for th in threads if names[t["src"]] in th and names[t["dst"]] in th and th not in names
                 and th.index(names[t["src"]]) < th.index(names[t["dst"]])]
        assert len(cands) == 1, (t, list(threads))
        evs = sorted(threads[cands[0]], key=lambda e: e["ts"])
        order = [j for j, u in enumerate(plan["transfers"]) if (u["src"], u["dst"]) == (t["src"], t["dst"])]
        assert len(evs) == len(order)
        e = evs[order.index(k)]
        assert plan["ops"][t["producer"]]["name"] in e["name"]
        tr_times[k] = (e["ts"], e["ts"] + e["dur"])
    return times, tr_times


@needs_cli
@pytest.mark.parametrize("mode", ["default", "copy_threads"])
def test_measured_run_respects_plan_orders_and_dependencies(fork_runs, mode):
    """replay.md: each device runs 'the device's ops in plan order'; 'an op (or transfer) starts when all
    it waits for has ended in this run'; each ordered device pair runs its transfers one at a time in
    plan order; '--trace' has the median run, whose step time 'is from its earliest op start to its
    latest op or transfer end', with the simulator's schedule beside it."""
    plan, res, trace = fork_runs[mode]
    measured, predicted = measured_schedule(plan, trace)
    times, tr_times = op_times(plan, measured)
    for dev in plan["devices"]:
        for a, b in zip(dev["ops"], dev["ops"][1:]):
            assert times[b][0] >= times[a][1] - EPS_US
    for i, op in enumerate(plan["ops"]):
        for j in op["after_ops"]:
            assert times[i][0] >= times[j][1] - EPS_US, (i, j)
        for k in op["after_transfers"]:
            assert times[i][0] >= tr_times[k][1] - EPS_US, (i, k)
    for k, t in enumerate(plan["transfers"]):
        assert tr_times[k][0] >= times[t["producer"]][1] - EPS_US
        for j, u in enumerate(plan["transfers"][:k]):
            if (u["src"], u["dst"]) == (t["src"], t["dst"]):
                assert tr_times[k][0] >= tr_times[j][1] - EPS_US
    start = min(s for s, _ in times.values())
    end = max(e for _, e in itertools.chain(times.values(), tr_times.values()))
    assert (end - start) * 1e-6 == pytest.approx(res["measured_step_s"], rel=1e-6, abs=1e-9)
    # the simulator's schedule beside it
    ptimes, ptr = op_times(plan, predicted)
    for i, op in enumerate(plan["ops"]):
        assert ptimes[i][0] == pytest.approx(op["start_s"] * 1e6, rel=1e-9, abs=1e-9)
        assert ptimes[i][1] == pytest.approx(op["end_s"] * 1e6, rel=1e-9, abs=1e-9)
    for k, t in enumerate(plan["transfers"]):
        assert ptr[k][0] == pytest.approx(t["start_s"] * 1e6, rel=1e-9, abs=1e-9)


@needs_cli
def test_producer_thread_copies_by_default(fork_runs):
    """replay.md: 'By default the producer's thread copies each transfer right after the producer ends
    ... a copy delays the producer's next op by its duration'; so on the producer's device the copy sits
    between the producer and the device's next op."""
    plan, _, trace = fork_runs["default"]
    measured, _ = measured_schedule(plan, trace)
    times, tr_times = op_times(plan, measured)
    for k, t in enumerate(plan["transfers"]):
        order = plan["devices"][t["src"]]["ops"]
        pos = order.index(t["producer"])
        if pos + 1 < len(order):
            assert times[order[pos + 1]][0] >= tr_times[k][1] - EPS_US, (k, t)


@needs_cli
def test_checksums_and_work_are_deterministic(tmp_path, exact_cluster):
    """replay.md: 'Kernels compute real values ... Every kernel returns the sum of what it wrote; the
    sums are reported per device (device_checksum)': with one thread per device the same plan gives
    the same sums, work and bytes on every replay (the times differ)."""
    results = [export(tmp_path / str(n), FORK, FORK_PLACEMENT, exact_cluster)[1] for n in range(2)]
    keys = ("flops_done", "bytes_streamed", "bytes_copied")
    a, b = ([r[k] for k in keys] + [d["checksum"] for d in r["devices"]] for r in results)
    assert a == b


# ---------------------------------------------------------------- errors


def bad_plans(plan):
    """(name, mutation, what the message must name) for hand-edited plans of the fork graph."""
    def cut_transfer_wait(q):
        for op in q["ops"]:
            op["after_transfers"] = []

    def transfer_same_device(q):
        cut_transfer_wait(q)
        q["transfers"][0]["dst"] = q["transfers"][0]["src"]

    def transfer_not_from_producer(q):
        cut_transfer_wait(q)
        t = q["transfers"][0]
        t["src"] = next(d for d in range(3) if d not in (t["src"], t["dst"]))

    def swap_device_order(q):
        q["devices"][0]["ops"] = list(reversed(q["devices"][0]["ops"]))

    def dup(q):
        q["devices"][0]["ops"].append(q["devices"][0]["ops"][0])

    def missing(q):
        q["devices"][0]["ops"].pop()

    def wrong_device(q):
        i = q["devices"][0]["ops"].pop()
        q["devices"][1]["ops"].append(i)

    def wait_cycle(q):
        q["ops"][0]["after_ops"] = [1]  # a waits for b, which waits for a

    return [
        ("device order deadlocks", swap_device_order, ['"cpu0"']),
        ("dependency cycle", wait_cycle, ['"a"']),
        ("op listed twice", dup, ['"a"']),
        ("op not listed", missing, ['"d"']),
        ("op listed by another device", wrong_device, ['"d"']),
        ("transfer within one device", transfer_same_device, ["transfer"]),
        ("transfer not from its producer's device", transfer_not_from_producer, ["transfer"]),
    ]


@pytest.fixture(scope="module")
def fork_plan(fork_runs):
    return fork_runs["default"][0]


def replay_plan_doc(tmp_path, doc, name="bad.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path, run("replay", "--plan", path, "--repeats", 1, "--warmup", 0, check=False)


ERROR_LINE = re.compile(r"^placelab: error: (?P<place>[^:]+): (?P<what>.+)$")


@needs_cli
@pytest.mark.parametrize("case", range(7))
def test_validate_plan_rejects_and_names_the_op_or_transfer(tmp_path, fork_plan, case):
    """replay.md: validate_plan checks 'every op listed once by its own device, transfers between
    distinct devices leaving their producer's device, and no deadlock ...; errors name the op or
    transfer'; cli.md: errors are one line `placelab: error: <place>: <what>`, then the fix, exit 1."""
    name, mutate, names = bad_plans(fork_plan)[case]
    doc = json.loads(json.dumps(fork_plan))
    mutate(doc)
    path, proc = replay_plan_doc(tmp_path, doc)
    assert proc.returncode == 1, (name, proc.stdout)
    lines = proc.stderr.strip().splitlines()
    m = ERROR_LINE.match(lines[-1])
    assert m and m["place"] == path.name or str(path) in lines[-1], (name, proc.stderr)
    for s in names:
        assert s in lines[-1], (name, lines[-1])


@needs_cli
@pytest.mark.parametrize("case", range(7))
def test_validate_plan_errors_give_the_fix(tmp_path, fork_plan, case):
    """replay.md: validate_plan's 'errors name the op or transfer and the fix'; cli.md's error line is
    `placelab: error: <place>: <what>`, then the fix "(after `; ` or in parentheses)"."""
    name, mutate, _ = bad_plans(fork_plan)[case]
    doc = json.loads(json.dumps(fork_plan))
    mutate(doc)
    _, proc = replay_plan_doc(tmp_path, doc)
    assert proc.returncode == 1
    assert re.search(r"(; .+|\(.+\))$", proc.stderr.strip().splitlines()[-1]), (name, proc.stderr)


@needs_cli
@pytest.mark.parametrize("field,mutate,path_named", [
    ("unknown field", lambda q: q["ops"][1].__setitem__("colour", 1), "ops[1]"),
    ("wrong version", lambda q: q.__setitem__("version", 2), "1"),
    ("negative bytes", lambda q: q["ops"][1].__setitem__("bytes", -8), "ops[1].bytes"),
    ("device index out of range", lambda q: q["ops"][2].__setitem__("device", 7), "ops[2]"),
    ("transfer index out of range", lambda q: q["ops"][2].__setitem__("after_transfers", [9]), "ops[2]"),
    ("flops above 2^62", lambda q: q["ops"][0].__setitem__("flops", 2.0 ** 63), '"a"'),
    ("duplicate device name", lambda q: q["devices"][1].__setitem__("name", "cpu0"), "cpu0"),
    ("empty device name", lambda q: q["devices"][1].__setitem__("name", ""), "devices[1]"),
])
def test_plan_reading_is_strict(tmp_path, fork_plan, field, mutate, path_named):
    """replay.md: 'Reading is strict like every placelab format: unknown fields, a wrong version, bad
    indices and cycles are errors naming the file and JSON path'; formats.md: reading checks 'that
    device names are unique and non-empty, that FLOPs and bytes are at most 2^62'; a wrong version names
    the supported versions."""
    doc = json.loads(json.dumps(fork_plan))
    mutate(doc)
    path, proc = replay_plan_doc(tmp_path, doc)
    assert proc.returncode == 1, field
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith(f"placelab: error: ") and path.name in line, (field, line)
    assert path_named in line, (field, line)


@needs_cli
def test_bad_placement_fails_and_keeps_old_outputs(tmp_path, exact_cluster):
    """formats.md: a placement's 'length and devices are checked against the graph and cluster it is
    used with (errors name the file)'; cli.md: exit 1, and 'a run that fails leaves the old files as they
    were'."""
    g = tmp_path / "g.json"
    g.write_text(json.dumps(FORK))
    old = tmp_path / "plan.json"
    old.write_text("old contents\n")
    for name, device_of in (("range.json", [0, 0, 3, 0, 0]), ("short.json", [0, 0, 1, 0])):
        p = tmp_path / name
        p.write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": device_of}))
        proc = run("replay", "--graph", g, "--cluster", exact_cluster, "--placement", p, "--plan-out", old,
                   "--repeats", 1, "--warmup", 0, check=False)
        assert proc.returncode == 1
        line = proc.stderr.strip().splitlines()[-1]
        assert line.startswith("placelab: error: ") and name in line, line
        assert old.read_text() == "old contents\n"


def gpu_present():
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=20).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


@needs_cli
@pytest.mark.skipif(gpu_present(), reason="a GPU is present: the no-GPU behaviour cannot be checked here")
def test_cuda_backend_without_gpu_is_a_clear_error(tmp_path, exact_cluster):
    """replay.md: 'Without CUDA, cuda/executor_stub.cpp makes --backend cuda an error that says how to
    build it; with CUDA but no GPU, the error names the runtime's reason'; cli.md's error format, exit 1."""
    g, p = tmp_path / "g.json", tmp_path / "p.json"
    g.write_text(json.dumps(FORK))
    p.write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": FORK_PLACEMENT}))
    for args in (("replay", "--graph", g, "--cluster", exact_cluster, "--placement", p, "--backend", "cuda"),
                 ("calibrate", "--backend", "cuda", "--quick", "--out", tmp_path / "c.json")):
        proc = run(*args, check=False)
        assert proc.returncode == 1, args
        line = proc.stderr.strip().splitlines()[-1]
        assert line.startswith("placelab: error: "), line
        assert "PLACELAB_BUILD_CUDA" in line or "cuda" in line.lower(), line
        assert not (tmp_path / "c.json").exists()


# ---------------------------------------------------------------- calibration


@pytest.fixture(scope="module")
def calibration(tmp_path_factory):
    if not BIN.exists():
        pytest.skip(f"placelab binary not found at {BIN} (set PLACELAB_BIN)")
    tmp = tmp_path_factory.mktemp("cal")
    out, meas = tmp / "cal.json", tmp / "meas.json"
    proc = run("calibrate", "--backend", "cpu", "--quick", "--devices", 3, "--contention", "--out", out,
               "--measurements", meas, "--json")
    return json.loads(proc.stdout), json.loads(out.read_text()), json.loads(meas.read_text()), out


def relative_lsq(columns, t, nonneg_last):
    """Least squares in relative error: minimise sum((A x) / t - 1)^2, with x[-1] >= 0 if asked."""
    A = np.array(columns, dtype=float) / np.asarray(t, dtype=float)[:, None]
    x = np.linalg.lstsq(A, np.ones(len(t)), rcond=None)[0]
    if nonneg_last and x[-1] < 0:
        x = np.append(np.linalg.lstsq(A[:, :-1], np.ones(len(t)), rcond=None)[0], 0.0)
    return x


@needs_cli
def test_calibration_document(calibration):
    """replay.md: `--json` (or `--measurements F`) gives 'the raw points (with achieved FLOP/s and
    bytes/s per size) and the fits' mean relative error, as placelab.calibration v1'; quick sizes are
    1 - 100 kFLOP and 4 - 400 kB, 3 per curve; the curves are launch, compute, memory and copy, and on the
    CPU backend with 2+ devices launch, compute and memory again with one device alone (device "alone")."""
    doc, cluster, meas, _ = calibration
    assert meas == doc
    assert (doc["format"], doc["version"], doc["backend"], doc["devices"]) == ("placelab.calibration", 1, "cpu", 3)
    assert doc["copy_engine"] is False and doc["device_memory_bytes"] == cluster["devices"][0]["memory_bytes"]
    by, tagged = defaultdict(list), defaultdict(list)
    for p in doc["points"]:
        (tagged[p["device"], p["what"]] if "device" in p else by[p["what"]]).append(p)
        assert p["time_s"] > 0
    assert set(by) == {"launch", "compute", "memory", "copy", "shape"}
    # Products far from square: [batch, m, n, k] each, FLOPs 2 batch m n k, and the fit of their costs.
    assert len(by["shape"]) == 4
    for p in by["shape"]:
        batch, m, n, k = p["gemm"]
        assert p["size"] == 2.0 * batch * m * n * k and not m == n == k
        assert p["flops_per_s"] == pytest.approx(p["size"] / p["time_s"], rel=1e-9)
    assert cluster["devices"][0].get("gemm_element_s", [0, 0, 0]) == doc["shapes"]["gemm_element_s"]  # written when used
    assert doc["shapes"]["used"] == any(doc["shapes"]["gemm_element_s"])
    assert {k: sorted(p["size"] for p in v) for k, v in tagged.items()} == {
        ("alone", "launch"): [0], ("alone", "compute"): [1e3, 1e4, 1e5], ("alone", "memory"): [4e3, 4e4, 4e5],
        ("loaded", "copy"): [4e3, 4e4, 4e5]}
    assert sorted(p["size"] for p in by["compute"]) == [1e3, 1e4, 1e5]
    assert sorted(p["size"] for p in by["memory"]) == [4e3, 4e4, 4e5]
    assert sorted(p["size"] for p in by["copy"]) == [4e3, 4e4, 4e5]
    for p in by["compute"]:
        assert p["flops_per_s"] == pytest.approx(p["size"] / p["time_s"], rel=1e-9)
    for p in by["memory"] + by["copy"]:
        assert p["bytes_per_s"] == pytest.approx(p["size"] / p["time_s"], rel=1e-9)
    assert doc["cluster"] == cluster


@needs_cli
def test_roofline_fit_is_least_squares_in_relative_error(calibration):
    """replay.md: 't = max(F / P, B / W) + L, is fitted to the launch, compute and memory points by least
    squares in relative error (linear in 1/P, 1/W, L; L >= 0)', with the mean relative error (mape); 'a rate
    whose coefficient comes out non-positive ... is the best measured one'."""
    doc = calibration[0]
    cols, t = [], []
    for p in doc["points"]:
        if "device" in p:
            continue  # measured alone: the curves', not the roofline's
        s = p["size"]
        row = {"launch": [0, 0, 1], "compute": [s, 0, 1], "memory": [0, s, 1]}.get(p["what"])
        if row:
            cols.append(row)
            t.append(p["time_s"])
    inv_p, inv_w, L = relative_lsq(cols, t, nonneg_last=True)
    # A rate whose coefficient noise makes non-positive (a larger op measured no slower) is the best measured:
    # size / (t - L), with t - L at least t / 2.
    best = [max((c[k] / tk / (1 - min(0.5, L / tk)) for c, tk in zip(cols, t) if c[k] > 0), default=0) for k in (0, 1)]
    inv_p = inv_p if inv_p > 0 else 1 / best[0]
    inv_w = inv_w if inv_w > 0 else 1 / best[1]
    r = doc["roofline"]
    assert r["launch_s"] >= 0
    assert r["flops_per_s"] == pytest.approx(1 / inv_p, rel=1e-6)
    assert r["bandwidth_bytes_per_s"] == pytest.approx(1 / inv_w, rel=1e-6)
    assert r["launch_s"] == pytest.approx(L, rel=1e-6, abs=1e-15)
    pred = np.array(cols) @ np.array([1 / r["flops_per_s"], 1 / r["bandwidth_bytes_per_s"], r["launch_s"]])
    assert r["mape"] == pytest.approx(np.mean(np.abs(pred / np.array(t) - 1)), rel=1e-6)


@needs_cli
def test_efficiency_curves_and_their_leave_one_out_error(calibration):
    """replay.md: each compute point gives the "gemm" curve F / (P (t - L)) and each memory point the
    "elementwise" one B / (W (t - L)), bounded to [1e-3, 1e3], written on every device of the calibrated
    cluster; the error reported is leave-one-out: each inner point predicted from its curve without it.
    The points of one device alone give the devices' own curves, those of all at once their contended
    curves, both against the one roofline; the devices share the memory domain "host"."""
    doc, cluster, _, _ = calibration
    r = doc["roofline"]
    for device_tag, key, mape in ((None, "contended_efficiency_curves", doc["curves"]["leave_one_out_mape"]),
                                  ("alone", "efficiency_curves", doc["alone_curves"]["leave_one_out_mape"])):
        errors = []
        for what, op_class, rate in (("compute", "gemm", r["flops_per_s"]),
                                     ("memory", "elementwise", r["bandwidth_bytes_per_s"])):
            pts = sorted((p["size"], p["time_s"]) for p in doc["points"] if p["what"] == what and p.get("device") == device_tag)
            size = np.array([s for s, _ in pts])
            eff = np.clip(size / (rate * np.maximum(np.array([t for _, t in pts]) - r["launch_s"], 1e-12)), 1e-3, 1e3)
            for device in cluster["devices"]:
                assert device["memory_domain"] == "host"
                curve = device[key][op_class]
                assert curve["size"] == pytest.approx(list(size), rel=1e-12)
                assert curve["efficiency"] == pytest.approx(list(eff), rel=1e-9)
            for i in range(1, len(pts) - 1):
                keep = [k for k in range(len(pts)) if k != i]
                e = np.interp(np.log(size[i]), np.log(size[keep]), eff[keep])
                errors.append(abs((size[i] / (rate * e) + r["launch_s"]) / pts[i][1] - 1))
        assert mape == pytest.approx(np.mean(errors), rel=1e-6)


@needs_cli
def test_link_fit_and_its_error(calibration):
    """replay.md: 'the link model t = latency + B / bandwidth [is fitted] to the copy points (the hop time
    minus the fitted L) the same way, with latency >= 0 (a fit that needs a negative latency, or a
    non-positive 1 / bandwidth, is redone with latency 0)', with its mean relative error. The points'
    time_s is read as that hop time minus L."""
    doc = calibration[0]
    pts = [p for p in doc["points"] if p["what"] == "copy" and "device" not in p]
    t = [p["time_s"] for p in pts]
    cols = [[p["size"], 1] for p in pts]
    inv_bw, lat = relative_lsq(cols, t, nonneg_last=True)
    if not inv_bw > 0 or lat == 0:
        inv_bw, lat = relative_lsq([[p["size"]] for p in pts], t, nonneg_last=False)[0], 0.0
    cols = [[1, p["size"]] for p in pts]
    link = doc["link"]
    pred = np.array(cols) @ np.array([link["latency_s"], 1 / link["bandwidth_bytes_per_s"]])
    assert link["mape"] == pytest.approx(np.mean(np.abs(pred / np.array(t) - 1)), rel=1e-6)
    assert link["latency_s"] == pytest.approx(lat, rel=1e-6, abs=1e-15)
    assert link["bandwidth_bytes_per_s"] == pytest.approx(1 / inv_bw, rel=1e-6)


@needs_cli
def test_profile_is_a_cluster_file(calibration):
    """replay.md: '--out PROFILE writes a placelab.cluster file ...: devices cpu0.. (kind cpu) with
    peak_flops_per_s = P, memory_bandwidth_bytes_per_s = W, launch_overhead_s = L, efficiency = 1, memory
    = physical memory / devices, and a full-duplex link per device pair with the fitted bandwidth and
    latency'."""
    doc, cluster, _, path = calibration
    r, link = doc["roofline"], doc["link"]
    assert cluster["format"] == "placelab.cluster"
    names = [d["name"] for d in cluster["devices"]]
    assert names == ["cpu0", "cpu1", "cpu2"]
    phys = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for d in cluster["devices"]:
        assert d["kind"] == "cpu" and d["efficiency"] == 1
        assert d["peak_flops_per_s"] == r["flops_per_s"]
        assert d["memory_bandwidth_bytes_per_s"] == r["bandwidth_bytes_per_s"]
        assert d["launch_overhead_s"] == r["launch_s"]
        assert d["memory_bytes"] == pytest.approx(phys / 3, rel=0.01)
    pairs = sorted(tuple(sorted(l["ends"])) for l in cluster["links"])
    assert pairs == sorted(itertools.combinations(names, 2))
    for l in cluster["links"]:
        assert l.get("duplex", "full") == "full"
        assert l["bandwidth_bytes_per_s"] == link["bandwidth_bytes_per_s"] and l["latency_s"] == link["latency_s"]
    # and every verb reads it as a cluster: Python's reader too
    assert placelab.read_cluster(str(path)).device_names == names


@needs_cli
def test_profile_drives_the_simulator(tmp_path, calibration):
    """replay.md: 'So every verb uses a calibration with no new option: placelab
    simulate|place|compare|replay --cluster PROFILE'; the model is t = max(F / (P e_gemm(F)), B / (W
    e_elementwise(B))) + L per op, the efficiencies read off the curves in log(size) (the contended ones
    when another device of the host is busy as the op starts: running an op, copying, or starting one), and
    latency + B / (bandwidth e_copy(B)) per copy (the loaded curve for a copy into a device running an op),
    so the replay's prediction on the profile follows it."""
    doc, _, _, path = calibration
    r, link = doc["roofline"], doc["link"]
    profile = json.loads(path.read_text())
    copies, loaded = profile["links"][0]["efficiency_curve"], profile["links"][0]["loaded_efficiency_curve"]

    def efficiency(size, c):
        return np.interp(np.log(size), np.log(c["size"]), c["efficiency"]) if size > 0 else 1.0

    plan, res = export(tmp_path, FORK, FORK_PLACEMENT, path)
    assert plan["cluster"] == json.loads(path.read_text())["name"]
    busy = [(pop["device"], pop["start_s"], pop["end_s"]) for pop in plan["ops"]] + \
           [(t["src"], t["start_s"], t["end_s"]) for t in plan["transfers"]]  # a device copies its own outputs
    for gop, pop in zip(FORK["ops"], plan["ops"]):
        contended = any(d != pop["device"] and (s <= pop["start_s"] < e or s == pop["start_s"]) for d, s, e in busy)
        curves = profile["devices"][pop["device"]]["contended_efficiency_curves" if contended else "efficiency_curves"]
        flops, nbytes = gop.get("flops", 0), op_bytes(gop)
        want = max(flops / (r["flops_per_s"] * efficiency(flops, curves["gemm"])),
                   nbytes / (r["bandwidth_bytes_per_s"] * efficiency(nbytes, curves["elementwise"]))) + r["launch_s"]
        assert pop["end_s"] - pop["start_s"] == pytest.approx(want, rel=1e-9), gop["name"]
    ops = [(pop["device"], pop["start_s"], pop["end_s"]) for pop in plan["ops"]]
    for t in plan["transfers"]:  # into a device running an op: the loaded curve
        into_busy = any(d == t["dst"] and s < t["start_s"] < e for d, s, e in ops)
        want = link["latency_s"] + t["bytes"] / (link["bandwidth_bytes_per_s"] *
                                                 efficiency(t["bytes"], loaded if into_busy else copies))
        assert t["end_s"] - t["start_s"] == pytest.approx(want, rel=1e-9)
    sim = simulator_for(FORK, path)
    assert res["predicted_step_s"] == sim.simulate(np.array(FORK_PLACEMENT, dtype=np.int32))["step_time_s"]


# ---------------------------------------------------------------- autodiff fixtures

GOLDEN = ROOT / "tests" / "golden" / "autodiff"
FIXTURES = ["linear", "layer_norm", "graphsage_mean", "graphsage_max_pool", "attention", "lstm"]


def test_fixtures_are_byte_identical_on_rerun(tmp_path):
    """autodiff.md: fixtures 'written by tests/python/gen_autodiff_fixtures.py (fixed seeds,
    byte-identical on rerun)' with one BLAS, and within float rounding of the committed ones whatever BLAS
    torch runs (the committed files came from another). The generator runs into temporary folders, as its
    __main__ does."""
    torch = pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("gen_autodiff_fixtures", ROOT / "tests/python/gen_autodiff_fixtures.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for run in ("a", "b"):
        gen.OUT = tmp_path / run
        gen.OUT.mkdir()
        torch.manual_seed(0)
        with _quiet():
            for f in (gen.linear_fixture, gen.layer_norm_fixture, lambda: gen.sage_fixture("mean"),
                      lambda: gen.sage_fixture("max_pool"), gen.attention_fixture, gen.lstm_fixture):
                f()
    assert sorted(p.name for p in (tmp_path / "a").glob("*.json")) == sorted(f"{n}.json" for n in FIXTURES)
    for name in FIXTURES:
        fresh = (tmp_path / "a" / f"{name}.json").read_bytes()
        assert fresh == (tmp_path / "b" / f"{name}.json").read_bytes(), name
        _assert_close(json.loads(fresh), json.loads((GOLDEN / f"{name}.json").read_bytes()), name)


def _assert_close(fresh, golden, where):
    if isinstance(golden, dict):
        assert sorted(fresh) == sorted(golden), where
        for key in golden:
            _assert_close(fresh[key], golden[key], f"{where}.{key}")
    elif isinstance(golden, list) and any(isinstance(v, (list, dict)) for v in golden):  # ragged: neighbour lists
        assert len(fresh) == len(golden), where
        for i, (a, b) in enumerate(zip(fresh, golden)):
            _assert_close(a, b, f"{where}[{i}]")
    elif isinstance(golden, list):
        np.testing.assert_allclose(np.asarray(fresh, dtype=np.float64), np.asarray(golden, dtype=np.float64),
                                   rtol=1e-4, atol=1e-6, err_msg=where)
    else:
        assert fresh == golden, where


class _quiet:
    """torch 1.13 warns that scatter_reduce is a beta API; pytest.ini turns warnings into errors."""

    def __enter__(self):
        import warnings
        self._w = warnings.catch_warnings()
        self._w.__enter__()
        warnings.filterwarnings("ignore", message="scatter_reduce")

    def __exit__(self, *exc):
        return self._w.__exit__(*exc)


def load(name):
    return json.loads((GOLDEN / f"{name}.json").read_text())


def t64(torch, m, grad=True):
    return torch.tensor(m, dtype=torch.float64, requires_grad=grad)


def vec(torch, m):
    return t64(torch, m)  # a [1, n] row: broadcasts over rows as a bias


def check_against_torch(torch, doc, leaves, output):
    """The fixture's output, and grads of loss = sum(output * projection) for every parameter and input,
    equal a float64 recomputation from the fixture's own numbers within float tolerance."""
    np.testing.assert_allclose(output.detach().numpy(), np.array(doc["output"]), rtol=1e-4, atol=1e-5)
    (output * torch.tensor(doc["projection"], dtype=torch.float64)).sum().backward()
    assert set(leaves) == set(doc["grads"])
    for k, leaf in leaves.items():
        np.testing.assert_allclose(leaf.grad.numpy(), np.array(doc["grads"][k]), rtol=1e-4, atol=1e-5, err_msg=k)


def test_linear_fixture_matches_torch():
    """autodiff.md: outputs and gradients equal PyTorch's for Linear (placelab layout: weight input-major,
    y = x W + b)."""
    torch = pytest.importorskip("torch")
    d = load("linear")
    w, b, x = t64(torch, d["params"]["weight"]), vec(torch, d["params"]["bias"]), t64(torch, d["inputs"]["x"])
    y = torch.nn.functional.linear(x, w.t(), b[0])
    check_against_torch(torch, d, {"weight": w, "bias": b, "x": x}, y)


def test_layer_norm_fixture_matches_torch():
    """autodiff.md: outputs and gradients equal PyTorch's for LayerNorm (over each row)."""
    torch = pytest.importorskip("torch")
    d = load("layer_norm")
    w, b, x = vec(torch, d["params"]["weight"]), vec(torch, d["params"]["bias"]), t64(torch, d["inputs"]["x"])
    y = torch.nn.functional.layer_norm(x, (x.shape[1],), w[0], b[0], eps=1e-5)
    check_against_torch(torch, d, {"weight": w, "bias": b, "x": x}, y)


@pytest.mark.parametrize("aggregator", ["mean", "max_pool"])
def test_graphsage_fixture_matches_sageconv(aggregator):
    """autodiff.md: 'GraphSage (mean and max-pool aggregators, as PyTorch Geometric's SAGEConv)': the
    neighbour aggregate through `neigh` (with bias) plus the node itself through `self` (no bias, as
    SAGEConv's lin_r); max-pool takes the max of relu(pool(x_j)); a node without neighbours gets 0."""
    torch = pytest.importorskip("torch")
    d = load(f"graphsage_{aggregator}")
    P = {k: t64(torch, v) for k, v in d["params"].items()}
    x = t64(torch, d["inputs"]["x"])
    rows = []
    for v, nb in enumerate(d["neighbors"]):
        if not nb:
            rows.append(torch.zeros(x.shape[1], dtype=torch.float64))
        elif aggregator == "mean":
            rows.append(x[nb].mean(0))
        else:
            rows.append(torch.relu(x[nb] @ P["pool.weight"] + P["pool.bias"]).max(0).values)
    agg = torch.stack(rows)
    y = agg @ P["neigh.weight"] + P["neigh.bias"] + x @ P["self.weight"]
    check_against_torch(torch, d, {**P, "x": x}, y)


def test_attention_fixture_matches_torch():
    """autodiff.md: 'multi-head attention with memory and mask' equals PyTorch; 'a mask entry of true
    keeps'. Keys and values are the memory rows then the segment's rows; scaled dot product per head."""
    torch = pytest.importorskip("torch")
    d = load("attention")
    P = {k: t64(torch, v) for k, v in d["params"].items()}
    x = t64(torch, d["inputs"]["x"])
    mem = torch.tensor(d["memory"], dtype=torch.float64)
    keep = torch.tensor(d["mask"], dtype=torch.bool)
    heads = d["heads"]
    kv = torch.cat([mem, x], 0)
    q = x @ P["query.weight"] + P["query.bias"]
    k = kv @ P["key.weight"] + P["key.bias"]
    v = kv @ P["value.weight"] + P["value.bias"]
    dh = q.shape[1] // heads
    outs = []
    for h in range(heads):
        sl = slice(h * dh, (h + 1) * dh)
        s = (q[:, sl] @ k[:, sl].t()) / dh ** 0.5
        s = s.masked_fill(~keep, float("-inf"))
        outs.append(torch.softmax(s, 1) @ v[:, sl])
    y = torch.cat(outs, 1) @ P["output.weight"] + P["output.bias"]
    check_against_torch(torch, d, {**P, "x": x}, y)


def test_lstm_fixture_matches_torch_gate_order():
    """autodiff.md: 'LstmCell (PyTorch's gate order)' and 'an unrolled LSTM cell' equal PyTorch: gates
    i, f, g, o from x W_in + b_in + h W_rec + b_rec; the output is every step's h, then the last c."""
    torch = pytest.importorskip("torch")
    d = load("lstm")
    P = {k: t64(torch, v) for k, v in d["params"].items()}
    X = {k: t64(torch, v) for k, v in d["inputs"].items()}
    h, c = X["h0"], X["c0"]
    outs = []
    for s in range(d["steps"]):
        z = X[f"x{s}"] @ P["input.weight"] + P["input.bias"] + h @ P["recurrent.weight"] + P["recurrent.bias"]
        i, f, g, o = z.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    y = torch.cat(outs + [c], 0)
    check_against_torch(torch, d, {**P, **X}, y)


# ---------------------------------------------------------------- parameter files


@pytest.fixture(scope="module")
def gdp_checkpoint(tmp_path_factory):
    """A GDP learner saved after 0 steps: its parameters are a placelab.params document."""
    ck = tmp_path_factory.mktemp("gdp") / "run"
    g = placelab.graph_from_dict(FORK)
    c = placelab.make_preset("v100-nvlink-2")
    placelab.train("gdp", [(g, c)], steps=0, seed=0, checkpoint=str(ck))
    return ck, placelab.Simulator(g, c)


def place_with_params(tmp_path, gdp_checkpoint, mutate):
    import shutil
    ck, sim = gdp_checkpoint
    doc = json.loads((ck / "checkpoint.json").read_text())
    mutate(doc["learner"]["params"])
    dst = tmp_path / "run"
    dst.mkdir()
    (dst / "checkpoint.json").write_text(json.dumps(doc))
    shutil.copy(ck / "log.jsonl", dst / "log.jsonl")
    return placelab.place(sim, "gdp", {"checkpoint": str(dst), "steps": 0})


def test_params_document_header(gdp_checkpoint):
    """autodiff.md: 'Parameters save to and load from a placelab.params JSON file (version 1 ...)' with
    dotted names from collect()."""
    doc = json.loads((gdp_checkpoint[0] / "checkpoint.json").read_text())["learner"]["params"]
    assert (doc["format"], doc["version"]) == ("placelab.params", 1)
    names = [p["name"] for p in doc["params"]]
    assert len(names) == len(set(names)) and all(re.fullmatch(r"[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)+", n) for n in names)


@pytest.mark.parametrize("case", ["missing", "unknown", "duplicate", "shape"])
def test_params_loading_errors_name_the_parameter(tmp_path, gdp_checkpoint, case):
    """autodiff.md: 'a missing, unknown or duplicate name, or a wrong shape, is an error naming the
    parameter and both shapes'; python.md: bad input raises ValueError with the core's message."""
    first = {}

    def mutate(doc):
        ps = doc["params"]
        first.update(name=ps[0]["name"], shape=list(ps[0]["shape"]), second=ps[1]["name"])
        if case == "missing":
            ps.pop(1)
        elif case == "unknown":
            ps[1]["name"] = "no.such.parameter"
        elif case == "duplicate":
            ps.append(json.loads(json.dumps(ps[0])))
        else:
            ps[0]["shape"] = list(reversed(ps[0]["shape"]))
    with pytest.raises(ValueError) as err:
        place_with_params(tmp_path, gdp_checkpoint, mutate)
    msg = str(err.value)
    want = {"missing": first["second"], "unknown": "no.such.parameter", "duplicate": first["name"],
            "shape": first["name"]}[case]
    assert want in msg, msg
    if case == "shape":
        r, c = first["shape"]
        assert len(re.findall(rf"\b{r}\D+{c}\b", msg)) >= 1 and len(re.findall(rf"\b{c}\D+{r}\b", msg)) >= 1, msg
