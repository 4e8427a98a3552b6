"""bench/cuda_check/fidelity_cuda.py --dry-run: the GPU session's one prepared run, end to end on the CPU backend
at tiny sizes (a quick calibration, a tiny graph's placements of every kind replayed in one process per round,
the statistics, the trace and the files the device tool brings back), so that it cannot rot before a GPU runs it."""
import gzip
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("PLACELAB_BIN", "placelab-binary-not-given"))
SCRIPT = ROOT / "bench" / "cuda_check" / "fidelity_cuda.py"


@pytest.mark.skipif(not BIN.exists(), reason=f"placelab binary not found at {BIN} (set PLACELAB_BIN)")
def test_the_dry_run_writes_every_result(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--bin", str(BIN), "--out", str(out),
                           "--graphs", "gpt", "--placements", "10", "--no-torch"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # What the device tool returns: at most 8 files, none in a folder.
    assert sorted(p.name for p in out.iterdir()) == ["fidelity_cuda.json.gz", "raw.tar.gz", "summary.md", "trace.json.gz"]
    result = json.loads(gzip.decompress((out / "fidelity_cuda.json.gz").read_bytes()))
    assert result["failures"] == []
    rows = result["rows"]
    assert len(rows) == 10
    assert {"single", "placer", "streams", "cpu+gpu"} <= {r["kind"] for r in rows}
    for r in rows:
        assert set(r["device_of"]) <= {0, 1, 2}
        if r["kind"] in ("single", "streams"):
            assert 0 not in r["device_of"]  # the host stays out of the GPU-only placements
        if r["kind"] == "cpu+gpu":
            assert 0 in r["device_of"]
        assert r["measured_s"] > 0 and r["predicted_s"] > 0 and len(r["runs_s"]) == 1
    single = next(r for r in rows if r["kind"] == "single")
    assert set(single["device_of"]) == {1}
    assert 0 <= result["per_graph"]["gpt"]["mape"] and -1 <= result["per_graph"]["gpt"]["spearman"] <= 1
    assert result["calibration"]["backend"] == "cpu"
    with tarfile.open(out / "raw.tar.gz") as tar:
        names = tar.getnames()
    assert {"cluster.json", "calibration.json", "gpt.json", "replays.jsonl"} <= set(names)
    trace = json.loads(gzip.decompress((out / "trace.json.gz").read_bytes()))
    assert any(e.get("ph") == "X" for e in trace["traceEvents"])
    summary = (out / "summary.md").read_text()
    assert "DRY RUN" in summary and "| gpt | 10 |" in summary


def test_unknown_graphs_are_refused():
    proc = subprocess.run([sys.executable, str(SCRIPT), "--dry-run", "--bin", str(BIN), "--out", "/nonexistent",
                           "--graphs", "gpt,alexnet"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "alexnet" in proc.stderr
