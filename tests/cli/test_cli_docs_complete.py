"""docs/cli.md lists what the program has (issue 56): every cluster family `cluster --list` prints, and every
option of each verb's --help in that verb's synopsis (graph's model parameters are its `--PARAM V`).
test_docs_references.py checks the other way: that what cli.md names exists."""
import json
import re
from pathlib import Path

import pytest

from cli_runner import placelab

CLI_MD = (Path(__file__).resolve().parents[2] / "docs" / "cli.md").read_text(encoding="utf-8")
VERBS = ["graph", "cluster", "simulate", "place", "compare", "train", "replay", "calibrate"]


def synopsis(verb):
    """The bare code block right under `## placelab VERB`."""
    m = re.search(rf"## `placelab {verb}`\s*\n+```\n(.*?)```", CLI_MD, re.S)
    assert m, f"docs/cli.md has no synopsis block under ## `placelab {verb}`"
    return m.group(1)


def help_options(verb):
    """The long options of `placelab VERB --help` (its option column, not its descriptions)."""
    text = placelab(verb, "--help").stdout
    return {m.group(1) for m in re.finditer(r"^\s+(?:-\w,\s*)?(--[a-z][\w-]*)", text, re.M)} - {"--help"}


def test_every_cluster_family_is_listed():
    doc = json.loads(placelab("cluster", "--list", "--json").stdout)
    families = [p["family"] for p in doc["presets"]] + [m["family"] for m in doc["multi_node"]]
    missing = [f for f in families if f"`{f}`" not in CLI_MD and f"`{f}-N`" not in CLI_MD]
    assert not missing, f"docs/cli.md does not list the cluster families {missing}"


@pytest.mark.parametrize("verb", VERBS)
def test_every_option_is_in_the_synopsis(verb):
    text = synopsis(verb)
    options = help_options(verb)
    assert options, f"placelab {verb} --help lists no options"
    if verb == "graph":  # the model parameters, one option each, are `--PARAM V`
        assert "--PARAM" in text
        params = {f"--{p['name']}" for m in json.loads(placelab("graph", "--list", "--json").stdout)["models"]
                  for p in m["params"]}
        options -= params
    missing = sorted(o for o in options if not re.search(re.escape(o) + r"(?![\w-])", text))
    assert not missing, f"docs/cli.md's synopsis of `placelab {verb}` lacks {missing}"
