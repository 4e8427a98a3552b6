"""Seeded, deterministic mutation fuzzing of every file the `placelab` command line reads.

The project's promise (README, docs/cli.md, docs/formats.md): bad input gets a clear error and nothing
is lost. Malformed files, cycles, unknown fields, NaN, impossible clusters: one line on stderr,
`placelab: error: <place>: <what>` naming the file (and the JSON path at fault), exit code 1, no
crash, no hang, and the outputs of the failed run left as they were.

Small valid inputs are made with the CLI itself (a 6-op `random_dag` graph, the `v100-nvlink-2`
preset, a `heft` placement, a replay plan, a `gdp` checkpoint after 0 steps) plus a hand-written
`placelab.profile` table; each case applies one mutation (a structured edit at a JSON path, a raw
token such as NaN or 1e400, a duplicate key, or a byte-level edit: truncation, flips, non-UTF-8,
deep nesting) and runs the verb that reads that kind of file. Every case list is explicit and
every random choice is drawn from a fixed seed, so the run is the same each time.
"""
import json
import math
import os
import random
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from cli_runner import BIN, placelab  # noqa: E402

pytestmark = pytest.mark.skipif(not os.environ.get("PLACELAB_BIN"),
                                reason="PLACELAB_BIN is not set (ctest sets it to the program under test)")

TIMEOUT_S = 20
FORBIDDEN = ("terminate called", "std::", "what():", "Assertion", "Segmentation", "basic_string", "nlohmann",
             "json.exception", "internal error", "core dumped", "Aborted")
MAX_ERROR_LINE = 4000  # a message is for people: a line of megabytes quoting the input is not clear
SENTINEL = "previous output: a failed run must leave this file as it was\n"


# ---------------------------------------------------------------------------------------------------
# Writing mutated JSON: raw tokens (NaN, 1e400, ...), duplicate keys, bytes that are not UTF-8.

class Raw:
    """A token written as is (NaN, Infinity, 1e400, 2^64, deep nesting, ...)."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return f"Raw({self.text[:20]!r})"


class Pairs(list):
    """An object written from (key, value) pairs, so a key may be given twice."""


def dump(v):
    if isinstance(v, Raw):
        return v.text
    if isinstance(v, Pairs):
        return "{" + ", ".join(json.dumps(k) + ": " + dump(x) for k, x in v) + "}"
    if isinstance(v, dict):
        return "{" + ", ".join(json.dumps(k) + ": " + dump(x) for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dump(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def to_bytes(text):
    # Lone surrogates \udc80-\udcff stand for raw bytes 0x80-0xff (bytes that are not UTF-8).
    return text.encode("utf-8", "surrogateescape")


def copy(doc):
    return json.loads(json.dumps(doc))


def parent_of(doc, path):
    node = doc
    for key in path[:-1]:
        node = node[key]
    return node


def render(path):
    out = ""
    for key in path:
        out += f"[{key}]" if isinstance(key, int) else (("." if out else "") + key)
    return out


# Mutations. Each returns (kind, bytes or a special marker); `path` is a tuple of keys and indices.
def m_del(path):
    def apply(doc):
        del parent_of(doc, path)[path[-1]]
        return doc
    return apply


def m_set(path, value):
    def apply(doc):
        node = parent_of(doc, path)
        if isinstance(node, list) and path[-1] == len(node):
            node.append(value)
        else:
            node[path[-1]] = value
        return doc
    return apply


def m_dup(path, key):
    """Gives `key` of the object at `path` twice (the second time with the same value)."""
    def apply(doc):
        obj = parent_of(doc, path + ("_",)) if path else doc
        pairs = Pairs(list(obj.items()) + [(key, obj[key])])
        if not path:
            return pairs
        parent_of(doc, path)[path[-1]] = pairs
        return doc
    return apply


def m_fn(fn):
    """Edits the document in place (whatever `fn` returns is ignored)."""
    def apply(doc):
        fn(doc)
        return doc
    return apply


# ---------------------------------------------------------------------------------------------------
# The valid inputs, made with the CLI.

PROFILE = {"format": "placelab.profile", "version": 1, "entries": [
    {"device_kind": "v100", "op_type": "MatMul", "time_s": 0.001},
    {"device_kind": "v100", "op": "layer0/op0", "time_s": 0.0005}]}


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    d = tmp_path_factory.mktemp("base")
    g, c, p = str(d / "g.json"), str(d / "c.json"), str(d / "p.json")
    placelab("graph", "--model", "random_dag", "--ops", "6", "--width", "2", "--out", g)
    placelab("cluster", "--preset", "v100-nvlink-2", "--out", c)
    placelab("place", "--graph", g, "--cluster", c, "--placer", "heft", "--out", p)
    pc = str(d / "pc.json")
    placelab("place", "--graph", g, "--cluster", "cpu-2", "--placer", "heft", "--out", pc)
    plan = str(d / "plan.json")
    placelab("replay", "--graph", g, "--cluster", "cpu-2", "--placement", pc, "--repeats", "1", "--warmup", "0",
             "--plan-out", plan)
    ck = str(d / "ck")
    placelab("train", "--graphs", g, "--cluster", c, "--policy", "gdp", "--steps", "2", "--seed", "3",
             "--checkpoint", ck)
    prof = d / "prof.json"
    prof.write_text(json.dumps(PROFILE))
    docs = {}
    for kind, path in (("graph", g), ("cluster", c), ("placement", p), ("plan", plan),
                       ("checkpoint", os.path.join(ck, "checkpoint.json")), ("profile", str(prof))):
        with open(path, "rb") as f:
            docs[kind] = f.read()
    with open(os.path.join(ck, "log.jsonl"), "rb") as f:
        log = f.read()
    return {"g": g, "c": c, "p": p, "docs": docs, "log": log}


def command(kind, base, file, out):
    """The verb that reads a file of this kind; `out` is an output of the run (checked untouched on failure)."""
    if kind == "graph":
        return ["graph", "--file", file, "--out", out]
    if kind == "cluster":
        return ["cluster", "--file", file, "--out", out]
    if kind == "placement":
        return ["simulate", "--graph", base["g"], "--cluster", base["c"], "--placement", file, "--trace", out]
    if kind == "graph_sim":
        return ["simulate", "--graph", file, "--cluster", base["c"], "--placement", base["p"], "--trace", out]
    if kind == "cluster_sim":
        return ["simulate", "--graph", base["g"], "--cluster", file, "--placement", base["p"], "--trace", out]
    if kind == "placement_maxload":
        return ["simulate", "--graph", base["g"], "--cluster", base["c"], "--placement", file, "--max-load", "--json"]
    if kind == "profile":
        return ["simulate", "--graph", base["g"], "--cluster", base["c"], "--placement", base["p"], "--profile", file,
                "--trace", out]
    if kind == "plan":
        return ["replay", "--plan", file, "--backend", "cpu", "--repeats", "1", "--warmup", "0", "--trace", out]
    if kind == "checkpoint_resume":
        return ["train", "--graphs", base["g"], "--cluster", base["c"], "--checkpoint", os.path.dirname(file),
                "--resume", "--steps", "0"]
    if kind == "checkpoint":
        return ["place", "--graph", base["g"], "--cluster", base["c"], "--placer", "gdp", "--options",
                json.dumps({"checkpoint": os.path.dirname(file)}), "--out", out]
    raise AssertionError(kind)


BASE_OF = {"placement_maxload": "placement", "checkpoint_resume": "checkpoint", "graph_sim": "graph",
           "cluster_sim": "cluster"}


# ---------------------------------------------------------------------------------------------------
# Checks.

def strict_json(data):
    """Python's reading of the bytes as strict JSON (no NaN/Infinity, no overflow, no duplicate keys), or None."""
    def pairs(items):
        keys = [k for k, _ in items]
        if len(keys) != len(set(keys)):
            raise ValueError("duplicate key")
        return dict(items)

    def bad_constant(token):
        raise ValueError(token)

    def number(token):
        v = float(token)
        if not math.isfinite(v):
            raise ValueError(token)
        return v
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=pairs, parse_constant=bad_constant,
                          parse_float=number)
    except (ValueError, RecursionError):
        return None


