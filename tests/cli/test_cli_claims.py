"""Checks the `placelab` command line against docs/cli.md (and docs/formats.md, README.md), written
from the documentation alone: each test quotes the claim it checks. Inputs are tiny graph files and
small presets so the file runs in seconds."""
import json
import os
import signal
import stat
import subprocess
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from cli_runner import BIN, placelab  # noqa: E402

TINY = {
    "format": "placelab.graph", "version": 1, "name": "tiny",
    "ops": [
        {"name": "x", "type": "Input", "output_bytes": 4096},
        {"name": "a", "type": "MatMul", "flops": 2e7, "bytes_read": 8192, "output_bytes": 4096,
         "param_bytes": 1048576, "layer": 0},
        {"name": "b", "type": "MatMul", "flops": 1e7, "output_bytes": 4096, "layer": 1},
        {"name": "c", "type": "Add", "flops": 1e5, "output_bytes": 1024, "layer": 1},
    ],
    "edges": [{"src": 0, "dst": 1, "bytes": 4096}, {"src": "a", "dst": "b", "bytes": 4096},
              {"src": "a", "dst": "c", "bytes": 4096}, {"src": "b", "dst": "c", "bytes": 4096}],
}
CLUSTER = "v100-nvlink-2"
FAST = ["single_device", "round_robin", "random", "human_expert", "metis", "scotch", "heft",
        "m_topo", "m_etf", "m_sct"]


def read(path):
    with open(path) as f:
        return f.read()


def load(path):
    return json.loads(read(path))


def write_json(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)
    return str(path)


@pytest.fixture
def tiny(tmp_path):
    return write_json(tmp_path / "g.json", TINY)


@pytest.fixture
def placement(tmp_path, tiny):
    p = str(tmp_path / "p.json")
    placelab("place", "--graph", tiny, "--cluster", CLUSTER, "--placer", "round_robin", "--out", p)
    return p


def run(*args, cwd=None):
    return subprocess.run([os.path.abspath(BIN) if os.path.exists(BIN) else BIN, *args],
                          capture_output=True, text=True, timeout=120, cwd=cwd)


def one_json(proc):
    """cli.md: '`--json` prints exactly one JSON object on stdout'."""
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)  # raises on anything besides one JSON value
    assert isinstance(obj, dict)
    return obj


