"""The README's promise, "Deterministic. A seed fixes every random choice; the same inputs give the same
results", checked across thread counts and repeated runs, written from docs/cli.md, docs/placers.md,
docs/learned.md, docs/formats.md and docs/python.md alone.

Every command runs twice unrestricted (oneTBB uses every CPU of the affinity mask) and, where `taskset`
exists and more than one CPU is available, twice under `taskset -c <one cpu>` (oneTBB then uses one
thread); the outputs must match byte for byte once the fields the docs call wall-clock times are removed
(`wall_s`, `sim_ms_median`, `ops_per_s`, `placement_time_s`, learned placers' `info.train_wall_s`).
Covered: `simulate --random`, `place` with every placer of `compare --list` (slow ones with small
budgets; `milp` is documented as limited by CBC's seconds, so it is compared only when every run ends
`optimal`, i.e. before its limit), `compare --seed 0`, `train` with each learned policy (summary,
checkpoint.json, log.jsonl) and a resumed run against a straight one, and through Python
(`simulate_batch` against one-by-one `simulate`, `pl.place`, `pl.train`, in child processes).
Runs every command in its own folder with relative output paths, so paths in outputs agree too.
A failure here is a real nondeterminism: do not weaken or xfail it.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from cli_runner import BIN

pytestmark = pytest.mark.skipif(not os.environ.get("PLACELAB_BIN"), reason="PLACELAB_BIN is not set")

# Fields that docs/cli.md, docs/learned.md, docs/formats.md and docs/placers.md describe as wall-clock times.
TIMING_KEYS = {"wall_s", "sim_ms_median", "ops_per_s", "placement_time_s", "train_wall_s"}

AFFINITY = sorted(os.sched_getaffinity(0))
CAN_PIN = shutil.which("taskset") is not None and len(AFFINITY) >= 2
ONE_CPU = ["taskset", "-c", str(AFFINITY[0])] if AFFINITY else []
MODES = ["repeated", "threads"]
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
PYTHON_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python")

# Small inputs: a 30-op DAG narrow enough for `dp` (6,776 ideals), and a small zoo training graph.
DAG = "random_dag:ops=30,width=4"
ZOO = "gnmt:layers=2,steps=4,training=1"
CLUSTER = "v100-nvlink-4"
# Per placer, the options that keep it small; none of these is a wall-clock budget.
PLACER_OPTIONS = {
    "annealing": {"steps": 300},                  # "seconds" left at 0: bounded by steps only
    "exact": {"time_limit_s": 0, "max_nodes": 2000},  # a node limit, not a time limit
    "local_search": {"restarts": 4},
    "m_sct": {"lp_iterations": 50000},            # an iteration limit, not a time limit
    "gdp": {"steps": 3, "pretrained": False, "warm_steps": 1},   # from scratch: imitation, then PPO
    "placeto": {"steps": 2},
    "hdp": {"steps": 3},
    "hsdag": {"steps": 3},
}
TIME_LIMITED = {"milp"}   # CBC's time_limit_s (seconds): compared only when every run ends "optimal"
NOT_ON_ZOO = {"dp", "pipedream", "milp", "exact"}   # too many ideals / variables / units on the zoo graph
GRAPH_FOR = {"milp": "random_dag:ops=16,width=4",   # CBC: a smaller DAG keeps it well inside its limit
             "exact": "random_dag:ops=12,width=4"}  # branch and bound: a few thousand nodes
LEARNED = ["gdp", "placeto", "hdp", "hsdag"]
TRAIN_GRAPHS = "random_dag:ops=30,width=4,seed=2,random_dag:ops=24,width=3,seed=5"
# gdp imitates a classical placer for its first warm_steps (default 20): keep 2, so PPO runs too.
TRAIN_OPTIONS = {"gdp": {"warm_steps": 2}}


def strip_timings(value):
    """The value with every wall-clock field removed, at any depth."""
    if isinstance(value, dict):
        return {k: strip_timings(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [strip_timings(v) for v in value]
    return value


def canonical_json(text):
    """One JSON document without its timing fields, re-serialised (key order kept; floats by repr round-trip)."""
    return json.dumps(strip_timings(json.loads(text)))


def canonical_jsonl(text):
    return "\n".join(canonical_json(line) for line in text.splitlines())


def run_cli(args, cwd, pin):
    """Runs `placelab ARGS` in cwd, under taskset on one CPU when pin; a failure fails the test."""
    cwd.mkdir(parents=True, exist_ok=False)
    cmd = (ONE_CPU if pin else []) + [os.path.abspath(BIN), *args]
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def runs_for(mode):
    """The (label, pin) runs of a mode: repeated = twice unrestricted; threads = once unrestricted, twice pinned."""
    if mode == "threads":
        if not CAN_PIN:
            pytest.skip("taskset is missing or only one CPU is available")
        return [("all-cpus", False), ("one-cpu", True), ("one-cpu-again", True)]
    return [("all-cpus", False), ("all-cpus-again", False)]


def first_difference(a, b):
    """Where two texts first differ, with some context, for the failure message."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return f"at character {i}: ...{a[max(0, i - 120):i + 120]}... vs ...{b[max(0, i - 120):i + 120]}..."
    return f"lengths {len(a)} vs {len(b)}"


