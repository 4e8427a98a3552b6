"""Every placer at the scale of today's models (issue 51): a Llama-2 training step over 16 and 64 H100s, and
the simulator's and the fast placers' cost as graphs grow to a million ops.

Part `placers`: a Llama-2-7B training step on 2x8 and 8x8 H100s and a 70B step on 8x8, each placed by
every placer (single_device, human_expert, METIS, Scotch, HEFT, m-ETF, m-SCT, annealing and GDP's search
within a time budget, the throughput DP, GDP zero-shot); a placer that cannot place a step says why in
one line (its error). Recorded per placer: ops, devices, placement time, step time, peak memory (the
largest device's; every device's in the JSON), out of memory or not and by how much.

Part `scale`: the engine on decoders of about 50k, 200k and 1M ops on 64 devices (bench/bm_scale: each
simulation beside a topological sweep of the same graph and placement, and peak resident memory, one
process per graph), the fast placers (HEFT, m-ETF, m-SCT, METIS) on a 500k-op graph on 64 devices on one
core (`taskset -c 0`), and annealing's moves per second at 64 devices beside 8.

    /usr/bin/python3 bench/llm_scale.py                  # both parts (about an hour on 2 cores)
    /usr/bin/python3 bench/llm_scale.py --part placers   # or --part scale
    /usr/bin/python3 bench/llm_scale.py --quick          # a small decoder, seconds (ctest bench_llm_scale_quick)

It writes <out>/llm_scale.md, llm_scale.json (every figure, per-device peaks included) and llm_scale.png
(default out: bench/results; --quick writes to a temporary folder). A part run alone keeps the other's
figures from an existing llm_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import paperlib
import placelab

LLAMA_70B = "layers=80,hidden=8192,heads=64,kv_heads=8,ffn=28672"
SMALL = "layers=4,hidden=256,heads=4,kv_heads=2,ffn=512,seq_len=256,vocab=1000"

# (label, graph, cluster). One micro-batch is one 4096-token sequence; the graph keeps every micro-batch's
# activations until its backward pass (GPipe), so memory bounds M: the 7B steps take M = the 16 and 64
# pipeline stages, the 70B step splits each layer over a node's 8 GPUs (shards=8: 8 stages of 8 GPUs, as
# Megatron-LM trains it) with M = 8 stages, its activations then about half the cluster's memory.
CONFIGS = [("Llama-2-7B, 2x8 H100", "llama:training=1,micro_batches=16,batch=16", "h100-nodes-2x8"),
           ("Llama-2-7B, 8x8 H100", "llama:training=1,micro_batches=64,batch=64", "h100-nodes-8x8"),
           ("Llama-2-70B, 8x8 H100", f"llama:training=1,{LLAMA_70B},shards=8,micro_batches=8,batch=8",
            "h100-nodes-8x8")]
QUICK_CONFIGS = [("small decoder, 2x2 H100", f"llama:training=1,{SMALL},shards=2,micro_batches=4,batch=8",
                  "h100-nodes-2x2")]


def placers(budget_s: float, quick: bool) -> list[tuple[str, str, dict]]:
    """(row label, placer, options): the slow ones within `budget_s` seconds (a few steps in quick mode)."""
    search = {"steps": 2} if quick else {"seconds": budget_s}
    return [("single_device", "single_device", {}), ("human_expert", "human_expert", {}), ("metis", "metis", {}),
            ("scotch", "scotch", {}), ("heft", "heft", {}), ("m_etf", "m_etf", {}), ("m_sct", "m_sct", {}),
            ("annealing", "annealing", {"steps": 20} if quick else {"seconds": budget_s}),
            ("dp", "dp", {"time_limit_s": budget_s}), ("gdp zero-shot", "gdp", {}),
            ("gdp search", "gdp", search)]


# Decoders of about 50k, 200k and 1M ops (growing depth at 64 micro-batches, about 2,090 ops a layer), on 64 GPUs.
SCALE_SIZES = [24, 96, 480]
QUICK_SCALE_SIZES = [1, 2, 4]
SCALE_CLUSTER = "h100-nodes-8x8"


def scale_graph(layers: int, quick: bool) -> str:
    return (f"llama:training=1,{SMALL.replace('layers=4', f'layers={layers}')},micro_batches=4,batch=4" if quick
            else f"llama:training=1,layers={layers},micro_batches=64,batch=64")


FAST_LAYERS, QUICK_FAST_LAYERS = 240, 2  # about 500k ops
FAST_PLACERS = ["heft", "m_etf", "m_sct", "metis"]


def brief_info(info: dict) -> dict:
    """A placer's info without its long arrays (curves) and per-device maps (kept apart)."""
    return {k: v for k, v in info.items() if not isinstance(v, list) and k != "oom_devices"}


