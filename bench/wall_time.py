#!/usr/bin/python3
"""Learned placers against annealing at equal wall time on the held-out suite (bench/suites/held_out_wall_time.json):
GDP zero-shot and GDP's searches against annealing, HEFT and m-SCT at equal seconds and at equal simulations; a table
per budget, geometric means, learning curves against wall time, and how much room there was (each configuration's
lower bound, the best placement any run found, longer runs with --headroom-seconds). A run appends each configuration's
results to a journal, <out>/wall_time_raw.jsonl, as it finishes; --resume keeps the cells already there (in the
report's raw data or the journal) and runs the missing ones. The report's raw data, every configuration in one file,
is <out>/wall_time_raw.jsonl.gz (the journal is removed once it is written)."""

from __future__ import annotations

import bisect
import datetime
import gzip
import json
import os
import sys
import time

import paperlib
from paperlib import fmt_s, placelab

SUITE = os.path.join(paperlib.HERE, "suites", "held_out_wall_time.json")
KINDS = ("recurrent", "dilated", "branchy", "transformer")
SECONDS, SIMULATIONS = "1,10,60", "1000"
QUICK = [{"graph": "rnnlm:layers=1,steps=3,training=1", "cluster": "eth-2", "kind": "recurrent"}]
# The budgeted placers, each given the same budget: annealing (its cooling spread over the budget), and GDP's searches
# (docs/learned.md): fine-tuning the pre-trained policy on the graph, annealing from the policy's placement (its moves
# uniform, or half of them drawn from the policy), and fine-tuning for half the budget, then annealing from the best
# placement found.
SEARCHES = [("annealing", "annealing", {}), ("GDP search (train)", "gdp", {}),
            ("GDP search (anneal)", "gdp", {"search": "anneal"}),
            ("GDP search (anneal, policy moves)", "gdp", {"search": "anneal", "proposals": "policy"}),
            ("GDP search (train, anneal)", "gdp", {"search": "train_anneal"})]
# How much room a search had (--headroom-seconds): annealing and the GDP search that led at the longest budget, run
# much longer, where the lower bound (placelab.lower_bound) is more than 20% below annealing's step time at the
# longest budget; where it is not, the bound itself says how little room there was.
HEADROOM_SEARCHES = [SEARCHES[0], SEARCHES[4]]
HEADROOM_ROOM = 0.8
CURVE_POINTS = 200  # best-so-far points kept per curve in the raw file (log-spaced in time)
# GDP zero-shot, each against annealing given the seconds it took: the policy's decodes alone, and with annealing's
# six classical starts among the candidates (`place_starts`), so that it is never worse than they are.
STARTS = "single_device,human_expert,metis,scotch,heft,m_topo"
ZERO_SHOTS = [("GDP zero-shot", {"steps": 0}, "annealing at zero-shot's seconds"),
              ("GDP zero-shot with starts", {"steps": 0, "place_starts": STARTS},
               "annealing at the seconds of zero-shot with starts")]
# The budgets' clock (PLACELAB_BUDGET_CLOCK, docs/placers.md#budgets) and the same clock here, to time the placers
# that take no budget: CPU seconds of the calling thread by default, so that a budget buys the same compute whatever
# else runs on the machine (GDP's decodes on other threads are not counted, as on an idle machine's wall clock).
CLOCKS = {"thread": time.thread_time, "process": time.process_time, "wall": time.perf_counter}
clock = CLOCKS["thread"]


def read_configurations(path: str = SUITE) -> list[dict]:
    """The suite's configurations; a file of another format, or a configuration without graph, cluster or a known
    kind, is an error naming it."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != "placelab.configurations" or doc.get("version") != 1:
        raise SystemExit(f"{path}: not a placelab.configurations version 1 file")
    out = doc.get("configurations", [])
    for k, c in enumerate(out):
        if not isinstance(c.get("graph"), str) or not isinstance(c.get("cluster"), str) or c.get("kind") not in KINDS:
            raise SystemExit(f"{path}: configurations[{k}] needs \"graph\", \"cluster\" and a \"kind\" of "
                             f"{', '.join(KINDS)}")
    return out


def thin(info: dict) -> list[list]:
    """[wall s, simulations, best cost] of a curve at most about CURVE_POINTS times: the first and last points and
    the first point past each of CURVE_POINTS wall times log-spaced over the run's last three decades."""
    wall, sims, best = (info.get(k, []) for k in ("curve_wall_s", "curve_simulations", "curve_best_cost_s"))
    n = min(len(wall), len(sims), len(best))
    if n == 0:
        return []
    end = max(wall[n - 1], 1e-9)
    marks = [end * 10 ** (3 * (j / (CURVE_POINTS - 1) - 1)) for j in range(CURVE_POINTS)]
    kept = sorted({0, n - 1} | {min(n - 1, bisect.bisect_left(wall, t, 0, n)) for t in marks})
    return [[wall[i], sims[i], best[i]] for i in kept]


