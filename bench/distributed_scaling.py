#!/usr/bin/python3
"""Data-parallel training at 1 and 2 MPI ranks on this machine, side by side, in one run: steps/s and
simulations/s of `mpirun -np N placelab train`, the compute per step and the gradient size that
docs/distributed.md's scaling model takes, written to bench/results/distributed.md."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

import paperlib

# (policy, graph, cluster, steps): a policy-gradient placer whose step is mostly simulation (HDP, 8 rollouts)
# and one whose step is mostly the network's forward and backward (GDP).
CONFIGS = [("hdp", "gnmt:layers=4,training=1", "v100-nvlink-4", 40),
           ("gdp", "gnmt:layers=4,training=1", "v100-nvlink-4", 12)]
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--timeout", "600"]


def parameter_count(checkpoint: str) -> int:
    with open(checkpoint) as f:
        params = json.load(f)["learner"]["params"]["params"]
    return sum(len(p["data"]) for p in params)


def train(binary: str, ranks: int, policy: str, graph: str, cluster: str, steps: int) -> dict:
    """One run: its steps, simulations and training wall time (rank 0's, from the log), and its parameter count."""
    with tempfile.TemporaryDirectory(prefix="placelab_scaling_") as folder:
        run_dir = os.path.join(folder, "run")
        command = ["mpirun", "-np", str(ranks), *MPI_FLAGS, binary, "train", "--graphs", graph, "--cluster", cluster,
                   "--policy", policy, "--steps", str(steps), "--checkpoint", run_dir, "--checkpoint-every", "0"]
        subprocess.run(command, check=True, capture_output=True, text=True)
        with open(os.path.join(run_dir, "log.jsonl")) as f:
            last = json.loads(f.read().splitlines()[-1])
        return {"steps": last["step"] + 1, "simulations": last["simulations"], "wall_s": last["wall_s"],
                "params": parameter_count(os.path.join(run_dir, "checkpoint.json"))}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bin", default=os.path.join(paperlib.ROOT, "build", "release", "cli", "placelab"))
    parser.add_argument("--ranks", default="1,2", help="rank counts to compare (default 1,2)")
    parser.add_argument("--out", default=os.path.join(paperlib.RESULTS, "distributed.md"))
    args = parser.parse_args()
    ranks = [int(r) for r in args.ranks.split(",")]
    machine = paperlib.machine()  # with the load average before the runs
    rows = []
    for policy, graph, cluster, steps in CONFIGS:
        base = None
        for n in ranks:
            r = train(args.bin, n, policy, graph, cluster, steps)
            base = base or r
            step_s = r["wall_s"] / r["steps"]
            rows.append(f"| {policy} | {graph} on {cluster} | {n} | {r['steps'] / r['wall_s']:.2f} | "
                        f"{1e3 * step_s:.0f} | {r['simulations'] / r['wall_s']:.0f} | "
                        f"{(r['simulations'] / r['wall_s']) / (base['simulations'] / base['wall_s']):.2f}x | "
                        f"{r['params']:,} ({4 * r['params'] / 1e6:.2f} MB) |")
            print(rows[-1], file=sys.stderr, flush=True)
    load_after = os.getloadavg()
    command = "/usr/bin/python3 bench/distributed_scaling.py" + (" " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "")
    lines = ["# Data-parallel training: 1 and 2 MPI ranks on one machine", "",
             f"Command: `{command}`.  ",
             f"Commit {paperlib.git_commit()}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
             f"{machine} at the start, {load_after[0]:.2f} at the end (the cores are shared with "
             "other work).", "",
             "Each rank samples and simulates its own rollouts (the policy's `rollouts` per rank), so a step of N ranks "
             "does N times the rollouts of one rank; gradients are averaged over the ranks before each optimizer step. "
             "Wall time is rank 0's training time from the log (start-up excluded). Both ranks share the machine's "
             "cores, and each simulates its rollouts with oneTBB over all cores, so 2 ranks here measure the "
             "exchange's overhead, not a speed-up: that needs a core (or a node) per rank (docs/distributed.md).", "",
             "| policy | task | ranks | steps/s | ms per step | simulations/s | simulations/s vs 1 rank | "
             "gradient (floats) |", "| --- | --- | --- | --- | --- | --- | --- | --- |", *rows]
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
