#!/usr/bin/python3
"""Runs every paper-reproduction script (bench/paper_*.py): `--quick` in seconds (what the tests run), or the
full tables into bench/results/ with each script's own default budgets (the recorded tables state the
exact commands they were made with; bench/results/README.md lists every record, these five papers' and the
other benches', with the command that regenerates it). `--only gdp,placeto` picks scripts.
Under `mpirun -np N` the scripts spread over the ranks (one script per rank at a time, paperlib.sweep)."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import paperlib  # noqa: E402

PAPERS = ["tarnawski", "baechi", "hsdag", "placeto", "gdp"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny settings that finish in seconds")
    parser.add_argument("--out", help="results folder (default bench/results; with --quick a fresh temporary folder)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--steps", type=int, help="training steps of every learned placer (default: each script's)")
    parser.add_argument("--only", default=",".join(PAPERS), help="comma-separated subset of " + ", ".join(PAPERS))
    args = parser.parse_args()
    chosen = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in chosen if p not in PAPERS]
    if unknown:
        parser.error(f"unknown paper(s) {', '.join(unknown)}: choose from {', '.join(PAPERS)}")
    if args.out is None:
        args.out = paperlib.default_out(args.quick)
    sub_argv = (["--quick"] if args.quick else []) + ["--out", args.out, "--seed", str(args.seed)] + (
        ["--steps", str(args.steps)] if args.steps is not None else [])

    def run(paper: str) -> str:
        start = time.perf_counter()
        rank, size = paperlib.rank_and_size()
        on = f" (rank {rank} of {size})" if size > 1 else ""
        print(f"reproduce: {paper}{on} ...", file=sys.stderr, flush=True)
        path = importlib.import_module("paper_" + paper).main(sub_argv)
        print(f"reproduce: {paper} done in {time.perf_counter() - start:.0f} s -> {path}", file=sys.stderr, flush=True)
        return path

    paperlib.sweep(run, chosen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
