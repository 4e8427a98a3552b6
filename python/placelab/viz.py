"""Plots for notebooks (matplotlib, Agg when no display): the per-device timeline (Gantt) of a simulated
step, memory over time per device, link utilisation and training curves. Every function takes an
optional Axes and returns it; pass `path` to write the figure to a file."""

from __future__ import annotations

import os

import numpy as np

from . import _checks

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
    _checks.simulator(simulator, "timeline")
    _checks.fields(trace, ("ops", "transfers", "result"), "timeline", "trace")
    _checks.writable(path)
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


def memory_over_time(simulator, trace, placement=None):
    """Bytes held per device over the step, as the simulator counted them: trace["memory"] holds the bytes a
    device holds after each change, in the engine's order (docs/simulator.md gives the rules), starting from
    the resident bytes. `placement` is not needed (kept for older callers). Returns (times, bytes of shape
    (devices, times)); the maximum per device is exactly result['device_peak_bytes']."""
    _checks.simulator(simulator, "memory_over_time")
    _checks.fields(trace, ("memory",), "memory_over_time", "trace")
    memory = trace["memory"]
    devices = memory["device"]
    times = np.asarray(memory["time_s"], dtype=float)
    held = np.zeros((simulator.num_devices, len(times)))
    # Each column changes one device: carry every device's last value forward.
    for d in range(simulator.num_devices):
        mine = np.flatnonzero(devices == d)
        if len(mine) == 0:
            continue
        last = np.zeros(len(times), dtype=np.int64)
        last[mine] = mine
        np.maximum.accumulate(last, out=last)
        held[d] = np.where(np.arange(len(times)) >= mine[0], memory["bytes"][last], memory["bytes"][mine[0]])
    return times, held


def memory(simulator, trace, placement=None, ax=None, path=None):
    """Bytes held per device over the step (memory_over_time), with each device's capacity when finite."""
    _checks.writable(path)
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
    _checks.simulator(simulator, "link_utilisation")
    _checks.fields(result, ("step_time_s", "link_busy_s"), "link_utilisation", "result")
    _checks.writable(path)
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

    _checks.writable(path)
    if isinstance(keys, str):
        keys = [keys]
    frame = history if isinstance(history, pd.DataFrame) else pd.DataFrame(history)
    keys = keys or [k for k in frame.columns if np.issubdtype(frame[k].dtype, np.number) and k != "step"]
    missing = [k for k in keys if k not in frame.columns]
    if missing:
        raise ValueError(f"training_curves: keys {missing} are not in the history (it has {list(frame.columns)})")
    ax = _axes(ax, (8, 4))
    x = frame["step"] if "step" in frame.columns else frame.index
    for k in keys:
        ax.plot(x, frame[k], label=k)
    ax.set_xlabel("step")
    ax.legend(fontsize="small")
    ax.set_title("training")
    return _finish(ax, path)
