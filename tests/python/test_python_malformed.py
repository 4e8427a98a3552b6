# Malformed-input fuzzing of the Python API against the promise of docs/python.md:
#   "Bad input of any kind raises ValueError with the core's one-line message (which names the file,
#    JSON path, op or option at fault); wrong Python types raise TypeError ... Neither crashes the
#    interpreter."
#
# Approach. Every case is a short snippet of Python source run against a fixed environment (a 12-op
# random DAG, the cpu-gpu-2 preset, their simulator, a placement, the documents of the graph, cluster
# and a profile, a scratch folder and a set of hostile values: None, NaN, 2**64, lone surrogates, NUL
# bytes, numpy arrays of odd dtypes and shapes, objects whose __len__/__iter__/__index__/__float__
# raise, 100000-deep dicts, ...). The cases are explicit lists built here from fixed tables, so the run
# is deterministic (every seed is a literal). They run in batches, each batch in a CHILD interpreter
# (/usr/bin/python3 with PYTHONPATH=python) that reports one JSON line per finished case; a child
# that dies by a signal, exits or hangs marks the case it was running as a crash or a hang, and the
# batch goes on in a fresh child from the next case. A case passes when it returns or raises
# ValueError or TypeError (or Boom, the test's own exception raised by a hostile object, which may
# propagate as itself) with a non-empty message that leaks no C++ internals ("std::", "nlohmann",
# "basic_string", "terminate", "Unable to convert function return value", ...); a ValueError's
# message must be one line. Cases marked "raise" must not succeed (NaN amounts, devices out of range,
# ...), and some cases assert a result (a non-contiguous or big-endian placement simulates like the
# plain one). The sweep tests below hold the cases that pass today; every real problem found is its
# own named test, which fails until the problem is fixed.
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "/usr/bin/python3"
LEAKS = ("std::", "basic_string", "nlohmann", "terminate", "Unable to convert function return value",
         "__cxa", "St9", "what():", "pybind11::", "[json.exception")

SETUP = r'''
import json, math, os, sys, tempfile, pathlib, collections, types, warnings
import numpy as np
import placelab as pl
warnings.simplefilter("ignore")

class Boom(Exception):
    pass

G = pl.make_model("random_dag", {"ops": 12, "width": 3, "seed": 1})
C = pl.make_preset("cpu-gpu-2")
SIM = pl.Simulator(G, C)
N = G.num_ops
D = C.num_devices
P = SIM.random_placement(seed=0)
GD = G.to_dict()
CD = C.to_dict()
PD = {"format": "placelab.profile", "version": 1, "entries": [
    {"device_kind": "v100", "op_type": "MatMul", "time_s": 0.5},
    {"device_kind": "cpu", "op": "layer0/op0", "time_s": 0.1}]}
TMP = os.environ["PLACELAB_MALFORMED_TMP"]  # made and removed by the parent, whatever becomes of this child
BASE = SIM.simulate(P)["step_time_s"]

class BadLen:
    def __len__(self): raise Boom("len")
    def __iter__(self): return iter([0] * N)
    def __getitem__(self, i): return 0
class BadIter:
    def __len__(self): return N
    def __iter__(self): raise Boom("iter")
    def __getitem__(self, i): raise Boom("getitem")
class BadIndex:
    def __index__(self): raise Boom("index")
    def __int__(self): raise Boom("int")
    def __float__(self): raise Boom("float")
class BadFloat:
    def __float__(self): raise Boom("float")
class BadKeys(dict):
    def keys(self): raise Boom("keys")
    def items(self): raise Boom("items")
    def __iter__(self): raise Boom("iter")
class SubDict(dict):
    pass
class BadPath:
    def __fspath__(self): raise Boom("fspath")

def deep(n, leaf=1):
    d = leaf
    for _ in range(n):
        d = {"a": d}
    return d

def deep_list(n):
    d = []
    for _ in range(n):
        d = [d]
    return d

def cp(doc):
    return json.loads(json.dumps(doc))

def at(doc, path, val):
    doc = cp(doc)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = val
    return doc

def drop(doc, path):
    doc = cp(doc)
    node = doc
    for k in path[:-1]:
        node = node[k]
    node.pop(path[-1], None) if isinstance(node, dict) else node.pop(path[-1])
    return doc

def write(name, text, mode="w"):
    p = os.path.join(TMP, name)
    with open(p, mode) as f:
        f.write(text)
    return p

BAD = {
    "none": None, "true": True, "false": False, "zero": 0, "float": 1.5, "neg1": -1, "negzero": -0.0,
    "nan": float("nan"), "inf": float("inf"), "ninf": float("-inf"), "big_float": 1e308,
    "int2_63": 2**63, "int2_64": 2**64, "int_neg2_63m1": -2**63 - 1, "int10_30": 10**30,
    "empty_str": "", "long_str": "x" * 100000, "nul_str": "a\x00b", "surrogate": "\ud800",
    "str_num": "3", "bytes": b"x", "list": [], "nested_list": [[[1]]], "dict": {}, "dict_intkey": {1: 2},
    "np_nan": np.float64("nan"), "np_int64": np.int64(3), "np_uint64_max": np.uint64(2**64 - 1),
    "np_arr": np.arange(3), "np_f16": np.float16(2), "np_0d": np.array(2.0), "complex": 1 + 2j,
    "bad_index": BadIndex(), "bad_float": BadFloat(), "bad_len": BadLen(), "deep_dict": deep(100000),
    "deep_list": deep_list(100000), "object": object(),
}
'''

CHILD = SETUP + r'''
ENV = dict(globals())
cases = json.loads(sys.stdin.read())
for cid, code in cases:
    try:
        exec(code, dict(ENV))
        r = {"id": cid, "outcome": "ok"}
    except BaseException as e:
        try:
            msg = str(e)
        except BaseException as e2:
            msg = "<str() raised %s>" % type(e2).__name__
        r = {"id": cid, "outcome": "exc", "type": type(e).__name__,
             "mro": [c.__name__ for c in type(e).__mro__], "msg": msg[:3000]}
    sys.stdout.write("@@" + json.dumps(r) + "\n")
    sys.stdout.flush()
'''

BAD_NAMES = ["none", "true", "false", "zero", "float", "neg1", "negzero", "nan", "inf", "ninf", "big_float",
             "int2_63", "int2_64", "int_neg2_63m1", "int10_30", "empty_str", "long_str", "nul_str",
             "surrogate", "str_num", "bytes", "list", "nested_list", "dict", "dict_intkey", "np_nan",
             "np_int64", "np_uint64_max", "np_arr", "np_f16", "np_0d", "complex", "bad_index", "bad_float",
             "bad_len", "deep_dict", "deep_list", "object"]
NONFINITE = ["nan", "inf", "ninf", "np_nan"]
INT_TOO_BIG = ["int2_63", "int2_64", "int10_30", "int_neg2_63m1", "np_uint64_max"]


def run_cases(cases, timeout=30.0):
    """Runs (id, code, ...) cases in child interpreters; returns {id: result dict}."""
    with tempfile.TemporaryDirectory(prefix="placelab-malformed-") as tmp:
        env = dict(os.environ, PYTHONPATH=str(ROOT / "python"), MPLBACKEND="Agg", OMP_NUM_THREADS="1",
                   PLACELAB_MALFORMED_TMP=tmp)
        return run_children(cases, timeout, env)


def run_children(cases, timeout, env):
    results, remaining = {}, list(cases)
    while remaining:
        payload = json.dumps([[c[0], c[1]] for c in remaining])
        timed_out, rc, err = False, None, ""
        try:
            proc = subprocess.run([PYTHON, "-c", CHILD], input=payload.encode(), capture_output=True,
                                  timeout=timeout, env=env, cwd=ROOT)
            out, rc, err = proc.stdout, proc.returncode, proc.stderr
        except subprocess.TimeoutExpired as e:
            out, err, timed_out = e.stdout or b"", e.stderr or b"", True
        out = out.decode("utf-8", "replace") if isinstance(out, bytes) else out
        err = err.decode("utf-8", "replace") if isinstance(err, bytes) else err
        done = [json.loads(line[2:]) for line in out.splitlines() if line.startswith("@@")]
        for r in done:
            results[r["id"]] = r
        if len(done) < len(remaining):
            cid = remaining[len(done)][0]
            if timed_out:
                results[cid] = {"id": cid, "outcome": "hang", "msg": f"no answer within {timeout} s"}
            else:
                results[cid] = {"id": cid, "outcome": "crash", "rc": rc, "msg": err[-600:]}
            remaining = remaining[len(done) + 1:]
        else:
            remaining = []
    return results


def problem(case, r):
    """None when the result keeps the promise, else a one-line description."""
    cid, code, expect = case[0], case[1], case[2]
    needle = case[3] if len(case) > 3 else None
    if r["outcome"] in ("crash", "hang"):
        return f"{cid}: {r['outcome']} (rc {r.get('rc')}): {code!r}: {r['msg'][-300:]!r}"
    if r["outcome"] == "ok":
        return f"{cid}: succeeded but must raise: {code!r}" if expect == "raise" else None
    kind, msg, mro = r["type"], r["msg"], r["mro"]
    if kind == "Boom":
        return None
    if "ValueError" not in mro and "TypeError" not in mro:
        return f"{cid}: raised {kind} (not ValueError/TypeError): {code!r}: {msg[:300]!r}"
    if not msg.strip():
        return f"{cid}: {kind} with an empty message: {code!r}"
    if kind == "ValueError" and "\n" in msg.strip():
        return f"{cid}: ValueError message is not one line: {code!r}: {msg[:300]!r}"
    leaked = [t for t in LEAKS if t in msg]
    if leaked:
        return f"{cid}: message leaks {leaked}: {code!r}: {msg[:300]!r}"
    if needle and needle not in msg:
        return f"{cid}: message does not name {needle!r}: {code!r}: {msg[:300]!r}"
    return None


