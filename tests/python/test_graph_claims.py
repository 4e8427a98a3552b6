# What docs/formats.md, docs/graph_transforms.md and docs/zoo.md promise about graphs, checked
# from the docs alone: the placelab.graph format (round trips, defaults, every documented error),
# topo_order's tie rule, stats, expand_training's structure and arithmetic, the coarsenings'
# grouping and aggregation rules (recomputed here in plain Python), expand_placement and compose,
# and the zoo's parameter ranges and op counts. Seeded random graphs of 2-12 ops; every expected
# value is computed independently of the core.
import heapq
import json
import math
import random
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

import placelab

DOCS = Path(__file__).resolve().parents[2] / "docs"
OP_DEFAULTS = {"type": "Op", "phase": "forward", "flops": 0.0, "bytes_read": 0.0, "bytes_written": 0.0,
               "output_bytes": 0.0, "param_bytes": 0.0, "temp_bytes": 0.0, "colocation": None,
               "layer": None, "pinned_kind": None, "measured_s": None}
PHASES = ["forward", "backward", "update"]
NO_CLASS = -1


# ---------------------------------------------------------------------------------------------
# Random graphs (placelab.graph documents)

def awkward(rng):
    """A float whose shortest representation is long: tests bit-exact printing."""
    return rng.random() * 10.0 ** rng.randint(-6, 12)


def random_doc(rng, n=None, forward_only=False, integral=False, pins=True, comm=None):
    """A random DAG as a placelab.graph dict. Op ids are a random permutation of a layered order, so
    topo_order is not the identity. integral=True keeps every amount a small integer (or a dyadic
    time) so that sums are exact in any order."""
    n = n or rng.randint(2, 12)
    perm = list(range(n))
    rng.shuffle(perm)  # perm[k] = op id of the k-th op in some topological order
    amount = (lambda: float(rng.randint(0, 50))) if integral else (lambda: awkward(rng))
    ops = []
    for i in range(n):
        op = {"name": f"op{i}" if rng.random() < 0.8 else f"n/{i}.x"}
        for f in ["flops", "bytes_read", "bytes_written", "output_bytes", "param_bytes", "temp_bytes"]:
            if rng.random() < 0.6:
                op[f] = amount()
        if rng.random() < 0.7:
            op["type"] = rng.choice(["MatMul", "Relu", "Op", "Conv2D"])
        if not forward_only and rng.random() < 0.4:
            op["phase"] = rng.choice(PHASES)
        if rng.random() < 0.4:
            op["colocation"] = rng.randint(0, 4)
        if rng.random() < 0.5:
            op["layer"] = rng.randint(0, 3)
        if pins and rng.random() < 0.15:
            op["pinned_kind"] = rng.choice(["cpu", "gpu"])
        if rng.random() < 0.5:
            kinds = [k for k in ["cpu", "gpu"] if rng.random() < 0.7]
            op["measured_s"] = {k: (rng.randint(0, 64) / 8.0 if integral else awkward(rng) * 1e-9) for k in kinds}
        ops.append(op)
    edges = []
    if comm is None:
        comm = rng.random() < 0.5
    p = rng.uniform(0.15, 0.6)
    for a in range(n):
        for b in range(a + 1, n):
            if rng.random() < p:
                e = {"src": perm[a], "dst": perm[b]}
                if rng.random() < 0.8:
                    e["bytes"] = amount()
                if comm:
                    e["comm_s"] = rng.randint(0, 16) / 8.0 if integral else awkward(rng) * 1e-9
                if rng.random() < 0.3:
                    e["src"] = ops[e["src"]]["name"]
                if rng.random() < 0.3:
                    e["dst"] = ops[e["dst"]]["name"]
                edges.append(e)
    rng.shuffle(edges)
    doc = {"format": "placelab.graph", "version": 1, "name": f"g{rng.randint(0, 999)}", "ops": ops}
    if edges or rng.random() < 0.5:
        doc["edges"] = edges
    return doc


def full_op(op):
    d = dict(OP_DEFAULTS)
    d.update(op)
    if d["measured_s"] == {}:  # an empty table is no measured time
        d["measured_s"] = None
    return d


def op_index(doc, ref):
    if isinstance(ref, str):
        return [o["name"] for o in doc["ops"]].index(ref)
    return ref


def edge_list(doc):
    """(src, dst, bytes, comm_s) per edge, endpoints as indices."""
    return [(op_index(doc, e["src"]), op_index(doc, e["dst"]), e.get("bytes", 0.0), e.get("comm_s"))
            for e in doc.get("edges", [])]


def seeds(k, base):
    return [base + i for i in range(k)]


# ---------------------------------------------------------------------------------------------
# placelab.graph format

@pytest.mark.parametrize("seed", seeds(40, 100))
def test_dict_round_trip_preserves_every_field_and_defaults(seed):
    """formats.md: op fields and their defaults (`type` "Op", `phase` forward, amounts 0, no class /
    layer / pin / measured); edges by index or name; "Writing omits fields equal to their defaults and
    prints numbers with the shortest representation that reads back exactly"."""
    rng = random.Random(seed)
    doc = random_doc(rng)
    g = placelab.graph_from_dict(doc)
    out = g.to_dict()
    assert out["format"] == "placelab.graph" and out["version"] == 1 and out["name"] == doc["name"]
    assert len(out["ops"]) == len(doc["ops"])
    for i, (given, written) in enumerate(zip(doc["ops"], out["ops"])):
        assert full_op(written) == full_op(given), f"op {i}"
    assert sorted(edge_list(out), key=repr) == sorted(edge_list(doc), key=repr)
    for e in out.get("edges", []):  # a control edge's bytes (0) and absent comm_s are defaults
        assert e.get("bytes", 1) != 0 and ("comm_s" not in e or e["comm_s"] is not None)
    # The numpy views agree with the document.
    full = [full_op(o) for o in doc["ops"]]
    for f in ["flops", "bytes_read", "bytes_written", "output_bytes", "param_bytes", "temp_bytes"]:
        assert list(getattr(g, f)) == [o[f] for o in full], f
    assert list(g.phase) == [PHASES.index(o["phase"]) for o in full]
    assert list(g.colocation) == [NO_CLASS if o["colocation"] is None else o["colocation"] for o in full]
    assert list(g.layer) == [NO_CLASS if o["layer"] is None else o["layer"] for o in full]
    assert g.pinned_kinds == [o["pinned_kind"] or "" for o in full]
    assert g.op_types == [o["type"] for o in full]
    # And again: graph -> dict -> graph is the identity, edge order included.
    again = placelab.graph_from_dict(out).to_dict()
    assert again == out


def test_writing_omits_defaults():
    """formats.md: "Writing gives every op's `name` and `type` and the `edges` list (empty or not), omits
    the other fields equal to their defaults" (op fields in brackets in the table, an edge's bytes 0)."""
    doc = {"format": "placelab.graph", "version": 1, "name": "d",
           "ops": [{"name": "a", "type": "Op", "phase": "forward", "flops": 0.0, "output_bytes": 0.0},
                   {"name": "b"}],
           "edges": [{"src": 0, "dst": 1, "bytes": 0.0}]}
    out = placelab.graph_from_dict(doc).to_dict()
    assert out["ops"] == [{"name": "a", "type": "Op"}, {"name": "b", "type": "Op"}]
    assert out["edges"] == [{"src": 0, "dst": 1}]
    alone = dict(doc, ops=[{"name": "a", "type": "MatMul"}], edges=[])
    assert placelab.graph_from_dict(alone).to_dict()["edges"] == []


