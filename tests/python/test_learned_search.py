"""GDP's learned search (docs/learned.md, gdp: windows of the best placement re-placed by the policy, PPO and
self-imitation): never worse than the heuristic it starts from, and ahead of random-move search at the same
number of simulations on a graph where the policy's coordinated re-placements pay."""
import placelab as pl


def step_time(sim, placement):
    return sim.simulate(placement)["step_time_s"]


def test_learned_search_is_never_worse_than_its_start_and_beats_random_moves():
    # An NMT of Placeto's family, training step, 1,405 ops on 4 V100s. Measured at seeds 1, 2 and 3: GDP 11-17%
    # faster than random-move search given GDP's simulations.
    sim = pl.Simulator(pl.expand_training(pl.make_model("nmt", {"seed": 1})), pl.make_preset("v100-nvlink-4"))
    start = min(step_time(sim, pl.place(sim, name, seed=1)[0]) for name in ("metis", "m_etf", "heft"))
    placement, info = pl.place(sim, "gdp", {"pretrained": False, "steps": 60}, seed=1)
    found = step_time(sim, placement)
    assert found <= start * (1 + 1e-12)
    assert found < 0.95 * start  # and it did search
    # Random-move search: annealing at temperature 0 keeps a random unit's random move when it does not hurt.
    assert info["simulations"] > 500
    moves, _ = pl.place(sim, "annealing", {"steps": info["simulations"], "temperature": 0}, seed=1)
    assert found < 0.95 * step_time(sim, moves)


def test_a_simulation_budget_stops_training_and_curves_count_simulations():
    sim = pl.Simulator(pl.make_model("random_dag", {"ops": 40, "seed": 2}), pl.make_preset("v100-nvlink-2"))
    _, info = pl.place(sim, "gdp", {"pretrained": False, "simulations": 100, "curve": True, "hidden": 8,
                                    "heads": 1, "ff": 8, "head_hidden": 8}, seed=1)
    sims = info["curve_simulations"]
    assert sims == sorted(sims) and len(sims) == len(info["curve_best_cost_s"]) == len(info["curve_wall_s"])
    assert sims[-2] < 100 <= sims[-1] == info["simulations"]  # the step that reaches the budget completes
    _, info = pl.place(sim, "annealing", {"steps": 50, "curve": True}, seed=1)
    assert info["simulations"] == 56 and len(info["curve_best_cost_s"]) == 50
    assert info["curve_simulations"] == list(range(7, 57))  # the six starts, then one per move
    assert info["curve_best_cost_s"] == sorted(info["curve_best_cost_s"], reverse=True)


def test_summaries_merge_runs_of_some_columns_over_earlier_runs(tmp_path):
    # A run of some columns (paper_gdp.py --placers ... --name gdp_<model>_<what>) replaces those cells and keeps
    # the others, configuration by configuration.
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import gdp_suite_summary

    (tmp_path / "gdp_m_0.csv").write_text("model,GPUs,expert,GDP-one\nm,2,10 ms,12 ms\nm,4,10 ms,11 ms\n")
    (tmp_path / "gdp_m_search_0.csv").write_text("model,GPUs,GDP-one\nm,4,8 ms\n")
    rows = {r["GPUs"]: r for r in gdp_suite_summary.read_rows(str(tmp_path), "0")}
    assert rows["2"] == {"model": "m", "GPUs": "2", "expert": "10 ms", "GDP-one": "12 ms"}
    assert rows["4"] == {"model": "m", "GPUs": "4", "expert": "10 ms", "GDP-one": "8 ms"}
    assert "| GDP-one against expert | 2 | 2.0% faster |" in gdp_suite_summary.summary(str(tmp_path))
    # A later run that has a column but left it empty (a placer it skipped on a changed graph) clears the old cell.
    (tmp_path / "gdp_m_update_0.csv").write_text("model,GPUs,expert,GDP-one\nm,2,9 ms,\n")
    rows = {r["GPUs"]: r for r in gdp_suite_summary.read_rows(str(tmp_path), "0")}
    assert rows["2"] == {"model": "m", "GPUs": "2", "expert": "9 ms", "GDP-one": ""}
    assert "| GDP-one against expert | 1 | 20.0% faster |" in gdp_suite_summary.summary(str(tmp_path))