def run(simulator, placer: str, options: dict, seed: int) -> dict:
    """One placer's result as the raw file keeps it, or {"error"} when it fails (a budget it cannot start in)."""
    start = clock()
    try:
        r = paperlib.place(simulator, placer, options, seed)
    except ValueError as e:  # placelab::Error
        return {"error": str(e)}
    clock_s = clock() - start
    info = r["info"]
    kept = {k: info[k] for k in ("simulations", "seconds", "steps", "start", "anneal_start", "chosen", "policy_cost_s")
            if k in info}
    return {"step_time_s": r["step_time_s"], "oom": r["oom"], "place_s": r["place_s"], "clock_s": clock_s,
            "info": kept, "curve": thin(info)}


def measure(config: dict, seconds: list[float], simulations: list[int], seed: int, headroom: float | None = None,
            have: dict | None = None) -> dict:
    """Every column on one configuration: {"results": {column key: run()}, "bound_s": the lower bound}; given
    `have`, an earlier row of the configuration, only the columns it lacks run (the row itself comes back when none
    does). With `headroom`, annealing and the longest GDP search also run for that many seconds where the lower bound
    leaves room (HEADROOM_ROOM)."""
    g = paperlib.graph(config["graph"])
    sim = placelab.Simulator(g, placelab.make_preset(config["cluster"]))
    results = dict(have["results"]) if have else {}
    ran = []

    def column(key: str, placer: str, options: dict) -> dict:
        if key not in results:
            results[key] = run(sim, placer, options, seed)
            ran.append(key)
        return results[key]

    column("HEFT", "heft", {})
    column("m-SCT", "m_sct", {})
    for name, options, annealed in ZERO_SHOTS:
        zero_s = column(name, "gdp", options).get("clock_s", 1.0)
        # Annealing given the seconds zero-shot GDP took; where its start alone takes longer, its start (8
        # simulations: six heuristics, the incremental simulator's first run, one move), marked as slower.
        if "error" in column(annealed, "annealing", {"seconds": zero_s}):
            results[annealed] = run(sim, "annealing", {"simulations": 8}, seed)
            results[annealed]["slower"] = True
    for amount, key in [(s, "seconds") for s in seconds] + [(n, "simulations") for n in simulations]:
        for name, placer, options in SEARCHES:
            curve = key == "seconds" and amount == max(seconds)
            column(f"{name} @ {amount:g} {key}", placer, options | {key: amount, "curve": curve})
    bound_s = have["bound_s"] if have and "bound_s" in have else placelab.lower_bound(sim)["bound_s"]
    annealed = results.get(f"annealing @ {max(seconds):g} seconds", {})
    if headroom and bound_s and annealed.get("step_time_s", 0) * HEADROOM_ROOM > bound_s:
        for name, placer, options in HEADROOM_SEARCHES:
            column(f"{name} @ {headroom:g} seconds", placer, options | {"seconds": headroom})
    if have and not ran and "bound_s" in have:
        return have
    run_by = {"command": "/usr/bin/python3 bench/wall_time.py " + " ".join(sys.argv[1:]),
              "commit": paperlib.git_commit(), "machine": paperlib.machine(),
              "date": f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC"}
    runs = (have.get("runs", [have["run"]] if "run" in have else []) if have else []) + ([run_by] if ran else [])
    return {"graph": config["graph"], "cluster": config["cluster"], "kind": config["kind"], "ops": g.num_ops,
            "seed": seed, "results": results, "bound_s": bound_s, "runs": runs}


def cell(r: dict | None, wall: bool = False) -> str:
    if not r:
        return "-"
    if "error" in r:
        return "failed"
    text = fmt_s(r["step_time_s"]) + (" (OOM)" if r["oom"] else "")
    if wall:
        text += f", {fmt_s(r.get('clock_s', r['place_s']))}" + (" (slower)" if r.get("slower") else "")
    if r["info"].get("anneal_start") == "policy":
        text += " *"
    return text


def ratio(rows: list[dict], mine: str, theirs: str) -> tuple[float, int, int]:
    """(geometric mean of mine / theirs where both fit, configurations, those where mine is faster by > 0.1%)."""
    pairs = [(r["results"][mine]["step_time_s"], r["results"][theirs]["step_time_s"]) for r in rows
             if all(k in r["results"] and "error" not in r["results"][k] and not r["results"][k]["oom"]
                    for k in (mine, theirs))]
    return paperlib.geomean_ratio(pairs), len(pairs), sum(a < b * 0.999 for a, b in pairs)


def pct(value: tuple[float, int, int]) -> str:
    g, n, wins = value
    return "-" if g != g else f"{100 * (g - 1):+.1f}% ({n} configurations, faster in {wins})"


def cost_rows(rows: list[dict], seconds: float) -> list[dict]:
    """Each search's seconds per simulation (its budget's clock over every simulation it ran), median over the
    configurations, and its median ratio to annealing's on the same configuration."""
    import statistics

    def per_sim(r):
        info = r.get("info", {}) if r and "error" not in r else {}
        return info["seconds"] / info["simulations"] if info.get("seconds") and info.get("simulations") else None

    out = []
    for column, _, _ in SEARCHES:
        mine = [(per_sim(r["results"].get(f"{column} @ {seconds:g} seconds")),
                 per_sim(r["results"].get(f"annealing @ {seconds:g} seconds"))) for r in rows]
        mine = [(a, b) for a, b in mine if a and b]
        if mine:
            out.append({"search": column, "seconds per simulation": fmt_s(statistics.median(a for a, _ in mine)),
                        "x annealing's": f"{statistics.median(a / b for a, b in mine):.1f}x"})
    return out


def short(value: tuple[float, int, int]) -> str:
    g, n, _ = value
    return "-" if g != g else f"{100 * (g - 1):+.1f}% ({n})"


def plot(report: paperlib.Report, rows: list[dict], seconds: float) -> None:
    """Best step time so far against wall time, one panel per configuration, the searches at `seconds`."""
    panels = [r for r in rows if any(r["results"].get(f"{c} @ {seconds:g} seconds", {}).get("curve")
                                     for c, _, _ in SEARCHES)]
    if not panels:
        return
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = min(4, len(panels))
    nrows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.8 * nrows), squeeze=False)
    for ax, r in zip(axes.flat, panels):
        for column, _, _ in SEARCHES:
            points = r["results"].get(f"{column} @ {seconds:g} seconds", {}).get("curve", [])
            xs = [p[0] for p in points if p[2] is not None and p[0] > 0]
            ax.step(xs, [p[2] * 1e3 for p in points if p[2] is not None and p[0] > 0], where="post", label=column)
        for column, style in (("HEFT", ":"), ("GDP zero-shot", "--")):
            got = r["results"].get(column, {})
            if "step_time_s" in got and not got["oom"]:
                ax.axhline(got["step_time_s"] * 1e3, linestyle=style, color="grey", linewidth=0.8, label=column)
        ax.set_xscale("log")
        ax.set_title(f"{r['graph'].split(':')[0]} on {r['cluster']}", fontsize=8)
        ax.set_xlabel("wall time (s)", fontsize=7)
        ax.set_ylabel("best step time (ms)", fontsize=7)
        ax.tick_params(labelsize=7)
    axes.flat[0].legend(fontsize=6)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(report.plot_path("curves"), dpi=100)
    plt.close(fig)


