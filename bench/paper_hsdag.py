#!/usr/bin/python3
"""HSDAG (structure-aware device placement): inference of Inception-v3, ResNet-50 and BERT on a CPU + GPU host,
CPU-only, GPU-only, Placeto, the RNN-based placer (HDP) and HSDAG; latency reduction over CPU-only."""

from __future__ import annotations

import math

import paperlib
from paperlib import fmt_pct, fmt_s, placelab

MODELS = ["inception_v3", "resnet50", "bert:layers=12"]
QUICK_MODELS = ["resnet50:batch=1"]
CLUSTER = "cpu-gpu-1"


def main(argv=None) -> str:
    args = paperlib.parse_args(__doc__.splitlines()[0], argv)
    report = paperlib.Report("hsdag", f"HSDAG: CPU + GPU inference on {CLUSTER}", args)
    steps = paperlib.training_steps(args, 200)
    cluster = placelab.make_preset(CLUSTER)
    kinds = cluster.device_kinds
    cpu, gpu = kinds.index("cpu"), next(d for d, k in enumerate(kinds) if k != "cpu")
    spec = [("Placeto", "placeto", {"steps": steps}), ("HDP (RNN-based)", "hdp", {"steps": steps}),
            ("HSDAG", "hsdag", {"steps": steps})]
    rows, gains, over_gpu = [], [], []
    for model in QUICK_MODELS if args.quick else MODELS:
        g = paperlib.graph(model)
        sim = placelab.Simulator(g, cluster)
        cpu_only = sim.simulate([cpu] * g.num_ops)["step_time_s"]
        gpu_only = sim.simulate([gpu] * g.num_ops)["step_time_s"]
        results = paperlib.run_placers(sim, spec, args.seed)
        row = {"model": model, "CPU-only": fmt_s(cpu_only), "GPU-only": fmt_s(gpu_only)}
        for column, r in results.items():
            reduction = 100 * (1 - r["step_time_s"] / cpu_only)
            row[column] = f"{fmt_s(r['step_time_s'])} ({fmt_pct(-reduction)})"
            if column == "HSDAG":
                gains.append(reduction)
                over_gpu.append(100 * (1 - r["step_time_s"] / gpu_only))
        rows.append(row)
    report.intro = [f"Inference latency (one forward pass, batch as the zoo default) on `{CLUSTER}`: one CPU socket "
                    "and one GPU over PCIe. In brackets, the change against CPU-only. Learned placers train on "
                    f"each graph for {steps} steps (seed {args.seed})."]
    report.table("Latency", ["model", "CPU-only", "GPU-only"] + [c for c, _, _ in spec], rows)
    report.claim("HSDAG latency reduction over CPU-only", "up to 58.2%",
                 "-" if not gains else f"up to {max(gains):.1f}%")
    report.claim("HSDAG latency reduction over GPU-only (the stronger anchor, same run)", "no figure",
                 "-" if not over_gpu else f"up to {max(over_gpu):.1f}%")
    report.notes = ["A GPU that runs every op faster than the CPU makes GPU-only hard to beat: the learned placers "
                    "must find it, and their gain over CPU-only is then bounded by GPU-only's."]
    return report.write()


if __name__ == "__main__":
    print(main())
