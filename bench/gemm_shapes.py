#!/usr/bin/python3
"""How well a calibration's product-shape costs predict shapes it never measured.

Calibrates a backend (`placelab calibrate`; the CPU's two devices by default: its "shape" points are
made-up products, no model's), then replays a graph of the convolution and product shapes of real models (each shape on
both devices at once, four times in a chain, as calibration runs its own) and compares each op's
measured time with the calibrated simulator's prediction, with and without the fitted costs per element
(`gemm_element_s`): without them a product is priced as the square one of its FLOPs. The model shapes
are resnet18, VGG-11, MobileNet-v2 and AlexNet convolutions at batch 2, 224x224, and BERT-base products at
sequence 256: the torchvision ones are among those that may be used for fitting, but none is (the fit is
on the calibration's own shapes). Writes gemm_shapes.md and gemm_shapes.json into --out-dir.

    /usr/bin/python3 bench/gemm_shapes.py --bin build/release/cli/placelab --out-dir bench/results
    python3 bench/gemm_shapes.py --bin PLACELAB --backend cuda --devices 1 --out-dir OUT   # a GPU
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile


def conv(n, h, w, cin, cout, k, s, p, g=1):
    ho, wo = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    return [g, n * ho * wo, cout // g, cin // g * k * k]


SHAPES = {
    "resnet18 conv1": conv(2, 224, 224, 3, 64, 7, 2, 3), "resnet18 layer1": conv(2, 56, 56, 64, 64, 3, 1, 1),
    "resnet18 layer2": conv(2, 28, 28, 128, 128, 3, 1, 1), "resnet18 layer3": conv(2, 14, 14, 256, 256, 3, 1, 1),
    "resnet18 layer4": conv(2, 7, 7, 512, 512, 3, 1, 1), "resnet18 downsample4": conv(2, 14, 14, 256, 512, 1, 2, 0),
    "vgg11 conv1": conv(2, 224, 224, 3, 64, 3, 1, 1), "vgg11 conv2": conv(2, 112, 112, 64, 128, 3, 1, 1),
    "vgg11 conv3": conv(2, 56, 56, 128, 256, 3, 1, 1), "vgg11 conv5": conv(2, 28, 28, 256, 512, 3, 1, 1),
    "vgg11 conv7": conv(2, 14, 14, 512, 512, 3, 1, 1),
    "mobilenet_v2 pw1": conv(2, 112, 112, 32, 16, 1, 1, 0), "mobilenet_v2 expand": conv(2, 56, 56, 24, 144, 1, 1, 0),
    "mobilenet_v2 late": conv(2, 7, 7, 160, 960, 1, 1, 0), "mobilenet_v2 last": conv(2, 7, 7, 320, 1280, 1, 1, 0),
    "alexnet conv1": conv(2, 224, 224, 3, 64, 11, 4, 2), "alexnet conv2": conv(2, 27, 27, 64, 192, 5, 1, 2),
    "alexnet conv3": conv(2, 13, 13, 192, 384, 3, 1, 1),
    "bert qkv": [1, 256, 768, 768], "bert ffn": [1, 256, 3072, 768], "bert attention": [24, 128, 128, 64],
}
REPEAT = 4


def run(bin_path, *args):
    proc = subprocess.run([bin_path, *args], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        sys.exit(f"gemm_shapes: placelab {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def shapes_graph(devices):
    """A chain per device of every shape REPEAT times; compute-bound ops (no bytes)."""
    ops, edges, placement = [], [], []
    for device in range(devices):
        for name, dims in SHAPES.items():
            for r in range(REPEAT):
                batch, m, n, k = dims
                if ops and placement[-1] == device:
                    edges.append({"src": len(ops) - 1, "dst": len(ops)})
                ops.append({"name": f"d{device}/{name}/{r}", "type": "MatMul", "flops": 2.0 * batch * m * n * k,
                            "gemm": dims})
                placement.append(device)
    return {"format": "placelab.graph", "version": 1, "name": "gemm-shapes", "ops": ops, "edges": edges}, placement


def predicted(bin_path, graph, cluster, placement_file, tmp, tag):
    out = os.path.join(tmp, f"sim_{tag}.json")
    run(bin_path, "simulate", "--graph", graph, "--cluster", cluster, "--placement", placement_file, "--trace", out)
    trace = json.load(open(out))
    return {e["name"]: e["dur"] * 1e-6 for e in trace["traceEvents"] if e.get("ph") == "X" and "/" in e["name"]}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="build/release/cli/placelab")
    parser.add_argument("--out-dir", default="bench/results")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--devices", type=int, default=2, help="devices measured at once (default 2; a GPU: 1)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cluster, measurements = os.path.join(tmp, "cluster.json"), os.path.join(tmp, "calibration.json")
        run(args.bin, "calibrate", "--backend", args.backend, "--devices", str(args.devices), "--out", cluster,
            "--measurements", measurements)
        calibration = json.load(open(measurements))
        square = json.load(open(cluster))
        for d in square["devices"]:
            d.pop("gemm_element_s", None)
        square_cluster = os.path.join(tmp, "square.json")
        json.dump(square, open(square_cluster, "w"))
        doc, placement = shapes_graph(args.devices)
        graph, placement_file = os.path.join(tmp, "shapes.json"), os.path.join(tmp, "placement.json")
        json.dump(doc, open(graph, "w"))
        json.dump({"format": "placelab.placement", "version": 1, "device_of": placement}, open(placement_file, "w"))
        trace = os.path.join(tmp, "replay.json")
        run(args.bin, "replay", "--graph", graph, "--cluster", cluster, "--placement", placement_file, "--backend",
            args.backend, "--repeats", str(args.repeats), "--warmup", "1", "--trace", trace)
        events = json.load(open(trace))["traceEvents"]
        measured = {e["name"]: e["dur"] * 1e-6 for e in events if e.get("ph") == "X" and e.get("pid") == 0}
        shaped = predicted(args.bin, graph, cluster, placement_file, tmp, "shaped")
        plain = predicted(args.bin, graph, square_cluster, placement_file, tmp, "square")
    rows = []
    for name, dims in SHAPES.items():
        keys = [f"d{d}/{name}/{r}" for d in range(args.devices) for r in range(REPEAT)]
        t = statistics.median(measured[k] for k in keys)
        flops = 2.0 * dims[0] * dims[1] * dims[2] * dims[3]
        rows.append({"shape": name, "gemm": dims, "flops": flops, "measured_s": t,
                     "predicted_s": shaped[keys[0]], "square_s": plain[keys[0]]})
    err = [abs(r["predicted_s"] / r["measured_s"] - 1) for r in rows]
    sq_err = [abs(r["square_s"] / r["measured_s"] - 1) for r in rows]
    # PLACELAB_COMMIT names the build where the checkout is not it (a bundle run on a GPU machine).
    commit = os.environ.get("PLACELAB_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip() or "?"
    meta = {"command": " ".join(sys.argv), "commit": commit, "date": datetime.datetime.now().isoformat(timespec="minutes"),
            "machine": f"{platform.node()} ({os.cpu_count()} cores)", "load_average_before": load_before,
            "load_average_after": os.getloadavg(), "calibration_shapes": calibration["shapes"]}
    os.makedirs(args.out_dir, exist_ok=True)
    stem = "gemm_shapes" if args.backend == "cpu" else f"gemm_shapes_{args.backend}"
    json.dump({**meta, "rows": rows}, open(os.path.join(args.out_dir, stem + ".json"), "w"), indent=1)
    lines = [f"# Product shapes: calibrated costs against shapes never measured", "",
             f"`{meta['command']}` ({args.backend} backend, {args.devices} devices at once) at {commit}, {meta['date']}, {meta['machine']}, load "
             f"{load_before[0]:.2f} before, {meta['load_average_after'][0]:.2f} after.", "",
             f"Calibration's own shapes: fit error {100 * calibration['shapes']['mape']:.1f}% "
             f"({100 * calibration['shapes']['square_mape']:.1f}% priced as square products); per element of "
             f"A, B, C: " + ", ".join(f"{1e9 * v:.3g}" for v in calibration["shapes"]["gemm_element_s"]) + " ns.", "",
             f"Model shapes: mean error **{100 * statistics.mean(err):.1f}%** (largest {100 * max(err):.1f}%) with "
             f"the shape costs, {100 * statistics.mean(sq_err):.1f}% (largest {100 * max(sq_err):.1f}%) priced as "
             "square products.", "",
             "| shape | [batch, m, n, k] | MFLOP | measured GFLOP/s | error | error as square |",
             "| --- | --- | ---: | ---: | ---: | ---: |"]
    for r, e, s in zip(rows, err, sq_err):
        lines.append(f"| {r['shape']} | {r['gemm']} | {r['flops'] / 1e6:.1f} | {r['flops'] / r['measured_s'] / 1e9:.1f} | "
                     f"{100 * (r['predicted_s'] / r['measured_s'] - 1):+.1f}% | {100 * (r['square_s'] / r['measured_s'] - 1):+.1f}% |")
    open(os.path.join(args.out_dir, stem + ".md"), "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