@pytest.mark.parametrize("seed", seeds(15, 200))
def test_file_round_trip_is_bit_exact(seed, tmp_path):
    """formats.md: "read(write(g)) == g bit for bit" (both write spellings, str and Path)."""
    rng = random.Random(seed)
    g = placelab.graph_from_dict(random_doc(rng))
    p = tmp_path / "g.json"
    g.write(p)
    g2 = placelab.read_graph(str(p))
    placelab.write_graph(g2, str(tmp_path / "h.json"))
    g3 = placelab.read_graph(tmp_path / "h.json")
    for h in (g2, g3):
        assert h.to_dict() == g.to_dict()
        for f in ["flops", "bytes_read", "bytes_written", "output_bytes", "param_bytes", "temp_bytes",
                  "edge_bytes", "edge_src", "edge_dst"]:
            assert np.array_equal(getattr(h, f), getattr(g, f)), f
            assert getattr(h, f).tobytes() == getattr(g, f).tobytes(), f
    assert (tmp_path / "g.json").read_text() == (tmp_path / "h.json").read_text()


def test_documented_example_reads():
    """formats.md: the example document (edges by index and by name) is a valid graph."""
    text = (DOCS / "formats.md").read_text()
    block = re.search(r"## `placelab.graph` version 1\s+```json\n(.*?)```", text, re.S).group(1)
    doc = json.loads(block)
    g = placelab.graph_from_dict(doc)
    assert g.num_ops == 3 and g.num_edges == 2
    assert list(g.edge_src) == [0, 1] and list(g.edge_dst) == [1, 2]
    assert list(g.colocation) == [NO_CLASS, 3, 3] and list(g.phase) == [0, 0, 1]


def base_doc():
    return {"format": "placelab.graph", "version": 1, "name": "t",
            "ops": [{"name": "a"}, {"name": "b", "flops": 1.0}, {"name": "c"}],
            "edges": [{"src": 0, "dst": 1, "bytes": 4.0}, {"src": 1, "dst": 2}]}


def mutate(path_fn):
    doc = base_doc()
    path_fn(doc)
    return doc


# (case id, mutation, substrings the message must contain)
DICT_ERRORS = [
    ("unknown op field", lambda d: d["ops"][1].update(flop=1.0), ["ops[1]", "flop", "param_bytes"]),
    ("unknown edge field", lambda d: d["edges"][0].update(byte=1.0), ["edges[0]", "byte"]),
    ("unknown top field", lambda d: d.update(extra=1), ["extra", "ops"]),
    ("negative flops", lambda d: d["ops"][1].update(flops=-2.0), ["ops[1].flops", ">= 0"]),
    ("negative bytes_read", lambda d: d["ops"][2].update(bytes_read=-1.0), ["ops[2].bytes_read"]),
    ("negative output_bytes", lambda d: d["ops"][0].update(output_bytes=-1.0), ["ops[0].output_bytes"]),
    ("negative param_bytes", lambda d: d["ops"][0].update(param_bytes=-5.0), ["ops[0].param_bytes"]),
    ("negative temp_bytes", lambda d: d["ops"][0].update(temp_bytes=-5.0), ["ops[0].temp_bytes"]),
    ("negative measured", lambda d: d["ops"][1].update(measured_s={"gpu": -1.0}), ["ops[1].measured_s"]),
    ("negative edge bytes", lambda d: d["edges"][1].update(bytes=-3.0), ["edges[1].bytes"]),
    ("negative comm_s", lambda d: d["edges"][0].update(comm_s=-3.0), ["edges[0].comm_s"]),
    ("dangling index", lambda d: d["edges"][1].update(dst=7), ["edges[1]"]),
    ("negative index", lambda d: d["edges"][1].update(src=-1), ["edges[1]"]),
    ("dangling name", lambda d: d["edges"][0].update(src="zz"), ["edges[0]", "zz"]),
    ("self edge", lambda d: d["edges"].append({"src": 2, "dst": "c"}), [("edges[2]", "edge 2")]),
    ("duplicate edge", lambda d: d["edges"].append({"src": "a", "dst": 1}), [("edges[2]", "edge 2")]),
    ("duplicate name", lambda d: d["ops"][2].update(name="a"), ["ops[2]", "\"a\""]),
    ("empty name", lambda d: d["ops"][1].update(name=""), [("ops[1]", "op 1")]),
    ("missing op name", lambda d: d["ops"][1].pop("name"), ["ops[1]", "name"]),
    ("no ops", lambda d: d.update(ops=[], edges=[]), ["ops"]),
    ("missing ops", lambda d: (d.pop("ops"), d.pop("edges")), ["ops"]),
    ("missing name", lambda d: d.pop("name"), ["name"]),
    ("missing edge dst", lambda d: d["edges"][0].pop("dst"), ["edges[0]", "dst"]),
    ("bad phase", lambda d: d["ops"][0].update(phase="sideways"), ["ops[0].phase"]),
    # Naming the expected format is taken as enough here (the doc's "naming the supported versions"
    # reads most naturally for `version`).
    ("wrong format", lambda d: d.update(format="placelab.cluster"), ["placelab.graph"]),
    ("wrong version", lambda d: d.update(version=2), ["2", "1"]),
    ("missing version", lambda d: d.pop("version"), ["version"]),
]


@pytest.mark.parametrize("case", DICT_ERRORS, ids=[c[0] for c in DICT_ERRORS])
def test_documented_errors_name_the_place(case):
    """formats.md: "Readers are strict" (unknown fields listing the known ones, wrong format/version,
    amounts >= 0) and "every error names the file and the JSON path at fault, e.g.
    `g.json: ops[3].flops: is -2, must be >= 0`"; graph validation: at least one op, unique
    non-empty names, no dangling, self or duplicate edges. python.md: bad input raises ValueError."""
    _, fn, needles = case
    doc = mutate(fn)
    with pytest.raises(ValueError) as e:
        placelab.graph_from_dict(doc, "mine.json")
    msg = str(e.value)
    assert "mine.json" in msg, msg
    for s in needles:
        # A tuple: either spelling of the place (the JSON path, or the op / edge number that graph
        # validation, shared with the zoo and code, uses).
        assert any(x in msg for x in (s if isinstance(s, tuple) else (s,))), (s, msg)


def test_cycle_error_lists_the_ops_in_dataflow_order():
    """formats.md: "no cycle (the error lists the ops on one, in dataflow order)"."""
    doc = {"format": "placelab.graph", "version": 1, "name": "cyc",
           "ops": [{"name": n} for n in ["head", "p", "q", "r", "tail"]],
           "edges": [{"src": "head", "dst": "p"}, {"src": "p", "dst": "q"}, {"src": "q", "dst": "r"},
                     {"src": "r", "dst": "p"}, {"src": "r", "dst": "tail"}]}
    with pytest.raises(ValueError) as e:
        placelab.graph_from_dict(doc, "cyc.json")
    msg = str(e.value)
    names = re.findall(r"\b([pqr])\b", msg)
    assert set(names) >= {"p", "q", "r"}, msg
    # Dataflow order along the cycle p -> q -> r -> p: some rotation of p, q, r.
    seq = [n for n in names if n in "pqr"][:3]
    assert seq in (["p", "q", "r"], ["q", "r", "p"], ["r", "p", "q"]), msg


FILE_ERRORS = [
    # (case id, raw file text, substrings the message must contain)
    ("duplicate key", '{"format": "placelab.graph", "version": 1, "name": "t", '
                      '"ops": [{"name": "a", "flops": 1, "flops": 2}]}', ["flops", "ops[0]"]),
    ("duplicate top key", '{"format": "placelab.graph", "version": 1, "name": "t", "name": "u", '
                          '"ops": [{"name": "a"}]}', ["name"]),
    ("int64 overflow", '{"format": "placelab.graph", "version": 1, "name": "t", '
                       '"ops": [{"name": "a", "colocation": 99999999999999999999}]}',
     [("99999999999999999999", 1e20), "ops[0].colocation"]),
    ("version overflow", '{"format": "placelab.graph", "version": 18446744073709551617, "name": "t", '
                         '"ops": [{"name": "a"}]}', [("18446744073709551617", 18446744073709551617.0)]),
    ("infinite number", '{"format": "placelab.graph", "version": 1, "name": "t", '
                        '"ops": [{"name": "a", "flops": 1e999}]}', []),  # a parse error: no path
    ("NaN literal", '{"format": "placelab.graph", "version": 1, "name": "t", '
                    '"ops": [{"name": "a", "flops": NaN}]}', []),
    ("negative amount", '{"format": "placelab.graph", "version": 1, "name": "t", '
                        '"ops": [{"name": "a"}, {"name": "b"}, {"name": "c"}, {"name": "d", "flops": -2}]}',
     ["ops[3].flops", ">= 0"]),
]


