#!/usr/bin/python3
"""Learned search against simulated annealing at equal budgets of simulations: GDP's window search (trained on the
graph from scratch, and from the pre-trained policy) and annealing from the best of six heuristics, on the GDP suite
at 2, 4 and 8 GPUs; step time, wall time and learning curves (best so far against simulations and wall time)."""

from __future__ import annotations

import os
import re

import paper_gdp
import paperlib
from paperlib import fmt_s, placelab

BUDGETS = "1000,10000"
QUICK_MODELS = ["rnnlm:layers=2,steps=4,training=1"]
SUMMARY_KEY = ("model", "GPUs", "budget")  # what identifies a row across the per-model runs


def rows_spec(budget: int) -> list[tuple[str, str, dict]]:
    # A "simulations" budget counts every simulation of the call (docs/placers.md#budgets).
    return [("annealing", "annealing", {"simulations": budget, "curve": True}),
            ("GDP search (scratch)", "gdp", {"pretrained": False, "simulations": budget, "curve": True}),
            ("GDP search (pre-trained)", "gdp", {"simulations": budget, "curve": True})]


def curve_points(result: dict) -> tuple[list, list, list]:
    """(simulations, wall seconds, best cost) after each step of a learned placer or move of annealing."""
    info = result["info"]
    best = info.get("curve_best_cost_s", [])
    wall = info.get("curve_wall_s", [])
    sims = info.get("curve_simulations", [])
    return sims, wall, best


