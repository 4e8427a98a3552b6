# Differential test of the engine against reference_sim.py, a plain-Python reading of
# docs/simulator.md, on seeded random small cases: DAGs of 5-60 ops (control edges, fan-out to
# several ops on one remote device, zero-time ops), clusters of 2-5 devices (switches, direct and
# parallel links, half duplex, latencies, busy times, gaps, explicit multi-hop routes, buses,
# broadcast), random placements, both priorities, with and without measured edge times, and with
# bandwidth sharing. The engine's op-time table is an input (checked against the documented cost
# model separately), so what is compared is the schedule and the result facts.
import random

import numpy as np
import pytest

import placelab
import reference_sim as ref

KINDS = ["ka", "kb"]


def random_cluster(rng, dyadic, devices=(2, 5)):
    """2-5 devices on one of several topologies. dyadic=True keeps every time a small dyadic number,
    so all sums are exact in any order and equal-time ties (the tie-breaking rules) are frequent."""

    def num(choices, lo, hi):
        return rng.choice(choices) if dyadic else rng.uniform(lo, hi)

    nd = rng.randint(*devices)
    names = [f"d{i}" for i in range(nd)]
    devices = [{
        "name": name, "kind": rng.choice(KINDS),
        "peak_flops_per_s": num([1.0], 50.0, 200.0),
        "memory_bandwidth_bytes_per_s": num([1.0], 100.0, 500.0),
        "memory_bytes": rng.randint(0, 4000),
        "launch_overhead_s": 0.0 if dyadic or rng.random() < 0.3 else rng.uniform(0, 0.2),
        "gap_after_op_s": 0.0 if rng.random() < 0.5 else num([0.5, 1.0], 0.0, 0.5),
        "efficiency": 1.0 if dyadic else rng.uniform(0.3, 1.0),
    } for name in names]
    links, routes = [], []

    def link(a, b):
        l = {"name": "", "bandwidth_bytes_per_s": num([1.0, 2.0, 4.0], 50.0, 400.0)}
        if a is not None:
            l["ends"] = [a, b]
        if rng.random() < 0.5:
            l["latency_s"] = num([0.0, 0.25, 0.5, 1.0], 0.0, 0.3)
        if rng.random() < 0.3:
            l["duplex"] = "half"
        if rng.random() < 0.3:
            l["busy_after_s"] = num([0.25, 0.5, 1.0], 0.0, 0.3)
        links.append(l)

    topo = rng.choice(["switch", "switch", "direct", "mixed", "rails", "bus"] if nd <= 5 else ["switch", "rails", "bus"])
    if topo == "bus":
        # Placeto's simulator: one outgoing bus per device, every route explicit.
        for _ in names:
            link(None, None)
        for i, l in enumerate(links):
            l["name"] = f"bus{i}"
        routes = [{"src": names[s], "dst": names[t], "links": [f"bus{s}"]}
                  for s in range(nd) for t in range(nd) if s != t]
    else:
        if topo == "direct":
            for a in range(nd):
                for b in range(a + 1, nd):
                    for _ in range(rng.choice([1, 1, 1, 2])):  # parallel links
                        link(names[a], names[b])
        elif topo == "rails":
            # Every device on two switches: each pair has two paths of two hops, often of equal
            # latency, so the lowest-link-indices rule decides.
            for name in names:
                link(name, "s0")
                link(name, "s1")
        else:
            switches = [f"s{i}" for i in range(rng.randint(1, 2))]
            if topo == "mixed":
                for a in range(nd):
                    for b in range(a + 1, nd):
                        if rng.random() < 0.5:
                            link(names[a], names[b])
            for name in names:
                link(name, rng.choice(switches))
                if rng.random() < 0.2:
                    link(name, rng.choice(switches))
            if len(switches) == 2:
                link("s0", "s1")
                if rng.random() < 0.3:
                    link("s1", "s0")
        rng.shuffle(links)  # link indices break ties, so they must not follow the construction order
        for i, l in enumerate(links):
            l["name"] = f"l{i}"
        # Explicit routes: any simple path, through devices or not, longest first half the time.
        for _ in range(rng.choice([0, 0, 1, 2])):
            s, t = rng.sample(range(nd), 2)
            paths = simple_paths(links, names[s], names[t])
            if paths and not any(r["src"] == names[s] and r["dst"] == names[t] for r in routes):
                path = max(paths, key=len) if rng.random() < 0.5 else rng.choice(paths)
                routes.append({"src": names[s], "dst": names[t], "links": [links[i]["name"] for i in path]})
    doc = {"format": "placelab.cluster", "version": 1, "name": "rand", "devices": devices, "links": links,
           "routes": routes}
    if topo == "bus" or rng.random() < 0.3:
        doc["transfer_mode"] = "broadcast"
    return doc


