# %% [markdown]
# # Import a PyTorch model and place it on a CPU + GPU host
#
# `placelab.from_torch` records one run of a module on example inputs (every module call and torch
# function that ran) and builds a placelab Graph with FLOPs, bytes and parameter sizes per op. Here: torchvision's
# MobileNet-v2 (random weights: placement needs shapes, not trained values), one training step,
# placed on a host with one CPU and one GPU (`cpu-gpu-1`). The questions: how much slower is the CPU
# alone, and does any placer gain by using both?
#
# Script twin: `torch_import.py`.

# %%
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import torch
import torchvision

import placelab as pl
from placelab import viz

torch.manual_seed(0)

# %% [markdown]
# ## Record the model
#
# A batch of 2 images at 224x224 keeps the recording (which runs the model once on the CPU) to about a
# second. `import_torch` also reports the op types and any op without a FLOP formula (those keep a
# bytes-only cost and are never dropped); `training=True` adds the backward and update ops.

# %%
model = torchvision.models.mobilenet_v2(weights=None).eval()
example = torch.randn(2, 3, 224, 224)
forward, info = pl.import_torch(model, example)
print(forward, "unsupported ops:", info["unsupported"])
pd.Series(info["op_types"]).sort_values(ascending=False).head(10)

# %%
graph = pl.from_torch(model, example, training=True)
stats = graph.stats()
print(f"{graph.num_ops} ops, {stats['flops'] / 1e9:.2f} GFLOP per step, "
      f"{stats['param_bytes'] / 1e6:.1f} MB of parameters and optimizer state")

# %% [markdown]
# ## The host
#
# `cpu-gpu-1` is one CPU socket and one V100 behind a PCIe switch. Op times come from the roofline
# cost model: the GPU has far higher peak FLOP/s and memory bandwidth, and every tensor that crosses
# between the two pays the PCIe link.

# %%
cluster = pl.make_preset("cpu-gpu-1")
sim = pl.Simulator(graph, cluster)
pd.DataFrame({"device": cluster.device_names, "kind": cluster.device_kinds,
              "whole step (s)": sim.op_times().sum(axis=0)})

# %% [markdown]
# ## CPU only, GPU only, and placers
#
# The two single-device placements bound the question; the placers below may split the graph.

# %%
placements = {f"all on {name}": np.full(graph.num_ops, d, dtype=np.int32)
              for d, name in enumerate(cluster.device_names)}
for name in ["round_robin", "metis", "heft", "m_topo", "m_etf"]:
    placements[name], _ = pl.place(sim, name, seed=0)
table = pl.results_frame({label: sim.simulate(p) for label, p in placements.items()})
table["speedup_vs_cpu"] = table["step_time_s"].iloc[0] / table["step_time_s"]
table

# %%
fig, ax = plt.subplots(figsize=(8, 3.5))
ax.barh(table.index, table["step_time_s"] * 1e3, color=["0.6"] * 2 + ["C0"] * (len(table) - 2))
ax.invert_yaxis()
ax.set_xlabel("simulated training step (ms)")
ax.set_title(f"{graph.name} on {cluster.name}")

# %% [markdown]
# ## Where does the time go?
#
# The timeline of the fastest placement shows which device ran what, and what crossed PCIe.

# %%
best = table["step_time_s"].idxmin()
placement = placements[best]
print(f"best: {best}; ops per device:", dict(zip(cluster.device_names, np.bincount(placement, minlength=2))))
viz.timeline(sim, sim.trace(placement), color_by="phase")

# %% [markdown]
# With one GPU far faster than the CPU, the GPU alone is hard to beat for a model that fits in its
# memory: every op moved to the CPU runs slower and its tensors cross PCIe, so the placers that split
# the graph pay for it. A split can pay off when the GPU's memory does not hold the step (try a larger
# batch or model), or across several GPUs: change the preset to `cpu-gpu-2` or `cpu-gpu-4` and rerun.

# %% [markdown]
# ## Three ways in: a recorded run, an ONNX file, the zoo
#
# The same model can also come in as an ONNX file (what every framework exports; `placelab graph --onnx F`
# on the command line), and today's large models are in the zoo (`gpt`, `llama`, `mixtral`, `vit`, with
# `shards` and `micro_batches` for tensor and pipeline parallelism). The ONNX export below is of the model in
# eval mode, which folds each batch norm into its convolution: same products, fewer ops.

# %%
import os
import tempfile

path = os.path.join(tempfile.mkdtemp(), "mobilenet_v2.onnx")
torch.onnx.export(model, example, path)
ways = {"recorded run (from_torch)": forward, "ONNX (from_onnx)": pl.from_onnx(path),
        "zoo: Llama, 2 layers of 7B's width": pl.make_model("llama", {"layers": 2, "seq_len": 256})}
pd.DataFrame({"ops": [g.num_ops for g in ways.values()],
              "GFLOP": [g.flops.sum() / 1e9 for g in ways.values()],
              "parameters (M)": [g.param_bytes.sum() / 4e6 for g in ways.values()]}, index=list(ways))

# %% [markdown]
# ## When an import fails
#
# Recording imports whatever runs: Python loops are unrolled, shapes are concrete, and recurrent modules
# (`nn.LSTM`, `nn.GRU`, their cells) become one cell op per layer and time step. If a module still cannot be
# imported, the error is one line naming it and the two ways out: keep that module whole as one op
# (`keep_whole=["its.path"]` or a module type; its FLOPs are the sum of what ran inside it), or export the
# model to ONNX. `keep_whole` also coarsens on purpose, here the last inverted-residual block:

# %%
whole = pl.from_torch(model, example, keep_whole=["features.17"])
print(f"{forward.num_ops} ops, {whole.num_ops} with features.17 as one op; "
      f"FLOPs equal: {np.isclose(whole.flops.sum(), forward.flops.sum())}")