def check(cases, timeout=30.0):
    results = run_cases(cases, timeout)
    bad = [p for c in cases if (p := problem(c, results[c[0]]))]
    assert not bad, f"{len(bad)} of {len(cases)} cases break the promise:\n" + "\n".join(bad)


# ----------------------------------------------------------------------------------------------------
# Case tables. Each case: (id, code, expect[, needle]); expect "any" (may succeed) or "raise".

def _path_id(path):
    return ".".join(str(p) for p in path)


def dict_sweep(prefix, call, doc, paths, numeric, integer=()):
    """Every path of `doc` set to every hostile value, and dropped."""
    cases = []
    for path in paths:
        for b in BAD_NAMES:
            expect = "raise" if (path in numeric and b in NONFINITE) or (path in integer and b in INT_TOO_BIG) else "any"
            cases.append((f"{prefix}-{_path_id(path)}-{b}", call.format(f"at({doc}, {path!r}, BAD[{b!r}])"), expect))
        cases.append((f"{prefix}-{_path_id(path)}-dropped", call.format(f"drop({doc}, {path!r})"), "any"))
    return cases


GRAPH_PATHS = [("format",), ("version",), ("name",), ("ops",), ("edges",), ("ops", 0), ("ops", 0, "name"),
               ("ops", 3, "type"), ("ops", 3, "phase"), ("ops", 3, "flops"), ("ops", 3, "bytes_read"),
               ("ops", 3, "output_bytes"), ("ops", 3, "param_bytes"), ("ops", 3, "temp_bytes"),
               ("ops", 3, "colocation"), ("ops", 3, "layer"), ("ops", 3, "pinned_kind"), ("ops", 3, "measured_s"),
               ("edges", 0), ("edges", 0, "src"), ("edges", 0, "dst"), ("edges", 0, "bytes"), ("edges", 0, "comm_s")]
GRAPH_INTEGER = {("version",), ("ops", 3, "colocation"), ("ops", 3, "layer"), ("edges", 0, "src"), ("edges", 0, "dst")}
GRAPH_NUMERIC = {("version",), ("ops", 3, "flops"), ("ops", 3, "bytes_read"), ("ops", 3, "output_bytes"),
                 ("ops", 3, "param_bytes"), ("ops", 3, "temp_bytes"), ("edges", 0, "bytes"), ("edges", 0, "comm_s")}
CLUSTER_PATHS = [("format",), ("version",), ("name",), ("transfer_mode",), ("devices",), ("links",),
                 ("devices", 0), ("devices", 1, "name"), ("devices", 1, "kind"), ("devices", 1, "peak_flops_per_s"),
                 ("devices", 1, "memory_bytes"), ("devices", 1, "memory_bandwidth_bytes_per_s"),
                 ("devices", 1, "efficiency"), ("devices", 1, "launch_overhead_s"), ("devices", 1, "gap_after_op_s"),
                 ("links", 0), ("links", 0, "name"), ("links", 0, "ends"), ("links", 0, "ends", 0),
                 ("links", 0, "bandwidth_bytes_per_s"), ("links", 0, "latency_s"), ("links", 0, "duplex"),
                 ("links", 0, "busy_after_s")]
CLUSTER_NUMERIC = {("version",), ("devices", 1, "peak_flops_per_s"), ("devices", 1, "memory_bytes"),
                   ("devices", 1, "memory_bandwidth_bytes_per_s"), ("devices", 1, "efficiency"),
                   ("devices", 1, "launch_overhead_s"), ("devices", 1, "gap_after_op_s"),
                   ("links", 0, "bandwidth_bytes_per_s"), ("links", 0, "latency_s"), ("links", 0, "busy_after_s")}
PROFILE_PATHS = [("format",), ("version",), ("entries",), ("entries", 0), ("entries", 0, "device_kind"),
                 ("entries", 0, "op_type"), ("entries", 0, "time_s"), ("entries", 1, "op")]
PROFILE_NUMERIC = {("version",), ("entries", 0, "time_s")}

WHOLE = ["None", "[]", "'x'", "b'x'", "5", "1.5", "{}", "{1: 2}", "{None: 1}", "{(1, 2): 3}", "BadKeys(GD)",
         "SubDict(GD)", "collections.OrderedDict(GD)", "types.MappingProxyType(GD)", "deep(100000)", "[GD]",
         "np.array(GD)", "BAD['bad_len']", "object()"]


def graph_dict_cases():
    call = "pl.graph_from_dict({})"
    cases = dict_sweep("graph", call, "GD", GRAPH_PATHS, GRAPH_NUMERIC, GRAPH_INTEGER)
    cases += [(f"graph-whole-{i}", call.format(w), "any") for i, w in enumerate(WHOLE)]
    cases += [
        ("graph-unknown-top", "pl.graph_from_dict(at(GD, ('zzz',), 1))", "raise", "zzz"),
        ("graph-unknown-op", "pl.graph_from_dict(at(GD, ('ops', 2, 'zzz'), 1))", "raise", "zzz"),
        ("graph-unknown-edge", "pl.graph_from_dict(at(GD, ('edges', 1, 'zzz'), 1))", "raise", "zzz"),
        ("graph-intkey-top", "d = cp(GD)\nd[1] = 2\npl.graph_from_dict(d)", "raise"),
        ("graph-intkey-op", "d = cp(GD)\nd['ops'][0][7] = 2\npl.graph_from_dict(d)", "raise"),
        ("graph-nonekey-op", "d = cp(GD)\nd['ops'][0][None] = 2\npl.graph_from_dict(d)", "raise"),
        ("graph-negative-flops", "pl.graph_from_dict(at(GD, ('ops', 3, 'flops'), -2))", "raise", "ops[3].flops"),
        ("graph-edge-src-out-of-range", "pl.graph_from_dict(at(GD, ('edges', 0, 'src'), 99))", "raise"),
        ("graph-edge-src-negative", "pl.graph_from_dict(at(GD, ('edges', 0, 'src'), -1))", "raise"),
        ("graph-edge-src-unknown-name", "pl.graph_from_dict(at(GD, ('edges', 0, 'src'), 'nope'))", "raise"),
        ("graph-edge-self", "pl.graph_from_dict(at(GD, ('edges', 0, 'dst'), GD['edges'][0]['src']))", "raise"),
        ("graph-edge-dup", "d = cp(GD)\nd['edges'].append(d['edges'][0])\npl.graph_from_dict(d)", "raise"),
        ("graph-cycle", "d = cp(GD)\nd['edges'].append({'src': 3, 'dst': 1})\npl.graph_from_dict(d)", "raise"),
        ("graph-dup-name", "pl.graph_from_dict(at(GD, ('ops', 1, 'name'), GD['ops'][0]['name']))", "raise"),
        ("graph-ops-empty", "pl.graph_from_dict(at(GD, ('ops',), []))", "raise"),
        ("graph-phase-bad", "pl.graph_from_dict(at(GD, ('ops', 3, 'phase'), 'sideways'))", "raise"),
        ("graph-measured-nan", "pl.graph_from_dict(at(GD, ('ops', 3, 'measured_s'), {'v100': float('nan')}))", "raise"),
        ("graph-measured-intkey", "pl.graph_from_dict(at(GD, ('ops', 3, 'measured_s'), {1: 0.5}))", "raise"),
        ("graph-version-2", "pl.graph_from_dict(at(GD, ('version',), 2))", "raise", "version"),
        ("graph-flops-total-overflow",
         "d = cp(GD)\nfor o in d['ops']: o['flops'] = 1e308\npl.graph_from_dict(d)", "raise"),
        ("graph-many-ops", "d = cp(GD)\nd['ops'] = [{'name': str(i)} for i in range(100000)]\nd['edges'] = []\n"
                           "pl.graph_from_dict(d)", "any"),
    ]
    for i, o in enumerate(["None", "''", "'\\ud800'", "'a\\x00b'", "5", "b'x'", "'x' * 100000"]):
        cases.append((f"graph-origin-{i}", f"pl.graph_from_dict(at(GD, ('ops', 3, 'flops'), -1), {o})", "raise"))
    return cases