def simple_paths(links, src, dst, limit=4):
    """Link-index paths from src to dst that visit each node once (at most `limit` hops)."""
    out, stack = [], [(src, [], {src})]
    while stack:
        node, path, seen = stack.pop()
        for i, l in enumerate(links):
            ends = l.get("ends")
            if ends and node in ends and len(path) < limit:
                nxt = ends[1] if node == ends[0] else ends[0]
                if nxt == dst:
                    out.append(path + [i])
                elif nxt not in seen:
                    stack.append((nxt, path + [i], seen | {nxt}))
    return out


def random_edge_bytes(rng, dyadic, output_bytes):
    """Mostly the producer's output, sometimes another size, now and then a control edge (0 bytes)."""
    r = rng.random()
    if r < 0.15:
        return 0
    if r < 0.7 and output_bytes > 0:
        return output_bytes
    return rng.choice([1, 2, 4, 8]) if dyadic else rng.randint(1, 400)


def random_comm_s(rng, dyadic):
    return rng.choice([0.0, 0.5, 1.0, 2.0]) if dyadic else rng.uniform(0, 2)


def random_graph(rng, dyadic, edge_comm, ops=(5, 60)):
    """A DAG of 5-60 ops whose ids are a random permutation of a topological order (ties go to the
    smaller id, so the ids must not follow the dataflow)."""
    n = rng.randint(*ops)
    perm = list(range(n))
    rng.shuffle(perm)
    ops = [None] * n
    for k in range(n):
        op = {"name": f"o{perm[k]}"}
        if dyadic:
            # measured times are used exactly: integer op times, zero included
            op["measured_s"] = {kind: float(rng.choice([0, 1, 1, 2, 3, 4])) for kind in KINDS}
        else:
            if rng.random() < 0.85:
                op["flops"] = rng.uniform(0, 300)
            for field in ("bytes_read", "bytes_written"):
                if rng.random() < 0.5:
                    op[field] = float(rng.randint(0, 200))
            if rng.random() < 0.1:  # measured on one kind only: the other kind uses the roofline
                op["measured_s"] = {rng.choice(KINDS): rng.uniform(0, 3)}
        for field, p, hi in (("output_bytes", 0.9, 400), ("param_bytes", 0.4, 300), ("temp_bytes", 0.4, 300)):
            if rng.random() < p:
                op[field] = rng.randint(0, hi)
        ops[perm[k]] = op
    # measured edge times: most producers have them on all their data edges, some on a few (a transfer
    # with an unmeasured edge is modelled: see test_mixed_measured_edges_to_one_device), the rest none
    measured = [(rng.random() < 0.7) * (1.0 if rng.random() < 0.7 else 0.5) if edge_comm else 0 for _ in range(n)]
    edges = []
    for k in range(1, n):
        srcs = set()
        for _ in range(rng.choice([1, 1, 2, 3])):
            # mostly recent producers, sometimes any earlier one (fan-out across the graph)
            srcs.add(max(0, k - 1 - int(rng.expovariate(0.3))) if rng.random() < 0.8 else rng.randrange(k))
        for j in sorted(srcs):
            s = perm[j]
            e = {"src": s, "dst": perm[k], "bytes": random_edge_bytes(rng, dyadic, ops[s].get("output_bytes", 0))}
            if e["bytes"] > 0 and rng.random() < measured[s]:
                e["comm_s"] = random_comm_s(rng, dyadic)
            edges.append(e)
    rng.shuffle(edges)  # transfers go in the order destinations first appear among the out-edges
    return {"format": "placelab.graph", "version": 1, "name": "rand", "ops": ops, "edges": edges}


