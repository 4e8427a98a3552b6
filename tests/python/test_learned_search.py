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
    # No step passes the budget: the placing after training (17 simulations, then 2 to compare) fits in it too.
    assert sims[-1] + 17 < info["simulations"] <= 100
    _, info = pl.place(sim, "annealing", {"steps": 50, "curve": True}, seed=1)
    assert info["simulations"] == 57 and len(info["curve_best_cost_s"]) == 50
    # The six starts and the incremental simulator's first run, then one per move.
    assert info["curve_simulations"] == list(range(8, 58))
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


def test_a_merged_record_scores_as_its_runs_did_and_later_runs_land_on_top(tmp_path):
    # bench/results keeps the runs' cells merged in <stem>_merged.json (gdp_suite_summary.py --merge) instead of
    # every run's files: the summary must score the merged file as it scored the runs, and a run added afterwards
    # must replace the cells it has, as it would have over the runs themselves.
    import json
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    import gdp_suite_summary as gss

    runs, merged = tmp_path / "runs", tmp_path / "merged"
    runs.mkdir()
    (runs / "gdp_m_0.csv").write_text("model,GPUs,expert,GDP-one,Placeto\nm,2,10 ms,12 ms,20 ms\nm,4,10 ms,11 ms,19 ms\n")
    (runs / "gdp_m_1.csv").write_text('model,GPUs,GDP-one\nm,2,"1 s, within 1% at step 4 (40 sims)"\n')
    (runs / "gdp_m_search_0.csv").write_text("model,GPUs,GDP-one,Placeto\nm,4,8 ms,\n")  # Placeto cleared at 4
    (runs / "gdp_m_search.md").write_text("# t\n\nCommand: `paper_gdp.py --name gdp_m_search`  \nCommit abc, now.\n")
    before = gss.summary(str(runs))
    path, folded = gss.merge(str(runs), ("0", "1"), "gdp", gss.KEY)
    assert folded == ["gdp_m", "gdp_m_search"]
    merged.mkdir()
    os.rename(path, merged / "gdp_merged.json")
    doc = json.loads((merged / "gdp_merged.json").read_text())
    at4 = next(e for e in doc["tables"]["0"] if e["cells"]["GPUs"] == "4")
    assert at4["cells"] == {"model": "m", "GPUs": "4", "expert": "10 ms", "GDP-one": "8 ms"}  # no cleared cell
    assert at4["from"] == {"expert": "gdp_m", "GDP-one": "gdp_m_search"}
    assert doc["runs"]["gdp_m_search"] == {"command": "`paper_gdp.py --name gdp_m_search`", "made": "Commit abc, now."}
    # The runs' files gone, the merged record alone: the same comparisons, and the runs named with their cells.
    after = gss.summary(str(merged))
    assert after.split("## Runs")[0] == before.split("## Runs")[0]
    assert "| GDP-one against expert | 2 | 2.0% faster |" in after  # sqrt(12/10 * 8/10)
    assert "| gdp_m_search | 1 | Commit abc, now. | `paper_gdp.py --name gdp_m_search` |" in after
    # A later run lands on top of the merged record.
    (merged / "gdp_m_rerun_0.csv").write_text("model,GPUs,expert\nm,2,12 ms\n")
    rows = {r["GPUs"]: r for r in gss.read_rows(str(merged), "0")}
    assert rows["2"]["expert"] == "12 ms" and rows["2"]["GDP-one"] == "12 ms" and rows["4"]["GDP-one"] == "8 ms"
    (merged / "gdp_merged.json").write_text('{"format": "something else"}')
    try:
        gss.read_rows(str(merged), "0")
        raise AssertionError("a file that is not a merged record was read")
    except SystemExit as e:
        assert "not a placelab.merged_runs file" in str(e)
