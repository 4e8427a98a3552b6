# %% [markdown]
# # placelab quickstart
#
# Device placement decides which device of a cluster runs each op of a deep-learning graph. This
# notebook takes one graph from the model zoo, one preset cluster and several placers, simulates the
# training step each placement gives, and compares them: step time, memory, bytes moved.
#
# Everything here runs on the discrete-event simulator (no GPU needed), in a few seconds.
# Script twin: `quickstart.py` (the notebook is generated from it by `build_notebooks.py`).

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

import placelab as pl
from placelab import viz

# %% [markdown]
# ## A graph
#
# The zoo builds forward graphs of well-known models with FLOPs, bytes and parameter sizes per op.
# `expand_training` turns a forward graph into one training step: a backward op per forward op and
# the optimizer's update ops, with colocation classes tying each op to its gradient.
# Inception-v3 at batch 32 has a few hundred forward ops: small enough to place in milliseconds.

# %%
pd.DataFrame(pl.models())[["name", "summary"]]

# %%
forward = pl.make_model("inception_v3", {"batch": 32})
graph = pl.expand_training(forward)
pd.DataFrame({"forward": forward.stats(), "training": graph.stats()}).loc[
    ["ops", "edges", "depth", "flops", "param_bytes", "output_bytes"]]

# %% [markdown]
# ## A cluster
#
# Presets describe common machines: devices (peak FLOP/s, memory bandwidth, memory) and the links
# between them. `v100-nvlink-4` is four V100s joined by NVLink.

# %%
cluster = pl.make_preset("v100-nvlink-4")
print(cluster, cluster.device_names)
print("idle-network time of 100 MB gpu0 -> gpu1:", cluster.transfer_time_s(0, 1, 100e6), "s")

# %% [markdown]
# ## Simulate a placement
#
# A `Simulator` binds a graph to a cluster with a cost model (roofline by default). A placement is one
# device index per op; `simulate` returns the step time, per-device busy time and peak memory, and
# whether some device ran out of memory.

# %%
sim = pl.Simulator(graph, cluster)
random_placement = sim.random_placement(seed=0)
result = sim.simulate(random_placement)
print(f"random placement: step {result['step_time_s'] * 1e3:.1f} ms, "
      f"{result['total_bytes_moved'] / 1e9:.2f} GB moved, oom={result['oom']}")
pl.devices_frame(sim, result)

# %% [markdown]
# ## Placers by name
#
# Every placer (heuristics, graph partitioners, list schedulers, search, the throughput DP) is
# registered by name; `place` runs one and returns the placement and a dict of what it did.

# %%
pd.DataFrame(pl.placers(), columns=["placer", "summary"]).set_index("placer")

# %%
placement, info = pl.place(sim, "m_etf", seed=0)
etf = sim.simulate(placement)
print(f"m_etf: step {etf['step_time_s'] * 1e3:.1f} ms, info {info}")

# %% [markdown]
# ## The schedule: timeline and memory
#
# `trace` records when each op ran and each transfer crossed a link. The timeline shows one row per
# device (ops coloured by phase) and one per device pair that moved data; the memory plot replays the
# simulator's memory rules, so its maximum per device is the reported peak.

# %%
trace = sim.trace(placement)
viz.timeline(sim, trace, color_by="phase")

# %%
ax = viz.memory(sim, trace, placement)
times, held = viz.memory_over_time(sim, trace, placement)
assert np.allclose(held.max(axis=1), etf["device_peak_bytes"])

# %% [markdown]
# ## Comparing placers
#
# `compare` runs several placers on the same simulator and tabulates the simulated step. The random
# placements below give a baseline distribution: `simulate_batch` takes an (N, ops) array and
# simulates all N at native speed.

# %%
names = ["single_device", "round_robin", "random", "human_expert", "metis", "scotch", "heft",
         "m_topo", "m_etf", "m_sct", "annealing"]
options = {"annealing": {"steps": 200}}  # FlexFlow-style search: 200 simulated moves keep it quick
table = pl.compare(sim, names, options=options, seed=0)
table

# %%
batch = sim.simulate_batch(sim.random_placements(256, seed=1))
fig, ax = plt.subplots(figsize=(8, 4))
ax.hist(batch["step_time_s"] * 1e3, bins=30, color="0.75", label="256 random placements")
for i, (name, row) in enumerate(table.sort_values("step_time_s").iterrows()):
    if name != "random":
        ax.axvline(row["step_time_s"] * 1e3, color=plt.get_cmap("tab10")(i % 10), label=name)
ax.set_xlabel("simulated step time (ms)")
ax.legend(fontsize="small", ncol=2)
ax.set_title(f"{graph.name} on {cluster.name}")

# %% [markdown]
# `results_frame` tabulates any simulate() results side by side, e.g. the best two placers' results:

# %%
best = table.sort_values("step_time_s").index[:2]
pl.results_frame({name: sim.simulate(pl.place(sim, name, options.get(name), seed=0)[0]) for name in best})
