#!/usr/bin/python3
"""Pre-trains GDP on the train set of policy/learned/pretrained/suite.json and exports the checkpoint the library
embeds (policy/learned/pretrained/gdp.json).

Every train graph runs on every train cluster (one task each). The run is staged as DOPPLER trains: first
WARM_STEPS_PER_TASK imitation steps per task (the best of METIS, m-ETF and HEFT on it, at LR), then PPO with
self-imitation of the best placement found so far and window re-placement (docs/learned.md) at RL_LR. It checkpoints
to --checkpoint every few hundred steps and resumes from there when started again, so hours of training can span
sessions; the same --steps always give the same checkpoint on the same build, BLAS and CPU (a time limit only decides
where a run stops; the committed policy predates the OpenBLAS products, docs/learned.md).

    bench/pretrain_gdp.py --minutes 60            # train (or go on training) for an hour, then export
    bench/pretrain_gdp.py --export-only           # export the checkpoint as it is
    bench/pretrain_gdp.py --steps 40000           # reproduce the committed file: its trainer.steps
    bench/pretrain_gdp.py --init policy/learned/pretrained/gdp.json --suite S --stages 0,80,0
                                                  # go on training the committed policy on suite S's train set

Rebuild afterwards (make run) to embed the exported file. Graph imports from torchvision are cached (paperlib)."""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import sys
import tempfile
import time

import paperlib
from paperlib import placelab

SUITE = os.path.join(paperlib.ROOT, "policy", "learned", "pretrained", "suite.json")
OUT = os.path.join(paperlib.ROOT, "policy", "learned", "pretrained", "gdp.json")
# Steps per task of each stage: imitation of the best heuristic, PPO with windows and self-imitation (search that
# improves each task's best placement), then distillation of those bests (imitation only).
WARM_STEPS_PER_TASK, RL_STEPS_PER_TASK, DISTILL_STEPS_PER_TASK = 20, 400, 0
LR, RL_LR = 3e-3, 1e-3
# Pre-training's RL is on-policy (whole sampled placements, no windows, no self-imitation): imitating each task's
# best placement made the free-running policy worse on held-out graphs (docs/learned.md, "Pre-trained checkpoint").
OPTIONS = {"lr": LR, "rl_lr": RL_LR, "entropy": 0.01, "rollouts": 12, "window_share": 0, "self_imitation": 0,
           "hidden": 64, "head_hidden": 64, "ff": 128}
# What fine-tuning from the exported policy uses: the search of GDP's defaults (windows, self-imitation) at the
# rate RL ended with, no imitation of heuristics.
FINE_TUNE = {"lr": RL_LR, "rl_lr": 0, "warm_steps": 0, "distill_from": 0, "window_share": 0.5, "self_imitation": 0.5}


def read_suite(path: str = SUITE) -> dict:
    with open(path) as f:
        suite = json.load(f)
    if suite.get("format") != "placelab.suite" or suite.get("version") != 1:
        raise SystemExit(f"{path}: not a placelab.suite version 1 file")
    return suite


def tasks_of(split: dict) -> list[tuple[str, object, object]]:
    """(name, graph, cluster) for every graph of `split` on every cluster of it."""
    clusters = [(c, placelab.make_preset(c)) for c in split["clusters"]]
    out = []
    for spec in split["graphs"]:
        g = paperlib.graph(spec)
        out += [(f"{spec} on {name}", g, cluster) for name, cluster in clusters]
    return out


