#!/usr/bin/python3
"""Placeto (Addanki et al. 2019): Inception-v3, NMT and NASNet on the `placeto` cluster preset (Placeto's own
simulator model) at 2, 4 and 8 GPUs with the human expert, Scotch, the RL-based baseline (HDP) and Placeto,
with training steps to converge; and generalisation on the synthetic cifar10 / ptb / nmt families (train on
some graphs of a family, place unseen ones without training)."""

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
    spec = [("expert", "human_expert", {}), ("Scotch", "scotch", {}), ("HDP", "hdp", {"steps": steps, "curve": True}),
            ("Placeto", "placeto", {"steps": steps, "curve": True})]
    columns = [c for c, _, _ in spec]
    rows, step_rows, fewer, curves, experts = [], [], [], {}, {}
    for model in models:
        g = paperlib.graph(model)
        for gpus in (2,) if args.quick else [int(x) for x in args.gpus.split(",")]:
            sim = placelab.Simulator(g, placelab.make_preset(f"placeto-{gpus}"))
            results = paperlib.run_placers(sim, spec, args.seed)
            rows.append({"model": model, "GPUs": gpus,
                         **{c: fmt_s(r["step_time_s"]) + (" (OOM)" if r["oom"] else "") for c, r in results.items()}})
            panel = f"{model.split(':')[0]}, {gpus} devices"
            curves[panel] = {c: paperlib.curve(results[c]) for c in ("HDP", "Placeto") if c in results}
            experts[panel] = results["expert"]["step_time_s"] if "expert" in results else 1.0
            srow = {"model": model, "GPUs": gpus}
            for c in ("HDP", "Placeto"):
                if c in results:
                    best, wall = paperlib.learned_info(results[c])
                    srow[c + " steps to best"], srow[c + " wall"] = best, wall
            step_rows.append(srow)
            if "HDP" in results and "Placeto" in results:
                h, p = paperlib.learned_info(results["HDP"])[0], paperlib.learned_info(results["Placeto"])[0]
                if h != "-" and p != "-":
                    fewer.append((max(1.0, float(h)), max(1.0, float(p))))
    report.table("Step time", ["model", "GPUs"] + columns, rows)
    report.table("Training steps to the best placement", ["model", "GPUs", "HDP steps to best", "HDP wall",
                                                          "Placeto steps to best", "Placeto wall"], step_rows)
    ratio = paperlib.geomean_ratio(fewer)
    report.claim("Placeto needs fewer training steps than the RL-based baseline (HDP)", "up to 6.1x",
                 "-" if math.isnan(ratio) else f"{ratio:.1f}x (geometric mean), "
                 f"{max((h / p for h, p in fewer), default=float('nan')):.1f}x at most")
    report.plot_curves(curves, experts)
    generalisation(report, args, steps)
    return report.write()


def generalisation(report: paperlib.Report, args, steps: int) -> None:
    """Train Placeto on graphs 0..k-1 of a family, then place unseen members without training."""
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
    rows = []
    for family, pattern in families.items():
        train_seeds, test_seeds = ([0], [1]) if args.quick else SEEDS.get(family, ([0, 1, 2, 3, 4], [5, 6, 7]))
        with tempfile.TemporaryDirectory() as checkpoint:
            tasks = [(paperlib.graph(pattern.format(s)), cluster) for s in train_seeds]
            placelab.train("placeto", tasks, steps=steps, checkpoint=checkpoint, seed=args.seed)
            for s in test_seeds:
                sim = placelab.Simulator(paperlib.graph(pattern.format(s)), cluster)
                unseen = paperlib.place(sim, "placeto", {"checkpoint": checkpoint, "steps": 0}, args.seed)
                trained = paperlib.place(sim, "placeto", {"steps": steps}, args.seed)
                heft = paperlib.place(sim, "heft", {}, args.seed)
                rows.append({"family": family, "trained on seeds": ", ".join(map(str, train_seeds)),
                             "unseen graph": pattern.format(s).split(",training")[0],
                             "Placeto zero-shot": fmt_s(unseen["step_time_s"]),
                             "Placeto trained on it": fmt_s(trained["step_time_s"]),
                             "HEFT": fmt_s(heft["step_time_s"]),
                             "zero-shot vs trained": paperlib.fmt_pct(
                                 100 * (unseen["step_time_s"] / trained["step_time_s"] - 1))})
    report.table(f"Generalisation on {cluster.name}: trained on some seeds of a family for {steps} steps, "
                 "placing unseen ones", ["family", "trained on seeds", "unseen graph", "Placeto zero-shot", "Placeto trained on it", "HEFT",
                  "zero-shot vs trained"], rows)


if __name__ == "__main__":
    print(main())
