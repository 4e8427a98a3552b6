"""`placelab compare`'s lower bound (placers.md "The lower bound", cli.md): a bound line, each row's step time over
it, the bound's parts and each row's ratio in --json; a placement out of memory gets no ratio."""
import json
import os
import subprocess

import pytest

BIN = os.environ.get("PLACELAB_BIN", "build/release/cli/placelab")


def run(*args):
    proc = subprocess.run([BIN, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.skipif(not os.path.exists(BIN), reason="no placelab binary")
def test_bound_line_and_ratios():
    args = ("compare", "--graph", "random_dag:ops=12,width=3,seed=4", "--cluster", "cpu-gpu-2",
            "--placers", "single_device,round_robin,exact")
    doc = json.loads(run(*args, "--json"))
    bound = doc["bound"]
    assert bound["fits"] and bound["bound_s"] > 0
    assert bound["bound_s"] == max(bound[k] for k in ("path_s", "cut_s", "device_s", "work_s", "link_s"))
    for row in doc["rows"]:
        if row["oom"]:
            assert row["ratio_to_bound"] is None
        else:  # no placement that fits is faster than the bound; the exact placer's is the optimum
            assert row["ratio_to_bound"] == pytest.approx(row["step_time_s"] / bound["bound_s"])
            assert row["ratio_to_bound"] >= 1 - 1e-9
    rows = {r["placer"]: r for r in doc["rows"]}
    assert rows["exact"]["info"]["proven"]
    assert all(rows["exact"]["step_time_s"] <= r["step_time_s"] * (1 + 1e-9) for r in doc["rows"] if not r["oom"])
    text = run(*args)
    assert "bound  " in text and "no placement that fits in memory is faster" in text and "x bound" in text


@pytest.mark.skipif(not os.path.exists(BIN), reason="no placelab binary")
def test_no_placement_fits():
    # AmoebaNet's training step on two V100s: its parameters and activations exceed the devices (every placer of
    # the GDP suite runs out of memory there).
    doc = json.loads(run("compare", "--graph", "amoebanet:training=1", "--cluster", "v100-nvlink-2",
                         "--placers", "single_device", "--json"))
    assert doc["bound"]["fits"] is False and doc["bound"]["bound_s"] is None
    assert doc["rows"][0]["oom"] and doc["rows"][0]["ratio_to_bound"] is None
