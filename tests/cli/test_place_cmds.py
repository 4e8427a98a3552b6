"""The `placelab place` and `placelab compare` verbs: defaults, JSON for scripts, placement files, bad input."""
import json

from cli_runner import placelab

GRAPH = "random_dag:ops=120,seed=3"


def test_place_without_arguments_runs_the_pretrained_gdp_beside_baselines():
    out = placelab("place").stdout
    for text in ("inception_v3_training", "v100-nvlink-4", "gdp", "step time", "peak mem", "out of memory",
                 "bytes moved", "placement time", "gpu3", "pretrained", "heft", "metis", "human_expert", "speed-up"):
        assert text in out
    doc = json.loads(placelab("place", "--json").stdout)
    assert doc["placer"] == "gdp" and doc["info"]["start"] == "pretrained" and doc["info"]["steps"] == 0
    assert [b["placer"] for b in doc["baselines"]] == ["heft", "metis", "human_expert"]
    assert all(b["step_time_s"] > 0 for b in doc["baselines"])
    named = json.loads(placelab("place", "--placer", "heft", "--json").stdout)
    assert "baselines" not in named and named["step_time_s"] == doc["baselines"][0]["step_time_s"]


def test_place_json_and_out_file_agree_with_simulate(tmp_path):
    out = tmp_path / "p.json"
    doc = json.loads(placelab("place", "--graph", GRAPH, "--cluster", "v100-pcie-4", "--placer", "m_etf",
                              "--out", str(out), "--json").stdout)
    for key in ("placer", "step_time_s", "peak_memory_bytes", "device_peak_bytes", "oom", "bytes_moved",
                "placement_time_s", "info", "simulation"):
        assert key in doc
    assert doc["placer"] == "m_etf" and doc["step_time_s"] > 0 and len(doc["device_peak_bytes"]) == 4
    placement = json.loads(out.read_text())
    assert placement["format"] == "placelab.placement" and len(placement["device_of"]) == 120
    sim = json.loads(placelab("simulate", "--graph", GRAPH, "--cluster", "v100-pcie-4", "--placement", str(out),
                              "--json").stdout)
    assert sim["step_time_s"] == doc["step_time_s"]


def test_place_options_and_seeds():
    args = ("place", "--graph", GRAPH, "--cluster", "v100-pcie-4", "--json")
    a = json.loads(placelab(*args, "--placer", "annealing", "--options", '{"steps": 40}', "--seed", "5").stdout)
    b = json.loads(placelab(*args, "--placer", "annealing", "--options", '{"steps": 40}', "--seed", "5").stdout)
    assert a["step_time_s"] == b["step_time_s"] and a["info"]["steps"] == 40
    assert a["step_time_s"] <= a["info"]["start_cost_s"]


def test_place_errors_name_the_fix():
    bad = placelab("place", "--placer", "nope", check=False)
    assert bad.returncode == 1 and "known placers:" in bad.stderr and "heft" in bad.stderr and "metis" in bad.stderr
    bad = placelab("place", "--placer", "annealing", "--options", "{steps: 3", check=False)
    assert bad.returncode == 1 and "--options is not valid JSON" in bad.stderr
    bad = placelab("place", "--placer", "annealing", "--options", '{"steps": 3, "steps": 4}', check=False)
    assert bad.returncode == 1 and '--options: steps: "steps" is given twice' in bad.stderr
    bad = placelab("place", "--placer", "annealing", "--options", "[1]", check=False)
    assert bad.returncode == 1 and "JSON object" in bad.stderr
    bad = placelab("place", "--placer", "annealing", "--options", '{"stepz": 3}', check=False)
    assert bad.returncode == 1 and "stepz" in bad.stderr and "steps" in bad.stderr
    bad = placelab("place", "--placer", "annealing", "--options", '{"steps": "many"}', check=False)
    assert bad.returncode == 1 and "steps" in bad.stderr and "integer" in bad.stderr
    bad = placelab("place", "--placer", "heft", "--options", '{"steps": 3}', check=False)
    assert bad.returncode == 1 and 'placer heft options: unknown field "steps" (none are accepted here)' in bad.stderr
    assert "scheduling" not in bad.stderr  # options are checked before any work is reported
    # An unknown option given over the embedded checkpoint is the caller's, not the checkpoint's.
    bad = placelab("place", "--graph", GRAPH, "--placer", "gdp", "--options", '{"hiden": 8}', check=False)
    assert bad.returncode == 1 and 'placer gdp options: unknown field "hiden"' in bad.stderr
    assert "pre-trained" not in bad.stderr
    known = bad.stderr.split("known fields: ", 1)[1].rstrip(")\n").split(", ")
    assert {"checkpoint", "steps", "simulations", "seconds", "curve", "reward", "pretrained", "hidden"} <= set(known)
    bad = placelab("place", "--graph", GRAPH, "--placer", "hdp", "--options", '{"lr": -1}', check=False)
    assert bad.returncode == 1 and "placer hdp options: lr must be a number >= 0" in bad.stderr


