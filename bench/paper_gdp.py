#!/usr/bin/python3
"""GDP (Zhou et al. 2019, Generalized Device Placement): the GDP suite at 2, 4 and 8 GPUs with the human expert,
METIS, HDP, Placeto, GDP trained per graph (GDP-one) and GDP pre-trained on a batch then fine-tuned (GDP-batch), plus
HEFT, m-SCT and simulated annealing; simulated step times and search times."""

from __future__ import annotations

import math

import paperlib
from paperlib import fmt_s, placelab

SUITE = ["inception_v3:training=1", "amoebanet:training=1", "rnnlm:layers=2,training=1", "rnnlm:layers=4,training=1",
         "rnnlm:layers=8,training=1", "gnmt:layers=2,training=1", "gnmt:layers=4,training=1",
         "gnmt:layers=8,training=1", "transformer_xl:training=1", "wavenet:training=1"]
QUICK = ["rnnlm:layers=2,steps=4,training=1"]
CLUSTER = "v100-nvlink-{}"
# Placeto simulates once per unit moved (hundreds to thousands per training step), so it gets this many
# times fewer steps than HDP and GDP-one, which simulate a dozen placements per step.
PLACETO_DIVISOR = 10
# ... and is left out above this many ops (the 4- and 8-layer GNMT): one step costs 4 episodes x U moves x one
# incremental simulation, ~80 s on the 2-layer GNMT (16k ops) here (~2.5 minutes before a unit's ops
# moved as one group).
PLACETO_MAX_OPS = 20000


