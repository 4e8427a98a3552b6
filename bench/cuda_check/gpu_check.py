"""The GPU check's second half (gpu_check.sh runs the tests and calibrations first): measures the
host<->GPU link and the CUDA backend's cost per host op with hand-made plans, assembles a cpu0 + gpu0
cluster from the calibrations, then replays placements of small zoo graphs on the CUDA backend (and the
CPU-only ones on the CPU backend too) and tabulates predicted against measured step times.

usage: gpu_check.py BUNDLE OUT WORK DEADLINE_EPOCH_S"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checklib  # noqa: E402
from checklib import DATA, OUT, STALLS, WORK, load, say  # noqa: E402


def cli(*args, **kwargs):
    """checklib.cli, stopping 5 s before the deadline and echoing stalls."""
    return checklib.cli(*args, margin=5, echo_stalls=True, **kwargs)

GPU = os.environ.get("GPU_CHECK_BACKEND", "cuda")  # "cpu" for a dry run on a machine without a GPU


def show_points(name, cal):
    """The calibration's roofline, then each of its points."""
    r = cal["roofline"]
    say(f"{name}: compute {r['flops_per_s']:.4g} FLOP/s, bandwidth {r['bandwidth_bytes_per_s']:.4g} B/s, "
        f"launch {r['launch_s']:.4g} s, fit error {100 * r['mape']:.1f}%")
    for p in cal["points"]:
        rate = p.get("flops_per_s", p.get("bytes_per_s", 0))
        say(f"  {p['what']:8s} size {p['size']:10.4g}  time {p['time_s']:10.4g} s  rate {rate:10.4g}")


