#!/usr/bin/python3
"""Placeto (Addanki et al. 2019): Inception-v3, NMT and NASNet on the `placeto` cluster preset (Placeto's own
simulator model, reproduced exactly) at 2, 4 and 8 GPUs with the human expert, Scotch, HEFT, the RL-based baseline
(HDP), Placeto as published (episodes from random placements) and Placeto refining the best of HEFT and Scotch,
with training steps, simulations and wall time to reach HDP's best; and generalisation on the synthetic cifar10 /
ptb / nmt families (train on some graphs of a family, place unseen ones without training)."""

from __future__ import annotations

import math
import tempfile

import paperlib
from paperlib import fmt_s, placelab

MODELS = ["inception_v3:training=1", "nmt:training=1", "nasnet:training=1"]
QUICK_MODELS = ["ptb:steps=3,nodes=4,training=1"]
FAMILIES = {"cifar10": "cifar10:seed={},cells=2,nodes=3,training=1", "ptb": "ptb:seed={},steps=5,training=1",
            "nmt": "nmt:seed={},training=1"}
# NMT family members have 700 to 6,700 units: train on the two smallest training seeds, place an unseen one.
SEEDS = {"nmt": ([1, 2], [5])}
QUICK_FAMILIES = {"ptb": "ptb:seed={},steps=3,nodes=4,training=1"}


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--models", help="comma-separated subset of inception_v3, nmt, nasnet (default all)")
        parser.add_argument("--gpus", default="2,4,8", help="device counts (default 2,4,8)")
        parser.add_argument("--families", help="comma-separated generalisation families (default cifar10,ptb,nmt; "
                            "'none' skips the generalisation table)")
        parser.add_argument("--name", default="placeto", help="results file stem (default placeto)")

    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    report = paperlib.Report(args.name, "Placeto: step time and training steps on the placeto preset", args)
    steps = paperlib.training_steps(args, 300)
    models = QUICK_MODELS if args.quick else paperlib.select_models(args.models, MODELS)
    spec = [("expert", "human_expert", {}), ("Scotch", "scotch", {}), ("HEFT", "heft", {}),
            ("HDP", "hdp", {"steps": steps, "curve": True}), ("Placeto", "placeto", {"steps": steps, "curve": True}),
            (REFINING, "placeto", {"steps": steps, "curve": True, "initial": "heft,scotch"})]
    columns = [c for c, _, _ in spec]
    rows, step_rows, fewer, curves, experts = [], [], [], {}, {}
    configs = [(model, gpus) for model in models for gpus in ((2,) if args.quick else map(int, args.gpus.split(",")))]

    def run_config(config):  # one (model, GPUs) configuration; spread over MPI ranks under mpirun
        model, gpus = config
        return paperlib.run_placers(placelab.Simulator(paperlib.graph(model), placelab.make_preset(f"placeto-{gpus}")),
                                    spec, args.seed)

    for (model, gpus), results in zip(configs, paperlib.sweep(run_config, configs)):
        rows.append({"model": model, "GPUs": gpus,
                     **{c: fmt_s(r["step_time_s"]) + (" (OOM)" if r["oom"] else "") for c, r in results.items()}})
        panel = f"{model.split(':')[0]}, {gpus} devices"
        curves[panel] = {c: paperlib.curve(results[c]) for c in ("HDP", "Placeto", REFINING) if c in results}
        experts[panel] = results["expert"]["step_time_s"] if "expert" in results else 1.0
        if "HDP" in results and "Placeto" in results:
            step_rows.append(reach_row(model, gpus, results, fewer))
    report.table("Step time", ["model", "GPUs"] + columns, rows)
    report.table("Training to HDP's best: steps (a Placeto step is a whole episode per rollout), simulations and "
                 "wall time; '-': not reached", ["model", "GPUs", "HDP's best", "HDP steps", "HDP sims", "HDP wall",
                                                 "Placeto steps", "Placeto sims", "Placeto wall"], step_rows)
    ratio = paperlib.geomean_ratio(fewer)
    report.claim("Placeto needs fewer training steps than the RL-based baseline (HDP) to reach HDP's best", "up to 6.1x",
                 "-" if math.isnan(ratio) else f"{ratio:.2f}x (geometric mean over the {len(fewer)} configurations "
                 f"where Placeto reached it), {max((h / p for h, p in fewer), default=float('nan')):.1f}x at most")
    report.plot_curves(curves, experts)
    generalisation(report, args, steps)
    return report.write()


REFINING = "Placeto refining HEFT/Scotch"


