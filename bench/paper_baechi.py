#!/usr/bin/python3
"""Baechi (Jeon et al., SoCC 2020): the memory-constrained list placers m-TOPO, m-ETF and m-SCT against the
human expert and the learned placers: placement time and simulated step time, on GPUs whose memory is cut so
that models must be split, as Baechi's evaluation does."""

from __future__ import annotations

import paperlib
from paperlib import fmt_s, placelab

QUICK = [("rnnlm:layers=2,steps=5,training=1", "v100-pcie-2")]
FULL = [("inception_v3:training=1", "v100-pcie-4"), ("gnmt:layers=4,steps=20,training=1", "v100-pcie-4"),
        ("transformer_xl:layers=8,training=1", "v100-pcie-4"), ("bert:layers=12,training=1", "v100-pcie-4")]
MEMORY_FRACTION = 0.8  # each GPU holds this share of the graph's total memory (Baechi's constrained setting)


def constrained(cluster_name: str, graph) -> "placelab.Cluster":
    """The preset with every GPU's memory set to MEMORY_FRACTION of the single-device peak of `graph`."""
    cluster = placelab.make_preset(cluster_name)
    peak = placelab.Simulator(graph, cluster).simulate([0] * graph.num_ops)["device_peak_bytes"][0]
    doc = cluster.to_dict()
    for device in doc["devices"]:
        device["memory_bytes"] = float(MEMORY_FRACTION * peak)
    doc["name"] = f"{cluster_name}-mem{int(MEMORY_FRACTION * 100)}"
    return placelab.cluster_from_dict(doc, "baechi constrained cluster")


def main(argv=None) -> str:
    args = paperlib.parse_args(__doc__.splitlines()[0], argv)
    report = paperlib.Report("baechi", "Baechi: memory-constrained list placers against expert and learned ones",
                             args)
    steps = paperlib.training_steps(args, 200)
    rows_spec = [("m-TOPO", "m_topo", {}), ("m-ETF", "m_etf", {}), ("m-SCT", "m_sct", {}),
                 ("HEFT", "heft", {}), ("expert", "human_expert", {}), ("single GPU", "single_device", {})]
    rows_spec += [(name, name, {"steps": steps}) for name in ("hdp", "placeto", "gdp")]
    rows, ratios_time, ratios_step = [], [], []
    def run_config(config):  # one (graph, cluster); spread over MPI ranks under mpirun
        spec, cluster_name = config
        g = paperlib.graph(spec)
        cluster = constrained(cluster_name, g)
        return cluster.name, paperlib.run_placers(placelab.Simulator(g, cluster), rows_spec, args.seed)

    configs = QUICK if args.quick else FULL
    for (spec, _), (cluster_name, results) in zip(configs, paperlib.sweep(run_config, configs)):
        for column, r in results.items():
            rows.append({"graph": spec, "cluster": cluster_name, "placer": column, "step time": fmt_s(r["step_time_s"]),
                         "OOM": "yes" if r["oom"] else "no", "placement time": fmt_s(r["place_s"])})
        learned = [r for c, r in results.items() if c in ("hdp", "placeto", "gdp")]
        for c in ("m-TOPO", "m-ETF", "m-SCT"):
            ratios_time += [(l["place_s"], results[c]["place_s"]) for l in learned]
            if "expert" in results and not results[c]["oom"] and not results["expert"]["oom"]:
                ratios_step.append((results[c]["step_time_s"], results["expert"]["step_time_s"]))
    report.intro = [f"Each GPU's memory is {MEMORY_FRACTION:.0%} of the graph's single-device peak, so one GPU runs "
                    "out of memory (OOM is reported, the run completes). Learned placers train on the graph for "
                    f"{steps} steps (seed {args.seed}); their placement time includes that training."]
    report.table("Step time and placement time", ["graph", "cluster", "placer", "step time", "OOM", "placement time"],
                 rows)
    speed = paperlib.geomean_ratio(ratios_time)
    step = paperlib.geomean_ratio(ratios_step)
    report.claim("placement time of learning-based placers / Baechi's", "654x to 206,000x faster",
                 "-" if speed != speed else f"{speed:.0f}x (geometric mean)")
    report.claim("step time of m-* placements over the expert's", "at most 6.2% higher",
                 "-" if step != step else f"{100 * (step - 1):+.1f}% (geometric mean over the {len(ratios_step)} "
                 "pairs where both fit)")
    return report.write()


if __name__ == "__main__":
    print(main())
