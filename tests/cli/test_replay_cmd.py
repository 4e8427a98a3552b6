"""The `placelab replay` and `placelab calibrate` verbs: plans, measurements, calibrated clusters, bad input."""
import json

from cli_runner import placelab


def write_inputs(tmp_path):
    """A tiny fork graph (a feeds b and c) placed across the two devices of the cpu-2 preset."""
    graph = {"format": "placelab.graph", "version": 1, "name": "fork",
             "ops": [{"name": "a", "type": "MatMul", "flops": 2e4, "output_bytes": 4096},
                     {"name": "b", "type": "Add", "bytes_read": 4096, "bytes_written": 4096},
                     {"name": "c", "type": "MatMul", "flops": 3e4}],
             "edges": [{"src": "a", "dst": "b", "bytes": 4096}, {"src": "a", "dst": "c", "bytes": 4096}]}
    g = tmp_path / "g.json"
    g.write_text(json.dumps(graph))
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"format": "placelab.placement", "version": 1, "device_of": [0, 0, 1]}))
    return str(g), str(p)


def test_replay_measures_a_placement_and_saves_its_plan(tmp_path):
    g, p = write_inputs(tmp_path)
    plan = tmp_path / "plan.json"
    doc = json.loads(placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--repeats", "3",
                              "--warmup", "0", "--plan-out", str(plan), "--json").stdout)
    assert doc["backend"] == "cpu" and doc["ops"] == 3 and doc["transfers"] == 1
    assert len(doc["step_times_s"]) == 3 and doc["measured_step_s"] in doc["step_times_s"]
    assert doc["measured_step_s"] > 0 and doc["predicted_step_s"] > 0
    assert doc["bytes_copied"] == 4096 and doc["flops_done"] > 0
    saved = json.loads(plan.read_text())
    assert saved["format"] == "placelab.replay" and saved["ops"][2]["after_transfers"] == [0]
    out = placelab("replay", "--plan", str(plan), "--repeats", "1", "--warmup", "0").stdout
    assert "measured step" in out and "predicted step" in out


def test_replay_errors_name_the_fix(tmp_path):
    g, p = write_inputs(tmp_path)
    bad = placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--backend", "tpu", check=False)
    assert bad.returncode == 1 and 'expected "cpu" or "cuda"' in bad.stderr
    bad = placelab("replay", "--graph", g, "--cluster", "cpu-2", check=False)
    assert bad.returncode == 1 and "--placement" in bad.stderr
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"format": "placelab.replay", "version": 1, "devices": [], "ops": [], "extra": 1}))
    bad = placelab("replay", "--plan", str(plan), check=False)
    assert bad.returncode == 1 and 'unknown field "extra"' in bad.stderr
    bad = placelab("replay", "--plan", str(plan), "--cluster", "cpu-2", check=False)  # a plan holds its cluster
    assert bad.returncode == 1 and "give either --plan F or" in bad.stderr
    # Without a GPU (or without the CUDA build) the cuda backend says why instead of crashing.
    cuda = placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--backend", "cuda",
                    "--repeats", "1", check=False)
    assert cuda.returncode == 0 or "cuda" in cuda.stderr


def test_calibrate_writes_a_cluster_every_verb_takes(tmp_path):
    out = tmp_path / "calibrated.json"
    doc = json.loads(placelab("calibrate", "--backend", "cpu", "--quick", "--repeats", "1", "--out", str(out),
                              "--json").stdout)
    assert doc["format"] == "placelab.calibration" and doc["devices"] == 2
    assert {p["what"] for p in doc["points"]} == {"launch", "compute", "memory", "copy", "shape"}
    assert doc["roofline"]["flops_per_s"] > 0 and doc["link"]["bandwidth_bytes_per_s"] > 0
    assert doc["cluster"]["devices"][0].get("gemm_element_s", [0, 0, 0]) == doc["shapes"]["gemm_element_s"]  # written when used
    cluster = json.loads(placelab("cluster", "--file", str(out), "--json").stdout)
    assert cluster == doc["cluster"] and [d["kind"] for d in cluster["devices"]] == ["cpu", "cpu"]
    g, p = write_inputs(tmp_path)
    sim = json.loads(placelab("simulate", "--graph", g, "--cluster", str(out), "--placement", p, "--json").stdout)
    assert sim["num_transfers"] == 1 and sim["step_time_s"] > 0


def test_calibrate_checks_its_outputs_before_measuring(tmp_path):
    bad = placelab("calibrate", "--backend", "cpu", "--out", str(tmp_path / "missing" / "c.json"), check=False)
    assert bad.returncode == 1 and "does not exist; create it first" in bad.stderr
    assert "calibrating" not in bad.stderr  # refused before any measurement
    bad = placelab("calibrate", "--backend", "cpu", "--out", str(tmp_path), check=False)
    assert bad.returncode == 1 and "is a directory" in bad.stderr
