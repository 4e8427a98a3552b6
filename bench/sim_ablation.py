#!/usr/bin/python3
"""Where one simulation's time goes: the engine's default loop with one part compiled out at a time.

Builds `bm_sim` from a copy of the committed sources (`git archive HEAD`) once as it is and once per
ablation below, each with one part of the default event loop (`sim/event_loop.cpp`, `run_mode<false>`)
switched off, then times them in interleaved rounds on one core (`taskset -c 0`, the medians of 3
repetitions per round) beside the topological sweep, and optionally counts instructions with callgrind.
An ablation gives wrong results for the part it removes (peaks, critical path, statistics): these are
measurements of cost, not engines. The general mode (observers, other options) is untouched, so the
tests are not run on these builds.

    /usr/bin/python3 bench/sim_ablation.py --rounds 5 --callgrind     # ~15 min on 2 cores
    /usr/bin/python3 bench/sim_ablation.py --check                    # the edits still apply (a ctest test)

Prints a markdown table; bench/results/sim.md records one run. The edits are text patterns on
sim/event_loop.cpp: when the loop changes, a pattern that no longer matches stops the script with the
ablation's name.
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile

# name -> (what it removes, [(pattern, replacement)]): every occurrence is replaced; the "kGeneral" guards keep
# the general mode intact.
MEM_LATER = ("  auto mem_later = [&](double time_s, int32_t is_alloc, int32_t d, int64_t bytes) {\n",
             "  auto mem_later = [&](double time_s, int32_t is_alloc, int32_t d, int64_t bytes) {\n"
             "    if (!kGeneral) return;\n")
ABLATIONS = {
    "dated memory": ("memory changes dated at transfer start or end (the radix heap, and copies allocated "
                     "at once)", [MEM_LATER]),
    "all memory": ("every memory change and the inputs' release loop", [
        MEM_LATER,
        ("    for (int32_t k = ip.in_begin; k < ip.in_end; ++k) {\n      if (ins[k].bytes <= 0) continue;",
         "    for (int32_t k = ip.in_begin; k < (kGeneral ? ip.in_end : ip.in_begin); ++k) {\n"
         "      if (ins[k].bytes <= 0) continue;"),
        ("    s.mem_s[d] += bytes;\n", "    if (!kGeneral) return;\n    s.mem_s[d] += bytes;\n"),
        ("    s.mem_s[d] -= bytes;\n", "    if (!kGeneral) return;\n    s.mem_s[d] -= bytes;\n")]),
    "critical path": ("the per-edge critical-path terms", [
        ("        cp += edge_comm", "        if (kGeneral) cp += edge_comm"),
        ("      sc.cp_start_s = std::max(sc.cp_start_s, cp);\n      if (--sc.pending",
         "      if (kGeneral) sc.cp_start_s = std::max(sc.cp_start_s, cp);\n      if (--sc.pending"),
        ("        sc.cp_start_s = std::max(sc.cp_start_s, cp);\n        if (sharing)",
         "        if (kGeneral) sc.cp_start_s = std::max(sc.cp_start_s, cp);\n        if (sharing)")]),
    "statistics": ("busy times, link busy time and bytes, bytes moved, transfer count, end events", [
        ("      s.busy[d] += dur;\n", "      if (kGeneral) s.busy[d] += dur;\n"),
        ("    s.end_event[p] = static_cast<int32_t>(s.events);\n",
         "    if (kGeneral) s.end_event[p] = static_cast<int32_t>(s.events);\n"),
        ("          s.chan_busy_s[c] += dur + channel_busy_after_s_[c];\n          s.chan_bytes[c] += bytes;\n",
         "          if (kGeneral) s.chan_busy_s[c] += dur + channel_busy_after_s_[c];\n"
         "          if (kGeneral) s.chan_bytes[c] += bytes;\n"),
        ("          sp.hold_until_s = std::max(sp.hold_until_s, end);\n          s.total_bytes += bytes;\n"
         "          ++s.transfers;\n",
         "          sp.hold_until_s = std::max(sp.hold_until_s, end);\n          if (kGeneral) s.total_bytes += bytes;\n"
         "          if (kGeneral) ++s.transfers;\n")]),
    "prefetches": ("the prefetches at an op's readiness and start", [
        ("__builtin_prefetch(", "if (kGeneral) __builtin_prefetch(")]),
}
BENCHES = ["SimulateRandom", "SimulateContiguous"]
LOOP = "sim/event_loop.cpp"


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


def patched(source, edits, name):
    for old, new in edits:
        if old not in source:
            sys.exit(f"sim_ablation: a pattern for '{name}' is no longer in {LOOP}; "
                     f"update ABLATIONS in {__file__} to the loop as it is now")
        source = source.replace(old, new)
    return source


def build_variants(repo, work):
    """Builds bm_sim for the committed engine and each ablation; returns {name: binary path}."""
    src = os.path.join(work, "src")
    os.makedirs(src)
    subprocess.run(f"git -C {shlex.quote(repo)} archive HEAD | tar -x -C {shlex.quote(src)}", shell=True, check=True)
    build = os.path.join(work, "build")
    # The release preset's options (the Python module's position-independent code included), tests off.
    run(["cmake", "-S", src, "-B", build, "-G", "Ninja", "-DCMAKE_BUILD_TYPE=Release", "-DPLACELAB_BUILD_PYTHON=ON",
         "-DPython_EXECUTABLE=/usr/bin/python3", "-DPLACELAB_BUILD_TESTS=OFF"], stdout=subprocess.DEVNULL)
    loop_path = os.path.join(src, LOOP)
    original = open(loop_path).read()
    binaries = {}
    for name, (_, edits) in [("engine", ("", []))] + list(ABLATIONS.items()):
        with open(loop_path, "w") as f:
            f.write(patched(original, edits, name))
        print(f"building: {name}", file=sys.stderr, flush=True)
        run(["cmake", "--build", build, "--target", "bm_sim"], stdout=subprocess.DEVNULL)
        path = os.path.join(work, "bm_sim_" + re.sub(r"\W+", "_", name))
        shutil.copy(os.path.join(build, "bench", "bm_sim"), path)
        binaries[name] = path
    return binaries


def time_round(binary):
    names = BENCHES + ["FloorTopoSweep"]
    out = run(["taskset", "-c", "0", binary, "--benchmark_filter=" + "|".join(b + "$" for b in names),
               "--benchmark_repetitions=3", "--benchmark_report_aggregates_only=true"], capture_output=True).stdout
    ms = {}
    for line in out.splitlines():
        m = re.match(r"BM_(\w+?)_median\s+([\d.]+) ms", line)
        if m:
            ms[m.group(1)] = float(m.group(2))
    missing = [b for b in names if b not in ms]
    if missing:
        sys.exit(f"sim_ablation: {binary} printed no median for {', '.join(missing)}:\n{out}")
    return ms


def instructions(binary, bench):
    """Instructions of one simulation (the benchmark's single timed run under callgrind)."""
    with tempfile.NamedTemporaryFile(suffix=".callgrind") as out:
        run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out.name, "--toggle-collect=*run_mode*",
             binary, "--benchmark_filter=" + bench + "$", "--benchmark_min_time=0.001"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        text = run(["callgrind_annotate", out.name], capture_output=True).stdout
    totals = next(line for line in text.splitlines() if "PROGRAM TOTALS" in line)
    return int(totals.split()[0].replace(",", ""))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    ap.add_argument("--callgrind", action="store_true", help="also count each build's instructions per simulation")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the repository whose committed engine is built (default: this one)")
    ap.add_argument("--json", help="also write every round's figures and the instruction counts to this file")
    ap.add_argument("--check", action="store_true",
                    help=f"only check that every ablation's edits apply to the working tree's {LOOP}")
    args = ap.parse_args()
    if args.check:
        with open(os.path.join(args.repo, LOOP)) as f:
            loop = f.read()
        for name, (_, edits) in ABLATIONS.items():
            if patched(loop, edits, name) == loop:
                sys.exit(f"sim_ablation: the edits for '{name}' change nothing")
        print(f"sim_ablation: all {len(ABLATIONS)} ablations apply to {LOOP}")
        return
    if args.rounds < 1:
        sys.exit("sim_ablation: --rounds must be at least 1")
    for tool in ["git", "cmake", "ninja", "taskset"] + (["valgrind", "callgrind_annotate"] if args.callgrind else []):
        if shutil.which(tool) is None:
            sys.exit(f"sim_ablation: '{tool}' is not on PATH")
    commit = run(["git", "-C", args.repo, "rev-parse", "--short", "HEAD"], capture_output=True).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="sim_ablation_") as work:
        binaries = build_variants(args.repo, work)
        load_before = os.getloadavg()[0]
        start = datetime.datetime.now(datetime.timezone.utc)
        times = {name: [] for name in binaries}
        for r in range(args.rounds):
            for name, binary in binaries.items():
                times[name].append(time_round(binary))
            print(f"round {r + 1} of {args.rounds} done", file=sys.stderr, flush=True)
        end = datetime.datetime.now(datetime.timezone.utc)
        counts = {name: {b: instructions(binary, b) for b in BENCHES} for name, binary in binaries.items()} \
            if args.callgrind else {}
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"commit": commit, "host": platform.node(), "start_utc": start.isoformat(), "end_utc": end.isoformat(),
                       "load_before": load_before, "rounds_ms": times, "instructions": counts}, f, indent=1)
    med = {name: {k: statistics.median(r[k] for r in rounds) for k in rounds[0]} for name, rounds in times.items()}
    sweep = statistics.median(r["FloorTopoSweep"] for rounds in times.values() for r in rounds)
    base = med["engine"]
    print(f"commit {commit}, {platform.node()}, {start:%Y-%m-%d %H:%M}-{end:%H:%M} UTC, load {load_before:.2f} before "
          f"and {os.getloadavg()[0]:.2f} after; medians over {args.rounds} interleaved rounds; sweep {sweep:.3f} ms\n")
    head = "| build | removes | random | contiguous | saved (random / contiguous) |"
    if counts:
        head += " instructions per simulation (random / contiguous) |"
    print(head)
    print("|" + " --- |" * (head.count("|") - 1))
    for name, ms in med.items():
        what = ABLATIONS[name][0] if name in ABLATIONS else "nothing: the committed engine"
        row = (f"| {name} | {what} | {ms['SimulateRandom']:.2f} ms ({ms['SimulateRandom'] / sweep:.1f}x) | "
               f"{ms['SimulateContiguous']:.2f} ms ({ms['SimulateContiguous'] / sweep:.1f}x) | ")
        row += "" if name == "engine" else (f"{base['SimulateRandom'] - ms['SimulateRandom']:.2f} / "
                                             f"{base['SimulateContiguous'] - ms['SimulateContiguous']:.2f} ms")
        row += " |"
        if counts:
            c = counts[name]
            row += f" {c['SimulateRandom'] / 1e6:.1f} M / {c['SimulateContiguous'] / 1e6:.1f} M |"
        print(row)


if __name__ == "__main__":
    main()
