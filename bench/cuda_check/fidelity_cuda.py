#!/usr/bin/python3
"""Fidelity of the simulator against the CUDA replay on one GPU, with the PyTorch step beside it (issue 54).

The one prepared run of a GPU session (bench/cuda_check/fidelity_cuda.sh runs it after the [cuda] tests):

1. `placelab calibrate --backend cuda --devices 2 --share-gpus --host --contention`: the host as cpu0, two
   streams of the one GPU as gpu0 and gpu1 (one stream alone gives their own curves, both at once the
   contended ones), products on cuBLASLt and convolutions on cuDNN (TF32).
2. The PyTorch reference (torch_step.py): each model's real training step beside the replay and the
   prediction of its single-GPU placement.
3. Five zoo models' training graphs (the sizes of torch_step.py) x 30 placements: the single GPU, placers
   on the calibrated cluster, splits of the topological order between the two streams, alternating and
   block-wise ones (communication-heavy), perturbed and random stream assignments, and CPU + GPU ones
   that move a share of the small ops (<= 10 MFLOP and <= 2 MB) to the host. Each graph's placements are
   replayed in --rounds rounds, each in one `placelab replay` process with every placement in a fresh
   shuffled order; a placement's measured time is the median of all its runs.
4. bench/fidelity.py's statistics per graph and pooled (MAPE, p95, Spearman, Kendall, pairs ordered,
   whether the simulator's pick is within 5% of the measured best), per kind of placement, and a Chrome
   trace of one run (resnet50's half-and-half split over the two streams).

Everything lands in --out (at most 8 files, as the device tool returns them): summary.md (the tables),
fidelity_cuda.json.gz (every row, the calibration, the PyTorch rows, the environment), torch_step.json,
trace.json.gz, raw.tar.gz (the graphs' replay JSON lines, the cluster, the placements) and the log of the
shell wrapper. Steps that fail are reported and the run goes on; a deadline (--budget-s) cuts the rounds
short rather than the run.

    python3 bench/cuda_check/fidelity_cuda.py --bin .devbundle/bin/placelab --out $OUT     # on the GPU
    /usr/bin/python3 bench/cuda_check/fidelity_cuda.py --dry-run --bin build/release/cli/placelab --out /tmp/fc

--dry-run runs every step with the CPU backend on tiny graphs (three thread-group devices: cpu0 stands in
for the host, cpu1 and cpu2 for the streams), PyTorch on the CPU: a check of the script, not a measurement.
"""
import argparse
import datetime
import gzip
import importlib.util
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
GRAPHS = ["resnet50", "inception_v3", "vit", "bert", "gpt"]
PLACERS = ["heft", "m_etf", "m_sct", "m_topo"]
HOST, STREAMS = 0, (1, 2)  # device indices: the host (cpu0), then the GPU's two streams (gpu0, gpu1)
SMALL_FLOPS, SMALL_BYTES = 1e7, 2e6  # ops the CPU + GPU placements may move to the host


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


fidelity = load("fidelity", os.path.join(HERE, "..", "fidelity.py"))  # its statistics and topological order
torch_step = load("torch_step", os.path.join(HERE, "torch_step.py"))  # the models' zoo sizes (torch not imported)


class Run:
    """The run's arguments, deadline, work folder and log of what failed."""

    def __init__(self, args):
        self.args, self.started = args, time.time()
        self.work = tempfile.mkdtemp(prefix="fidelity_cuda_")
        self.failures = []
        self.notes = []  # what the runs said on stderr that matters (gated runs that stalled)

    def left(self):
        return self.args.budget_s - (time.time() - self.started)

    def placelab(self, *args, timeout=120):
        """stdout of placelab, or None (the failure recorded) on an error or timeout; partial stdout on a timeout."""
        t = min(timeout, self.left() - 5)
        if t < 3:
            self.failures.append(f"no time left for: placelab {' '.join(args[:3])}")
            return None
        print(f"+ placelab {' '.join(a if len(a) < 80 else a[:77] + '...' for a in args)}", file=sys.stderr, flush=True)
        try:
            proc = subprocess.run([self.args.bin, *args], capture_output=True, text=True, timeout=t)
        except subprocess.TimeoutExpired as e:
            self.failures.append(f"timeout after {t:.0f} s: placelab {' '.join(args[:4])}")
            return e.stdout.decode() if isinstance(e.stdout, bytes) else e.stdout
        if proc.returncode != 0:
            self.failures.append(f"placelab {' '.join(args[:4])}: {proc.stderr.strip()[-2000:]}")
            return None
        stalls = [line for line in proc.stderr.splitlines() if "stalled" in line]
        if stalls:
            self.notes.append(f"placelab {args[0]} ({len(stalls)} lines): {stalls[0]}")
        return proc.stdout


