"""An independent check of docs/formats.md (and the file statements of docs/cli.md), written from the
documentation alone, for the parts other checks do not cover:

- formats.md, the general rules at the top: strict readers (unknown fields listing the known ones,
  duplicate keys named, wrong format / unsupported version naming the supported versions, finite
  numbers, amounts >= 0, integers that must fit in int64 quoted never wrapped, errors naming the file
  and the JSON path), atomic writes (no temporary file left, a symbolic link's target replaced even when
  it does not exist yet, /dev/null written through, two writers leave one whole file), bytes that are not
  UTF-8 written as U+FFFD;
- formats.md `placelab.placement` v1, `placelab.checkpoint` v1 (header fields, what resume needs,
  `log.jsonl`, a killed training run resumes exactly: learned.md "Training runs" and "Checkpoints"),
  "Peer formats", and `placelab.replay` v1 / `placelab.calibration` v1 (with docs/replay.md);
- cli.md: which files each verb writes and reads (`--out`, `--trace`, `--plan-out`, `--plan`,
  `--measurements`, `--checkpoint`), that outputs are checked before the work and written last and
  atomically, and that a failed run leaves an existing output file as it was.

Each test quotes the claim it checks. Inputs are tiny graphs, small presets and a few training steps."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from cli_runner import BIN, placelab  # noqa: E402

pytestmark = pytest.mark.skipif(not os.environ.get("PLACELAB_BIN"),
                                reason="PLACELAB_BIN is not set (ctest sets it to the program under test)")

MSR = Path(os.environ.get("PLACELAB_SHARED_DATA", Path(__file__).parents[2] / ".." / "shared" / "data")) \
    / "msr-dnn-partitioning"

GRAPH = "random_dag:ops=20"
CLUSTER = "v100-nvlink-2"
OPTIONS = {"rollouts": 2, "hidden": 8, "groups": 4}
POLICY = ("--policy", "hdp", "--options", json.dumps(OPTIONS))

# replay.md's fork, grown by one op: a feeds b (same device) and c, d (the other device; one transfer of the
# largest edge, 4096 bytes); b -> d is a control edge (0 bytes) across devices.
FORK = {"format": "placelab.graph", "version": 1, "name": "fork",
        "ops": [{"name": "a", "type": "MatMul", "flops": 2e4, "output_bytes": 4096},
                {"name": "b", "type": "Add", "bytes_read": 4096, "bytes_written": 4096},
                {"name": "c", "type": "MatMul", "flops": 3e4},
                {"name": "d", "type": "Sink"}],
        "edges": [{"src": "a", "dst": "b", "bytes": 4096}, {"src": "a", "dst": "c", "bytes": 4096},
                  {"src": "a", "dst": "d", "bytes": 1024}, {"src": "b", "dst": "d", "bytes": 0}]}
FORK_PLACEMENT = [0, 0, 1, 1]


def write_json(path, obj):
    Path(path).write_text(json.dumps(obj))
    return str(path)


def last_error(proc, *names):
    """cli.md: errors go to stderr as one line `placelab: error: <place>: <what>`, exit code 1."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    last = proc.stderr.rstrip("\n").split("\n")[-1]
    assert last.startswith("placelab: error: "), proc.stderr
    without_paths = re.sub(r"/\S+", "", last)  # temporary folders are named after the test
    for name in names:
        assert name in (last if name.startswith("/") else without_paths), (name, last)
    return last


def after(msg, path):
    """The part of MSG after the file PATH (the temporary folders' names hold the test's name)."""
    assert f"{path}" in msg, (path, msg)
    return msg.split(f"{path}", 1)[1]


def names_path(msg, file, element, field):
    """The error names FILE, then the JSON path: ELEMENT (e.g. `ops[0]`) and, after it, FIELD."""
    assert f"{file}: {element}" in msg, (file, element, msg)
    assert field in msg.split(f"{file}: {element}", 1)[1], (field, msg)


def leftovers(folder):
    """Names of files in FOLDER (recursively) that look like temporary files of an atomic write."""
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if ".tmp" in p.name or "~" in p.name)


def train(*args, graphs=GRAPH, check=True):
    return placelab("train", "--graphs", graphs, "--cluster", CLUSTER, *POLICY, *args, check=check)


def log_without_wall(path):
    lines = [json.loads(line) for line in Path(path).read_text().splitlines()]
    for line in lines:
        line.pop("wall_s")
    return lines


def trainer_without_wall(doc):
    trainer = dict(doc["trainer"])
    trainer.pop("wall_s")
    return trainer


@pytest.fixture
def placement20(tmp_path):
    p = tmp_path / "p.json"
    placelab("place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer", "heft", "--out", str(p))
    return p


@pytest.fixture
def fork(tmp_path):
    return write_json(tmp_path / "fork.json", FORK), write_json(
        tmp_path / "fork_p.json", {"format": "placelab.placement", "version": 1, "device_of": FORK_PLACEMENT})


@pytest.fixture
def plan(tmp_path, fork):
    """A replay plan of the fork on cpu-2, as `placelab replay --plan-out` writes it."""
    g, p = fork
    out = tmp_path / "plan.json"
    placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--backend", "cpu",
             "--repeats", "1", "--warmup", "0", "--plan-out", str(out))
    return out


@pytest.fixture
def run_dir(tmp_path):
    """A training run of 2 steps on two tiny graphs, its directory."""
    run = tmp_path / "run"
    train("--steps", "2", "--checkpoint", str(run), graphs="random_dag:ops=12,seed=3,random_dag:ops=10,seed=4")
    return run


def resume(run, *args, graphs="random_dag:ops=12,seed=3,random_dag:ops=10,seed=4", check=False):
    return placelab("train", "--graphs", graphs, "--cluster", CLUSTER, "--checkpoint", str(run), "--resume",
                    "--steps", "3", *args, check=check)


def simulate_with(placement_path):
    return placelab("simulate", "--graph", GRAPH, "--cluster", CLUSTER, "--placement", str(placement_path),
                    "--json", check=False)


def replay_plan(path, *args):
    return placelab("replay", "--plan", str(path), "--backend", "cpu", "--repeats", "1", "--warmup", "0", *args,
                    check=False)


def place_from_checkpoint(run, graph="random_dag:ops=12,seed=3"):
    return placelab("place", "--graph", graph, "--cluster", CLUSTER, "--placer", "hdp", "--options",
                    json.dumps({"checkpoint": str(run)}), "--json", check=False)


# ---------------------------------------------------------------- general rules: strict readers
# formats.md: "Readers are strict". Each reader in this file's scope (placement, replay plan, checkpoint) is
# given a bad document; the error must be one line naming the file.

def bad_placement(tmp_path, text):
    path = tmp_path / "q.json"
    path.write_text(text)
    return path, simulate_with(path)


def good_placement_doc():
    return {"format": "placelab.placement", "version": 1, "device_of": [0] * 20}


