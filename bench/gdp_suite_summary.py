#!/usr/bin/python3
"""Aggregates the per-model GDP-suite tables (bench/paper_gdp.py --name gdp_<model>, one run per model)
into one Markdown table of geometric-mean step-time ratios between placers, over the (model, GPUs)
configurations where neither placement runs out of memory, plus training steps to the best placement,
the merged step times per configuration, the runs they came from, and a plot (beside --out, as .png).

The record keeps the runs' cells merged in one file, `<stem>_merged.json` (what --merge writes); per-run
CSVs lying in the folder are merged on top of it, each replacing the cells it has (name order among them).

    /usr/bin/python3 bench/gdp_suite_summary.py [--dir bench/results/gdp_suite] [--merge] [--out FILE]
"""

from __future__ import annotations

import argparse
import csv
import glob
import json
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


MERGED_FORMAT = "placelab.merged_runs"


def merged_path(folder: str, stem: str) -> str:
    return os.path.join(folder, f"{stem}_merged.json")


def load_merged(folder: str, stem: str) -> dict:
    """The record's merged cells ({"runs": {run: how it was made}, "tables": {suffix: [{"cells", "from"}]}}),
    empty where the folder has none."""
    path = merged_path(folder, stem)
    if not os.path.exists(path):
        return {"runs": {}, "tables": {}}
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != MERGED_FORMAT:
        raise SystemExit(f"{path}: not a {MERGED_FORMAT} file (format {doc.get('format')!r}); write it with --merge")
    return doc


def run_files(folder: str, stem: str, suffix: str) -> list[tuple[str, str]]:
    """(run name, path) of every per-run <stem>_*_<suffix>.csv in `folder`, in name order."""
    paths = sorted(glob.glob(os.path.join(folder, f"{stem}_*_{suffix}.csv")))
    return [(os.path.basename(p)[:-len(f"_{suffix}.csv")], p) for p in paths]


def merged_cells(folder: str, suffix: str, stem: str, key) -> dict[tuple, tuple[dict, dict]]:
    """{configuration: (cells, {column: run it came from})}: the merged record's cells, then every per-run CSV
    of the folder on top, in name order. A run replaces the columns it has, so a run of some columns only
    (paper_gdp.py --placers, --name gdp_<model>_<what>) updates those columns and keeps the others. A column a
    later run has but left empty (a placer it skipped, such as Placeto on a graph too big for it) clears the
    older cell, which described an older graph."""
    rows = {tuple(e["cells"][k] for k in key): (dict(e["cells"]), dict(e["from"]))
            for e in load_merged(folder, stem)["tables"].get(suffix, [])}
    for run, path in run_files(folder, stem, suffix):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                cells, sources = rows.setdefault(tuple(row[k] for k in key), ({}, {}))
                cells.update(row)
                sources.update({c: run for c in row if c not in key})
    return rows


def read_rows(folder: str, suffix: str, stem: str = "gdp", key=("model", "GPUs")) -> list[dict]:
    """The merged rows of table `suffix` (merged_cells without the sources)."""
    return [cells for cells, _ in merged_cells(folder, suffix, stem, key).values()]


def run_header(folder: str, run: str) -> dict:
    """How a run was made, from its report's head (paperlib.Report: the command line, then commit, date,
    machine and load)."""
    out = {}
    try:
        with open(os.path.join(folder, run + ".md")) as f:
            for line in f:
                if line.startswith("Command: "):
                    out["command"] = line[len("Command: "):].strip()
                elif line.startswith("Commit "):
                    out["made"] = line.strip()
                    break
    except FileNotFoundError:
        pass
    return out