def calibrate(run):
    """(cluster file, calibration document) of this run's backend."""
    cluster, measurements = os.path.join(run.work, "cluster.json"), os.path.join(run.work, "calibration.json")
    if run.args.dry_run:
        extra = ["--backend", "cpu", "--devices", "3", "--quick", "--repeats", "1", "--passes", "1", "--no-pin"]
    else:
        extra = ["--backend", "cuda", "--devices", "2", "--share-gpus", "--host", "--contention"]
    if run.placelab("calibrate", *extra, "--out", cluster, "--measurements", measurements, timeout=240) is None:
        raise SystemExit(f"fidelity_cuda: calibration failed: {run.failures[-1]}")
    with open(measurements) as f:
        calibration = json.load(f)
    kinds = [d["kind"] for d in calibration["cluster"]["devices"]]
    want = ["cpu"] * 3 if run.args.dry_run else ["cpu", "gpu", "gpu"]
    if kinds != want:
        raise SystemExit(f"fidelity_cuda: the calibrated cluster's devices are {kinds}, expected {want}")
    return cluster, calibration


def build_graph(run, name):
    """The zoo model's training graph file (torch_step.py's sizes)."""
    params = torch_step.MODELS[name]["tiny" if run.args.dry_run else "full"]
    path = os.path.join(run.work, f"{name}.json")
    args = [x for k, v in params.items() for x in (f"--{k}", str(v))]
    if run.placelab("graph", "--model", name, *args, "--training", "--out", path) is None:
        return None
    return path