def test_placement_unknown_field_lists_known_fields(tmp_path):
    """'an unknown field is an error (typos must not be silently ignored), listing the known fields'"""
    doc = good_placement_doc()
    doc["devices_of"] = doc["device_of"]
    path, proc = bad_placement(tmp_path, json.dumps(doc))
    msg = last_error(proc, str(path), "devices_of")
    for known in ("format", "version", "graph", "cluster", "device_of"):
        assert known in msg.split("devices_of", 1)[1], msg


def test_plan_unknown_field_lists_known_fields(tmp_path, plan):
    doc = json.loads(plan.read_text())
    doc["ops"][1]["flop"] = 1.0
    bad = write_json(tmp_path / "bad_plan.json", doc)
    msg = last_error(replay_plan(bad), bad, "flop")
    assert "flops" in after(msg, bad) and "after_ops" in after(msg, bad), msg  # the known fields of an op


def test_checkpoint_unknown_field_lists_known_fields(run_dir):
    path = run_dir / "checkpoint.json"
    doc = json.loads(path.read_text())
    doc["stpe"] = 2
    path.write_text(json.dumps(doc))
    for proc in (resume(run_dir), place_from_checkpoint(run_dir)):
        msg = last_error(proc, str(path), "stpe")
        for known in ("policy", "options", "step", "learner", "trainer"):
            assert known in after(msg, path), msg


@pytest.mark.parametrize("where", [
    pytest.param(("trainer",), id="trainer"),
    pytest.param(("trainer", "tasks", 0), id="trainer_task"),
    pytest.param(("trainer", "tasks", 0, "reward"), id="trainer_first_task_reward"),
    pytest.param(("trainer", "tasks", 1, "reward"), id="trainer_second_task_reward"),
    pytest.param(("trainer", "tasks", 1, "fingerprint"), id="trainer_task_fingerprint"),
    pytest.param(("learner",), id="learner"),
    pytest.param(("learner", "params"), id="learner_params"),
    pytest.param(("learner", "optimizer"), id="learner_optimizer"),
])
def test_checkpoint_unknown_nested_field_names_its_path_and_known_fields(run_dir, where):
    """'an unknown field is an error (typos must not be silently ignored), listing the known fields'; 'every
    error names the file and the JSON path at fault' (here each step of the path must appear, in order)."""
    path = run_dir / "checkpoint.json"
    doc = json.loads(path.read_text())
    obj = doc
    for key in where:
        obj = obj[key]
    obj["bogus"] = 1
    write_json(path, doc)
    msg = last_error(resume(run_dir), f"{path}: ", '"bogus"')
    rest = after_file = msg.split(f"{path}: ", 1)[1]
    steps = []
    for key in where:
        if isinstance(key, int):
            steps[-1] += f"[{key}]"
        else:
            steps.append(key)
    for step in steps:
        assert step in rest, (step, msg)
        rest = rest.split(step, 1)[1]
    assert "known" in after_file, msg  # the known fields are listed


@pytest.mark.parametrize("kind", ["placement", "plan", "checkpoint"])
def test_duplicate_key_is_an_error_naming_it(tmp_path, plan, run_dir, kind):
    """'a key given twice in one object is an error naming it'"""
    if kind == "placement":
        text = '{"format": "placelab.placement", "version": 1, "device_of": [%s], "device_of": [%s]}' % (
            ",".join(["0"] * 20), ",".join(["1"] * 20))
        path, proc = bad_placement(tmp_path, text)
        key = "device_of"
    elif kind == "plan":
        text = plan.read_text()
        assert text.count('"predicted_step_s":') == 1
        text = text.replace('"predicted_step_s":', '"predicted_step_s": 1.0, "predicted_step_s":', 1)
        path = tmp_path / "dup_plan.json"
        path.write_text(text)
        proc, key = replay_plan(path), "predicted_step_s"
    else:
        path = run_dir / "checkpoint.json"
        text = path.read_text()
        assert text.count('"step":') == 1
        path.write_text(text.replace('"step":', '"step": 1, "step":', 1))
        proc, key = resume(run_dir), "step"
    msg = last_error(proc, str(path), f'"{key}"')
    assert "twice" in after(msg, path) or "duplicate" in after(msg, path), msg


@pytest.mark.parametrize("kind", ["placement", "plan", "checkpoint"])
def test_unsupported_version_names_the_supported_versions(tmp_path, plan, run_dir, kind):
    """'a wrong `format` or an unsupported `version` is an error naming the supported versions'"""
    if kind == "placement":
        doc = good_placement_doc()
        doc["version"] = 2
        path, proc = bad_placement(tmp_path, json.dumps(doc))
    elif kind == "plan":
        doc = json.loads(plan.read_text())
        doc["version"] = 2
        path = tmp_path / "v2_plan.json"
        proc = replay_plan(write_json(path, doc))
    else:
        path = run_dir / "checkpoint.json"
        doc = json.loads(path.read_text())
        doc["version"] = 2
        write_json(path, doc)
        proc = resume(run_dir)
    msg = last_error(proc, str(path))
    assert re.search(r"supported\D{0,20}\b1\b", after(msg, path)), msg


@pytest.mark.parametrize("kind", ["placement", "plan", "checkpoint"])
def test_wrong_format_is_an_error(tmp_path, plan, run_dir, kind):
    """'a wrong `format` ... is an error': here checked to name the format expected (whether it must name the
    supported versions too is left open, see the report)."""
    expected = {"placement": "placelab.placement", "plan": "placelab.replay", "checkpoint": "placelab.checkpoint"}
    if kind == "placement":
        doc = good_placement_doc()
        doc["format"] = "placelab.graph"
        path, proc = bad_placement(tmp_path, json.dumps(doc))
    elif kind == "plan":
        doc = json.loads(plan.read_text())
        doc["format"] = "placelab.graph"
        path = tmp_path / "f_plan.json"
        proc = replay_plan(write_json(path, doc))
    else:
        path = run_dir / "checkpoint.json"
        doc = json.loads(path.read_text())
        doc["format"] = "placelab.params"
        write_json(path, doc)
        proc = resume(run_dir)
    last_error(proc, str(path), expected[kind])


@pytest.mark.parametrize("literal", ["1e400", "-1e400", "NaN", "Infinity"])
def test_numbers_must_be_finite(tmp_path, plan, literal):
    """'numbers must be finite (JSON has no NaN or Infinity)'"""
    text = plan.read_text()
    path = tmp_path / "inf_plan.json"
    path.write_text(re.sub(r'"predicted_step_s":\s*[^,}]+', f'"predicted_step_s": {literal}', text, count=1))
    assert literal in path.read_text()
    last_error(replay_plan(path), str(path))


def test_negative_amount_error_names_file_and_json_path(tmp_path, plan):
    """'where they are amounts, `>= 0`'; 'every error names the file and the JSON path at fault, e.g.
    `g.json: ops[3].flops: is -2, must be >= 0`'"""
    doc = json.loads(plan.read_text())
    doc["ops"][2]["flops"] = -2
    bad = write_json(tmp_path / "neg_plan.json", doc)
    last_error(replay_plan(bad), f"{bad}: ops[2].flops", ">= 0")
    doc = json.loads(plan.read_text())
    doc["transfers"][0]["bytes"] = -1
    bad = write_json(tmp_path / "neg_plan.json", doc)
    last_error(replay_plan(bad), f"{bad}: transfers[0].bytes", ">= 0")