def keys_of(doc, out=None):
    out = set() if out is None else out
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(k)
            keys_of(v, out)
    elif isinstance(doc, list):
        for v in doc:
            keys_of(v, out)
    return out


def run(args):
    try:
        return subprocess.run([BIN, *args], capture_output=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"hang: placelab {' '.join(args)[:300]} ran longer than {TIMEOUT_S} s")


def describe(args, proc):
    err = proc.stderr.decode("utf-8", "replace")
    return f"placelab {' '.join(a[:120] for a in args)} -> exit {proc.returncode}; stderr: {err[-1500:]!r}"


def check_no_crash(args, proc):
    why = describe(args, proc)
    assert proc.returncode >= 0, "killed by a signal: " + why
    assert proc.returncode not in (134, 139), "crashed (abort/segfault): " + why
    err = proc.stderr.decode("utf-8", "replace")
    for word in FORBIDDEN:
        assert word not in err, f"C++ internals ({word!r}) on stderr: " + why


def check_error(args, proc, names, mentions, out):
    """A clear error: exit 1, `placelab: error: <place>: <what>` as the last and only error line, naming the
    file (one of `names`) and each of `mentions`; the run's output file untouched."""
    check_no_crash(args, proc)
    why = describe(args, proc)
    assert proc.returncode != 0, "accepted bad input (exit 0): " + why
    assert proc.returncode == 1, "an input error must exit 1 (docs/cli.md): " + why
    err = proc.stderr.decode("utf-8", "replace")
    assert err.strip(), "no message on stderr: " + why
    lines = err.rstrip("\n").split("\n")
    errors = [i for i, line in enumerate(lines) if line.startswith("placelab: error: ")]
    assert errors, "no `placelab: error: ` line: " + why
    assert errors == [len(lines) - 1], "the error must be one line, the last on stderr: " + why
    line = lines[-1]
    assert len(line) <= MAX_ERROR_LINE, f"error line of {len(line)} characters: " + why
    rest = line[len("placelab: error: "):]
    assert ": " in rest and rest.split(": ", 1)[1].strip(), "not `<place>: <what>`: " + why
    assert any(n in line for n in names), f"the error does not name the file ({names[0]}): " + why
    for m in mentions:  # "a|b": either
        assert any(alt in line for alt in m.split("|")), f"the error does not name the place at fault ({m!r}): " + why
    if out is not None:
        with open(out) as f:
            assert f.read() == SENTINEL, "the failed run changed its output file: " + why
        leftovers = [n for n in os.listdir(os.path.dirname(out)) if ".tmp." in n]
        assert not leftovers, f"the failed run left temporary files {leftovers}: " + why


def check_ok(args, proc):
    check_no_crash(args, proc)
    assert proc.returncode == 0, "a valid input was refused: " + describe(args, proc)


# ---------------------------------------------------------------------------------------------------
# The case lists. (kind, id, mutation, expect, mentions): expect is "error", "ok" or "either".

HUGE_INT = Raw("9223372036854775808")        # 2^63: one past int64
HUGER_INT = Raw("18446744073709551616")      # 2^64: kept only as a double by the reader
NAN, INF, NINF = Raw("NaN"), Raw("Infinity"), Raw("-Infinity")
OVER = Raw("1e400")
NEG_ZERO = Raw("-0")
NOT_UTF8 = Raw('"\udcff\udcfe bad bytes"')
LONG = "x" * 1_000_000
DEEP = Raw("[" * 100_000 + "]" * 100_000)
DEEP_OBJ = Raw('{"a": ' * 100_000 + "1" + "}" * 100_000)

CASES = []


def case(kind, cid, mutation, expect="error", mentions=()):
    CASES.append(pytest.param(kind, mutation, expect, tuple(mentions), id=f"{kind}-{cid}"))


def path_mentions(path):
    """What a message about `path` should name: the enclosing JSON path and the field."""
    out = []
    if len(path) > 1:
        out.append(render(path[:-1]))
    if isinstance(path[-1], str):
        out.append(path[-1])
    else:
        out.append(render(path))
    return out


def bad_values(kind, path, label, positive=False, integer=False, skip=()):
    """The standard wrong values for one field; `positive`: 0 is an error too; `integer`: 1.5 is.
    NaN and Infinity fail in the JSON reader, which names the line and column (not the JSON path);
    1e400 is test_number_overflow_error_names_its_position."""
    for vid, value in (("string", "1"), ("null", None), ("object", {}), ("array", [1]), ("bool", True),
                       ("negative", -1)):
        case(kind, f"{label}-{vid}", m_set(path, value), "error", path_mentions(path))
    for vid, value in (("nan", NAN), ("infinity", INF), ("minus-infinity", NINF)):
        case(kind, f"{label}-{vid}", m_set(path, value), "error", ["line 1, column", "NaN and Infinity"])
    case(kind, f"{label}-1e400", m_set(path, OVER), "error", ["1e400"])
    if not integer and "2pow64" not in skip:  # 1.8e19 is a finite amount: valid
        case(kind, f"{label}-2pow64", m_set(path, HUGER_INT), "ok")
    if positive:
        case(kind, f"{label}-zero", m_set(path, 0), "error", path_mentions(path))
        case(kind, f"{label}-minus-zero", m_set(path, NEG_ZERO), "error", path_mentions(path))
    if integer:
        case(kind, f"{label}-fraction", m_set(path, 1.5), "error", path_mentions(path))
        case(kind, f"{label}-2pow63", m_set(path, HUGE_INT), "error", path_mentions(path))
        case(kind, f"{label}-2pow64", m_set(path, HUGER_INT), "error", path_mentions(path))