def plot(report: paperlib.Report, curves: dict) -> None:
    """One row of panels per configuration: best so far against simulations, and against wall time."""
    if not curves:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(curves), 2, figsize=(9, 2.8 * len(curves)), squeeze=False)
    for row, (title, lines) in zip(axes, curves.items()):
        for column, r in lines.items():
            sims, wall, best = curve_points(r)
            ys = [b if b is not None else float("nan") for b in best]
            row[0].plot(sims, ys, label=column)
            row[1].plot(wall, ys, label=column)
        for ax, xlabel in zip(row, ("simulations", "wall time (s)")):
            ax.set_title(title, fontsize=8)
            ax.set_xscale("log")
            ax.set_xlabel(xlabel, fontsize=7)
            ax.set_ylabel("best step time (s)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(report.plot_path("curves"), dpi=110)
    plt.close(fig)


def summarize(folder: str, merge: bool = False) -> str:
    """Geometric means over the per-model runs of `folder` (learned_search_merged.json, then every
    learned_search_*_0.csv on top, merged by configuration as gdp_suite_summary.merged_cells does), written to
    summary.md; with `merge`, the CSVs are first folded into learned_search_merged.json."""
    import gdp_suite_summary

    if merge:
        path, folded = gdp_suite_summary.merge(folder, ("0",), "learned_search", SUMMARY_KEY)
        print(f"learned_search: {len(folded)} runs folded into {path}; their files can go (git keeps them)")
    rows = gdp_suite_summary.read_rows(folder, "0", "learned_search", SUMMARY_KEY)
    if not rows:
        raise SystemExit(f"learned_search: no learned_search_merged.json or learned_search_*_0.csv in {folder}")
    lines = [f"Aggregated by `bench/learned_search.py --summarize` over {len(rows)} (model, GPUs, budget) rows of "
             f"{len({r['model'] for r in rows})} models: geometric mean of GDP's step time over annealing's, where "
             "both fit in memory (negative: GDP faster), and of the wall times. Budgets in simulations: GDP's, then "
             "annealing's where it got more (a comparison nearer equal wall time, annealing being far cheaper per "
             "simulation).", "",
             "| comparison | budget | configurations | step time | wall time |", "| --- | ---: | ---: | ---: | ---: |"]
    by_key = {(r["model"], r["GPUs"], int(r["budget"])): r for r in rows}
    budgets = sorted({key[2] for key in by_key})
    wall = re.compile(r",\s*([\d.eE+-]+\s*m?s),")
    seconds = gdp_suite_summary.parse_time
    for mine, theirs in [(b, b) for b in budgets] + [(b, c) for b in budgets for c in budgets if c > b]:
        for column in [c for c, _, _ in rows_spec(mine)][1:]:
            times, walls = [], []
            for (model, gpus, budget), r in by_key.items():
                other = by_key.get((model, gpus, theirs), {})
                a, b = seconds(r.get(column, "")), seconds(other.get("annealing", ""))
                if budget != mine or not a or not b or a[1] or b[1]:
                    continue
                times.append(a[0] / b[0])
                wa, wb = wall.search(r[column]), wall.search(other["annealing"])
                if wa and wb:
                    walls.append(seconds(wa.group(1))[0] / max(seconds(wb.group(1))[0], 1e-9))
            if not times:
                continue
            g = gdp_suite_summary.geomean(times)
            lines.append(f"| {column} against annealing | {mine if mine == theirs else f'{mine} vs {theirs}'} | "
                         f"{len(times)} | {'-' if g != g else f'{100 * (g - 1):+.1f}%'} | "
                         f"{'-' if not walls else f'{gdp_suite_summary.geomean(walls):.1f}x'} |")
    lines += ["", "## Every configuration", "", "Cells: step time ('(OOM)': does not fit in memory), wall time of the "
              "whole placement, simulations used; '-': not run.", ""]
    lines += gdp_suite_summary.cells_table(sorted(rows, key=lambda r: (r["model"], int(r["GPUs"]), int(r["budget"]))),
                                           SUMMARY_KEY, [c for c, _, _ in rows_spec(0)])
    lines += ["", "## Runs", "", "The runs each cell came from:", ""]
    lines += gdp_suite_summary.runs_table(folder, ("0",), "learned_search", SUMMARY_KEY)
    text = "\n".join(lines) + "\n"
    with open(os.path.join(folder, "summary.md"), "w") as f:
        f.write(text)
    return os.path.join(folder, "summary.md")


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--models", help="comma-separated subset of the GDP suite's models (default all)")
        parser.add_argument("--gpus", default="2,4,8", help="GPU counts (default 2,4,8)")
        parser.add_argument("--budgets", default=BUDGETS, help=f"simulation budgets (default {BUDGETS})")
        parser.add_argument("--placers", help="comma-separated subset of the columns (default all; the summary merges "
                                              "runs of different columns)")
        parser.add_argument("--curves", default="4", help="GPU counts whose learning curves are plotted (default 4)")
        parser.add_argument("--name", default="learned_search", help="results file stem (default learned_search)")
        parser.add_argument("--summarize", metavar="DIR", help="only aggregate the per-model runs in DIR")
        parser.add_argument("--merge", action="store_true", help="with --summarize: first fold DIR's per-run CSVs "
                                                                 "into learned_search_merged.json")

    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    if args.summarize:
        return summarize(args.summarize, args.merge)
    report = paperlib.Report(args.name, "Learned search against annealing at equal simulation budgets", args)
    budgets = [60] if args.quick else [int(b) for b in args.budgets.split(",")]
    models = QUICK_MODELS if args.quick else paperlib.select_models(
        args.models, paper_gdp.SUITE, lambda m: {m.split(":")[0], m.replace(",training=1", "")})
    gpus = [2] if args.quick else [int(g) for g in args.gpus.split(",")]
    chosen = paperlib.select_columns(args.placers, [c for c, _, _ in rows_spec(0)])
    table, ratios, curves = [], {b: {c: [] for c, _, _ in rows_spec(b)[1:] if c in chosen} for b in budgets}, {}
    for model in models:
        g = paperlib.graph(model)
        for n in gpus:
            sim = placelab.Simulator(g, placelab.make_preset(paper_gdp.CLUSTER.format(n)))
            for budget in budgets:
                results = paperlib.run_placers(sim, [r for r in rows_spec(budget) if r[0] in chosen], args.seed)
                row = {"model": model, "GPUs": n, "budget": budget}
                for column, r in results.items():
                    used = r["info"].get("simulations", "-")
                    row[column] = (f"{fmt_s(r['step_time_s'])}{' (OOM)' if r['oom'] else ''}, "
                                   f"{fmt_s(r['place_s'])}, {used} sims")
                    if column != "annealing" and "annealing" in results and not r["oom"] and \
                            not results["annealing"]["oom"]:
                        ratios[budget][column].append((r["step_time_s"], results["annealing"]["step_time_s"]))
                table.append(row)
                if str(n) in args.curves.split(",") and budget == max(budgets):
                    curves[f"{model} on {n} GPUs, {budget} simulations"] = results
    columns = [c for c, _, _ in rows_spec(budgets[0]) if c in chosen]
    report.intro = [
        f"Each placer gets the same number of simulations of the `{paper_gdp.CLUSTER.format('N')}` presets' "
        "simulator, every simulation counted (docs/placers.md#budgets): annealing its six starting heuristics, "
        "the incremental simulator's first run, then one per move (a move re-simulates from the moved ops' inputs, "
        "at about the cost of a full run); GDP the reward's two reference placements, then training steps while "
        "one more still leaves room for placing (its greedy decode and 16 samples, and the comparison with the "
        "best rollout). GDP's search is its "
        "schedule-aware policy re-placing windows of the best placement found so far and sampling anew, the policy "
        "updated by PPO and imitation of the best (docs/learned.md, gdp). Cells: step time, wall time of the "
        "whole placement, simulations used. Ratios are geometric means of GDP's step time over annealing's where "
        "both fit in memory (negative: GDP faster)."]
    for budget in budgets:
        for column, pairs in ratios[budget].items() if "annealing" in chosen else ():
            r = paperlib.geomean_ratio(pairs)
            report.claim(f"{column} against annealing at {budget} simulations", "ahead (target)",
                         "-" if r != r else f"{100 * (r - 1):+.1f}% ({len(pairs)} configurations)")
    report.table("Step time, wall time and simulations", ["model", "GPUs", "budget"] + columns, table)
    plot(report, curves)
    return report.write()


if __name__ == "__main__":
    print(main())
