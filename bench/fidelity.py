#!/usr/bin/python3
"""Fidelity of the simulator against the CPU replay executor, on real-size models.

Calibrates the CPU backend (`placelab calibrate`: micro-benchmarks only, never the graphs below), then
for real-size graphs (zoo models at their default sizes and batch 1, torch.fx imports of torchvision
models at batch 2, 224x224, inference) and 30 placements each (heuristic placers, contiguous splits,
communication-heavy ones, perturbed heuristics, random) compares the simulator's predicted step time on
the calibrated cluster with the measured median step time of `placelab replay` (each placement replayed in
--rounds rounds, each round in a new shuffled order, so that a slow spell of the machine spreads over all
placements instead of slowing a few; the noise column is how far one placement's rounds disagree, and the
rounds' Spearman how well one round ranks the placements against another, the measurement's own agreement). Reports
per graph (pooling graphs of different sizes flatters rank correlation) MAPE, p95 error, Spearman and Kendall,
the pairs ordered correctly when measured more than 5% apart, and whether the simulator's pick is within
5% of the measured best. Of torchvision's models only resnet18, vgg11, mobilenet_v2 and alexnet may ever
be used for fitting or tuning (none is: the fit is on micro-benchmarks); the others here are held-out
checks. Writes fidelity_table.md, fidelity.json.gz (every row and the calibration, gzip-compressed: a full
run's is 1.4 MB as text) and a scatter plot (fidelity.png) into --out-dir (bench/results by default, a
temporary folder with --quick); bench/results/fidelity.md is the hand-written reading of those.
--rescore and --replot read a fidelity.json, compressed or not.

    /usr/bin/python3 bench/fidelity.py --bin build/release/cli/placelab          # full run, minutes
    /usr/bin/python3 bench/fidelity.py --quick --bin build/dev/cli/placelab --out-dir /tmp/f   # seconds
    /usr/bin/python3 bench/fidelity.py --rescore bench/results/fidelity.json.gz --out-dir /tmp/f  # new model, old runs

Learned placers are in the mix: `gdp` (the pre-trained policy, zero-shot) and `hdp` (100 training steps
on each graph against the simulator of the calibrated cluster, its default).
"""
import argparse
import datetime
import gzip
import json
import math
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time

# Real-size graphs: zoo models at their defaults but batch 1 (GNMT with 20 decoding steps and 4 layers,
# so that one replay step stays under a second on one core), and torchvision models at batch 2. The
# "held-out" ones are torchvision models no part of placelab was ever fitted or tuned on.
GRAPHS = [
    ("inception_v3", "inception_v3:batch=1"),
    ("resnet50", "resnet50:batch=1"),
    ("bert", "bert:batch=1"),
    ("gnmt", "gnmt:batch=1,layers=4,steps=20"),
    ("rnnlm", "rnnlm:batch=1"),
    ("resnet18", "torchvision:resnet18:batch=2"),
    ("vgg11", "torchvision:vgg11:batch=2"),
    ("mobilenet_v2", "torchvision:mobilenet_v2:batch=2"),
    ("alexnet", "torchvision:alexnet:batch=2"),
    ("resnet34 (held out)", "torchvision:resnet34:batch=2"),
    ("squeezenet1_0 (held out)", "torchvision:squeezenet1_0:batch=2"),
    ("densenet121 (held out)", "torchvision:densenet121:batch=2"),
    ("googlenet (held out)", "torchvision:googlenet:batch=2"),
    ("efficientnet_b0 (held out)", "torchvision:efficientnet_b0:batch=2"),
]
QUICK_GRAPHS = [("bert-tiny", "bert:batch=1,seq_len=8,layers=1,hidden=32,heads=2,vocab=100")]
PLACERS = ["heft", "metis", "scotch", "round_robin", "m_etf", "m_topo", "m_sct", "single_device",
           "human_expert", "gdp", "hdp"]


def load_json(path):
    """A JSON document, gzip-compressed or not (told by its first bytes, not its name)."""
    with open(path, "rb") as f:
        data = f.read()
    return json.loads(gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data)