def assert_same(outputs, what):
    """outputs: {label: {name: text}}; every label's texts must equal the first label's."""
    labels = list(outputs)
    base = outputs[labels[0]]
    for label in labels[1:]:
        for name, text in outputs[label].items():
            assert text == base[name], (f"{what}: {name} differs between {labels[0]} and {label}, "
                                        f"{first_difference(base[name], text)}")


def compare_cli(tmp_path, mode, args, files=(), what=None):
    """Runs `placelab ARGS` per run of the mode; compares stdout (JSON, timings removed) and the files
    written (relative paths; .json/.jsonl without timings, others raw)."""
    outputs = {}
    for label, pin in runs_for(mode):
        cwd = tmp_path / label
        proc = run_cli(args, cwd, pin)
        out = {"stdout": canonical_json(proc.stdout)}
        for name in files:
            text = (cwd / name).read_text()
            if name.endswith(".jsonl"):
                text = canonical_jsonl(text)
            elif name.endswith(".json"):
                text = canonical_json(text)
            out[name] = text
        outputs[label] = out
    assert_same(outputs, what or "placelab " + " ".join(args))
    return outputs


# ---------------------------------------------------------------------------------------------------
# placelab simulate --random N --seed S --json

@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("graph", [DAG, "inception_v3:training=1"])
def test_simulate_random(tmp_path, mode, graph):
    compare_cli(tmp_path, mode, ["simulate", "--graph", graph, "--cluster", CLUSTER, "--random", "300",
                                 "--seed", "7", "--json"])


@pytest.mark.parametrize("mode", MODES)
def test_simulate_random_with_modes_and_trace(tmp_path, mode):
    compare_cli(tmp_path, mode, ["simulate", "--graph", ZOO, "--cluster", "v100-pcie-4", "--random", "100",
                                 "--seed", "3", "--priority", "rank", "--share-bandwidth", "--trace", "t.json",
                                 "--json"], files=["t.json"])


# ---------------------------------------------------------------------------------------------------
# placelab place with every placer