def header_cases(kind, fmt):
    case(kind, "format-missing", m_del(("format",)), "error", ["format"])
    case(kind, "format-other", m_set(("format",), fmt.replace("placelab.", "placelab.x")), "error", ["format"])
    case(kind, "format-number", m_set(("format",), 1), "error", ["format"])
    case(kind, "version-missing", m_del(("version",)), "error", ["version"])
    case(kind, "version-2", m_set(("version",), 2), "error", ["version"])
    case(kind, "version-string", m_set(("version",), "1"), "error", ["version"])
    case(kind, "version-2pow63", m_set(("version",), HUGE_INT), "error", ["version"])
    case(kind, "version-nan", m_set(("version",), NAN), "error", [])
    case(kind, "unknown-top-field", m_set(("extra_field",), 1), "error", ["extra_field"])
    case(kind, "dup-key-version", m_dup((), "version"), "error", ["version"])


# --- graph -----------------------------------------------------------------------------------------
header_cases("graph", "placelab.graph")
case("graph", "name-missing", m_del(("name",)), "error", ["name"])
case("graph", "name-number", m_set(("name",), 5), "error", ["name"])
case("graph", "name-null", m_set(("name",), None), "error", ["name"])
case("graph", "ops-missing", m_del(("ops",)), "error", ["ops"])
case("graph", "ops-empty", m_fn(lambda d: d.update(ops=[], edges=[])), "error", ["ops"])
case("graph", "ops-object", m_set(("ops",), {}), "error", ["ops"])
case("graph", "ops-null", m_set(("ops",), None), "error", ["ops"])
case("graph", "ops-of-numbers", m_set(("ops", 0), 1), "error", ["ops[0]"])
case("graph", "op-name-missing", m_del(("ops", 0, "name")), "error", ["ops[0]", "name"])
case("graph", "op-name-empty", m_set(("ops", 0, "name"), ""), "error", ["ops[0]|op 0"])
case("graph", "op-name-number", m_set(("ops", 0, "name"), 7), "error", ["ops[0].name"])
case("graph", "op-name-duplicate", m_fn(lambda d: d["ops"][1].update(name=d["ops"][0]["name"])), "error",
     ["ops[1].name", "duplicate"])
case("graph", "op-name-long", m_set(("ops", 0, "name"), LONG), "ok")
case("graph", "op-name-not-utf8", m_set(("ops", 0, "name"), NOT_UTF8), "error", [])
case("graph", "op-unknown-field", m_set(("ops", 0, "flopz"), 1), "error", ["ops[0]", "flopz"])
case("graph", "op-dup-key", m_dup(("ops", 0), "flops"), "error", ["ops[0]", "flops"])
bad_values("graph", ("ops", 0, "flops"), "op-flops")
case("graph", "op-flops-minus-zero", m_set(("ops", 0, "flops"), NEG_ZERO), "ok")
case("graph", "op-flops-1e308", m_set(("ops", 0, "flops"), 1e308), "ok")
case("graph", "op-bytes-read-negative", m_set(("ops", 0, "bytes_read"), -5), "error", ["ops[0].bytes_read"])
case("graph", "op-output-bytes-nan", m_set(("ops", 0, "output_bytes"), NAN), "error", [])
case("graph", "op-param-bytes-1e400", m_set(("ops", 0, "param_bytes"), OVER), "error", [])
case("graph", "op-temp-bytes-string", m_set(("ops", 0, "temp_bytes"), "big"), "error", ["ops[0].temp_bytes"])
case("graph", "op-phase-unknown", m_set(("ops", 0, "phase"), "sideways"), "error", ["ops[0].phase"])
case("graph", "op-phase-number", m_set(("ops", 0, "phase"), 3), "error", ["ops[0].phase"])
bad_values("graph", ("ops", 0, "colocation"), "op-colocation", integer=True)
case("graph", "op-colocation-2pow31", m_set(("ops", 0, "colocation"), 2 ** 31), "error", ["ops[0].colocation"])
case("graph", "op-layer-2pow63-minus-1", m_set(("ops", 0, "layer"), 2 ** 63 - 1), "error", ["ops[0].layer"])
case("graph", "op-pinned-kind-number", m_set(("ops", 0, "pinned_kind"), 1), "error", ["ops[0].pinned_kind"])
case("graph", "op-measured-array", m_set(("ops", 0, "measured_s"), [1]), "error", ["ops[0].measured_s"])
case("graph", "op-measured-negative", m_set(("ops", 0, "measured_s"), {"v100": -1}), "error",
     ["ops[0].measured_s", "v100"])
case("graph", "op-measured-string", m_set(("ops", 0, "measured_s"), {"v100": "fast"}), "error", ["ops[0].measured_s"])
case("graph", "op-measured-nan", m_set(("ops", 0, "measured_s"), Pairs([("v100", NAN)])), "error", [])
case("graph", "op-measured-dup-kind", m_set(("ops", 0, "measured_s"), Pairs([("v100", 1), ("v100", 2)])), "error",
     ["v100"])
case("graph", "op-measured-deep-array", m_set(("ops", 0, "measured_s"), DEEP), "error", [])
case("graph", "op-type-deep-object", m_set(("ops", 0, "type"), DEEP_OBJ), "error", [])
case("graph", "edges-object", m_set(("edges",), {}), "error", ["edges"])
case("graph", "edges-null", m_set(("edges",), None), "error", ["edges"])
case("graph", "edges-missing", m_del(("edges",)), "ok")
case("graph", "edge-not-object", m_set(("edges", 0), [0, 2]), "error", ["edges[0]"])
case("graph", "edge-src-missing", m_del(("edges", 0, "src")), "error", ["edges[0]", "src"])
case("graph", "edge-dst-missing", m_del(("edges", 0, "dst")), "error", ["edges[0]", "dst"])
case("graph", "edge-src-out-of-range", m_set(("edges", 0, "src"), 99), "error", ["edges[0].src", "99"])
case("graph", "edge-dst-out-of-range", m_set(("edges", 0, "dst"), 6), "error", ["edges[0].dst"])
case("graph", "edge-src-negative", m_set(("edges", 0, "src"), -1), "error", ["edges[0].src"])
case("graph", "edge-src-2pow63", m_set(("edges", 0, "src"), HUGE_INT), "error", ["edges[0].src"])
case("graph", "edge-src-2pow64", m_set(("edges", 0, "src"), HUGER_INT), "error", ["edges[0].src"])
case("graph", "edge-src-fraction", m_set(("edges", 0, "src"), 0.5), "error", ["edges[0].src"])
case("graph", "edge-src-null", m_set(("edges", 0, "src"), None), "error", ["edges[0].src"])
case("graph", "edge-src-unknown-name", m_set(("edges", 0, "src"), "no/such/op"), "error",
     ["edges[0].src", "no/such/op"])
