# Notebook helpers: plots written to files (Agg) and results as pandas DataFrames.
import numpy as np
import pytest

import placelab
from placelab import viz

pytest.importorskip("matplotlib")
pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def run(simulator):
    p = simulator.random_placement(seed=2)
    return p, simulator.trace(p)


def is_png(path):
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_timeline_is_written(simulator, run, tmp_path):
    p, trace = run
    ax = viz.timeline(simulator, trace, path=tmp_path / "gantt.png")
    assert is_png(tmp_path / "gantt.png")
    # one row per device plus one per device pair that moved data
    pairs = set(zip(trace["transfers"]["src"].tolist(), trace["transfers"]["dst"].tolist()))
    assert len(ax.get_yticks()) == simulator.num_devices + len(pairs)
    import matplotlib.pyplot as plt
    plt.close("all")


@pytest.mark.parametrize("training, preset", [(False, "v100-nvlink-4"), (True, "v100-nvlink-4"), (True, "placeto-4")])
def test_memory_curve_replays_the_simulator_peak(graph, training, preset):
    g = placelab.expand_training(graph) if training else graph
    sim = placelab.Simulator(g, placelab.make_preset(preset))
    for seed in range(2):
        p = sim.random_placement(seed)
        trace = sim.trace(p)
        times, held = viz.memory_over_time(sim, trace, p)
        assert held.shape == (sim.num_devices, len(times))
        assert (np.diff(times) >= 0).all()
        params = np.bincount(p, weights=g.param_bytes, minlength=sim.num_devices)
        assert np.array_equal(held[:, 0], params) and np.allclose(held[:, -1], params)  # all else freed
        # the engine's own peak (whole bytes, training graphs have control edges and backward transfers)
        assert np.array_equal(held.max(axis=1), trace["result"]["device_peak_bytes"])


def test_memory_curve_with_zero_time_ops():
    # c takes no time: at t = 2 it frees a's copy as b's copy arrives; the curve follows the engine's order.
    g = placelab.graph_from_dict({"format": "placelab.graph", "version": 1, "name": "zero", "ops": [
        {"name": "a", "type": "X", "measured_s": {"accelerator": 1.0}},
        {"name": "b", "type": "X", "measured_s": {"accelerator": 2.0}},
        {"name": "c", "type": "X", "measured_s": {"accelerator": 0.0}},
        {"name": "e", "type": "X", "measured_s": {"accelerator": 1.0}}], "edges": [
        {"src": "a", "dst": "c", "bytes": 100, "comm_s": 1.0}, {"src": "b", "dst": "e", "bytes": 50, "comm_s": 1.0}]})
    sim = placelab.Simulator(g, placelab.msr_cluster(3, 0, 1e9), {"use_edge_comm": True})
    p = [0, 1, 2, 2]
    trace = sim.trace(p)
    times, held = viz.memory_over_time(sim, trace)
    assert np.array_equal(held.max(axis=1), trace["result"]["device_peak_bytes"])
    assert held[2].max() == 150 and held[2, -1] == 0


def test_memory_plot(simulator, run, tmp_path):
    p, trace = run
    viz.memory(simulator, trace, p, path=tmp_path / "memory.png")
    assert is_png(tmp_path / "memory.png")


def test_link_and_training_plots(simulator, run, tmp_path):
    _, trace = run
    viz.link_utilisation(simulator, trace["result"], path=tmp_path / "links.png")
    assert is_png(tmp_path / "links.png")
    history = [{"step": i, "reward": -1.0 / (i + 1), "step_time_s": 1.0 / (i + 1)} for i in range(20)]
    ax = viz.training_curves(history, path=tmp_path / "train.png")
    assert is_png(tmp_path / "train.png")
    assert len(ax.get_lines()) == 2
    import matplotlib.pyplot as plt
    plt.close("all")


def test_frames(simulator, run):
    p, trace = run
    r = trace["result"]
    frame = placelab.results_frame({"random": r, "single": simulator.simulate(np.zeros(simulator.num_ops, int))})
    assert list(frame.index) == ["random", "single"]
    assert frame.loc["random", "step_time_s"] == r["step_time_s"]
    devices = placelab.devices_frame(simulator, r)
    assert list(devices["device"]) == simulator.cluster.device_names
    assert devices["utilisation"].max() <= 1 + 1e-12
    placements = simulator.random_placements(3, seed=2)
    batch = placelab.results_frame(simulator.simulate_batch(placements))  # one row per placement
    assert list(batch["step_time_s"]) == [simulator.simulate(q)["step_time_s"] for q in placements]
    with pytest.raises(TypeError, match="not a simulate_batch"):
        placelab.devices_frame(simulator, simulator.simulate_batch(placements))


def test_compare_table(simulator):
    names = [n for n, _ in placelab.placers() if n in ("single_device", "round_robin", "random")]
    if not names:
        pytest.skip("no cheap placer registered yet")
    table = placelab.compare(simulator, names, seed=1)
    assert list(table.index) == names
    for name in names:
        p, _ = placelab.place(simulator, name, seed=1)
        assert table.loc[name, "step_time_s"] == simulator.simulate(p)["step_time_s"]
    assert table["speedup_vs_slowest"].min() == pytest.approx(1.0)
    assert list(placelab.compare(simulator, names[0]).index) == [names[0]]  # one name, not its letters
    assert placelab.compare(simulator, []).empty