def best_found(r: dict) -> tuple[float, str] | None:
    """The fastest placement that fits among every cell of a row (any placer, any budget), and its column."""
    fits = [(c["step_time_s"], k) for k, c in r["results"].items() if "step_time_s" in c and not c["oom"]]
    return min(fits) if fits else None


def headroom_tables(report: paperlib.Report, rows: list[dict], seconds: list[float], headroom: float | None) -> None:
    """How much faster than annealing a search could have been: per budget, the best GDP search per configuration
    chosen with hindsight, the best placement any run found (the longer runs included) and the lower bound, each as
    a geometric mean over annealing at that budget; and the longer runs, configuration by configuration."""
    def against(b: float, pick) -> str:
        pairs = [(pick(r), r["results"][f"annealing @ {b:g} seconds"]["step_time_s"]) for r in rows
                 if not r["results"].get(f"annealing @ {b:g} seconds", {"oom": True}).get("oom", True)]
        pairs = [(mine, theirs) for mine, theirs in pairs if mine]
        g = paperlib.geomean_ratio(pairs)
        return "-" if g != g else f"{100 * (g - 1):+.1f}% ({len(pairs)})"

    def best_search(b: float):
        def pick(r):
            got = [r["results"].get(f"{c} @ {b:g} seconds", {}) for c, _, _ in SEARCHES[1:]]
            got = [c["step_time_s"] for c in got if "step_time_s" in c and not c["oom"]]
            return min(got) if got else None
        return pick

    def best_any(r):
        return (best_found(r) or (None,))[0]

    report.table("How much room there was: geometric means against annealing at each budget (configurations)",
                 ["budget", "best GDP search, chosen per configuration with hindsight", "best placement any run found",
                  "lower bound"],
                 [{"budget": f"{b:g} seconds",
                   "best GDP search, chosen per configuration with hindsight": against(b, best_search(b)),
                   "best placement any run found": against(b, best_any),
                   "lower bound": against(b, lambda r: r.get("bound_s"))} for b in seconds])
    longest = max(seconds)
    columns = [f"{c} @ {headroom:g} seconds" for c, _, _ in HEADROOM_SEARCHES] if headroom else []
    report.table(f"The lower bound, and longer runs where it leaves room (more than {100 * (1 - HEADROOM_ROOM):.0f}% "
                 f"below annealing at {longest:g} seconds)",
                 ["graph", "cluster", "lower bound", f"annealing @ {longest:g} seconds"] + columns +
                 ["best any run found"],
                 [{"graph": r["graph"], "cluster": r["cluster"],
                   "lower bound": fmt_s(r["bound_s"]) if r.get("bound_s") else "-",
                   f"annealing @ {longest:g} seconds": cell(r["results"].get(f"annealing @ {longest:g} seconds"))} |
                  {c: cell(r["results"].get(c)) for c in columns} |
                  {"best any run found": "-" if not best else f"{fmt_s(best[0])} ({best[1]})"}
                  for r, best in ((r, best_found(r)) for r in rows)])