def run(bin_path, *args, timeout=600):
    try:
        proc = subprocess.run([bin_path, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"placelab {' '.join(args)}: no answer in {timeout} s")
    if proc.returncode != 0:
        raise RuntimeError(f"placelab {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def topo_order(n, edges):
    preds = [0] * n
    succ = [[] for _ in range(n)]
    for src, dst in edges:
        succ[src].append(dst)
        preds[dst] += 1
    ready = [i for i in range(n) if preds[i] == 0]
    order = []
    while ready:
        v = min(ready)
        ready.remove(v)
        order.append(v)
        for w in succ[v]:
            preds[w] -= 1
            if preds[w] == 0:
                ready.append(w)
    return order


def placements_for(graph_doc, heuristics, devices, count, rng):
    """(kind, name, device_of) tuples: heuristics, splits, communication-heavy, perturbed, random."""
    ops = graph_doc["ops"]
    n = len(ops)
    index = {op["name"]: i for i, op in enumerate(ops)}
    edges = [(e["src"] if isinstance(e["src"], int) else index[e["src"]],
              e["dst"] if isinstance(e["dst"], int) else index[e["dst"]]) for e in graph_doc.get("edges", [])]
    order = topo_order(n, edges)
    out = [("heuristic", name, place) for name, place in heuristics]
    for frac in (0.25, 0.5, 0.75):  # contiguous splits of the topological order
        cut = int(frac * n)
        place = [0] * n
        for pos, op in enumerate(order):
            place[op] = 0 if pos < cut else 1
        out.append(("split", f"split{int(frac * 100)}", place))
    alternate = [0] * n
    for pos, op in enumerate(order):
        alternate[op] = pos % devices
    out.append(("comm-heavy", "alternate", alternate))
    for k in range(3):  # every other block of 2^k ops in topological order
        block = [0] * n
        for pos, op in enumerate(order):
            block[op] = (pos >> (k + 1)) % devices
        out.append(("comm-heavy", f"blocks{2 << k}", block))
    bases = [p for _, _, p in out if len(set(p)) > 1] or [alternate]
    for i in range(min(8, max(0, count - len(out)) // 3)):  # heuristics with some ops moved
        base = list(bases[i % len(bases)])
        for op in rng.sample(range(n), max(1, n * (5 + 10 * (i % 3)) // 100)):
            base[op] = rng.randrange(devices)
        out.append(("perturbed", f"perturbed{i}", base))
    i = 0
    while len(out) < count:  # random, with a share on device 0 from 10% to 90%
        share = 0.1 + 0.8 * rng.random()
        out.append(("random", f"random{i}", [0 if rng.random() < share else rng.randrange(1, devices)
                                             for _ in range(n)]))
        i += 1
    return out[:count]


def ranks(values):
    order = sorted(range(len(values)), key=lambda i: values[i])
    r = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            r[order[k]] = (i + j) / 2
        i = j + 1
    return r


def pearson(x, y):
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sx = math.sqrt(sum((a - mx) ** 2 for a in x))
    sy = math.sqrt(sum((b - my) ** 2 for b in y))
    return sxy / (sx * sy) if sx > 0 and sy > 0 else float("nan")


def spearman(x, y):
    return pearson(ranks(x), ranks(y))


def kendall_tau_b(x, y):
    concordant = discordant = tx = ty = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                continue
            if dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                concordant += 1
            else:
                discordant += 1
    denom = math.sqrt((concordant + discordant + tx) * (concordant + discordant + ty))
    return (concordant - discordant) / denom if denom > 0 else float("nan")


def copy_miss(rows, key="measured_s"):
    """(correlation, ns per byte): how the signed error (predicted / measured - 1) follows the bytes a placement
    copies, and the time per byte copied that a least-squares line of measured - predicted on those bytes adds.
    A strong negative correlation is a cost the model misses in proportion to copying, which noise (unrelated to
    the placement) would not give; NaN when no placement copies or all copy the same."""
    copied = [r.get("bytes_copied", 0) for r in rows]
    errors = [r["predicted_s"] / r[key] - 1 for r in rows]
    mean = sum(copied) / len(copied)
    var = sum((c - mean) ** 2 for c in copied)
    if var == 0:
        return float("nan"), float("nan")
    missing = [r[key] - r["predicted_s"] for r in rows]
    m_mean = sum(missing) / len(missing)
    slope = sum((c - mean) * (d - m_mean) for c, d in zip(copied, missing)) / var
    return pearson(copied, errors), slope * 1e9


def rounds_spearman(rows):
    """The median over pairs of rounds of the Spearman between one round's measurements and another's: how well
    the measurement ranks the placements against itself. Where it is low the placements differ by less than the
    noise and no ranking of them means much (the predictions are scored against the median over rounds, which
    averages some of that noise away); NaN with fewer than two rounds."""
    rounds = min(len(r.get("rounds_s", [])) for r in rows)
    pairs = [spearman([r["rounds_s"][i] for r in rows], [r["rounds_s"][j] for r in rows])
             for i in range(rounds) for j in range(i + 1, rounds)]
    return statistics.median(pairs) if pairs else float("nan")


def percentile(values, q):
    s = sorted(values)
    if not s:
        return float("nan")
    pos = (len(s) - 1) * q
    lo, hi = math.floor(pos), math.ceil(pos)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def metrics(rows, key="measured_s"):
    """Errors and rank agreement of the predictions with rows[i][key] (the median run, or the fastest)."""
    pred = [r["predicted_s"] for r in rows]
    meas = [r[key] for r in rows]
    errors = [abs(p / m - 1) for p, m in zip(pred, meas)]
    pairs = correct = 0
    for i in range(len(rows)):
        for j in range(i + 1, len(rows)):
            if abs(meas[i] - meas[j]) <= 0.05 * min(meas[i], meas[j]):
                continue
            pairs += 1
            correct += (pred[i] - pred[j]) * (meas[i] - meas[j]) > 0
    best_sim = min(range(len(rows)), key=lambda i: pred[i])
    copy_corr, copy_ns = copy_miss(rows, key)
    return {
        "placements": len(rows),
        "mape": sum(errors) / len(errors),
        "p95_error": percentile(errors, 0.95),
        "spearman": spearman(pred, meas),
        "kendall": kendall_tau_b(pred, meas),
        "pairs_over_5pct": pairs,
        "pairs_ordered": correct / pairs if pairs else float("nan"),
        "sim_best_measured_over_best": meas[best_sim] / min(meas),
        "measured_spread": max(meas) / min(meas),
        "sim_best_within_5pct": meas[best_sim] <= 1.05 * min(meas),
        # How far one placement's rounds disagree (the median over placements of slowest / fastest round - 1):
        # the measurement's own noise, which no prediction can beat.
        "noise": statistics.median(max(r["rounds_s"]) / min(r["rounds_s"]) - 1 for r in rows)
                 if all(len(r.get("rounds_s", [])) > 1 for r in rows) else float("nan"),
        "rounds_spearman": rounds_spearman(rows),
        "error_copies_correlation": copy_corr,
        "missing_ns_per_byte_copied": copy_ns,
    }


def scatter(rows_by_graph, path):
    """Predicted versus measured: the median run (left) and the fastest run (right) of each placement."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.5), sharex=True, sharey=True)
    for ax, key, what in zip(axes, ("measured_s", "fastest_s"), ("median run", "fastest run")):
        lo, hi = float("inf"), 0
        for name, rows in rows_by_graph.items():
            p = [1e3 * r["predicted_s"] for r in rows]
            m = [1e3 * r[key] for r in rows]
            ax.scatter(p, m, s=12, label=name, alpha=0.75)
            lo, hi = min(lo, *p, *m), max(hi, *p, *m)
        ax.plot([lo, hi], [lo, hi], "k--", lw=1, label="measured = predicted")
        ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], color="grey", alpha=0.15, label="±10%")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("predicted step time (ms), simulator on the calibrated cluster")
        ax.set_ylabel(f"measured step time (ms), CPU replay ({what})")
        ax.set_title(f"CPU replay, {what} of each placement")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def fmt_row(name, m):
    noise = "-" if math.isnan(m["noise"]) else f"{100 * m['noise']:.1f}%"
    agreement = "-" if math.isnan(m["rounds_spearman"]) else f"{m['rounds_spearman']:.3f}"
    return (f"| {name} | {m['placements']} | {100 * (m['measured_spread'] - 1):.0f}% | {noise} | {agreement} | "
            f"{100 * m['mape']:.1f}% | "
            f"{100 * m['p95_error']:.1f}% | "
            f"{m['spearman']:.3f} | {m['kendall']:.3f} | {100 * m['pairs_ordered']:.1f}% ({m['pairs_over_5pct']}) | "
            f"{'yes' if m['sim_best_within_5pct'] else 'no'} ({100 * (m['sim_best_measured_over_best'] - 1):.1f}%) |")


def build_graph(bin_path, name, spec, folder):
    """Writes the graph `spec` (a zoo model or torchvision:NAME:batch=B) into `folder`; returns its path."""
    graph_file = os.path.join(folder, f"{name.split()[0]}.json")
    if spec.startswith("torchvision:"):
        import paperlib  # torch.fx import through the Python package (seconds; cached)
        paperlib.placelab.write_graph(paperlib.torchvision_graph(spec), graph_file)
    else:
        run(bin_path, "graph", "--model", spec.split(":")[0],
            *[x for kv in spec.split(":")[1].split(",") for x in ("--" + kv.split("=")[0], kv.split("=")[1])],
            "--out", graph_file)
    return graph_file


def plain_roofline(cluster, folder):
    """The same cluster without its efficiency curves (the plain roofline), written into `folder`."""
    with open(cluster) as f:
        plain = json.load(f)
    for device in plain["devices"]:
        device.pop("efficiency_curves", None)
        device.pop("contended_efficiency_curves", None)
    path = os.path.join(folder, "roofline-only.json")
    with open(path, "w") as f:
        json.dump(plain, f)
    return path


def measure_graph(args, name, graph_file, cluster, plain_cluster, count, rng, tmp):
    """The rows of one graph: each placement replayed in `args.rounds` rounds, every round in a fresh
    shuffled order, so that a machine that slows down for a while slows every placement a little rather
    than a few a lot; the measured time is the median of all runs."""
    with open(graph_file) as f:
        graph_doc = json.load(f)
    heuristics = []
    for placer in ([] if args.quick else PLACERS) + (["heft"] if args.quick else []):
        out = os.path.join(tmp, f"{name}-{placer}.json")
        try:
            run(args.bin, "place", "--graph", graph_file, "--cluster", cluster, "--placer", placer, "--out", out,
                timeout=60)
        except RuntimeError as e:
            print(f"  {name}: placer {placer} skipped: {e}", file=sys.stderr)
            continue
        with open(out) as f:
            heuristics.append((placer, json.load(f)["device_of"]))
    rows = []
    for k, (kind, pname, place) in enumerate(placements_for(graph_doc, heuristics, 2, count, rng)):
        pfile = os.path.join(tmp, f"p{k}.json")
        with open(pfile, "w") as f:
            json.dump({"format": "placelab.placement", "version": 1, "graph": graph_doc["name"], "device_of": place}, f)
        roofline_s = json.loads(run(args.bin, "simulate", "--graph", graph_file, "--cluster", plain_cluster,
                                    "--placement", pfile, "--json"))["step_time_s"]
        rows.append({"graph": name, "kind": kind, "placement": pname, "roofline_only_s": roofline_s, "device_of": place,
                     "runs_s": [], "rounds_s": [], "file": pfile})
    for _ in range(args.rounds):
        for row in rng.sample(rows, len(rows)):
            doc = json.loads(run(args.bin, "replay", "--graph", graph_file, "--cluster", cluster,
                                 "--placement", row["file"], "--backend", "cpu", "--repeats", str(args.repeats),
                                 "--warmup", str(args.warmup), "--json"))
            row.update(predicted_s=doc["predicted_step_s"], transfers=doc["transfers"], bytes_copied=doc["bytes_copied"])
            row["runs_s"] += doc["step_times_s"]
            row["rounds_s"].append(doc["measured_step_s"])
    for row in rows:
        del row["file"]
        row.update(measured_s=statistics.median(row["runs_s"]), fastest_s=min(row["runs_s"]))
    return rows


def given_calibration(args, path, tmp):
    """(cluster file, calibration record) of `path`: a calibrated cluster, used as it is, or a
    placelab.calibration document (`calibrate --measurements`), whose points this build fits again."""
    with open(path) as f:
        doc = json.load(f)
    if doc.get("format") != "placelab.calibration":
        return path, {"cluster": doc}
    measurements = os.path.join(tmp, "refit.json")
    cluster = os.path.join(args.out_dir, "calibrated-cpu-2.json")
    run(args.bin, "calibrate", "--refit", path, "--out", cluster, "--measurements", measurements)
    with open(measurements) as f:
        return cluster, json.load(f)


def rescore(args, doc, tmp):
    """The rows of a fidelity.json predicted again by today's simulator, on its calibration's points fitted
    again by today's `placelab calibrate --refit` (or on --calibration): the same measurements, a new model."""
    from paperlib import placelab  # the package next to the sources
    if args.calibration:
        cluster, calibration = given_calibration(args, args.calibration, tmp)
    elif "points" not in doc["calibration"]:  # a run on a given cluster: no points to fit again
        print("fidelity: the run was made on a given cluster (--calibration): predicting on it as it was",
              file=sys.stderr)
        cluster, calibration = os.path.join(tmp, "recorded-cluster.json"), doc["calibration"]
        with open(cluster, "w") as f:
            json.dump(doc["calibration"]["cluster"], f)
    else:
        recorded = os.path.join(tmp, "recorded-calibration.json")
        with open(recorded, "w") as f:
            json.dump(doc["calibration"], f)
        cluster, calibration = given_calibration(args, recorded, tmp)
    plain_cluster = plain_roofline(cluster, tmp)
    specs = dict(GRAPHS + QUICK_GRAPHS)
    rows_by_graph = {}
    for row in doc["rows"]:
        rows_by_graph.setdefault(row["graph"], []).append(dict(row))
    for name, rows in rows_by_graph.items():
        graph = placelab.read_graph(build_graph(args.bin, name, specs[name], tmp))
        sims = [placelab.Simulator(graph, placelab.read_cluster(c)) for c in (cluster, plain_cluster)]
        for row in rows:
            row["predicted_s"], row["roofline_only_s"] = (s.simulate(row["device_of"])["step_time_s"] for s in sims)
    return rows_by_graph, calibration


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.environ.get("PLACELAB_BIN", "build/release/cli/placelab"))
    ap.add_argument("--out-dir", help="default bench/results; with --quick a fresh temporary folder, so that a "
                    "smoke run never replaces the recorded results")
    ap.add_argument("--placements", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3, help="replays of each placement, in shuffled order per round")
    ap.add_argument("--repeats", type=int, default=2, help="measured runs per replay")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--calibration", help="instead of calibrating: a calibrated cluster, or a calibration document "
                    "(calibrate --measurements) fitted again by this build")
    ap.add_argument("--graphs", help="comma-separated subset of the graph names")
    ap.add_argument("--quick", action="store_true", help="one tiny graph, 4 placements, quick calibration")
    ap.add_argument("--replot", help="only redraw the scatter plot of this fidelity.json into --out-dir")
    ap.add_argument("--rescore", help="measure nothing: predict this fidelity.json's placements again with today's "
                    "simulator and today's fits of its calibration points")
    args = ap.parse_args()
    if args.out_dir is None:
        args.out_dir = tempfile.mkdtemp(prefix="fidelity_quick_") if args.quick else os.path.join(here, "results")
        print(f"fidelity: writing to {args.out_dir}", file=sys.stderr)
    os.makedirs(args.out_dir, exist_ok=True)
    if args.replot:
        rows = load_json(args.replot)["rows"]
        by_graph = {}
        for r in rows:
            by_graph.setdefault(r["graph"], []).append(r)
        scatter(by_graph, os.path.join(args.out_dir, "fidelity.png"))
        return
    started = time.time()
    load_before = os.getloadavg()
    if args.rescore:
        original = load_json(args.rescore)
        with tempfile.TemporaryDirectory() as tmp:
            rows_by_graph, calibration = rescore(args, original, tmp)
        extra = {"rescored_from": {k: original.get(k) for k in ("command", "commit", "date", "machine",
                                                                 "load_average_before", "load_average_after")}}
        return report(args, here, rows_by_graph, calibration, load_before, started, extra)
    if load_before[0] > 0.5 * (os.cpu_count() or 1) and not args.quick:
        print(f"fidelity: warning: load average {load_before[0]:.1f} on {os.cpu_count()} cores: other work will "
              "be measured too; pause it for figures worth recording", file=sys.stderr)
    graphs = QUICK_GRAPHS if args.quick else GRAPHS
    if args.graphs:
        graphs = [g for g in graphs if g[0] in args.graphs.split(",")]
    count = 4 if args.quick else args.placements
    if args.quick:
        args.rounds, args.repeats, args.warmup = 2, 1, 0
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        if args.calibration:
            cluster, calibration = given_calibration(args, args.calibration, tmp)
        else:
            cluster = os.path.join(args.out_dir, "calibrated-cpu-2.json")
            measurements = os.path.join(tmp, "calibration.json")
            print("calibrating the CPU backend ...", file=sys.stderr)
            run(args.bin, "calibrate", "--backend", "cpu", "--devices", "2", "--out", cluster,
                "--measurements", measurements, *(["--quick", "--repeats", "1"] if args.quick else []))
            with open(measurements) as f:
                calibration = json.load(f)
        plain_cluster = plain_roofline(cluster, tmp)
        rows_by_graph = {}
        for name, spec in graphs:
            graph_file = build_graph(args.bin, name, spec, tmp)
            rows = measure_graph(args, name, graph_file, cluster, plain_cluster, count, rng, tmp)
            rows_by_graph[name] = rows
            m = metrics(rows)
            print(f"  {name}: MAPE {100 * m['mape']:.1f}%  p95 {100 * m['p95_error']:.1f}%  Spearman {m['spearman']:.3f}  "
                  f"spread {100 * (m['measured_spread'] - 1):.0f}%  noise {100 * m['noise']:.1f}%  "
                  f"pick within 5%: {m['sim_best_within_5pct']}", file=sys.stderr, flush=True)
    report(args, here, rows_by_graph, calibration, load_before, started, {"rounds": args.rounds})


def report(args, here, rows_by_graph, calibration, load_before, started, extra):
    """Writes fidelity.json.gz, fidelity_table.md and fidelity.png into args.out_dir and prints the table."""
    load_after = os.getloadavg()
    all_rows = [r for rows in rows_by_graph.values() for r in rows]
    per_graph = {name: metrics(rows) for name, rows in rows_by_graph.items()}
    pooled = metrics(all_rows)
    per_graph_fastest = {name: metrics(rows, "fastest_s") for name, rows in rows_by_graph.items()}
    per_graph_roofline = {name: metrics([dict(r, predicted_s=r["roofline_only_s"]) for r in rows])
                          for name, rows in rows_by_graph.items()}
    pooled_fastest = metrics(all_rows, "fastest_s")
    mean = {k: sum(m[k] for m in per_graph.values()) / len(per_graph)
            for k in ("mape", "p95_error", "spearman", "kendall", "pairs_ordered")}
    by_kind = {}
    for r in all_rows:
        by_kind.setdefault(r["kind"], []).append(abs(r["predicted_s"] / r["measured_s"] - 1))
    commit = subprocess.run(["git", "-C", here, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    result = {"command": " ".join(["/usr/bin/python3", "bench/fidelity.py", *sys.argv[1:]]), "commit": commit,
              "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
              "load_average_before": load_before, "load_average_after": load_after,
              "seconds": time.time() - started, "repeats": args.repeats, "warmup": args.warmup, **extra,
              "calibration": calibration, "per_graph": per_graph, "pooled": pooled, "mean_over_graphs": mean,
              "per_graph_fastest_run": per_graph_fastest, "pooled_fastest_run": pooled_fastest,
              "per_graph_roofline_only": per_graph_roofline,
              "mape_by_kind": {k: sum(v) / len(v) for k, v in by_kind.items()}, "rows": all_rows}
    # mtime 0: the same result gives the same bytes, so a record changes in git only where its figures do
    with gzip.GzipFile(os.path.join(args.out_dir, "fidelity.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(result, indent=1).encode())
    scatter(rows_by_graph, os.path.join(args.out_dir, "fidelity.png"))
    lines = ["| graph | placements | measured spread | noise | rounds' Spearman | MAPE | p95 error | Spearman | Kendall | "
             "pairs ordered (pairs >5% apart) | sim's best within 5% of measured best |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    lines += [fmt_row(name, m) for name, m in per_graph.items()]
    lines.append(fmt_row("**pooled**", pooled))
    lines += ["", "Against the fastest measured run instead of the median (less sensitive to other processes):", "",
              lines[0], lines[1]]
    lines += [fmt_row(name, m) for name, m in per_graph_fastest.items()]
    lines.append(fmt_row("**pooled**", pooled_fastest))
    lines += ["", "Error against copying: the correlation of each placement's signed error with the bytes it copies, "
              "and the time per byte copied that the measurements add beyond the predictions (a least-squares "
              "line); a strong negative correlation is a copy cost the model misses, not noise:", "",
              "| graph | correlation | missing ns per byte copied |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {m['error_copies_correlation']:+.2f} | {m['missing_ns_per_byte_copied']:.3f} |"
              for name, m in per_graph.items()]
    lines += ["", "The same measurements against the plain roofline's predictions (the calibrated cluster without "
              "its efficiency curves):", "", lines[0], lines[1]]
    lines += [fmt_row(name, m) for name, m in per_graph_roofline.items()]
    with open(os.path.join(args.out_dir, "fidelity_table.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(f"mean over graphs: MAPE {100 * mean['mape']:.1f}%, Spearman {mean['spearman']:.3f}, "
          f"Kendall {mean['kendall']:.3f}; load average {load_before[0]:.1f} -> {load_after[0]:.1f}; "
          f"{time.time() - started:.0f} s")
    for kind, errs in sorted(by_kind.items()):
        print(f"  {kind:<11} MAPE {100 * sum(errs) / len(errs):.1f}% over {len(errs)}")


if __name__ == "__main__":
    main()
