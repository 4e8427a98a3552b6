"""Plots for notebooks (matplotlib, Agg when no display): the per-device timeline (Gantt) of a simulated
step, memory over time per device, link utilisation and training curves. Every function takes an
optional Axes and returns it; pass `path` to write the figure to a file."""

from __future__ import annotations

import os

import numpy as np

__all__ = ["timeline", "memory", "link_utilisation", "training_curves"]


def _plt():
    import matplotlib

    if not os.environ.get("DISPLAY") and "inline" not in matplotlib.get_backend():
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _patch(color, label):
    from matplotlib.patches import Patch

    return Patch(color=color, label=label)


def _axes(ax, figsize):
    plt = _plt()
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _finish(ax, path):
    if path is not None:
        ax.figure.tight_layout()
        ax.figure.savefig(path)
    return ax


def timeline(simulator, trace, ax=None, path=None, transfers=True, color_by="type"):
    """Gantt chart of one step: a row per device (ops coloured by op type or phase) and, with transfers=True,
    a row per device pair that moved data. `trace` is Simulator.trace(placement)'s dict."""
    plt = _plt()
    g, c = simulator.graph, simulator.cluster
    ops = trace["ops"]
    rows = list(c.device_names)
    pair_row = {}
    if transfers:
        for s, d in zip(trace["transfers"]["src"], trace["transfers"]["dst"]):
            pair_row.setdefault((int(s), int(d)), len(rows) + len(pair_row))
        rows += [f"{c.device_names[s]}→{c.device_names[d]}" for s, d in pair_row]
    ax = _axes(ax, (10, 0.5 * len(rows) + 1.5))
    labels = g.op_types if color_by == "type" else [("forward", "backward", "update")[p] for p in g.phase]
    keys = sorted(set(labels[o] for o in ops["op"]))
    cmap = plt.get_cmap("tab20")
    color = {k: cmap(i % 20) for i, k in enumerate(keys)}
    handles = []  # legend entries: an empty barh carries no colour into the legend
    for key in keys:
        sel = np.array([labels[o] == key for o in ops["op"]], dtype=bool)
        if not sel.any():
            continue
        starts, ends, devs = ops["start_s"][sel], ops["end_s"][sel], ops["device"][sel]
        for dev in np.unique(devs):
            m = devs == dev
            ax.broken_barh(list(zip(starts[m], ends[m] - starts[m])), (dev - 0.4, 0.8), color=color[key])
        handles.append(_patch(color[key], key))
    t = trace["transfers"]
    for (s, d), row in pair_row.items():
        m = (t["src"] == s) & (t["dst"] == d)
        ax.broken_barh(list(zip(t["start_s"][m], t["end_s"][m] - t["start_s"][m])), (row - 0.4, 0.8), color="0.5")
    ax.set_yticks(range(len(rows)), rows)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_title(f"{g.name} on {c.name}: step {trace['result']['step_time_s']:.4g} s")
    if len(keys) <= 20:
        ax.legend(handles=handles, fontsize="small", ncol=min(4, len(keys)), loc="upper right")
    return _finish(ax, path)


def memory_over_time(simulator, trace, placement):
    """Bytes held per device over the step, replayed from the schedule with the simulator's memory rules
    (docs/simulator.md): parameters for the whole step; an op's output from its start until its last local
    consumer and its last outgoing transfer end; a received copy from its transfer's start until the transfer
    and its last data consumer on that device end; temp bytes while the op runs; frees before allocations at one instant.
    Returns (times, bytes of shape (devices, times)); the maximum per device is result['device_peak_bytes']."""
    g = simulator.graph
    placement = np.asarray(placement)
    ops, t = trace["ops"], trace["transfers"]
    start = np.zeros(g.num_ops)
    end = np.zeros(g.num_ops)
    start[ops["op"]] = ops["start_s"]
    end[ops["op"]] = ops["end_s"]
    last_use = {}  # (op, device) -> end of its last data consumer on that device (control edges hold nothing)
    data = g.edge_bytes > 0
    for src, dst in zip(g.edge_src[data].tolist(), g.edge_dst[data].tolist()):
        key = (src, int(placement[dst]))
        last_use[key] = max(last_use.get(key, -np.inf), end[dst])
    sent_until = {}  # op -> end of its last outgoing transfer
    for op, t_end in zip(t["op"].tolist(), t["end_s"].tolist()):
        sent_until[op] = max(sent_until.get(op, -np.inf), t_end)
    out_b, temp_b = g.output_bytes, g.temp_bytes
    events = []  # (time, device, bytes): negative bytes are frees
    for op in range(g.num_ops):
        d = int(placement[op])
        events += [(start[op], d, temp_b[op]), (end[op], d, -temp_b[op]), (start[op], d, out_b[op])]
        free = max(last_use.get((op, d), -np.inf), sent_until.get(op, -np.inf))
        events.append((end[op] if free == -np.inf else free, d, -out_b[op]))
    for op, dst, t_start, t_end, b in zip(t["op"].tolist(), t["dst"].tolist(), t["start_s"].tolist(),
                                          t["end_s"].tolist(), t["bytes"].tolist()):
        events.append((t_start, dst, b))
        events.append((max(t_end, last_use.get((op, dst), t_end)), dst, -b))
    held_now = np.bincount(placement, weights=g.param_bytes, minlength=simulator.num_devices).astype(float)
    events.sort(key=lambda e: (e[0], e[2] >= 0))  # frees before allocations at the same instant
    times = np.empty(len(events) + 1)
    held = np.empty((simulator.num_devices, len(events) + 1))
    times[0], held[:, 0] = 0.0, held_now
    for i, (time_s, d, b) in enumerate(events, start=1):
        held_now[d] += b
        times[i], held[:, i] = time_s, held_now
    return times, held


def memory(simulator, trace, placement, ax=None, path=None):
    """Bytes held per device over the step (memory_over_time), with each device's capacity when finite."""
    ax = _axes(ax, (10, 4))
    times, held = memory_over_time(simulator, trace, placement)
    c = simulator.cluster
    for d, name in enumerate(c.device_names):
        ax.step(times, held[d] / 2**30, where="post", label=name)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("GiB held")
    ax.set_title("memory held per device")
    ax.legend(fontsize="small")
    return _finish(ax, path)


def link_utilisation(simulator, result, ax=None, path=None):
    """Bar chart of each link's busy fraction of the step (both directions summed, so it may exceed 1)."""
    ax = _axes(ax, (8, 3 + 0.1 * simulator.cluster.num_links))
    names = simulator.cluster.link_names
    step = result["step_time_s"]
    util = result["link_busy_s"] / step if step > 0 else np.zeros(len(names))
    ax.barh(range(len(names)), util)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlabel("busy fraction of the step")
    ax.set_title("link utilisation")
    return _finish(ax, path)


def training_curves(history, ax=None, path=None, keys=None):
    """Line plot of training metrics: `history` is a list of per-step dicts, a dict of lists, or a DataFrame."""
    import pandas as pd

    frame = history if isinstance(history, pd.DataFrame) else pd.DataFrame(history)
    keys = keys or [k for k in frame.columns if np.issubdtype(frame[k].dtype, np.number) and k != "step"]
    ax = _axes(ax, (8, 4))
    x = frame["step"] if "step" in frame.columns else frame.index
    for k in keys:
        ax.plot(x, frame[k], label=k)
    ax.set_xlabel("step")
    ax.legend(fontsize="small")
    ax.set_title("training")
    return _finish(ax, path)