def cluster_dict_cases():
    call = "pl.cluster_from_dict({})"
    cases = dict_sweep("cluster", call, "CD", CLUSTER_PATHS, CLUSTER_NUMERIC, {("version",)})
    cases += [(f"cluster-whole-{i}", call.format(w.replace("GD", "CD")), "any") for i, w in enumerate(WHOLE)]
    cases += [
        ("cluster-unknown-top", "pl.cluster_from_dict(at(CD, ('zzz',), 1))", "raise", "zzz"),
        ("cluster-unknown-device", "pl.cluster_from_dict(at(CD, ('devices', 0, 'zzz'), 1))", "raise", "zzz"),
        ("cluster-ends-unknown", "pl.cluster_from_dict(at(CD, ('links', 0, 'ends'), ['cpu0', 'nowhere']))", "any"),
        ("cluster-ends-three", "pl.cluster_from_dict(at(CD, ('links', 0, 'ends'), ['a', 'b', 'c']))", "raise"),
        ("cluster-ends-self", "pl.cluster_from_dict(at(CD, ('links', 0, 'ends'), ['cpu0', 'cpu0']))", "raise"),
        ("cluster-dup-device", "d = cp(CD)\nd['devices'].append(d['devices'][0])\npl.cluster_from_dict(d)", "raise"),
        ("cluster-no-devices", "pl.cluster_from_dict(at(CD, ('devices',), []))", "raise"),
        ("cluster-no-links", "pl.cluster_from_dict(at(CD, ('links',), []))", "any"),
        ("cluster-bad-priority", "pl.cluster_from_dict(at(CD, ('priority',), 'lifo'))", "raise", "priority"),
        ("cluster-priority-number", "pl.cluster_from_dict(at(CD, ('priority',), 3))", "raise", "priority"),
        ("cluster-clock-zero", "pl.cluster_from_dict(at(CD, ('clock_unit_s',), 0))", "raise", "clock_unit_s"),
        ("cluster-clock-minute", "pl.cluster_from_dict(at(CD, ('clock_unit_s',), 60))", "raise", "clock_unit_s"),
        ("cluster-bandwidth-zero", "pl.cluster_from_dict(at(CD, ('links', 0, 'bandwidth_bytes_per_s'), 0))", "raise"),
        ("cluster-efficiency-2", "pl.cluster_from_dict(at(CD, ('devices', 1, 'efficiency'), 2.0))", "any"),
        ("cluster-flops-zero", "pl.cluster_from_dict(at(CD, ('devices', 1, 'peak_flops_per_s'), 0))", "raise"),
        ("cluster-many-devices", "d = cp(CD)\nd['devices'] = [dict(CD['devices'][1], name='g%d' % i) for i in range(3000)]\n"
                                 "d['links'] = []\npl.cluster_from_dict(d)", "any"),
    ]
    return cases


def profile_cases():
    call = "pl.Simulator(G, C, profile={})"
    cases = dict_sweep("profile", call, "PD", PROFILE_PATHS, PROFILE_NUMERIC, {("version",)})
    cases += [(f"profile-whole-{i}", call.format(w.replace("GD", "PD")), "any") for i, w in enumerate(WHOLE)]
    cases += [
        ("profile-both-op-and-type", "pl.Simulator(G, C, profile=at(PD, ('entries', 0, 'op'), 'layer0/op1'))", "raise"),
        ("profile-neither", "pl.Simulator(G, C, profile=drop(PD, ('entries', 0, 'op_type')))", "raise"),
        ("profile-dup-entry", "d = cp(PD)\nd['entries'].append(d['entries'][0])\npl.Simulator(G, C, profile=d)", "raise"),
        ("profile-huge-time", "pl.Simulator(G, C, profile=at(PD, ('entries', 1, 'time_s'), 1e12))", "raise"),
        ("profile-path-missing", "pl.Simulator(G, C, profile=TMP + '/missing.json')", "raise"),
        ("profile-path-dir", "pl.Simulator(G, C, profile=TMP)", "raise"),
        ("profile-path-garbage", "pl.Simulator(G, C, profile=write('garbage.json', '{{{'))", "raise"),
        ("profile-path-pathlib", "pl.Simulator(G, C, profile=pathlib.Path(TMP) / 'missing.json')", "raise"),
        ("profile-path-nul", "pl.Simulator(G, C, profile='a\\x00b.json')", "raise"),
        ("profile-path-surrogate", "pl.Simulator(G, C, profile='\\ud800.json')", "raise"),
        ("profile-path-empty", "pl.Simulator(G, C, profile='')", "raise"),
        ("profile-path-bytes", "pl.Simulator(G, C, profile=b'x.json')", "any"),
        ("profile-path-badfspath", "pl.Simulator(G, C, profile=BadPath())", "any"),
    ]
    return cases


def simulator_options_cases():
    cases = []
    for key in ["priority", "share_bandwidth", "use_measured", "use_edge_comm"]:
        for b in BAD_NAMES:
            cases.append((f"simopt-{key}-{b}", f"pl.Simulator(G, C, {{{key!r}: BAD[{b!r}]}})", "any"))
    cases += [(f"simopt-whole-{i}", f"pl.Simulator(G, C, {w.replace('GD', '{}')})", "any") for i, w in enumerate(WHOLE)]
    cases += [
        ("simopt-unknown", "pl.Simulator(G, C, {'zzz': 1})", "raise", "zzz"),
        ("simopt-priority-bad", "pl.Simulator(G, C, {'priority': 'sideways'})", "raise", "priority"),
        ("simopt-share-int", "pl.Simulator(G, C, {'share_bandwidth': 2})", "any"),
        ("simopt-intkey", "pl.Simulator(G, C, {1: True})", "raise"),
        ("sim-graph-none", "pl.Simulator(None, C)", "raise"),
        ("sim-cluster-none", "pl.Simulator(G, None)", "raise"),
        ("sim-graph-str", "pl.Simulator('resnet50', C)", "raise"),
        ("sim-swapped", "pl.Simulator(C, G)", "raise"),
        ("sim-graph-dict", "pl.Simulator(GD, C)", "raise"),
        ("sim-pinned-missing-kind",
         "pl.Simulator(pl.graph_from_dict(at(GD, ('ops', 3, 'pinned_kind'), 'tpu')), C)", "any"),
        ("sim-measured-huge",
         "pl.Simulator(pl.graph_from_dict(at(GD, ('ops', 3, 'measured_s'), {'v100': 1e300})), C)", "raise"),
        ("sim-flops-huge", "pl.Simulator(pl.graph_from_dict(at(GD, ('ops', 3, 'flops'), 1e300)), C)", "raise"),
    ]
    return cases


# Placements: (id, expression, expect). Documented: a non-array (None, str, dict, single number) is a
# TypeError; floats or out-of-range devices are a ValueError.
PLACEMENTS = [
    ("valid", "P", "any"), ("list", "P.tolist()", "any"), ("tuple", "tuple(P.tolist())", "any"),
    ("none", "None", "raise"), ("str", "'0' * N", "raise"), ("bytes", "bytes(N)", "any"),
    ("dict", "{i: 0 for i in range(N)}", "raise"), ("int", "3", "raise"), ("float", "3.0", "raise"),
    ("empty", "[]", "raise"), ("short", "P[:-1]", "raise"), ("long", "np.concatenate([P, [0]])", "raise"),
    ("huge", "np.zeros(10**6, np.int32)", "raise"), ("huge_float", "np.zeros(10**6)", "raise"),
    ("floats_int_valued", "P.astype(float)", "raise"), ("floats_half", "P + 0.5", "raise"),
    ("list_floats", "[0.0] * N", "raise"), ("float16", "P.astype(np.float16)", "raise"),
    ("complex", "P.astype(complex)", "raise"), ("bool", "np.zeros(N, bool)", "any"),
    ("object_ints", "P.astype(object)", "any"), ("object_none", "np.array([None] * N, dtype=object)", "raise"),
    ("object_str", "np.array(['0'] * N, dtype=object)", "raise"), ("str_array", "np.array(['0'] * N)", "raise"),
    ("zero_d", "np.array(0)", "raise"), ("two_d_row", "P.reshape(1, N)", "raise"), ("two_d_col", "P.reshape(N, 1)", "raise"),
    ("three_d", "P.reshape(1, 1, N)", "raise"), ("noncontig", "np.repeat(P, 2)[::2]", "any"),
    ("reversed_view", "P[::-1][::-1]", "any"), ("bigendian", "P.astype('>i4')", "any"),
    ("readonly", "np.frombuffer(P.tobytes(), np.int32)", "any"), ("int8", "P.astype(np.int8)", "any"),
    ("uint64", "P.astype(np.uint64)", "any"), ("int64", "P.astype(np.int64)", "any"),
    ("dev_neg", "np.full(N, -1)", "raise"), ("dev_d", "np.full(N, D)", "raise"),
    ("dev_2_31", "np.full(N, 2**31)", "raise"), ("dev_2_32", "np.full(N, 2**32)", "raise"),
    ("dev_2_63m1", "np.full(N, 2**63 - 1)", "raise"), ("dev_uint64_max", "np.full(N, 2**64 - 1, np.uint64)", "raise"),
    ("dev_int8_neg", "np.full(N, -1, np.int8)", "raise"), ("list_2_64", "[2**64] * N", "raise"),
    ("list_neg_big", "[-2**63 - 1] * N", "raise"), ("list_none", "[None] * N", "raise"),
    ("list_str", "['0'] * N", "raise"), ("list_nested", "[[0]] * N", "raise"), ("list_mixed", "[0] * (N - 1) + [0.5]", "raise"),
    ("nan", "np.full(N, np.nan)", "raise"), ("inf", "np.full(N, np.inf)", "raise"),
    ("np_ints", "[np.int64(x) for x in P]", "any"), ("range", "range(N)", "any"), ("generator", "(0 for _ in range(N))", "any"),
    ("bad_len", "BadLen()", "any"), ("bad_iter", "BadIter()", "any"), ("bad_index_elems", "[BadIndex()] * N", "any"),
    ("memoryview", "memoryview(P)", "any"), ("bytearray", "bytearray(N)", "any"), ("set", "set(range(N))", "any"),
    ("masked", "np.ma.masked_array(P)", "any"), ("matrix", "np.matrix(P)", "any"), ("graph", "G", "raise"),
]

