"""Shared plumbing of the paper-reproduction scripts (bench/paper_*.py): options, placing and timing through
the placelab package, reports written as Markdown + CSV with the command line, git commit, machine and
date, so every recorded table says how to reproduce it, and sweeps spread over MPI ranks under mpirun
(`sweep`, docs/distributed.md)."""

from __future__ import annotations

import argparse
import csv
import datetime
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
RESULTS = os.path.join(HERE, "results")

sys.path.insert(0, os.path.join(ROOT, "python"))  # the package next to the sources, as the tests use it
import placelab  # noqa: E402


def parse_args(description: str, argv=None, extra=None) -> argparse.Namespace:
    """--quick (seconds, what the tests run), --out (results folder), --seed; `extra(parser)` adds a script's own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="tiny settings that finish in seconds (tests)")
    parser.add_argument("--out", help="folder for the Markdown, CSV and PNG files (default bench/results; with "
                        "--quick a fresh temporary folder, so that a smoke run never replaces recorded results)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every placer (default 1)")
    parser.add_argument("--steps", type=int, help="training steps of the learned placers (default: the script's)")
    if extra:
        extra(parser)
    args = parser.parse_args(argv)
    if args.out is None:
        args.out = default_out(args.quick)
    return args


def default_out(quick: bool) -> str:
    """bench/results for full runs; a fresh temporary folder for smoke runs."""
    return tempfile.mkdtemp(prefix="placelab_quick_") if quick else RESULTS


def training_steps(args: argparse.Namespace, full: int) -> int:
    """Learned placers' training steps: 2 in quick mode, else --steps or the script's full-mode default."""
    return 2 if args.quick else (args.steps if args.steps is not None else full)


def select_models(text: str | None, models: list, names=lambda m: {m.split(":")[0]}) -> list:
    """The models named in the comma-separated --models `text` (all when None); names(model) is the set of
    names a model answers to. An unknown name is an error: a typo must not write an empty table."""
    if text is None:
        return list(models)
    wanted = set(text.split(","))
    known = set().union(*(names(m) for m in models))
    if wanted - known:
        raise SystemExit(f"--models: unknown {', '.join(sorted(wanted - known))} (known: {', '.join(sorted(known))})")
    return [m for m in models if names(m) & wanted]


def select_columns(text: str | None, columns: list[str]) -> list[str]:
    """The columns named in the comma-separated --placers `text` (all when None), an unknown one an error."""
    if text is None:
        return list(columns)
    wanted = text.split(",")
    unknown = [c for c in wanted if c not in columns]
    if unknown:
        raise SystemExit(f"--placers: unknown column {unknown[0]!r} (known: {', '.join(columns)})")
    return wanted


# Distributed sweeps: under mpirun (or srun) a script's configurations spread over the ranks through mpi4py;
# every rank gets all results, in order, and rank 0 alone writes the report.
_MPI_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")
_mpi_world = None
_inside_sweep = False  # this process runs one item of a sweep: nested sweeps run here, and it writes its reports


def mpi_world():
    """mpi4py's COMM_WORLD when an MPI launcher started this process, else None (mpi4py is then not imported)."""
    global _mpi_world
    if _mpi_world is None and any(name in os.environ for name in _MPI_LAUNCHER_VARIABLES):
        try:
            from mpi4py import MPI
        except ImportError:
            raise SystemExit("paperlib: started by an MPI launcher but mpi4py is missing: apt-get install "
                             "python3-mpi4py (or ./install-deps.sh), or run without mpirun")
        _mpi_world = MPI.COMM_WORLD
    return _mpi_world


def rank_and_size() -> tuple[int, int]:
    """This process's MPI rank and the number of ranks; (0, 1) without a launcher."""
    world = mpi_world()
    return (world.Get_rank(), world.Get_size()) if world is not None else (0, 1)


def writes_results() -> bool:
    """Whether this process writes reports: a single process always; under mpirun rank 0, or the rank that runs a
    sweep's item (a paper of bench/reproduce.py)."""
    return _inside_sweep or rank_and_size()[0] == 0