def test_compare_table_and_json():
    out = placelab("compare", "--graph", GRAPH, "--cluster", "v100-nvlink-2").stdout
    for name in ("single_device", "round_robin", "heft", "m_sct", "metis", "scotch", "human_expert"):
        assert name in out
    assert "annealing" not in out  # not a fast placer
    doc = json.loads(placelab("compare", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placers",
                              "heft,round_robin", "--json").stdout)
    assert [r["placer"] for r in doc["rows"]] == ["heft", "round_robin"]
    heft, rr = doc["rows"]
    assert heft["step_time_s"] > 0 and rr["bytes_moved"] > 0 and heft["oom"] is False
    assert "m_topo" in placelab("compare", "--list").stdout


def test_compare_errors():
    bad = placelab("compare", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placers", "heft,bogus", check=False)
    assert bad.returncode == 1 and "bogus" in bad.stderr and "known placers:" in bad.stderr
    bad = placelab("compare", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placers", ",", check=False)
    assert bad.returncode == 1 and "names no placer" in bad.stderr


def test_outputs_are_checked_before_the_work_and_never_overwrite_inputs(tmp_path):
    placement = tmp_path / "p.json"
    placelab("place", "--graph", "random_dag:ops=10", "--placer", "heft", "--out", str(placement))
    before = placement.read_text()
    common = ("--graph", "random_dag:ops=10", "--cluster", "v100-nvlink-4")
    for args, message in (
            (("simulate", *common, "--placement", str(placement), "--trace", str(placement)), "is also an input"),
            (("simulate", *common, "--random", "3", "--trace", str(tmp_path / "no" / "t.json")), "does not exist"),
            (("place", "--graph", str(placement), "--placer", "heft", "--out", str(placement)), "is also an input"),
            (("calibrate", "--quick", "--out", str(tmp_path / "c.json"), "--measurements", str(tmp_path / "c.json")),
             "are both"),
            (("calibrate", "--quick", "--out", ""), "--out is empty"),
            (("replay", *common, "--placement", str(placement), "--trace", str(tmp_path / "r.json"),
              "--plan-out", str(tmp_path / "r.json")), "are both")):
        bad = placelab(*args, check=False)
        assert bad.returncode == 1 and message in bad.stderr, (args, bad.stderr)
        assert "calibrating" not in bad.stderr  # refused before any measuring
    assert placement.read_text() == before
    assert not (tmp_path / "c.json").exists()


def test_compare_keeps_the_rows_of_placers_that_did_not_fail(tmp_path):
    graph = tmp_path / "big.json"  # parameters larger than any device: no contiguous split fits, but heft places it
    graph.write_text(json.dumps({"format": "placelab.graph", "version": 1, "name": "big", "ops": [
        {"name": "a", "flops": 1e6, "output_bytes": 100, "param_bytes": 2e11},
        {"name": "b", "flops": 1e6, "param_bytes": 2e11}], "edges": [{"src": 0, "dst": 1, "bytes": 100}]}))
    out = placelab("compare", "--graph", str(graph), "--cluster", "v100-nvlink-2", "--placers", "heft,dp,round_robin",
                   "--json", check=False)
    assert out.returncode == 1 and "1 of 3 placers failed (dp)" in out.stderr
    rows = json.loads(out.stdout)["rows"]
    assert [r["placer"] for r in rows] == ["heft", "dp", "round_robin"]
    assert rows[0]["step_time_s"] > 0 and rows[2]["step_time_s"] > 0 and "fits" in rows[1]["error"]
    table = placelab("compare", "--graph", str(graph), "--cluster", "v100-nvlink-2", "--placers", "heft,dp", check=False)
    assert table.returncode == 1 and "heft" in table.stdout and "dp               failed:" in table.stdout


def test_place_and_compare_report_out_of_memory(tmp_path):
    # A small decoder's training step (about 215 MB on one device) on four GPUs of 70 MB: single_device
    # cannot fit, m_etf spreads it over the four and fits.
    cluster = json.loads(placelab("cluster", "--preset", "h100-4", "--json").stdout)
    for device in cluster["devices"]:
        device["memory_bytes"] = 70e6
    path = tmp_path / "small.json"
    path.write_text(json.dumps({"format": "placelab.cluster", "version": 1, **cluster}))
    graph = "llama:training=1,layers=4,hidden=256,heads=4,kv_heads=2,ffn=512,seq_len=256,vocab=1000,micro_batches=4,batch=8"
    doc = json.loads(placelab("compare", "--graph", graph, "--cluster", str(path), "--placers", "single_device,m_etf",
                              "--json").stdout)
    single, m_etf = doc["rows"]
    assert single["oom"] is True and single["info"]["oom"] is True
    excess = single["device_peak_bytes"]["gpu0"] - 70e6
    assert single["info"]["oom_excess_bytes"] == excess and single["info"]["oom_devices"] == {"gpu0": excess}
    assert m_etf["oom"] is False and m_etf["info"]["oom"] is False and "oom_excess_bytes" not in m_etf["info"]
    table = placelab("compare", "--graph", graph, "--cluster", str(path), "--placers", "single_device,m_etf").stdout
    rows = {line.split()[0]: line for line in table.splitlines() if line.startswith(("single_device", "m_etf"))}
    assert "+" in rows["single_device"] and " no " in rows["m_etf"]  # the OOM column: the excess, or "no"
    placed = json.loads(placelab("place", "--graph", graph, "--cluster", str(path), "--placer", "single_device",
                                 "--json").stdout)
    assert placed["oom"] is True and placed["info"]["oom_excess_bytes"] == excess
