"""The `placelab cluster` and `placelab simulate` verbs: presets, files, placements, traces, bad input."""
import json
import os
import subprocess
from pathlib import Path

import pytest

from cli_runner import BIN, placelab


def test_cluster_preset_round_trips_through_a_file(tmp_path):
    out = tmp_path / "c.json"
    placelab("cluster", "--preset", "v100-nvlink-4", "--out", str(out))
    doc = json.loads(placelab("cluster", "--file", str(out), "--json").stdout)
    assert doc["format"] == "placelab.cluster" and len(doc["devices"]) == 4
    assert json.loads(placelab("cluster", "--preset", "v100-nvlink-4", "--json").stdout) == doc
    assert "v100-nvlink-N" in placelab("cluster", "--list").stdout


def test_cluster_errors_name_the_fix(tmp_path):
    bad = placelab("cluster", "--preset", "v100-3", check=False)
    assert bad.returncode == 1 and "presets:" in bad.stderr
    path = tmp_path / "bad.json"
    path.write_text('{"format": "placelab.cluster", "version": 1, "devices": [{"name": "g", "kind": "x", '
                    '"peak_flops_per_s": 1, "memory_bandwidth_bytes_per_s": 1, "memory_bytes": -1}]}')
    bad = placelab("cluster", "--file", str(path), check=False)
    assert bad.returncode == 1 and "devices[0].memory_bytes" in bad.stderr