def sweep(function, items) -> list:
    """[function(item) for item in items], spread over the MPI ranks under mpirun: rank r runs items r, r + size,
    ... and every rank gets the whole list, in order (results must pickle). A single process, or a sweep inside
    another's item, runs them all here, so deterministic placers give the same table either way. An error in an
    item ends every rank (MPI_Abort), never a hang."""
    global _inside_sweep
    items = list(items)
    rank, size = rank_and_size()
    if size == 1 or _inside_sweep:
        return [function(item) for item in items]
    mine = {}
    _inside_sweep = True
    try:
        for i in range(rank, len(items), size):
            mine[i] = function(items[i])
    except BaseException:  # the other ranks wait in allgather: end them all
        import traceback
        traceback.print_exc()
        print(f"paperlib: rank {rank} of {size}: item {i} ({items[i]!r}) failed; ending every rank",
              file=sys.stderr, flush=True)
        mpi_world().Abort(1)
    finally:
        _inside_sweep = False
    merged = {}
    for part in mpi_world().allgather(mine):
        merged.update(part)
    return [merged[i] for i in range(len(items))]


def place(simulator, placer: str, options: dict | None = None, seed: int = 1) -> dict:
    """Runs one placer and simulates its placement: step time, max-load, OOM, placement wall time and info."""
    start = time.perf_counter()
    placement, info = placelab.place(simulator, placer, options or {}, seed)
    wall_s = time.perf_counter() - start
    result = simulator.simulate(placement)
    max_load_s = simulator.max_load(placement)["max_load_s"]
    # Progress for the long full runs (stderr, so the printed results path stays the only stdout line), each
    # figure named: the tables show one or the other (a pipelined table shows max-load, not the step time).
    print(progress_line(simulator, placer, result["step_time_s"], max_load_s, wall_s), file=sys.stderr, flush=True)
    return {"placer": placer, "placement": placement, "info": info, "place_s": wall_s,
            "step_time_s": result["step_time_s"], "oom": bool(result["oom"]), "max_load_s": max_load_s}


def progress_line(simulator, placer: str, step_time_s: float, max_load_s: float, wall_s: float) -> str:
    return (f"  {simulator.graph.name} on {simulator.cluster.name}: {placer}: step time {fmt_s(step_time_s)}, "
            f"max-load {fmt_s(max_load_s)}, placed in {fmt_s(wall_s)}")


def registered(name: str) -> bool:
    return any(n == name for n, _ in placelab.placers())


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = ", load average {:.1f}".format(os.getloadavg()[0]) if hasattr(os, "getloadavg") else ""
    return f"{cpu}, {os.cpu_count()} CPUs{load}"


