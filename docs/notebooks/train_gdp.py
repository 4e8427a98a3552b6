# %% [markdown]
# # Train a GDP policy on a small family and place an unseen graph
#
# GDP (Zhou et al. 2019) encodes a graph with GraphSAGE, places every op in one pass with a
# segment-recurrent attention network, and learns by PPO against the simulator's step time. Its
# parameters do not depend on the graph or on the number of devices, so one policy trained on a family
# of graphs places a graph it never saw. This notebook trains one on three small random DAGs (a few
# seconds per step here), watches the curve live through the per-step callback, then places a fourth
# graph zero-shot and compares it with HEFT, METIS, random placement and the committed pre-trained policy.
#
# Script twin: `train_gdp.py`. Settings are small so that it runs in CI; `placelab train` on the
# command line runs the same loop with progress, a JSONL log and resumable checkpoints.

# %%
import shutil
import tempfile

import matplotlib.pyplot as plt
import pandas as pd

import placelab as pl
from placelab import viz

# %% [markdown]
# ## A family of graphs and a cluster
#
# `random_dag` builds seeded layered DAGs with log-uniform op costs; seeds 1-3 are the training family,
# seed 4 the unseen graph. Each becomes a training step (`expand_training`), placed on four V100s.

# %%
cluster = pl.make_preset("v100-nvlink-4")
family = [pl.expand_training(pl.make_model("random_dag", {"ops": 40, "seed": s})) for s in (1, 2, 3)]
unseen = pl.expand_training(pl.make_model("random_dag", {"ops": 40, "seed": 4}))
pd.DataFrame([g.stats() for g in family + [unseen]], index=["train 1", "train 2", "train 3", "unseen"])[
    ["ops", "edges", "flops", "param_bytes"]]

# %% [markdown]
# ## Train with a per-step callback
#
# `train` cycles through the tasks, one PPO update per step. The callback receives each step's log
# entry (mean reward, best step time so far, wall time); returning False would stop the run. In a live
# session, redraw a figure inside the callback (e.g. with `IPython.display.clear_output`); here we
# collect the entries and plot them once.

# %%
history = []
checkpoint = tempfile.mkdtemp(prefix="gdp-")
tasks = [(f"dag{seed}", g, cluster) for seed, g in zip((1, 2, 3), family)]
summary = pl.train("gdp", tasks, steps=90, seed=0, checkpoint=checkpoint, on_step=history.append)
print(f"{summary['steps']} steps in {summary['wall_s']:.1f} s; best step time per graph (ms):",
      [round(t * 1e3, 3) for t in summary["best_cost_s"]])
viz.training_curves(pd.DataFrame(history), keys=["reward"])
plt.show()

# %% [markdown]
# The reward is -sqrt(step time / reference), the reference being the better of one-GPU and
# round-robin placement of that graph, so rewards of different graphs are comparable; the curve
# alternates between the three graphs.

# %% [markdown]
# ## Place the unseen graph
#
# `place(sim, "gdp", {"checkpoint": folder, "steps": 0})` loads the trained policy and places in one
# forward pass. The committed pre-trained policy (`place(sim, "gdp")` with no options) was trained
# on a larger suite by `bench/pretrain_gdp.py`.

# %%
sim = pl.Simulator(unseen, cluster)
rows = {
    "random": sim.simulate(sim.random_placement(seed=0)),
    "round_robin": sim.simulate(pl.place(sim, "round_robin")[0]),
    "heft": sim.simulate(pl.place(sim, "heft")[0]),
    "metis": sim.simulate(pl.place(sim, "metis")[0]),
    "gdp (family, zero-shot)": sim.simulate(pl.place(sim, "gdp", {"checkpoint": checkpoint, "steps": 0})[0]),
    "gdp (pre-trained, zero-shot)": sim.simulate(pl.place(sim, "gdp", {"steps": 0})[0]),
}
table = pl.results_frame(rows)[["step_time_s", "total_bytes_moved", "oom"]]
table["vs random"] = table["step_time_s"].loc["random"] / table["step_time_s"]
table

# %%
ax = table["step_time_s"].mul(1e3).plot.barh(figsize=(7, 3))
ax.set_xlabel("simulated step time (ms)")
plt.show()

# %% [markdown]
# The checkpoint folder was scratch for this notebook; keep it (and `pl.train(..., resume=True)` continues
# the run) or remove it.

# %%
shutil.rmtree(checkpoint)