def make_case(seed, dyadic=None, devices=(2, 5), ops=(5, 60)):
    rng = random.Random(seed)
    dyadic = rng.random() < 0.5 if dyadic is None else dyadic
    edge_comm = rng.random() < 0.3
    cdoc = random_cluster(rng, dyadic, devices)
    gdoc = random_graph(rng, dyadic, edge_comm, ops)
    nd = len(cdoc["devices"])
    used = rng.sample(range(nd), rng.randint(1, nd))
    placement = [rng.choice(used) for _ in gdoc["ops"]]
    options = {"priority": rng.choice(["ready_time", "rank"]), "use_edge_comm": edge_comm}
    return dyadic, gdoc, cdoc, placement, options


def engine_routes(cluster, nd):
    return {(s, t): cluster.route(s, t) for s in range(nd) for t in range(nd) if s != t}


def reference_routes(cdoc):
    c = ref.Cluster(cdoc)
    return {pair: [c.links[li]["name"] for li, _ in chans] for pair, chans in c.routes.items()}


def reference_result(sim, gdoc, cdoc, placement, options):
    times = sim.op_times().tolist()
    return ref.simulate(gdoc, cdoc, placement, times, ref.reference_ranks(gdoc, times),
                        priority=options.get("priority", "ready_time"),
                        use_edge_comm=options.get("use_edge_comm", False),
                        share_bandwidth=options.get("share_bandwidth", False))


def differences(result, mine, exact, trace=None):
    """Every disagreement between the engine's result (and trace) and the reference, as text."""
    def same(a, b):
        return a == b if exact else a == pytest.approx(b, rel=1e-9, abs=1e-12)

    out = []
    for key in ("step_time_s", "busy_until_s", "critical_path_s", "total_bytes_moved"):
        if not same(result[key], mine[key]):
            out.append(f"{key}: engine {result[key]}, reference {mine[key]}")
    for key in ("num_transfers", "oom"):
        if result[key] != mine[key]:
            out.append(f"{key}: engine {result[key]}, reference {mine[key]}")
    for key in ("device_peak_bytes", "device_excess_bytes"):  # whole bytes: exact
        if result[key].tolist() != [float(x) for x in mine[key]]:
            out.append(f"{key}: engine {result[key].tolist()}, reference {mine[key]}")
    for key in ("device_busy_s", "link_busy_s", "link_bytes"):
        got = result[key].tolist()
        if len(got) != len(mine[key]) or not all(same(a, b) for a, b in zip(got, mine[key])):
            out.append(f"{key}: engine {got}, reference {mine[key]}")
    if trace is not None:
        ops = trace["ops"]
        if sorted(ops["op"].tolist()) != list(range(len(mine["start"]))):
            out.append(f"trace ops: {sorted(ops['op'].tolist())}")
        for op, s, e in zip(ops["op"].tolist(), ops["start_s"].tolist(), ops["end_s"].tolist()):
            if not (same(s, mine["start"][op]) and same(e, mine["end"][op])):
                out.append(f"op {op}: engine {s}-{e}, reference {mine['start'][op]}-{mine['end'][op]}")
        t = trace["transfers"]
        got = sorted(zip(t["op"].tolist(), t["dst"].tolist(), t["src"].tolist(), t["start_s"].tolist(),
                         t["end_s"].tolist(), t["bytes"].tolist()))
        want = sorted((x["op"], x["dst"], x["src"], x["start"], x["end"], float(x["bytes"])) for x in mine["transfers"])
        if [g[:3] for g in got] != [w[:3] for w in want]:
            out.append(f"transfers (op, dst, src): engine {[g[:3] for g in got]}, reference {[w[:3] for w in want]}")
        else:
            out += [f"transfer {g[:3]}: engine {g[3:]}, reference {w[3:]}"
                    for g, w in zip(got, want) if not all(same(a, b) for a, b in zip(g[3:], w[3:]))]
        if exact:
            out += memory_differences(trace["memory"], mine)
    return out