def place_row(simulator, label: str, placer: str, options: dict, seed: int) -> dict:
    cluster = simulator.cluster
    row = {"placer": label, "name": placer, "options": options, "ops": simulator.graph.num_ops,
           "devices": cluster.num_devices}
    start = time.perf_counter()
    try:
        placement, info = placelab.place(simulator, placer, options, seed)
    except (ValueError, RuntimeError) as e:  # the placer's limit, in its own words
        row.update(place_s=time.perf_counter() - start, error=str(e).splitlines()[0])
        print(f"  {label}: cannot place: {row['error']}", file=sys.stderr, flush=True)
        return row
    row["place_s"] = time.perf_counter() - start
    r = simulator.simulate(placement)
    peaks = [float(x) for x in r["device_peak_bytes"]]
    row.update(step_time_s=float(r["step_time_s"]), peak_bytes=max(peaks), oom=bool(r["oom"]),
               excess_bytes=float(max(r["device_excess_bytes"])), devices_used=len(set(placement.tolist())),
               device_peak_bytes=dict(zip(cluster.device_names, peaks)), info=brief_info(info))
    print(f"  {label}: step {paperlib.fmt_s(row['step_time_s'])}, peak {row['peak_bytes'] / 1e9:.1f} GB"
          f"{' OOM' if row['oom'] else ''}, placed in {paperlib.fmt_s(row['place_s'])}", file=sys.stderr, flush=True)
    return row


def run_placers(args, save) -> list[dict]:
    """Every placer on each configuration; `save(configs)` after each, so a long run keeps what it has."""
    out = []
    configs = QUICK_CONFIGS if args.quick else CONFIGS
    if args.configs:
        wanted = [int(k) for k in args.configs.split(",")]
        configs = [configs[k] for k in wanted]
    for label, spec, cluster_name in configs:
        print(f"{label}: {spec} on {cluster_name}", file=sys.stderr, flush=True)
        start = time.perf_counter()
        graph = paperlib.graph(spec)
        cluster = placelab.make_preset(cluster_name)
        simulator = placelab.Simulator(graph, cluster)
        config = {"label": label, "graph": spec, "cluster": cluster_name, "ops": graph.num_ops,
                  "devices": cluster.num_devices, "capacity_bytes": float(cluster_capacity(cluster_name)),
                  "build_s": time.perf_counter() - start, "rows": []}
        for row_label, placer, options in placers(args.budget_s, args.quick):
            config["rows"].append(place_row(simulator, row_label, placer, options, args.seed))
        out.append(config)
        save(out)
    return out


# The pipelined reading (Tarnawski et al.'s objective): one micro-batch's graph placed, then M micro-batches
# streamed through that placement (simulate_stream: each device runs the earliest micro-batch's ops first,
# as a pipeline does). The throughput placers work on this graph: micro-batch copies in one graph multiply
# their ideals past any limit.
STREAM_PLACERS = ["human_expert", "dp", "heft", "m_etf"]