def all_placers():
    proc = subprocess.run([BIN, "compare", "--list", "--json"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0:
        return []
    return [p["name"] for p in json.loads(proc.stdout)["placers"]]


PLACERS = all_placers() if os.environ.get("PLACELAB_BIN") else []


def test_every_listed_placer_is_covered():
    assert PLACERS, "compare --list --json gave no placers"
    known = set(PLACER_OPTIONS) | TIME_LIMITED | {"single_device", "round_robin", "random", "human_expert", "metis",
                                                  "scotch", "heft", "m_topo", "m_etf", "dp", "pipedream"}
    assert set(PLACERS) <= known, f"new placers without a budget here: {set(PLACERS) - known}"


def place_cases():
    cases = []
    for name in PLACERS:
        cases.append((name, GRAPH_FOR.get(name, DAG)))
        if name not in NOT_ON_ZOO:
            cases.append((name, ZOO))
    return cases


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("placer,graph", place_cases())
def test_place(tmp_path, mode, placer, graph):
    args = ["place", "--graph", graph, "--cluster", CLUSTER, "--placer", placer, "--seed", "5",
            "--out", "p.json", "--json"]
    if placer in PLACER_OPTIONS:
        args += ["--options", json.dumps(PLACER_OPTIONS[placer])]
    if placer in TIME_LIMITED:
        outputs = {}
        for label, pin in runs_for(mode):
            proc = run_cli(args, tmp_path / label, pin)
            doc = json.loads(proc.stdout)
            if doc["info"].get("status") != "optimal":
                pytest.skip(f"{placer} stopped by its time limit ({doc['info'].get('status')}): not comparable")
            outputs[label] = {"stdout": canonical_json(proc.stdout),
                              "p.json": (tmp_path / label / "p.json").read_text()}
        assert_same(outputs, " ".join(args))
        return
    compare_cli(tmp_path, mode, args, files=["p.json"])


@pytest.mark.parametrize("mode", MODES)
def test_place_default_pretrained_gdp(tmp_path, mode):
    compare_cli(tmp_path, mode, ["place", "--json"])


# ---------------------------------------------------------------------------------------------------
# placelab compare

@pytest.mark.parametrize("mode", MODES)
def test_compare_default(tmp_path, mode):
    compare_cli(tmp_path, mode, ["compare", "--seed", "0", "--json"])


@pytest.mark.parametrize("mode", MODES)
def test_compare_slow_placers(tmp_path, mode):
    compare_cli(tmp_path, mode, ["compare", "--graph", DAG, "--cluster", CLUSTER, "--seed", "0", "--json",
                                 "--placers", "annealing,local_search,dp,pipedream,hsdag,hdp"])


# ---------------------------------------------------------------------------------------------------
# placelab train

TRAIN_FILES = ["run/checkpoint.json", "run/log.jsonl"]


def train_args(policy, steps, *extra):
    return ["train", "--graphs", TRAIN_GRAPHS, "--cluster", CLUSTER, "--policy", policy, "--steps", str(steps),
            "--seed", "4", "--checkpoint", "run", "--options", json.dumps(TRAIN_OPTIONS.get(policy, {})), "--json",
            *extra]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", LEARNED)
def test_train(tmp_path, mode, policy):
    compare_cli(tmp_path, mode, train_args(policy, 6, "--checkpoint-every", "2"), files=TRAIN_FILES)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", LEARNED)
def test_train_resumed_equals_straight(tmp_path, mode, policy):
    """Train 4 steps then resume to 8, against a straight 8-step run: checkpoint.json, log.jsonl and the
    summary (timings removed). Mode threads adds pinned runs and a run whose halves differ in CPUs."""
    plans = {"repeated": [("all-cpus", False, False), ("all-cpus-again", False, False)],
             "threads": [("all-cpus", False, False), ("one-cpu", True, True), ("one-then-all", True, False),
                         ("all-then-one", False, True)]}[mode]
    if mode == "threads" and not CAN_PIN:
        pytest.skip("taskset is missing or only one CPU is available")
    outputs = {}
    for label, pin_first, pin_second in plans:
        straight, resumed = tmp_path / label / "straight", tmp_path / label / "resumed"
        summary = run_cli(train_args(policy, 8), straight, pin_first).stdout
        run_cli(train_args(policy, 4), resumed, pin_first)
        proc = subprocess.run((ONE_CPU if pin_second else []) + [
            os.path.abspath(BIN), "train", "--graphs", TRAIN_GRAPHS, "--cluster", CLUSTER, "--steps", "8",
            "--checkpoint", "run", "--resume", "--json"], cwd=resumed, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        for name, where, out in (("straight", straight, summary), ("resumed", resumed, proc.stdout)):
            texts = {f: (canonical_jsonl if f.endswith("l") else canonical_json)((where / f).read_text())
                     for f in TRAIN_FILES}
            texts["summary"] = canonical_json(out)
            outputs[f"{label}/{name}"] = texts
    assert_same(outputs, f"train {policy}: 4 steps + resume to 8 vs straight 8")


# ---------------------------------------------------------------------------------------------------
# Python: simulate_batch, pl.place, pl.train

def python_child(code, cwd, pin):
    """Runs code in a child /usr/bin/python3 (pinned to one CPU when pin); returns its stdout."""
    cwd.mkdir(parents=True, exist_ok=False)
    env = dict(os.environ, PYTHONPATH=os.path.abspath(PYTHON_DIR))
    cmd = (ONE_CPU if pin else []) + [PYTHON, "-c", code]
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"python child failed ({proc.returncode}): {proc.stderr[-3000:]}"
    return proc.stdout


PY_PRELUDE = f"""
import json, numpy as np, placelab as pl
TIMING = {sorted(TIMING_KEYS)!r}
def plain(v):
    if isinstance(v, dict):
        return {{k: plain(x) for k, x in v.items() if k not in TIMING}}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return v.tolist()
    if isinstance(v, np.generic):
        return v.item()
    return v
"""


def compare_python(tmp_path, mode, code, what):
    outputs = {}
    for label, pin in runs_for(mode):
        outputs[label] = {"stdout": python_child(PY_PRELUDE + code, tmp_path / label, pin)}
    assert_same(outputs, what)


def test_python_simulate_batch_equals_one_by_one():
    sys.path.insert(0, os.path.abspath(PYTHON_DIR))
    import numpy as np
    import placelab as pl
    for spec, params in (("random_dag", {"ops": 30, "width": 4}), ("gnmt", {"layers": 2, "steps": 4})):
        g = pl.make_model(spec, params)
        sim = pl.Simulator(g, pl.make_preset("v100-pcie-4"), {"share_bandwidth": True})
        placements = sim.random_placements(200, seed=11)
        batch = sim.simulate_batch(placements)
        again = sim.simulate_batch(placements)
        for i, p in enumerate(placements):
            one = sim.simulate(p)
            for key, column in batch.items():
                assert np.array_equal(np.asarray(one[key]), column[i]), f"{spec}: {key} of placement {i}"
                assert np.array_equal(again[key][i], column[i]), f"{spec}: {key} of placement {i}, batch twice"


@pytest.mark.parametrize("mode", MODES)
def test_python_simulate_batch(tmp_path, mode):
    compare_python(tmp_path, mode, """
g = pl.make_model("inception_v3", {"batch": 8})
sim = pl.Simulator(pl.expand_training(g), pl.make_preset("v100-nvlink-4"), {"priority": "rank"})
print(json.dumps(plain(sim.simulate_batch(sim.random_placements(300, seed=2)))))
""", "sim.simulate_batch")


@pytest.mark.parametrize("mode", MODES)
def test_python_place(tmp_path, mode):
    compare_python(tmp_path, mode, f"""
sim = pl.Simulator(pl.make_model("random_dag", {{"ops": 30, "width": 4}}), pl.make_preset("{CLUSTER}"))
options = {json.dumps(PLACER_OPTIONS)!r}
options = json.loads(options)
out = {{}}
for name, _ in pl.placers():
    if name in {sorted(TIME_LIMITED)!r}:
        continue
    p, info = pl.place(sim, name, options=options.get(name, {{}}), seed=3)
    out[name] = [plain(p), plain(info)]
print(json.dumps(out))
""", "pl.place with every placer")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("policy", LEARNED)
def test_python_train(tmp_path, mode, policy):
    compare_python(tmp_path, mode, f"""
c = pl.make_preset("{CLUSTER}")
tasks = [("a", pl.make_model("random_dag", {{"ops": 30, "width": 4, "seed": 2}}), c),
         ("b", pl.make_model("random_dag", {{"ops": 24, "width": 3, "seed": 5}}), c)]
history = []
summary = pl.train("{policy}", tasks, steps=6, seed=6, checkpoint="run", checkpoint_every=2,
                   on_step=history.append, options={json.dumps(TRAIN_OPTIONS.get(policy, {}))})
ck = json.load(open("run/checkpoint.json"))
log = [json.loads(line) for line in open("run/log.jsonl")]
# The same run in two halves (3 steps, then resumed to 6) must end in the same state and log.
pl.train("{policy}", tasks, steps=3, seed=6, checkpoint="half", options={json.dumps(TRAIN_OPTIONS.get(policy, {}))})
halves = pl.train("{policy}", tasks, steps=6, checkpoint="half", resume=True)
assert plain(halves) == plain(summary), (plain(halves), plain(summary))
assert plain(json.load(open("half/checkpoint.json"))) == plain(ck), "resumed checkpoint differs"
assert plain([json.loads(line) for line in open("half/log.jsonl")]) == plain(log), "resumed log differs"
print(json.dumps([plain(summary), plain(history), plain(ck), plain(log)]))
""", f"pl.train {policy}")


@pytest.mark.parametrize("policy", LEARNED)
@pytest.mark.parametrize("second", [{"ops": 30, "width": 4, "seed": 9}, {"ops": 24, "width": 3, "seed": 5}],
                         ids=["same-size", "other-size"])
def test_python_train_results_do_not_depend_on_task_names(tmp_path, policy, second):
    """The same graphs, cluster and seed give the same run whether the tasks are named or not: two zoo
    graphs of one model are both called "random_dag on v100-nvlink-4" when unnamed (docs/python.md:
    tasks are (graph, cluster) or (name, graph, cluster))."""
    out = python_child(PY_PRELUDE + f"""
c = pl.make_preset("{CLUSTER}")
a = pl.make_model("random_dag", {{"ops": 30, "width": 4, "seed": 2}})
b = pl.make_model("random_dag", {json.dumps(second)})
runs = []
for tasks in ([(a, c), (b, c)], [("first", a, c), ("second", b, c)]):
    try:
        s = pl.train("{policy}", tasks, steps=4, seed=6)
        runs.append(plain({{k: v for k, v in s.items() if k != "tasks"}}))
    except ValueError as e:
        runs.append("error: " + str(e))
print(json.dumps(runs))
""", tmp_path / "child", False)
    unnamed, named = json.loads(out)
    assert unnamed == named, f"pl.train {policy}: unnamed tasks gave {unnamed}, named tasks gave {named}"