def merge(folder: str, suffixes, stem: str, key) -> tuple[str, list[str]]:
    """Folds the per-run CSVs of `folder` into <stem>_merged.json: every configuration's current cells, the
    run each came from, and how each run that still provides a cell was made. Returns the file and the
    folded runs (their files may then go: git keeps them)."""
    old = load_merged(folder, stem)
    tables, used = {}, set()
    for suffix in suffixes:
        tables[suffix] = []
        for cells, sources in merged_cells(folder, suffix, stem, key).values():
            cells = {c: v for c, v in cells.items() if c in key or v != ""}  # an empty cell is a cleared one
            sources = {c: r for c, r in sources.items() if c in cells}
            tables[suffix].append({"cells": cells, "from": sources})
            used |= set(sources.values())
    folded = sorted({run for suffix in suffixes for run, _ in run_files(folder, stem, suffix)})
    runs = {**old["runs"], **{run: run_header(folder, run) or old["runs"].get(run, {}) for run in folded}}
    doc = {"format": MERGED_FORMAT, "version": 1,
           "about": "the current cell of every configuration over the per-run tables, each with the run it came "
                    "from; bench/gdp_suite_summary.py merges per-run CSVs over it and scores it",
           "key": list(key), "runs": {r: runs[r] for r in sorted(runs) if r in used}, "tables": tables}
    with open(merged_path(folder, stem), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return merged_path(folder, stem), folded


def cells_table(rows: list[dict], key, order=()) -> list[str]:
    """The merged rows as one Markdown table: the key, the columns of `order` that the rows have, then the
    others in the order they first appear."""
    seen = [c for c in dict.fromkeys(c for r in rows for c in r) if c not in key]
    columns = list(key) + [c for c in order if c in seen] + [c for c in seen if c not in order]
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    return lines + ["| " + " | ".join(r.get(c) or "-" for c in columns) + " |" for r in rows]


def runs_table(folder: str, suffixes, stem: str, key) -> list[str]:
    """The runs whose cells the summary uses: how each was made and how many cells it provides."""
    count: dict[str, int] = {}
    for suffix in suffixes:
        for cells, sources in merged_cells(folder, suffix, stem, key).values():
            for column, run in sources.items():
                count[run] = count.get(run, 0) + (cells.get(column, "") != "")
    known = load_merged(folder, stem)["runs"]
    lines = ["| run | cells | made | command |", "| --- | ---: | --- | --- |"]
    for run in sorted(r for r, n in count.items() if n):
        made = run_header(folder, run) or known.get(run, {})
        lines.append(f"| {run} | {count[run]} | {made.get('made', '-')} | {made.get('command', '-')} |")
    return lines


def geomean(ratios: list[float]) -> float:
    return math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else float("nan")


def describe(ratio: float) -> str:
    if math.isnan(ratio):
        return "-"
    return f"{100 * abs(ratio - 1):.1f}% {'slower' if ratio > 1 else 'faster'}"


KEY = ("model", "GPUs")
# The columns the plot shows, against the expert's step time.
PLOTTED = ["METIS", "HEFT", "m-SCT", "annealing", "HDP", "Placeto", "Placeto refining", "GDP-one", "GDP-batch",
           "GDP zero-shot"]


def summary(folder: str) -> str:
    times, searches = read_rows(folder, "0"), read_rows(folder, "1")
    if not times:
        raise SystemExit(f"gdp_suite_summary: no gdp_merged.json or gdp_*_0.csv in {folder}: run bench/paper_gdp.py "
                         f"--out {folder} first")
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
    lines += ["", "## Step time per configuration", "",
              "The cells the table above scores ('(OOM)': the placement does not fit in memory; '-': not run):", ""]
    lines += cells_table(sorted(times, key=lambda r: (r["model"], int(r["GPUs"]))), KEY, ["expert"] + PLOTTED)
    lines += ["", "## Runs", "", "The runs each cell came from (search times and steps to the best: table \"1\" of "
              "`gdp_merged.json`):", ""]
    lines += runs_table(folder, ("0", "1"), "gdp", KEY)
    return "\n".join(lines) + "\n"


def plot(folder: str, path: str) -> None:
    """Each configuration's step times over the expert's, one marker per placer (hollow: out of memory)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(read_rows(folder, "0"), key=lambda r: (r["model"], int(r["GPUs"])))
    fig, ax = plt.subplots(figsize=(8, 0.28 * len(rows) + 1.5))
    markers = "osD^v<>phX"
    for k, placer in enumerate(PLOTTED):
        points = []
        for y, row in enumerate(rows):
            a, b = parse_time(row.get(placer, "")), parse_time(row.get("expert", ""))
            if a and b:
                points.append((a[0] / b[0], y, a[1]))
        for oom in (False, True):
            xs, ys = [p[0] for p in points if p[2] == oom], [p[1] for p in points if p[2] == oom]
            ax.scatter(xs, ys, marker=markers[k % len(markers)], s=22, color=f"C{k}",
                       facecolors="none" if oom else f"C{k}", label=None if oom else placer)
    ax.axvline(1.0, color="gray", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{r['model'].replace(',training=1', '').replace(':training=1', '')}, {r['GPUs']} GPUs"
                        for r in rows], fontsize=6)
    ax.invert_yaxis()
    ax.set_xlabel("step time / the expert's (log; hollow: out of memory)", fontsize=8)
    ax.tick_params(axis="x", labelsize=7)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=os.path.join(HERE, "results", "gdp_suite"),
                        help="folder of gdp_merged.json and per-run gdp_*_0.csv")
    parser.add_argument("--merge", action="store_true", help="first fold the folder's per-run CSVs into gdp_merged.json")
    parser.add_argument("--out", help="write the table here and the plot beside it as .png (default: print the table)")
    args = parser.parse_args(argv)
    if args.merge:
        path, folded = merge(args.dir, ("0", "1"), "gdp", KEY)
        print(f"gdp_suite_summary: {len(folded)} runs folded into {path}; their files can go (git keeps them)",
              file=sys.stderr)
    text = summary(args.dir)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
        plot(args.dir, os.path.splitext(args.out)[0] + ".png")
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