def one_micro_batch(spec: str) -> tuple[str, int]:
    """`spec` with micro_batches=1 and the batch of one micro-batch; and the micro-batch count it had."""
    name, _, rest = spec.partition(":")
    params = dict(kv.split("=", 1) for kv in rest.split(","))
    m = int(params.get("micro_batches", 1))
    params["batch"] = str(int(params.get("batch", m)) // m)
    params["micro_batches"] = "1"
    return name + ":" + ",".join(f"{k}={v}" for k, v in params.items()), m


def run_stream(args, save) -> None:
    """Adds each configuration's streamed rows (config["stream"]) to the recorded placers part. A graph in
    shards gets one more row: the DP on the same layers without shards (its ideals then stay few)."""
    for config in args.doc.get("placers", []):
        spec, m = one_micro_batch(config["graph"])
        print(f"{config['label']}, streamed: {spec} x {m} on {config['cluster']}", file=sys.stderr, flush=True)
        cluster = placelab.make_preset(config["cluster"])
        simulator = placelab.Simulator(paperlib.graph(spec), cluster)
        cases = [(placer, placer, simulator) for placer in STREAM_PLACERS]
        if ",shards=" in spec and ",shards=1," not in spec + ",":
            unsharded = ",".join(kv for kv in spec.split(",") if not kv.startswith("shards="))
            cases.append(("dp, no shards", "dp", placelab.Simulator(paperlib.graph(unsharded), cluster)))
        rows = []
        for label, placer, sim in cases:
            options = {"time_limit_s": args.budget_s} if placer == "dp" else {}
            row = {"placer": label, "options": options, "ops": sim.graph.num_ops, "micro_batches": m}
            start = time.perf_counter()
            try:
                placement, info = placelab.place(sim, placer, options, args.seed)
            except (ValueError, RuntimeError) as e:
                row.update(place_s=time.perf_counter() - start, error=str(e).splitlines()[0])
                rows.append(row)
                continue
            row["place_s"] = time.perf_counter() - start
            r = sim.simulate_stream(placement, m)
            last = r["last"]
            peaks = [float(x) for x in last["device_peak_bytes"]]
            row.update(step_time_s=float(r["makespan_s"]), period_s=float(r["time_per_batch_s"]),
                       one_s=float(r["single_s"]), peak_bytes=max(peaks), oom=bool(last["oom"]),
                       excess_bytes=float(max(last["device_excess_bytes"])),
                       device_peak_bytes=dict(zip(sim.cluster.device_names, peaks)), info=brief_info(info))
            print(f"  {label}: {m} micro-batches in {paperlib.fmt_s(row['step_time_s'])}, peak "
                  f"{row['peak_bytes'] / 1e9:.1f} GB{' OOM' if row['oom'] else ''}", file=sys.stderr, flush=True)
            rows.append(row)
        config["stream"] = {"graph": spec, "ops": simulator.graph.num_ops, "micro_batches": m, "rows": rows}
        save()


def cluster_capacity(name: str) -> float:
    return json.loads(run([args_bin(), "cluster", "--preset", name, "--json"]))["devices"][0]["memory_bytes"]


_BIN = {"placelab": None}


def args_bin() -> str:
    return _BIN["placelab"]


def run(command: list[str], timeout: float | None = None) -> str:
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return proc.stdout


def timed(command: list[str]) -> tuple[str, float, float]:
    """Runs `command` under /usr/bin/time; returns its stdout, its peak resident memory in bytes and its CPU
    seconds (user + system; NaN without /usr/bin/time)."""
    if not os.path.exists("/usr/bin/time"):
        return run(command), float("nan"), float("nan")
    with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
        out = run(["/usr/bin/time", "-o", stats.name, "-f", "%M %U %S", *command])
        rss_kb, user_s, system_s = (float(x) for x in stats.read().strip().splitlines()[-1].split())
        return out, rss_kb * 1024, user_s + system_s


def one_core(command: list[str]) -> list[str]:
    return (["taskset", "-c", "0"] if shutil.which("taskset") else []) + command


def run_scale(args) -> dict:
    out = {"engine": [], "fast_placers": [], "annealing": []}
    sizes = QUICK_SCALE_SIZES if args.quick else SCALE_SIZES
    if args.bm_scale and os.path.exists(args.bm_scale):
        for layers in sizes:
            spec = scale_graph(layers, args.quick)
            print(f"engine: {spec} on {SCALE_CLUSTER}", file=sys.stderr, flush=True)
            doc = json.loads(run(one_core([args.bm_scale, "--graph", spec, "--cluster", SCALE_CLUSTER,
                                           "--sims", str(2 if args.quick else args.sims)])))
            print(f"  {doc['ops']} ops: {doc['engine_ns_per_op']:.0f} ns/op, {doc['engine_over_sweep']:.2f}x the sweep "
                  f"({doc['engine_over_sweep_min']:.2f}x from minima), "
                  f"peak RSS {doc['peak_rss_bytes'] / 1e9:.2f} GB", file=sys.stderr, flush=True)
            out["engine"].append(doc)
    else:
        print(f"engine: skipped, no bm_scale binary at {args.bm_scale} (build the bm_scale target)", file=sys.stderr)
    # Placement time is wall time on one core, which other work on that core inflates; the placer's CPU time
    # is also estimated as the command's CPU seconds less those of the same command placing round-robin (the
    # graph, the simulation and the JSON, with a placement that costs nothing).
    spec = scale_graph(QUICK_FAST_LAYERS if args.quick else FAST_LAYERS, args.quick)
    for placer in ["round_robin"] + FAST_PLACERS:
        print(f"fast placers: {placer} on {spec}, {SCALE_CLUSTER}, one core", file=sys.stderr, flush=True)
        text, rss, cpu_s = timed(one_core([args.bin, "place", "--graph", spec, "--cluster", SCALE_CLUSTER, "--placer",
                                           placer, "--json"]))
        doc = json.loads(text)
        row = {"placer": placer, "graph": spec, "place_s": doc["placement_time_s"], "command_cpu_s": cpu_s,
               "step_time_s": doc["step_time_s"], "oom": doc["oom"], "peak_rss_bytes": rss,
               "info": brief_info(doc["info"])}
        if placer == "round_robin":
            baseline_cpu_s = cpu_s
            continue
        row["place_cpu_s"] = cpu_s - baseline_cpu_s
        out["fast_placers"].append(row)
        print(f"  {paperlib.fmt_s(row['place_s'])} wall, about {paperlib.fmt_s(row['place_cpu_s'])} CPU",
              file=sys.stderr, flush=True)
    out["fast_graph_ops"] = paperlib.graph(spec).num_ops
    graph = paperlib.graph(CONFIGS[0][1] if not args.quick else QUICK_CONFIGS[0][1])
    for cluster_name in ("h100-8", SCALE_CLUSTER) if not args.quick else ("h100-nodes-1x2", "h100-nodes-2x2"):
        simulator = placelab.Simulator(graph, placelab.make_preset(cluster_name))
        steps = 20 if args.quick else args.anneal_steps
        _, info = placelab.place(simulator, "annealing", {"steps": steps, "curve": True}, args.seed)
        wall = info["curve_wall_s"]
        rate = (len(wall) - 1) / (wall[-1] - wall[0]) if wall[-1] > wall[0] else float("nan")
        out["annealing"].append({"graph": graph.name, "ops": graph.num_ops, "cluster": cluster_name,
                                 "devices": simulator.cluster.num_devices, "moves": steps, "moves_per_s": rate,
                                 "stopped_early": info.get("stopped_early")})
        print(f"annealing on {cluster_name}: {rate:,.0f} moves/s", file=sys.stderr, flush=True)
    return out


def gb(x: float) -> str:
    return f"{x / 1e9:,.1f} GB"


def result_row(r: dict, second: str, times: list[str]) -> str:
    """A placer's table row: placer, `second` (its options or op count), placement time, then `times` (step time,
    period), peak memory and OOM; a placer that could not place fills the times' cells with its error."""
    head = f"| {r['placer']} | {second} | {paperlib.fmt_s(r['place_s'])} |"
    if "error" in r:
        return head + f" cannot place: {r['error']} |" + " |" * (len(times) + 1)
    oom = f"yes, +{gb(r['excess_bytes'])}" if r["oom"] else "no"
    return head + "".join(f" {paperlib.fmt_s(r[t])} |" for t in times) + f" {gb(r['peak_bytes'])} | {oom} |"


ANALYSIS_MARKER = "<!-- analysis: written by hand, kept when the script rewrites the tables above -->"


def write_markdown(path: str, doc: dict) -> None:
    runs = doc.get("runs", {})
    lines = ["# Every placer at the scale of today's models (issue 51)", "",
             "Each part as last run (`/usr/bin/python3 bench/llm_scale.py` runs all three; `--part` one):", ""]
    for part, run in runs.items():
        lines.append(f"- {part}: `{run['command']}`, {run['when']}, commit {run['commit']}; {run['machine']}; "
                     f"`uptime`: {run['uptime']}")
    lines += ["",
             "Float32 counting (docs/zoo.md, Conventions): a training step holds weights and Adam's moments "
             "(12 bytes a parameter) and each gradient from its backward op to its update; a micro-batch's "
             "activations live until its backward pass. Times use the clusters' FP32 peaks.", ""]
    if doc.get("placers"):
        lines += ["## The LLM step, placed", ""]
        for config in doc["placers"]:
            lines += [f"### {config['label']}: `{config['graph']}` on `{config['cluster']}`", "",
                      f"{config['ops']:,} ops, {config['devices']} devices of {gb(config['capacity_bytes'])}. ", "",
                      "| placer | options | placement time | step time | peak memory (largest device) | OOM |",
                      "| --- | --- | ---: | ---: | ---: | --- |"]
            for r in config["rows"]:
                lines.append(result_row(r, json.dumps(r["options"]) if r["options"] else "", ["step_time_s"]))
            lines.append("")
            stream = config.get("stream")
            if stream:
                lines += [f"Pipelined: one micro-batch's graph (`{stream['graph']}`, {stream['ops']:,} ops) placed, "
                          f"{stream['micro_batches']} micro-batches streamed through it (`simulate_stream`, the "
                          "earliest micro-batch first on every device):", "",
                          "| placer | ops | placement time | step time (M micro-batches) | period | peak memory | OOM |",
                          "| --- | ---: | ---: | ---: | ---: | ---: | --- |"]
                for r in stream["rows"]:
                    lines.append(result_row(r, f"{r['ops']:,}", ["step_time_s", "period_s"]))
                lines.append("")
    scale = doc.get("scale")
    if scale:
        lines += ["## Cost that grows linearly", ""]
        if scale["engine"]:
            first = scale["engine"][0]
            lines += [f"Engine on `{SCALE_CLUSTER}`, {first['sims']} random placements per graph, each simulated "
                      f"once and swept {first['sweeps']} times (the fastest kept); medians, and in brackets minima "
                      "(bench/bm_scale, one process per graph, `taskset -c 0`):", "",
                      "| graph | ops | edges | simulation | sims/s | engine ns/op | sweep ns/op | engine / sweep | "
                      "engine ns/op vs the smallest graph | engine / sweep vs the smallest graph | peak RSS |",
                      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for e in scale["engine"]:
                ns = lambda x: f"{x / e['ops'] * 1e9:.0f}"
                rel = e["engine_over_sweep"] / first["engine_over_sweep"]
                rel_min = e["engine_over_sweep_min"] / first["engine_over_sweep_min"]
                per_op = e["engine_s_median"] / e["ops"] / (first["engine_s_median"] / first["ops"])
                lines.append(f"| `{e['graph']}` | {e['ops']:,} | {e['edges']:,} | {paperlib.fmt_s(e['engine_s_median'])} "
                             f"| {e['sims_per_s']:.3g} | {ns(e['engine_s_median'])} ({ns(e['engine_s_min'])}) | "
                             f"{ns(e['sweep_s_median'])} ({ns(e['sweep_s_min'])}) | {e['engine_over_sweep']:.1f}x "
                             f"({e['engine_over_sweep_min']:.1f}x) | {per_op:.2f}x | {rel:.2f}x ({rel_min:.2f}x) | "
                             f"{gb(e['peak_rss_bytes'])} |")
            lines.append("")
        if scale["fast_placers"]:
            lines += [f"Fast placers on `{scale['fast_placers'][0]['graph']}` ({scale['fast_graph_ops']:,} ops) on "
                      f"`{SCALE_CLUSTER}`, one core (`taskset -c 0 placelab place ... --json`):", "",
                      "| placer | placement time (wall) | placer CPU time (about) | under 30 s | peak RSS | step time | "
                      "OOM |", "| --- | ---: | ---: | --- | ---: | ---: | --- |"]
            for r in scale["fast_placers"]:
                lines.append(f"| {r['placer']} | {paperlib.fmt_s(r['place_s'])} | {paperlib.fmt_s(r['place_cpu_s'])} | "
                             f"{'yes' if r['place_s'] < 30 else 'NO'} | {gb(r['peak_rss_bytes'])} | "
                             f"{paperlib.fmt_s(r['step_time_s'])} | {'yes' if r['oom'] else 'no'} |")
            lines.append("")
        if scale["annealing"]:
            lines += ["Annealing's moves per second (one incremental re-simulation each; `curve_wall_s`):", "",
                      "| graph | ops | cluster | devices | moves | moves/s |", "| --- | ---: | --- | ---: | ---: | ---: |"]
            for a in scale["annealing"]:
                lines.append(f"| {a['graph']} | {a['ops']:,} | {a['cluster']} | {a['devices']} | {a['moves']} | "
                             f"{a['moves_per_s']:,.0f} |")
            lines.append("")
    lines += ["![llm_scale.png](llm_scale.png)", ""]
    # The reading of the figures is written by hand below the marker, and kept when the tables are rewritten.
    analysis = ""
    if os.path.exists(path):
        with open(path) as f:
            old = f.read()
        if ANALYSIS_MARKER in old:
            analysis = old[old.index(ANALYSIS_MARKER):]
    with open(path, "w") as f:
        f.write("\n".join(lines).rstrip() + "\n\n" + (analysis or ANALYSIS_MARKER + "\n"))


def plot(path: str, doc: dict) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    configs, engine = doc.get("placers") or [], (doc.get("scale") or {}).get("engine") or []
    fig, axes = plt.subplots(1, 2, figsize=(14, 5), gridspec_kw={"width_ratios": [3, 1.2]})
    ax = axes[0]
    rows_of = [{r["placer"]: r for r in config["rows"]} | {f"{r['placer']} (1 micro-batch, streamed)": r
                                                           for r in config.get("stream", {}).get("rows", [])}
               for config in configs]
    names = list(dict.fromkeys(name for rows in rows_of for name in rows))
    width = 0.8 / max(1, len(configs))
    for k, (config, rows) in enumerate(zip(configs, rows_of)):
        for i, name in enumerate(names):
            r, x = rows.get(name), i + (k - (len(configs) - 1) / 2) * width
            if r is None:
                continue
            if "error" in r:  # cannot place: a cross at the foot of the axis
                ax.plot(x, 0.02, marker="x", color=f"C{k}", transform=ax.get_xaxis_transform(), clip_on=False)
                continue
            ax.bar(x, r["step_time_s"], width, color=f"C{k}", hatch="//" if r["oom"] else None,
                   edgecolor="black" if r["oom"] else None, label=config["label"] if i == 0 else None)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names, rotation=35, ha="right", fontsize=7)
    ax.set_ylabel("simulated step time (s)")
    ax.set_title("step time per placer (hatched: out of memory; x: cannot place)", fontsize=9)
    if configs:
        ax.legend(fontsize=8)
    ax = axes[1]
    if engine:
        ops = [e["ops"] for e in engine]
        ax.plot(ops, [e["engine_ns_per_op"] for e in engine], marker="o", label="engine")
        ax.plot(ops, [e["sweep_ns_per_op"] for e in engine], marker="s", label="topological sweep")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("ops")
        ax.set_ylabel("ns per op (median simulation)")
        ax.legend(fontsize=8)
    ax.set_title(f"cost per op on {SCALE_CLUSTER}", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "unknown"


def main() -> None:
    def extra(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--part", choices=["placers", "stream", "scale", "all"], default="all",
                            help="placers: every placer on the micro-batched steps; stream: one micro-batch's graph "
                            "placed and streamed (after placers); scale: the engine and the fast placers at 50k-1M ops")
        parser.add_argument("--configs", help="with --part placers: comma-separated indices of the configurations "
                            "to run (0-based; the others keep their recorded rows)")
        parser.add_argument("--bin", default=os.environ.get("PLACELAB_BIN", "build/release/cli/placelab"),
                            help="the placelab program (default build/release/cli/placelab)")
        parser.add_argument("--bm-scale", default="build/release/bench/bm_scale", help="the bm_scale program")
        parser.add_argument("--budget-s", type=float, default=120,
                            help="seconds for annealing, GDP's search and the DP's time limit (default 120)")
        parser.add_argument("--sims", type=int, default=5, help="simulations per graph size (default 5)")
        parser.add_argument("--anneal-steps", type=int, default=300, help="annealing moves per rate (default 300)")

    args = paperlib.parse_args(__doc__.splitlines()[0], extra=extra)
    _BIN["placelab"] = args.bin
    path = os.path.join(args.out, "llm_scale.json")
    doc = {}
    if os.path.exists(path) and (args.part != "all" or args.configs):
        with open(path) as f:
            doc = json.load(f)
    command = ("/usr/bin/python3 bench/llm_scale.py " + " ".join(sys.argv[1:])).strip()
    run_info = {"command": command, "commit": paperlib.git_commit(), "machine": paperlib.machine(),
                "uptime": uptime(), "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for part in ("placers", "stream", "scale"):  # what each part's figures come from
        if args.part in (part, "all"):
            doc.setdefault("runs", {})[part] = run_info
    os.makedirs(args.out, exist_ok=True)

    def save() -> None:
        with open(path, "w") as f:
            json.dump(doc, f, indent=1)
        write_markdown(os.path.join(args.out, "llm_scale.md"), doc)
        plot(os.path.join(args.out, "llm_scale.png"), doc)

    if args.part in ("placers", "all"):
        kept = {c["label"]: c for c in doc.get("placers", [])}

        def save_configs(done: list[dict]) -> None:
            merged = dict(kept, **{c["label"]: c for c in done})
            order = [label for label, _, _ in (QUICK_CONFIGS if args.quick else CONFIGS)]
            doc["placers"] = [merged[label] for label in order if label in merged]
            save()

        run_placers(args, save_configs)
    if args.part in ("stream", "all"):
        args.doc = doc
        run_stream(args, save)
    if args.part in ("scale", "all"):
        doc["scale"] = run_scale(args)
        save()
    print(os.path.join(args.out, "llm_scale.md"))


if __name__ == "__main__":
    main()
