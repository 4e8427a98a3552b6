"""Results as pandas DataFrames, for comparison tables in notebooks."""

from __future__ import annotations

import time

from . import _checks, _core

__all__ = ["results_frame", "devices_frame", "compare"]

_SCALARS = ("step_time_s", "critical_path_s", "total_bytes_moved", "num_transfers", "oom")


def _is_batch(result) -> bool:
    """A simulate_batch() result: the same keys, one value per placement."""
    import numpy as np

    return isinstance(result, dict) and "step_time_s" in result and np.ndim(result["step_time_s"]) == 1


def results_frame(results, index=None):
    """One row per simulate() result dict (or a {label: result} dict, or per placement of a simulate_batch()
    result): the scalar facts plus max peak memory."""
    import pandas as pd

    if _is_batch(results):
        count = len(results["step_time_s"])
        results = [{k: results[k][i] for k in (*_SCALARS, "device_peak_bytes")} for i in range(count)]
    elif isinstance(results, dict) and "step_time_s" not in results:
        index, results = list(results.keys()), list(results.values())
    elif isinstance(results, dict):
        results = [results]
    rows = []
    for r in results:
        _checks.fields(r, (*_SCALARS, "device_peak_bytes"), "results_frame", "each result")
        row = {k: r[k] for k in _SCALARS}
        row["max_peak_bytes"] = float(max(r["device_peak_bytes"], default=0.0))
        rows.append(row)
    return pd.DataFrame(rows, index=index)


def devices_frame(simulator, result):
    """One row per device of a simulate() result: name, kind, busy seconds, utilisation, peak and excess bytes."""
    import pandas as pd

    _checks.simulator(simulator, "devices_frame")
    if _is_batch(result):
        raise TypeError("devices_frame: takes one simulate() result, not a simulate_batch() one; simulate the "
                        "placement of the row you want")
    _checks.fields(result, ("step_time_s", "device_busy_s", "device_peak_bytes", "device_excess_bytes"),
                   "devices_frame", "result")
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
    if isinstance(names, str):
        names = [names]  # one name, not its letters
    options = options or {}
    if not isinstance(options, dict):
        raise TypeError(f"compare: options must map placer names to option dicts, got {type(options).__name__}")
    rows = []
    for name in names:
        start = time.perf_counter()
        placement, info = _core.place(simulator, name, options.get(name), seed)
        wall_s = time.perf_counter() - start
        r = simulator.simulate(placement)
        rows.append({"placer": name, "step_time_s": r["step_time_s"], "oom": r["oom"],
                     "total_bytes_moved": r["total_bytes_moved"], "devices_used": len(set(placement.tolist())),
                     "place_wall_s": wall_s})
    columns = ["placer", "step_time_s", "oom", "total_bytes_moved", "devices_used", "place_wall_s"]
    frame = pd.DataFrame(rows, columns=columns).set_index("placer")
    if len(frame):
        frame.insert(1, "speedup_vs_slowest", frame["step_time_s"].max() / frame["step_time_s"])
    return frame