@pytest.mark.parametrize("case", FILE_ERRORS, ids=[c[0] for c in FILE_ERRORS])
def test_file_errors_name_file_and_path(case, tmp_path):
    """formats.md: "a key given twice in one object is an error naming it"; "integers ... must fit in
    int64: a larger one is an error quoting it (from 2^64 on, as the nearest double ...), never
    wrapped"; "numbers must be finite"; "every error names the file and the JSON path at fault"."""
    _, text, needles = case
    p = tmp_path / "bad_graph.json"
    p.write_text(text)
    with pytest.raises(ValueError) as e:
        placelab.read_graph(p)
    msg = str(e.value)
    assert "bad_graph.json" in msg, msg
    msg = msg.split("bad_graph.json", 1)[1]
    for s in needles:
        if isinstance(s, tuple):
            # An integer past 2^64: quoted exactly or, as formats.md now says ("from 2^64 on, as the
            # nearest double"), as that double; either way not wrapped.
            text, near = s
            nums = [float(x) for x in re.findall(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?", msg)]
            assert text in msg or near in nums, (s, msg)
        else:
            assert s in msg, (s, msg)


def test_nan_in_dict_is_value_error():
    """formats.md: numbers must be finite; python.md: bad input raises ValueError, never a crash."""
    for v in [float("nan"), float("inf")]:
        doc = base_doc()
        doc["ops"][1]["flops"] = v
        with pytest.raises(ValueError):
            placelab.graph_from_dict(doc)


# ---------------------------------------------------------------------------------------------
# topo_order and stats

def successors(n, edges):
    succ = [set() for _ in range(n)]
    for s, d, *_ in edges:
        succ[s].add(d)
    return succ


def min_id_topo(n, edges):
    succ = successors(n, edges)
    indeg = [0] * n
    for s in range(n):
        for d in succ[s]:
            indeg[d] += 1
    heap = [i for i in range(n) if indeg[i] == 0]
    heapq.heapify(heap)
    out = []
    while heap:
        u = heapq.heappop(heap)
        out.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                heapq.heappush(heap, v)
    return out


def graph_edges(g):
    return list(zip(g.edge_src.tolist(), g.edge_dst.tolist()))


@pytest.mark.parametrize("seed", seeds(30, 300))
def test_topo_order_breaks_ties_by_smaller_id_and_stats(seed):
    """formats.md: "topo_order() is the unique topological order that breaks ties by the smaller op
    id"; zoo.md: GraphStats sums FLOPs, parameter bytes and output bytes over ops; depth in ops on
    the longest path."""
    rng = random.Random(seed)
    g = placelab.graph_from_dict(random_doc(rng, integral=True))
    edges = graph_edges(g)
    assert list(g.topo_order) == min_id_topo(g.num_ops, edges)
    s = g.stats()
    assert s["ops"] == g.num_ops and s["edges"] == g.num_edges
    assert s["flops"] == sum(g.flops) and s["param_bytes"] == sum(g.param_bytes)
    assert s["output_bytes"] == sum(g.output_bytes)
    assert s["edge_bytes"] == sum(g.edge_bytes)
    depth = [1] * g.num_ops
    for u in min_id_topo(g.num_ops, edges):
        for a, b in edges:
            if a == u:
                depth[b] = max(depth[b], depth[u] + 1)
    assert s["depth"] == max(depth)
    ph = list(g.phase)
    assert (s["forward_ops"], s["backward_ops"], s["update_ops"]) == (ph.count(0), ph.count(1), ph.count(2))


# ---------------------------------------------------------------------------------------------
# expand_training

def expected_training(doc, osf=2.0, bff=2.0, upb=2.5):
    """graph_transforms.md's rules, computed from the forward document."""
    ops = [full_op(o) for o in doc["ops"]]
    n = len(ops)
    edges = edge_list(doc)
    classes = [o["colocation"] for o in ops]
    nxt = max([c for c in classes if c is not None], default=-1) + 1
    cls = []
    for c in classes:
        if c is None:
            c, nxt = nxt, nxt + 1
        cls.append(c)
    in_bytes = [0.0] * n
    for s, d, b, _ in edges:
        in_bytes[d] += b
    fwd, bwd, upd = [], [], []
    for f, o in enumerate(ops):
        fwd.append(dict(o, colocation=cls[f]))
        bwd.append({"name": o["name"] + "/grad", "type": o["type"] + "Grad", "phase": "backward",
                    "flops": bff * o["flops"], "bytes_read": bff * o["bytes_read"],
                    "bytes_written": bff * o["bytes_written"],
                    "output_bytes": in_bytes[f] + o["param_bytes"], "temp_bytes": o["temp_bytes"],
                    "param_bytes": 0.0, "measured_s": None, "colocation": cls[f], "layer": o["layer"],
                    "pinned_kind": o["pinned_kind"]})
    upd_of = {}
    for f, o in enumerate(ops):
        p = o["param_bytes"]
        if p > 0:
            upd_of[f] = 2 * n + len(upd)
            st = osf * p
            upd.append({"name": o["name"] + "/update", "type": o["type"] + "Update", "phase": "update",
                        "param_bytes": st, "flops": upb * p, "bytes_read": 2 * p + st, "bytes_written": p + st,
                        "output_bytes": 0.0, "colocation": cls[f], "layer": o["layer"],
                        "pinned_kind": o["pinned_kind"]})
    eds = {}
    for s, d, b, c in edges:
        eds[(s, d)] = (b, c)
        eds[(n + d, n + s)] = (b, "any")
    for f, o in enumerate(ops):
        eds[(f, n + f)] = (o["output_bytes"], "any")
        if f in upd_of:
            eds[(n + f, upd_of[f])] = (o["param_bytes"], "any")
    return fwd + bwd + upd, eds


@pytest.mark.parametrize("seed", seeds(40, 400))
def test_expand_training_structure(seed):
    """graph_transforms.md, Training expansion: forward op f keeps id and fields (a fresh class from
    the largest + 1 in op order when it has none); backward op n + f "<f>/grad", "<Type>Grad", FLOPs
    and bytes x backward_flops_factor, output_bytes = in-edge bytes + param_bytes, temp as forward,
    no params, no measured times, class/layer/pin of f; update ops after, only for param_bytes > 0,
    state = factor x params, flops = 2.5 x params, read 2p + s, written p + s; edges: forward (with
    comm_s), reversed gradient edges, f -> f/grad (output_bytes), f/grad -> f/update (param_bytes);
    named "<name>_training"."""
    rng = random.Random(seed)
    doc = random_doc(rng, forward_only=True, integral=rng.random() < 0.5)
    if rng.random() < 0.5:
        factors = dict(optimizer_state_factor=rng.choice([0.0, 1.0, 3.0]),
                       backward_flops_factor=rng.choice([1.0, 3.0]), update_flops_per_param_byte=rng.choice([0.5, 4.0]))
        args = (factors["optimizer_state_factor"], factors["backward_flops_factor"],
                factors["update_flops_per_param_byte"])
    else:
        factors, args = {}, (2.0, 2.0, 2.5)
    g = placelab.graph_from_dict(doc)
    t = placelab.expand_training(g, **factors)
    out = t.to_dict()
    assert out["name"] == doc["name"] + "_training"
    want_ops, want_edges = expected_training(doc, *args)
    assert len(out["ops"]) == len(want_ops)
    for i, (got, want) in enumerate(zip(out["ops"], want_ops)):
        got = full_op(got)
        for k, v in want.items():
            if k == "output_bytes":  # a sum: its order of addition is not documented
                assert math.isclose(got[k], v, rel_tol=1e-14), (i, k, got[k], v)
            else:
                assert got[k] == v, (i, k, got[k], v)
    got_edges = {(s, d): (b, c) for s, d, b, c in edge_list(out)}
    assert set(got_edges) == set(want_edges)
    for k, (b, c) in want_edges.items():
        assert got_edges[k][0] == b, (k, got_edges[k], b)
        if c != "any":
            assert got_edges[k][1] == c, (k, got_edges[k], c)
    # Resident memory = params (forward) + optimizer state (update ops).
    n = g.num_ops
    params = sum(g.param_bytes)
    assert math.isclose(sum(t.param_bytes), params * (1 + args[0]), rel_tol=1e-12)
    assert list(t.phase) == [0] * n + [1] * n + [2] * (t.num_ops - 2 * n)


def test_expand_training_fresh_classes_continue_after_largest():
    """graph_transforms.md: an op without a class "gets a fresh class (numbered from the largest existing
    class + 1, in op order)"; the gradient and update share the forward op's class."""
    doc = {"format": "placelab.graph", "version": 1, "name": "c",
           "ops": [{"name": "a"}, {"name": "b", "colocation": 7, "param_bytes": 4.0}, {"name": "c"},
                   {"name": "d", "colocation": 2}],
           "edges": [{"src": 0, "dst": 1, "bytes": 3.0}, {"src": 1, "dst": 2}, {"src": 2, "dst": 3}]}
    t = placelab.expand_training(placelab.graph_from_dict(doc))
    assert list(t.colocation) == [8, 7, 9, 2, 8, 7, 9, 2, 7]


def test_expand_training_errors():
    """graph_transforms.md: "an op of another phase is an error"; "Generated names clashing with existing
    ones are an error"."""
    doc = base_doc()
    doc["ops"][2]["phase"] = "backward"
    with pytest.raises(ValueError):
        placelab.expand_training(placelab.graph_from_dict(doc))
    doc = base_doc()
    doc["ops"][2]["name"] = "a/grad"
    with pytest.raises(ValueError):
        placelab.expand_training(placelab.graph_from_dict(doc))
    doc = base_doc()
    doc["ops"][1]["param_bytes"] = 4.0
    doc["ops"][2]["name"] = "b/update"
    with pytest.raises(ValueError):
        placelab.expand_training(placelab.graph_from_dict(doc))


# ---------------------------------------------------------------------------------------------
# Coarsening

def scc_partition(n, edges, label):
    """The finest acyclic coarsening of the requested groups: merge the SCCs of the quotient graph.
    Returns group id (any numbering) per op."""
    groups = sorted(set(label))
    gid = {l: i for i, l in enumerate(groups)}
    k = len(groups)
    q = [set() for _ in range(k)]
    for s, d in edges:
        a, b = gid[label[s]], gid[label[d]]
        if a != b:
            q[a].add(b)
    # Reachability closure (k <= 12): a ~ b iff each reaches the other.
    reach = [set([i]) for i in range(k)]
    for i in range(k):
        stack = [i]
        while stack:
            u = stack.pop()
            for v in q[u]:
                if v not in reach[i]:
                    reach[i].add(v)
                    stack.append(v)
    comp = {}
    for i in range(k):
        comp[i] = min(j for j in range(k) if j in reach[i] and i in reach[j])
    return [comp[gid[label[o]]] for o in range(n)]


def canonical(g, part):
    """Renumber groups in the order of their first member in topo_order (the documented numbering)."""
    ren = {}
    for u in g.topo_order.tolist():
        if part[u] not in ren:
            ren[part[u]] = len(ren)
    return [ren[p] for p in part]


def check_aggregation(g, c):
    """The Aggregation table and edge-merging rules of graph_transforms.md, member by member."""
    d = g.to_dict()
    ops = [full_op(o) for o in d["ops"]]
    cd = c.graph.to_dict()
    cops = [full_op(o) for o in cd["ops"]]
    grp = c.group_of.tolist()
    k = c.graph.num_ops
    assert sorted(set(grp)) == list(range(k))
    members = [[o for o in range(g.num_ops) if grp[o] == i] for i in range(k)]
    topo = g.topo_order.tolist()
    # Numbering: by first member in topo_order.
    assert canonical(g, grp) == grp
    succ = successors(g.num_ops, graph_edges(g))
    # Colocation: classes sharing a group are joined, numbered by the smallest original class.
    parent = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x
    for m in members:
        cs = [ops[o]["colocation"] for o in m if ops[o]["colocation"] is not None]
        for a in cs[1:]:
            ra, rb = find(a), find(cs[0])
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    for i, m in enumerate(members):
        co = cops[i]
        names = [ops[o]["name"] for o in m]
        if len(m) == 1:
            assert co["name"] == names[0]
        else:
            firsts = {names[0], ops[min(m, key=topo.index)]["name"]}
            assert any(co["name"] == f"{f}+{len(m) - 1}" or co["name"].startswith(f"{f}+{len(m) - 1}#")
                       for f in firsts), (co["name"], names)
        types = {ops[o]["type"] for o in m}
        assert co["type"] == (types.pop() if len(types) == 1 else "Group"), (i, co["type"])
        phases = {ops[o]["phase"] for o in m}
        assert co["phase"] == next(p for p in PHASES if p in phases)
        for f in ["flops", "bytes_read", "bytes_written", "param_bytes", "temp_bytes"]:
            assert co[f] == sum(ops[o][f] for o in m), (i, f)
        exposed = [o for o in m if not succ[o] or any(grp[v] != i for v in succ[o])]
        assert co["output_bytes"] == sum(ops[o]["output_bytes"] for o in exposed), (i, "output_bytes")
        meas = {}
        kinds = set().union(*[set((ops[o]["measured_s"] or {}).keys()) for o in m])
        for kd in kinds:
            if all(ops[o]["measured_s"] and kd in ops[o]["measured_s"] for o in m):
                meas[kd] = sum(ops[o]["measured_s"][kd] for o in m)
        assert (co["measured_s"] or {}) == meas, (i, co["measured_s"], meas)
        cs = {ops[o]["colocation"] for o in m} - {None}
        want_c = find(min(cs)) if cs else None
        assert co["colocation"] == want_c, (i, co["colocation"], want_c)
        layers = {ops[o]["layer"] for o in m}
        assert co["layer"] == (layers.pop() if len(layers) == 1 else None), (i, "layer")
        pins = {ops[o]["pinned_kind"] for o in m} - {None}
        assert len(pins) <= 1
        assert co["pinned_kind"] == (pins.pop() if pins else None), (i, "pin")
    # Edges: one per ordered group pair; bytes = sum over producers of the largest edge to that group.
    per = defaultdict(lambda: defaultdict(list))
    for s, dd, b, cm in edge_list(d):
        if grp[s] != grp[dd]:
            per[(grp[s], grp[dd])][s].append((b, cm))
    got = {(s, dd): (b, cm) for s, dd, b, cm in edge_list(cd)}
    assert set(got) == set(per)
    for key, prod in per.items():
        b = sum(max(x[0] for x in lst) for lst in prod.values())
        assert got[key][0] == b, (key, got[key], b)
        comms = [[x[1] for x in lst if x[1] is not None] for lst in prod.values()]
        if any(comms):
            assert got[key][1] == sum(max(cl) for cl in comms if cl), (key, got[key])
        else:
            assert got[key][1] is None
    # Totals preserved exactly.
    for f in ["flops", "bytes_read", "bytes_written", "param_bytes", "temp_bytes"]:
        assert sum(o[f] for o in cops) == sum(o[f] for o in ops), f


def has_conflicting_pins(g, part):
    pins = defaultdict(set)
    for o, p in enumerate(part):
        if g.pinned_kinds[o]:
            pins[p].add(g.pinned_kinds[o])
    return any(len(s) > 1 for s in pins.values())


@pytest.mark.parametrize("seed", seeds(40, 500))
def test_contract_colocation_and_labels(seed):
    """graph_transforms.md: contract_colocation is "one group per colocation class; ops without a class
    stay alone", graph "<name>/colocation"; contract_labels groups equal labels; every grouping is "the
    finest coarsening of the requested groups that is acyclic"; coarse ops numbered by first member in
    topo_order; aggregation table; two different pins in one group are an error."""
    rng = random.Random(seed)
    doc = random_doc(rng, integral=True)
    g = placelab.graph_from_dict(doc)
    n = g.num_ops
    edges = graph_edges(g)
    col = g.colocation.tolist()
    cases = [("colocation", [("c", c) if c != NO_CLASS else ("op", o) for o, c in enumerate(col)],
              lambda: placelab.contract_colocation(g), g.name + "/colocation")]
    labels = [rng.randint(0, max(1, n // 2)) for _ in range(n)]
    cases.append(("labels", labels, lambda: placelab.contract_labels(g, labels, "lab"), None))
    for what, label, run, name in cases:
        want = canonical(g, scc_partition(n, edges, label))
        if has_conflicting_pins(g, want):
            with pytest.raises(ValueError):
                run()
            continue
        c = run()
        assert c.group_of.tolist() == want, what
        if name:
            assert c.graph.name == name
        check_aggregation(g, c)


def expected_chains(g):
    n = g.num_ops
    edges = graph_edges(g)
    succ = successors(n, edges)
    pred = [set() for _ in range(n)]
    for s, d in edges:
        pred[d].add(s)
    pins = g.pinned_kinds
    parent = list(range(n))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x
    for u, v in edges:
        if len(succ[u]) == 1 and len(pred[v]) == 1:
            if pins[u] and pins[v] and pins[u] != pins[v]:
                continue
            parent[find(u)] = find(v)
    return canonical(g, scc_partition(n, edges, [find(o) for o in range(n)]))


@pytest.mark.parametrize("seed", seeds(40, 600))
def test_fuse_chains(seed):
    """graph_transforms.md: fuse_chains merges u with v when v is u's only successor and u v's only
    predecessor, repeatedly (maximal chains); ops pinned to different kinds are never merged; graph
    "<name>/chains"; aggregation rules."""
    rng = random.Random(seed)
    # Sparser graphs have chains.
    doc = random_doc(rng, integral=True)
    if rng.random() < 0.6:
        doc["edges"] = [e for e in doc.get("edges", []) if rng.random() < 0.4]
    g = placelab.graph_from_dict(doc)
    c = placelab.fuse_chains(g)
    assert c.graph.name == g.name + "/chains"
    assert c.group_of.tolist() == expected_chains(g)
    check_aggregation(g, c)
    # "the groups are the maximal such chains": nothing is left to fuse on the coarse graph.
    assert placelab.fuse_chains(c.graph).graph.num_ops == c.graph.num_ops


def size_weights(g):
    if sum(g.flops) > 0:
        return list(g.flops)
    d = [full_op(o) for o in g.to_dict()["ops"]]
    kinds = []
    for o in d:
        for k in (o["measured_s"] or {}):
            if k not in kinds:
                kinds.append(k)
    for k in kinds:
        tot = sum((o["measured_s"] or {}).get(k, 0.0) for o in d)
        if tot > 0:
            return [(o["measured_s"] or {}).get(k, 0.0) for o in d]
    return [1.0] * g.num_ops


@pytest.mark.parametrize("seed", seeds(50, 700))
def test_group_by_size(seed):
    """graph_transforms.md: group_by_size: groups are contiguous runs of topo_order; the result has
    min(max_groups, num_ops) groups and the largest weighs at most total / max_groups + heaviest op;
    adjacent ops pinned to different kinds are cut apart; weights are FLOPs, else measured time on the
    first kind with a positive total, else 1; graph "<name>/groups"."""
    rng = random.Random(seed)
    doc = random_doc(rng, integral=True, pins=rng.random() < 0.3)
    mode = rng.random()
    if mode < 0.3:
        for o in doc["ops"]:
            o.pop("flops", None)
    elif mode < 0.4:
        for o in doc["ops"]:
            o.pop("flops", None)
            o.pop("measured_s", None)
    g = placelab.graph_from_dict(doc)
    n = g.num_ops
    k = rng.randint(1, n + 2)
    c = placelab.group_by_size(g, k)
    assert c.graph.name == g.name + "/groups"
    grp = c.group_of.tolist()
    topo = g.topo_order.tolist()
    seq = [grp[u] for u in topo]
    # Contiguous runs of topo_order, numbered in that order.
    runs = [seq[0]] + [b for a, b in zip(seq, seq[1:]) if a != b]
    assert runs == list(range(c.graph.num_ops)), seq
    pins = g.pinned_kinds
    # Pinned ops of different kinds can never share a group, adjacent in topo_order or not (the doc
    # says "adjacent"; a pin change across unpinned ops must cut as well).
    pinned = [pins[u] for u in topo if pins[u]]
    cuts = sum(1 for a, b in zip(pinned, pinned[1:]) if a != b)
    for a, b in zip(topo, topo[1:]):
        if pins[a] and pins[b] and pins[a] != pins[b]:
            assert grp[a] != grp[b]
    if cuts == 0:
        assert c.graph.num_ops == min(k, n)
        w = size_weights(g)
        tot = sum(w)
        for i in range(c.graph.num_ops):
            assert sum(w[o] for o in range(n) if grp[o] == i) <= tot / k + max(w) + 1e-9, (i, w, grp)
    check_aggregation(g, c)


def test_group_by_size_weight_falls_back_to_measured_kind():
    """graph_transforms.md: with no FLOPs the weight is the measured time on the first kind with a
    positive total. Kind "a" sums to 0, kind "b" is [3, 1, 1, 1, 1, 1]: the smallest capacity for 2
    runs is 4, runs [3, 1] [1, 1, 1, 1]; by op count (weight 1 each) it would be 3 + 3."""
    ops = [{"name": f"o{i}", "measured_s": {"a": 0.0, "b": 1.0}} for i in range(6)]
    ops[0]["measured_s"]["b"] = 3.0
    doc = {"format": "placelab.graph", "version": 1, "name": "m", "ops": ops,
           "edges": [{"src": i, "dst": i + 1} for i in range(5)]}
    c = placelab.group_by_size(placelab.graph_from_dict(doc), 2)
    assert c.group_of.tolist() == [0, 0, 1, 1, 1, 1]
    # With FLOPs the FLOPs decide: [1, 1, 1, 1, 1, 5] -> capacity 5: [1 x5] [5].
    for i, o in enumerate(ops):
        o["flops"] = 5.0 if i == 5 else 1.0
    c = placelab.group_by_size(placelab.graph_from_dict(doc), 2)
    assert c.group_of.tolist() == [0, 0, 0, 0, 0, 1]


@pytest.mark.parametrize("seed", seeds(20, 800))
def test_expand_placement_and_compose(seed):
    """graph_transforms.md: expand_placement gives every op its group's device; compose(first, second)
    chains two coarsenings (second coarsens first.graph) back to the original ops."""
    rng = random.Random(seed)
    g = placelab.graph_from_dict(random_doc(rng, integral=True, pins=False))
    first = placelab.fuse_chains(g) if rng.random() < 0.5 else placelab.contract_colocation(g)
    second = placelab.group_by_size(first.graph, rng.randint(1, first.graph.num_ops))
    both = placelab.compose(first, second)
    assert both.group_of.tolist() == [second.group_of[x] for x in first.group_of.tolist()]
    assert both.graph.to_dict() == second.graph.to_dict()
    coarse = np.array([rng.randint(0, 3) for _ in range(both.graph.num_ops)], dtype=np.int32)
    assert both.expand_placement(coarse).tolist() == [int(coarse[x]) for x in both.group_of.tolist()]
    assert (both.expand_placement(coarse).tolist()
            == first.expand_placement(second.expand_placement(coarse)).tolist())
    with pytest.raises(ValueError):
        both.expand_placement(coarse[:-1] if len(coarse) > 1 else np.zeros(2, dtype=np.int32))
    # Totals preserved through both steps.
    for f in ["flops", "param_bytes", "temp_bytes"]:
        assert sum(getattr(both.graph, f)) == sum(getattr(g, f))


def test_contract_colocation_of_training_graph_merges_layers():
    """graph_transforms.md (Acyclicity caveat): a forward edge and its gradient edge put the classes of
    adjacent layers on a cycle, so contract_colocation of an expand_training graph merges them."""
    doc = {"format": "placelab.graph", "version": 1, "name": "chain",
           "ops": [{"name": f"l{i}", "param_bytes": 4.0} for i in range(4)],
           "edges": [{"src": i, "dst": i + 1, "bytes": 8.0} for i in range(3)]}
    t = placelab.expand_training(placelab.graph_from_dict(doc))
    c = placelab.contract_colocation(t)
    assert c.graph.num_ops == 1
    # Contracting the forward graph first keeps the layers apart.
    assert placelab.contract_colocation(placelab.graph_from_dict(doc)).graph.num_ops == 4


# ---------------------------------------------------------------------------------------------
# Zoo

def zoo_params():
    """(model, param, default, lo, hi, integer) from the tables of docs/zoo.md."""
    text = (DOCS / "zoo.md").read_text()
    out = []
    for block in re.split(r"\n### ", text)[1:]:
        model = re.match(r"`(\w+)`", block).group(1)
        for m in re.finditer(r"\| `--(\w+)` \| ([^|]+) \| .*\(an? (integer|number) in \[([^,]+), ([^\]]+)\]\)",
                             block):
            out.append((model, m.group(1), float(m.group(2)), float(m.group(4)), float(m.group(5)),
                        m.group(3) == "integer"))
    return out


ZOO_PARAMS = zoo_params()


def test_zoo_doc_tables_match_models():
    """zoo.md: each model's parameter table (names and defaults) is what models() reports."""
    assert len(ZOO_PARAMS) > 60
    by = {m["name"]: m["params"] for m in placelab.models()}
    doc_models = {m for m, *_ in ZOO_PARAMS}
    assert doc_models == set(by)
    for model, p, default, *_ in ZOO_PARAMS:
        assert p in by[model], (model, p)
        assert by[model][p][0] == default, (model, p, by[model][p][0], default)
    for model, params in by.items():
        assert set(params) == {p for m, p, *_ in ZOO_PARAMS if m == model}, model


@pytest.mark.parametrize("row", ZOO_PARAMS, ids=[f"{r[0]}-{r[1]}" for r in ZOO_PARAMS])
def test_zoo_parameter_out_of_range_is_an_error(row):
    """zoo.md: "a value out of range, not finite, or not integral for an integer parameter names the
    parameter and its valid range"."""
    model, p, default, lo, hi, integer = row
    bad = [lo - 1 if integer else lo - 0.5, hi + 1 if integer else hi * 2 + 1, float("nan"), float("inf")]
    if integer:
        bad.append(lo + 0.5)
    for v in bad:
        with pytest.raises(ValueError) as e:
            placelab.make_model(model, {p: v})
        assert p in str(e.value), (model, p, v, str(e.value))


def test_zoo_bad_names_and_inconsistent_values():
    """zoo.md: "An unknown model lists the known ones; an unknown parameter lists the model's
    parameters; ... inconsistent values (hidden not a multiple of heads, min_flops above max_flops) name
    both"."""
    with pytest.raises(ValueError) as e:
        placelab.make_model("resnet51")
    assert "resnet50" in str(e.value) and "gnmt" in str(e.value)
    with pytest.raises(ValueError) as e:
        placelab.make_model("resnet50", {"depth": 3})
    assert "depth" in str(e.value) and "image_size" in str(e.value)
    with pytest.raises(ValueError) as e:
        placelab.make_model("bert", {"hidden": 30, "heads": 4, "layers": 1})
    assert "hidden" in str(e.value) and "heads" in str(e.value)
    with pytest.raises(ValueError) as e:
        placelab.make_model("random_dag", {"min_flops": 10.0, "max_flops": 5.0, "ops": 5})
    assert "min_flops" in str(e.value) and "max_flops" in str(e.value)


ZOO_COUNTS = [
    ("resnet50", {"batch": 1, "image_size": 32}, lambda p: 177),
    ("inception_v3", {"batch": 1, "image_size": 75}, lambda p: 315),
    ("bert", {"batch": 1, "seq_len": 4, "layers": 3, "hidden": 16, "heads": 2, "vocab": 50},
     lambda p: 10 + 22 * p["layers"] + 3),
    ("transformer_xl", {"batch": 1, "seq_len": 4, "mem_len": 4, "layers": 2, "hidden": 16, "heads": 2,
                        "inner": 8, "vocab": 300000}, lambda p: 5 + 25 * p["layers"] + 3 + 12),
    ("rnnlm", {"batch": 1, "layers": 2, "steps": 3, "hidden": 8, "vocab": 20},
     lambda p: 2 + 3 * p["layers"] + 14 * p["layers"] * p["steps"] + 2 + 3 * p["steps"]),
    ("gnmt", {"batch": 1, "layers": 3, "steps": 2, "hidden": 8, "vocab": 20},
     lambda p: (p["steps"] * (29 + 14 * (p["layers"] - 1) + max(0, p["layers"] - 2))
                + p["steps"] * (14 * p["layers"] + max(0, p["layers"] - 2) + 6 + 3 * 8 + 1)
                + 4 + 3 * (2 * p["layers"] + 1) + 5 + 2 * 8)),
    ("gnmt", {"batch": 1, "layers": 1, "steps": 2, "hidden": 8, "vocab": 20},
     lambda p: (p["steps"] * (29 + 14 * (p["layers"] - 1) + max(0, p["layers"] - 2))
                + p["steps"] * (14 * p["layers"] + max(0, p["layers"] - 2) + 6 + 3 * 8 + 1)
                + 4 + 3 * (2 * p["layers"] + 1) + 5 + 2 * 8)),
    ("wavenet", {"batch": 1, "seq_len": 8, "layers": 30, "channels": 2, "skip_channels": 2, "classes": 4},
     lambda p: 246),
]


@pytest.mark.parametrize("case", ZOO_COUNTS, ids=[f"{c[0]}-{i}" for i, c in enumerate(ZOO_COUNTS)])
def test_zoo_op_counts_and_conventions(case):
    """zoo.md: the documented op-count formulas; "Forward only": every op forward with no class;
    "Determinism": same name and parameters give the same graph; names unique."""
    model, params, count = case
    g = placelab.make_model(model, params)
    assert g.num_ops == count(params), (model, g.num_ops, count(params))
    assert set(g.phase.tolist()) == {0} and set(g.colocation.tolist()) == {NO_CLASS}
    assert len(set(g.op_names)) == g.num_ops
    assert placelab.make_model(model, params).to_dict() == g.to_dict()


def test_gnmt_table_two_layers_and_training():
    """zoo.md gnmt table: 2 layers (default steps 100) -> 10240 forward ops, 20511 after expand_training."""
    g = placelab.make_model("gnmt", {"layers": 2, "batch": 1, "hidden": 8, "vocab": 20})
    assert g.num_ops == 10240
    assert placelab.expand_training(g).num_ops == 20511


def test_random_dag_rules():
    """zoo.md random_dag: types Input for sources, MatMul for ops with parameters, Add for several inputs,
    Relu otherwise; layer index = the op's layer (width ops per layer); flops in [min, max]; the same
    seed gives the same graph."""
    p = {"ops": 60, "width": 7, "fan_in": 3, "max_skip": 2, "seed": 5, "min_flops": 10.0, "max_flops": 1000.0}
    g = placelab.make_model("random_dag", p)
    assert g.num_ops == 60
    assert g.layer.tolist() == [i // 7 for i in range(60)]
    assert all(10.0 <= f <= 1000.0 for f in g.flops)
    for op in range(g.num_ops):
        npred = len(g.predecessors(op))
        t = g.op_types[op]
        if npred == 0:
            assert t == "Input", op
        elif g.param_bytes[op] > 0:
            assert t == "MatMul", op
        elif npred > 1:
            assert t == "Add", op
        else:
            assert t == "Relu", op
        if op >= 7:
            assert any(g.layer[q] == g.layer[op] - 1 for q in g.predecessors(op))
            assert len(g.predecessors(op)) <= 3
            assert all(g.layer[op] - 2 <= g.layer[q] < g.layer[op] for q in g.predecessors(op))
    assert g.stats()["depth"] == 9


def test_int64_boundary_is_not_wrapped(tmp_path):
    """formats.md: integers "must fit in int64: a larger one is an error quoting it, never wrapped"
    (2^63, just past int64, is quoted; see the overflow cases above for larger ones)."""
    p = tmp_path / "g.json"
    p.write_text('{"format": "placelab.graph", "version": 1, "name": "t", '
                 '"ops": [{"name": "a", "layer": 9223372036854775808}]}')
    with pytest.raises(ValueError) as e:
        placelab.read_graph(p)
    assert "9223372036854775808" in str(e.value) and "ops[0].layer" in str(e.value)


def test_write_through_symlink_and_device(tmp_path):
    """formats.md: "a symbolic link's target is replaced (the link stays, even when its target does not
    exist yet), and a device or pipe such as /dev/null is written through"."""
    g = placelab.graph_from_dict(base_doc())
    link = tmp_path / "link.json"
    target = tmp_path / "sub_target.json"
    link.symlink_to(target)
    g.write(link)
    assert link.is_symlink() and target.is_file()
    assert placelab.read_graph(target).to_dict() == g.to_dict()
    g.write(link)  # again, now that the target exists
    assert link.is_symlink() and placelab.read_graph(link).to_dict() == g.to_dict()
    g.write("/dev/null")
    assert Path("/dev/null").exists() and not Path("/dev/null").is_file()
    assert sorted(x.name for x in tmp_path.iterdir()) == ["link.json", "sub_target.json"]  # no temp left


# ---------------------------------------------------------------------------------------------
# msr-fiddle/dnn-partitioning import

def msr_doc():
    return {
        "maxSizePerFPGA": 1000.0, "maxFPGAs": 2, "maxCPUs": 1,
        "nodes": [
            {"id": 10, "name": "Conv38", "supportedOnFpga": 1, "cpuLatency": 3.5, "fpgaLatency": 0.7,
             "isBackwardNode": 0, "colorClass": 0, "layerId": 2, "size": 64},
            {"id": 4, "name": "AdamOptimizer_w", "supportedOnFpga": False, "cpuLatency": 0.3,
             "fpgaLatency": 0.1, "isBackwardNode": False, "colorClass": 1},
            {"id": 7, "supportedOnFpga": True, "cpuLatency": 1.1, "fpgaLatency": 0.9, "isBackwardNode": 0},
            {"id": 11, "name": "x_Grad/ConvGrad_3", "supportedOnFpga": 1, "cpuLatency": 2.0,
             "fpgaLatency": 0.2, "isBackwardNode": 1, "colorClass": 0},
            {"id": 12, "name": "y_Grad/Gemm_1", "supportedOnFpga": 1, "cpuLatency": 2.0,
             "fpgaLatency": 0.25, "isBackwardNode": True, "colorClass": 1},
            {"id": 13, "name": "node13grad", "supportedOnFpga": 1, "cpuLatency": 0.0,
             "fpgaLatency": 0.0, "isBackwardNode": 1},
        ],
        "edges": [
            {"sourceId": 10, "destId": 4, "cost": 0.3, "size": 128},
            {"sourceId": 10, "destId": 7, "cost": 0.3},
            {"sourceId": 4, "destId": 11, "cost": 0.125},
            {"sourceId": 7, "destId": 12, "cost": 1.7},
            {"sourceId": 11, "destId": 13, "cost": 0.05},
            {"sourceId": 12, "destId": 13, "cost": 0.06},
        ],
    }


def write_msr(tmp_path, doc, stem="tiny_training"):
    p = tmp_path / f"{stem}.json"
    p.write_text(json.dumps(doc))
    return p


def test_msr_import_mapping(tmp_path):
    """graph_transforms.md, msr import table: ids in file order and msr_id; name or "node<id>"; type from
    the name (X_Grad/<Op>: leading capitalised word of <Op>; else the name's leading capitalised word;
    else MsrNode); isBackwardNode -> phase; colorClass -> colocation; layerId -> layer; size ->
    param_bytes; supportedOnFpga false -> pinned "cpu"; latencies (ms) -> measured_s "cpu" /
    "accelerator" = value * 1e-3; edge cost -> comm_s = value * 1e-3; edge size -> bytes; FLOPs and
    bytes 0; the graph is named after the file's stem; read_graph imports the same graph."""
    doc = msr_doc()
    p = write_msr(tmp_path, doc)
    inst = placelab.read_msr(p)
    g = inst.graph
    assert g.name == "tiny_training"
    assert inst.msr_id.tolist() == [10, 4, 7, 11, 12, 13]
    assert [inst.op_of_msr_id(i) for i in [10, 4, 7, 11, 12, 13]] == list(range(6))
    assert (inst.max_accelerators, inst.max_cpus, inst.accelerator_memory_bytes) == (2, 1, 1000.0)
    assert g.op_names == ["Conv38", "AdamOptimizer_w", "node7", "x_Grad/ConvGrad_3", "y_Grad/Gemm_1",
                          "node13grad"]
    assert g.op_types == ["Conv", "AdamOptimizer", "MsrNode", "ConvGrad", "Gemm", "MsrNode"]
    assert g.phase.tolist() == [0, 0, 0, 1, 1, 1]
    assert g.colocation.tolist() == [0, 1, NO_CLASS, 0, 1, NO_CLASS]
    assert g.layer.tolist() == [2, NO_CLASS, NO_CLASS, NO_CLASS, NO_CLASS, NO_CLASS]
    assert g.param_bytes.tolist() == [64.0, 0, 0, 0, 0, 0]
    assert g.pinned_kinds == ["", "cpu", "", "", "", ""]
    for f in ["flops", "bytes_read", "bytes_written", "output_bytes", "temp_bytes"]:
        assert not getattr(g, f).any(), f
    ops = g.to_dict()["ops"]
    for op, node in zip(ops, doc["nodes"]):
        assert op["measured_s"] == {"cpu": node["cpuLatency"] * 1e-3, "accelerator": node["fpgaLatency"] * 1e-3}
    got = {(s, d): (b, c) for s, d, b, c in edge_list(g.to_dict())}
    for e in doc["edges"]:
        key = (inst.op_of_msr_id(e["sourceId"]), inst.op_of_msr_id(e["destId"]))
        assert got[key] == (float(e.get("size", 0)), e["cost"] * 1e-3), key
    assert len(got) == len(doc["edges"])
    assert placelab.read_graph(p).to_dict() == g.to_dict()


def _msr_set(path, value):
    def fn(d):
        obj = d
        for k in path[:-1]:
            obj = obj[k]
        if value is _DEL:
            del obj[path[-1]]
        else:
            obj[path[-1]] = value
    return fn


_DEL = object()
MSR_ERRORS = [
    # (case id, mutation, substrings: the msr id at fault where there is one)
    ("unknown node field", _msr_set(["nodes", 2, "flops"], 1), ["7", "flops"]),
    ("unknown top field", _msr_set(["extra"], 1), ["extra"]),
    ("missing maxCPUs", _msr_set(["maxCPUs"], _DEL), ["maxCPUs"]),
    ("missing cpuLatency", _msr_set(["nodes", 2, "cpuLatency"], _DEL), ["7", "cpuLatency"]),
    ("missing cost", _msr_set(["edges", 3, "cost"], _DEL), ["cost"]),
    ("negative latency", _msr_set(["nodes", 2, "fpgaLatency"], -1.0), ["7", "fpgaLatency"]),
    ("negative cost", _msr_set(["edges", 3, "cost"], -1.0), ["cost"]),
    ("fractional id", _msr_set(["nodes", 2, "id"], 7.5), ["id"]),
    ("fractional maxFPGAs", _msr_set(["maxFPGAs"], 1.5), ["maxFPGAs"]),
    ("negative colorClass", _msr_set(["nodes", 2, "colorClass"], -1), ["7", "colorClass"]),
    ("bad flag", _msr_set(["nodes", 2, "isBackwardNode"], 2), ["7", "isBackwardNode"]),
    ("string flag", _msr_set(["nodes", 2, "supportedOnFpga"], "yes"), ["7", "supportedOnFpga"]),
    ("duplicate id", _msr_set(["nodes", 2, "id"], 4), ["4"]),
    ("duplicate name", _msr_set(["nodes", 2, "name"], "Conv38"), ["Conv38"]),
    ("dangling edge", _msr_set(["edges", 3, "destId"], 99), ["99"]),
    ("self loop", _msr_set(["edges", 3, "destId"], 7), ["7"]),
    ("duplicate edge", lambda d: d["edges"].append({"sourceId": 7, "destId": 12, "cost": 1.7}), ["7"]),
    ("unequal out costs", _msr_set(["edges", 1, "cost"], 0.31), ["10", "cost"]),
    ("backward to forward", lambda d: d["edges"].append({"sourceId": 11, "destId": 7, "cost": 0.125}),
     ["11", "7"]),
    ("no nodes", lambda d: d.update(nodes=[], edges=[]), ["nodes"]),
    ("cycle", lambda d: (d["nodes"][2].update(isBackwardNode=1),
                         d["edges"].append({"sourceId": 12, "destId": 7, "cost": 0.06})), ["node7", "y_Grad/Gemm_1"]),
]


@pytest.mark.parametrize("case", MSR_ERRORS, ids=[c[0] for c in MSR_ERRORS])
def test_msr_checks(case, tmp_path):
    """graph_transforms.md, msr Checks: "each error names the file, the JSON path and the msr id": every
    field known, required fields present, finite non-negative numbers, integers where due, flags
    true/false/0/1, unique ids and names, no dangling edge / self-loop / duplicate edge, one cost per
    node's out-edges, no backward -> forward edge, no cycle, at least one node."""
    _, fn, needles = case
    doc = msr_doc()
    fn(doc)
    p = write_msr(tmp_path, doc, "broken")
    with pytest.raises(ValueError) as e:
        placelab.read_msr(p)
    msg = str(e.value)
    assert "broken.json" in msg, msg
    msg = msg.split("broken.json", 1)[1]  # the temporary folder's digits must not count as an id
    for s in needles:
        assert s in msg, (s, msg)


def test_msr_out_costs_within_tolerance_accepted(tmp_path):
    """graph_transforms.md: out-edges share one cost "within 1e-6, as the reference reader requires"."""
    doc = msr_doc()
    doc["edges"][1]["cost"] = 0.3 + 5e-7
    placelab.read_msr(write_msr(tmp_path, doc))


def test_msr_split_extends_by_colour_class(tmp_path):
    """graph_transforms.md, Splits: one op list per device in file order; "Nodes the file does not list
    take the device of the listed nodes of their colour class"; errors for an unknown id, a node listed
    twice, too many accelerators, an unsupported node on an accelerator, an unlisted node without a
    class, a class split across devices."""
    doc = msr_doc()
    inst = placelab.read_msr(write_msr(tmp_path, doc))
    op = inst.op_of_msr_id

    def split(fpgas, cpus, name="s.json"):
        p = tmp_path / name
        p.write_text(json.dumps({"fpgas": [{"nodes": n, "load": 1.0} for n in fpgas],
                                 "cpus": [{"nodes": n, "load": 2.0} for n in cpus], "maxLoad": 3.0}))
        return placelab.read_msr_split(p, inst)

    p = split([[10, 7, 13]], [[4, 12]])
    assert p[op(11)] == p[op(10)] == p[op(7)] == p[op(13)]  # 11 joins class 0 with 10
    assert p[op(12)] == p[op(4)] != p[op(10)]
    bad = [
        ([[10, 7, 13, 99]], [[4, 12]]),            # unknown id
        ([[10, 7, 13]], [[4, 12, 7]]),             # listed twice
        ([[10], [7], [13]], [[4, 12]]),            # 3 accelerators, the instance has 2
        ([[10, 7, 13]], [[4], [12]]),              # 2 CPUs, the instance has 1
        ([[10, 7, 13, 4, 12]], []),                # 4 is not supported on an accelerator
        ([[10]], [[4, 12]]),                       # 7 and 13 unlisted, no class
        ([[10, 7, 13], [11]], [[4, 12]]),          # class 0 split: 10 and 11
    ]
    for i, (f, c) in enumerate(bad):
        with pytest.raises(ValueError) as e:
            split(f, c, f"bad{i}.json")
        assert f"bad{i}.json" in str(e.value), (i, str(e.value))


def test_conflicting_pins_in_a_group_name_both_ops():
    """graph_transforms.md, Aggregation: "two different pins in one group are an error naming both ops
    (only contract_colocation/contract_labels can hit it)"; fuse_chains never merges them."""
    doc = {"format": "placelab.graph", "version": 1, "name": "p",
           "ops": [{"name": "alpha", "pinned_kind": "cpu", "colocation": 1},
                   {"name": "beta", "pinned_kind": "gpu", "colocation": 1}],
           "edges": [{"src": 0, "dst": 1}]}
    g = placelab.graph_from_dict(doc)
    for run in (lambda: placelab.contract_colocation(g), lambda: placelab.contract_labels(g, [0, 0], "x")):
        with pytest.raises(ValueError) as e:
            run()
        assert "alpha" in str(e.value) and "beta" in str(e.value), str(e.value)
    assert placelab.fuse_chains(g).graph.num_ops == 2
    assert placelab.group_by_size(g, 1).graph.num_ops == 2  # cut apart: more than max_groups


def test_expand_training_of_zoo_model_memory():
    """graph_transforms.md: "Resident memory of the step is therefore params (forward ops) + optimizer
    state (update ops)"; ops = 2n + one update per op with parameters."""
    g = placelab.make_model("resnet50", {"batch": 1, "image_size": 32})
    t = placelab.expand_training(g)
    with_params = int((g.param_bytes > 0).sum())
    assert t.num_ops == 2 * g.num_ops + with_params
    assert t.stats()["param_bytes"] == pytest.approx(3 * g.stats()["param_bytes"], rel=1e-12)
    assert t.stats()["update_ops"] == with_params and t.stats()["backward_ops"] == g.num_ops