def rows_spec(quick: bool, steps: int) -> list[tuple[str, str, dict]]:
    """HDP, GDP-one (from scratch) and GDP-batch (the pre-trained policy fine-tuned) train for `steps`, Placeto for
    a PLACETO_DIVISOR-th of them (as published, from random placements, and refining the best of HEFT and Scotch)."""
    return [("expert", "human_expert", {}), ("METIS", "metis", {}), ("HEFT", "heft", {}), ("m-SCT", "m_sct", {}),
            ("annealing", "annealing", {"steps": 20 if quick else 2000}),
            ("HDP", "hdp", {"steps": steps, "curve": True}),
            ("Placeto", "placeto", {"steps": max(1, steps // PLACETO_DIVISOR), "curve": True}),
            ("Placeto refining", "placeto", {"steps": max(1, steps // PLACETO_DIVISOR), "curve": True,
                                             "initial": "heft,scotch"}),
            ("GDP-one", "gdp", {"steps": steps, "pretrained": False, "curve": True}),
            ("GDP-batch", "gdp", {"steps": steps, "curve": True}),
            ("GDP zero-shot", "gdp", {"steps": 0})]


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--models", help="comma-separated subset of the suite's models (by name before ':')")
        parser.add_argument("--gpus", default="2,4,8", help="GPU counts (default 2,4,8)")
        parser.add_argument("--placers", help="comma-separated subset of the columns, e.g. expert,Placeto (default all)")
        parser.add_argument("--name", default="gdp", help="results file stem (default gdp)")

    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    report = paperlib.Report(args.name, "GDP: the GDP suite on V100s (simulated step time)", args)
    steps = paperlib.training_steps(args, 300)
    spec = rows_spec(args.quick, steps)
    chosen = paperlib.select_columns(args.placers, [c for c, _, _ in spec])
    spec = [row for row in spec if row[0] in chosen]
    columns = [c for c, _, _ in spec]
    times, search, per_model = [], [], {}
    placeto_left_out = False
    models = QUICK if args.quick else paperlib.select_models(
        args.models, SUITE, lambda m: {m.split(":")[0], m.replace(",training=1", "")})
    configs = [(model, gpus) for model in models for gpus in ((2,) if args.quick else map(int, args.gpus.split(",")))]

    def run_config(config):  # one (model, GPUs) configuration; spread over MPI ranks under mpirun
        model, gpus = config
        g = paperlib.graph(model)
        sim = placelab.Simulator(g, placelab.make_preset(CLUSTER.format(gpus)))
        runnable = [r for r in spec if r[1] != "placeto" or g.num_ops <= PLACETO_MAX_OPS]
        return len(runnable) < len(spec), paperlib.run_placers(sim, runnable, args.seed)

    for (model, gpus), (left_out, results) in zip(configs, paperlib.sweep(run_config, configs)):
        placeto_left_out |= left_out
        row = {"model": model, "GPUs": gpus}
        srow = dict(row)
        for column, r in results.items():
            row[column] = fmt_s(r["step_time_s"]) + (" (OOM)" if r["oom"] else "")
            best_step, _ = paperlib.learned_info(r)
            converged = paperlib.convergence(r)
            srow[column] = fmt_s(r["place_s"]) + ("" if best_step == "-" else f", best at step {best_step}") + (
                "" if converged is None else f", within 1% at step {converged[0]} ({converged[1]} sims)")
        times.append(row)
        search.append(srow)
        per_model[(model, gpus)] = results
    report.intro = [f"Simulated training-step time on `{CLUSTER.format('N')}` presets (roofline cost model, FIFO "
                    "links). GDP-batch starts from the committed pre-trained checkpoint "
                    "(policy/learned/pretrained/gdp.json) and fine-tunes; GDP zero-shot places without training; "
                    f"GDP-one and HDP train from scratch on each graph for {steps} steps, GDP-batch fine-tunes for "
                    f"as many (Placeto trains for a {PLACETO_DIVISOR}th: it simulates once per unit moved)."]
    if placeto_left_out:
        report.notes.append(f"Placeto is left out on graphs of more than {PLACETO_MAX_OPS} ops ('-'): it simulates "
                            "once per unit moved, and one training step on the 2-layer GNMT takes ~80 s here.")
    report.table("Step time", ["model", "GPUs"] + columns, times)
    report.table("Search time (placement wall time, training included)", ["model", "GPUs"] + columns, search)

    def pairs(a: str, b: str) -> list:  # as gdp_suite_summary.py: only configurations where both fit
        return [(r[a]["step_time_s"], r[b]["step_time_s"]) for r in per_model.values()
                if a in r and b in r and not r[a]["oom"] and not r[b]["oom"]]

    def ratio(a: str, b: str) -> tuple:
        return paperlib.geomean_ratio(pairs(a, b)), len(pairs(a, b))

    def fmt_gain(x: tuple) -> str:
        return "-" if math.isnan(x[0]) else f"{100 * (x[0] - 1):.1f}% (geometric mean over {x[1]} fitting)"

    report.claim("pre-trained + fine-tuned against trained from scratch, same steps (GDP-batch against GDP-one)",
                 "batch training helps", fmt_gain(ratio("GDP-one", "GDP-batch")))
    for gdp in ("GDP-one", "GDP-batch"):
        report.claim(f"GDP step time better than the human expert ({gdp})", "16% on average",
                     fmt_gain(ratio("expert", gdp)))
        report.claim(f"GDP step time better than HDP ({gdp})", "9.2% on average", fmt_gain(ratio("HDP", gdp)))
    # Steps and simulations until each came within 1% of its own final best, every step counted from the first
    # (GDP's warm start included). A placer whose final best is far worse converges to it "fast": the step-time
    # claims above say how good each end is.
    converged = [(paperlib.convergence(r["HDP"]), paperlib.convergence(r["GDP-one"])) for r in per_model.values()
                 if "HDP" in r and "GDP-one" in r]
    converged = [(h, g) for h, g in converged if h is not None and g is not None]
    for k, what in ((0, "steps"), (1, "simulations")):
        conv = paperlib.geomean_ratio([(h[k], g[k]) for h, g in converged])
        report.claim(f"GDP converges faster than HDP ({what} to within 1% of the final best, HDP's over GDP-one's)",
                     "15x", "-" if math.isnan(conv) else f"{conv:.2f}x over {len(converged)}")
    report.claim("zero-shot (pre-trained, no fine-tuning) against HEFT", "no figure for this comparison",
                 fmt_gain(ratio("HEFT", "GDP zero-shot")))
    report.claim("zero-shot against fine-tuned (GDP-batch)", "no figure for this comparison",
                 fmt_gain(ratio("GDP zero-shot", "GDP-batch")))
    plot_bars(report, per_model, columns)
    report.plot_curves({label(m, g): {c: paperlib.curve(r[c]) for c in ("HDP", "Placeto", "GDP-one", "GDP-batch") if c in r}
                        for (m, g), r in per_model.items()},
                       {label(m, g): r["expert"]["step_time_s"] for (m, g), r in per_model.items() if "expert" in r})
    return report.write()


def label(model: str, gpus: int) -> str:
    """'rnnlm:layers=4,training=1', 4 -> 'rnnlm 4L, 4 GPUs'."""
    layers = f" {model.split('layers=')[1].split(',')[0]}L" if "layers=" in model else ""
    return f"{model.split(':')[0]}{layers}, {gpus} GPUs"


def plot_bars(report: paperlib.Report, per_model: dict, columns: list[str]) -> None:
    """Step time of each placer relative to the expert, one group of bars per (model, GPUs)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = list(per_model)
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(keys) * len(columns) / 4), 4))
    width = 0.8 / len(columns)
    for k, column in enumerate(columns):
        ys = [per_model[key][column]["step_time_s"] / per_model[key]["expert"]["step_time_s"]
              if column in per_model[key] and "expert" in per_model[key] else float("nan") for key in keys]
        ax.bar([i + k * width for i in range(len(keys))], ys, width, label=column)
    ax.set_xticks([i + 0.4 - width / 2 for i in range(len(keys))])
    ax.set_xticklabels([label(m, g) for m, g in keys], rotation=45, ha="right", fontsize=7)
    ax.axhline(1, color="black", linewidth=0.5)
    ax.set_ylabel("step time / expert's")
    ax.legend(fontsize=7, ncol=3)
    fig.tight_layout()
    fig.savefig(report.plot_path("bars"), dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    print(main())
