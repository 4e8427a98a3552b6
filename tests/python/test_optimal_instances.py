"""bench/results/optimal_instances.json.gz (placers.md "Instances with known optima"): every stored optimal placement
still simulates to its stored optimum and fits in memory, the lower bound is below it, and the exact placer proves
the same optimum again on the quickest instances; bench/optimality.py runs in its quick mode."""

import gzip
import json
import os
import subprocess
import sys

import pytest

import placelab as pl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PATH = os.path.join(ROOT, "bench", "results", "optimal_instances.json.gz")


@pytest.fixture(scope="module")
def doc():
    with gzip.open(PATH, "rt") as f:
        return json.load(f)


def simulator(inst):
    return pl.Simulator(pl.graph_from_dict(inst["graph"]), pl.cluster_from_dict(inst["cluster"], inst["name"]))


def test_the_file_holds_at_least_100_proven_instances(doc):
    assert doc["format"] == "placelab.optimal_instances" and doc["version"] == 1
    assert len(doc["instances"]) >= 100
    assert all(inst["proven"] for inst in doc["instances"])
    assert len({inst["name"] for inst in doc["instances"]}) == len(doc["instances"])


def test_every_optimal_placement_simulates_to_its_optimum(doc):
    for inst in doc["instances"]:
        sim = simulator(inst)
        r = sim.simulate(inst["placement"])
        assert not r["oom"] and r["step_time_s"] == inst["optimum_s"], inst["name"]
        bound = pl.lower_bound(sim)
        assert bound["fits"] and bound["bound_s"] <= inst["optimum_s"] * (1 + 1e-9), inst["name"]


def test_the_exact_placer_proves_the_same_optimum_again(doc):
    quickest = sorted(doc["instances"], key=lambda inst: inst["exact"]["seconds"])[:8]
    for inst in quickest:
        _, info = pl.place(simulator(inst), "exact", {"time_limit_s": 0})
        assert info["proven"], inst["name"]
        assert abs(info["step_time_s"] - inst["optimum_s"]) <= 1e-9 * inst["optimum_s"], inst["name"]


def test_the_bench_script_quick_mode(tmp_path):
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "bench", "optimality.py"), "--quick", "--out",
                           str(tmp_path)], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=os.path.join(ROOT, "python")))
    assert proc.returncode == 0, proc.stderr[-2000:]
    text = (tmp_path / "optimality.md").read_text()
    assert "Every placer's gap to the optimum" in text and "GDP's search within 1%" in text
    with gzip.open(tmp_path / "optimal_instances.json.gz", "rt") as f:
        assert len(json.load(f)["instances"]) >= 1