def git_commit() -> str:
    try:
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return head + ("+local changes" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def fmt_s(value: float) -> str:
    if value != value:  # NaN: not run
        return "-"
    return f"{value * 1e3:.4g} ms" if value < 1 else f"{value:.4g} s"


def fmt_pct(value: float) -> str:
    return "-" if value != value else f"{value:+.1f}%"


class Report:
    """One paper's results: tables (lists of dict rows), the paper's claims beside ours, notes and plots."""

    def __init__(self, name: str, title: str, args: argparse.Namespace):
        self.name, self.title, self.args = name, title, args
        self.intro: list[str] = []
        self.tables: list[tuple[str, list[str], list[dict]]] = []
        self.claims: list[tuple[str, str, str]] = []
        self.notes: list[str] = []
        self.plots: list[str] = []
        self.started = time.perf_counter()

    def table(self, heading: str, columns: list[str], rows: list[dict]) -> None:
        self.tables.append((heading, columns, rows))

    def claim(self, claim: str, published: str, ours: str) -> None:
        self.claims.append((claim, published, ours))

    def plot_path(self, suffix: str) -> str:
        if not writes_results():  # under mpirun, rank 0 writes: another rank's figure goes to a scratch folder
            return os.path.join(tempfile.mkdtemp(prefix="placelab_rank_"), f"{self.name}_{suffix}.png")
        path = os.path.join(self.args.out, f"{self.name}{'_quick' if self.args.quick else ''}_{suffix}.png")
        os.makedirs(self.args.out, exist_ok=True)
        self.plots.append(os.path.basename(path))
        return path

    def plot_curves(self, curves: dict[str, dict[str, list]], reference: dict[str, float] | None = None) -> None:
        """Learning curves, one panel per configuration: {panel title: {placer: best cost after each step
        (None before a placement fits)}}, each divided by reference[title] when given. They follow the
        training rollouts; a placer's answer may be better (Placeto's greedy episode, GDP's argmax)."""
        panels = [(title, lines) for title, lines in curves.items() if any(lines.values())]
        if not panels or not writes_results():
            return
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        cols = min(3, len(panels))
        rows = (len(panels) + cols - 1) // cols
        fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3 * rows), squeeze=False)
        for ax, (title, lines) in zip(axes.flat, panels):
            scale = (reference or {}).get(title, 1.0)
            for placer, ys in lines.items():
                ax.plot(range(1, len(ys) + 1), [y / scale if y is not None else float("nan") for y in ys],
                        marker="o" if len(ys) < 3 else None, label=placer)
            if not any(y is not None for ys in lines.values() for y in ys):
                ax.text(0.5, 0.5, "no training rollout fit in memory", ha="center", va="center", fontsize=8,
                        transform=ax.transAxes)
            ax.set_title(title, fontsize=8)
            ax.set_xlabel("training step", fontsize=7)
            ax.set_ylabel("best step time / expert's" if reference else "best cost (s)", fontsize=7)
            ax.tick_params(labelsize=7)
            ax.legend(fontsize=7)
        for ax in list(axes.flat)[len(panels):]:
            ax.axis("off")
        fig.tight_layout()
        fig.savefig(self.plot_path("curves"), dpi=110)
        plt.close(fig)

    def write(self) -> str:
        """Writes <out>/<name>.md and one <name>_<k>.csv per table (quick mode adds _quick); returns the .md path.
        Under mpirun only the rank that writes_results() writes; the others return the path."""
        stem = os.path.join(self.args.out, self.name + ("_quick" if self.args.quick else ""))
        if not writes_results():
            return stem + ".md"
        os.makedirs(self.args.out, exist_ok=True)
        command = "/usr/bin/python3 bench/" + os.path.basename(sys.argv[0]) + (
            " " + " ".join(sys.argv[1:]) if len(sys.argv) > 1 else "")
        lines = [f"# {self.title}", "",
                 f"Command: `{command}` ({'quick' if self.args.quick else 'full'} mode, seed {self.args.seed}).  ",
                 f"Commit {git_commit()}, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, "
                 f"{machine()}; {time.perf_counter() - self.started:.0f} s in all.", ""]
        lines += self.intro + ([""] if self.intro else [])
        if self.claims:
            lines += ["## Published claims next to ours", "", "| claim | paper | placelab |", "| --- | --- | --- |"]
            lines += [f"| {c} | {p} | {o} |" for c, p, o in self.claims] + [""]
        for k, (heading, columns, rows) in enumerate(self.tables):
            lines += [f"## {heading}", "", "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
            lines += ["| " + " | ".join(str(r.get(c, "-")) for c in columns) + " |" for r in rows] + [""]
            with open(f"{stem}_{k}.csv", "w", newline="") as f:
                writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
        lines += [f"![{p}]({p})" for p in self.plots] + ([""] if self.plots else [])
        lines += self.notes
        with open(stem + ".md", "w") as f:
            f.write("\n".join(lines).rstrip() + "\n")
        return stem + ".md"


def geomean_ratio(pairs) -> float:
    """Geometric mean of a/b over (a, b) pairs with both finite and positive; NaN when there are none."""
    import math
    logs = [math.log(a / b) for a, b in pairs if a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)]
    return math.exp(sum(logs) / len(logs)) if logs else float("nan")


def graph(spec: str):
    """A zoo graph from `NAME[:key=value,...]` as the CLI reads it (`training=1` expands it to a training step), or
    a torchvision model from `torchvision:NAME:batch=B[,training=1]` (torchvision_graph)."""
    if spec.startswith("torchvision:"):
        return torchvision_graph(spec)
    name, _, rest = spec.partition(":")
    params = {k: float(v) for k, v in (kv.split("=", 1) for kv in rest.split(",") if kv)}
    training = params.pop("training", 0) == 1
    g = placelab.make_model(name, params)
    return placelab.expand_training(g) if training else g


GRAPH_CACHE = os.environ.get("PLACELAB_GRAPH_CACHE", os.path.join(tempfile.gettempdir(), "placelab_graphs"))