case("graph", "edge-self-loop", m_fn(lambda d: d["edges"].append({"src": 2, "dst": 2})), "error", ["layer1/op0"])
case("graph", "edge-duplicate", m_fn(lambda d: d["edges"].append(dict(d["edges"][0]))), "error", [])
case("graph", "edge-cycle", m_fn(lambda d: d["edges"].append({"src": 5, "dst": 0})), "error", ["cycle"])
case("graph", "edge-cycle-by-name", m_fn(lambda d: d["edges"].append({"src": "layer2/op1", "dst": "layer1/op0"})),
     "error", ["cycle"])
case("graph", "edge-bytes-negative", m_set(("edges", 0, "bytes"), -1), "error", ["edges[0].bytes"])
case("graph", "edge-bytes-nan", m_set(("edges", 0, "bytes"), NAN), "error", [])
case("graph", "edge-comm-negative", m_set(("edges", 0, "comm_s"), -1), "error", ["edges[0].comm_s"])
case("graph", "edge-unknown-field", m_set(("edges", 0, "weight"), 1), "error", ["edges[0]", "weight"])
case("graph", "edge-dup-key", m_dup(("edges", 0), "dst"), "error", ["edges[0].dst"])

# --- cluster ---------------------------------------------------------------------------------------
header_cases("cluster", "placelab.cluster")
case("cluster", "name-missing", m_del(("name",)), "ok")
case("cluster", "name-number", m_set(("name",), 3), "error", ["name"])
case("cluster", "transfer-mode-unknown", m_set(("transfer_mode",), "multicast"), "error", ["transfer_mode"])
case("cluster", "devices-missing", m_del(("devices",)), "error", ["devices"])
case("cluster", "devices-empty", m_set(("devices",), []), "error", ["devices"])
case("cluster", "devices-object", m_set(("devices",), {}), "error", ["devices"])
case("cluster", "devices-4097", m_fn(lambda d: d.update(
    devices=[dict(d["devices"][0], name=f"d{i}") for i in range(4097)], links=[])), "error", ["devices"])
case("cluster", "device-not-object", m_set(("devices", 0), "gpu0"), "error", ["devices[0]"])
case("cluster", "device-name-missing", m_del(("devices", 0, "name")), "error", ["devices[0]", "name"])
case("cluster", "device-name-empty", m_set(("devices", 0, "name"), ""), "error", ["devices[0]|device 0"])
case("cluster", "device-name-duplicate", m_set(("devices", 1, "name"), "gpu0"), "error", ["gpu0"])
case("cluster", "device-kind-missing", m_del(("devices", 0, "kind")), "error", ["devices[0]", "kind"])
case("cluster", "device-unknown-field", m_set(("devices", 0, "cores"), 80), "error", ["devices[0]", "cores"])
case("cluster", "device-dup-key", m_dup(("devices", 0), "memory_bytes"), "error", ["devices[0].memory_bytes"])
bad_values("cluster", ("devices", 0, "peak_flops_per_s"), "device-peak", positive=True)
case("cluster", "device-bandwidth-zero", m_set(("devices", 1, "memory_bandwidth_bytes_per_s"), 0), "error",
     ["devices[1].memory_bandwidth_bytes_per_s"])
bad_values("cluster", ("devices", 0, "memory_bytes"), "device-memory")
case("cluster", "device-memory-zero", m_set(("devices", 0, "memory_bytes"), 0), "ok")
case("cluster", "device-efficiency-zero", m_set(("devices", 0, "efficiency"), 0), "error", ["devices[0].efficiency"])
case("cluster", "device-efficiency-1.5", m_set(("devices", 0, "efficiency"), 1.5), "error", ["devices[0].efficiency"])
case("cluster", "device-efficiency-nan", m_set(("devices", 0, "efficiency"), NAN), "error", [])
case("cluster", "device-launch-negative", m_set(("devices", 0, "launch_overhead_s"), -1), "error",
     ["devices[0].launch_overhead_s"])
case("cluster", "device-gap-1e400", m_set(("devices", 0, "gap_after_op_s"), OVER), "error", [])
case("cluster", "links-missing", m_del(("links",)), "error", ["reach"])          # gpu0 cannot reach gpu1
case("cluster", "links-empty", m_set(("links",), []), "error", ["reach"])
case("cluster", "links-object", m_set(("links",), {}), "error", ["links"])
case("cluster", "unreachable-gpu1", m_fn(lambda d: d.update(
    links=[l for l in d["links"] if "gpu1" not in l["ends"]])), "error", ["gpu1", "reach"])
case("cluster", "single-device-no-links", m_fn(lambda d: d.update(devices=d["devices"][:1], links=[])), "ok")
case("cluster", "link-ends-one", m_set(("links", 0, "ends"), ["gpu0"]), "error", ["links[0].ends"])
case("cluster", "link-ends-three", m_set(("links", 0, "ends"), ["gpu0", "gpu1", "gpu0"]), "error", ["links[0].ends"])
case("cluster", "link-ends-self", m_set(("links", 0, "ends"), ["gpu0", "gpu0"]), "error", ["links[0]|link 0"])
case("cluster", "link-ends-empty-name", m_set(("links", 0, "ends"), ["gpu0", ""]), "error", ["links[0].ends"])
case("cluster", "link-ends-numbers", m_set(("links", 0, "ends"), [0, 1]), "error", ["links[0].ends"])
case("cluster", "link-name-duplicate", m_set(("links", 1, "name"), "nvlink0-1"), "error", ["nvlink0-1"])
bad_values("cluster", ("links", 0, "bandwidth_bytes_per_s"), "link-bandwidth", positive=True)
case("cluster", "link-latency-negative", m_set(("links", 0, "latency_s"), -1e-6), "error", ["links[0].latency_s"])
case("cluster", "link-latency-nan", m_set(("links", 0, "latency_s"), NAN), "error", [])
case("cluster", "link-duplex-unknown", m_set(("links", 0, "duplex"), "quarter"), "error", ["links[0].duplex"])
case("cluster", "link-busy-negative", m_set(("links", 0, "busy_after_s"), -1), "error", ["links[0].busy_after_s"])
case("cluster", "link-unknown-field", m_set(("links", 0, "mtu"), 1500), "error", ["links[0]", "mtu"])
case("cluster", "route-unknown-link", m_set(("routes",), [{"src": "gpu0", "dst": "gpu1", "links": ["nosuch"]}]),
     "error", ["routes[0]|route 0", "nosuch"])
case("cluster", "route-unknown-device", m_set(("routes",), [{"src": "gpu9", "dst": "gpu1", "links": ["nvlink0-1"]}]),
     "error", ["routes[0]|route 0", "gpu9"])
case("cluster", "route-broken-chain", m_set(("routes",), [{"src": "gpu0", "dst": "gpu1",
                                                            "links": ["pcie_switch0-socket0"]}]),
     "error", ["routes[0]|route 0"])
case("cluster", "route-self", m_set(("routes",), [{"src": "gpu0", "dst": "gpu0", "links": ["nvlink0-1"]}]),
     "error", ["routes[0]|route 0"])