PLACEMENT_CALLS = {
    "simulate": "SIM.simulate({})", "max_load": "SIM.max_load({})", "stream": "SIM.simulate_stream({}, 3)",
    "trace": "SIM.trace({})", "contiguous": "SIM.is_contiguous({})", "check": "SIM.check_placement({})",
    "write_trace": "SIM.write_trace({}, TMP + '/t.json')", "incremental": "pl.IncrementalSimulator(SIM, {})",
}

# Must give the same step time as P itself.
SAME_AS_P = {"list", "tuple", "noncontig", "reversed_view", "bigendian", "readonly", "int8", "uint64", "int64",
             "object_ints", "np_ints"}


def placement_cases(method):
    cases = []
    for pid, expr, expect in PLACEMENTS:
        call = PLACEMENT_CALLS[method].format(expr)
        if method == "simulate" and pid in SAME_AS_P:
            call = f"assert {call}['step_time_s'] == BASE, 'differs from P'"
        cases.append((f"{method}-{pid}", call, expect))
    return cases


def simulator_method_cases():
    cases = []
    for i, a in enumerate(["0", "-1", "2**31", "2**63", "2**64", "-2**63 - 1", "1.5", "None", "'3'", "np.int64(3)",
                           "np.float64(3)", "True", "10**9", "BadIndex()"]):
        cases.append((f"stream-batches-{i}", f"SIM.simulate_stream(P, {a})", "any"))
        cases.append((f"random-seed-{i}", f"SIM.random_placement({a})", "any"))
        if a not in ("2**31", "2**63", "2**64", "10**9"):  # a valid huge n is a memory request, not bad input
            cases.append((f"random-n-{i}", f"SIM.random_placements({a}, 0)", "any"))
    cases += [
        ("stream-zero-raises", "SIM.simulate_stream(P, 0)", "raise"),
        ("stream-negative-raises", "SIM.simulate_stream(P, -1)", "raise"),
        ("random-n-negative-raises", "SIM.random_placements(-1, 0)", "raise"),
    ]
    for i, b in enumerate(["None", "P", "P.reshape(1, 1, N)", "np.zeros((2, N - 1), np.int32)", "np.zeros((0, N), np.int32)",
                           "np.zeros((2, N))", "np.full((2, N), D)", "np.full((2, N), -1)", "[[0] * N, [0] * (N - 1)]",
                           "[[0] * N] * 2", "np.zeros((N, 2), np.int32).T", "np.zeros((2, N), object)",
                           "'x'", "{}", "np.zeros((2, N), np.float16)", "np.zeros((2, N), complex)",
                           "np.full((2, N), 2**40)", "[P, None]", "BadLen()", "np.zeros((3, 2 * N), np.int32)[:, ::2]"]):
        expect = "any" if i in (1, 4, 9, 10, 11, 19) else "raise"  # 11: Python ints kept as objects are integers
        cases.append((f"batch-{i}", f"SIM.simulate_batch({b})", expect))
    cases.append(("batch-noncontig-same", "r = SIM.simulate_batch(np.stack([np.repeat(P, 2)[::2]] * 2))\n"
                  "assert list(r['step_time_s']) == [BASE, BASE]", "any"))
    for i, path in enumerate(["None", "''", "TMP", "TMP + '/no/such/dir/t.json'", "'a\\x00b'", "'\\ud800.json'",
                              "5", "BadPath()", "pathlib.Path(TMP) / 't2.json'", "b'/tmp/x.json'"]):
        expect = "any" if i in (7, 8, 9) else "raise"
        cases.append((f"write-trace-path-{i}", f"SIM.write_trace(P, {path})", expect))
    for i, fmt in enumerate(["'x'", "''", "None", "'\\ud800'", "'chrome\\x00'", "5", "'CHROME'"]):
        cases.append((f"write-trace-format-{i}", f"SIM.write_trace(P, TMP + '/f.json', {fmt})", "raise"))
    for i, (a, b) in enumerate([("-1", "0"), ("0", "D"), ("2**63", "0"), ("0", "2**64"), ("None", "0"), ("0.5", "1"),
                                ("'cpu0'", "0"), ("BadIndex()", "0")]):
        cases.append((f"route-{i}", f"C.route({a}, {b})", "raise"))
        cases.append((f"transfer-{i}", f"C.transfer_time_s({a}, {b}, 1e6)", "raise"))
    for i, by in enumerate(["float('nan')", "-1.0", "float('inf')", "1e308", "None", "'x'", "BadFloat()"]):
        cases.append((f"transfer-bytes-{i}", f"C.transfer_time_s(0, 1, {by})", "raise" if i < 2 or i > 3 else "any"))
    for i, op in enumerate(["-1", "N", "2**63", "2**64", "None", "'x'", "1.5"]):
        cases.append((f"successors-{i}", f"G.successors({op})", "raise"))
        cases.append((f"predecessors-{i}", f"G.predecessors({op})", "raise"))
    for i, name in enumerate(["''", "'nope'", "None", "'\\ud800'", "'a\\x00b'", "5", "'x' * 100000"]):
        cases.append((f"find-op-{i}", f"G.find_op({name})", "raise"))
        cases.append((f"find-device-{i}", f"C.find_device({name})", "raise"))
    return cases


def incremental_cases():
    mk = "inc = pl.IncrementalSimulator(SIM, P)\n"
    cases = []
    for i, cp_ in enumerate(["0", "-1", "2**63", "None", "1.5", "10**6", "'2'"]):
        cases.append((f"inc-checkpoints-{i}", f"pl.IncrementalSimulator(SIM, P, {cp_})", "any"))
    moves = [("-1", "0"), ("N", "0"), ("0", "-1"), ("0", "D"), ("2**63", "0"), ("0", "2**64"), ("-2**63 - 1", "0"),
             ("None", "0"), ("'0'", "0"), ("0.0", "1"), ("0", "1.5"), ("0", "None"), ("[0, N]", "1"),
             ("[0, -1]", "1"), ("[0, 1.5]", "1"), ("[None]", "1"), ("np.array([0, 1])", "1"), ("range(3)", "1"),
             ("BadIndex()", "1"), ("0", "BadIndex()"), ("[[0]]", "1"), ("(0, 1)", "1"), ("{0: 1}", "1"),
             ("np.array([0, 1], float)", "1"), ("np.int64(0)", "np.int64(1)"), ("True", "1"), ("[0, 0]", "1"), ("[]", "0")]
    for i, (op, dev) in enumerate(moves):
        expect = "any" if i >= 16 else "raise"
        cases.append((f"inc-move-{i}", mk + f"inc.move({op}, {dev})", expect))
    cases += [
        ("inc-undo-fresh", mk + "inc.undo()", "raise"),
        ("inc-undo-twice", mk + "inc.move(0, 1 - int(P[0]))\ninc.undo()\ninc.undo()", "raise"),
        ("inc-failed-move-keeps-state",
         mk + "try:\n    inc.move(0, D)\nexcept (ValueError, TypeError):\n    pass\n"
         "assert (inc.placement == P).all() and inc.result['step_time_s'] == BASE", "any"),
        ("inc-failed-group-move-keeps-state",
         mk + "try:\n    inc.move([0, 1, N], 1)\nexcept (ValueError, TypeError):\n    pass\n"
         "assert (inc.placement == P).all() and inc.result['step_time_s'] == BASE", "any"),
        ("inc-undo-after-failed-move",
         mk + "inc.move(0, 1 - int(P[0]))\ntry:\n    inc.move(0, -1)\nexcept (ValueError, TypeError):\n    pass\n"
         "inc.undo()\nassert (inc.placement == P).all() and inc.result['step_time_s'] == BASE", "any"),
        ("inc-placement-write", mk + "q = inc.placement\ntry:\n    q[0] = 99\nexcept ValueError:\n    pass\ninc.move(1, 0)", "any"),
        ("inc-many-undo", mk + "for d in (0, 1, 2, 1):\n    inc.move(2, d)\nfor _ in range(4):\n    inc.undo()\n"
         "assert (inc.placement == P).all()\ninc.undo()", "raise"),
        ("inc-sim-none", "pl.IncrementalSimulator(None, P)", "raise"),
        ("inc-limit-nan", mk + "inc.move(0, 1 - int(P[0]), limit=float('nan'))", "raise"),
        ("inc-limit-str", mk + "inc.move(0, 1 - int(P[0]), limit='1')", "raise"),
        ("inc-nan-keeps-state", mk + "try:\n    inc.move([0, 1], 1, limit=float('nan'))\nexcept ValueError:\n    pass\n"
         "assert (inc.placement == P).all() and inc.result['step_time_s'] == BASE", "any"),
        ("inc-resume-fresh", mk + "inc.resume()", "raise"),
        ("inc-stopped-then-move", mk + "inc.move(0, 1 - int(P[0]), limit=0.0)\ninc.move(1, 0)", "raise"),
        ("inc-stopped-undo", mk + "inc.move(0, 1 - int(P[0]), limit=0.0)\ninc.undo()\n"
         "assert (inc.placement == P).all() and inc.result['step_time_s'] == BASE", "any"),
    ]
    return cases


