"""The calibration check's second half (cal_check.sh runs the tests and calibrations first): prints the
calibrations (old build, new build without and with the host), times chains of empty, compute and
streaming GPU ops on both builds, then replays placements of small zoo graphs on the CUDA backend:
'after' with the new build on the cluster `calibrate --backend cuda --host` wrote, as it is (placements
by the placers on that cluster, and everything on the host); 'before' with the old build on the old
check's hand-assembled cluster and placements (data/old/, from bench/cuda_check/gpu_check.py's run),
when they are in the bundle. Tabulates predicted against measured step times.

usage: cal_check.py BUNDLE OUT WORK DEADLINE_EPOCH_S"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checklib import BUNDLE, DATA, OUT, STALLS, WORK, cli, load, say  # noqa: E402

GPU = os.environ.get("CAL_CHECK_BACKEND", "cuda")  # "cpu" for a dry run on a machine without a GPU
GRAPHS = [("bert", f"{DATA}/bert.json"), ("txl", f"{DATA}/txl.json"), ("resnet50", f"{DATA}/resnet50.json")]


def show_calibration(name, cal, points=False):
    if not cal:
        say(f"{name}: none")
        return
    r = cal["roofline"]
    say(f"{name}: compute {r['flops_per_s']:.4g} FLOP/s, bandwidth {r['bandwidth_bytes_per_s']:.4g} B/s, "
        f"launch {r['launch_s']:.4g} s, fit error {100 * r['mape']:.1f}%")
    if "host" in cal:
        h, l = cal["host"]["roofline"], cal["host"]["link"]
        say(f"{' ' * len(name)}  host: compute {h['flops_per_s']:.4g} FLOP/s, bandwidth {h['bandwidth_bytes_per_s']:.4g} B/s, "
            f"launch {h['launch_s']:.4g} s, fit error {100 * h['mape']:.1f}%; link {l['bandwidth_bytes_per_s']:.4g} B/s, "
            f"latency {l['latency_s']:.4g} s, fit error {100 * l['mape']:.1f}%")
    if points:
        for p in cal["points"]:
            rate = p.get("flops_per_s", p.get("bytes_per_s", 0))
            say(f"    {p.get('device', 'gpu'):4s} {p['what']:8s} size {p['size']:10.4g}  time {1e6 * p['time_s']:10.2f} us  rate {rate:10.4g}")


def chains():
    plans = [("chain_gpu_200", "200 empty GPU ops", 0, 0), ("chain_gpu_300", "300 empty GPU ops", 0, 0),
             ("chain_gpu_400", "400 empty GPU ops", 0, 0), ("compute7_gpu", "200 compute ops of 10 MFLOP", 1e7, 0),
             ("compute9_gpu", "50 compute ops of 1 GFLOP", 1e9, 0), ("memchain_gpu", "50 streaming ops of 64 MB", 0, 6.4e7),
             ("chain_cpu_100", "100 empty host ops", 0, 0)]
    for binary in ["bin-old", "bin"]:
        for plan, what, flops, size in plans:
            out = cli("replay", "--plan", f"{DATA}/plans/{plan}.json", "--backend", GPU, "--json", "--repeats", "5",
                      "--warmup", "1", binary=binary)
            if not out:
                continue
            d = json.loads(out)
            best = min(d["step_times_s"]) / d["ops"]
            rate = f" = {flops / best:.4g} FLOP/s" if flops else f" = {size / best:.4g} B/s" if size else ""
            say(f"{binary:7s} {what:28s}: {1e6 * best:8.2f} us per op{rate} (fastest of 5; median "
                f"{1e6 * d['measured_step_s'] / d['ops']:.2f})" + ("  STALLED: " + STALLS[0][:50] if STALLS else ""))


def replays(tag, binary, cpath, placements_of):
    """Replays each graph's placements; returns {(graph, placement): result or None}."""
    rows = {}
    jl = open(f"{OUT}/replays.jsonl", "a")
    for gname, gpath in GRAPHS:
        for pname, ppath in placements_of(gname, gpath):
            out = cli("replay", "--graph", gpath, "--cluster", cpath, "--placement", ppath, "--backend", GPU, "--json",
                      "--repeats", "10", "--warmup", "2", binary=binary)
            d = json.loads(out) if out else None
            if d:
                device_of = load(ppath)["device_of"]
                d["tag"] = {"run": tag, "graph": gname, "placement": pname, "stalled": bool(STALLS),
                            "devices_used": sorted(set(device_of))}
                jl.write(json.dumps(d) + "\n")
            rows[(gname, pname)] = d
    jl.close()
    return rows


