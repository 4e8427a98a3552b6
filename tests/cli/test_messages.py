"""Messages point at the fix (issue 56): a misspelled option or verb names the nearest valid one, a missing
file names the option that named it, the place table says what its speed-up is against, budgets show in
the info, and a training run leaves no lock file behind."""
import json
import re

import pytest

from cli_runner import placelab

GRAPH = "random_dag:ops=40,seed=2"


@pytest.mark.parametrize("args, wrong, nearest", [
    (["place", "--clusters", "v100-nvlink-4"], "--clusters", "--cluster"),
    (["simulate", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placment", "p.json"], "--placment",
     "--placement"),
    (["compare", "--graph", GRAPH, "--placer", "heft"], "--placer", "--placers"),
    (["train", "--graph", GRAPH, "--policy", "gdp"], "--graph", "--graphs"),
])
def test_a_misspelled_option_names_the_nearest(args, wrong, nearest):
    r = placelab(*args, check=False)
    lines = r.stderr.splitlines()
    assert r.returncode != 0 and len(lines) == 2, r.stderr
    assert lines[0] == f"placelab {args[0]}: unknown option {wrong}; did you mean {nearest}?"
    assert lines[1] == "Run with --help for more information."


def test_an_option_like_none_lists_where_to_look():
    r = placelab("place", "--frobnicate", "3", check=False)
    assert r.returncode != 0
    assert r.stderr.splitlines()[0] == "placelab place: unknown option --frobnicate (placelab place --help lists them)"


def test_a_misspelled_verb_names_the_nearest():
    r = placelab("plcae", "--graph", GRAPH, check=False)
    assert r.returncode != 0 and r.stderr.splitlines()[0] == 'placelab: unknown verb "plcae"; did you mean place?'


def test_valid_commands_and_help_are_not_hinted():
    assert "unknown" not in placelab("place", "--help").stderr
    r = placelab("place", "--seed", "-1", check=False)  # a bad value of a known option: the parser's own message
    assert r.returncode != 0 and "unknown option" not in r.stderr and "--seed" in r.stderr


@pytest.mark.parametrize("args, option", [
    (["simulate", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placement", "missing.json"], "--placement"),
    (["simulate", "--graph", "missing.json", "--cluster", "v100-nvlink-2", "--random", "2"], "--graph"),
    (["place", "--graph", GRAPH, "--cluster", "missing.json", "--placer", "heft"], "--cluster"),
    (["simulate", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--random", "2", "--profile", "missing.json"],
     "--profile"),
    (["replay", "--plan", "missing.json"], "--plan"),
    (["calibrate", "--refit", "missing.json", "--out", "out.json"], "--refit"),
    (["train", "--graphs", "missing.json", "--policy", "hdp", "--steps", "1"], "--graphs"),
])
def test_a_missing_file_names_its_option(args, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = placelab(*args, check=False)
    assert r.returncode == 1
    assert r.stderr.strip() == f"placelab: error: {option} missing.json: no such file"


def test_the_speed_up_column_says_what_it_is_against():
    out = placelab("compare", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placers", "single_device,heft").stdout
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.split()[:1] in (["single_device"], ["heft"])}
    slowest = max(rows, key=lambda name: float(rows[name][1]))
    assert rows[slowest][3] == "1.00x"
    assert re.search(rf"^speed-up: against the slowest row, {slowest} \(", out, re.M), out


def test_place_reports_simulations_within_the_budget():
    doc = json.loads(placelab("place", "--graph", GRAPH, "--cluster", "v100-nvlink-2", "--placer", "gdp",
                              "--options", '{"simulations": 60}', "--json").stdout)
    assert 60 - 12 <= doc["info"]["simulations"] <= 60  # it stops only when one more step would pass it


def test_training_leaves_no_lock_file(tmp_path):
    run = tmp_path / "run"
    args = ("train", "--graphs", GRAPH, "--cluster", "v100-nvlink-2", "--policy", "hdp", "--steps", "2",
            "--checkpoint", str(run))
    placelab(*args)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.json", "log.jsonl"]
    # A run that fails after taking the lock (resuming a damaged checkpoint) removes it too.
    (run / "checkpoint.json").write_text("{")
    r = placelab(*args, "--resume", check=False)
    assert r.returncode == 1 and "checkpoint.json" in r.stderr
    assert not (run / "lock").exists()