def placer_cases():
    cases = []
    fast = ["single_device", "round_robin", "random", "heft", "m_topo", "m_etf", "metis", "scotch", "dp", "pipedream"]
    for i, name in enumerate(["''", "'nope'", "None", "'\\ud800'", "'heft\\x00'", "5", "'HEFT'"]):
        cases.append((f"place-name-{i}", f"pl.place(SIM, {name})", "raise"))
    for i, opts in enumerate(WHOLE):
        cases.append((f"place-options-{i}", f"pl.place(SIM, 'heft', {opts.replace('GD', '{}')})", "any"))
    for n in fast:
        cases.append((f"place-{n}-unknown", f"pl.place(SIM, {n!r}, {{'zzz': 1}})", "raise", "zzz"))
    opt_values = {"metis": ["imbalance"], "dp": ["max_ideals", "time_limit_s"], "local_search":
                  ["restarts", "max_steps", "contiguous"], "annealing": ["steps", "seconds", "temperature"],
                  "m_sct": ["lp_iterations"], "milp": ["time_limit_s"], "human_expert": ["split_file"],
                  "gdp": ["steps", "rollouts", "lr", "hidden", "checkpoint", "reward"],
                  "placeto": ["steps", "hidden"], "hdp": ["groups"], "hsdag": ["max_chain"]}
    small = ["none", "true", "neg1", "nan", "inf", "int2_63", "int2_64", "int10_30", "empty_str", "surrogate",
             "nul_str", "dict", "list", "deep_dict", "bad_float", "big_float"]
    for placer, keys in opt_values.items():
        for k in keys:
            for b in small:
                if b == "big_float" and k in ("time_limit_s", "seconds", "steps", "max_steps", "restarts",
                                              "lp_iterations", "rollouts", "hidden", "groups", "max_chain"):
                    continue  # a valid huge budget runs long: not a malformed-input case
                if b in ("inf",) and k in ("time_limit_s", "seconds"):
                    continue
                if b in ("int2_63", "int2_64", "int10_30") and (placer, k) == ("annealing", "seconds"):
                    continue  # annealing given only seconds cools over all of them: a valid huge budget
                cases.append((f"place-{placer}-{k}-{b}", f"pl.place(SIM, {placer!r}, {{{k!r}: BAD[{b!r}]}})", "any"))
    for i, s in enumerate(["-1", "2**64", "-2**63 - 1", "None", "1.5", "'0'", "BadIndex()"]):
        cases.append((f"place-seed-{i}", f"pl.place(SIM, 'random', seed={s})", "any"))
    for i, pr in enumerate(["5", "'x'", "lambda: None", "lambda *a: (_ for _ in ()).throw(Boom('cb'))"]):
        cases.append((f"place-progress-{i}", f"pl.place(SIM, 'annealing', {{'steps': 50}}, progress={pr})", "any"))
    return cases


def train_cases():
    t = "pl.train({policy}, {tasks}, steps={steps}{extra})"
    base = dict(policy="'gdp'", tasks="[(G, C)]", steps="1", extra="")
    variants = []
    for i, v in enumerate(["''", "'nope'", "None", "'\\ud800'", "5", "'heft'"]):
        variants.append((f"train-policy-{i}", dict(base, policy=v), "raise"))
    for i, v in enumerate(["[]", "None", "[(G,)]", "[(G, C, C, C)]", "[(1, G, C)]", "[(G, 'x')]", "[('x', 'y')]",
                           "'abc'", "[G]", "{G: C}", "[(None, G, C)]", "[('\\ud800', G, C)]", "[[G, C]]",
                           "[(C, G)]", "[(G, C)] * 300", "BadLen()", "[(GD, CD)]", "[('a\\x00b', G, C)]"]):
        variants.append((f"train-tasks-{i}", dict(base, tasks=v), "any" if i in (12, 14, 17) else "raise"))
    for i, v in enumerate(["-1", "2**63", "2**64", "1.5", "None", "'1'"]):
        variants.append((f"train-steps-{i}", dict(base, steps=v), "any" if i == 0 else "raise"))
    extras = ["minutes=-1", "minutes=float('nan')", "minutes=float('inf')", "minutes=None", "checkpoint=''",
              "checkpoint=5", "checkpoint=write('afile', 'x')", "checkpoint='a\\x00b'", "checkpoint='\\ud800'",
              "checkpoint_every=0", "checkpoint_every=-1", "checkpoint_every=2**64", "seed=-1", "seed=2**64",
              "seed=None", "options={'zzz': 1}", "options='x'", "options={'rollouts': -1}",
              "options={'rollouts': float('nan')}", "options={'rollouts': 2**64}", "options={'lr': float('inf')}",
              "options={'hidden': 0}", "options={'hidden': 10**9}", "options={1: 2}", "options=deep(100000)",
              "reward={'objective': 'nope'}", "reward={'oom_penalty': float('nan')}", "reward={'zzz': 1}",
              "reward='x'", "reward=5", "reward={'objective': None}", "reward=deep(100000)", "on_step=5",
              "on_step=lambda s: (_ for _ in ()).throw(Boom('cb'))", "progress=5", "resume=True",
              "resume=True, checkpoint=TMP + '/empty_ckpt'", "resume='yes'"]
    for i, e in enumerate(extras):
        variants.append((f"train-extra-{i}", dict(base, extra=", " + e), "any"))
    return [(vid, t.format(**v), expect) for vid, v, expect in variants]


def model_cases():
    cases = []
    for i, name in enumerate(["''", "'nope'", "None", "'\\ud800'", "'random_dag\\x00'", "5", "'RESNET50'",
                              "'x' * 100000"]):
        cases.append((f"model-name-{i}", f"pl.make_model({name})", "raise"))
        cases.append((f"preset-name-{i}", f"pl.make_preset({name})", "raise"))
        cases.append((f"load-cluster-{i}", f"pl.load_cluster({name})", "raise"))
    for b in BAD_NAMES:
        expect = "raise" if b in ("nan", "inf", "ninf", "np_nan", "int2_64", "int10_30", "big_float", "neg1",
                                  "int2_63", "int_neg2_63m1", "float") else "any"
        cases.append((f"model-ops-{b}", f"pl.make_model('random_dag', {{'ops': BAD[{b!r}], 'width': 2}})", expect))
        cases.append((f"model-minflops-{b}", f"pl.make_model('random_dag', {{'ops': 5, 'min_flops': BAD[{b!r}]}})", "any"))
    for i, params in enumerate(["None", "[]", "'x'", "{'zzz': 1}", "{1: 2}", "{None: 1}", "{'batch': 0}",
                                "{'batch': 2.5}", "{'\\ud800': 1}", "SubDict(batch=2)", "BadKeys(batch=2)",
                                "{'image_size': 10}", "{'batch': 65537}", "[('batch', 2)]"]):
        cases.append((f"model-params-{i}", f"pl.make_model('resnet50', {params})", "any" if i in (0, 9, 10, 13) else "raise"))
    cases += [
        ("model-minflops-above-max", "pl.make_model('random_dag', {'ops': 5, 'min_flops': 1e12, 'max_flops': 1e3})", "any"),
        ("model-heads-not-divide", "pl.make_model('bert', {'hidden': 10, 'heads': 3, 'layers': 1, 'seq_len': 4})", "raise"),
    ]
    for i, (a, b_, m) in enumerate([("-1", "0", "1e9"), ("0", "0", "1e9"), ("2**63", "0", "1e9"), ("1", "1", "float('nan')"),
                                    ("1", "1", "-1"), ("None", "1", "1"), ("1.5", "1", "1e9"), ("10**7", "0", "1e9"),
                                    ("1", "1", "float('inf')")]):
        cases.append((f"msr-cluster-{i}", f"pl.msr_cluster({a}, {b_}, {m})", "any" if i in (7,) else "raise"))
    cases.append(("msr-cluster-none", "pl.msr_cluster(None)", "raise"))
    return cases


def coarsening_cases():
    cases = []
    for i, n in enumerate(["0", "-1", "2**63", "2**64", "None", "1.5", "10**9", "'3'", "BadIndex()"]):
        cases.append((f"group-by-size-{i}", f"pl.group_by_size(G, {n})", "any" if i == 6 else "raise"))
    for fn in ["group_by_size(G, 3)", "fuse_chains(G)", "contract_colocation(G)"]:
        for i, a in enumerate(["None", "C", "'G'", "GD"]):
            call = f"pl.{fn}".replace("(G", f"({a}")
            cases.append((f"{fn.split('(')[0]}-graph-{i}", call, "raise"))
    for i, lab in enumerate(["None", "[]", "[0] * (N - 1)", "[None] * N", "['a'] * N", "np.zeros(N)", "[-1] * N",
                             "np.zeros(N, object)", "[2**64] * N", "np.arange(N) % 3", "[str(i % 2) for i in range(N)]",
                             "'x' * N", "BadLen()", "[0.5] * N", "np.zeros((1, N), np.int32)", "['\\ud800'] * N"]):
        # np.zeros(N, object) (7) holds Python ints: integers, so it may pass like np.arange(N) % 3
        cases.append((f"contract-labels-{i}", f"pl.contract_labels(G, {lab}, 'x')",
                      "any" if i in (5, 6, 7, 9, 10) else "raise"))
    for i, nm in enumerate(["None", "''", "'\\ud800'", "5", "'a\\x00b'"]):
        cases.append((f"contract-labels-name-{i}", f"pl.contract_labels(G, np.arange(N) % 3, {nm})", "any"))
    mk = "cg = pl.group_by_size(G, 3)\n"
    for pid, expr, expect in PLACEMENTS[:40]:
        e = re.sub(r"\bN\b", "3", re.sub(r"\bP\b", "(cg.group_of[:3] * 0)", expr))
        cases.append((f"expand-{pid}", mk + f"cg.expand_placement({e})", "any"))
    cases += [
        ("expand-two-entries", mk + "cg.expand_placement([0, 0])", "raise"),
        ("expand-neg", mk + "cg.expand_placement([-1, 0, 0])", "any"),
        ("compose-mismatch", "pl.compose(pl.group_by_size(G, 3), pl.group_by_size(G, 4))", "raise"),
        ("compose-none", "pl.compose(None, pl.group_by_size(G, 3))", "raise"),
        ("compose-graph", "pl.compose(G, G)", "raise"),
    ]
    for i, f in enumerate(["float('nan')", "-1.0", "float('inf')", "1e308", "None", "'2'", "BadFloat()"]):
        expect = "raise" if i in (0, 1, 2, 4, 5) else "any"
        cases.append((f"expand-training-opt-{i}", f"pl.expand_training(G, {f})", expect))
        cases.append((f"expand-training-bwd-{i}", f"pl.expand_training(G, backward_flops_factor={f})", expect))
        cases.append((f"expand-training-upd-{i}", f"pl.expand_training(G, update_flops_per_param_byte={f})", expect))
    cases.append(("expand-training-none", "pl.expand_training(None)", "raise"))
    return cases


