#!/usr/bin/python3
"""GDP zero-shot on held-out graphs: the pre-trained policy alone (its greedy decode plus at most 16 sampled
placements, keeping the best; no heuristic among the candidates) against HEFT and the fast classical placers, on the
held-out graphs of policy/learned/pretrained/suite.json, on its held-out clusters and on one training cluster."""

from __future__ import annotations

import math

import paperlib
import pretrain_gdp
from paperlib import fmt_s, placelab

CLASSICAL = [("HEFT", "heft"), ("m-ETF", "m_etf"), ("m-TOPO", "m_topo"), ("METIS", "metis"), ("Scotch", "scotch"),
             ("expert", "human_expert")]
SEEN_CLUSTER = "v100-nvlink-4"  # a training cluster, to tell unseen graphs from unseen clusters
QUICK = {"graphs": ["bert:layers=2,seq_len=32,batch=2,training=1"], "clusters": ["a100-4"]}


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--checkpoint", help="a checkpoint file or folder to judge (default: the embedded policy)")
        parser.add_argument("--graphs", help="comma-separated subset of the held-out graphs (default all)")

    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    report = paperlib.Report("gdp_zero_shot", "GDP zero-shot on held-out graphs and clusters", args)
    held_out = QUICK if args.quick else pretrain_gdp.read_suite()["held_out"]
    graphs = held_out["graphs"] if not args.graphs else [g for g in held_out["graphs"] if g in args.graphs.split(",")]
    clusters = held_out["clusters"] + ([] if args.quick else [SEEN_CLUSTER])
    gdp_options = {"steps": 0} | ({"checkpoint": args.checkpoint} if args.checkpoint else {})
    rows, pairs_heft, pairs_best, oom = [], {"unseen": [], "seen": []}, {"unseen": [], "seen": []}, []
    wins = 0
    for spec in graphs:
        g = paperlib.graph(spec)
        for cluster in clusters:
            sim = placelab.Simulator(g, placelab.make_preset(cluster))
            fast = {column: paperlib.place(sim, placer, {}, args.seed) for column, placer in CLASSICAL}
            gdp = paperlib.place(sim, "gdp", gdp_options, args.seed)
            fitting = {c: r["step_time_s"] for c, r in fast.items() if not r["oom"]}
            best_column = min(fitting, key=fitting.get) if fitting else "-"
            row = {"graph": spec, "ops": g.num_ops, "cluster": cluster}
            for column, r in fast.items():
                row[column] = fmt_s(r["step_time_s"]) + (" (OOM)" if r["oom"] else "")
            row["GDP zero-shot"] = fmt_s(gdp["step_time_s"]) + (" (OOM)" if gdp["oom"] else "")
            row["GDP place time"] = fmt_s(gdp["place_s"])
            row["best fast classical"] = best_column
            rows.append(row)
            kind = "seen" if cluster == SEEN_CLUSTER else "unseen"
            if gdp["oom"]:
                oom.append(f"{spec} on {cluster}")
            if not gdp["oom"] and not fast["HEFT"]["oom"]:
                pairs_heft[kind].append((gdp["step_time_s"], fast["HEFT"]["step_time_s"]))
            if not gdp["oom"] and fitting:
                pairs_best[kind].append((gdp["step_time_s"], fitting[best_column]))
                wins += gdp["step_time_s"] <= fitting[best_column] * (1 + 1e-9)

    def pct(pairs):
        ratio = paperlib.geomean_ratio(pairs)
        return "-" if ratio != ratio else f"{100 * (ratio - 1):+.1f}% ({len(pairs)} configurations)"

    source = args.checkpoint or "the embedded pre-trained policy (policy/learned/pretrained/gdp.json)"
    report.intro = [f"Policy: {source}, placing with no training on the request's graph (`--placer gdp --options "
                    "'{\"steps\": 0}'`): its greedy schedule-aware decode and 16 placements sampled from it, the "
                    "best of them by simulated step time. No heuristic's placement is among the candidates. The "
                    "graphs and the clusters other than "
                    f"`{SEEN_CLUSTER}` were never trained on (policy/learned/pretrained/suite.json). Ratios are "
                    "geometric means of GDP's step time over the other's, over the configurations where both fit "
                    "in memory (negative: GDP faster)."]
    report.claim("GDP zero-shot against HEFT, held-out graphs on held-out clusters", "no worse (target)",
                 pct(pairs_heft["unseen"]))
    report.claim(f"GDP zero-shot against HEFT, held-out graphs on {SEEN_CLUSTER}", "no worse (target)",
                 pct(pairs_heft["seen"]))
    report.claim("GDP zero-shot against the best fast classical placer of each configuration (held-out clusters)",
                 "-", pct(pairs_best["unseen"]))
    report.claim(f"GDP zero-shot against the best fast classical placer of each configuration ({SEEN_CLUSTER})",
                 "-", pct(pairs_best["seen"]))
    total = sum(len(p) for p in pairs_best.values())
    report.claim("configurations where GDP zero-shot is the fastest of all", "-", f"{wins} of {total}")
    report.table("Step time", ["graph", "ops", "cluster"] + [c for c, _ in CLASSICAL] +
                 ["GDP zero-shot", "best fast classical", "GDP place time"], rows)
    if oom:
        report.notes.append("GDP's placement runs out of memory on: " + "; ".join(oom) + ".")
    return report.write()


if __name__ == "__main__":
    print(main())
