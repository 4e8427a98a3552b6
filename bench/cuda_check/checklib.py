"""What gpu_check.py and cal_check.py share: their arguments, a summary file that grows line by line (so a
run cut short still returns what it found), the time left before the deadline, and running the bundle's
placelab without ever raising (a failure or timeout is printed, the check goes on).

usage of a check: CHECK.py BUNDLE OUT WORK DEADLINE_EPOCH_S"""
import json
import os
import subprocess
import sys
import time

BUNDLE, OUT, WORK, DEADLINE = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
DATA = f"{BUNDLE}/data"
ENV = dict(os.environ, LD_LIBRARY_PATH=f"{BUNDLE}/lib")
summary = []
STALLS = []  # the last placelab run's stderr lines saying a gated run stalled


def say(line=""):
    print(line, flush=True)
    summary.append(line)
    with open(f"{OUT}/summary.txt", "w") as f:
        f.write("\n".join(summary) + "\n")


def left():
    return DEADLINE - time.time()


def cli(*args, timeout=30, binary="bin", margin=3, echo_stalls=False):
    """Runs placelab; returns stdout, or None (the failure is printed) on error or timeout."""
    STALLS.clear()
    t = min(timeout, left() - margin)
    if t < 2:
        print(f"SKIPPED (no time left): placelab {' '.join(args)}", flush=True)
        return None
    cmd = [f"{BUNDLE}/{binary}/placelab", *args]
    if not os.path.exists(cmd[0]):
        print(f"SKIPPED (no {cmd[0]})", flush=True)
        return None
    print("+", " ".join(cmd), flush=True)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=t, env=ENV)
    except subprocess.TimeoutExpired:
        print(f"TIMEOUT after {t:.0f} s: {' '.join(args)}", flush=True)
        return None
    STALLS.extend(line for line in p.stderr.splitlines() if "stalled" in line)
    if echo_stalls:
        for line in STALLS:
            print(f"  stderr: {line}", flush=True)
    if p.returncode != 0:
        print(f"FAILED rc={p.returncode}: {' '.join(args)}\n{p.stderr[-3000:]}", flush=True)
        return None
    return p.stdout


def load(path, quiet=False):
    try:
        with open(path) as f:
            return json.load(f)
    except Exception as e:  # noqa: BLE001 - report and go on
        if not quiet:
            print(f"cannot read {path}: {e}", flush=True)
        return None