case("cluster", "route-valid-pcie", m_set(("routes",), [{"src": "gpu1", "dst": "gpu0",
                                                          "links": ["gpu1-pcie", "gpu0-pcie"]}]), "ok")
case("cluster", "route-duplicate", m_set(("routes",), [{"src": "gpu1", "dst": "gpu0", "links": ["nvlink0-1"]}] * 2),
     "error", ["routes[1]|route 1"])
case("cluster", "route-links-not-array", m_set(("routes",), [{"src": "gpu1", "dst": "gpu0", "links": "nvlink0-1"}]),
     "error", ["routes[0].links"])
case("cluster", "route-unknown-field", m_set(("routes",), [{"src": "gpu1", "dst": "gpu0", "links": ["nvlink0-1"],
                                                             "hops": 1}]), "error", ["routes[0]|route 0", "hops"])

# --- placement (simulate --placement) --------------------------------------------------------------
header_cases("placement", "placelab.placement")
case("placement", "device-of-missing", m_del(("device_of",)), "error", ["device_of"])
case("placement", "device-of-null", m_set(("device_of",), None), "error", ["device_of"])
case("placement", "device-of-object", m_set(("device_of",), {"0": 0}), "error", ["device_of"])
case("placement", "device-of-string", m_set(("device_of",), "0,1,0,0,1,0"), "error", ["device_of"])
LENGTH = ["device_of|entries", "6 ops"]
OP3 = ['device_of[3]|op "layer1/op1"']
case("placement", "device-of-empty", m_set(("device_of",), []), "error", LENGTH)
case("placement", "device-of-short", m_fn(lambda d: d["device_of"].pop()), "error", LENGTH)
case("placement", "device-of-long", m_fn(lambda d: d["device_of"].append(0)), "error", LENGTH)
case("placement", "device-out-of-range", m_set(("device_of", 3), 2), "error", OP3 + ["0..1"])
case("placement", "device-4096", m_set(("device_of", 3), 4096), "error", OP3)
bad_values("placement", ("device_of", 3), "device", integer=True)
case("placement", "device-2pow31", m_set(("device_of", 3), 2 ** 31), "error", ["device_of[3]"])
case("placement", "device-minus-zero", m_set(("device_of", 3), NEG_ZERO), "ok")
case("placement", "device-float-integral", m_set(("device_of", 3), 1.0), "ok")
case("placement", "device-name", m_set(("device_of", 3), "gpu1"), "error", ["device_of[3]"])
case("placement", "device-nested", m_set(("device_of", 3), [[1]]), "error", ["device_of[3]"])
case("placement", "device-of-deep", m_set(("device_of",), DEEP), "error", [])
case("placement", "graph-number", m_set(("graph",), 5), "error", ["graph"])
case("placement", "graph-other-name", m_set(("graph",), "resnet50"), "ok")
case("placement", "cluster-null", m_set(("cluster",), None), "error", ["cluster"])
case("placement", "dup-key-device-of", m_dup((), "device_of"), "error", ["device_of"])
case("placement_maxload", "device-of-short", m_fn(lambda d: d["device_of"].pop()), "error", LENGTH)
case("placement_maxload", "device-out-of-range", m_set(("device_of", 0), 7), "error",
     ['device_of[0]|op "layer0/op0"'])
case("placement_maxload", "device-negative", m_set(("device_of", 0), -1), "error", ["device_of[0]"])

# --- profile (simulate --profile) ------------------------------------------------------------------
header_cases("profile", "placelab.profile")
case("profile", "entries-missing", m_del(("entries",)), "error", ["entries"])
case("profile", "entries-object", m_set(("entries",), {}), "error", ["entries"])
case("profile", "entries-empty", m_set(("entries",), []), "ok")
case("profile", "entry-not-object", m_set(("entries", 0), 0.5), "error", ["entries[0]"])
bad_values("profile", ("entries", 0, "time_s"), "time", skip=("2pow64",))
case("profile", "time-zero", m_set(("entries", 0, "time_s"), 0), "ok")
case("profile", "time-missing", m_del(("entries", 0, "time_s")), "error", ["entries[0]", "time_s"])
case("profile", "device-kind-missing", m_del(("entries", 0, "device_kind")), "error", ["entries[0]", "device_kind"])
case("profile", "device-kind-number", m_set(("entries", 0, "device_kind"), 100), "error", ["entries[0].device_kind"])
case("profile", "entry-neither-op-nor-type", m_del(("entries", 0, "op_type")), "error", ["entries[0]"])
case("profile", "entry-both-op-and-type", m_set(("entries", 0, "op"), "layer0/op1"), "error", ["entries[0]"])
case("profile", "entry-repeated", m_fn(lambda d: d["entries"].append(dict(d["entries"][0], time_s=0.002))),
     "error", ["entries[2]"])
case("profile", "entry-unknown-field", m_set(("entries", 0, "units"), "ms"), "error", ["entries[0]", "units"])
case("profile", "entry-dup-key", m_dup(("entries", 0), "time_s"), "error", ["entries[0].time_s"])
case("profile", "entry-unused-kind", m_set(("entries", 0, "device_kind"), "tpu"), "ok")

# --- replay plan (replay --plan) -------------------------------------------------------------------
header_cases("plan", "placelab.replay")
case("plan", "ops-missing", m_del(("ops",)), "error", ["ops"])
case("plan", "devices-missing", m_del(("devices",)), "error", ["devices"])
case("plan", "devices-empty", m_set(("devices",), []), "error", ["devices"])
case("plan", "device-name-duplicate", m_set(("devices", 1, "name"), "cpu0"), "error", ["cpu0"])
case("plan", "device-name-empty", m_set(("devices", 0, "name"), ""), "error", ["devices[0]"])
case("plan", "device-ops-out-of-range", m_fn(lambda d: d["devices"][0]["ops"].append(99)), "error",
     ["devices[0]", "ops"])
case("plan", "device-ops-op-twice", m_fn(lambda d: d["devices"][0]["ops"].append(d["devices"][0]["ops"][0])),
     "error", ["devices[0]", "ops"])
case("plan", "device-ops-op-missing", m_fn(lambda d: d["devices"][0]["ops"].pop()), "error", [])
case("plan", "op-device-out-of-range", m_set(("ops", 0, "device"), 9), "error", ["ops[0]", "device"])
case("plan", "op-device-negative", m_set(("ops", 0, "device"), -1), "error", ["ops[0]", "device"])
case("plan", "op-device-2pow63", m_set(("ops", 0, "device"), HUGE_INT), "error", ["ops[0]", "device"])
case("plan", "op-kernel-unknown", m_set(("ops", 0, "kernel"), "tensor"), "error", ["ops[0].kernel"])
case("plan", "op-flops-negative", m_set(("ops", 0, "flops"), -1), "error", ["ops[0]", "flops"])
case("plan", "op-flops-nan", m_set(("ops", 0, "flops"), NAN), "error", [])
case("plan", "op-flops-over-2pow62", m_set(("ops", 0, "flops"), 1e19), "error", ["ops[0]", "flops"])
case("plan", "op-bytes-over-2pow62", m_set(("ops", 0, "bytes"), 1e300), "error", ["ops[0]", "bytes"])
case("plan", "op-after-self", m_fn(lambda d: d["ops"][0]["after_ops"].append(0)), "error", [])
case("plan", "op-after-out-of-range", m_fn(lambda d: d["ops"][0]["after_ops"].append(99)), "error",
     ["ops[0]", "after_ops"])