def main():
    cal_gpu = load(f"{OUT}/cal_cuda.json") or load(f"{WORK}/cal_cuda_quick.json")
    cal_cpu = load(f"{OUT}/cal_cpu.json") or load(f"{WORK}/cal_cpu_quick.json")
    if cal_gpu:
        show_points(f"cuda calibration ({'full' if len(cal_gpu['points']) > 10 else 'quick'})", cal_gpu)
    exp = load(f"{WORK}/cal_cuda_exp.json")
    if exp:
        show_points("cuda calibration, bin-exp (every run gated, the watchdog as fallback)", exp)
    if cal_cpu:
        r = cal_cpu["roofline"]
        say(f"cpu calibration (1 device): compute {r['flops_per_s']:.4g} FLOP/s, bandwidth {r['bandwidth_bytes_per_s']:.4g} B/s, "
            f"launch {r['launch_s']:.4g} s, fit error {100 * r['mape']:.1f}%")
    if not (cal_gpu and cal_cpu):
        say("no calibration: stopping")
        return

    # The CUDA backend's cost per op: chains of empty ops on the host (host functions) and on the GPU;
    # where enqueuing behind the gate stalls (stderr says so), with bin (gate limit 900 commands per
    # stream) and bin-exp (always gated first).
    per_op = {}
    for binary in ["bin", "bin-exp"]:
        for kind, sizes in [("cpu", [10, 30, 60, 100, 200]), ("gpu", [200, 225, 400, 1000, 3000])]:
            if kind == "cpu" and binary == "bin-exp":
                continue
            for n in sizes:
                out = cli("replay", "--plan", f"{DATA}/plans/chain_{kind}_{n}.json", "--backend", GPU, "--json",
                          "--repeats", "5", "--warmup", "1", binary=binary)
                if out:
                    d = json.loads(out)
                    per = [round(1e6 * x / d["ops"], 2) for x in d["step_times_s"]]
                    if binary == "bin" and (kind == "cpu" and n == 200 or kind == "gpu" and n == 200):
                        per_op[kind] = min(d["step_times_s"]) / d["ops"]
                    say(f"{binary:7s} chain of {n:4d} empty {kind} ops: {min(per):7.2f} us per op (fastest of 5; runs {per})"
                        + ("  STALLED once: " + STALLS[0][:60] if STALLS else ""))
    for binary in ["bin-old", "bin"]:
        out = cli("replay", "--plan", f"{DATA}/plans/memchain_gpu.json", "--backend", GPU, "--json", "--repeats", "5",
                  "--warmup", "1", binary=binary)
        if out:
            d = json.loads(out)
            best = min(d["step_times_s"])
            say(f"{binary:7s} 50 streaming ops of 64 MB on the GPU: {1e6 * best / 50:8.2f} us per op = "
                f"{6.4e7 * 50 / best / 1e12:.3f} TB/s (fastest of 5; runs {[round(1e3 * x, 3) for x in d['step_times_s']]} ms)")
    l_gpu = cal_gpu["roofline"]["launch_s"]
    l_cpu = per_op.get("cpu", cal_cpu["roofline"]["launch_s"])

    # Host <-> GPU link: ping-pong of empty ops, one transfer per hop.
    points = []
    for size in [0, 4000, 64000, 1000000, 16000000]:
        out = cli("replay", "--plan", f"{DATA}/plans/pingpong_{size}.json", "--backend", GPU, "--json", "--repeats", "5", "--warmup", "1")
        if out:
            d = json.loads(out)
            hop = min(d["step_times_s"]) / d["transfers"]
            t = max(hop - (l_cpu + l_gpu) / 2, 1e-9)
            points.append((size, t))
            say(f"ping-pong cpu0<->gpu0 {size:>9} B: {1e6 * hop:9.2f} us per hop (fastest of 5), link part {1e6 * t:9.2f} us"
                + (f" = {size / t / 1e9:.2f} GB/s" if size else ""))
    lat, inv_bw = 0.0, 1 / 25e9
    if len(points) >= 2:
        # least squares in relative error: (lat + B x) / t = 1
        a11 = sum(1 / t / t for _, t in points); a12 = sum(b / t / t for b, t in points); a22 = sum(b * b / t / t for b, t in points)
        r1 = sum(1 / t for _, t in points); r2 = sum(b / t for b, t in points)
        det = a11 * a22 - a12 * a12
        lat, inv_bw = (r1 * a22 - r2 * a12) / det, (a11 * r2 - a12 * r1) / det
        if lat < 0 or inv_bw <= 0:
            rows = [(b / t) for b, t in points if b > 0]
            lat, inv_bw = 0.0, sum(rows) / sum(x * x for x in rows)
        mape = sum(abs((lat + b * inv_bw) / t - 1) for b, t in points) / len(points)
        say(f"link fit: bandwidth {1 / inv_bw:.4g} B/s, latency {lat:.4g} s, fit error {100 * mape:.1f}%")
    else:
        say("link: ping-pong failed, using a guess of 25 GB/s and 0 latency")

    gpu_dev = dict(cal_gpu["cluster"]["devices"][0])
    cpu_dev = dict(cal_cpu["cluster"]["devices"][0])
    cpu_dev["launch_overhead_s"] = l_cpu
    cluster = {"format": "placelab.cluster", "version": 1, "name": "h200-host", "transfer_mode": "per_destination",
               "devices": [cpu_dev, gpu_dev],
               "links": [{"name": "cpu0-gpu0", "ends": ["cpu0", gpu_dev["name"]], "bandwidth_bytes_per_s": 1 / inv_bw,
                          "latency_s": lat, "duplex": "full", "busy_after_s": 0.0}]}
    cpath = f"{OUT}/cluster.json"
    with open(cpath, "w") as f:
        json.dump(cluster, f, indent=1)
    say(f"cluster: cpu0 {json.dumps(cpu_dev)}")
    say(f"         gpu0 {json.dumps(gpu_dev)}")

    graphs = [("bert", f"{DATA}/bert.json"), ("txl", f"{DATA}/txl.json"), ("resnet50", f"{DATA}/resnet50.json")]
    rows = []
    jl = open(f"{OUT}/replays.jsonl", "w")
    for gname, gpath in graphs:
        n = len(load(gpath)["ops"])
        placements = {"cpu-only": [0] * n}
        for placer in ["single_device", "heft", "dp"]:
            ppath = f"{WORK}/p_{gname}_{placer}.json"
            if cli("place", "--graph", gpath, "--cluster", cpath, "--placer", placer, "--out", ppath) is not None:
                p = load(ppath)
                if p:
                    placements[placer] = p["device_of"]
        for pname, device_of in placements.items():
            ppath = f"{WORK}/p_{gname}_{pname}.json"
            with open(ppath, "w") as f:
                json.dump({"format": "placelab.placement", "version": 1, "graph": load(gpath)["name"], "device_of": device_of}, f)
            on_gpu = sum(1 for d in device_of if d == 1)
            backends = [GPU, "cpu"] if on_gpu == 0 else [GPU]
            for backend in backends:
                extra = ["--trace", f"{WORK}/trace_{gname}_{pname}_{backend}.json"]
                out = cli("replay", "--graph", gpath, "--cluster", cpath, "--placement", ppath, "--backend", backend,
                          "--json", "--repeats", "10", "--warmup", "2", *extra)
                if not out:
                    rows.append((gname, pname, backend, on_gpu, n, None))
                    continue
                d = json.loads(out)
                d["tag"] = {"graph": gname, "placement": pname, "on_gpu": on_gpu, "stalled": bool(STALLS)}
                jl.write(json.dumps(d) + "\n"); jl.flush()
                rows.append((gname, pname, backend, on_gpu, n, d))
    jl.close()
    say("")
    say(f"{'graph':9s} {'placement':14s} {'backend':7s} {'gpu ops':>8s} {'xfers':>6s} {'predicted':>11s} {'measured':>11s} {'fastest':>11s} {'error':>8s}")
    for gname, pname, backend, on_gpu, n, d in rows:
        if d is None:
            say(f"{gname:9s} {pname:14s} {backend:7s} {on_gpu:>4d}/{n:<3d} FAILED (see log.txt)")
            continue
        say(f"{gname:9s} {pname:14s} {backend:7s} {on_gpu:>4d}/{n:<3d} {d['transfers']:>6d} {1e6 * d['predicted_step_s']:9.1f}us "
            f"{1e6 * d['measured_step_s']:9.1f}us {1e6 * min(d['step_times_s']):9.1f}us {100 * d['relative_error']:+7.1f}%"
            + ("  (stalled once)" if d["tag"]["stalled"] else ""))

    # The GPU placements again, predicted on a cluster whose gpu0 comes from bin-exp's (gated) calibration.
    if exp:
        gdev = dict(exp["cluster"]["devices"][0])
        cluster_b = dict(cluster, name="h200-host-gated-cal", devices=[cpu_dev, gdev])
        cpath_b = f"{WORK}/cluster_gated_cal.json"
        with open(cpath_b, "w") as f:
            json.dump(cluster_b, f, indent=1)
        say("")
        say(f"the same with gpu0 from bin-exp's gated calibration (launch {gdev['launch_overhead_s']:.4g} s):")
        for gname, gpath in graphs:
            for pname in ["single_device", "heft", "dp"]:
                ppath = f"{WORK}/p_{gname}_{pname}.json"
                if not os.path.exists(ppath):
                    continue
                out = cli("replay", "--graph", gpath, "--cluster", cpath_b, "--placement", ppath, "--backend", GPU,
                          "--json", "--repeats", "10", "--warmup", "2")
                if out:
                    d = json.loads(out)
                    say(f"{gname:9s} {pname:14s} {GPU:7s} predicted {1e6 * d['predicted_step_s']:9.1f}us measured "
                        f"{1e6 * d['measured_step_s']:9.1f}us fastest {1e6 * min(d['step_times_s']):9.1f}us error {100 * d['relative_error']:+7.1f}%"
                        + ("  (stalled once)" if STALLS else ""))

if __name__ == "__main__":
    main()