def write_graph(tmp_path):
    graph = {"format": "placelab.graph", "version": 1, "name": "fork",
             "ops": [{"name": "a", "type": "MatMul", "flops": 1e9, "output_bytes": 1e6},
                     {"name": "b", "type": "MatMul", "flops": 2e9},
                     {"name": "c", "type": "MatMul", "flops": 3e9}],
             "edges": [{"src": "a", "dst": "b", "bytes": 1e6}, {"src": "a", "dst": "c", "bytes": 1e6}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    return path


def test_simulate_a_placement_with_a_trace(tmp_path):
    graph = write_graph(tmp_path)
    placement = tmp_path / "p.json"
    placement.write_text(json.dumps({"format": "placelab.placement", "version": 1, "graph": "fork",
                                     "cluster": "v100-nvlink-2", "device_of": [0, 0, 1]}))
    trace = tmp_path / "t.json"
    doc = json.loads(placelab("simulate", "--graph", str(graph), "--cluster", "v100-nvlink-2",
                              "--placement", str(placement), "--trace", str(trace), "--json").stdout)
    assert doc["num_transfers"] == 1 and doc["total_bytes_moved"] == 1e6
    assert doc["step_time_s"] >= doc["critical_path_s"] > 0
    events = json.loads(trace.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 4
    assert "step time" in placelab("simulate", "--graph", str(graph), "--cluster", "v100-nvlink-2",
                                   "--placement", str(placement)).stdout
    placement.write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": [0, 0, 5]}))
    bad = placelab("simulate", "--graph", str(graph), "--cluster", "v100-nvlink-2", "--placement", str(placement),
                   check=False)
    assert bad.returncode == 1 and f"{placement}: placement: op \"c\" is on device 5" in bad.stderr
    bad = placelab("simulate", "--graph", str(graph), "--cluster", "v100-nvlink-2", "--random", "1", "--seed", "-1",
                   check=False)
    assert bad.returncode != 0 and "is not an integer from 0 to" in bad.stderr


def test_simulate_random_placements_reports_speed(tmp_path):
    graph = write_graph(tmp_path)
    args = ("simulate", "--graph", str(graph), "--cluster", "h100-4", "--random", "5", "--seed", "7", "--json")
    doc = json.loads(placelab(*args).stdout)
    assert doc["placements"] == 5 and doc["sim_ms_median"] > 0 and doc["ops_per_s"] > 0
    again = json.loads(placelab(*args).stdout)
    assert again["step_time_s_median"] == doc["step_time_s_median"]  # seeded
    bad = placelab(*args[:6], "0", check=False)
    assert bad.returncode == 1 and "--random is 0, must be > 0" in bad.stderr


MSR = Path(os.environ.get("PLACELAB_SHARED_DATA", Path(__file__).parents[2] / ".." / "shared" / "data")) \
    / "msr-dnn-partitioning"


@pytest.mark.skipif(not MSR.exists(), reason=f"msr-dnn-partitioning data not found at {MSR}")
def test_msr_instance_is_graph_and_cluster_and_gives_the_expert_max_load(tmp_path):
    instance = str(MSR / "throughput-inputs" / "LayerGraphs" / "resnet50_inference.json")
    split = str(MSR / "human-experts" / "resnet50_inference_expert.json")
    stats = json.loads(placelab("graph", "--file", instance, "--json").stdout)
    cluster = json.loads(placelab("cluster", "--file", instance, "--json").stdout)
    assert stats["name"] == "resnet50_inference" and stats["ops"] > 0
    assert cluster["name"] == "msr-6acc-1cpu" and len(cluster["devices"]) == 7
    placement = tmp_path / "p.json"
    placelab("place", "--graph", instance, "--cluster", instance, "--placer", "human_expert",
             "--options", json.dumps({"split_file": split}), "--out", str(placement))
    common = ("simulate", "--graph", instance, "--cluster", instance, "--placement", str(placement))
    load = json.loads(placelab(*common, "--max-load", "--json").stdout)
    assert load["max_load_s"] * 1e3 == pytest.approx(43.9183, rel=1e-4)  # the README's expert value
    assert load["contiguous"] and load["fits"] and load["bottleneck_device"] == "acc1"
    assert "max load" in placelab(*common, "--max-load").stdout
    stream = json.loads(placelab(*common, "--micro-batches", "8", "--json").stdout)
    # Stages pipeline: the period is the busiest stage's compute, not the whole step.
    assert stream["time_per_batch_s"] < 0.5 * stream["single_s"]
    assert stream["time_per_batch_s"] == pytest.approx(load["devices"][1]["compute_s"], rel=1e-6)
    assert not stream["last"]["oom"]  # parameters are held once, not per micro-batch
    for extra, message in ((("--max-load", "--micro-batches", "2"), "give one of --max-load"),
                           (("--max-load", "--trace", str(tmp_path / "t.json")), "--trace records one step"),
                           (("--micro-batches", "2", "--priority", "rank"), "leave out --priority"),
                           (("--max-load", "--priority", "rank"), "leave out --priority and --share-bandwidth"),
                           (("--max-load", "--share-bandwidth"), "leave out --priority and --share-bandwidth"),
                           (("--micro-batches", "30000",), "give fewer micro-batches")):
        bad = placelab(*common, *extra, check=False)
        assert bad.returncode == 1 and message in bad.stderr
    bad = placelab("simulate", "--graph", instance, "--cluster", instance, "--random", "2", "--max-load", check=False)
    assert bad.returncode == 1 and "give --placement P" in bad.stderr


def test_a_file_of_neither_format_names_both(tmp_path):
    path = tmp_path / "x.json"
    path.write_text('{"nodes": [], "edges": [], "maxFPGAs": 2}')
    bad = placelab("graph", "--file", str(path), check=False)
    assert bad.returncode == 1 and f"{path}: missing field \"maxSizePerFPGA\"" in bad.stderr  # an msr instance
    path.write_text('{"directed": true, "nodes": [], "links": []}')  # networkx node-link: not msr
    for verb in ("graph", "cluster"):
        bad = placelab(verb, "--file", str(path), check=False)
        assert bad.returncode == 1 and f"placelab.{verb}" in bad.stderr and "msr-dnn-partitioning" in bad.stderr


def test_a_folder_named_like_a_model_or_preset_leaves_them_reachable(tmp_path):
    (tmp_path / "gnmt").mkdir()  # e.g. results folders named after the runs
    (tmp_path / "v100-nvlink-2").mkdir()
    out = subprocess.run([os.path.abspath(BIN), "simulate", "--graph", "gnmt:layers=1,steps=2", "--cluster", "v100-nvlink-2", "--random",
                          "1", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    bad = subprocess.run([os.path.abspath(BIN), "graph", "--file", "gnmt/"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "directory" in bad.stderr  # a path that is a folder is still refused


@pytest.mark.skipif(not MSR.exists(), reason=f"msr-dnn-partitioning data not found at {MSR}")
def test_an_msr_machine_too_large_is_refused_naming_the_field(tmp_path):
    doc = json.loads((MSR / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json").read_text())
    doc["maxFPGAs"] = 20000
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc))
    bad = placelab("cluster", "--file", str(path), check=False)
    assert bad.returncode == 1 and f"{path}: maxFPGAs: is 20000, must be in 0..4096" in bad.stderr
