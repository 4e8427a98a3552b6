"""Results as pandas DataFrames, for comparison tables in notebooks."""

from __future__ import annotations

import time

from . import _core

__all__ = ["results_frame", "devices_frame", "compare"]

_SCALARS = ("step_time_s", "critical_path_s", "total_bytes_moved", "num_transfers", "oom")


def results_frame(results, index=None):
    """One row per simulate() result dict (or a {label: result} dict): the scalar facts plus max peak memory."""
    import pandas as pd

    if isinstance(results, dict) and "step_time_s" not in results:
        index, results = list(results.keys()), list(results.values())
    elif isinstance(results, dict):
        results = [results]
    rows = []
    for r in results:
        row = {k: r[k] for k in _SCALARS}
        row["max_peak_bytes"] = float(max(r["device_peak_bytes"], default=0.0))
        rows.append(row)
    return pd.DataFrame(rows, index=index)


def devices_frame(simulator, result):
    """One row per device of a simulate() result: name, kind, busy seconds, utilisation, peak and excess bytes."""
    import pandas as pd

    c = simulator.cluster
    step = result["step_time_s"]
    return pd.DataFrame({
        "device": c.device_names,
        "kind": c.device_kinds,
        "busy_s": result["device_busy_s"],
        "utilisation": result["device_busy_s"] / step if step > 0 else 0.0,
        "peak_bytes": result["device_peak_bytes"],
        "excess_bytes": result["device_excess_bytes"],
    })


def compare(simulator, placers=None, options=None, seed=0):
    """Runs each placer (names; default fast_placers(), those that finish in seconds on zoo graphs, as the
    command line's compare does: name others, e.g. "milp", "dp" or a learned one, to include them) on
    `simulator` and tabulates the simulated step: one row per placer with step time, speed-up over the slowest,
    OOM, bytes moved and the placer's wall time. `options` maps placer names to option dicts."""
    import pandas as pd

    names = placers if placers is not None else _core.fast_placers()
    options = options or {}
    rows = []
    for name in names:
        start = time.perf_counter()
        placement, info = _core.place(simulator, name, options.get(name), seed)
        wall_s = time.perf_counter() - start
        r = simulator.simulate(placement)
        rows.append({"placer": name, "step_time_s": r["step_time_s"], "oom": r["oom"],
                     "total_bytes_moved": r["total_bytes_moved"], "devices_used": len(set(placement.tolist())),
                     "place_wall_s": wall_s})
    frame = pd.DataFrame(rows).set_index("placer")
    if len(frame):
        frame.insert(1, "speedup_vs_slowest", frame["step_time_s"].max() / frame["step_time_s"])
    return frame