def write_report(report: paperlib.Report, rows: list[dict], seconds: list[float], simulations: list[int],
                 headroom: float | None = None) -> str:
    args = report.args
    report.intro = [
        f"Suite: `{os.path.relpath(args.suite, paperlib.ROOT)}` ({len(rows)} configurations), graphs and clusters the "
        "pre-trained GDP policy never trained on. Budgets cover each placer's whole call, every simulation counted "
        "(docs/placers.md#budgets). Annealing starts from the best of six heuristics; with `seconds` alone its "
        "cooling runs over the time the budget leaves, so it completes. *GDP zero-shot* places with the policy "
        "alone (greedy decode and 16 samples, the best by simulation); *with starts* also has annealing's six "
        "heuristics' placements among its candidates (`place_starts`). *GDP search (train)* fine-tunes the "
        "pre-trained policy on the graph by PPO with windows and self-imitation, then places (docs/learned.md); "
        "*GDP search (anneal)* places with the policy (greedy decode and 16 samples), then anneals from the better "
        "of that placement and annealing's heuristics ('*' in a cell: the policy's placement, or training's best, "
        "was the better start); *(anneal, policy moves)* draws half its moves' devices from the policy's preferences "
        "(the greedy decode's distribution per unit) instead of uniformly; *GDP search (train, anneal)* fine-tunes for half the budget, then anneals from the "
        "better of its best placement and the heuristics. "
        f"Seconds are on the `{args.clock}` clock (`--clock`; `PLACELAB_BUDGET_CLOCK`, docs/placers.md#budgets)"
        + (": CPU seconds of the calling thread, so that a budget buys the same compute whatever else ran on the "
           "shared machine; GDP's decodes also run on other threads (oneTBB), which this clock does not count, as "
           "an idle machine's wall clock would not" if args.clock == "thread" else "") +
        "; times in cells are on it too. Ratios: geometric means of the first placer's "
        "step time over the second's where both fit in memory (negative: the first is faster). How much room a "
        "search had: the lower bound of each configuration (`placelab.lower_bound`: no placement that fits is "
        "faster), and the best placement any run found, "
        + (f"annealing and {HEADROOM_SEARCHES[1][0]} run for {headroom:g} seconds where the bound is more than "
           f"{100 * (1 - HEADROOM_ROOM):.0f}% below annealing at {max(seconds):g} seconds (`--headroom-seconds`)"
           if headroom else "the runs above") + "."]
    report.claim("GDP zero-shot against HEFT", "-", pct(ratio(rows, "GDP zero-shot", "HEFT")))
    for name, _, annealed in ZERO_SHOTS:
        report.claim(f"{name} against annealing given the same seconds", "ahead (target)",
                     pct(ratio(rows, name, annealed)))
    budgets = [(s, "seconds") for s in seconds] + [(n, "simulations") for n in simulations]
    for amount, key in budgets:
        for column, _, _ in SEARCHES[1:]:
            report.claim(f"{column} against annealing at {amount:g} {key}",
                         "5% ahead (target)" if key == "seconds" else "-",
                         pct(ratio(rows, f"{column} @ {amount:g} {key}", f"annealing @ {amount:g} {key}")))
    if headroom:
        name = HEADROOM_SEARCHES[1][0]
        report.claim(f"{name} against annealing at {headroom:g} seconds, where the lower bound leaves room", "-",
                     pct(ratio(rows, f"{name} @ {headroom:g} seconds", f"annealing @ {headroom:g} seconds")))
    kinds = [k for k in KINDS if any(r["kind"] == k for r in rows)]
    report.table("Against annealing by kind of model (geometric means of step time; configurations)",
                 ["budget", "search"] + kinds + ["all"],
                 [{"budget": f"{amount:g} {key}", "search": column} |
                  {k: short(ratio([r for r in rows if k in (r["kind"], "all")], f"{column} @ {amount:g} {key}",
                                  f"annealing @ {amount:g} {key}")) for k in kinds + ["all"]}
                  for amount, key in budgets for column, _, _ in SEARCHES[1:]])
    headroom_tables(report, rows, seconds, headroom)
    report.table("Seconds per simulation (median over configurations), at the largest time budget",
                 ["search", "seconds per simulation", "x annealing's"], cost_rows(rows, max(seconds)))
    where = ["graph", "cluster"]
    columns = ["HEFT", "m-SCT"] + [c for name, _, annealed in ZERO_SHOTS for c in (name, annealed)]
    report.table("Zero-shot: step time and seconds", where + columns,
                 [{"graph": r["graph"], "cluster": r["cluster"]} | {c: cell(r["results"].get(c), True) for c in columns}
                  for r in rows])
    for amount, key in budgets:
        columns = [c for c, _, _ in SEARCHES]
        report.table(f"Step time at {amount:g} {key}" + (" (and seconds)" if key == "simulations" else ""),
                     where + columns,
                     [{"graph": r["graph"], "cluster": r["cluster"]} |
                      {c: cell(r["results"].get(f"{c} @ {amount:g} {key}"), key == "simulations") for c in columns}
                      for r in rows])
    plot(report, rows, max(seconds))
    runs = {}
    for r in rows:
        for run_by in r.get("runs", [r["run"]] if "run" in r else []):
            runs.setdefault(run_by["command"], []).append(run_by)
    if runs:
        report.notes += ["Rows come from these runs (a run writes each configuration as it finishes; `--resume` "
                         "keeps them):", ""]
        report.notes += [f"- `{command}`: {len(got)} configurations, {got[0]['date']} to {got[-1]['date']}, commit "
                         f"{got[0]['commit']}, {got[0]['machine']}" for command, got in runs.items()] + [""]
    report.notes.append(f"Raw data (every cell, its simulations, seconds and start, curves thinned to {CURVE_POINTS} "
                        f"points): `{os.path.basename(raw_path(args))}.gz` beside this file (`--merge` and `--resume` read it).")
    return report.write()


