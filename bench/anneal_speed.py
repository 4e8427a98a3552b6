"""Annealing's moves per second, the figure issue 31 asks for before and after the engine rework: each move
is one incremental re-simulation (IncrementalSimulator.move, undone when rejected), so this is the engine's
speed as a local search sees it. Times the moves only (from the first move's end to the last's, read off
annealing's curve), not the start heuristics. One core is enough: run it under `taskset -c 0`.

    taskset -c 0 /usr/bin/python3 bench/anneal_speed.py [--steps 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics

import paperlib
import placelab

CASES = [("Inception-v3 training", "inception_v3:training=1", "v100-nvlink-4"),
         ("GNMT-4 training", "gnmt:layers=4,training=1", "v100-nvlink-4")]


def moves_per_s(simulator, steps: int, seed: int) -> float:
    _, info = placelab.place(simulator, "annealing", {"steps": steps, "curve": True}, seed)
    wall = info["curve_wall_s"]
    return (len(wall) - 1) / (wall[-1] - wall[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="moves per run (default 3000)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per case; the median is reported (default 3)")
    args = parser.parse_args()
    print(f"commit {paperlib.git_commit()}; {paperlib.machine()}")
    print("| case | cluster | ops | moves/s (median) | runs |")
    print("| --- | --- | ---: | ---: | --- |")
    for label, spec, cluster in CASES:
        graph = paperlib.graph(spec)
        simulator = placelab.Simulator(graph, placelab.make_preset(cluster))
        runs = [moves_per_s(simulator, args.steps, seed) for seed in range(1, args.repeats + 1)]
        print(f"| {label} | {cluster} | {graph.num_ops} | {statistics.median(runs):,.0f} | "
              f"{', '.join(f'{r:,.0f}' for r in runs)} |", flush=True)


if __name__ == "__main__":
    main()
