"""`placelab compare --seconds S`: the budgeted placers at equal time beside the fast ones (issue 53)."""
import json

from cli_runner import placelab

ARGS = ("compare", "--graph", "random_dag:ops=40,seed=2", "--cluster", "v100-pcie-4")


def test_seconds_adds_annealing_and_gdp_with_that_budget():
    doc = json.loads(placelab(*ARGS, "--seconds", "0.4", "--json").stdout)
    rows = {r["placer"]: r for r in doc["rows"]}
    assert doc["seconds"] == 0.4
    assert {"heft", "m_sct", "annealing", "gdp"} <= set(rows)
    for name in ("annealing", "gdp"):
        assert "seconds" in rows[name]["info"], name  # they ran with a time budget
    assert rows["annealing"]["info"]["seconds"] <= 0.4  # a move past the budget is dropped
    assert rows["annealing"]["info"]["cooling"] == "seconds"  # its moves fill the time, cooling over it
    assert "seconds" not in rows["heft"]["info"]
    plain = json.loads(placelab(*ARGS, "--json").stdout)
    assert "seconds" not in plain and "annealing" not in {r["placer"] for r in plain["rows"]}


def test_seconds_budgets_the_named_placers_only_where_they_take_one():
    doc = json.loads(placelab(*ARGS, "--placers", "heft,local_search", "--seconds", "0.2", "--json").stdout)
    rows = {r["placer"]: r for r in doc["rows"]}
    assert set(rows) == {"heft", "local_search"}
    assert rows["local_search"]["info"]["seconds"] <= 0.2
    text = placelab(*ARGS, "--placers", "heft", "--seconds", "0.2").stdout
    assert "budgeted placers given 0.2 s each" in text
    bad = placelab(*ARGS, "--seconds", "0", check=False)
    assert bad.returncode != 0 and "--seconds" in bad.stderr
