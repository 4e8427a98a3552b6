#!/usr/bin/python3
"""Whether the GDP suite's placements fit in memory: for each model of bench/paper_gdp.py at 2, 4 and 8 GPUs of its
V100 cluster, the largest per-GPU peak memory of the human expert's, HEFT's, m-ETF's and METIS's placements against
the GPUs' capacity (a Markdown table on stdout; docs/zoo.md records it).

    /usr/bin/python3 bench/zoo_fit.py [--models gnmt,rnnlm] [--gpus 2,4,8]
"""

from __future__ import annotations

import argparse

import paperlib
from paper_gdp import CLUSTER, SUITE
from paperlib import placelab

PLACERS = [("expert", "human_expert"), ("HEFT", "heft"), ("m-ETF", "m_etf"), ("METIS", "metis")]


def fit_row(model: str, gpus: int) -> list[str]:
    """[model, GPUs, capacity, one 'peak GB' cell per placer ('!' when over capacity)]."""
    sim = placelab.Simulator(paperlib.graph(model), placelab.make_preset(CLUSTER.format(gpus)))
    capacity = min(d["memory_bytes"] for d in sim.cluster.to_dict()["devices"])
    cells = [model.replace(",training=1", "").replace(":training=1", ""), str(gpus), f"{capacity / 1e9:.1f}"]
    for _, placer in PLACERS:
        placement, _ = placelab.place(sim, placer, {}, 1)
        result = sim.simulate(placement)
        cells.append(f"{max(result['device_peak_bytes']) / 1e9:.1f}" + (" OOM" if result["oom"] else ""))
    return cells


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated subset of the suite's models (by name before ':')")
    parser.add_argument("--gpus", default="2,4,8", help="GPU counts (default 2,4,8)")
    args = parser.parse_args(argv)
    models = paperlib.select_models(args.models, SUITE, lambda m: {m.split(":")[0], m.replace(",training=1", "")})
    header = ["model (training)", "GPUs", "GB per GPU"] + [f"{column} peak GB" for column, _ in PLACERS]
    print("| " + " | ".join(header) + " |")
    print("| --- | ---: | ---: |" + " ---: |" * len(PLACERS))
    for model in models:
        for gpus in [int(x) for x in args.gpus.split(",")]:
            print("| " + " | ".join(fit_row(model, gpus)) + " |", flush=True)


if __name__ == "__main__":
    main()