def memory_differences(memory, mine):
    # Beyond the peak: the bytes each device holds once all changes of an instant are applied, which
    # is independent of the order of the changes within the instant. Only with exact times, since
    # a rounding difference would split one instant in two.
    held = {}
    for d, t, b in zip(memory["device"].tolist(), memory["time_s"].tolist(), memory["bytes"].tolist()):
        held[(d, t)] = b  # the last record of an instant
    out = []
    for d, after in enumerate(mine["held_after"]):
        got = {t: b for (dd, t), b in held.items() if dd == d}
        times = sorted(after)
        for t, b in sorted(got.items()):
            before = [x for x in times if x <= t]
            want = after[before[-1]] if before else mine["resident_bytes"][d]
            if b != want:
                out.append(f"memory of device {d} after t = {t}: engine {b}, reference {want}")
                break
        missing = [t for t in times if t not in got]
        if missing:
            out.append(f"memory of device {d}: the engine records no change at {missing[:3]}")
    return out


def check_cases(seeds, share_bandwidth=False, dyadic=None, **sizes):
    """Runs the cases; returns the failures, one line per case that disagrees."""
    failures = []
    for seed in seeds:
        exact, gdoc, cdoc, placement, options = make_case(seed, dyadic, **sizes)
        options["share_bandwidth"] = share_bandwidth
        cluster = placelab.cluster_from_dict(cdoc)
        # Routes have their own test (test_routes_follow_the_documented_rule); the schedule of a case
        # whose routes disagree would only repeat that failure.
        if engine_routes(cluster, len(cdoc["devices"])) != reference_routes(cdoc):
            failures.append(f"seed {seed}: routes disagree")
            continue
        sim = placelab.Simulator(placelab.graph_from_dict(gdoc), cluster, options)
        p = np.array(placement, dtype=np.int32)
        mine = reference_result(sim, gdoc, cdoc, placement, options)
        # Exact where every time is a small dyadic number: all sums are then exact in any order.
        # With random floats the engine may add the same terms in another order (route latencies
        # summed once per pair, busy times per device and link), and bandwidth sharing divides and
        # re-rates, so there a relative tolerance of 1e-9.
        exact = exact and not share_bandwidth
        # The traced run (with an observer) and the plain one are separate copies of the event loop.
        trace = sim.trace(p)
        problems = differences(trace["result"], mine, exact, trace)
        problems += ["simulate(): " + x for x in differences(sim.simulate(p), mine, exact)]
        # "critical_path_s ... a lower bound of the step time"
        if not mine["step_time_s"] >= mine["critical_path_s"] * (1 - 1e-12):
            problems.append(f"reference step {mine['step_time_s']} < its critical path {mine['critical_path_s']}")
        if problems:
            failures.append(f"seed {seed} ({'dyadic' if exact else 'float'}, {options}): " + "; ".join(problems[:4]))
    return failures


@pytest.mark.parametrize("chunk", range(6))
def test_engine_matches_reference(chunk):
    failures = check_cases(range(250 * chunk, 250 * (chunk + 1)))
    assert not failures, f"{len(failures)} of 250 cases disagree:\n" + "\n".join(failures[:5])


@pytest.mark.parametrize("dyadic", [False, True])
def test_bandwidth_sharing_matches_reference(dyadic):
    failures = check_cases(range(10000, 10300), share_bandwidth=True, dyadic=dyadic)
    assert not failures, f"{len(failures)} of 300 cases disagree:\n" + "\n".join(failures[:5])


def test_routes_follow_the_documented_rule():
    # Explicit routes as given; otherwise fewest hops, then least latency, then lowest link indices,
    # through switches only.
    failures = []
    for seed in range(600):
        rng = random.Random(seed)
        cdoc = random_cluster(rng, rng.random() < 0.5)
        got = engine_routes(placelab.cluster_from_dict(cdoc), len(cdoc["devices"]))
        want = reference_routes(cdoc)
        failures += [f"seed {seed} {pair}: engine {got[pair]}, reference {want[pair]}"
                     for pair in want if got[pair] != want[pair]]
    assert not failures, f"{len(failures)} routes disagree:\n" + "\n".join(failures[:5])


