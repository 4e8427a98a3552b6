#!/usr/bin/python3
"""Pipelined evaluation two ways on Tarnawski et al.'s inputs: their max-load model (sim::max_load) against a
simulated stream of micro-batches through the discrete-event engine (sim::simulate_stream), for the human-expert
and the optimal DP splits of the msr layer graphs."""

from __future__ import annotations

import os

import paperlib
from paper_tarnawski import DATA
from paperlib import placelab

FULL = ["bert24_inference", "bert24_training", "gnmt_inference", "gnmt_training", "resnet50_inference",
        "resnet50_training"]
QUICK = ["bert24_inference"]
# resnet50_training has no split of its own: the forward split extends to it through colour classes.
SPLIT_OF = {"resnet50_training": "resnet50_inference"}


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--micro-batches", type=int, default=64, help="micro-batches per stream (default 64)")

    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    report = paperlib.Report("pipeline", "Pipelined evaluation: the max-load model against a simulated stream", args)
    batches = 4 if args.quick else args.micro_batches
    rows, ratios = [], []
    for name in QUICK if args.quick else FULL:
        instance = placelab.read_msr(os.path.join(DATA, "throughput-inputs", "LayerGraphs", name + ".json"))
        cluster = placelab.msr_cluster(instance)
        model = placelab.Simulator(instance.graph, cluster)
        # The stream pays the instance's measured edge costs, as the model does.
        stream = placelab.Simulator(instance.graph, cluster, {"use_edge_comm": True})
        split_file = os.path.join(DATA, "human-experts", SPLIT_OF.get(name, name) + "_expert.json")
        splits = {"expert": placelab.read_msr_split(split_file, instance),
                  "DP": paperlib.place(model, "dp", {}, args.seed)["placement"]}
        for split, placement in splits.items():
            load = model.max_load(placement)
            s = stream.simulate_stream(placement, batches)
            ratio = s["time_per_batch_s"] / load["max_load_s"]
            ratios.append(ratio)
            rows.append({"instance": name, "split": split, "max-load (ms)": f"{load['max_load_s'] * 1e3:.4g}",
                         "stream period (ms)": f"{s['time_per_batch_s'] * 1e3:.4g}", "period / max-load": f"{ratio:.3f}",
                         "one micro-batch (ms)": f"{s['single_s'] * 1e3:.4g}",
                         "stream OOM": "yes" if s["last"]["oom"] else "no"})
    report.intro = [
        f"Each split runs as a stream of {batches} micro-batches (`simulate_stream`: every device starts the "
        "earliest micro-batch's ready op, parameters are held once, transfers take the instance's measured edge "
        "costs on FIFO links); the period is (makespan - one micro-batch alone) / (micro-batches - 1). The "
        "max-load model charges each device its compute plus all the communication it takes part in; the engine "
        "overlaps a device's transfers with its compute, so its period can be lower, and pipeline fill, "
        "link contention and cross-stage waits can make it higher."]
    report.notes = [
        "\"stream OOM\": some device's peak over its capacity during the stream. Every micro-batch is available "
        "from the start, so an early stage runs ahead of the next and holds the activations of every micro-batch "
        "in flight until their backward ops (GPipe's schedule without re-computation); the max-load model counts "
        "resident parameters only.",
        "Before 2026-11-22 the stream ran ready ops by ready time alone: a stage of several ops ran its first op "
        "for every micro-batch before its second, so nothing pipelined (resnet50_inference's expert split: "
        "181.6 ms per micro-batch over 20, against its 43.92 ms max load) and every copy held its own parameters."]
    report.table("Max-load model and simulated stream, per split", ["instance", "split", "max-load (ms)",
                 "stream period (ms)", "period / max-load", "one micro-batch (ms)", "stream OOM"], rows)
    report.claim("a pipelined run's steady-state period is the max load (Tarnawski et al.'s model)", "by definition",
                 f"period / max-load from {min(ratios):.3f} to {max(ratios):.3f} over {len(ratios)} splits")
    return report.write()


if __name__ == "__main__":
    print(main())