case("plan", "op-after-later-op-deadlock", m_fn(lambda d: d["ops"][0]["after_ops"].append(5)), "error", [])
case("plan", "op-after-transfer-out-of-range", m_fn(lambda d: d["ops"][0]["after_transfers"].append(7)), "error",
     ["ops[0]", "after_transfers"])
case("plan", "op-unknown-field", m_set(("ops", 0, "stream"), 1), "error", ["ops[0]", "stream"])
case("plan", "transfer-src-out-of-range", m_set(("transfers", 0, "src"), 5), "error", ["transfers[0]", "src|device 5"])
case("plan", "transfer-producer-out-of-range", m_set(("transfers", 0, "producer"), 60), "error",
     ["transfers[0]", "producer"])
case("plan", "transfer-bytes-negative", m_set(("transfers", 0, "bytes"), -1), "error", ["transfers[0].bytes"])
case("plan", "transfer-src-equals-dst", m_fn(lambda d: d["transfers"][0].update(dst=d["transfers"][0]["src"])),
     "error", ["transfers[0]"])

# --- checkpoint (place --placer gdp --options {"checkpoint": DIR}) ----------------------------------
header_cases("checkpoint", "placelab.checkpoint")
for key in ("policy", "options", "step", "learner", "trainer"):
    case("checkpoint", f"{key}-missing", m_del((key,)), "error", [key])
case("checkpoint", "policy-unknown", m_set(("policy",), "alphago"), "error", ["policy"])
case("checkpoint", "policy-empty", m_set(("policy",), ""), "error", ["policy"])
case("checkpoint", "policy-placeto", m_set(("policy",), "placeto"), "error", ["policy"])
case("checkpoint", "step-negative", m_set(("step",), -1), "error", ["step"])
case("checkpoint", "step-2pow63", m_set(("step",), HUGE_INT), "error", ["step"])
case("checkpoint", "options-array", m_set(("options",), []), "error", ["options"])
case("checkpoint", "options-hidden-zero", m_set(("options", "hidden"), 0), "error", ["hidden"])
case("checkpoint", "options-hidden-string", m_set(("options", "hidden"), "wide"), "error", ["hidden"])
case("checkpoint", "options-hidden-2pow63", m_set(("options", "hidden"), HUGE_INT), "error", ["hidden"])
case("checkpoint", "options-hidden-other-width", m_set(("options", "hidden"), 16), "error", ["learner"])
case("checkpoint", "options-unknown", m_set(("options", "dropout"), 0.1), "error", ["dropout"])
case("checkpoint", "learner-array", m_set(("learner",), []), "error", ["learner"])
case("checkpoint", "learner-unknown-field", m_set(("learner", "extra"), 1), "error", ["learner", "extra"])
# Placing from a checkpoint takes the RNG stream of --seed (learned_placer.cpp), so the saved `rng` is
# unused there: these are read by `train --resume` below.
case("checkpoint", "params-missing", m_del(("learner", "params")), "error", ["params"])
case("checkpoint", "params-empty", m_set(("learner", "params", "params"), []), "error", ["params"])
case("checkpoint", "param-shape-wrong", m_set(("learner", "params", "params", 0, "shape"), [32, 64]), "error",
     ["encoder.type.weight"])
case("checkpoint", "param-shape-negative", m_set(("learner", "params", "params", 0, "shape"), [-64, -32]), "error",
     ["encoder.type.weight"])
case("checkpoint", "param-shape-huge", m_set(("learner", "params", "params", 0, "shape"), [2 ** 62, 2 ** 62]),
     "error", ["encoder.type.weight"])
case("checkpoint", "param-data-short", m_fn(lambda d: d["learner"]["params"]["params"][0]["data"].pop()), "error",
     ["encoder.type.weight|params[0]"])
case("checkpoint", "param-data-string", m_set(("learner", "params", "params", 0, "data", 0), "x"), "error",
     ["params[0].data[0]"])
case("checkpoint", "param-data-nan", m_set(("learner", "params", "params", 0, "data", 0), NAN), "error", [])
case("checkpoint", "param-data-1e400", m_set(("learner", "params", "params", 0, "data", 0), OVER), "error", [])
case("checkpoint", "param-data-1e39", m_set(("learner", "params", "params", 0, "data", 0), 1e39), "error",
     ["params[0].data[0]"])  # finite as a double, infinite as the float it is stored in
case("checkpoint", "param-name-unknown", m_set(("learner", "params", "params", 0, "name"), "encoder.nope"), "error",
     ["encoder"])
case("checkpoint", "params-format-wrong", m_set(("learner", "params", "format"), "placelab.graph"), "error",
     ["params"])
case("checkpoint", "optimizer-moments-wrong", m_set(("learner", "optimizer", "m"), [[1.0]]), "error", ["optimizer"])
case("checkpoint", "optimizer-lr-nan", m_set(("learner", "optimizer", "lr"), NAN), "error", [])
case("checkpoint", "optimizer-steps-negative", m_set(("learner", "optimizer", "steps"), -5), "error", ["steps"])
case("checkpoint", "trainer-seed-negative", m_set(("trainer", "seed"), -1), "ok")   # placing reads the learner only
case("checkpoint", "dup-key-learner-rng", m_dup(("learner",), "rng"), "error", ["learner.rng"])

# --- checkpoint (train --resume --checkpoint DIR): the trainer's part too ----------------------------
case("checkpoint_resume", "learner-rng-number", m_set(("learner", "rng"), 42), "error", ["rng"])
# A damaged `rng` text: test_damaged_checkpoint_rng_error_shows_no_cpp_type.
case("checkpoint_resume", "step-string", m_set(("step",), "0"), "error", ["step"])
case("checkpoint_resume", "trainer-seed-negative", m_set(("trainer", "seed"), -1), "error", ["seed"])
case("checkpoint_resume", "trainer-seed-string", m_set(("trainer", "seed"), "1"), "error", ["seed"])
case("checkpoint_resume", "trainer-seed-2pow64", m_set(("trainer", "seed"), HUGER_INT), "error", ["seed"])
case("checkpoint_resume", "trainer-unknown-field", m_set(("trainer", "epochs"), 1), "error", ["trainer", "epochs"])
case("checkpoint_resume", "trainer-tasks-missing", m_del(("trainer", "tasks")), "error", ["tasks"])
case("checkpoint_resume", "trainer-tasks-empty", m_set(("trainer", "tasks"), []), "error", ["tasks"])
case("checkpoint_resume", "trainer-tasks-object", m_set(("trainer", "tasks"), {}), "error", ["tasks"])
case("checkpoint_resume", "trainer-simulations-negative", m_set(("trainer", "simulations"), -1), "error",
     ["simulations"])