def reach_row(model: str, gpus: int, results: dict, fewer: list) -> dict:
    """Steps, simulations and wall time of HDP to its best and of Placeto to HDP's best (a row of the table)."""
    # HDP's best rollout in training (its returned placement may be its policy's own, never a rollout)
    best = [b for b in paperlib.curve(results["HDP"]) if b is not None]
    target = best[-1] if best else float("nan")
    row = {"model": model, "GPUs": gpus, "HDP's best": fmt_s(target)}
    for column, result in (("HDP", results["HDP"]), ("Placeto", results["Placeto"])):
        reached = paperlib.to_reach(result, target * (1 + 1e-9)) if target == target else None
        row[f"{column} steps"], row[f"{column} sims"], row[f"{column} wall"] = (
            ("-", "-", "-") if reached is None else (str(reached[0]), str(reached[1]), fmt_s(reached[2])))
    if row["HDP steps"] != "-" and row["Placeto steps"] != "-":
        fewer.append((float(row["HDP steps"]), float(row["Placeto steps"])))
    return row


def generalisation(report: paperlib.Report, args, steps: int) -> None:
    """Train Placeto on graphs 0..k-1 of a family, then place unseen members without training; beside HEFT and
    Scotch, and Placeto refining the best of HEFT and Scotch (trained and placed the same way)."""
    if not hasattr(placelab, "train") or not paperlib.registered("placeto"):
        report.notes.append("Generalisation skipped: this build has no placelab.train or no placeto placer.")
        return
    names = [] if args.families == "none" else (args.families or ",".join(FAMILIES)).split(",")
    unknown = [f for f in names if f not in FAMILIES]
    if unknown:
        raise SystemExit(f"paper_placeto: unknown family {unknown[0]!r} (known: {', '.join(FAMILIES)}, or none)")
    families = QUICK_FAMILIES if args.quick else {f: FAMILIES[f] for f in names}
    if not families:
        return
    cluster = placelab.make_preset("placeto-2" if args.quick else "placeto-4")
    def run_family(item):  # one family; spread over MPI ranks under mpirun
        family, pattern = item
        rows = []
        train_seeds, test_seeds = ([0], [1]) if args.quick else SEEDS.get(family, ([0, 1, 2, 3, 4], [5, 6, 7]))
        tasks = [(paperlib.graph(pattern.format(s)), cluster) for s in train_seeds]
        with tempfile.TemporaryDirectory() as plain, tempfile.TemporaryDirectory() as refining:
            placelab.train("placeto", tasks, steps=steps, checkpoint=plain, seed=args.seed)
            placelab.train("placeto", tasks, steps=steps, checkpoint=refining, seed=args.seed,
                           options={"initial": "heft,scotch"})
            for s in test_seeds:
                sim = placelab.Simulator(paperlib.graph(pattern.format(s)), cluster)
                unseen = paperlib.place(sim, "placeto", {"checkpoint": plain, "steps": 0}, args.seed)
                trained = paperlib.place(sim, "placeto", {"steps": steps}, args.seed)
                refined = paperlib.place(sim, "placeto", {"checkpoint": refining, "steps": 0}, args.seed)
                heft = paperlib.place(sim, "heft", {}, args.seed)
                scotch = paperlib.place(sim, "scotch", {}, args.seed)
                best_classical = min(heft["step_time_s"], scotch["step_time_s"])
                rows.append(({"family": family, "trained on seeds": ", ".join(map(str, train_seeds)),
                              "unseen graph": pattern.format(s).split(",training")[0],
                              "Placeto zero-shot": fmt_s(unseen["step_time_s"]),
                              "Placeto trained on it": fmt_s(trained["step_time_s"]),
                              "refining, zero-shot": fmt_s(refined["step_time_s"]),
                              "HEFT": fmt_s(heft["step_time_s"]), "Scotch": fmt_s(scotch["step_time_s"]),
                              "refining vs best of HEFT, Scotch": paperlib.fmt_pct(
                                  100 * (refined["step_time_s"] / best_classical - 1))},
                             refined["step_time_s"] < best_classical))
        return rows

    results = [row for rows in paperlib.sweep(run_family, list(families.items())) for row in rows]
    rows, wins = [row for row, _ in results], [sum(win for _, win in results), len(results)]
    report.table(f"Generalisation on {cluster.name}: trained on some seeds of a family for {steps} steps, "
                 "placing unseen ones", ["family", "trained on seeds", "unseen graph", "Placeto zero-shot",
                                         "Placeto trained on it", "refining, zero-shot", "HEFT", "Scotch",
                                         "refining vs best of HEFT, Scotch"], rows)
    report.claim("Placeto placing unseen graphs of a trained family, against HEFT and Scotch (refining their best, "
                 "zero-shot)", "better than the baselines", f"strictly better on {wins[0]} of {wins[1]} unseen graphs")


if __name__ == "__main__":
    print(main())