def unit_device(name, **fields):
    return {"name": name, "kind": "unit", "peak_flops_per_s": 1.0, "memory_bandwidth_bytes_per_s": 1.0,
            "memory_bytes": 1000, **fields}


def test_route_tie_goes_to_the_lowest_link_indices():
    # d0 -> d1 has two paths of two hops and no latency: l1, l2 through s0 or l3, l4 through s1.
    # Every index of the first is lower, whichever way "lowest link indices" is read; s1 merely
    # appears first (in l0, which leads to d2).
    cdoc = {"format": "placelab.cluster", "version": 1, "name": "tie",
            "devices": [unit_device("d0"), unit_device("d1"), unit_device("d2")],
            "links": [{"name": "l0", "ends": ["d2", "s1"], "bandwidth_bytes_per_s": 100},
                      {"name": "l1", "ends": ["d0", "s0"], "bandwidth_bytes_per_s": 100},
                      {"name": "l2", "ends": ["d1", "s0"], "bandwidth_bytes_per_s": 100},
                      {"name": "l3", "ends": ["d0", "s1"], "bandwidth_bytes_per_s": 100},
                      {"name": "l4", "ends": ["d1", "s1"], "bandwidth_bytes_per_s": 100}]}
    assert reference_routes(cdoc)[(0, 1)] == ["l1", "l2"]
    assert placelab.cluster_from_dict(cdoc).route(0, 1) == ["l1", "l2"]