@pytest.mark.parametrize("text,quoted", [
    ("9223372036854775808", "9223372036854775808"),                # 2^63: one past int64
    ("18446744073709551616", repr(float(2 ** 64))),                # 2^64: quoted as the nearest double
    ("18446744073709551617", repr(float(2 ** 64))),                # would wrap to 1 in uint64
    ("36893488147419103232", repr(float(2 ** 65))),
])
def test_int64_overflow_is_quoted_never_wrapped(tmp_path, text, quoted):
    """'integers (versions, indices, ids) must fit in int64: a larger one is an error quoting it (from 2^64
    on, as the nearest double, the only form the JSON reader keeps), never wrapped'"""
    ids = ["0"] * 20
    ids[1] = text
    path, proc = bad_placement(tmp_path, '{"format": "placelab.placement", "version": 1, "device_of": [%s]}'
                               % ",".join(ids))
    last_error(proc, f"{path}: device_of[1]", quoted)
    # A version too large is quoted too, not wrapped to a supported one (2^64 + 1 wraps to 1 in uint64).
    path, proc = bad_placement(tmp_path, '{"format": "placelab.placement", "version": %s, "device_of": [%s]}'
                               % (text, ",".join(["0"] * 20)))
    last_error(proc, str(path), quoted)


def test_int64_underflow_is_quoted(tmp_path):
    """The same rule for a negative integer below int64's least, -2^63 - 1: 'an error quoting it (from 2^64
    on and below -2^63, as the nearest double ...), never wrapped'."""
    ids = ["0"] * 20
    ids[1] = "-9223372036854775809"
    path, proc = bad_placement(tmp_path, '{"format": "placelab.placement", "version": 1, "device_of": [%s]}'
                               % ",".join(ids))
    last_error(proc, f"{path}: device_of[1]", "from -9223372036854775808 to 9223372036854775807",
               repr(float(-2 ** 63)))


def test_int64_overflow_in_plan_and_checkpoint_is_quoted(tmp_path, plan, run_dir):
    """The int64 rule in the replay plan's indices and the checkpoint's `step`."""
    doc = json.loads(plan.read_text())
    doc["ops"][3]["device"] = 2 ** 64 + 1  # Python's json writes it in full
    path = write_json(tmp_path / "big_plan.json", doc)
    last_error(replay_plan(path), f"{path}: ops[3].device", repr(float(2 ** 64)))
    ck = run_dir / "checkpoint.json"
    doc = json.loads(ck.read_text())
    doc["step"] = 2 ** 63
    write_json(ck, doc)
    last_error(resume(run_dir), str(ck), "step", "9223372036854775808")


def test_errors_name_file_and_json_path(tmp_path, plan, run_dir):
    """'every error names the file and the JSON path at fault'"""
    doc = good_placement_doc()
    doc["device_of"][19] = -1
    path, proc = bad_placement(tmp_path, json.dumps(doc))
    last_error(proc, f"{path}: device_of[19]")
    doc = good_placement_doc()
    doc["device_of"][4] = "gpu0"
    path, proc = bad_placement(tmp_path, json.dumps(doc))
    last_error(proc, f"{path}: device_of[4]")
    doc = json.loads(plan.read_text())
    doc["ops"][0]["after_ops"] = [7]
    bad = write_json(tmp_path / "idx_plan.json", doc)
    names_path(last_error(replay_plan(bad)), bad, "ops[0]", "after_ops")
    ck = run_dir / "checkpoint.json"
    doc = json.loads(ck.read_text())
    doc["trainer"]["tasks"][1]["best_step"] = "x"
    write_json(ck, doc)
    last_error(resume(run_dir), f"{ck}: trainer.tasks[1].best_step")


# ---------------------------------------------------------------- general rules: atomic writes

def test_outputs_leave_no_temporary_files(tmp_path, fork, placement20):
    """'Files are written atomically (to a temporary file beside `F`, ... then renamed over it)': after the
    run only the named outputs are there. cli.md: which verb writes what."""
    out = tmp_path / "outs"
    out.mkdir()
    g, p = fork
    placelab("graph", "--model", "gnmt", "--layers", "1", "--out", str(out / "g.json"))
    placelab("cluster", "--preset", "cpu-2", "--out", str(out / "c.json"))
    placelab("place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer", "round_robin", "--out", str(out / "p.json"))
    placelab("simulate", "--graph", GRAPH, "--cluster", CLUSTER, "--placement", str(out / "p.json"),
             "--trace", str(out / "sim_trace.json"))
    placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--backend", "cpu", "--repeats", "1",
             "--warmup", "0", "--plan-out", str(out / "plan.json"), "--trace", str(out / "replay_trace.json"))
    placelab("calibrate", "--backend", "cpu", "--quick", "--out", str(out / "cal.json"),
             "--measurements", str(out / "meas.json"))
    train("--steps", "3", "--checkpoint-every", "1", "--checkpoint", str(out / "run"))
    assert sorted(os.listdir(out)) == sorted(["g.json", "c.json", "p.json", "sim_trace.json", "plan.json",
                                              "replay_trace.json", "cal.json", "meas.json", "run"])
    assert set(os.listdir(out / "run")) <= {"checkpoint.json", "log.jsonl", "lock"}
    assert {"checkpoint.json", "log.jsonl"} <= set(os.listdir(out / "run"))
    # Each output is the documented kind of file.
    kinds = {"g.json": "placelab.graph", "c.json": "placelab.cluster", "p.json": "placelab.placement",
             "plan.json": "placelab.replay", "cal.json": "placelab.cluster", "meas.json": "placelab.calibration",
             "run/checkpoint.json": "placelab.checkpoint"}
    for name, kind in kinds.items():
        doc = json.loads((out / name).read_text())
        assert doc["format"] == kind and doc["version"] == 1, name
    for name in ("sim_trace.json", "replay_trace.json"):  # Chrome trace-event JSON
        doc = json.loads((out / name).read_text())
        events = doc["traceEvents"] if isinstance(doc, dict) else doc
        assert isinstance(events, list) and events, name