def assert_error(proc, *names):
    """cli.md: 'Errors go to stderr as one line, `placelab: error: <place>: <what>`, then the fix ..., with
    exit code 1.' Lines of progress may precede it; the error itself is the last line."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    last = proc.stderr.rstrip("\n").split("\n")[-1]
    assert last.startswith("placelab: error: "), proc.stderr
    assert proc.stdout == "", proc.stdout
    for n in names:
        assert n in last, (n, last)
    return last


# ---------------------------------------------------------------- shared conventions


def test_version():
    # cli.md: "`placelab --version` prints the version."
    p = placelab("--version")
    assert p.stdout.strip() and any(ch.isdigit() for ch in p.stdout)


@pytest.mark.parametrize("args", [
    ["graph", "--model", "gnmt", "--no-such-option"],
    ["simulate", "--graph", "x", "--cluster", "y", "--random", "notanumber"],
])
def test_usage_errors_are_two_lines_exit_100_115(args):
    # cli.md: "Usage errors, such as an unknown option or a value that is not a number, are the option
    # parser's own two lines (the problem, then `Run with --help for more information.`) with its exit
    # codes, 100-115."
    p = run(*args)
    assert 100 <= p.returncode <= 115, (p.returncode, p.stderr)
    lines = p.stderr.rstrip("\n").split("\n")
    assert len(lines) == 2, p.stderr
    assert lines[1] == "Run with --help for more information."


def test_stdout_write_failure_is_exit_1():
    # cli.md: "Output that cannot be written to stdout is an error (exit 1), never a silent 0."
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        p = subprocess.run([BIN, "cluster", "--preset", CLUSTER, "--json"], stdout=full,
                           stderr=subprocess.PIPE, text=True, timeout=60)
    assert p.returncode == 1, p.stderr


def test_progress_note_dropped_when_stderr_unwritable(tiny):
    # cli.md: "Progress of long work goes to stderr; a note that cannot be written there (a full disk) is
    # dropped and the work goes on." compare reports each placer on stderr.
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    with open("/dev/full", "w") as full:
        p = subprocess.run([BIN, "compare", "--graph", tiny, "--cluster", CLUSTER, "--json"],
                           stdout=subprocess.PIPE, stderr=full, text=True, timeout=60)
    assert p.returncode == 0
    assert json.loads(p.stdout)


def test_out_to_fifo_is_written_through(tmp_path):
    # formats.md: "a device or pipe such as `/dev/null` is written through" (not replaced by a file).
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []

    def reader():
        with open(fifo) as f:
            got.append(f.read())

    t = threading.Thread(target=reader, daemon=True)
    t.start()
    p = run("cluster", "--preset", CLUSTER, "--out", str(fifo))
    t.join(timeout=10)
    assert p.returncode == 0, p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode), "the pipe was replaced"
    assert got and json.loads(got[0])["format"] == "placelab.cluster"


def test_error_names_bad_file_and_json_path(tmp_path):
    # formats.md: "every error names the file and the JSON path at fault, e.g.
    # `g.json: ops[3].flops: is -2, must be >= 0`" and cli.md's one-line error format.
    g = json.loads(json.dumps(TINY))
    g["ops"][3]["flops"] = -2
    f = write_json(tmp_path / "bad.json", g)
    last = assert_error(run("graph", "--file", f, "--json"), "bad.json", "ops[3].flops", "-2")
    assert ">= 0" in last


def test_unknown_field_lists_known_fields(tmp_path):
    # formats.md: "an unknown field is an error (typos must not be silently ignored), listing the
    # known fields".
    g = json.loads(json.dumps(TINY))
    g["ops"][1]["flopz"] = 1
    f = write_json(tmp_path / "typo.json", g)
    last = assert_error(run("graph", "--file", f), "typo.json", "flopz")
    assert "flops" in last and "param_bytes" in last


def test_duplicate_key_is_error_naming_it(tmp_path):
    # formats.md: "a key given twice in one object is an error naming it".
    text = json.dumps(TINY).replace('"name": "tiny"', '"name": "tiny", "name": "tiny2"', 1)
    f = tmp_path / "dup.json"
    f.write_text(text)
    assert_error(run("graph", "--file", str(f)), "dup.json", "name")


def test_wrong_version_names_supported(tmp_path):
    # formats.md: "an unsupported `version` is an error naming the supported versions".
    g = dict(TINY, version=7)
    f = write_json(tmp_path / "v7.json", g)
    last = assert_error(run("graph", "--file", f), "v7.json")
    assert "1" in last.split("v7.json", 1)[1]


def test_int64_overflow_is_quoted(tmp_path):
    # formats.md: "integers ... must fit in int64: a larger one is an error quoting it (from 2^64 on, as
    # the nearest double, the only form the JSON reader keeps), never wrapped".
    for literal, quoted in (("9223372036854775808", "9223372036854775808"),
                            ("18446744073709551617", "1.8446744073709552e+19")):
        f = tmp_path / "big.json"
        f.write_text(json.dumps(TINY).replace('"layer": 0', f'"layer": {literal}', 1))
        last = assert_error(run("graph", "--file", str(f)), "big.json", quoted)
        assert "9223372036854775807" in last  # the bound it broke


def test_cycle_lists_ops(tmp_path):
    # formats.md: "no cycle (the error lists the ops on one, in dataflow order)".
    g = json.loads(json.dumps(TINY))
    g["edges"].append({"src": "c", "dst": "a"})
    f = write_json(tmp_path / "cyc.json", g)
    last = assert_error(run("graph", "--file", f))
    for op in ("a", "b", "c"):
        assert f'{op}' in last


# ---------------------------------------------------------------- graph


GRAPH_KEYS = {"name", "ops", "edges", "op_types", "forward_ops", "backward_ops", "update_ops",
              "colocation_classes", "depth", "flops", "bytes_read", "bytes_written", "output_bytes",
              "param_bytes", "parameters", "edge_bytes"}


def test_graph_json_keys_and_values(tiny):
    # cli.md: graph --json prints {"name", "ops", "edges", "op_types", "forward_ops", "backward_ops": 0,
    # "update_ops": 0, "colocation_classes": 0, "depth", "flops", ...} (statistics of the graph).
    d = one_json(run("graph", "--file", tiny, "--json"))
    assert set(d) == GRAPH_KEYS
    assert d["name"] == "tiny" and d["ops"] == 4 and d["edges"] == 4 and d["op_types"] == 3
    assert d["forward_ops"] == 4 and d["backward_ops"] == 0 and d["update_ops"] == 0
    assert d["depth"] == 4 and d["colocation_classes"] == 0
    assert d["flops"] == pytest.approx(2e7 + 1e7 + 1e5)
    assert d["param_bytes"] == 1048576 and d["edge_bytes"] == 4 * 4096


def test_graph_model_json_matches_doc_example():
    # cli.md: `placelab graph --model gnmt --layers 2 --json` -> name gnmt, backward_ops 0, update_ops 0,
    # colocation_classes 0.
    d = one_json(run("graph", "--model", "gnmt", "--layers", "2", "--json"))
    assert set(d) == GRAPH_KEYS
    assert d["name"] == "gnmt" and d["backward_ops"] == 0 and d["update_ops"] == 0
    assert d["colocation_classes"] == 0


def test_graph_training_expands(tiny):
    # cli.md: "optionally expands it to a training graph (forward + backward + update ops)".
    d = one_json(run("graph", "--file", tiny, "--training", "--json"))
    assert d["forward_ops"] == 4 and d["backward_ops"] > 0 and d["update_ops"] > 0
    assert d["ops"] == d["forward_ops"] + d["backward_ops"] + d["update_ops"]


def test_graph_default_prints_stats_for_people(tiny):
    # cli.md: "prints its statistics (the default)"; "without it [--json], output is for people".
    p = placelab("graph", "--file", tiny)
    assert p.stdout.strip()
    with pytest.raises(json.JSONDecodeError):
        json.loads(p.stdout)


def test_graph_stats_flag(tiny):
    # cli.md synopsis: `[--training] [--stats]`; README: `graph --model gnmt --layers 8 --training --stats`.
    p = placelab("graph", "--file", tiny, "--training", "--stats")
    assert p.stdout.strip()


def test_graph_unknown_param_lists_known():
    # cli.md: "giving one that the chosen model does not take is an error that lists the ones it does."
    # gnmt takes layers and batch (the doc's own examples); image_size is inception's.
    last = assert_error(run("graph", "--model", "gnmt", "--image_size", "128"), "image_size")
    assert "layers" in last and "batch" in last


def test_graph_model_and_file_exclusive(tiny):
    # cli.md synopsis: `(--model NAME [--PARAM V ...] | --file F)`: one or the other.
    assert_error(run("graph", "--model", "gnmt", "--file", tiny))


def test_graph_list_json():
    # cli.md: "`--list` prints the models and their parameters"; "`graph --list --json`" lists the zoo
    # as JSON.
    d = one_json(run("graph", "--list", "--json"))
    text = json.dumps(d)
    for m in ("inception_v3", "resnet50", "gnmt", "rnnlm", "bert"):
        assert f'"{m}"' in text


def test_graph_out_round_trip_bit_for_bit(tmp_path, tiny):
    # formats.md: "Writing omits fields equal to their defaults and prints numbers with the shortest
    # representation that reads back exactly, so read(write(g)) == g bit for bit."
    a, b = str(tmp_path / "a.json"), str(tmp_path / "b.json")
    placelab("graph", "--file", tiny, "--out", a)
    placelab("graph", "--file", a, "--out", b)
    assert read(a) == read(b)
    d = load((a))
    assert d["format"] == "placelab.graph" and d["version"] == 1
    # defaults omitted: op "x" has no flops/phase written.
    x = d["ops"][0]
    assert "phase" not in x and "flops" not in x
    assert one_json(run("graph", "--file", a, "--json")) == one_json(run("graph", "--file", tiny, "--json"))


@pytest.mark.parametrize("extra", [[], ["--training"]])
def test_graph_out_refuses_to_overwrite_its_input(tmp_path, tiny, extra):
    # cli.md: "Output files (`--out`, ...) are checked before the work (... not an input of the run ...)".
    # With --training the input graph would be replaced by another graph.
    before = read(tiny)
    assert_error(run("graph", "--file", tiny, *extra, "--out", tiny), "g.json")
    assert read(tiny) == before


def test_cluster_out_refuses_to_overwrite_its_input(tmp_path):
    # cli.md: output files are checked to be "not an input of the run" (cluster --file F --out F).
    c = str(tmp_path / "c.json")
    placelab("cluster", "--preset", CLUSTER, "--out", c)
    assert_error(run("cluster", "--file", c, "--out", c), "c.json")


def test_out_folder_missing_or_is_folder(tmp_path, tiny):
    # cli.md: output files are checked before the work: "the folder exists, the name is not a folder".
    assert_error(run("graph", "--file", tiny, "--out", str(tmp_path / "nope" / "o.json")), "o.json")
    assert_error(run("graph", "--file", tiny, "--out", str(tmp_path)), str(tmp_path))


def test_failed_run_leaves_old_output(tmp_path, tiny):
    # cli.md: outputs are "written last, atomically: a run that fails leaves the old files as they were."
    out = tmp_path / "keep.json"
    out.write_text("old")
    bad = json.loads(json.dumps(TINY))
    bad["edges"].append({"src": "c", "dst": "zzz"})
    f = write_json(tmp_path / "bad.json", bad)
    assert_error(run("graph", "--file", f, "--out", str(out)))
    assert out.read_text() == "old"
    # A placement of the wrong length fails the simulate run; its --trace must stay untouched.
    pl = write_json(tmp_path / "short.json", {"format": "placelab.placement", "version": 1,
                                              "device_of": [0, 1]})
    tr = tmp_path / "t.json"
    tr.write_text("old trace")
    assert_error(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", pl,
                     "--trace", str(tr)), "short.json")
    assert tr.read_text() == "old trace"
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_out_through_symlink_replaces_target(tmp_path, tiny):
    # formats.md: "a symbolic link's target is replaced (the link stays, even when its target does not
    # exist yet)".
    target = tmp_path / "real.json"
    link = tmp_path / "link.json"
    os.symlink(target.name, link)
    placelab("cluster", "--preset", CLUSTER, "--out", str(link))
    assert link.is_symlink()
    assert load((target))["format"] == "placelab.cluster"


# ---------------------------------------------------------------- cluster


def test_cluster_list_json_has_every_family():
    # cli.md: "`--list` prints the families: `k80`, `p100`, `v100-nvlink`, `v100-pcie`, `a100`, `h100`,
    # `cpu-gpu`, `eth`, `ib`, `placeto`, each at 1/2/4/8 GPUs ..., and `cpu` hosts"; `cluster --list
    # --json` lists them as JSON.
    d = one_json(run("cluster", "--list", "--json"))
    text = json.dumps(d)
    for fam in ("k80", "p100", "v100-nvlink", "v100-pcie", "a100", "h100", "cpu-gpu", "eth", "ib",
                "placeto", "cpu"):
        assert f'"{fam}"' in text, fam


@pytest.mark.parametrize("fam", ["k80", "p100", "v100-nvlink", "v100-pcie", "a100", "h100",
                                 "cpu-gpu", "eth", "ib", "placeto"])
def test_cluster_presets_at_1_2_4_8(fam):
    # cli.md: each family "at 1/2/4/8 GPUs as in `v100-nvlink-4`".
    for n in (1, 8):
        d = one_json(run("cluster", "--preset", f"{fam}-{n}", "--json"))
        assert d["format"] == "placelab.cluster"
        gpus = [x for x in d["devices"] if x["kind"] != "cpu"]
        assert len(gpus) == n, (fam, n, [x["kind"] for x in d["devices"]])


def test_cluster_out_and_file_round_trip(tmp_path):
    # cli.md: "reads a `placelab.cluster` file, then prints it, writes it (`--out`) or prints the
    # document as JSON"; simulator.md: "dump, edit any number, use the file".
    out = str(tmp_path / "c.json")
    p = placelab("cluster", "--preset", CLUSTER, "--out", out)
    assert p.stdout == "" or "{" not in p.stdout
    doc = load((out))
    assert doc["format"] == "placelab.cluster" and doc["version"] == 1
    assert one_json(run("cluster", "--file", out, "--json")) == one_json(
        run("cluster", "--preset", CLUSTER, "--json"))


def test_cluster_unknown_preset_is_error():
    # cli.md error convention, for a bad preset name.
    assert_error(run("cluster", "--preset", "v100-nvlink-3"), "v100-nvlink-3")


def test_folder_named_like_preset_is_passed_over(tmp_path, tiny):
    # cli.md: "An existing file is read as a file; a folder of the same name as a model or preset is
    # passed over."
    os.mkdir(tmp_path / CLUSTER)
    os.mkdir(tmp_path / "rnnlm")
    d = one_json(run("simulate", "--graph", "rnnlm", "--cluster", CLUSTER, "--random", "1",
                     "--json", cwd=str(tmp_path)))
    assert d["cluster"] == CLUSTER


# ---------------------------------------------------------------- simulate


def test_simulate_placement_json(tiny, placement):
    # cli.md: "Simulates one step of a placement file and prints the facts: step time, critical path,
    # per-device busy time and peak memory, OOM and excess bytes, per-link busy time and bytes, bytes
    # moved".
    d = one_json(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--json"))
    assert d["step_time_s"] > 0 and d["critical_path_s"] > 0
    assert d["oom"] is False
    assert len(d["devices"]) == 2
    for dev in d["devices"]:
        assert {"busy_s", "peak_bytes", "excess_bytes"} <= set(dev)
    for link in d["links"]:
        assert {"busy_s", "bytes"} <= set(link)
    # round_robin puts a and b on different devices, so bytes move.
    assert d["total_bytes_moved"] > 0


def test_simulate_random_json_and_seed_determinism(tiny):
    # cli.md: "With `--random N --json` the object also has `sim_ms_median` ... and `ops_per_s`";
    # "N seeded random placements and their summary: the spread of step times, how many ran out of
    # memory".
    args = ["simulate", "--graph", tiny, "--cluster", CLUSTER, "--random", "6", "--seed", "3", "--json"]
    a, b = one_json(run(*args)), one_json(run(*args))
    assert a["sim_ms_median"] > 0 and a["ops_per_s"] > 0
    for d in (a, b):
        d.pop("sim_ms_median"), d.pop("ops_per_s")
    assert a == b  # same seed, same placements, same summary


def test_simulate_graph_spec_training(tiny):
    # cli.md: "A graph argument ... a zoo model with optional parameters, `NAME[:key=value,...]` ... the
    # key `training=1` expands it to a training graph."
    stats = one_json(run("graph", "--model", "rnnlm", "--layers", "1", "--training", "--json"))
    d = one_json(run("simulate", "--graph", "rnnlm:layers=1,training=1", "--cluster", CLUSTER,
                     "--random", "1", "--json"))
    assert d.get("ops") == stats["ops"], (d, stats["ops"])


@pytest.mark.parametrize("mode", [["--priority", "rank"], ["--priority", "ready_time"],
                                  ["--share-bandwidth"], ["--edge-comm"], ["--no-measured"]])
def test_simulate_mode_options_accepted(tiny, placement, mode):
    # cli.md synopsis: `[--priority ready_time|rank] [--share-bandwidth] [--edge-comm] [--no-measured]`.
    d = one_json(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     *mode, "--json"))
    assert d["step_time_s"] > 0


def test_simulate_micro_batches_share_bandwidth_accepted(tiny, placement):
    # cli.md synopsis: `--share-bandwidth (streams only)` is allowed with --micro-batches.
    one_json(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                 "--micro-batches", "4", "--share-bandwidth", "--json"))


def test_simulate_placement_and_random_exclusive(tiny, placement):
    # cli.md synopsis: `(--placement P | --random N [--seed S])`.
    assert_error(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--random", "2"))


@pytest.mark.parametrize("extra", [["--max-load", "--priority", "rank"],
                                   ["--max-load", "--share-bandwidth"],
                                   ["--micro-batches", "4", "--priority", "rank"],
                                   ["--max-load", "--trace", "T"],
                                   ["--micro-batches", "4", "--trace", "T"],
                                   ["--max-load", "--micro-batches", "4"]])
def test_simulate_pipelined_conflicts(tmp_path, tiny, placement, extra):
    # cli.md: "(so `--priority` is an error there)"; "`--priority` and `--share-bandwidth` are errors
    # with `--max-load`"; "`--trace` records one step, so it is an error with either"; synopsis
    # `(--max-load | --micro-batches N)`.
    extra = [str(tmp_path / "t.json") if e == "T" else e for e in extra]
    assert_error(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     *extra))
    assert not (tmp_path / "t.json").exists()


def test_simulate_max_load_json(tiny, placement):
    # cli.md: "`--json`: `max_load_s`, `bottleneck_device`, `fits`, `contiguous`, `devices`" with "each
    # device's load, compute, communication and resident memory".
    d = one_json(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--max-load", "--json"))
    assert {"max_load_s", "bottleneck_device", "fits", "contiguous", "devices"} <= set(d)
    assert isinstance(d["fits"], bool) and isinstance(d["contiguous"], bool)
    assert d["max_load_s"] > 0 and len(d["devices"]) == 2
    assert d["bottleneck_device"] in [x["name"] for x in d["devices"]]


def test_simulate_micro_batches_json(tiny, placement):
    # cli.md: "`--json`: `micro_batches`, `makespan_s`, `single_s`, `time_per_batch_s`, `last`".
    d = one_json(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--micro-batches", "8", "--json"))
    assert {"micro_batches", "makespan_s", "single_s", "time_per_batch_s", "last"} <= set(d)
    assert d["micro_batches"] == 8
    assert d["makespan_s"] >= d["single_s"] > 0
    assert 0 < d["time_per_batch_s"] <= d["makespan_s"]


def test_simulate_trace_is_chrome_json(tmp_path, tiny, placement):
    # cli.md: "`--trace F` writes a Chrome trace-event JSON ... (ops per device, transfers per device
    # pair, and each device's memory as a counter)"; simulator.md: 'a counter "memory DEVICE"'.
    t = str(tmp_path / "t.json")
    placelab("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement, "--trace", t)
    doc = load((t))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    names = {e.get("name") for e in events}
    assert {"x", "a", "b", "c"} <= names
    assert any(e.get("ph") == "C" and str(e.get("name", "")).startswith("memory ") for e in events)


def test_simulate_trace_refuses_inputs(tmp_path, tiny, placement):
    # cli.md: output files are checked to be "not an input of the run".
    before = read(placement)
    assert_error(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--trace", placement), "p.json")
    assert read(placement) == before


def test_placement_for_other_graph_warns(tmp_path, tiny):
    # formats.md: "`graph` and `cluster` are optional names: a verb given a placement made for another
    # graph or cluster says so on stderr."
    pl = write_json(tmp_path / "pl.json", {"format": "placelab.placement", "version": 1,
                                           "graph": "other", "cluster": "h100-8",
                                           "device_of": [0, 0, 1, 1]})
    p = run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", pl, "--json")
    one_json(p)
    assert "other" in p.stderr and "h100-8" in p.stderr


def test_placement_bad_device_names_file(tmp_path, tiny):
    # formats.md: "its length and devices are checked against the graph and cluster ... (errors name the
    # file)".
    pl = write_json(tmp_path / "dev9.json", {"format": "placelab.placement", "version": 1,
                                             "device_of": [0, 0, 9, 1]})
    assert_error(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", pl),
                 "dev9.json")


def test_msr_instance_is_graph_and_cluster():
    # cli.md: "An msr-dnn-partitioning instance file ... serves as both: its graph and the machine".
    root = os.environ.get("PLACELAB_SHARED_DATA", "../shared/data")
    f = os.path.join(root, "msr-dnn-partitioning/throughput-inputs/LayerGraphs/bert24_inference.json")
    if not os.path.exists(f):
        pytest.skip("no shared data")
    d = one_json(run("simulate", "--graph", f, "--cluster", f, "--random", "1", "--json"))
    assert d["step_time_s_median" if "step_time_s_median" in d else "step_time_s_min"] > 0


# ---------------------------------------------------------------- place


def test_place_out_writes_placement_for_simulate(tmp_path, tiny):
    # cli.md: "`--out` writes a `placelab.placement` file for `placelab simulate`"; formats.md: one
    # device index per op.
    out = str(tmp_path / "pp.json")
    d = one_json(run("place", "--graph", tiny, "--cluster", CLUSTER, "--placer", "heft",
                     "--out", out, "--json"))
    doc = load((out))
    assert doc["format"] == "placelab.placement" and doc["version"] == 1
    assert len(doc["device_of"]) == 4 and all(v in (0, 1) for v in doc["device_of"])
    s = one_json(run("simulate", "--graph", tiny, "--cluster", CLUSTER, "--placement", out, "--json"))
    assert s["step_time_s"] == pytest.approx(d["step_time_s"])
    for k in ("step_time_s", "oom", "placement_time_s"):
        assert k in d


def test_place_default_is_gdp_beside_baselines(tiny):
    # cli.md: "With no `--placer` it runs ... GDP policy zero-shot (`gdp`) and prints it beside `heft`,
    # `metis` and `human_expert` (with `--json`, under `"baselines"`)".
    d = one_json(run("place", "--graph", tiny, "--cluster", CLUSTER, "--json"))
    assert d["placer"] == "gdp"
    assert sorted(b["placer"] for b in d["baselines"]) == ["heft", "human_expert", "metis"]


def test_place_no_arguments_default_job():
    # cli.md: "with no arguments at all that is `inception_v3:training=1` on `v100-nvlink-4`".
    d = one_json(run("place", "--json"))
    assert d["cluster"] == "v100-nvlink-4"
    assert "inception_v3" in d["graph"]
    stats = one_json(run("graph", "--model", "inception_v3", "--training", "--json"))
    assert d["graph"] == stats["name"]


def test_place_unknown_option_lists_known(tiny):
    # cli.md: "`--options` is a JSON object of the placer's options (unknown keys are errors that list
    # the known ones)". annealing takes options (placers.md), e.g. its steps.
    last = assert_error(run("place", "--graph", tiny, "--cluster", CLUSTER, "--placer", "annealing",
                            "--options", '{"bogus": 1}'), "bogus")
    assert "steps" in last


def test_place_unknown_placer(tiny):
    last = assert_error(run("place", "--graph", tiny, "--cluster", CLUSTER, "--placer", "nosuch"),
                        "nosuch")
    assert "heft" in last


def test_place_seed_determinism(tiny):
    # cli.md: `--seed S` for place; a seeded placer gives the same placement.
    args = ["place", "--graph", tiny, "--cluster", CLUSTER, "--placer", "random", "--seed", "5", "--json"]
    a, b = one_json(run(*args)), one_json(run(*args))
    a.pop("placement_time_s"), b.pop("placement_time_s")
    assert a == b


# ---------------------------------------------------------------- compare


def test_compare_default_rows_are_fast_placers(tiny):
    # cli.md: "The default rows are the fast placers (`single_device`, `round_robin`, `random`,
    # `human_expert`, `metis`, `scotch`, `heft`, `m_topo`, `m_etf`, `m_sct`)"; "`--json` prints the table
    # as one object"; progress on stderr keeps stdout one JSON object.
    d = one_json(run("compare", "--graph", tiny, "--cluster", CLUSTER, "--json"))
    rows = next(v for v in d.values() if isinstance(v, list))
    assert [r["placer"] for r in rows] == FAST
    for r in rows:
        assert {"step_time_s", "oom", "placement_time_s"} <= set(r)


def test_compare_placers_option(tiny):
    d = one_json(run("compare", "--graph", tiny, "--cluster", CLUSTER, "--placers", "heft,round_robin",
                     "--json"))
    rows = next(v for v in d.values() if isinstance(v, list))
    assert [r["placer"] for r in rows] == ["heft", "round_robin"]


def test_compare_list_json():
    # cli.md: "`--list --json` lists every placer and the fast ones as JSON".
    d = one_json(run("compare", "--list", "--json"))
    text = json.dumps(d)
    for name in FAST + ["annealing", "local_search", "dp", "pipedream", "milp", "gdp", "placeto",
                        "hdp", "hsdag"]:
        assert f'"{name}"' in text, name
    fast = next(v for v in d.values() if isinstance(v, list) and v and all(isinstance(x, str) for x in v))
    assert sorted(fast) == sorted(FAST)


# ---------------------------------------------------------------- train


TRAIN_KEYS = {"policy", "options", "reward", "cluster", "seed", "steps", "wall_s", "checkpoint",
              "interrupted", "tasks"}
TASK_KEYS = {"task", "graph", "ops", "reference_s", "best_cost_s", "best_step", "speedup"}


def train(tiny, *extra, cluster=CLUSTER):
    return run("train", "--graphs", tiny, "--cluster", cluster, "--policy", "gdp", *extra)


def strip_wall(lines):
    out = []
    for line in lines:
        d = json.loads(line)
        d.pop("wall_s", None)
        out.append(d)
    return out


def test_train_json_and_log(tmp_path, tiny):
    # cli.md: summary `--json` object keys; "`--checkpoint DIR` writes the curve to `DIR/log.jsonl` (one
    # JSON object per step ...)" and `DIR/checkpoint.json`; progress lines go to stderr as
    # `train: step 40/100 ...`.
    ck = str(tmp_path / "run")
    p = train(tiny, "--steps", "3", "--seed", "1", "--checkpoint", ck, "--json")
    d = one_json(p)
    assert set(d) == TRAIN_KEYS
    assert d["policy"] == "gdp" and d["steps"] == 3 and d["seed"] == 1
    assert d["interrupted"] is False and d["cluster"] == CLUSTER
    assert d["reward"]["objective"] == "step_time"
    assert len(d["tasks"]) == 1 and set(d["tasks"][0]) == TASK_KEYS
    assert d["tasks"][0]["ops"] == 4
    assert "train: step 3/3" in p.stderr
    lines = read(os.path.join(ck, "log.jsonl")).splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    for k in ("step", "task", "reward", "loss", "entropy", "simulations"):
        assert k in first
    ckd = load((os.path.join(ck, "checkpoint.json")))
    assert ckd["format"] == "placelab.checkpoint" and ckd["step"] == 3 and ckd["policy"] == "gdp"
    for k in ("options", "learner", "trainer"):
        assert k in ckd


def test_train_defaults_cluster_and_steps(tiny):
    # cli.md: "one cluster (default `v100-nvlink-4`)"; "after `N` steps in total (default 100 ...)".
    d = one_json(run("train", "--graphs", tiny, "--policy", "gdp", "--seed", "2", "--json"))
    assert d["cluster"] == "v100-nvlink-4"
    assert d["steps"] == 100


def test_train_steps_zero_writes_checkpoint(tmp_path, tiny):
    # cli.md: checkpoint.json is written "at the end, atomically (so with `--steps 0` too)".
    ck = tmp_path / "r0"
    one_json(train(tiny, "--steps", "0", "--checkpoint", str(ck), "--json"))
    assert load((ck / "checkpoint.json"))["step"] == 0


def test_train_graph_spec_split_and_round_robin(tmp_path, tiny):
    # cli.md: "a piece of the form `key=value` belongs to the spec before it, so
    # `--graphs gnmt:layers=2,batch=64,inception_v3` is two graphs. Step `s` trains on graph `s mod T`."
    ck = tmp_path / "two"
    d = one_json(run("train", "--graphs", f"rnnlm:layers=1,batch=4,{tiny}", "--cluster", CLUSTER,
                     "--policy", "gdp", "--steps", "4", "--checkpoint", str(ck), "--json"))
    assert len(d["tasks"]) == 2
    tasks = [json.loads(l)["task"] for l in read(ck / "log.jsonl").splitlines()]
    assert tasks[0] == tasks[2] != tasks[1] == tasks[3]


def test_train_resume_equals_uninterrupted(tmp_path, tiny):
    # cli.md: "`--resume` continues that run exactly where its checkpoint stopped (same log lines and
    # final state as an uninterrupted run), and says so"; "The policy and options default to the
    # checkpoint's"; a leftover `checkpoint.json.tmp.*` "the resumed run removes".
    full, part = tmp_path / "full", tmp_path / "part"
    one_json(train(tiny, "--steps", "5", "--seed", "4", "--checkpoint", str(full), "--json"))
    one_json(train(tiny, "--steps", "3", "--seed", "4", "--checkpoint", str(part), "--json"))
    (part / "checkpoint.json.tmp.12345").write_text("half")
    p = run("train", "--graphs", tiny, "--cluster", CLUSTER, "--steps", "5", "--checkpoint", str(part),
            "--resume", "--json")
    d = one_json(p)
    assert d["steps"] == 5 and d["policy"] == "gdp" and d["seed"] == 4
    assert "resum" in p.stderr
    assert not (part / "checkpoint.json.tmp.12345").exists()
    assert strip_wall(read(full / "log.jsonl").splitlines()) == strip_wall(
        read(part / "log.jsonl").splitlines())
    a, b = load((full / "checkpoint.json")), load((part / "checkpoint.json"))
    assert a["learner"] == b["learner"] and a["step"] == b["step"] == 5
    # Already has the steps asked: says so.
    p = run("train", "--graphs", tiny, "--cluster", CLUSTER, "--steps", "5", "--checkpoint", str(part),
            "--resume")
    assert p.returncode == 0 and p.stderr.strip(), p.stderr


def test_train_refusals(tmp_path, tiny):
    # cli.md: "A fresh run refuses a directory that already holds a checkpoint"; "the run keeps its seed
    # (another `--seed` is an error)"; "The graphs and cluster must be the ones it trained on, checked by
    # content, not just by name."
    ck = tmp_path / "r"
    one_json(train(tiny, "--steps", "1", "--seed", "1", "--checkpoint", str(ck), "--json"))
    assert_error(train(tiny, "--steps", "2", "--checkpoint", str(ck)), "r")
    assert_error(run("train", "--graphs", tiny, "--cluster", CLUSTER, "--steps", "2", "--checkpoint",
                     str(ck), "--resume", "--seed", "2"), "seed")
    other = json.loads(json.dumps(TINY))
    other["ops"][1]["flops"] = 3e7  # same name, same file name, other content
    write_json(tiny, other)
    assert_error(run("train", "--graphs", tiny, "--cluster", CLUSTER, "--steps", "2", "--checkpoint",
                     str(ck), "--resume"))
    write_json(tiny, TINY)
    assert_error(run("train", "--graphs", tiny, "--cluster", "v100-nvlink-1", "--steps", "2",
                     "--checkpoint", str(ck), "--resume"))
    assert load((ck / "checkpoint.json"))["step"] == 1


def test_train_unknown_option_lists_known(tiny):
    # cli.md: "`--options` is a JSON object of the policy's options (unknown keys are errors listing the
    # known ones)".
    last = assert_error(train(tiny, "--steps", "1", "--options", '{"bogus": 1}'), "bogus")
    assert "lr" in last or "hidden" in last


def test_train_minutes_only_no_slash_n_and_sigterm(tmp_path, tiny):
    # cli.md: "with only `--minutes`, steps are unlimited"; progress has "no `/N` with only `--minutes`";
    # "Ctrl-C (or SIGTERM) stops the run after the step under way: its checkpoint is written, the summary
    # printed (`--json`: `"interrupted": true`), and the exit code is 130 (143)"; a second run on a
    # directory another run is using is refused (`DIR/lock`).
    ck = tmp_path / "long"
    proc = subprocess.Popen([BIN, "train", "--graphs", tiny, "--cluster", CLUSTER, "--policy", "gdp",
                             "--minutes", "1", "--checkpoint", str(ck), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while not (ck / "log.jsonl").exists() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)
        second = run("train", "--graphs", tiny, "--cluster", CLUSTER, "--steps", "2", "--checkpoint",
                     str(ck), "--resume")
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_error(second, str(ck))
    assert any(w in second.stderr for w in ("lock", "in use", "using")), second.stderr
    assert proc.returncode == 143, (proc.returncode, err[-500:])
    d = json.loads(out)
    assert d["interrupted"] is True
    steps_line = [l for l in err.splitlines() if l.startswith("train: step ")]
    assert steps_line and all("/" not in l.split()[2] for l in steps_line), steps_line[:2]
    assert load((ck / "checkpoint.json"))["step"] == d["steps"] > 0


def test_trained_policy_places_graph(tmp_path, tiny):
    # cli.md: "The trained policy places graphs with
    # `placelab place --placer NAME --options '{"checkpoint": "DIR"}'`."
    ck = tmp_path / "pol"
    one_json(train(tiny, "--steps", "2", "--checkpoint", str(ck), "--json"))
    d = one_json(run("place", "--graph", tiny, "--cluster", CLUSTER, "--placer", "gdp", "--options",
                     json.dumps({"checkpoint": str(ck)}), "--json"))
    assert d["step_time_s"] > 0


# ---------------------------------------------------------------- calibrate and replay


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    d = tmp_path_factory.mktemp("cal")
    out, meas = str(d / "cpu.json"), str(d / "m.json")
    p = run("calibrate", "--backend", "cpu", "--quick", "--devices", "2", "--repeats", "1",
            "--out", out, "--measurements", meas, "--json")
    return p, out, meas


def test_calibrate_outputs(calibrated, tiny):
    # cli.md: "writes CLUSTER, a `placelab.cluster` file ...: every verb takes it as `--cluster`.
    # `--json` prints (and `--measurements F` writes) the points and fits as `placelab.calibration`."
    p, out, meas = calibrated
    d = one_json(p)
    assert d["format"] == "placelab.calibration"
    c = load((out))
    assert c["format"] == "placelab.cluster" and len(c["devices"]) == 2
    m = load((meas))
    assert m["format"] == "placelab.calibration"
    # formats.md: the calibration holds "the calibrated `placelab.cluster` document that `--out` writes".
    assert m["cluster"] == c or {k: v for k, v in c.items() if k not in ("format", "version")} == \
        {k: v for k, v in m["cluster"].items() if k not in ("format", "version")}
    one_json(run("simulate", "--graph", tiny, "--cluster", out, "--random", "1", "--json"))


def test_calibrate_out_and_measurements_distinct(tmp_path):
    # cli.md: outputs are checked to be "not another output of it".
    f = str(tmp_path / "same.json")
    assert_error(run("calibrate", "--backend", "cpu", "--quick", "--out", f, "--measurements", f))
    assert not os.path.exists(f)


def test_replay_json_plan_and_trace(tmp_path, calibrated, tiny):
    # cli.md: replay prints "the predicted and the measured step time (median of `--repeats` runs after
    # `--warmup` runs), the relative error and each device's busy time. `--json` adds every run's step
    # time, the FLOPs, bytes streamed and bytes copied, and per-device checksums"; `--plan-out` saves the
    # plan (`placelab.replay`), `--plan` replays a saved one; `--trace F` writes a Chrome trace.
    _, cl, _ = calibrated
    pl, plan, tr = str(tmp_path / "rp.json"), str(tmp_path / "plan.json"), str(tmp_path / "rt.json")
    placelab("place", "--graph", tiny, "--cluster", cl, "--placer", "round_robin", "--out", pl)
    d = one_json(run("replay", "--graph", tiny, "--cluster", cl, "--placement", pl, "--backend", "cpu",
                     "--repeats", "3", "--warmup", "1", "--plan-out", plan, "--trace", tr, "--json"))
    text = json.dumps(d)
    for k in ("predicted", "measured", "relative_error", "bytes_streamed", "bytes_copied", "checksum"):
        assert k in text, k
    runs = [v for v in d.values() if isinstance(v, list) and len(v) == 3 and
            all(isinstance(x, float) for x in v)]
    assert runs, "every run's step time"
    assert sorted(runs[0])[1] == pytest.approx(d["measured_step_s"])
    assert load((plan))["format"] == "placelab.replay"
    load((tr))
    d2 = one_json(run("replay", "--plan", plan, "--backend", "cpu", "--repeats", "1", "--warmup", "0",
                      "--json"))
    assert d2["predicted_step_s"] == pytest.approx(d["predicted_step_s"])


def test_replay_output_conflicts(tmp_path, calibrated, tiny, placement):
    # cli.md: outputs are "not an input of the run, not another output of it".
    _, cl, _ = calibrated
    before = read(placement)
    assert_error(run("replay", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--plan-out", placement))
    assert read(placement) == before
    same = str(tmp_path / "same.json")
    assert_error(run("replay", "--graph", tiny, "--cluster", CLUSTER, "--placement", placement,
                     "--plan-out", same, "--trace", same))
    assert not os.path.exists(same)