def importer_digest() -> str:
    """The first 10 hex digits of the SHA-1 of placelab.torch_import's source (every file of the package)."""
    import hashlib
    import placelab.torch_import
    digest = hashlib.sha1()
    folder = os.path.dirname(placelab.torch_import.__file__)
    for path in sorted(os.path.join(folder, n) for n in os.listdir(folder) if n.endswith(".py")):
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:10]


def torchvision_graph(spec: str):
    """torchvision model NAME (untrained weights) imported with placelab.from_torch on a batch of B 224x224 images,
    expanded to a training step with training=1. Imports take seconds (tracing runs the model), so the graph is
    kept in GRAPH_CACHE (the environment's PLACELAB_GRAPH_CACHE, else a folder in the temporary directory), under a
    name that carries a digest of the importer's source: a changed importer (new fields, new formulas) imports again."""
    _, name, rest = spec.split(":", 2)
    params = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    unknown = set(params) - {"batch", "training"}
    if unknown:
        raise SystemExit(f"{spec}: unknown parameter {sorted(unknown)[0]} (torchvision graphs take batch and training)")
    batch, training = int(params.get("batch", 32)), params.get("training", "0") == "1"
    label = f"torchvision_{name}_b{batch}" + ("_training" if training else "") + f"_{importer_digest()}"
    path = os.path.join(GRAPH_CACHE, label + ".json")
    if os.path.exists(path):
        return placelab.read_graph(path)
    import warnings

    import torch
    import torchvision
    make = getattr(torchvision.models, name, None)
    if make is None:
        raise SystemExit(f"{spec}: torchvision has no model {name}")
    extra = {"aux_logits": False, "init_weights": False} if name in ("googlenet", "inception_v3") else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ops without a FLOP formula keep a bytes-only cost
        g = placelab.from_torch(make(weights=None, **extra), torch.zeros(batch, 3, 224, 224), training=training,
                                name=f"torchvision_{name}_b{batch}")  # training=True appends "_training"
    os.makedirs(GRAPH_CACHE, exist_ok=True)
    placelab.write_graph(g, path)  # atomic: a concurrent reader sees the old file or the whole new one
    return g


def run_placers(simulator, placers: list[tuple[str, str, dict]], seed: int) -> dict[str, dict]:
    """{column: place() result} for (column, placer, options) rows whose placer is registered."""
    return {column: place(simulator, placer, options, seed) for column, placer, options in placers
            if registered(placer)}


def curve(result: dict) -> list:
    """A learned placer's best cost after every training step (placed with {"curve": True}); [] otherwise."""
    return result.get("info", {}).get("curve_best_cost_s", [])


def convergence(result: dict, tolerance: float = 0.01) -> tuple[int, int] | None:
    """(training steps, simulations) until a learned placer's best cost first came within `tolerance` of its final
    best, counting every step from the first (a warm start's included); None without a curve or a fitting best."""
    info = result.get("info", {})
    best, sims = info.get("curve_best_cost_s", []), info.get("curve_simulations", [])
    finite = [b for b in best if b is not None]
    if not finite or len(sims) != len(best):
        return None
    final = finite[-1]
    k = next(i for i, b in enumerate(best) if b is not None and b <= final * (1 + tolerance))
    return k + 1, sims[k]


def to_reach(result: dict, target_s: float) -> tuple[int, int, float] | None:
    """(training steps, simulations, wall seconds) until a learned placer's best cost first reached `target_s`
    (from its curve; placed with {"curve": True}); None if it never did."""
    info = result.get("info", {})
    best, sims, wall = (info.get(k, []) for k in ("curve_best_cost_s", "curve_simulations", "curve_wall_s"))
    k = next((i for i, b in enumerate(best) if b is not None and b <= target_s), None)
    return None if k is None or k >= min(len(sims), len(wall)) else (k + 1, sims[k], wall[k])


def learned_info(result: dict) -> tuple[str, str]:
    """Training steps and wall time to the best placement, as a learned placer reports them ('-' otherwise)."""
    info = result.get("info", {})
    if "policy" not in info:  # not a learned placer (annealing's "steps" are not training steps)
        return "-", "-"
    steps = info.get("best_step", info.get("steps"))
    wall = info.get("train_wall_s", info.get("wall_s"))
    return ("-" if steps is None else str(steps)), ("-" if wall is None else fmt_s(float(wall)))
