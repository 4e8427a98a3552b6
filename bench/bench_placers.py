#!/usr/bin/python3
"""Every classic placer on a few zoo graphs and clusters: step time, peak memory, OOM, bytes moved and
placement time, through the `placelab compare` and `placelab place` verbs. Writes bench/results/placers.md.

Usage: /usr/bin/python3 bench/bench_placers.py [--bin build/placers-release/cli/placelab] [--out F]
"""
import argparse
import datetime
import json
import os
import platform
import subprocess
import sys

CASES = [
    ("inception_v3:training=1", "v100-nvlink-4"),
    ("resnet50:training=1", "v100-pcie-2"),
    ("gnmt:layers=4,steps=20,training=1", "v100-nvlink-4"),
    ("rnnlm:layers=2,steps=20,training=1", "k80-4"),
    ("bert:layers=12,training=1", "v100-nvlink-8"),
    ("transformer_xl:layers=8", "cpu-gpu-4"),
    ("wavenet", "cpu-gpu-2"),
    ("gnmt:training=1", "v100-nvlink-8"),  # GDP's 8-layer GNMT: 52,165 ops
]
ANNEALING_OPTIONS = {"steps": 1000}


def run(binary, *args):
    proc = subprocess.run([binary, *args], capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"placelab {' '.join(args)} failed: {proc.stderr}")
    return json.loads(proc.stdout)


def human(value, unit):
    for prefix in ("", "K", "M", "G", "T"):
        if abs(value) < 1000:
            return f"{value:.4g} {prefix}{unit}"
        value /= 1000
    return f"{value:.4g} P{unit}"


def seconds(value):
    return f"{value * 1e3:.4g} ms" if value < 1 else f"{value:.3g} s"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.environ.get("PLACELAB_BIN", "build/placers-release/cli/placelab"))
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "placers.md"))
    args = parser.parse_args()
    lines = ["# Classic placers on zoo graphs (bench/bench_placers.py)", "",
             "Each row: the placer's placement judged by the simulator (default options: roofline cost model, "
             "FIFO links). Step time = simulated makespan of one training (or inference) step; peak memory = "
             "the largest device peak; placement time = wall time of the placer alone. `annealing` ran "
             f"{ANNEALING_OPTIONS['steps']} steps (seed 1). Every other placer is deterministic with seed 1.",
             "",
             f"Command: `/usr/bin/python3 bench/bench_placers.py --bin {args.bin}` "
             f"({datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.machine()}, "
             f"{os.cpu_count()} CPUs shared with other jobs, so placement times are upper bounds).", ""]
    for graph, cluster in CASES:
        print(f"{graph} on {cluster}", file=sys.stderr)
        doc = run(args.bin, "compare", "--graph", graph, "--cluster", cluster, "--json")
        rows = doc["rows"]
        ann = run(args.bin, "place", "--graph", graph, "--cluster", cluster, "--placer", "annealing",
                  "--options", json.dumps(ANNEALING_OPTIONS), "--json")
        rows.append(ann)
        best = min(r["step_time_s"] for r in rows if not r["oom"]) if any(not r["oom"] for r in rows) else None
        lines += [f"## {doc['graph']} on {doc['cluster']} (`{graph}`)", "",
                  "| placer | step time | vs best without OOM | peak memory | OOM | bytes moved | placement time |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            ratio = f"{r['step_time_s'] / best:.2f}x" if best else ""
            lines.append(f"| {r['placer']} | {seconds(r['step_time_s'])} | {ratio} | {human(r['peak_memory_bytes'], 'B')} "
                         f"| {'yes' if r['oom'] else 'no'} | {human(r['bytes_moved'], 'B')} "
                         f"| {seconds(r['placement_time_s'])} |")
        lines.append("")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print(f"wrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