def export(checkpoint_dir: str, out: str, suite_path: str, command: str) -> dict:
    """The run's checkpoint as the embeddable file: no optimiser moments and no per-task best placements (so
    it stays small), fine-tuning options, and what it was trained on."""
    with open(os.path.join(checkpoint_dir, "checkpoint.json")) as f:
        doc = json.load(f)
    doc["learner"].pop("optimizer", None)
    doc["learner"].pop("best", None)
    doc["options"].update(FINE_TUNE)
    trainer = doc["trainer"]
    init_path = os.path.join(checkpoint_dir, "init.json")  # the trainer record of the policy the run started from
    continued = None
    if os.path.exists(init_path):
        with open(init_path) as f:
            continued = json.load(f)
    with open(suite_path, "rb") as f:
        suite_hash = hashlib.sha256(f.read()).hexdigest()[:16]
    doc["trainer"] = {"seed": trainer["seed"], "wall_s": trainer["wall_s"], "simulations": trainer["simulations"],
                      "made_by": command, "suite": os.path.relpath(suite_path, paperlib.ROOT),
                      "suite_sha256": suite_hash, "tasks": len(trainer["tasks"])}
    if continued:
        doc["trainer"]["continued_from"] = continued
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), prefix=".gdp.", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, separators=(",", ":"))
    os.chmod(tmp, 0o644)  # mkstemp's file is private; this one is committed
    os.replace(tmp, out)
    return doc


def throughput(checkpoint_dir: str, warm_steps: int, distill_from: int) -> list[dict]:
    """Per stage of the run in `checkpoint_dir` (its log.jsonl): steps, wall seconds, steps and simulations per second."""
    with open(os.path.join(checkpoint_dir, "log.jsonl")) as f:
        log = [json.loads(line) for line in f]
    bounds = [("imitation", 0, warm_steps), ("PPO", warm_steps, distill_from or len(log)),
              ("distillation", distill_from or len(log), len(log))]
    rows = []
    for name, begin, end in bounds:
        end = min(end, len(log))
        if end <= begin:
            continue
        wall = log[end - 1]["wall_s"] - (log[begin - 1]["wall_s"] if begin else 0)
        sims = log[end - 1]["simulations"] - (log[begin - 1]["simulations"] if begin else 0)
        rows.append({"stage": name, "steps": end - begin, "wall_s": wall, "steps_per_s": (end - begin) / wall,
                     "simulations_per_s": sims / wall})
    return rows


