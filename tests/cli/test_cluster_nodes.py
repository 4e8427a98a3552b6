"""`placelab cluster` for multi-node clusters: the preset grammar KIND-nodes-NxG[-osR], the compact form
--nodes/--gpus/--kind/--oversubscription, the grouped table, the JSON round trip, the names as cluster
arguments of other verbs, and one-line errors that name the valid forms (docs/cli.md, docs/simulator.md)."""
import json

import pytest

from cli_runner import placelab

GRAMMAR = "KIND-nodes-NxG[-osR] (KIND h100|a100|v100, N 1..32 nodes, G 1|2|4|8 GPUs per node"


def doc(*args):
    return json.loads(placelab("cluster", *args, "--json").stdout)


def link(d, name):
    return next(l for l in d["links"] if l["name"] == name)


@pytest.mark.parametrize("preset, options", [
    ("h100-nodes-2x8", ["--nodes", "2"]),
    ("h100-nodes-2x8", ["--nodes", "2", "--gpus", "8", "--kind", "h100"]),
    ("a100-nodes-4x4-os2", ["--nodes", "4", "--gpus", "4", "--kind", "a100", "--oversubscription", "2"]),
])
def test_the_compact_form_builds_the_preset(preset, options):
    d = doc("--preset", preset)
    assert doc(*options) == d
    assert d["name"] == preset
    nodes, gpus = (int(x) for x in preset.split("-")[2].split("x"))
    assert [x["name"] for x in d["devices"]] == [f"n{n}.gpu{i}" for n in range(nodes) for i in range(gpus)]
    nic, nvlink = (50e9, 450e9) if preset.startswith("h100") else (25e9, 300e9)
    assert link(d, "n1.gpu2-nic")["bandwidth_bytes_per_s"] == nic
    assert link(d, "n1.gpu2-nvlink")["bandwidth_bytes_per_s"] == nvlink
    assert link(d, "n1.gpu2-nic")["ends"] == ["n1.gpu2", "leaf2.port1"]
    # A leaf has one uplink to the spine per R nodes.
    uplinks = [l["name"] for l in d["links"] if l["name"].startswith("leaf0.up")]
    assert len(uplinks) == (nodes // 2 if preset.endswith("-os2") else nodes)


def test_file_round_trip_and_other_verbs_take_the_names(tmp_path):
    out = tmp_path / "c.json"
    placelab("cluster", "--preset", "h100-nodes-8x8", "--out", str(out))
    assert doc("--file", str(out)) == doc("--preset", "h100-nodes-8x8")
    graph = tmp_path / "g.json"
    graph.write_text(json.dumps({
        "format": "placelab.graph", "version": 1, "name": "chain",
        "ops": [{"name": f"o{k}", "type": "MatMul", "flops": 1e12, "output_bytes": 1e8} for k in range(4)],
        "edges": [{"src": f"o{k}", "dst": f"o{k + 1}", "bytes": 1e8} for k in range(3)]}))
    for cluster in ("h100-nodes-2x8", "a100-nodes-8x8", str(out)):
        r = json.loads(placelab("simulate", "--graph", str(graph), "--cluster", cluster, "--random", "3",
                                "--seed", "1", "--json").stdout)
        assert r["placements"] == 3 and r["step_time_s_min"] > 0
    placed = json.loads(placelab("place", "--graph", str(graph), "--cluster", "h100-nodes-2x8", "--placer", "heft",
                                 "--json").stdout)
    assert placed["cluster"] == "h100-nodes-2x8" and len(placed["device_peak_bytes"]) == 16


def test_the_table_groups_devices_by_node():
    text = placelab("cluster", "--preset", "h100-nodes-8x8").stdout
    lines = text.splitlines()
    assert len(lines) < 24, text  # not a line per device and per link
    assert "8 nodes x 8 h100 GPUs" in lines[1] and "non-blocking" in lines[1]
    for n in range(8):
        assert sum(f"n{n}.gpu0 .. n{n}.gpu7" in line for line in lines) == 1, text
    assert any(line.split()[:3] == ["n0.gpu0-nic", "..", "n7.gpu7-nic"] and " 64 " in line for line in lines), text
    assert "oversubscribed 4:1" in placelab("cluster", "--nodes", "8", "--oversubscription", "4").stdout
    small = placelab("cluster", "--preset", "h100-nodes-1x8").stdout
    assert "n0.gpu7 " in small and " .. " not in small  # small clusters list every device and link


def test_list_shows_the_grammar():
    text = placelab("cluster", "--list").stdout
    assert GRAMMAR in text
    assert all(f"{kind}-nodes-NxG[-osR]" in text for kind in ("h100", "a100", "v100"))
    multi = {f["family"]: f for f in json.loads(placelab("cluster", "--list", "--json").stdout)["multi_node"]}
    assert set(multi) == {"h100-nodes", "a100-nodes", "v100-nodes"}
    assert multi["h100-nodes"]["nodes"] == [1, 32] and multi["h100-nodes"]["gpus_per_node"] == [1, 2, 4, 8]


@pytest.mark.parametrize("args, message", [
    (["cluster", "--preset", "h100-nodes-0x8"], '"h100-nodes-0x8": 0 nodes, expected 1..32'),
    (["cluster", "--preset", "h100-nodes-2x3"], '"h100-nodes-2x3": 3 GPUs per node, expected 1, 2, 4 or 8'),
    (["cluster", "--preset", "p100-nodes-2x8"], 'no node kind "p100"'),
    (["cluster", "--preset", "h100-nodes-33x8"], "33 nodes, expected 1..32 (at most 256 GPUs)"),
    (["cluster", "--preset", "h100-nodes-2by8"], 'expected NxG[-osR] after "-nodes-"'),
    (["cluster", "--nodes", "0"], '"h100-nodes-0x8": 0 nodes'),
    (["cluster", "--nodes", "2", "--kind", "p100"], 'no node kind "p100"'),
    (["cluster", "--nodes", "2", "--gpus", "16"], "16 GPUs per node"),
    (["simulate", "--graph", "gnmt:layers=1", "--cluster", "h100-nodes-2x3", "--random", "1"], "3 GPUs per node"),
])
def test_bad_multi_node_input_names_the_valid_forms(args, message):
    bad = placelab(*args, check=False)
    assert bad.returncode == 1 and bad.stdout == ""
    lines = bad.stderr.rstrip("\n").split("\n")
    assert len(lines) == 1 and lines[0].startswith("placelab: error: "), bad.stderr
    assert message in lines[0] and GRAMMAR in lines[0], lines[0]


@pytest.mark.parametrize("args, message", [
    (["--gpus", "4"], "give --nodes N with them"),
    (["--nodes", "2", "--preset", "h100-8"], "give exactly one of --preset NAME, --file F or --nodes N"),
])
def test_the_compact_form_is_not_mixed(args, message):
    bad = placelab("cluster", *args, check=False)
    assert bad.returncode == 1 and message in bad.stderr and len(bad.stderr.strip().split("\n")) == 1