def test_mixed_measured_edges_to_one_device():
    # a (1 s) on d0 feeds b (1 s, 100 bytes, no measured time) and c (0 s, 50 bytes, comm_s) on d1:
    # one transfer serves both, and with an unmeasured edge it is modelled (1 s over the link),
    # whatever c's comm_s and whichever edge is listed first (the engine used to let the last listed
    # edge decide: 0.2 s, a step of 2.2 s under a critical path of 3 s). The critical path charges
    # c's edge as modelled too (0.5 s), not its comm_s of 5 s, so it stays a lower bound.
    cdoc = {"format": "placelab.cluster", "version": 1, "name": "pair",
            "devices": [unit_device("d0"), unit_device("d1")],
            "links": [{"name": "l", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": 100}]}
    ops = [{"name": "a", "flops": 1}, {"name": "b", "flops": 1}, {"name": "c"}]
    results = []
    for comm_s in (0.2, 5.0):
        edges = [{"src": "a", "dst": "b", "bytes": 100}, {"src": "a", "dst": "c", "bytes": 50, "comm_s": comm_s}]
        for listed in (edges, edges[::-1]):
            gdoc = {"format": "placelab.graph", "version": 1, "name": "mixed", "ops": ops, "edges": listed}
            sim = placelab.Simulator(placelab.graph_from_dict(gdoc), placelab.cluster_from_dict(cdoc),
                                     {"use_edge_comm": True})
            r = sim.simulate(np.array([0, 1, 1], dtype=np.int32))
            mine = reference_result(sim, gdoc, cdoc, [0, 1, 1], {"use_edge_comm": True})
            assert (mine["step_time_s"], mine["critical_path_s"]) == (3, 3)
            results.append((r["step_time_s"], r["critical_path_s"]))
    assert results == [(3, 3)] * 4


def test_op_times_and_ranks_follow_their_formulas():
    # The schedule test takes the engine's op times as given; here they meet the documented roofline
    # (or the measured time, used exactly), and the engine's ranks the documented upward rank.
    for seed in range(300):
        _, gdoc, cdoc, _, options = make_case(seed)
        graph, cluster = placelab.graph_from_dict(gdoc), placelab.cluster_from_dict(cdoc)
        sim = placelab.Simulator(graph, cluster, options)
        times = sim.op_times()
        want = [[ref.roofline_time(op, d) for d in cdoc["devices"]] for op in gdoc["ops"]]
        # one formula, but the engine may order its multiplications differently: a tolerance
        np.testing.assert_allclose(times, want, rtol=1e-12, atol=0)
        np.testing.assert_allclose(sim.upward_rank(), ref.reference_ranks(gdoc, times.tolist()), rtol=1e-12, atol=0)
        unmeasured = placelab.Simulator(graph, cluster, dict(options, use_measured=False)).op_times()
        want = [[ref.roofline_time(op, d, use_measured=False) for d in cdoc["devices"]] for op in gdoc["ops"]]
        np.testing.assert_allclose(unmeasured, want, rtol=1e-12, atol=0)


def test_incremental_and_batch_runs_match_reference():
    # Moves resume from saved states and batches run on other threads: both must still give the
    # documented result, not merely the engine's own.
    for seed in range(20000, 20080):
        exact, gdoc, cdoc, placement, options = make_case(seed)
        options["share_bandwidth"] = seed % 2 == 1
        exact = exact and not options["share_bandwidth"]
        cluster = placelab.cluster_from_dict(cdoc)
        assert engine_routes(cluster, len(cdoc["devices"])) == reference_routes(cdoc), f"seed {seed}: routes"
        sim = placelab.Simulator(placelab.graph_from_dict(gdoc), cluster, options)
        rng = random.Random(seed)
        inc = placelab.IncrementalSimulator(sim, np.array(placement, dtype=np.int32), checkpoints=rng.choice([1, 4, 8]))
        rows = []
        for _ in range(4):
            # one op, or a group (a colocation class) moved with one replay
            ops = rng.sample(range(len(placement)), rng.choice([1, 1, 3]))
            d = rng.randrange(len(cdoc["devices"]))
            for op in ops:
                placement[op] = d
            rows.append(list(placement))
            mine = reference_result(sim, gdoc, cdoc, placement, options)
            got = inc.move(ops[0], d) if len(ops) == 1 else inc.move(ops, d)
            assert not differences(got, mine, exact), f"seed {seed}, move {ops} -> {d}"
        undone = inc.undo()  # back to the placement before the last move, without simulating
        mine = reference_result(sim, gdoc, cdoc, rows[-2], options)
        assert not differences(undone, mine, exact), f"seed {seed}, undo"
        batch = sim.simulate_batch(np.array(rows, dtype=np.int32))
        for i, row in enumerate(rows):
            mine = reference_result(sim, gdoc, cdoc, row, options)
            got = {k: (v[i] if isinstance(v, np.ndarray) and v.ndim > 0 else v) for k, v in batch.items()}
            got = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in got.items()}
            assert not differences(got, mine, exact), f"seed {seed}, batch row {i}"


@pytest.mark.parametrize("share_bandwidth", [False, True])
def test_many_devices_match_reference(share_bandwidth):
    # More than 16 devices (17 event slots with sharing) moves the engine's next-event search from a
    # scan to a tournament tree.
    failures = check_cases(range(30000, 30040), share_bandwidth, devices=(14, 20), ops=(40, 100))
    assert not failures, f"{len(failures)} of 40 cases disagree:\n" + "\n".join(failures[:5])


def test_reference_reproduces_the_documented_examples():
    # The reference itself against the worked numbers of docs/simulator.md (unit devices: 1 FLOP/s),
    # with no engine involved: a reference that misreads the doc would make the comparisons moot.
    def run(ops, edges, devices, links, placement, routes=(), mode="per_destination", **options):
        gdoc = {"ops": ops, "edges": edges}
        cdoc = {"devices": devices, "links": links, "routes": list(routes), "transfer_mode": mode}
        c = ref.Cluster(cdoc)
        times = [[ref.roofline_time(op, d) for d in c.devices] for op in ops]
        return ref.simulate(gdoc, cdoc, placement, times, ref.reference_ranks(gdoc, times), **options)

    def star(n, **fields):  # d0..d(n-1), each on one link to the switch s
        return [{"name": f"l{i}", "ends": [f"d{i}", "s"], "bandwidth_bytes_per_s": 100, **fields} for i in range(n)]

    def devs(n, **fields):
        return [unit_device(f"d{i}", memory_bandwidth_bytes_per_s=1e30, **fields) for i in range(n)]
    # fork over two devices
    r = run([{"name": "a", "flops": 1}, {"name": "b", "flops": 2}, {"name": "c", "flops": 3}],
            [{"src": 0, "dst": 1, "bytes": 100}, {"src": 0, "dst": 2, "bytes": 100}], devs(2),
            [{"name": "l", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": 100, "latency_s": 0.5}], [0, 0, 1])
    assert (r["start"], r["end"]) == ([0, 1, 2.5], [1, 3, 5.5])
    assert [(x["start"], x["end"], x["bytes"]) for x in r["transfers"]] == [(1, 2.5, 100)]
    # contention through a switch, and the critical path on an idle network
    three = [{"name": "a", "flops": 1}, {"name": "b", "flops": 1}, {"name": "c", "flops": 1}]
    into_c = [{"src": 0, "dst": 2, "bytes": 100}, {"src": 1, "dst": 2, "bytes": 100}]
    r = run(three, into_c, devs(3), star(3, latency_s=0.25), [0, 1, 2])
    assert [(x["start"], x["end"]) for x in r["transfers"]] == [(1, 2.5), (2.5, 4)]
    assert (r["step_time_s"], r["critical_path_s"]) == (5, 3.5)
    # bandwidth sharing: both stream at 50 B/s from 1.5; with 100 and 50 bytes, 2.5 and 3
    r = run(three, into_c, devs(3), star(3, latency_s=0.25), [0, 1, 2], share_bandwidth=True)
    assert sorted(x["end"] for x in r["transfers"]) == [3.5, 3.5]
    r = run(three, [into_c[0], dict(into_c[1], bytes=50)], devs(3), star(3, latency_s=0.25), [0, 1, 2],
            share_bandwidth=True)
    assert sorted(x["end"] for x in r["transfers"]) == [2.5, 3]
    # 300, 200, 100 bytes over one 100 B/s link at t = 1, 2, 3 arrive at 7, 7, 6
    r = run(three + [{"name": "z", "flops": 1}],
            [{"src": 0, "dst": 3, "bytes": 300}, {"src": 1, "dst": 3, "bytes": 200}, {"src": 2, "dst": 3, "bytes": 100},
             {"src": 0, "dst": 1}, {"src": 1, "dst": 2}], devs(2),
            [{"name": "l", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": 100}], [0, 0, 0, 1], share_bandwidth=True)
    assert [x["end"] for x in sorted(r["transfers"], key=lambda x: x["op"])] == [7, 7, 6]
    # duplex: crossing one link both ways at once
    for duplex, step in (("full", 3.5), ("half", 5)):
        r = run([{"name": "a", "flops": 1}, {"name": "b", "flops": 1}, {"name": "x", "flops": 1}, {"name": "y", "flops": 1}],
                [{"src": 0, "dst": 2, "bytes": 100}, {"src": 1, "dst": 3, "bytes": 100}], devs(2),
                [{"name": "l", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": 100, "latency_s": 0.5, "duplex": duplex}],
                [0, 1, 1, 0])
        assert r["step_time_s"] == step
    # multi-hop: 0.6 s of latency + 100 bytes at the slowest 100 B/s; every hop busy 1.6 s
    r = run([{"name": "a", "flops": 1}, {"name": "b", "flops": 1}], [{"src": 0, "dst": 1, "bytes": 100}], devs(2),
            [{"name": "h0", "ends": ["d0", "s0"], "bandwidth_bytes_per_s": 200, "latency_s": 0.1},
             {"name": "h1", "ends": ["s0", "s1"], "bandwidth_bytes_per_s": 100, "latency_s": 0.2},
             {"name": "h2", "ends": ["s1", "d1"], "bandwidth_bytes_per_s": 400, "latency_s": 0.3}], [0, 1])
    assert r["transfers"][0]["end"] - r["transfers"][0]["start"] == pytest.approx(1.6, rel=1e-12)
    assert r["link_busy_s"] == pytest.approx([1.6] * 3, rel=1e-12)
    # chain on one device with launch overhead and gaps
    r = run([{"name": "a", "flops": 1}, {"name": "b", "flops": 2}, {"name": "c", "flops": 3}],
            [{"src": 0, "dst": 1}, {"src": 1, "dst": 2}], devs(1, launch_overhead_s=0.5, gap_after_op_s=0.25), [],
            [0, 0, 0])
    assert (r["start"], r["end"], r["device_busy_s"], r["critical_path_s"]) == ([0, 1.75, 4.5], [1.5, 4.25, 8], [7.5], 7.5)
    # priorities: d0 busy until 5, x ready at 1 (rank 1), y at 3 (rank 11, then z of 10 s on d1)
    ops = [{"name": "w", "flops": 5}, {"name": "p1", "flops": 1}, {"name": "p3", "flops": 3},
           {"name": "x", "flops": 1}, {"name": "y", "flops": 1}, {"name": "z", "flops": 10}]
    edges = [{"src": 1, "dst": 3}, {"src": 2, "dst": 4}, {"src": 4, "dst": 5}]
    for priority, x, y, z in (("ready_time", 5, 6, 7), ("rank", 6, 5, 6)):
        r = run(ops, edges, devs(3), star(3), [0, 1, 2, 0, 0, 1], priority=priority)
        assert (r["start"][3], r["start"][4], r["start"][5]) == (x, y, z)
    # memory peak: 170; 180 when c also reads a, then oom with excess 30 at capacity 150
    ops = [{"name": "a", "flops": 1, "param_bytes": 100, "output_bytes": 10, "temp_bytes": 5},
           {"name": "b", "flops": 1, "output_bytes": 20, "temp_bytes": 7}, {"name": "c", "flops": 1, "temp_bytes": 50}]
    edges = [{"src": 0, "dst": 1, "bytes": 10}, {"src": 1, "dst": 2, "bytes": 20}]
    assert run(ops, edges, devs(1), [], [0, 0, 0])["device_peak_bytes"] == [170]
    r = run(ops, edges + [{"src": 0, "dst": 2, "bytes": 10}], devs(1, memory_bytes=150), [], [0, 0, 0])
    assert (r["device_peak_bytes"], r["device_excess_bytes"], r["oom"]) == ([180], [30], True)
    # Placeto preset: a broadcast on gpu0's bus, the bus busy 25 us more after each transfer
    us = 1e-6
    ops = [{"name": "a", "flops": 10, "output_bytes": 76000}, {"name": "b", "flops": 20}, {"name": "c", "flops": 30},
           {"name": "d", "flops": 5, "output_bytes": 76000}, {"name": "e", "flops": 1}]
    edges = [{"src": 0, "dst": 1, "bytes": 76000}, {"src": 0, "dst": 2, "bytes": 76000}, {"src": 0, "dst": 3},
             {"src": 3, "dst": 4, "bytes": 76000}]
    buses = [{"name": f"bus{i}", "bandwidth_bytes_per_s": 7600 / us, "duplex": "half", "busy_after_s": 25 * us}
             for i in range(3)]
    routes = [{"src": f"d{s}", "dst": f"d{t}", "links": [f"bus{s}"]} for s in range(3) for t in range(3) if s != t]
    r = run(ops, edges, devs(3, peak_flops_per_s=1 / us, gap_after_op_s=5.7 * us), buses, [0, 1, 2, 0, 1], routes,
            "broadcast")
    assert [x["dst"] for x in r["transfers"]] == [1, 2, 1]
    assert [t / us for x in r["transfers"] for t in (x["start"], x["end"])] == pytest.approx(
        [10, 20, 10, 20, 45, 55], rel=1e-12)
    assert (r["num_transfers"], r["total_bytes_moved"]) == (2, 152000)
    assert r["link_busy_s"][0] / us == pytest.approx(70, rel=1e-12)
    # a 100-byte copy arriving at t = 1 on a device running an op with 1000 temp bytes until 4
    r = run([{"name": "a", "flops": 1}, {"name": "big", "flops": 4, "temp_bytes": 1000}, {"name": "c", "flops": 1}],
            [{"src": 0, "dst": 2, "bytes": 100}], devs(2, memory_bytes=5000),
            [{"name": "l", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": 1e30}], [0, 1, 1])
    assert r["device_peak_bytes"][1] == 1100
