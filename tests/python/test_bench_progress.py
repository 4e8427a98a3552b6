"""The bench scripts' progress lines name their figures (issue 56): `bench/reproduce.py --quick` printed a bare
"dp 100.3 ms" (a step time) beside a table whose DP row says 17.79 ms (the max-load)."""
import os
import re
import sys

import placelab as pl

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import paperlib  # noqa: E402


def test_a_placer_progress_line_labels_each_figure(capsys):
    sim = pl.Simulator(pl.make_model("random_dag", {"ops": 30, "seed": 4}), pl.make_preset("v100-nvlink-2"))
    result = paperlib.place(sim, "heft")
    line = capsys.readouterr().err.strip()
    m = re.fullmatch(r"(\S+) on (\S+): heft: step time (.+), max-load (.+), placed in (.+)", line)
    assert m, line
    assert m.group(3) == paperlib.fmt_s(result["step_time_s"]) and m.group(4) == paperlib.fmt_s(result["max_load_s"])
    assert result["step_time_s"] != result["max_load_s"]  # two figures, so each needs its name