def file_cases():
    text = "json.dumps(GD)"
    ver = "'\"version\": 1'"
    name = "'\"name\": \"'"
    muts = {  # (mutated text, expect)
        "empty": ("''", "raise"), "truncated": (f"{text}[:-5]", "raise"),
        "dupkey": (f"{text}.replace({ver}, {ver} + ', ' + {ver})", "raise"),
        "nan": (f"{text}.replace({ver}, '\"version\": NaN')", "raise"),
        "bigint": (f"{text}.replace({ver}, '\"version\": 18446744073709551616')", "raise"),
        "negbigint": (f"{text}.replace({ver}, '\"version\": -9223372036854775809')", "raise"),
        "hugeexp": (f"{text}.replace({ver}, '\"version\": 1e400')", "raise"),
        "bom": (f"'\\ufeff' + {text}", "any"),
        "deep": ("'[' * 200000 + ']' * 200000", "raise"),
        "deep_obj": ("'{\"a\":' * 200000 + '1' + '}' * 200000", "raise"),
        "array": ("'[1, 2, 3]'", "raise"),
        "nul": (f"{text}.replace({name}, {name} + 'a\\\\u0000', 1)", "any"),
        "trailing": (f"{text} + ' x'", "raise"),
        "surrogate_escape": (f"{text}.replace({name}, {name} + '\\\\ud800', 1)", "raise"),
        "comment": (f"'// c\\n' + {text}", "raise"),
        "version_deep": (f"{text}.replace({ver}, '\"version\": ' + '[' * 100000 + ']' * 100000)", "raise"),
        "unknown_deep": (f"{text}.replace({ver}, {ver} + ', \"zzz\": ' + '[' * 100000 + ']' * 100000)", "raise"),
    }
    cases = []
    for reader, fmt_doc in [("read_graph", "GD"), ("read_cluster", "CD"), ("load_cluster", "CD"), ("read_checkpoint", "GD"),
                            ("read_msr", "GD")]:
        for mid, (m, expect) in muts.items():
            m2 = m.replace("GD", fmt_doc)
            if reader in ("read_checkpoint", "read_msr"):
                expect = "raise"
            cases.append((f"{reader}-{mid}", f"pl.{reader}(write('{reader}-{mid}.json', {m2}))", expect))
        cases.append((f"{reader}-bad-utf8", f"pl.{reader}(write('{reader}-u.json', b'{{\"format\": \"\\xff\\xfe\"}}', 'wb'))", "raise"))
        for i, p in enumerate(["TMP + '/missing.json'", "TMP", "''", "None", "5", "'a\\x00b'", "'\\ud800'", "BadPath()",
                               "'/dev/null'"]):
            cases.append((f"{reader}-path-{i}", f"pl.{reader}({p})", "any" if i == 7 else "raise"))
    cases.append(("read-msr-split-bad", "pl.read_msr_split(write('split.json', '{}'), None)", "raise"))
    for i, (fn, args) in enumerate([("write_graph", "G, {}"), ("write_cluster", "C, {}"), ("write_graph", "None, TMP + '/x.json'"),
                                    ("write_cluster", "G, TMP + '/x.json'"), ("graph_to_dict", "None")]):
        for j, p in enumerate(["TMP", "TMP + '/no/such/x.json'", "''", "None", "'a\\x00b'", "'\\ud800.json'"]):
            if "{}" in args:
                cases.append((f"{fn}-{i}-path-{j}", f"pl.{fn}({args.format(p)})", "raise"))
        if "{}" not in args:
            cases.append((f"{fn}-{i}", f"pl.{fn}({args})", "raise"))
    return cases


def msr_cases():
    data = ROOT.parent / "shared" / "data" / "msr-dnn-partitioning"
    inst_dir = data / "throughput-inputs" / "LayerGraphs"
    files = sorted(inst_dir.glob("*.json")) if inst_dir.is_dir() else []
    if not files:
        return []
    f = str(min(files, key=lambda p: p.stat().st_size))
    load = f"DOC = json.load(open({f!r}))\n"
    cases = [("msr-valid", f"pl.read_msr({f!r})", "any")]
    top = ["maxFPGAs", "maxCPUs", "maxSizePerFPGA", "nodes", "edges"]
    for k in top:
        for b in ["none", "neg1", "nan", "int2_64", "empty_str", "list", "dict", "float", "int2_63"]:
            cases.append((f"msr-{k}-{b}", load + f"d = at(DOC, ({k!r},), BAD[{b!r}])\n"
                          f"pl.read_msr(write('msr-{k}-{b}.json', json.dumps(d, default=str)))", "any"))
    for k in ["id", "cpuLatency", "fpgaLatency", "size", "colorClass", "supportedOnFpga", "isBackwardNode"]:
        for b in ["none", "neg1", "nan", "int2_64", "empty_str", "list", "float", "int2_63"]:
            cases.append((f"msr-node-{k}-{b}", load + f"d = at(DOC, ('nodes', 0, {k!r}), BAD[{b!r}])\n"
                          f"pl.read_msr(write('msrn-{k}-{b}.json', json.dumps(d, default=str)))", "any"))
    for k in ["sourceId", "destId", "cost"]:
        for b in ["none", "neg1", "nan", "int2_64", "empty_str", "float", "int2_63"]:
            cases.append((f"msr-edge-{k}-{b}", load + f"d = at(DOC, ('edges', 0, {k!r}), BAD[{b!r}])\n"
                          f"pl.read_msr(write('msre-{k}-{b}.json', json.dumps(d, default=str)))", "any"))
    for i, x in enumerate(["-1", "2**63", "None", "'x'", "10**30"]):
        cases.append((f"msr-op-of-id-{i}", f"pl.read_msr({f!r}).op_of_msr_id({x})", "raise"))
    return cases


def helper_cases():
    tr = "tr = SIM.trace(P)\n"
    r = "r = SIM.simulate(P)\n"
    cases = [
        ("viz-timeline-none", "from placelab import viz\nviz.timeline(SIM, None)", "raise"),
        ("viz-timeline-empty", "from placelab import viz\nviz.timeline(SIM, {})", "raise"),
        ("viz-timeline-sim-none", tr + "from placelab import viz\nviz.timeline(None, tr)", "raise"),
        ("viz-timeline-color", tr + "from placelab import viz\nviz.timeline(SIM, tr, color_by='nope')", "any"),
        ("viz-memory-bad-placement", tr + "from placelab import viz\nviz.memory(SIM, tr, np.full(N, D))", "any"),
        ("viz-memory-none", "from placelab import viz\nviz.memory(SIM, None)", "raise"),
        ("viz-memory-over-time-str", "from placelab import viz\nviz.memory_over_time(SIM, 'x')", "raise"),
        ("viz-link-none", "from placelab import viz\nviz.link_utilisation(SIM, None)", "raise"),
        ("viz-link-empty", "from placelab import viz\nviz.link_utilisation(SIM, {})", "raise"),
        ("viz-curves-none", "from placelab import viz\nviz.training_curves(None)", "any"),
        ("viz-curves-empty", "from placelab import viz\nviz.training_curves([])", "any"),
        ("viz-curves-str-values", "from placelab import viz\nviz.training_curves([{'reward': 'x'}])", "any"),
        ("viz-curves-scalar", "from placelab import viz\nviz.training_curves({'a': 5})", "any"),
        ("viz-curves-bad-key", "from placelab import viz\nviz.training_curves([{'reward': 1.0}], keys=['nope'])", "raise"),
        ("viz-path-dir", r + "from placelab import viz\nviz.link_utilisation(SIM, r, path=TMP + '/no/such/x.png')", "raise"),
        ("tables-results-none", "pl.results_frame(None)", "raise"),
        ("tables-results-scalar", "pl.results_frame({'a': 5})", "raise"),
        ("tables-results-empty-inner", "pl.results_frame({'a': {}})", "any"),
        ("tables-results-list", "pl.results_frame([1, 2])", "raise"),
        ("tables-devices-empty", "pl.devices_frame(SIM, {})", "raise"),
        ("tables-devices-none", "pl.devices_frame(SIM, None)", "raise"),
        ("tables-devices-sim-none", r + "pl.devices_frame(None, r)", "raise"),
        ("compare-unknown", "pl.compare(SIM, ['nope'])", "raise"),
        ("compare-str", "pl.compare(SIM, 'heft')", "any"),
        ("compare-none-elem", "pl.compare(SIM, [None])", "raise"),
        ("compare-options-bad", "pl.compare(SIM, ['heft'], options={'heft': {'zzz': 1}})", "raise"),
        ("compare-options-str", "pl.compare(SIM, ['heft'], options='x')", "raise"),
        ("compare-sim-none", "pl.compare(None, ['heft'])", "raise"),
    ]
    return cases


