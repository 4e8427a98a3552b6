"""The `placelab cluster` and `placelab simulate` verbs: presets, files, placements, traces, bad input."""
import json

from cli_runner import placelab


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