def raw_path(args) -> str:
    """The journal of a run; the report's raw data is the same name with .gz."""
    return os.path.join(args.out, "wall_time" + ("_quick" if args.quick else "") + "_raw.jsonl")


def read_raw(path: str) -> list[dict]:
    """The rows of a raw file, gzipped (.gz) or a plain journal."""
    with (gzip.open if path.endswith(".gz") else open)(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def unite(rows: list[dict]) -> list[dict]:
    """One row per configuration and seed: the cells of rows of the same one (runs at other budgets) together,
    a later row's cell replacing an earlier one's, with every run that made them under "runs"."""
    out: dict[tuple, dict] = {}
    for r in rows:
        key = (r["graph"], r["cluster"], r["seed"])
        runs = r.get("runs", [r["run"]] if "run" in r else [])
        if key not in out:
            out[key] = {k: v for k, v in r.items() if k != "run"} | {"results": dict(r["results"]), "runs": runs}
        else:
            out[key].update({k: v for k, v in r.items() if k not in ("run", "runs", "results")})
            out[key]["results"].update(r["results"])
            out[key]["runs"] = out[key]["runs"] + [run for run in runs if run not in out[key]["runs"]]
    return list(out.values())


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--suite", default=SUITE, help="a placelab.configurations file (default the held-out "
                                                          "wall-time suite)")
        parser.add_argument("--configs", help="comma-separated indices into the suite (default all)")
        parser.add_argument("--seconds", default=SECONDS, help=f"time budgets in seconds (default {SECONDS})")
        parser.add_argument("--simulations", default=SIMULATIONS,
                            help=f"simulation budgets, '' for none (default {SIMULATIONS})")
        parser.add_argument("--headroom-seconds", metavar="S", help="also run annealing and GDP search (train, "
                            "anneal) for S seconds where the lower bound leaves room (default none)")
        parser.add_argument("--resume", action="store_true", help="keep the raw file's cells, run the missing ones "
                                                                  "(configurations, budgets, headroom)")
        parser.add_argument("--merge", metavar="RAW,RAW", help="run nothing: write the report (and one raw file in "
                                                               "--out) from these raw files, e.g. of runs in parallel "
                                                               "or at other budgets (a configuration's cells united)")
        parser.add_argument("--clock", choices=sorted(CLOCKS), default="thread",
                            help="the budgets' clock: CPU time of the calling thread (default) or of the process, "
                                 "or wall time")

    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    global clock
    clock = CLOCKS[args.clock]
    os.environ["PLACELAB_BUDGET_CLOCK"] = args.clock  # read by the placers' first budget (policy/budget.cpp)
    report = paperlib.Report("wall_time", "Learned placers against annealing at equal wall time, on held-out graphs "
                             "and clusters", args)
    configs = QUICK if args.quick else read_configurations(args.suite)
    if args.configs:
        configs = [configs[int(k)] for k in args.configs.split(",")]
    seconds = [1.0] if args.quick else [float(s) for s in args.seconds.split(",")]
    simulations = [60] if args.quick else [int(n) for n in args.simulations.split(",") if n]
    headroom = 2.0 if args.quick else (float(args.headroom_seconds) if args.headroom_seconds else None)
    os.makedirs(args.out, exist_ok=True)
    path = raw_path(args)
    done = []
    if args.merge:
        for raw in args.merge.split(","):
            done += read_raw(raw)
        done = unite(done)
        configs = [c for c in configs if any((c["graph"], c["cluster"]) == (r["graph"], r["cluster"]) for r in done)]
    elif args.resume:
        for raw in (path + ".gz", path):  # an earlier report's rows, then the journal of a run stopped since
            if os.path.exists(raw):
                done += read_raw(raw)
        done = unite(done)  # a journal's row replaces an earlier report's for the same configuration
    elif os.path.exists(path):
        os.remove(path)
    earlier = {(r["graph"], r["cluster"], r["seed"]): k for k, r in enumerate(done)}
    for config in configs:
        k = earlier.get((config["graph"], config["cluster"], args.seed))
        if args.merge and k is not None:
            continue
        row = measure(config, seconds, simulations, args.seed, headroom, done[k] if k is not None else None)
        if k is not None and row is done[k]:
            continue
        if k is None:
            done.append(row)
        else:
            done[k] = row
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
    wanted = {(c["graph"], c["cluster"]) for c in configs}
    rows = [r for r in done if (r["graph"], r["cluster"]) in wanted]
    order = {(c["graph"], c["cluster"]): k for k, c in enumerate(configs)}
    rows.sort(key=lambda r: order[(r["graph"], r["cluster"])])
    with gzip.open(path + ".gz.tmp", "wt") as f:  # written whole, then renamed: a killed run keeps the journal
        f.writelines(json.dumps(r) + "\n" for r in done)  # rows of configurations left out by --configs too
    os.replace(path + ".gz.tmp", path + ".gz")
    if os.path.exists(path):
        os.remove(path)
    return write_report(report, rows, seconds, simulations, headroom)


if __name__ == "__main__":
    print(main())