case("checkpoint_resume", "trainer-wall-negative", m_set(("trainer", "wall_s"), -1), "error", ["wall_s"])
case("checkpoint_resume", "task-fingerprint-ops", m_set(("trainer", "tasks", 0, "fingerprint", "ops"), 7), "error",
     ["tasks[0]|fingerprint|ops"])
case("checkpoint_resume", "task-fingerprint-hash", m_set(("trainer", "tasks", 0, "fingerprint", "graph_hash"),
                                                         "0000000000000000"), "error", ["tasks[0]|graph"])
case("checkpoint_resume", "task-reward-objective", m_set(("trainer", "tasks", 0, "reward", "objective"), "speed"),
     "error", ["objective"])
case("checkpoint_resume", "task-best-step-2pow63", m_set(("trainer", "tasks", 0, "best_step"), HUGE_INT), "error",
     ["best_step"])
case("checkpoint_resume", "task-best-cost-string", m_set(("trainer", "tasks", 0, "best_cost_s"), "fast"), "error",
     ["best_cost_s"])
case("checkpoint_resume", "task-best-placement-wrong-length", m_set(("trainer", "tasks", 0, "best_placement"), [0]),
     "error", ["best_placement"])
case("checkpoint_resume", "task-best-placement-device-out-of-range",
     m_set(("trainer", "tasks", 0, "best_placement", 5), 9), "error", ["best_placement"])
case("checkpoint_resume", "task-best-step-after-step", m_set(("trainer", "tasks", 0, "best_step"), 5), "error",
     ["best_step"])
case("checkpoint_resume", "task-best-cost-negative", m_set(("trainer", "tasks", 0, "best_cost_s"), -1.0), "error",
     ["best_cost_s"])
case("checkpoint_resume", "step-beyond-log", m_set(("step",), 50), "error", ["log|step"])

# --- graph and cluster files that read well but cannot be simulated: the simulator names the op,
# device or link at fault (docs/simulator.md, "Limits") ---------------------------------------------
case("graph_sim", "measured-1e10", m_set(("ops", 0, "measured_s"), {"v100": 1e10}), "error", ['op "layer0/op0"'])
case("graph_sim", "flops-1e308", m_set(("ops", 0, "flops"), 1e308), "error", ['op "layer0/op0"'])
case("graph_sim", "edge-bytes-1e308", m_set(("edges", 1, "bytes"), 1e308), "error", ["bytes"])
case("graph_sim", "param-bytes-1e308", m_set(("ops", 0, "param_bytes"), 1e308), "error", ["bytes"])
case("graph_sim", "pinned-kind-absent", m_set(("ops", 0, "pinned_kind"), "tpu"), "error", ['"layer0/op0"', "tpu"])
case("cluster_sim", "launch-1e10", m_set(("devices", 0, "launch_overhead_s"), 1e10), "error", ['"gpu0"'])
case("cluster_sim", "latency-1e10", m_set(("links", 0, "latency_s"), 1e10), "error", ['"gpu0"', '"gpu1"'])
case("cluster_sim", "busy-after-1e10", m_set(("links", 0, "busy_after_s"), 1e10), "error", ['"nvlink0-1"'])
case("cluster_sim", "gap-1e10", m_set(("devices", 0, "gap_after_op_s"), 1e10), "error", ['"gpu0"'])
case("cluster_sim", "peak-1e-300", m_set(("devices", 0, "peak_flops_per_s"), 1e-300), "error", ['"gpu0"'])
case("cluster_sim", "bandwidth-1e-300", m_set(("links", 0, "bandwidth_bytes_per_s"), 1e-300), "error", ['"gpu1"'])
case("cluster_sim", "memory-zero-is-oom", m_set(("devices", 0, "memory_bytes"), 0), "ok")
case("checkpoint_resume", "task-unknown-field", m_set(("trainer", "tasks", 0, "notes"), ""), "error",
     ["tasks[0]", "notes"])


# --- raw bytes and the file system, for every kind -------------------------------------------------
def t_const(data):
    return lambda raw: data


def t_truncate(fraction):
    """The first `fraction` of the document (trailing white space is not part of it)."""
    return lambda raw: raw.rstrip()[:int(len(raw.rstrip()) * fraction)]


def t_flip(seed, flips):
    def apply(raw):
        rng = random.Random(seed)
        b = bytearray(raw)
        for _ in range(flips):
            i = rng.randrange(len(b))
            b[i] = rng.choice([b[i] ^ (1 << rng.randrange(8)), rng.randrange(256)])
        return bytes(b)
    return apply


def t_insert(data, fraction):
    def apply(raw):
        i = int(len(raw) * fraction)
        return raw[:i] + data + raw[i:]
    return apply


def t_replace_first(old, new):
    return lambda raw: raw.replace(old, new, 1)


TEXT_CASES = [
    ("empty", t_const(b""), "error"),
    ("whitespace", t_const(b" \n\t \n"), "error"),
    ("null", t_const(b"null"), "error"),
    ("array", t_const(b"[]"), "error"),
    ("number", t_const(b"42"), "error"),
    ("string", t_const(b'"placelab"'), "error"),
    ("empty-object", t_const(b"{}"), "error"),
    ("nul-bytes", t_const(b"\0" * 64), "error"),
    ("binary-garbage", t_const(bytes(random.Random(7).randrange(256) for _ in range(512))), "error"),
    ("not-utf8-top", lambda raw: b"\xff\xfe" + raw, "error"),
    ("deep-array", t_const(b"[" * 100_000 + b"]" * 100_000), "error"),
    ("deep-array-unclosed", t_const(b"[" * 100_000), "error"),
    ("deep-object", t_const(b'{"a":' * 100_000 + b"1" + b"}" * 100_000), "error"),
    ("trailing-garbage", lambda raw: raw + b" x", "error"),
    ("two-documents", lambda raw: raw + raw, "error"),
    ("trailing-comma", lambda raw: raw.rstrip()[:-1] + b",}", "error"),
    ("comment", lambda raw: b"// a comment\n" + raw, "error"),
    ("utf8-bom", lambda raw: b"\xef\xbb\xbf" + raw, "either"),
    ("nul-inside", t_insert(b"\0", 0.5), "error"),
]
for frac in (0.001, 0.1, 0.37, 0.5, 0.73, 0.999):
    TEXT_CASES.append((f"truncate-{frac:g}", t_truncate(frac), "error"))
