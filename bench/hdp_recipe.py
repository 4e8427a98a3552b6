#!/usr/bin/python3
"""HDP at its paper's group counts: the TensorFlow implementation's exploration (device logits bounded by tanh,
noise on the sampled logits early on) against the plain policy, on GNMT-2 (4 V100s) and Inception-v3 training
(4 K80s), 1000 training steps each, beside the human expert and HEFT. Mean rollout cost per fifth of the run
shows whether the policy itself improves or collapses onto one device."""

from __future__ import annotations

import paperlib
from paperlib import fmt_s, placelab

CASES = [("gnmt:layers=2,steps=4", "v100-nvlink-4"), ("inception_v3:training=1", "k80-4")]
QUICK_CASES = [("ptb:steps=3,nodes=4,training=1", "k80-2")]
# name -> HDP options over its defaults (80 groups on 4 devices, tanh_constant 1, logits_noise 0.5 until step 300)
RECIPES = [("defaults (bounded, noise to step 300)", {}),
           ("noise to step 750 (TensorFlow's)", {"stop_noise_step": 750}),
           ("bounded, no noise", {"logits_noise": 0}),
           ("plain (no bound, no noise)", {"tanh_constant": 0, "logits_noise": 0}),
           ("plain, 8 groups (the old defaults)", {"tanh_constant": 0, "logits_noise": 0, "groups": 8})]


def main(argv=None) -> str:
    args = paperlib.parse_args(__doc__.splitlines()[0], argv)
    report = paperlib.Report("hdp_recipe", "HDP: the TensorFlow implementation's exploration at 80 groups", args)
    steps = paperlib.training_steps(args, 1000)
    rows = []
    for model, preset in QUICK_CASES if args.quick else CASES:
        g, c = paperlib.graph(model), placelab.make_preset(preset)
        sim = placelab.Simulator(g, c)
        anchors = {name: sim.simulate(placelab.place(sim, name, {}, args.seed)[0])["step_time_s"]
                   for name in ("human_expert", "heft")}
        for recipe, options in RECIPES:
            log = []
            out = placelab.train("hdp", [(g, c)], steps=steps, seed=args.seed, options=options,
                                 on_step=lambda e: log.append(e) or True)
            fifth = max(1, len(log) // 5)
            means = [sum(e["cost_s"] for e in log[i:i + fifth]) / len(log[i:i + fifth]) for i in range(0, len(log), fifth)]
            rows.append({"graph": model, "cluster": preset, "recipe": recipe,
                         "expert": fmt_s(anchors["human_expert"]), "HEFT": fmt_s(anchors["heft"]),
                         "HDP best": fmt_s(out["best_cost_s"][0]), "at step": out["best_step"][0],
                         "mean rollout cost by fifth": " / ".join(fmt_s(m) for m in means[:5]),
                         "wall": fmt_s(out["wall_s"])})
    report.intro = [f"HDP trained from scratch for {steps} steps (8 rollouts each, seed {args.seed}) with its defaults "
                    "and variants; the best rollout and the mean rollout cost per fifth of the run."]
    report.table("HDP recipes", ["graph", "cluster", "recipe", "expert", "HEFT", "HDP best", "at step",
                                 "mean rollout cost by fifth", "wall"], rows)
    return report.write()


if __name__ == "__main__":
    print(main())