def placements(run, graph_file, cluster, count, rng):
    """(kind, name, device_of): the single GPU, placers, stream splits and comm-heavy ones, perturbed, random, CPU + GPU."""
    with open(graph_file) as f:
        doc = json.load(f)
    ops = doc["ops"]
    n = len(ops)
    index = {op["name"]: i for i, op in enumerate(ops)}
    edges = [(index[e["src"]] if isinstance(e["src"], str) else e["src"],
              index[e["dst"]] if isinstance(e["dst"], str) else e["dst"]) for e in doc["edges"]]
    order = fidelity.topo_order(n, edges)
    a, b = STREAMS
    out = [("single", "single", [a] * n)]
    for placer in PLACERS if count >= 20 else PLACERS[:1]:
        path = os.path.join(run.work, f"placer-{placer}.json")
        if run.placelab("place", "--graph", graph_file, "--cluster", cluster, "--placer", placer, "--out", path) is not None:
            with open(path) as f:
                out.append(("placer", placer, json.load(f)["device_of"]))
    for frac in (0.25, 0.5, 0.75):
        place = [a] * n
        for pos, op in enumerate(order):
            place[op] = a if pos < frac * n else b
        out.append(("streams", f"split{int(100 * frac)}", place))
    comm = []
    for k in range(4):  # every op alternating, then blocks of 2, 4, 8 ops in topological order
        place = [a] * n
        for pos, op in enumerate(order):
            place[op] = STREAMS[(pos >> k) % 2]
        comm.append(("streams", "alternate" if k == 0 else f"blocks{1 << k}", place))
    bases = [p for _, _, p in out + comm]
    small = [i for i, op in enumerate(ops) if op.get("flops", 0) <= SMALL_FLOPS
             and op.get("bytes_read", 0) + op.get("bytes_written", 0) <= SMALL_BYTES] or list(range(n))
    for i in range(max(2, count // 4)):  # a share of the small ops on the host, over the single GPU or another base
        place = list(bases[0] if i % 2 == 0 else bases[1 + i % (len(bases) - 1)])
        share = (0.02, 0.05, 0.1, 0.2)[i % 4]
        for op in rng.sample(small, max(1, int(share * len(small)))):
            place[op] = HOST
        out.append(("cpu+gpu", f"host{i}-{int(100 * share)}pct", place))
    out += comm
    for i in range(max(1, count // 8)):  # a base with 5-20% of its ops moved to the other stream
        place = list(bases[i % len(bases)])
        for op in rng.sample(range(n), max(1, n * (5 + 5 * (i % 4)) // 100)):
            place[op] = b if place[op] == a else a
        out.append(("streams", f"perturbed{i}", place))
    i = 0
    while len(out) < count:  # random stream assignments, 10-90% on the first
        share = 0.1 + 0.8 * rng.random()
        out.append(("streams", f"random{i}", [a if rng.random() < share else b for _ in range(n)]))
        i += 1
    return out[:count]


def replay_rounds(run, name, graph_file, cluster, rows, rng):
    """Replays every placement of `rows` in rounds (one process each, a fresh shuffled order); fills their runs."""
    a = run.args
    files = {}
    for k, row in enumerate(rows):
        files[row["placement"]] = os.path.join(run.work, f"{name}-p{k}.json")
        with open(files[row["placement"]], "w") as f:
            json.dump({"format": "placelab.placement", "version": 1, "device_of": row["device_of"]}, f)
    backend = ["--backend", "cpu", "--no-pin"] if a.dry_run else ["--backend", "cuda", "--share-gpus"]
    raw = []
    for r in range(a.rounds):
        order = rng.sample(rows, len(rows))
        args = ["replay", "--graph", graph_file, "--cluster", cluster, *backend, "--repeats", str(a.repeats),
                "--warmup", str(a.warmup), "--json"]
        for row in order:
            args += ["--placement", files[row["placement"]]]
        out = run.placelab(*args, timeout=a.round_timeout_s)
        by_file = {v: k for k, v in files.items()}
        for line in (out or "").splitlines():
            try:
                doc = json.loads(line)
            except json.JSONDecodeError:  # the last line of a round cut by its timeout
                continue
            raw.append(dict(doc, round=r))
            row = next(x for x in rows if x["placement"] == by_file[doc["placement"]])
            row.update(predicted_s=doc["predicted_step_s"], bytes_copied=doc["bytes_copied"], transfers=doc["transfers"],
                       library_ops=doc.get("library_ops"), gpu_versions=doc.get("gpu_versions", ""))
            row["runs_s"] += doc["step_times_s"]
            row["rounds_s"].append(doc["measured_step_s"])
        if run.left() < 60 and r + 1 < a.rounds:
            run.failures.append(f"{name}: rounds cut at {r + 1} of {a.rounds} (deadline)")
            break
    for row in rows:
        if row["runs_s"]:
            row.update(measured_s=statistics.median(row["runs_s"]), fastest_s=min(row["runs_s"]))
    return raw


def trace(run, graph_file, cluster, device_of, path):
    """A Chrome trace of one run of `device_of` (measured beside predicted), gzip-compressed into `path`."""
    placement, plain = os.path.join(run.work, "trace-placement.json"), os.path.join(run.work, "trace.json")
    with open(placement, "w") as f:
        json.dump({"format": "placelab.placement", "version": 1, "device_of": device_of}, f)
    backend = ["--backend", "cpu", "--no-pin"] if run.args.dry_run else ["--backend", "cuda", "--share-gpus"]
    if run.placelab("replay", "--graph", graph_file, "--cluster", cluster, "--placement", placement, *backend,
                    "--repeats", "3", "--warmup", "1", "--trace", plain) is not None:
        with open(plain, "rb") as src, gzip.GzipFile(path, "wb", mtime=0) as dst:
            shutil.copyfileobj(src, dst)


def pytorch_reference(run, cluster):
    """torch_step.py's report (each model's PyTorch step, replay and prediction on one GPU), or {} if it failed.
    A process of its own, so that its time is bounded like every step's."""
    a = run.args
    out = os.path.join(a.out, "torch_step.json")
    argv = ["--bin", a.bin, "--cluster", cluster, "--out", out, "--models", ",".join(a.graphs)]
    argv += (["--device", "cpu", "--tiny", "--backend", "cpu", "--warmup", "1", "--steps", "2", "--replay-repeats", "1"]
             if a.dry_run else ["--device", "cuda", "--warmup", "5", "--steps", "20"])
    timeout = min(240, run.left() / 3)
    print(f"+ torch_step.py {' '.join(argv)}", file=sys.stderr, flush=True)
    try:
        proc = subprocess.run([sys.executable, os.path.join(HERE, "torch_step.py"), *argv], capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        run.failures.append(f"torch_step.py: no answer in {timeout:.0f} s")
        return {}
    if proc.returncode != 0:
        run.failures.append(f"torch_step.py: {proc.stderr.strip()[-2000:]}")
        return {}
    with open(out) as f:
        return json.load(f)


def table(title, metrics_by_name):
    lines = [f"**{title}**", "", "| graph | placements | measured spread | noise | rounds' Spearman | MAPE | p95 error | "
             "Spearman | Kendall | pairs ordered (pairs >5% apart) | sim's best within 5% of measured best |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    lines += [fidelity.fmt_row(name, m) for name, m in metrics_by_name.items()]
    return lines + [""]


def environment(calibration, torch_report):
    env = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
           "command": " ".join(["python3", "bench/cuda_check/fidelity_cuda.py", *sys.argv[1:]]),
           "commit": subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                    text=True).stdout.strip(),
           "cores": os.cpu_count(), "gpu_versions": calibration.get("gpu", {}).get("versions", "")}
    try:
        env["nvidia_smi"] = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                                            "--format=csv,noheader"], capture_output=True, text=True,
                                           timeout=20).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        env["nvidia_smi"] = "not available"
    env["pytorch"] = torch_report.get("environment", {})
    return env


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the placelab CLI (the bundle's on the GPU machine)")
    ap.add_argument("--out", required=True, help="the folder the results go to ($OUT on the GPU machine)")
    ap.add_argument("--dry-run", action="store_true", help="the CPU backend, tiny graphs: a check of the script")
    ap.add_argument("--graphs", default=",".join(GRAPHS), help=f"comma-separated, of {', '.join(GRAPHS)}")
    ap.add_argument("--placements", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3, help="measured runs per replay of a placement")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--budget-s", type=float, default=420, help="the run's deadline: later rounds are cut")
    ap.add_argument("--round-timeout-s", type=float, default=90, help="one graph's round (every placement once)")
    ap.add_argument("--no-torch", action="store_true", help="skip the PyTorch reference")
    args = ap.parse_args(argv)
    args.graphs = [g for g in args.graphs.split(",") if g]
    if set(args.graphs) - set(GRAPHS):
        ap.error(f"--graphs: unknown {sorted(set(args.graphs) - set(GRAPHS))} (known: {', '.join(GRAPHS)})")
    if args.dry_run:
        args.rounds, args.repeats, args.warmup = min(args.rounds, 1), 1, 0
    os.makedirs(args.out, exist_ok=True)
    run = Run(args)
    rng = random.Random(args.seed)
    cluster, calibration = calibrate(run)
    print(f"calibrated in {time.time() - run.started:.0f} s", file=sys.stderr, flush=True)
    torch_report = {} if args.no_torch else pytorch_reference(run, cluster)
    rows_by_graph, raw = {}, {}
    for name in args.graphs:
        graph_file = build_graph(run, name)
        if graph_file is None:
            continue
        rows = [{"graph": name, "kind": kind, "placement": pname, "device_of": place, "runs_s": [], "rounds_s": []}
                for kind, pname, place in placements(run, graph_file, cluster, args.placements, rng)]
        raw[name] = replay_rounds(run, name, graph_file, cluster, rows, rng)
        rows_by_graph[name] = [r for r in rows if r["runs_s"]]
        if name == args.graphs[0]:
            split = next((r["device_of"] for r in rows if r["placement"] == "split50"), rows[0]["device_of"])
            trace(run, graph_file, cluster, split, os.path.join(args.out, "trace.json.gz"))
        print(f"{name}: {len(rows_by_graph[name])} of {len(rows)} placements measured, {run.left():.0f} s left",
              file=sys.stderr, flush=True)
    report(run, rows_by_graph, raw, calibration, torch_report)


def report(run, rows_by_graph, raw, calibration, torch_report):
    """Writes summary.md, fidelity_cuda.json.gz and raw.tar.gz into --out; prints the summary."""
    args = run.args
    scored = {name: rows for name, rows in rows_by_graph.items() if len(rows) >= 2}
    per_graph = {name: fidelity.metrics(rows) for name, rows in scored.items()}
    all_rows = [r for rows in scored.values() for r in rows]
    by_kind = {}
    for r in all_rows:
        by_kind.setdefault(r["kind"], []).append(r)
    lines = [f"# CUDA fidelity{' (DRY RUN: CPU backend, tiny graphs; no figure here is a GPU measurement)' if args.dry_run else ''}",
             "", f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {time.time() - run.started:.0f} s, "
             f"rounds {args.rounds}, repeats {args.repeats}, warm-up {args.warmup}; {calibration.get('gpu', {}).get('versions', '')}", ""]
    if per_graph:
        lines += table("Per graph (and pooled)", {**per_graph, "**pooled**": fidelity.metrics(all_rows)})
        lines += table("Per kind of placement, graphs pooled", {k: fidelity.metrics(v) for k, v in by_kind.items() if len(v) >= 2})
    torch_rows = torch_report.get("rows", [])
    if torch_rows:
        lines += ["**The PyTorch step beside the single-GPU replay and prediction** (torch_step.py)", "",
                  torch_step_table(torch_rows), ""]
    lines += [f"- {f}" for f in run.failures] or ["- no step failed"]
    lines += [f"- note: {n}" for n in run.notes]
    summary = "\n".join(lines) + "\n"
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write(summary)
    result = {"environment": environment(calibration, torch_report), "arguments": vars(args), "calibration": calibration,
              "per_graph": per_graph, "rows": all_rows, "torch": torch_rows, "failures": run.failures,
              "notes": run.notes}
    with gzip.GzipFile(os.path.join(args.out, "fidelity_cuda.json.gz"), "wb", mtime=0) as f:
        f.write(json.dumps(result, indent=1).encode())
    with open(os.path.join(run.work, "replays.jsonl"), "w") as f:
        for name, docs in raw.items():
            for doc in docs:
                f.write(json.dumps(dict(doc, graph=name)) + "\n")
    with tarfile.open(os.path.join(args.out, "raw.tar.gz"), "w:gz") as tar:
        for entry in sorted(os.listdir(run.work)):
            if entry.endswith(".json") or entry.endswith(".jsonl"):
                tar.add(os.path.join(run.work, entry), arcname=entry)
    shutil.rmtree(run.work, ignore_errors=True)
    print(summary)


def torch_step_table(rows):
    lines = ["| graph | PyTorch step | replay (one GPU) | predicted | predicted / PyTorch - 1 |", "| --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        if "replay_s" in r:
            lines.append(f"| {r['graph']} | {1e3 * r['torch_s']:.2f} ms | {1e3 * r['replay_s']:.2f} ms | "
                         f"{1e3 * r['predicted_s']:.2f} ms | {100 * (r['predicted_s'] / r['torch_s'] - 1):+.1f}% |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