for seed in range(6):
    TEXT_CASES.append((f"flip-seed{seed}", t_flip(1000 + seed, 1 + seed % 3), "either"))

TEXT_KINDS = ("graph", "cluster", "placement", "profile", "plan", "checkpoint", "checkpoint_resume")
for kind in TEXT_KINDS:
    for cid, fn, expect in TEXT_CASES:
        if kind.startswith("checkpoint") and cid.startswith("flip"):
            continue  # mostly lands in parameter values: valid floats
        CASES.append(pytest.param(kind, ("text", fn), expect, (), id=f"{kind}-{cid}"))
    CASES.append(pytest.param(kind, ("fs", "missing"), "error", (), id=f"{kind}-missing-file"))
    CASES.append(pytest.param(kind, ("fs", "directory"), "error", (), id=f"{kind}-directory"))


# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, mutation, expect, mentions", CASES)
def test_malformed_input(base, tmp_path, kind, mutation, expect, mentions):
    raw = base["docs"][BASE_OF.get(kind, kind)]
    checkpoint = kind.startswith("checkpoint")
    folder = tmp_path / "ck" if checkpoint else tmp_path
    folder.mkdir(exist_ok=True)
    if kind == "checkpoint_resume":
        (folder / "log.jsonl").write_bytes(base["log"])
    file = str(folder / ("checkpoint.json" if checkpoint else f"bad-{kind}.json"))
    if isinstance(mutation, tuple) and mutation[0] == "fs":
        if mutation[1] == "directory":
            os.mkdir(file)
        data = None
    elif isinstance(mutation, tuple) and mutation[0] == "text":
        data = mutation[1](raw)
    else:
        data = to_bytes(dump(mutation(json.loads(raw))))
    if data is not None:
        with open(file, "wb") as f:
            f.write(data)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = str(out_dir / "result.json")
    with open(out, "w") as f:
        f.write(SENTINEL)
    args = command(kind, base, file, out)
    if kind in ("placement_maxload", "checkpoint_resume"):
        out = None
    proc = run(args)
    names = [os.path.basename(file)]
    if kind.endswith("_sim"):
        names += ["placelab: error: simulator: ", os.path.basename(base["p"])]
    if checkpoint:
        names.append(str(folder))
    if expect == "ok":
        check_ok(args, proc)
    elif expect == "error":
        check_error(args, proc, names, mentions, out)
    else:
        check_no_crash(args, proc)
        if proc.returncode == 0:
            doc = strict_json(data.lstrip(b"\xef\xbb\xbf")) if data is not None else None
            assert doc is not None, "accepted a file that is not strict JSON: " + describe(args, proc)
            unknown = keys_of(doc) - keys_of(json.loads(raw))
            assert not unknown, f"accepted unknown fields {sorted(unknown)}: " + describe(args, proc)
        else:
            check_error(args, proc, names, mentions, out)
    if kind == "checkpoint_resume" and proc.returncode != 0 and data is not None:
        with open(file, "rb") as f:
            assert f.read() == data, "a failed resume changed the checkpoint: " + describe(args, proc)


# ---------------------------------------------------------------------------------------------------
# Findings: each breaks the promise in its own way and fails until the program is fixed.

def write_bytes(path, data):
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def error_line(proc):
    return proc.stderr.decode("utf-8", "replace").rstrip("\n").split("\n")[-1]


def test_damaged_checkpoint_rng_error_shows_no_cpp_type(base, tmp_path):
    """A checkpoint whose `learner.rng` text is cut short: the resume error names the field and what it must
    hold (it used to say `rng state is not a std::mt19937_64 state`, a C++ type name)."""
    ck = tmp_path / "ck"
    ck.mkdir()
    doc = json.loads(base["docs"]["checkpoint"])
    doc["learner"]["rng"] = " ".join(doc["learner"]["rng"].split()[:5])
    write_bytes(ck / "checkpoint.json", json.dumps(doc).encode())
    (ck / "log.jsonl").write_bytes(base["log"])
    args = ["train", "--graphs", base["g"], "--cluster", base["c"], "--checkpoint", str(ck), "--resume", "--steps", "0"]
    proc = run(args)
    check_error(args, proc, [str(ck)], ["rng"], None)


@pytest.mark.parametrize("kind, make", [
    # a checkpoint cut inside its 6 KB `rng` string (the fuzz case checkpoint-truncate-0.999)
    ("checkpoint", lambda raw: raw[:raw.index(b'"', raw.index(b'"', raw.index(b'"rng"') + 5) + 1) - 1]),
    # a number of 100,000 digits
    ("graph", lambda raw: raw.replace(b'"version": 1', b'"version": ' + b"1" * 100_000, 1)),
], ids=["truncated-inside-checkpoint-rng", "number-of-100k-digits"])
def test_parse_error_does_not_quote_a_whole_long_token(base, tmp_path, kind, make):
    """The JSON reader's message quotes the token it was reading (`last read: '...'`, `number overflow
    parsing '...'`): only its start, or the line would run to kilobytes or megabytes (as it used to),
    the place and the fix lost in it."""
    folder = tmp_path / "ck"
    folder.mkdir()
    file = write_bytes(folder / ("checkpoint.json" if kind == "checkpoint" else "g.json"), make(base["docs"][kind]))
    args = command(kind, base, file, str(tmp_path / "out.json"))
    proc = run(args)
    check_no_crash(args, proc)
    assert proc.returncode == 1
    line = error_line(proc)
    assert len(line) <= MAX_ERROR_LINE, f"error line of {len(line)} characters: {line[:300]}...{line[-200:]}"


def test_number_overflow_error_names_its_position(base, tmp_path):
    """`1e400` (beyond a double) in a graph: the message gives its line and column, like every other syntax
    error (it used to give neither: in a 50k-op graph the reader had to search for the token)."""
    doc = json.loads(base["docs"]["graph"])
    doc["ops"][3]["flops"] = OVER
    file = write_bytes(tmp_path / "g.json", to_bytes(dump(doc)))
    args = ["graph", "--file", file]
    proc = run(args)
    check_error(args, proc, ["g.json"], ["line|ops[3].flops"], None)


def test_placement_splitting_a_colocation_class_is_simulated_as_given(base, tmp_path):
    """docs/formats.md and docs/simulator.md: placers keep a colocation class on one device, but the
    simulator does not enforce it: a placement file that splits a class is simulated as given (unlike a
    pinned op off its kind, which is refused)."""
    doc = json.loads(base["docs"]["graph"])
    doc["ops"][0]["colocation"] = 1
    doc["ops"][1]["colocation"] = 1
    g = write_bytes(tmp_path / "g.json", json.dumps(doc).encode())
    placement = json.loads(base["docs"]["placement"])
    assert placement["device_of"][0] != placement["device_of"][1]
    proc = run(["simulate", "--graph", g, "--cluster", base["c"], "--placement", base["p"], "--json"])
    check_no_crash(["simulate"], proc)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["step_time_s"] > 0