def write_report(checkpoint_dir: str, doc: dict, path: str) -> None:
    """bench/results/pretrain_gdp.md: what the exported checkpoint is, and the run's throughput per stage."""
    with open(os.path.join(checkpoint_dir, "checkpoint.json")) as f:
        options = json.load(f)["options"]
    rows = throughput(checkpoint_dir, options["warm_steps"], options["distill_from"])
    lines = ["# Pre-training GDP", "",
             f"`{doc['trainer']['made_by']}` (commit {paperlib.git_commit()}, {paperlib.machine()}; exported "
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC): {doc['step']} steps on "
             f"{doc['trainer']['tasks']} tasks (`{doc['trainer']['suite']}`), {doc['trainer']['wall_s'] / 3600:.2f} h "
             f"of training, {doc['trainer']['simulations']} simulations. The policy is judged zero-shot on the "
             "held-out set in `gdp_zero_shot.md`.", "",
             "| stage | steps | wall | steps/s | simulations/s |", "| --- | ---: | ---: | ---: | ---: |"]
    lines += [f"| {r['stage']} | {r['steps']} | {r['wall_s']:.0f} s | {r['steps_per_s']:.1f} | "
              f"{r['simulations_per_s']:.0f} |" for r in rows]
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", help="the run's folder: checkpoint.json and log.jsonl (default "
                        "runs/pretrain_gdp; with --quick a fresh temporary folder)")
    parser.add_argument("--minutes", type=float, default=0, help="stop this run after so many minutes (0: --steps)")
    parser.add_argument("--steps", type=int, help="total training steps of the run (default: the three stages' sum; "
                        "--quick: 4)")
    parser.add_argument("--seed", type=int, default=1, help="seed of a new run (a resumed run keeps its own)")
    parser.add_argument("--out", default=OUT, help="exported checkpoint (default policy/learned/pretrained/gdp.json)")
    parser.add_argument("--suite", default=SUITE, help="the suite file (default policy/learned/pretrained/suite.json)")
    parser.add_argument("--stages", default=f"{WARM_STEPS_PER_TASK},{RL_STEPS_PER_TASK},{DISTILL_STEPS_PER_TASK}",
                        help="steps per task of imitation, RL and distillation (default "
                        f"{WARM_STEPS_PER_TASK},{RL_STEPS_PER_TASK},{DISTILL_STEPS_PER_TASK})")
    parser.add_argument("--options", default="{}", help="GDP options (JSON) over the script's (default none)")
    parser.add_argument("--init", metavar="CHECKPOINT", help="start a new run from this checkpoint's policy (e.g. "
                        "the committed gdp.json) rather than from scratch; --stages 0,N,0 then skips imitation")
    parser.add_argument("--export-only", action="store_true", help="export the run's checkpoint without training")
    parser.add_argument("--quick", action="store_true", help="two small tasks and a tiny policy for four steps, "
                        "exported into the run's folder (tests)")
    args = parser.parse_args(argv)

    suite = read_suite(args.suite)
    if args.quick:
        suite["train"] = {"graphs": ["random_dag:ops=60,seed=1", "nmt:seed=1"], "clusters": ["v100-nvlink-2"]}
        args.checkpoint = args.checkpoint or tempfile.mkdtemp(prefix="placelab_pretrain_")
        args.out = os.path.join(args.checkpoint, "gdp.json")
        args.steps = args.steps or 4
    args.checkpoint = args.checkpoint or os.path.join(paperlib.ROOT, "runs", "pretrain_gdp")
    if not args.export_only:
        tasks = tasks_of(suite["train"])
        warm_per_task, rl_per_task, distill_per_task = (int(x) for x in args.stages.split(","))
        warm, rl = warm_per_task * len(tasks), rl_per_task * len(tasks)
        # distill_from 0 means never: with no distillation stage, leave it off.
        options = dict(OPTIONS, warm_steps=warm, distill_from=warm + rl if distill_per_task else 0)
        options.update(json.loads(args.options))
        args.steps = args.steps or warm + rl + distill_per_task * len(tasks)
        if args.quick:
            options.update(warm_steps=1, distill_from=3, hidden=8, heads=1, ff=16, head_hidden=8)  # all stages
        resume = os.path.exists(os.path.join(args.checkpoint, "checkpoint.json"))
        if args.init and not resume:
            started_from = placelab.read_checkpoint(args.init)["trainer"]
            os.makedirs(args.checkpoint, exist_ok=True)
            with open(os.path.join(args.checkpoint, "init.json"), "w") as f:
                json.dump(dict(started_from, path=os.path.relpath(os.path.abspath(args.init), paperlib.ROOT)), f)
        print(f"pretrain_gdp: {len(tasks)} tasks, {'resuming' if resume else 'starting'} {args.checkpoint}",
              file=sys.stderr, flush=True)
        started = time.time()
        summary = placelab.train("gdp", tasks, steps=args.steps, minutes=args.minutes, checkpoint=args.checkpoint,
                                 checkpoint_every=500, resume=resume, seed=args.seed, options=options,
                                 init=None if resume else args.init,
                                 progress=lambda line: print(line, file=sys.stderr, flush=True))
        print(f"pretrain_gdp: {summary['steps']} steps in all, {time.time() - started:.0f} s in this run",
              file=sys.stderr, flush=True)
    # The training command (the export's own options left out): what reproduces the file.
    command = " ".join(["bench/pretrain_gdp.py"] + [a for a in (argv if argv is not None else sys.argv[1:])
                                                   if a not in ("--export-only",)])
    doc = export(args.checkpoint, args.out, args.suite, command)
    if not args.quick and os.path.abspath(args.out) == OUT:  # the committed file: record how it was made
        write_report(args.checkpoint, doc, os.path.join(paperlib.RESULTS, "pretrain_gdp.md"))
    print(f"pretrain_gdp: step {doc['step']} exported to {args.out} ({os.path.getsize(args.out)} bytes, "
          f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