def torch_cases():
    imp = "import torch\n"
    lin = "m = torch.nn.Linear(4, 3)\n"
    return [
        ("torch-module-none", imp + "pl.from_torch(None, torch.zeros(1, 4))", "raise"),
        ("torch-module-str", imp + "pl.import_torch('resnet50', torch.zeros(1, 4))", "raise"),
        ("torch-inputs-none", imp + lin + "pl.from_torch(m, None)", "any"),
        ("torch-inputs-str", imp + lin + "pl.from_torch(m, 'x')", "raise"),
        ("torch-inputs-wrong-shape", imp + lin + "pl.from_torch(m, torch.zeros(1, 5))", "raise"),
        ("torch-inputs-numpy", imp + lin + "pl.from_torch(m, np.zeros((1, 4), np.float32))", "any"),
        ("torch-name-surrogate", imp + lin + "pl.from_torch(m, torch.zeros(1, 4), name='\\ud800')", "any"),
        ("torch-name-int", imp + lin + "pl.from_torch(m, torch.zeros(1, 4), name=5)", "any"),
        ("torch-training-str", imp + lin + "pl.from_torch(m, torch.zeros(1, 4), training='yes')", "any"),
    ]


def odd_state_cases():
    mk_g = "pl.make_model('random_dag', {'ops': 12, 'width': 3, 'seed': 1})"
    return [
        ("inc-after-simulator-dropped", f"inc = pl.IncrementalSimulator(pl.Simulator({mk_g}, C), P)\nimport gc\ngc.collect()\n"
         "inc.move(0, 1)\ninc.undo()\nassert (inc.placement == P).all()", "any"),
        ("sim-after-graph-dropped", f"s = pl.Simulator({mk_g}, pl.make_preset('cpu-gpu-2'))\nimport gc\ngc.collect()\n"
         "assert s.simulate(P)['step_time_s'] == BASE", "any"),
        ("coarsening-after-graph-dropped", f"cg = pl.group_by_size({mk_g}, 3)\nimport gc\ngc.collect()\n"
         "cg.graph.num_ops\ncg.expand_placement(np.zeros(cg.graph.num_ops, np.int32))", "any"),
        ("compose-after-drop", f"a = pl.group_by_size({mk_g}, 6)\nb = pl.group_by_size(a.graph, 2)\ndel a\n"
         "import gc\ngc.collect()\nc = pl.compose(b, pl.group_by_size(b.graph, 1))", "any"),
        ("graph-array-write", f"g = {mk_g}\na = g.flops\ntry:\n    a[0] = float('nan')\nexcept ValueError:\n    pass\n"
         "assert not np.isnan(g.flops[0])\npl.Simulator(g, C).simulate(P)", "any"),
        ("sim-op-times-write", "s = pl.Simulator(G, C)\nt = s.op_times()\ntry:\n    t[...] = -1\nexcept ValueError:\n    pass\n"
         "assert s.simulate(P)['step_time_s'] == BASE", "any"),
        ("group-of-write", "cg = pl.group_by_size(G, 3)\nq = cg.group_of\ntry:\n    q[0] = 10**6\nexcept ValueError:\n    pass\n"
         "cg.expand_placement(np.zeros(cg.graph.num_ops, np.int32))", "any"),
        ("inc-undo-after-exception-in-move", "inc = pl.IncrementalSimulator(SIM, P)\ninc.move(1, 2)\n"
         "try:\n    inc.move([1, 2, 99], 0)\nexcept ValueError:\n    pass\ninc.undo()\n"
         "assert (inc.placement == P).all() and inc.result['step_time_s'] == BASE", "any"),
        ("inc-result-mutation", "inc = pl.IncrementalSimulator(SIM, P)\nr = inc.result\nr.clear()\ninc.move(0, 1)\ninc.undo()\n"
         "assert inc.result['step_time_s'] == BASE", "any"),
        ("train-then-place-bad-checkpoint", "pl.place(SIM, 'gdp', {'checkpoint': TMP, 'steps': 0})", "raise"),
    ]


SWEEPS = {
    "odd_states": odd_state_cases,
    "graph_from_dict": graph_dict_cases, "cluster_from_dict": cluster_dict_cases, "profile": profile_cases,
    "simulator_options": simulator_options_cases, "simulator_methods": simulator_method_cases,
    "incremental": incremental_cases, "placers": placer_cases, "train": train_cases, "models": model_cases,
    "coarsening": coarsening_cases, "files": file_cases, "msr": msr_cases, "helpers": helper_cases,
    "torch": torch_cases,
}
for _m in PLACEMENT_CALLS:
    SWEEPS[f"placement_{_m}"] = (lambda m: lambda: placement_cases(m))(_m)



def _known_ids():
    """Cases that show a real problem: each problem has its own named test below, so they are left out of
    the sweeps (which then stay green and catch new regressions)."""
    ids = set()
    for name in ("graph_from_dict", "cluster_from_dict", "profile", "simulator_options", "placers"):
        ids |= {c[0] for c in SWEEPS[name]() if c[0].endswith("-surrogate")}
    ids |= {"torch-name-surrogate", "train-tasks-11", "train-extra-8", "graph-measured-intkey"}
    ids |= {"viz-timeline-empty", "viz-link-empty", "viz-curves-bad-key", "tables-results-empty-inner",
            "tables-devices-empty", "viz-timeline-sim-none", "tables-devices-sim-none", "viz-path-dir"}
    return ids


KNOWN = _known_ids()


def must_pass(cases, timeout=40.0):
    """Each snippet checks its own outcome (assert / raise AssertionError); any exception is a failure."""
    results = run_cases([(c[0], c[1], "any") for c in cases], timeout)
    bad = []
    for c in cases:
        r = results[c[0]]
        if r["outcome"] != "ok":
            bad.append(f"{c[0]}: {r['outcome']} {r.get('type', '')}: {r['msg'][:300]!r}\n    code: {c[1]!r}")
    assert not bad, f"{len(bad)} of {len(cases)}:\n" + "\n".join(bad)


def _raises(call, kinds=("ValueError",), must_contain=None):
    """Snippet: `call` must raise one of `kinds` with a one-line message leaking no C++ internals."""
    text = (f"try:\n    {call}\nexcept BaseException as e:\n    err = e\nelse:\n    raise AssertionError('no error')\n"
            f"assert type(err).__name__ in {tuple(kinds)!r}, f'{{type(err).__name__}}: {{err}}'\n"
            f"assert '\\n' not in str(err).strip(), f'not one line: {{err}}'\n"
            f"assert not any(t in str(err) for t in {LEAKS!r}), f'leaks internals: {{err}}'\n")
    if must_contain:
        text += f"assert {must_contain!r} in str(err), f'message cut short or unnamed: {{str(err)!r}}'\n"
    return text


# ----------------------------------------------------------------------------------------------------
# Problems the sweeps found, one test each, kept as regression tests now that they are fixed.

def test_lone_surrogate_in_a_dict_is_a_value_error_naming_the_field():
    # Regression (fixed); it was: any str holding a lone surrogate ("\ud800", e.g. from os.fsdecode of a non-
    # UTF-8 file name) inside a dict argument reaches the user as RuntimeError
    # "[json.exception.parse_error.101] parse error ... surrogate U+D800..U+DBFF must be followed by
    # U+DC00..U+DFFF": not ValueError, no field named, and nlohmann internals in the message. Cause: to_json
    # (python/src/convert.cpp) lets json.dumps escape the surrogate and nlohmann::json::parse throws a
    # parse_error that is not a placelab::Error.
    must_pass([
        ("graph-name", _raises("pl.graph_from_dict(at(GD, ('name',), '\\ud800'))")),
        ("graph-op-name", _raises("pl.graph_from_dict(at(GD, ('ops', 0, 'name'), 'a\\udcffb'))")),
        ("cluster-device-kind", _raises("pl.cluster_from_dict(at(CD, ('devices', 1, 'kind'), '\\ud800'))")),
        ("profile-entry", _raises("pl.Simulator(G, C, profile=at(PD, ('entries', 0, 'device_kind'), '\\ud800'))")),
        ("simulator-option", _raises("pl.Simulator(G, C, {'priority': '\\ud800'})", must_contain="priority")),
        ("placer-option", _raises("pl.place(SIM, 'metis', {'imbalance': '\\ud800'})", must_contain="imbalance")),
        ("train-reward", _raises("pl.train('gdp', [(G, C)], steps=1, reward={'objective': '\\ud800'})")),
        ("surrogate-key", _raises("pl.Simulator(G, C, {'\\ud800': 1})")),
    ])


