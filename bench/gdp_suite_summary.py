#!/usr/bin/python3
"""Aggregates the per-model GDP-suite tables (bench/paper_gdp.py --name gdp_<model>, one run per model)
into one Markdown table of geometric-mean step-time ratios between placers, over the (model, GPUs)
configurations where neither placement runs out of memory, plus training steps to the best placement.

    /usr/bin/python3 bench/gdp_suite_summary.py [--dir bench/results/gdp_suite] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import glob
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# (placer, reference, the paper's figure for this comparison)
COMPARISONS = [
    ("GDP-one", "expert", "GDP 16% faster"), ("GDP-batch", "expert", "GDP 16% faster"),
    ("GDP-one", "HDP", "GDP 9.2% faster"), ("GDP-batch", "HDP", "GDP 9.2% faster"),
    ("HDP", "expert", ""), ("Placeto", "expert", ""), ("Placeto", "HDP", ""),
    ("Placeto refining", "expert", ""), ("Placeto refining", "HEFT", ""),
    ("HEFT", "expert", ""), ("METIS", "expert", ""), ("m-SCT", "expert", ""), ("annealing", "expert", ""),
    ("GDP-one", "annealing", ""), ("GDP-batch", "annealing", ""), ("GDP-one", "HEFT", ""), ("GDP-one", "METIS", ""),
    ("GDP-batch", "GDP-one", "batch training helps"), ("GDP zero-shot", "HEFT", ""), ("GDP-batch", "GDP zero-shot", ""),
]


def parse_time(cell: str) -> tuple[float, bool] | None:
    """'135.3 ms' / '1.153 s' / '484.5 ms (OOM)' -> (seconds, oom); '-' or '' -> None."""
    m = re.match(r"\s*([\d.eE+-]+)\s*(ms|s)\b", cell or "")
    if not m:
        return None
    value = float(m.group(1)) * (1e-3 if m.group(2) == "ms" else 1.0)
    return value, "OOM" in cell


def parse_convergence(cell: str) -> tuple[int, int] | None:
    """'..., within 1% at step 12 (148 sims)' -> (12, 148)."""
    m = re.search(r"within 1% at step (\d+) \((\d+) sims\)", cell or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def read_rows(folder: str, suffix: str, stem: str = "gdp", key=("model", "GPUs")) -> list[dict]:
    """The rows of every <stem>_*_<suffix>.csv in `folder`, merged by `key`: a later file (in name order) replaces
    the columns it has, so a run of some columns only (paper_gdp.py --placers, --name gdp_<model>_<what>)
    updates those columns and keeps the others. A column a later run has but left empty (a placer it skipped,
    such as Placeto on a graph too big for it) clears the older cell, which described an older graph."""
    rows: dict[tuple, dict] = {}
    for path in sorted(glob.glob(os.path.join(folder, f"{stem}_*_{suffix}.csv"))):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows.setdefault(tuple(row[k] for k in key), {}).update(row)
    return list(rows.values())


def geomean(ratios: list[float]) -> float:
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")


def describe(ratio: float) -> str:
    if math.isnan(ratio):
        return "-"
    return f"{100 * abs(ratio - 1):.1f}% {'slower' if ratio > 1 else 'faster'}"


def summary(folder: str) -> str:
    times, searches = read_rows(folder, "0"), read_rows(folder, "1")
    if not times:
        raise SystemExit(f"gdp_suite_summary: no gdp_*_0.csv in {folder}: run bench/paper_gdp.py --out {folder} first")
    models = sorted({r["model"] for r in times})
    lines = [f"Aggregated by `bench/gdp_suite_summary.py` over {len(times)} (model, GPUs) configurations of "
             f"{len(models)} models: geometric mean of step-time ratios over the configurations where both "
             "placements fit in memory.", "",
             "| comparison | configurations | placelab | paper |", "| --- | ---: | --- | --- |"]
    for placer, reference, paper in COMPARISONS:
        ratios = []
        for row in times:
            a, b = parse_time(row.get(placer, "")), parse_time(row.get(reference, ""))
            if a and b and not a[1] and not b[1]:
                ratios.append(a[0] / b[0])
        lines.append(f"| {placer} against {reference} | {len(ratios)} | {describe(geomean(ratios))} | {paper} |")
    both = [(parse_convergence(r.get("HDP", "")), parse_convergence(r.get("GDP-one", ""))) for r in searches]
    both = [(h, g) for h, g in both if h is not None and g is not None]
    # Every step counted from the first, GDP's warm start included; see paper_gdp.py.
    if both:
        lines += ["", f"Convergence, HDP's over GDP-one's (geometric mean over {len(both)} configurations; paper: 15x): "
                  f"training steps to within 1% of the final best {geomean([h[0] / g[0] for h, g in both]):.2f}x, "
                  f"simulations {geomean([h[1] / g[1] for h, g in both]):.2f}x."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=os.path.join(HERE, "results", "gdp_suite"), help="folder of gdp_*_0.csv")
    parser.add_argument("--out", help="write the table here (default: print it)")
    args = parser.parse_args(argv)
    text = summary(args.dir)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
