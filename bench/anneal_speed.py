"""Annealing's moves per second, the figure issue 31 asks for: each move is one incremental re-simulation
(IncrementalSimulator.move, undone when rejected), so this is the engine's speed as a local search sees
it. Times the moves only (from the first move's end to the last's, read off annealing's curve), not the
start heuristics. Each run goes twice, interleaved: every move replayed to its end (`stop_early` off), and
rejected moves stopped as soon as their rejection is certain (the default); both must end on the same
placement and cost, or the script fails. One core is enough: run it under `taskset -c 0`.

    taskset -c 0 /usr/bin/python3 bench/anneal_speed.py [--steps 3000] [--repeats 3]

It imports the placelab package next to it (bench/paperlib.py puts ../python first on sys.path), so to
time another build, run that checkout's copy of the script.
"""

from __future__ import annotations

import argparse
import statistics

import paperlib
import placelab

CASES = [("Inception-v3 training", "inception_v3:training=1", "v100-nvlink-4"),
         ("GNMT-4 training", "gnmt:layers=4,training=1", "v100-nvlink-4"),
         ("GNMT-4 training", "gnmt:layers=4,training=1", "v100-nvlink-8"),
         ("ResNet-50 training", "resnet50:training=1", "v100-nvlink-4")]


def run(simulator, steps: int, seed: int, stop_early: bool) -> tuple[float, dict]:
    placement, info = placelab.place(simulator, "annealing", {"steps": steps, "curve": True, "stop_early": stop_early},
                                     seed)
    wall = info["curve_wall_s"]
    return (len(wall) - 1) / (wall[-1] - wall[0]), {"placement": placement.tolist(), **info}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="moves per run (default 3000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case, seeds 1..N; medians reported (default 3)")
    args = parser.parse_args()
    print(f"commit {paperlib.git_commit()}; {paperlib.machine()}")
    print("| case | cluster | ops | moves/s, full replays | moves/s, stopping early | speed-up | "
          "rejected moves stopped early |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for label, spec, cluster in CASES:
        graph = paperlib.graph(spec)
        simulator = placelab.Simulator(graph, placelab.make_preset(cluster))
        full, early, stopped, rejected = [], [], 0, 0
        for seed in range(1, args.repeats + 1):
            rate_full, info_full = run(simulator, args.steps, seed, False)
            rate_early, info_early = run(simulator, args.steps, seed, True)
            for key in ("placement", "best_cost_s", "accepted", "improvements"):
                if info_full[key] != info_early[key]:
                    raise SystemExit(f"anneal_speed: {label} on {cluster}, seed {seed}: '{key}' differs with stop_early")
            full.append(rate_full)
            early.append(rate_early)
            stopped += info_early["stopped_early"]
            rejected += info_early["steps"] - info_early["accepted"]
        print(f"| {label} | {cluster} | {graph.num_ops} | "
              f"{statistics.median(full):,.0f} ({', '.join(f'{r:,.0f}' for r in full)}) | "
              f"{statistics.median(early):,.0f} ({', '.join(f'{r:,.0f}' for r in early)}) | "
              f"{statistics.median(early) / statistics.median(full):.2f}x | {stopped:,} of {rejected:,} |", flush=True)


if __name__ == "__main__":
    main()