def traced_writes(tmp_path, *args):
    """Runs placelab ARGS under strace; returns the lines of its file system calls (skips without strace)."""
    log = tmp_path / "strace.txt"
    try:
        proc = subprocess.run(["strace", "-f", "-o", str(log), "-e", "trace=openat,open,rename,renameat,renameat2,"
                               "fsync,fdatasync", BIN, *args], capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        pytest.skip("strace is not installed")
    if not log.exists() or "ptrace" in proc.stderr.lower():
        pytest.skip("strace cannot trace here")
    assert proc.returncode == 0, proc.stderr
    return log.read_text().splitlines()


def check_atomic_write(lines, final, pid_check=True):
    """formats.md: '(to a temporary file beside `F`, unique to the process, synced to disk, then renamed over
    it, and the folder synced)'."""
    final = str(final)
    renames = [(i, line) for i, line in enumerate(lines) if re.search(r"rename(at2?)?\(", line)
               and line.rstrip().endswith("= 0") and f'"{final}"' in line]
    assert renames, f"no rename onto {final}"
    i, line = renames[-1]
    pid, temp = line.split()[0], re.search(r'"([^"]+)"', line).group(1)
    assert os.path.dirname(temp) == os.path.dirname(final) and temp != final, line  # beside F
    assert os.path.basename(temp).startswith(os.path.basename(final)), line
    assert pid in os.path.basename(temp), line  # unique to the process
    opened = [j for j in range(i) if f'"{temp}"' in lines[j] and "O_CREAT" in lines[j]]
    assert opened, f"{temp} was not created"
    fd = lines[opened[-1]].rsplit("=", 1)[1].strip()
    assert any(re.search(rf"f(data)?sync\({fd}\)", lines[j]) for j in range(opened[-1], i)), "not synced before rename"
    folder = os.path.dirname(final)
    dir_open = [j for j in range(i, len(lines)) if f'"{folder}"' in lines[j] and "O_DIRECTORY" in lines[j]]
    assert dir_open, "the folder is not opened after the rename"
    dfd = lines[dir_open[0]].rsplit("=", 1)[1].strip()
    assert any(re.search(rf"f(data)?sync\({dfd}\)", lines[j]) for j in range(dir_open[0], len(lines))), \
        "the folder is not synced"


def test_writes_go_through_a_synced_temporary_file_renamed_over_the_output(tmp_path):
    """formats.md: 'Files are written atomically (to a temporary file beside `F`, unique to the process, synced
    to disk, then renamed over it, and the folder synced)'; a symbolic link's target is what is replaced;
    formats.md, checkpoint: 'a checkpoint is written through a temporary file and renamed'."""
    out = tmp_path / "p.json"
    check_atomic_write(traced_writes(tmp_path, "place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer",
                                     "round_robin", "--out", str(out)), out)
    (tmp_path / "sub").mkdir()
    os.symlink(tmp_path / "sub" / "t.json", tmp_path / "link.json")
    check_atomic_write(traced_writes(tmp_path, "cluster", "--preset", "cpu-2", "--out", str(tmp_path / "link.json")),
                       tmp_path / "sub" / "t.json")
    assert os.path.islink(tmp_path / "link.json")
    run = tmp_path / "run"
    check_atomic_write(traced_writes(tmp_path, "train", "--graphs", GRAPH, "--cluster", CLUSTER, *POLICY, "--steps",
                                     "2", "--checkpoint", str(run)), run / "checkpoint.json")


def test_the_log_is_on_disk_before_each_checkpoint(tmp_path):
    """learned.md: 'The log is synced to disk before each checkpoint, so even a crash of the machine leaves
    it holding every step the checkpoint counts.'"""
    run = tmp_path / "run"
    lines = traced_writes(tmp_path, "train", "--graphs", GRAPH, "--cluster", CLUSTER, *POLICY, "--steps", "4",
                          "--checkpoint-every", "2", "--checkpoint", str(run))
    final = f'"{run / "checkpoint.json"}"'
    renames = [i for i, line in enumerate(lines) if re.search(r"rename(at2?)?\(", line) and final in line]
    assert len(renames) == 2, renames  # steps 2 and 4
    log = f'"{run / "log.jsonl"}"'
    for i in renames:
        since = max([j for j in renames if j < i], default=0)
        opened = [j for j in range(since, i) if log in lines[j] and "O_CREAT" not in lines[j] and "= -1" not in lines[j]]
        assert opened, f"log.jsonl not opened before checkpoint rename at line {i}"
        fd = lines[opened[-1]].rsplit("=", 1)[1].strip()
        assert any(re.search(rf"fsync\({fd}\)", lines[j]) for j in range(opened[-1], i)), "log not synced"


def test_a_dangling_link_gets_its_target_written(tmp_path):
    """'a symbolic link's target is replaced (the link stays, even when its target does not exist yet)'"""
    link, target = tmp_path / "link.json", tmp_path / "sub" / "target.json"
    (tmp_path / "sub").mkdir()
    os.symlink(target, link)
    placelab("place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer", "round_robin", "--out", str(link))
    assert os.path.islink(link) and os.readlink(link) == str(target)
    assert json.loads(target.read_text())["format"] == "placelab.placement"
    # Relative link too, and the temporary file goes beside the target (none is left anywhere).
    os.symlink("sub/target2.json", tmp_path / "rel.json")
    placelab("cluster", "--preset", "cpu-2", "--out", str(tmp_path / "rel.json"))
    assert os.path.islink(tmp_path / "rel.json")
    assert json.loads((tmp_path / "sub" / "target2.json").read_text())["format"] == "placelab.cluster"
    assert leftovers(tmp_path) == []


def test_dev_null_is_written_through():
    """'a device or pipe such as `/dev/null` is written through'"""
    for args in (("place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer", "round_robin", "--out", "/dev/null"),
                 ("graph", "--model", "gnmt", "--layers", "1", "--out", "/dev/null"),
                 ("calibrate", "--backend", "cpu", "--quick", "--out", "/dev/null")):
        placelab(*args)
        assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_two_writers_of_one_file_leave_one_of_them_whole(tmp_path):
    """'two writers of one file leave one of them whole'"""
    ref = {}
    for placer in ("round_robin", "single_device"):
        placelab("place", "--graph", "random_dag:ops=200", "--cluster", "v100-nvlink-4", "--placer", placer,
                 "--out", str(tmp_path / f"{placer}.json"))
        ref[placer] = (tmp_path / f"{placer}.json").read_bytes()
    assert ref["round_robin"] != ref["single_device"]
    target = tmp_path / "shared.json"
    for _ in range(4):
        procs = [subprocess.Popen([BIN, "place", "--graph", "random_dag:ops=200", "--cluster", "v100-nvlink-4",
                                   "--placer", placer, "--out", str(target)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for placer in ("round_robin", "single_device")]
        assert [proc.wait(timeout=120) for proc in procs] == [0, 0]
        assert target.read_bytes() in ref.values()
    assert leftovers(tmp_path) == []


# ---------------------------------------------------------------- general rules: UTF-8

def non_utf8_graph(tmp_path):
    """A copy of a small graph file whose path has a byte that is not UTF-8."""
    text = placelab("graph", "--model", "gnmt", "--layers", "1", "--out", "/dev/stdout").stdout
    path = os.fsencode(tmp_path) + b"/g\xff.json"
    with open(path, "w") as f:
        f.write(text)
    return path


def run_bytes(*args):
    return subprocess.run([os.fsencode(BIN), *[a if isinstance(a, bytes) else a.encode() for a in args]],
                          capture_output=True, timeout=120)


def test_non_utf8_bytes_in_a_name_are_written_as_replacement_char(tmp_path):
    """'Bytes that are not valid UTF-8 in a string (say, a name taken from a file path) are written as
    U+FFFD.' A training task is named after its graph spec, here a file path with the byte 0xff."""
    graph = non_utf8_graph(tmp_path)
    run = tmp_path / "run"
    proc = run_bytes("train", "--graphs", graph, "--cluster", CLUSTER, *POLICY, "--steps", "2",
                     "--checkpoint", str(run), "--json")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.decode("utf-8"))  # strict: raises on invalid UTF-8
    assert "g\ufffd.json" in summary["tasks"][0]["task"]
    checkpoint = json.loads((run / "checkpoint.json").read_bytes().decode("utf-8"))
    assert "g\ufffd.json" in checkpoint["trainer"]["tasks"][0]["name"]
    for line in (run / "log.jsonl").read_bytes().decode("utf-8").splitlines():
        assert "g\ufffd.json" in json.loads(line)["task"]


def test_run_on_a_non_utf8_path_resumes(tmp_path):
    """cli.md: '`--resume` continues that run exactly where its checkpoint stopped'; formats.md writes the
    path's bad byte as U+FFFD in the saved task name. The run on that very path must still resume."""
    graph = non_utf8_graph(tmp_path)
    run = tmp_path / "run"
    proc = run_bytes("train", "--graphs", graph, "--cluster", CLUSTER, *POLICY, "--steps", "2",
                     "--checkpoint", str(run))
    assert proc.returncode == 0, proc.stderr
    proc = run_bytes("train", "--graphs", graph, "--cluster", CLUSTER, "--steps", "3", "--checkpoint", str(run),
                     "--resume")
    assert proc.returncode == 0, proc.stderr.decode("utf-8", "replace")
    assert json.loads((run / "checkpoint.json").read_text())["step"] == 3


@pytest.mark.skipif(not MSR.exists(), reason=f"msr-dnn-partitioning data not found at {MSR}")
def test_msr_graph_named_after_a_non_utf8_file(tmp_path):
    """The msr importer names the graph after its file: a bad byte there is written as U+FFFD."""
    src = MSR / "throughput-inputs" / "LayerGraphs" / "resnet50_inference.json"
    path = os.fsencode(tmp_path) + b"/res\xfenet.json"
    with open(path, "wb") as f:
        f.write(src.read_bytes())
    out = tmp_path / "g.json"
    proc = run_bytes("graph", "--file", path, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    name = json.loads(out.read_bytes().decode("utf-8"))["name"]
    assert "\ufffd" in name
    proc = run_bytes("place", "--graph", path, "--cluster", path, "--placer", "round_robin",
                     "--out", str(tmp_path / "p.json"), "--json")
    assert proc.returncode == 0, proc.stderr
    json.loads(proc.stdout.decode("utf-8"))
    assert "\ufffd" in json.loads((tmp_path / "p.json").read_bytes().decode("utf-8"))["graph"]


# ---------------------------------------------------------------- placelab.placement v1

def test_place_out_writes_a_placement_v1(tmp_path):
    """'One device index per op, in op order, as `placelab place --out` writes it: {"format":
    "placelab.placement", "version": 1, "graph": ..., "cluster": ..., "device_of": [...]}'"""
    out = tmp_path / "p.json"
    doc = json.loads(placelab("place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer", "heft", "--out", str(out),
                              "--json").stdout)
    p = json.loads(out.read_text())
    assert set(p) == {"format", "version", "graph", "cluster", "device_of"}
    assert (p["format"], p["version"], p["graph"], p["cluster"]) == ("placelab.placement", 1, "random_dag", CLUSTER)
    assert len(p["device_of"]) == 20 and set(p["device_of"]) <= {0, 1}
    assert all(isinstance(d, int) for d in p["device_of"])
    sim = simulate_with(out)
    assert sim.returncode == 0 and json.loads(sim.stdout)["step_time_s"] == doc["step_time_s"]
    assert "made for" not in sim.stderr  # same graph and cluster: no note


def test_placement_graph_and_cluster_are_optional_and_mismatch_is_said(tmp_path):
    """'`graph` and `cluster` are optional names: a verb given a placement made for another graph or cluster
    says so on stderr.'"""
    path, proc = bad_placement(tmp_path, json.dumps(good_placement_doc()))
    assert proc.returncode == 0 and str(path) not in proc.stderr, proc.stderr
    doc = dict(good_placement_doc(), graph="resnet50", cluster="k80-2")
    path, proc = bad_placement(tmp_path, json.dumps(doc))
    assert proc.returncode == 0, proc.stderr
    assert "resnet50" in proc.stderr and "k80-2" in proc.stderr and str(path) in proc.stderr


def test_placement_device_of_required_and_checked(tmp_path):
    """'`device_of` is required; its length and devices are checked against the graph and cluster it is used
    with (errors name the file).'"""
    path, proc = bad_placement(tmp_path, '{"format": "placelab.placement", "version": 1, "graph": "x"}')
    last_error(proc, str(path), "device_of")
    doc = good_placement_doc()
    doc["device_of"] = doc["device_of"][:19]
    path, proc = bad_placement(tmp_path, json.dumps(doc))
    last_error(proc, str(path), "19", "20")
    doc = good_placement_doc()
    doc["device_of"][7] = 2
    path, proc = bad_placement(tmp_path, json.dumps(doc))
    last_error(proc, str(path))


# ---------------------------------------------------------------- placelab.checkpoint v1

def test_checkpoint_header_and_fields(tmp_path):
    """formats.md, `placelab.checkpoint` v1: 'Fields, all required: policy, options (completed with
    defaults), step, learner (parameters (a `placelab.params` document), optimiser moments, RNG state,
    baselines), trainer (`seed`, `wall_s`, `simulations`, and per task `name`, `fingerprint` (`ops`, `devices`,
    `graph_hash`, `cluster_hash`, `cost_model`), `reward`, `best_cost_s`, `best_step`, `best_placement` (one
    device per op))'. '`DIR/log.jsonl` beside it holds one JSON object per training step.'"""
    run = tmp_path / "run"
    graphs = "random_dag:ops=12,seed=3,random_dag:ops=10,seed=4"
    summary = json.loads(train("--steps", "5", "--seed", "7", "--checkpoint", str(run), "--json",
                               graphs=graphs).stdout)
    ck = json.loads((run / "checkpoint.json").read_text())
    assert set(ck) == {"format", "version", "policy", "options", "step", "learner", "trainer"}
    assert (ck["format"], ck["version"], ck["policy"], ck["step"]) == ("placelab.checkpoint", 1, "hdp", 5)
    assert {k: ck["options"][k] for k in OPTIONS} == OPTIONS and len(ck["options"]) > len(OPTIONS)
    assert ck["options"] == summary["options"]
    learner = ck["learner"]
    assert learner["params"]["format"] == "placelab.params"
    assert "optimizer" in learner and "rng" in learner
    trainer = ck["trainer"]
    assert set(trainer) == {"seed", "wall_s", "simulations", "tasks"}
    assert trainer["seed"] == 7 and trainer["wall_s"] >= 0 and trainer["simulations"] > 0
    assert len(trainer["tasks"]) == 2
    for task, spec, ops in zip(trainer["tasks"], ("random_dag:ops=12,seed=3", "random_dag:ops=10,seed=4"), (12, 10)):
        assert set(task) == {"name", "fingerprint", "reward", "best_cost_s", "best_step", "best_placement"}
        assert spec in task["name"]
        assert set(task["fingerprint"]) == {"ops", "devices", "graph_hash", "cluster_hash", "cost_model"}
        assert task["fingerprint"]["ops"] == ops and task["fingerprint"]["devices"] == 2
        assert task["best_cost_s"] > 0 and 0 <= task["best_step"] < 5
        assert len(task["best_placement"]) == ops and set(task["best_placement"]) <= {0, 1}
    log = [json.loads(line) for line in (run / "log.jsonl").read_text().splitlines()]
    assert [entry["step"] for entry in log] == [0, 1, 2, 3, 4]
    assert log[-1]["simulations"] == trainer["simulations"]


def test_checkpoint_best_is_null_when_nothing_fits(tmp_path):
    """'`best_cost_s` (null when none fit), `best_step` (-1 then), `best_placement` (...; empty then)'"""
    huge = {"format": "placelab.graph", "version": 1, "name": "huge",
            "ops": [{"name": f"w{i}", "type": "MatMul", "flops": 1e9, "param_bytes": 1e14} for i in range(3)],
            "edges": [{"src": 0, "dst": 1, "bytes": 1024}, {"src": 1, "dst": 2, "bytes": 1024}]}
    g = write_json(tmp_path / "huge.json", huge)
    run = tmp_path / "run"
    train("--steps", "2", "--checkpoint", str(run), graphs=g)
    task = json.loads((run / "checkpoint.json").read_text())["trainer"]["tasks"][0]
    assert task["best_cost_s"] is None and task["best_step"] == -1 and task["best_placement"] == []
    # and that state resumes
    placelab("train", "--graphs", g, "--cluster", CLUSTER, "--checkpoint", str(run), "--resume", "--steps", "3")


@pytest.mark.parametrize("field", ["format", "version", "policy", "options", "step", "learner", "trainer"])
def test_checkpoint_fields_are_all_required(run_dir, field):
    """'Fields, all required'; learned.md: errors name the file and the field."""
    path = run_dir / "checkpoint.json"
    doc = json.loads(path.read_text())
    del doc[field]
    write_json(path, doc)
    last_error(resume(run_dir), str(path), field)


def test_trainer_is_read_and_checked_on_resume_only(run_dir):
    """'`trainer` ...: read and checked on resume only (placing from a checkpoint uses the learner alone)';
    learned.md: 'Saved bests are checked too: a best placement has one device in range per op'."""
    path = run_dir / "checkpoint.json"
    doc = json.loads(path.read_text())
    doc["trainer"]["tasks"][0]["best_placement"] = [5] * 12
    write_json(path, doc)
    placed = place_from_checkpoint(run_dir)
    assert placed.returncode == 0, placed.stderr
    last_error(resume(run_dir), str(path), "best_placement")


def test_resume_needs_the_same_graphs_and_cluster_by_content(tmp_path):
    """formats.md: the trainer's per-task `fingerprint` (`graph_hash`, ...) is 'read and checked on resume';
    cli.md: 'The graphs and cluster must be the ones it trained on, checked by content, not just by name.'"""
    graph = json.loads(placelab("graph", "--model", "gnmt", "--layers", "1", "--out", "/dev/stdout").stdout)
    g = write_json(tmp_path / "g.json", graph)
    c = tmp_path / "c.json"
    placelab("cluster", "--preset", CLUSTER, "--out", str(c))
    run = tmp_path / "run"
    placelab("train", "--graphs", g, "--cluster", str(c), *POLICY, "--steps", "1", "--checkpoint", str(run))
    before = (run / "checkpoint.json").read_bytes(), (run / "log.jsonl").read_bytes()
    graph["ops"][0]["flops"] = graph["ops"][0].get("flops", 0) + 1.0
    write_json(g, graph)
    last_error(placelab("train", "--graphs", g, "--cluster", str(c), "--checkpoint", str(run), "--resume",
                        "--steps", "2", check=False))
    graph["ops"][0]["flops"] -= 1.0
    write_json(g, graph)
    cluster = json.loads(c.read_text())
    cluster["devices"][0]["memory_bytes"] = cluster["devices"][0]["memory_bytes"] / 2
    write_json(c, cluster)
    last_error(placelab("train", "--graphs", g, "--cluster", str(c), "--checkpoint", str(run), "--resume",
                        "--steps", "2", check=False))
    # cli.md: 'a run that fails leaves the old files as they were'
    assert ((run / "checkpoint.json").read_bytes(), (run / "log.jsonl").read_bytes()) == before


KILL_STEPS = "2000"


def test_a_killed_training_run_resumes_exactly(tmp_path):
    """formats.md: 'a checkpoint is written through a temporary file and renamed'; learned.md: 'so a killed
    run always leaves a complete checkpoint'; '`--resume` ... cuts `log.jsonl` back to the checkpoint's step
    (dropping lines a crash left after it, even half-written ones)... Resuming at step k and running to N
    writes the same log lines (wall time aside) and ends in the same state, bit for bit, as an uninterrupted
    run of N steps'; cli.md: '`DIR/checkpoint.json` every `K` steps (default 10 ...)', 'a run killed while
    saving leaves a temporary `checkpoint.json.tmp.*`, which the resumed run removes'."""
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    train("--steps", KILL_STEPS, "--seed", "3", "--checkpoint", str(straight))
    proc = subprocess.Popen([BIN, "train", "--graphs", GRAPH, "--cluster", CLUSTER, *POLICY, "--steps", KILL_STEPS,
                             "--seed", "3", "--checkpoint", str(killed)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 100
        log = killed / "log.jsonl"
        # after the first checkpoint, and a few steps later (lines in the log past the checkpoint's step)
        while not ((killed / "checkpoint.json").exists() and log.read_text().count("\n") >= 15):
            assert proc.poll() is None, "the run ended before its first checkpoint"
            assert time.monotonic() < deadline, "no checkpoint appeared"
            time.sleep(0.0005)
        still_running = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert still_running, "the run finished before it could be killed; give it more steps"
    assert proc.returncode == -signal.SIGKILL
    ck = json.loads((killed / "checkpoint.json").read_text())  # complete, whatever moment the kill came
    assert ck["step"] >= 10 and ck["step"] % 10 == 0 and ck["step"] < int(KILL_STEPS)
    # A crash's leftovers after the checkpoint's step: a half-written line and a temporary checkpoint.
    with open(killed / "log.jsonl", "a") as f:
        f.write(json.dumps({"step": ck["step"], "task": "a line the crash left", "reward": 0}) + "\n")
        f.write('{"step": 99999, "task": "half')
    (killed / "checkpoint.json.tmp.4242.0").write_text('{"format": "placelab.checkpo')
    out = placelab("train", "--graphs", GRAPH, "--cluster", CLUSTER, "--steps", KILL_STEPS, "--checkpoint",
                   str(killed), "--resume")
    assert "resum" in out.stderr.lower() or "resum" in out.stdout.lower()  # 'and says so'
    assert log_without_wall(killed / "log.jsonl") == log_without_wall(straight / "log.jsonl")
    a = json.loads((straight / "checkpoint.json").read_text())
    b = json.loads((killed / "checkpoint.json").read_text())
    assert a["step"] == b["step"] == int(KILL_STEPS)
    assert (a["policy"], a["options"], a["learner"]) == (b["policy"], b["options"], b["learner"])
    assert trainer_without_wall(a) == trainer_without_wall(b)
    assert leftovers(killed) == [] and leftovers(straight) == []


def test_checkpoint_every_zero_writes_only_at_the_end(tmp_path):
    """cli.md: '`DIR/checkpoint.json` every `K` steps (default 10; 0: only at the end) and at the end'."""
    run = tmp_path / "run"
    proc = subprocess.Popen([BIN, "train", "--graphs", GRAPH, "--cluster", CLUSTER, *POLICY, "--steps", "100000",
                             "--checkpoint-every", "0", "--checkpoint", str(run)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 100
        while not ((run / "log.jsonl").exists() and (run / "log.jsonl").read_text().count("\n") >= 30):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.001)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert not (run / "checkpoint.json").exists()
    # --steps 0 still leaves a checkpoint: 'and at the end, atomically (so with `--steps 0` too)'
    run0 = tmp_path / "run0"
    train("--steps", "0", "--checkpoint", str(run0))
    assert json.loads((run0 / "checkpoint.json").read_text())["step"] == 0


# ---------------------------------------------------------------- peer formats

@pytest.mark.skipif(not MSR.exists(), reason=f"msr-dnn-partitioning data not found at {MSR}")
def test_msr_instance_is_accepted_as_graph_and_cluster_file(tmp_path):
    """'an instance file is accepted as a graph file and as a cluster file (its machine, `msr_cluster`)'; the
    `human_expert` placer's `split_file` option reads the human-expert split files."""
    instance = str(MSR / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json")
    split = str(MSR / "human-experts" / "bert24_inference_expert.json")
    doc = json.loads(placelab("simulate", "--graph", instance, "--cluster", instance, "--random", "1",
                              "--json").stdout)
    assert doc
    out = tmp_path / "p.json"
    placelab("place", "--graph", instance, "--cluster", instance, "--placer", "human_expert", "--options",
             json.dumps({"split_file": split}), "--out", str(out))
    assert json.loads(out.read_text())["format"] == "placelab.placement"
    g = tmp_path / "g.json"
    placelab("graph", "--file", instance, "--out", str(g))  # converted to placelab.graph
    assert json.loads(g.read_text())["format"] == "placelab.graph"


def test_torch_fx_graphs_through_from_torch(tmp_path):
    """'**torch.fx** graphs: `placelab.from_torch` in Python' (the graph it gives is a placelab graph that
    the command line reads)."""
    try:
        import importlib.util
        if importlib.util.find_spec("torch") is None:
            pytest.skip("torch is not installed")
    except ImportError:
        pytest.skip("torch is not installed")
    out = tmp_path / "t.json"
    script = ("import sys, torch, placelab as pl\n"
              "m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))\n"
              "g = pl.from_torch(m, torch.randn(2, 8))\n"
              "g.write(sys.argv[1])\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parents[2] / "python"), env.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", script, str(out)], capture_output=True, text=True, timeout=120,
                          env=env)
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(placelab("graph", "--file", str(out), "--json").stdout)
    assert stats["ops"] >= 3 and stats["flops"] > 0


# ---------------------------------------------------------------- placelab.replay v1, placelab.calibration v1

def test_replay_plan_fields_and_semantics(fork, plan):
    """formats.md: 'A replay plan (`placelab replay --plan-out F`) lists per device the ordered ops with their
    kernel (`compute`, `memory`, `none`), FLOPs, bytes and dependencies (`after_ops`, `after_transfers`), and
    per cross-device tensor a transfer (`producer`, `src`, `dst`, `bytes`), with the simulator's predicted
    times.' replay.md: ops in graph order; `after_ops` = same-device inputs and control edges from any
    device; one transfer per (producer, destination device), the size of the largest edge to it; the kernel
    is the roofline's bound (`none`: no FLOPs, no bytes). The CPU backend runs without a GPU."""
    doc = json.loads(plan.read_text())
    assert (doc["format"], doc["version"], doc["graph"], doc["cluster"]) == ("placelab.replay", 1, "fork", "cpu-2")
    assert doc["predicted_step_s"] > 0
    names = [d["name"] for d in doc["devices"]]
    assert len(set(names)) == 2 and all(names) and {d["kind"] for d in doc["devices"]} == {"cpu"}
    assert sorted(doc["devices"][0]["ops"]) == [0, 1] and sorted(doc["devices"][1]["ops"]) == [2, 3]
    assert doc["devices"][0]["ops"] == [0, 1]  # b waits for a on the same device
    ops = doc["ops"]
    assert [o["name"] for o in ops] == ["a", "b", "c", "d"]
    assert [o["type"] for o in ops] == ["MatMul", "Add", "MatMul", "Sink"]
    assert [o["device"] for o in ops] == FORK_PLACEMENT
    assert [o["kernel"] for o in ops] == ["compute", "memory", "compute", "none"]
    assert (ops[0]["flops"], ops[2]["flops"], ops[1]["bytes"], ops[3]["bytes"]) == (2e4, 3e4, 8192, 0)
    assert [o["after_ops"] for o in ops] == [[], [0], [], [1]]
    assert [o["after_transfers"] for o in ops] == [[], [], [0], [0]]
    assert len(doc["transfers"]) == 1
    t = doc["transfers"][0]
    assert (t["producer"], t["src"], t["dst"], t["bytes"]) == (0, 0, 1, 4096)
    assert ops[0]["end_s"] <= t["start_s"] <= t["end_s"] <= ops[2]["start_s"]
    assert all(0 <= o["start_s"] <= o["end_s"] <= doc["predicted_step_s"] * (1 + 1e-12) for o in ops)


def test_replay_plan_round_trips_and_replays(tmp_path, plan):
    """replay.md: '`plan_from_json(plan_to_json(p)) == p` exactly'; cli.md: '`--plan` replays a saved one'."""
    again = tmp_path / "again.json"
    proc = replay_plan(plan, "--plan-out", str(again), "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(again.read_text()) == json.loads(plan.read_text())
    assert again.read_bytes() == plan.read_bytes()
    assert json.loads(proc.stdout)["predicted_step_s"] == json.loads(plan.read_text())["predicted_step_s"]


def mutated(tmp_path, plan, edit):
    doc = json.loads(plan.read_text())
    edit(doc)
    return write_json(tmp_path / "bad_plan.json", doc)


@pytest.mark.parametrize("edit,element,field", [
    pytest.param(lambda d: d["devices"][1].update(name=d["devices"][0]["name"]), "devices[1]", "name",
                 id="duplicate_device_name"),
    pytest.param(lambda d: d["devices"][0].update(name=""), "devices[0]", "name", id="empty_device_name"),
    pytest.param(lambda d: d["ops"][0].update(flops=2.0 ** 62 * 1.5), "ops[0]", "flops", id="flops_above_2pow62"),
    pytest.param(lambda d: d["ops"][1].update(bytes=2.0 ** 63), "ops[1]", "bytes", id="bytes_above_2pow62"),
    pytest.param(lambda d: d["transfers"][0].update(bytes=1e19), "transfers[0]", "bytes",
                 id="transfer_bytes_above_2pow62"),
    pytest.param(lambda d: d["ops"][3].update(device=2), "ops[3]", "device", id="op_device_out_of_range"),
    pytest.param(lambda d: d["ops"][2].update(after_transfers=[1]), "ops[2]", "after_transfers",
                 id="after_transfers_out_of_range"),
    pytest.param(lambda d: d["transfers"][0].update(producer=4), "transfers[0]", "producer",
                 id="producer_out_of_range"),
    pytest.param(lambda d: d["devices"][0].update(ops=[0, 1, 9]), "devices[0]", "ops",
                 id="device_op_index_out_of_range"),
])
def test_replay_plan_reader_checks(tmp_path, plan, edit, element, field):
    """formats.md: 'Reading checks that device names are unique and non-empty, that FLOPs and bytes are at most
    2^62 (about 4.6e18: the executors count work in int64), the indices, and that the orders cannot
    deadlock'; each error names the file and the JSON path (the element, then its field; the exact
    punctuation of the doc's example `ops[3].flops` is not required)."""
    bad = mutated(tmp_path, plan, edit)
    names_path(last_error(replay_plan(bad)), bad, element, field)


def test_replay_plan_that_would_deadlock_is_refused(tmp_path, plan):
    """'... and that the orders cannot deadlock'; replay.md: 'errors name the op or transfer and the fix'."""
    bad = mutated(tmp_path, plan, lambda d: d["devices"][0].update(ops=[1, 0]))  # b before a, but b waits for a
    msg = last_error(replay_plan(bad), bad)
    rest = after(msg, bad)
    assert '"a"' in rest or '"b"' in rest or "ops[0]" in rest or "ops[1]" in rest, msg
    # a cycle across devices: c (device 1) waits for d (device 1, after c in order)
    bad = mutated(tmp_path, plan, lambda d: d["ops"][2].update(after_ops=[3]))
    last_error(replay_plan(bad), bad)


def test_calibration_document(tmp_path):
    """formats.md: 'A calibration (`placelab calibrate --json` or `--measurements F`) holds the measured points,
    the fitted roofline and link models, and the calibrated `placelab.cluster` document that `--out`
    writes.' replay.md gives the fields."""
    out, meas = tmp_path / "cal.json", tmp_path / "meas.json"
    proc = placelab("calibrate", "--backend", "cpu", "--quick", "--out", str(out), "--measurements", str(meas),
                    "--json")
    printed, saved, cluster = json.loads(proc.stdout), json.loads(meas.read_text()), json.loads(out.read_text())
    assert printed == saved
    assert (saved["format"], saved["version"], saved["backend"]) == ("placelab.calibration", 1, "cpu")
    assert saved["cluster"] == cluster and cluster["format"] == "placelab.cluster"
    assert len(cluster["devices"]) == saved["devices"]
    assert {"flops_per_s", "bandwidth_bytes_per_s", "launch_s", "mape"} <= set(saved["roofline"])
    assert {"bandwidth_bytes_per_s", "latency_s", "mape"} <= set(saved["link"])
    whats = {p["what"] for p in saved["points"]}
    assert whats == {"launch", "compute", "memory", "copy", "shape"}
    assert {"gemm_element_s", "mape", "square_mape"} <= set(saved["shapes"])
    assert all(p["time_s"] > 0 and p["size"] >= 0 for p in saved["points"])
    # every verb takes the calibrated cluster
    placelab("simulate", "--graph", GRAPH, "--cluster", str(out), "--random", "1", "--json")


# ---------------------------------------------------------------- cli.md: outputs checked first, kept on failure

def test_outputs_are_checked_before_the_work(tmp_path, fork, plan):
    """cli.md: 'Output files (`--out`, `--trace`, `--plan-out`, `--measurements`) are checked before the work
    (the folder exists, the name is not a folder, not an input of the run, not another output of it)'."""
    g, p = fork
    before = plan.read_bytes()
    common = ("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--backend", "cpu", "--repeats", "1",
              "--warmup", "0")
    last_error(placelab(*common, "--plan-out", str(tmp_path / "x.json"), "--trace", str(tmp_path / "x.json"),
                        check=False))
    last_error(placelab(*common, "--plan-out", p, check=False))
    last_error(replay_plan(plan, "--plan-out", str(plan)))
    last_error(replay_plan(plan, "--trace", str(plan)))
    last_error(placelab(*common, "--trace", str(tmp_path / "missing" / "t.json"), check=False), str(tmp_path / "missing"))
    last_error(placelab(*common, "--plan-out", str(tmp_path), check=False))
    last_error(placelab("calibrate", "--backend", "cpu", "--quick", "--out", str(tmp_path / "none" / "c.json"),
                        check=False), str(tmp_path / "none"))
    last_error(placelab("place", "--graph", g, "--cluster", "cpu-2", "--placer", "round_robin", "--out", g,
                        check=False))
    assert plan.read_bytes() == before and not (tmp_path / "x.json").exists()
    assert json.loads(Path(g).read_text()) == FORK
    assert leftovers(tmp_path) == []


def test_a_failed_run_leaves_existing_outputs_as_they_were(tmp_path, fork, placement20):
    """cli.md: 'written last, atomically: a run that fails leaves the old files as they were.' Each run below
    passes the output checks and fails later (no CUDA backend on this machine, a placement of the wrong
    length, ...)."""
    g, p = fork
    old = {name: f"old {name}\n" for name in ("plan.json", "trace.json", "cal.json", "meas.json", "out.json")}
    for name, text in old.items():
        (tmp_path / name).write_text(text)
    cuda = placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", p, "--backend", "cuda",
                    "--repeats", "1", "--warmup", "0", "--plan-out", str(tmp_path / "plan.json"),
                    "--trace", str(tmp_path / "trace.json"), check=False)
    if cuda.returncode == 0:
        pytest.skip("the CUDA backend runs here; this check needs a failing replay")
    last_error(cuda)
    last_error(placelab("calibrate", "--backend", "cuda", "--quick", "--out", str(tmp_path / "cal.json"),
                        "--measurements", str(tmp_path / "meas.json"), check=False))
    short = write_json(tmp_path / "short.json", {"format": "placelab.placement", "version": 1, "device_of": [0]})
    last_error(placelab("simulate", "--graph", GRAPH, "--cluster", CLUSTER, "--placement", short,
                        "--trace", str(tmp_path / "trace.json"), check=False))
    last_error(placelab("place", "--graph", GRAPH, "--cluster", CLUSTER, "--placer", "human_expert", "--options",
                        '{"split_file": "/nonexistent/split.json"}', "--out", str(tmp_path / "out.json"),
                        check=False))
    last_error(placelab("graph", "--file", short, "--out", str(tmp_path / "out.json"), check=False))
    for name, text in old.items():
        assert (tmp_path / name).read_text() == text, name
    assert leftovers(tmp_path) == []
