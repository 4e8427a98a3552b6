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
QUICK_FAMILIES = {"ptb": "ptb:seed={},steps=3,nodes=4,training=1"}


def main(argv=None) -> str:
    args = paperlib.parse_args(__doc__.splitlines()[0], argv)
    report = paperlib.Report("placeto", "Placeto: step time and training steps on the placeto preset", args)
    steps = 2 if args.quick else 300
    spec = [("expert", "human_expert", {}), ("Scotch", "scotch", {}), ("HDP", "hdp", {"steps": steps}),
            ("Placeto", "placeto", {"steps": steps})]
    columns = [c for c, _, _ in spec]
    rows, step_rows, fewer = [], [], []
    for model in QUICK_MODELS if args.quick else MODELS:
        g = paperlib.graph(model)
        for gpus in (2,) if args.quick else (2, 4, 8):
            sim = placelab.Simulator(g, placelab.make_preset(f"placeto-{gpus}"))
            results = paperlib.run_placers(sim, spec, args.seed)
            rows.append({"model": model, "GPUs": gpus, **{c: fmt_s(r["step_time_s"]) for c, r in results.items()}})
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
    generalisation(report, args, steps)
    return report.write()


def generalisation(report: paperlib.Report, args, steps: int) -> None:
    """Train Placeto on graphs 0..k-1 of a family, then place unseen members without training."""
    if not hasattr(placelab, "train") or not paperlib.registered("placeto"):
        report.notes.append("Generalisation skipped: this build has no placelab.train or no placeto placer.")
        return
    train_seeds, test_seeds = ([0], [1]) if args.quick else ([0, 1, 2, 3, 4], [5, 6, 7])
    cluster = placelab.make_preset("placeto-2" if args.quick else "placeto-4")
    rows = []
    for family, pattern in (QUICK_FAMILIES if args.quick else FAMILIES).items():
        with tempfile.TemporaryDirectory() as checkpoint:
            tasks = [(paperlib.graph(pattern.format(s)), cluster) for s in train_seeds]
            placelab.train("placeto", tasks, steps=steps, checkpoint=checkpoint, seed=args.seed)
            for s in test_seeds:
                sim = placelab.Simulator(paperlib.graph(pattern.format(s)), cluster)
                unseen = paperlib.place(sim, "placeto", {"checkpoint": checkpoint, "steps": 0}, args.seed)
                trained = paperlib.place(sim, "placeto", {"steps": steps}, args.seed)
                heft = paperlib.place(sim, "heft", {}, args.seed)
                rows.append({"family": family, "unseen graph": pattern.format(s).split(",training")[0],
                             "Placeto zero-shot": fmt_s(unseen["step_time_s"]),
                             "Placeto trained on it": fmt_s(trained["step_time_s"]),
                             "HEFT": fmt_s(heft["step_time_s"]),
                             "zero-shot vs trained": paperlib.fmt_pct(
                                 100 * (unseen["step_time_s"] / trained["step_time_s"] - 1))})
    report.table(f"Generalisation on {cluster.name}: trained on seeds {train_seeds}, placing unseen seeds",
                 ["family", "unseen graph", "Placeto zero-shot", "Placeto trained on it", "HEFT",
                  "zero-shot vs trained"], rows)


if __name__ == "__main__":
    print(main())
