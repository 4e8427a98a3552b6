#!/usr/bin/python3
"""bench/fidelity.py --rescore on the quick run's fidelity.json.gz (ctest: bench_fidelity_rescore): refitting the same
calibration points and simulating the same placements with the same code must give the replay's predictions back,
and the report must say which run it rescored.

    check_fidelity_rescore.py FIDELITY_PY PLACELAB_BIN QUICK_OUT_DIR
"""
import gzip
import json
import os
import subprocess
import sys
import tempfile

fidelity_py, binary, quick_dir = sys.argv[1:4]
with gzip.open(os.path.join(quick_dir, "fidelity.json.gz")) as f:
    original = json.load(f)
with tempfile.TemporaryDirectory() as out:
    # The record as the repository stores it (compressed) and as text: --rescore reads both.
    plain = os.path.join(out, "plain.json")
    with open(plain, "w") as f:
        json.dump(original, f)
    rescored = []
    for source in (os.path.join(quick_dir, "fidelity.json.gz"), plain):
        subprocess.run([sys.executable, fidelity_py, "--rescore", source, "--bin", binary, "--out-dir", out],
                       check=True, stdout=subprocess.DEVNULL)
        with gzip.open(os.path.join(out, "fidelity.json.gz")) as f:
            rescored.append(json.load(f))
assert rescored[0]["rows"] == rescored[1]["rows"]
rescored = rescored[0]
assert rescored["rescored_from"]["command"] == original["command"], rescored["rescored_from"]
assert len(rescored["rows"]) == len(original["rows"]) > 0
for a, b in zip(original["rows"], rescored["rows"]):
    assert a["device_of"] == b["device_of"] and a["measured_s"] == b["measured_s"]
    assert abs(b["predicted_s"] / a["predicted_s"] - 1) < 1e-9, (a["placement"], a["predicted_s"], b["predicted_s"])
    assert abs(b["roofline_only_s"] / a["roofline_only_s"] - 1) < 1e-9, a["placement"]
print(f"rescored {len(rescored['rows'])} placements: the replay's predictions, exactly")
