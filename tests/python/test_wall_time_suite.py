"""The held-out suite of bench/wall_time.py (bench/suites/held_out_wall_time.json): never trained on by the
pre-trained GDP policy (checked against the suite its checkpoint records), torchvision's held-out rule, the kinds
of models and links the issue asks for, and the memory claims it makes."""
import hashlib
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import paperlib  # noqa: E402
import pretrain_gdp  # noqa: E402
import wall_time  # noqa: E402

from test_suite import TORCHVISION_TRAINABLE, family  # noqa: E402


@pytest.fixture(scope="module")
def configurations():
    return wall_time.read_configurations()


@pytest.fixture(scope="module")
def trained():
    """The train split of the suite the embedded policy was trained on (the checkpoint records its sha256)."""
    with open(os.path.join(ROOT, "policy", "learned", "pretrained", "gdp.json")) as f:
        recorded = json.load(f)["trainer"]["suite_sha256"]
    with open(pretrain_gdp.SUITE, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest().startswith(recorded), "suite.json changed since the checkpoint"
    return pretrain_gdp.read_suite()["train"]


def test_no_configuration_was_trained_on(configurations, trained):
    assert len(configurations) >= 10
    keys = [(c["graph"], c["cluster"]) for c in configurations]
    assert len(set(keys)) == len(keys)
    for c in configurations:
        assert c["graph"] not in trained["graphs"], c
        assert c["cluster"] not in trained["clusters"], c


def test_torchvision_models_trained_on_are_only_the_four_allowed(configurations, trained):
    in_training = {family(g).split(":")[1] for g in trained["graphs"] if g.startswith("torchvision:")}
    assert in_training <= TORCHVISION_TRAINABLE
    here = {family(c["graph"]).split(":")[1] for c in configurations if c["graph"].startswith("torchvision:")}
    assert here.isdisjoint(TORCHVISION_TRAINABLE)


def test_the_kinds_of_models_and_links_asked_for(configurations):
    kinds = {c["kind"] for c in configurations}
    assert {"recurrent", "dilated", "branchy", "transformer"} <= kinds
    models = {family(c["graph"]) for c in configurations}
    assert {"rnnlm", "gnmt", "wavenet", "nasnet", "gpt", "llama", "mixtral", "vit"} <= models
    clusters = {c["cluster"] for c in configurations}
    assert any(c.startswith("h100-") for c in clusters)      # NVLink (NVSwitch)
    assert any(c.startswith("v100-pcie-") for c in clusters)  # PCIe
    assert any(c.startswith("eth-") for c in clusters)        # Ethernet
    assert any("-nodes-" in c for c in clusters)              # several nodes
    assert any(c.get("fits_one_device") is False for c in configurations)


def test_fits_one_device_says_what_the_simulator_says(configurations):
    """A configuration marked as not fitting one device runs out of memory on its single best device, and the
    others fit there, so the flag is a fact of the simulator, not a label."""
    import placelab
    for c in configurations:
        sim = placelab.Simulator(paperlib.graph(c["graph"]), placelab.make_preset(c["cluster"]))
        placement, _ = placelab.place(sim, "single_device", {}, 1)
        assert sim.simulate(placement)["oom"] == (c.get("fits_one_device") is False), c


def test_a_bad_file_is_refused(tmp_path):
    path = tmp_path / "suite.json"
    path.write_text(json.dumps({"format": "placelab.configurations", "version": 1,
                                "configurations": [{"graph": "rnnlm", "cluster": "eth-4"}]}))
    with pytest.raises(SystemExit, match="kind"):
        wall_time.read_configurations(str(path))
    path.write_text(json.dumps({"format": "placelab.suite", "version": 1}))
    with pytest.raises(SystemExit, match="placelab.configurations"):
        wall_time.read_configurations(str(path))


def test_merge_unites_runs_of_one_configuration_at_other_budgets(tmp_path):
    def row(graph, cells, command):
        return {"graph": graph, "cluster": "eth-4", "kind": "recurrent", "seed": 1, "results": cells,
                "run": {"command": command, "date": "d", "commit": "c", "machine": "m"}}
    rows = [row("rnnlm", {"HEFT": 1, "annealing @ 1 seconds": 2}, "first"),
            row("gnmt", {"HEFT": 5}, "first"),
            row("rnnlm", {"HEFT": 3, "annealing @ 60 seconds": 4}, "second")]
    united = wall_time.unite(rows)
    assert [r["graph"] for r in united] == ["rnnlm", "gnmt"]
    assert united[0]["results"] == {"HEFT": 3, "annealing @ 1 seconds": 2, "annealing @ 60 seconds": 4}
    assert [r["command"] for r in united[0]["runs"]] == ["first", "second"]
    assert rows[0]["results"] == {"HEFT": 1, "annealing @ 1 seconds": 2}  # the inputs are left alone
    assert wall_time.unite(united) == united
    assert wall_time.unite(united + [rows[0]])[0]["runs"] == united[0]["runs"]  # a run is listed once


def test_unite_keeps_a_later_rows_bound_and_an_earlier_ones_when_the_later_has_none():
    rows = [{"graph": "g", "cluster": "c", "seed": 1, "results": {}, "bound_s": 1.0},
            {"graph": "g", "cluster": "c", "seed": 1, "results": {"HEFT": 2}}]
    assert wall_time.unite(rows)[0]["bound_s"] == 1.0
    assert wall_time.unite(rows + [dict(rows[0], bound_s=3.0)])[0]["bound_s"] == 3.0


def test_resume_runs_only_the_cells_a_row_lacks():
    config = wall_time.QUICK[0]
    row = wall_time.measure(config, [0.05], [10], 1)
    assert row["bound_s"] > 0 and len(row["runs"]) == 1
    assert wall_time.measure(config, [0.05], [10], 1, have=row) is row  # nothing to run: the same row
    # Zero-shot with starts has the policy's decodes and HEFT's placement among its candidates, and its own annealing.
    step = {k: v["step_time_s"] for k, v in row["results"].items() if "error" not in v}  # 0.05 s may be too short
    assert step["GDP zero-shot with starts"] <= min(step["GDP zero-shot"], step["HEFT"]) * (1 + 1e-12)
    assert "annealing at the seconds of zero-shot with starts" in step
    lacking = dict(row, results={k: v for k, v in row["results"].items() if k != "annealing @ 0.05 seconds"})
    again = wall_time.measure(config, [0.05], [10], 1, have=lacking)
    assert set(again["results"]) == set(row["results"])
    assert all(again["results"][k] is v for k, v in lacking["results"].items())  # kept, not run again
    assert again["results"]["annealing @ 0.05 seconds"]["step_time_s"] > 0
    assert len(again["runs"]) == 2
    # A longer run only where the lower bound leaves room below annealing at the longest budget.
    roomy = wall_time.measure(config, [0.05], [10], 1, headroom=0.1, have=row)
    annealed = row["results"]["annealing @ 0.05 seconds"]["step_time_s"]
    assert ("annealing @ 0.1 seconds" in roomy["results"]) == (row["bound_s"] < wall_time.HEADROOM_ROOM * annealed)