def main():
    say(open(f"{WORK}/cal_times.txt").read().strip() if os.path.exists(f"{WORK}/cal_times.txt") else "no calibration times")
    old, gpu, host, host2, quick = (load(f"{WORK}/cal_{n}.json") for n in ["old", "gpu", "host", "host2", "quick_host"])
    show_calibration("old build, calibrate --backend cuda", old, points=True)
    show_calibration("new build, calibrate --backend cuda --quick --host", quick)
    show_calibration("new build, calibrate --backend cuda", gpu)
    show_calibration("new build, calibrate --backend cuda --host (replayed below)", host, points=True)
    show_calibration("new build, calibrate --backend cuda --host (again)", host2)
    chains()
    if not host:
        say("no new calibration with the host: no replays")
        return
    cpath = f"{WORK}/cluster_host.json"
    cluster = load(cpath)
    say(f"cluster replayed: {json.dumps(cluster['devices'])}")
    say(f"                  {json.dumps(cluster['links'])}")

    def new_placements(gname, gpath):
        n = len(load(gpath)["ops"])
        graph_name = load(gpath)["name"]
        host_index = [d["kind"] for d in cluster["devices"]].index("cpu")
        ppath = f"{WORK}/p_{gname}_cpu-only.json"
        with open(ppath, "w") as f:
            json.dump({"format": "placelab.placement", "version": 1, "graph": graph_name, "device_of": [host_index] * n}, f)
        yield "cpu-only", ppath
        for placer in ["single_device", "heft", "dp"]:
            ppath = f"{WORK}/p_{gname}_{placer}.json"
            if cli("place", "--graph", gpath, "--cluster", cpath, "--placer", placer, "--out", ppath) is not None:
                yield placer, ppath

    def old_placements(gname, gpath):
        for pname in ["cpu-only", "single_device", "heft", "dp"]:
            ppath = f"{DATA}/old/p_{gname}_{pname}.json"
            if os.path.exists(ppath):
                yield pname, ppath

    after = replays("after", "bin", cpath, new_placements)
    before = {}
    if os.path.exists(f"{DATA}/old/cluster.json") and os.path.exists(f"{BUNDLE}/bin-old/placelab"):
        before = replays("before", "bin-old", f"{DATA}/old/cluster.json", old_placements)

    def cols(d):
        if d is None:
            return f"{'-':>9s} {'-':>9s} {'-':>7s}"
        return f"{1e6 * d['predicted_step_s']:7.1f}us {1e6 * d['measured_step_s']:7.1f}us {100 * d['relative_error']:+6.1f}%"

    say("")
    say("predicted against measured, CUDA backend (median of 10 runs after 2 warm-ups)")
    say(f"{'':24s} {'before: old build, old hand-made cluster':^29s}   {'after: new build, new calibrated cluster':^29s}")
    say(f"{'graph':9s} {'placement':14s} {'predicted':>9s} {'measured':>9s} {'error':>7s}   {'predicted':>9s} {'measured':>9s} {'error':>7s}  devices used (after)")
    errs = {"before": [], "after": []}
    for gname, _ in GRAPHS:
        for pname in ["cpu-only", "single_device", "heft", "dp"]:
            b, a = before.get((gname, pname)), after.get((gname, pname))
            if b is None and a is None:
                continue
            for k, d in (("before", b), ("after", a)):
                if d:
                    errs[k].append(abs(d["relative_error"]))
            used = a["tag"]["devices_used"] if a else ""
            stalled = " (stalled)" if a and a["tag"]["stalled"] else ""
            say(f"{gname:9s} {pname:14s} {cols(b)}   {cols(a)}  {used}{stalled}")
    for k, e in errs.items():
        if e:
            say(f"{k}: mean |error| {100 * sum(e) / len(e):.1f}%, largest {100 * max(e):.1f}% over {len(e)} replays")


if __name__ == "__main__":
    main()