def test_lone_surrogate_in_a_path_or_task_name_is_a_clear_error():
    # Regression (fixed); it was: a path or task name that is a str with a lone surrogate gives RuntimeError
    # "Unable to cast Python instance to C++ type (#define PYBIND11_DETAILED_ERROR_MESSAGES ...)": pybind11
    # internals, no argument named, not ValueError/TypeError. Cause: py::cast<std::string> in path_arg
    # (python/src/convert.cpp) and t[0].cast<std::string>() for a task's name (python/src/policy.cpp).
    # (Functions whose parameter is declared std::string / os.PathLike answer TypeError for the same string,
    # which is at least the promised type.)
    must_pass([
        ("profile-path", _raises("pl.Simulator(G, C, profile='\\ud800.json')", ("ValueError", "TypeError"), "profile")),
        ("checkpoint-path", _raises("pl.train('gdp', [(G, C)], steps=1, checkpoint=TMP + '/\\ud800')",
                                    ("ValueError", "TypeError"), "checkpoint")),
        ("task-name", _raises("pl.train('gdp', [('\\ud800', G, C)], steps=1)", ("ValueError", "TypeError"), "tasks[0]")),
    ])


def test_nul_byte_in_a_quoted_string_keeps_the_whole_message():
    # Regression (fixed); it was: the core quotes the bad value; when it holds a NUL the ValueError's message
    # stops there, so the rest of the message (what was expected, the known names) is lost:
    # make_model("resnet\x0050") says only 'unknown model "resnet'. Cause: the exception translator in
    # python/src/module.cpp measures the message with std::strlen(e.what()).
    must_pass([
        ("cluster-format", _raises("pl.cluster_from_dict(at(CD, ('format',), 'a\\x00b'))",
                                   must_contain='expected "placelab.cluster"')),
        ("graph-format", _raises("pl.graph_from_dict(at(GD, ('format',), 'a\\x00b'))", must_contain='placelab.graph"')),
        ("make-model", _raises("pl.make_model('resnet\\x0050')", must_contain='50"')),
        ("make-preset", _raises("pl.make_preset('k80\\x00-1')", must_contain='-1"')),
        ("place", _raises("pl.place(SIM, 'he\\x00ft')", must_contain='ft"')),
        ("trace-format", _raises("SIM.write_trace(P, TMP + '/t.json', 'chr\\x00ome')", must_contain='ome"')),
        ("find-op", _raises("G.find_op('lay\\x00er0/op0')", must_contain='op0"')),
    ])


def test_placement_list_with_ints_beyond_int64_is_a_value_error():
    # Regression (fixed); it was: docs/python.md: "an array of floats or of out-of-range indices is a
    # ValueError". A list of Python ints that do not fit in int64 becomes a numpy object array and is answered
    # TypeError "placement must be an array of integers (device indices), got list", which is misleading (it
    # is a list of integers); np.full(N, 2**63 - 1) is correctly a ValueError. Cause: as_int64_array
    # (python/src/convert.cpp) treats every object-dtype array as a wrong type.
    must_pass([
        ("simulate-2_64", _raises("SIM.simulate([2**64] * N)", must_contain="placement")),
        ("simulate-neg", _raises("SIM.simulate([-2**63 - 1] * N)", must_contain="placement")),
        ("max-load", _raises("SIM.max_load([0] * (N - 1) + [2**70])", must_contain="placement")),
        ("batch", _raises("SIM.simulate_batch([[2**64] * N] * 2)", must_contain="placements")),
        ("move-group", _raises("pl.IncrementalSimulator(SIM, P).move(list(range(N - 1)) + [2**64], 1)")),
    ])


def test_out_of_range_integer_arguments_are_one_line_value_errors():
    # Regression (fixed); it was: an int argument of the right type but outside the C++ parameter's range (a
    # negative seed, 2**63 ops or devices) is bad input, promised as ValueError with a one-line message naming
    # the argument; it is answered by pybind11's overload-resolution TypeError "...(): incompatible function
    # arguments. The following argument types are supported: 1. (self: placelab._core.Simulator, seed: int) ->
    # ..." over several lines, which names no argument at fault.
    must_pass([
        ("random-seed-neg", _raises("SIM.random_placement(-1)", must_contain="seed")),
        ("random-seed-2_64", _raises("SIM.random_placement(2**64)", must_contain="seed")),
        ("place-seed-neg", _raises("pl.place(SIM, 'random', seed=-1)", must_contain="seed")),
        ("train-seed-2_64", _raises("pl.train('gdp', [(G, C)], steps=1, seed=2**64)", must_contain="seed")),
        ("move-op-2_63", _raises("pl.IncrementalSimulator(SIM, P).move(2**63, 0)", must_contain="op")),
        ("route-2_63", _raises("C.route(2**63, 0)", must_contain="device")),
        ("group-by-size-2_63", _raises("pl.group_by_size(G, 2**63)", must_contain="max_groups")),
        ("stream-2_63", _raises("SIM.simulate_stream(P, 2**63)", must_contain="micro")),
        ("checkpoints-2_63", _raises("pl.IncrementalSimulator(SIM, P, 2**63)", must_contain="checkpoints")),
    ])


def test_non_string_keys_in_a_free_form_dict_are_refused():
    # Regression (fixed); it was: measured_s maps device kinds to seconds; a non-str key (1, None, True) is a
    # wrong Python type, yet graph_from_dict accepts it as the kind "1", "null" or "true" (json.dumps coerces
    # keys), so the measurement silently applies to no device. Elsewhere the same coercion turns {None: 1}
    # into the message 'unknown field "null"'. Cause: to_json (python/src/convert.cpp) relies on json.dumps,
    # which stringifies int, float, bool and None keys.
    must_pass([
        ("measured-int-key", _raises("pl.graph_from_dict(at(GD, ('ops', 3, 'measured_s'), {1: 0.5}))",
                                     ("ValueError", "TypeError"))),
        ("measured-none-key", _raises("pl.graph_from_dict(at(GD, ('ops', 3, 'measured_s'), {None: 0.5}))",
                                      ("ValueError", "TypeError"))),
        ("measured-bool-key", _raises("pl.graph_from_dict(at(GD, ('ops', 3, 'measured_s'), {True: 0.5}))",
                                      ("ValueError", "TypeError"))),
    ])


def test_viz_and_tables_helpers_check_their_arguments():
    # Regression (fixed); it was: placelab.viz and placelab.tables index their dict arguments directly: a
    # trace or result without the expected keys, or None for the simulator, gives KeyError 'ops' /
    # AttributeError "'NoneType' object has no attribute 'graph'" instead of the promised ValueError/TypeError
    # naming the argument.
    tr, r = "tr = SIM.trace(P)\n", "r = SIM.simulate(P)\n"
    vt = "from placelab import viz\n"
    must_pass([
        ("timeline-empty-trace", vt + _raises("viz.timeline(SIM, {})", ("ValueError", "TypeError"))),
        ("timeline-simulator-none", tr + vt + _raises("viz.timeline(None, tr)", ("ValueError", "TypeError"))),
        ("link-utilisation-empty", vt + _raises("viz.link_utilisation(SIM, {})", ("ValueError", "TypeError"))),
        ("training-curves-unknown-key", vt + _raises("viz.training_curves([{'reward': 1.0}], keys=['nope'])",
                                                     ("ValueError", "TypeError"))),
        ("results-frame-empty-result", _raises("pl.results_frame({'a': {}})", ("ValueError", "TypeError"))),
        ("devices-frame-empty-result", _raises("pl.devices_frame(SIM, {})", ("ValueError", "TypeError"))),
        ("devices-frame-simulator-none", r + _raises("pl.devices_frame(None, r)", ("ValueError", "TypeError"))),
    ])


def test_viz_path_in_a_missing_folder_is_a_value_error():
    # Regression (fixed); it was: "Every file argument takes a str or a pathlib.Path; bad input raises
    # ValueError (with the core's message) or TypeError": a plot's `path` in a folder that does not exist
    # raises matplotlib's FileNotFoundError (the core's writers answer ValueError "...: cannot be written
    # (does its folder exist?)").
    must_pass([
        ("link-utilisation", "r = SIM.simulate(P)\nfrom placelab import viz\n"
         + _raises("viz.link_utilisation(SIM, r, path=TMP + '/no/such/x.png')", ("ValueError", "TypeError"))),
    ])


@pytest.mark.parametrize("sweep", sorted(SWEEPS))
def test_sweep_keeps_the_promise(sweep):
    cases = [c for c in SWEEPS[sweep]() if c[0] not in KNOWN]
    if not cases:
        pytest.skip("no cases (data not found)")
    assert len({c[0] for c in cases}) == len(cases), "duplicate case ids"
    assert not any(";" in c[0] for c in cases)
    check(cases, timeout=40.0)


if __name__ == "__main__":  # exploration: python3 test_python_malformed.py [sweep ...]
    names = sys.argv[1:] or sorted(SWEEPS)
    total = 0
    for name in names:
        cases = SWEEPS[name]()
        total += len(cases)
        res = run_cases(cases, 60.0)
        for c in cases:
            p = problem(c, res[c[0]])
            if p:
                print(name, "|", p[:400])
            elif "-v" in os.environ.get("MALFORMED_DUMP", "") and res[c[0]]["outcome"] == "exc":
                r = res[c[0]]
                print("DUMP", name, "|", c[0], "|", r["type"], "|", r["msg"][:250].replace("\n", "\\n"))
        print("##", name, len(cases), file=sys.stderr)
    print("## total", total, file=sys.stderr)
