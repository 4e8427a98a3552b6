# A plain-Python reference of the simulator's documented semantics (docs/simulator.md, "The engine:
# semantics" and "Results"), written from the documentation alone so that the differential test in
# test_reference_sim.py can catch places where the optimised engine and its documentation disagree.
# Clarity over speed: every event rescans the devices and their waiting ops, fine for small graphs.
#
# Inputs are the documents the engine reads (a placelab.graph dict, a placelab.cluster dict), a
# placement, and the two tables the engine precomputes (op x device times, upward ranks), so that the
# cost model is not what is compared (roofline_time and reference_ranks restate those tables'
# documented formulas, for a separate check).
#
# Where the doc leaves a point open, the reading taken is stated where it is used:
# - a broadcast takes as long as its slowest destination's route (latencies + bytes / bandwidth);
# - (now documented) a transfer is measured when every edge it serves has a comm_s, and takes the
#   longest of them; otherwise it is modelled, and the critical path charges those edges as modelled;
# - link_bytes counts a transfer once per channel it holds (twice on a link a broadcast crosses both ways);
# - the critical path charges an edge between devices the idle-network time of that edge's bytes;
# - a control edge (0 bytes) carries no data, so its consumer does not keep the tensor alive;
# - an op that takes no time still starts before it ends (see memory_peaks).


class Cluster:
    """Devices, links, channels and one route (a list of channels) per ordered device pair."""

    def __init__(self, doc):
        self.devices = [dict(d) for d in doc["devices"]]
        self.device_index = {d["name"]: i for i, d in enumerate(self.devices)}
        self.links = [dict(l) for l in doc.get("links", [])]
        self.link_index = {l["name"]: i for i, l in enumerate(self.links)}
        self.broadcast = doc.get("transfer_mode", "per_destination") == "broadcast"
        n = len(self.devices)
        self.routes = {}
        for r in doc.get("routes", []):
            s, t = self.device_index[r["src"]], self.device_index[r["dst"]]
            self.routes[(s, t)] = self._walk(s, [self.link_index[x] for x in r["links"]])
        for s in range(n):
            for t in range(n):
                if s != t and (s, t) not in self.routes:
                    self.routes[(s, t)] = self._walk(s, self._shortest_path(s, t))

    def latency(self, link):
        return float(self.links[link].get("latency_s", 0.0))

    def bandwidth(self, link):
        return float(self.links[link]["bandwidth_bytes_per_s"])

    def busy_after(self, link):
        return float(self.links[link].get("busy_after_s", 0.0))

    def _walk(self, s, links):
        """Channels of a path from device s: a full-duplex link is one channel per direction (link, 0 or
        1); a half-duplex link, or a bus (no ends), is one channel shared by both directions (link, 0)."""
        node, out = self.devices[s]["name"], []
        for li in links:
            ends = self.links[li].get("ends")
            if not ends:
                out.append((li, 0))
                continue
            assert node in ends, f"route from {s}: link {li} does not touch {node}"
            half = self.links[li].get("duplex", "full") == "half"
            out.append((li, 0 if half or node == ends[0] else 1))
            node = ends[1] if node == ends[0] else ends[0]
        return out

    def _shortest_path(self, s, t):
        # Fewest hops, then least latency, then lowest link indices (compared in path order); inner
        # nodes must be switches (names that are not devices); a path visits each node once.
        devices = {d["name"] for d in self.devices}
        src, dst = self.devices[s]["name"], self.devices[t]["name"]
        best = None
        stack = [(src, [], {src})]
        while stack:
            node, path, seen = stack.pop()
            for li, l in enumerate(self.links):
                ends = l.get("ends")
                if not ends or node not in ends:
                    continue
                nxt = ends[1] if node == ends[0] else ends[0]
                if nxt in seen:
                    continue
                p = path + [li]
                if nxt == dst:
                    lat = 0.0
                    for x in p:
                        lat += self.latency(x)
                    if best is None or (len(p), lat, p) < best:
                        best = (len(p), lat, p)
                elif nxt not in devices:
                    stack.append((nxt, p, seen | {nxt}))
        assert best is not None, f"device {src} cannot reach {dst}"
        return best[2]

    def route_latency(self, channels):
        lat = 0.0
        for li, _ in channels:
            lat += self.latency(li)
        return lat

    def route_time(self, channels, nbytes):
        """Idle-network time over a route: the sum of its latencies + bytes / its smallest bandwidth."""
        return self.route_latency(channels) + nbytes / min(self.bandwidth(li) for li, _ in channels)


def graph_edges(graph):
    """(src, dst, bytes, comm_s or None) per edge, in file order; ends given by index or name."""
    names = {op["name"]: i for i, op in enumerate(graph["ops"])}

    def idx(x):
        return x if isinstance(x, int) else names[x]

    return [(idx(e["src"]), idx(e["dst"]), e.get("bytes", 0), e.get("comm_s")) for e in graph.get("edges", [])]


def topological_order(n, edges):
    succ, indeg = [[] for _ in range(n)], [0] * n
    for s, d, _, _ in edges:
        succ[s].append(d)
        indeg[d] += 1
    order, ready = [], [i for i in range(n) if indeg[i] == 0]
    while ready:
        u = ready.pop()
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    return order, succ


def reference_ranks(graph, op_times):
    """Upward rank: mean op time over all devices plus the largest rank of a successor."""
    n = len(graph["ops"])
    order, succ = topological_order(n, graph_edges(graph))
    rank = [0.0] * n
    for u in reversed(order):
        rank[u] = sum(op_times[u]) / len(op_times[u]) + max((rank[v] for v in succ[u]), default=0.0)
    return rank


def roofline_time(op, dev, use_measured=True):
    """The documented roofline with default options (no type efficiency, no size factor), or the
    measured time for the device's kind when the op has one (used exactly)."""
    if use_measured and dev["kind"] in op.get("measured_s", {}):
        return float(op["measured_s"][dev["kind"]])
    e = float(dev.get("efficiency", 1.0))
    flops = float(op.get("flops", 0))
    mem = float(op.get("bytes_read", 0)) + float(op.get("bytes_written", 0))
    return max(flops / (dev["peak_flops_per_s"] * e), mem / (dev["memory_bandwidth_bytes_per_s"] * e)) + float(
        dev.get("launch_overhead_s", 0.0))


class FifoNetwork:
    """Channels served one transfer at a time, in request order; a transfer holds every channel of its
    route at once, starts when the producer has ended and all are free, and each channel stays busy
    busy_after_s longer. The arrival time is known when the transfer is requested."""

    def __init__(self, cluster):
        self.c = cluster
        self.free = {}  # channel -> time it is free again
        self.link_busy = [0.0] * len(cluster.links)

    def send(self, t, chans, duration):
        start = max([t] + [self.free.get(ch, 0.0) for ch in chans])
        end = start + duration
        for ch in chans:
            self.free[ch] = end + self.c.busy_after(ch[0])
            self.link_busy[ch[0]] += duration + self.c.busy_after(ch[0])
        return start, end

    def next_event(self):
        return None


class SharedNetwork:
    """Bandwidth sharing: a transfer starts when its producer ends, pays its route's latency, then
    streams its bytes at max-min fair rates over every channel it crosses (progressive filling);
    rates change when a transfer starts streaming or ends. busy_after_s is ignored; a channel is busy
    while some transfer streams on it. A transfer with a measured time is all latency."""

    def __init__(self, cluster):
        self.c = cluster
        self.now = 0.0
        self.waiting = []  # transfers paying latency: [stream_at, record]
        self.streaming = []  # records with "left" bytes
        self.users = {}  # channel -> transfers streaming on it
        self.since = {}  # channel -> when it became busy
        self.link_busy = [0.0] * len(cluster.links)

    def send(self, t, chans, latency, nbytes, measured, record):
        record.update(chans=chans, left=float(nbytes))
        if measured is not None:
            record["left"] = 0.0
            self.waiting.append([t + measured, record])
        else:
            self.waiting.append([t + latency, record])

    @staticmethod
    def _channel_index(ch):
        return 2 * ch[0] + ch[1]

    def rates(self):
        # Progressive filling: the most loaded channel (least capacity per unfixed transfer, lowest
        # index among equals) fixes the rate of its transfers; their rate is taken off their other
        # channels, and so on.
        cap = {}
        for r in self.streaming:
            for ch in r["chans"]:
                cap[ch] = self.c.bandwidth(ch[0])
        rate = {}
        unfixed = list(range(len(self.streaming)))
        while unfixed:
            best = None
            for ch in sorted(cap, key=self._channel_index):
                users = [i for i in unfixed if ch in self.streaming[i]["chans"]]
                if users and (best is None or cap[ch] / len(users) < best[0]):
                    best = (cap[ch] / len(users), ch, users)
            share, ch, users = best
            for i in users:
                rate[i] = share
                for ch2 in self.streaming[i]["chans"]:
                    cap[ch2] -= share
                unfixed.remove(i)
            del cap[ch]
        return [rate[i] for i in range(len(self.streaming))]

    def next_event(self):
        times = [w[0] for w in self.waiting]
        times += [self.now + r["left"] / rate for r, rate in zip(self.streaming, self.rates())]
        return min(times) if times else None

    def advance(self, t):
        """Moves to time t (the next network event); returns the transfers that ended at t."""
        rates = self.rates()
        done = [r for r, rate in zip(self.streaming, rates) if self.now + r["left"] / rate <= t]
        for r, rate in zip(self.streaming, rates):
            r["left"] -= rate * (t - self.now)
        self.now = t
        for r in done:
            self.streaming.remove(r)
            for ch in r["chans"]:
                self.users[ch].remove(id(r))
                if not self.users[ch]:
                    self.link_busy[ch[0]] += t - self.since.pop(ch)
        for w in [w for w in self.waiting if w[0] <= t]:
            self.waiting.remove(w)
            r = w[1]
            if r["left"] == 0.0:  # a measured transfer streams nothing
                done.append(r)
                continue
            self.streaming.append(r)
            for ch in r["chans"]:
                if not self.users.get(ch):
                    self.users[ch] = []
                    self.since[ch] = t
                self.users[ch].append(id(r))
        return done


def simulate(graph, cluster_doc, placement, op_times, ranks, priority="ready_time", use_edge_comm=False,
             share_bandwidth=False):
    """One step of `graph` on `cluster_doc` under `placement`; op_times[op][device] and ranks[op] are given."""
    c = Cluster(cluster_doc)
    n, ndev = len(graph["ops"]), len(c.devices)
    edges = graph_edges(graph)
    out_edges = [[] for _ in range(n)]
    missing = [0] * n
    for e in edges:
        out_edges[e[0]].append(e)
        missing[e[1]] += 1
    dev = [int(p) for p in placement]
    gap = [float(d.get("gap_after_op_s", 0.0)) for d in c.devices]
    net = SharedNetwork(c) if share_bandwidth else FifoNetwork(c)

    ready = [0.0 if missing[i] == 0 else None for i in range(n)]  # set once every input's arrival is known
    arrival = [0.0] * n
    start, end = [None] * n, [None] * n
    start_seq, end_seq = [None] * n, [None] * n  # order of events within an instant, for memory
    seq = 0
    running = [None] * ndev
    waiting = [[o for o in range(n) if dev[o] == d] for d in range(ndev)]  # ops not started yet
    free_at = [0.0] * ndev
    transfers = []  # one record per destination: op, src, dst, start, end, bytes, seq (request)
    link_bytes = [0.0] * len(c.links)
    total_bytes, num_transfers = 0.0, 0

    def priority_key(o):
        if priority == "rank":
            return (-ranks[o], ready[o], o)
        return (ready[o], -ranks[o], o)

    def deliver(v, t):
        missing[v] -= 1
        arrival[v] = max(arrival[v], t)
        if missing[v] == 0:
            ready[v] = arrival[v]

    def arrive(record, t):
        for x in record["dsts"]:
            transfers.append(dict(op=record["op"], src=record["src"], dst=x, start=record["start"], end=t,
                                  bytes=record["bytes"], seq=record["seq"]))
            for _, v, b, _ in out_edges[record["op"]]:
                if dev[v] == x and b > 0:
                    deliver(v, t)

    def finish_op(o, t):
        nonlocal total_bytes, num_transfers
        d = dev[o]
        running[d] = None
        # the gap delays only the device's next op, and follows only an op that took time
        free_at[d] = t + gap[d] if op_times[o][d] > 0 else t
        # Remote destinations in the order they first appear among the op's out-edges; the tensor's
        # size for a destination is its largest edge there; a control edge needs no transfer.
        dests, size, comm = [], {}, {}
        for _, v, b, cs in out_edges[o]:
            if dev[v] != d and b > 0:
                if dev[v] not in size:
                    dests.append(dev[v])
                    size[dev[v]] = 0
                    comm[dev[v]] = []
                size[dev[v]] = max(size[dev[v]], b)
                comm[dev[v]].append(cs if use_edge_comm else None)
        groups = [dests] if c.broadcast and dests else [[x] for x in dests]
        for group in groups:
            # A broadcast is one transfer over the union of its destinations' routes.
            chans = list(dict.fromkeys(ch for x in group for ch in c.routes[(d, x)]))
            nbytes = max(size[x] for x in group)
            # A measured transfer (every edge it serves has a comm_s) takes the longest of them.
            times = [cs for x in group for cs in comm[x]]
            measured = max(map(float, times)) if all(cs is not None for cs in times) else None
            record = dict(op=o, src=d, dsts=group, bytes=nbytes, seq=end_seq[o])
            if share_bandwidth:
                latency = max(c.route_latency(c.routes[(d, x)]) for x in group)
                record["start"] = t
                net.send(t, chans, latency, nbytes, measured, record)
            else:
                duration = measured if measured is not None else max(
                    c.route_time(c.routes[(d, x)], nbytes) for x in group)
                record["start"], t_end = net.send(t, chans, duration)
                arrive(record, t_end)
            # on every channel it holds: a broadcast whose routes cross one full-duplex link both ways
            # carries the tensor over it twice (the doc's "every link it crosses" allows either count)
            for li, _ in chans:
                link_bytes[li] += nbytes
            total_bytes += nbytes
            num_transfers += 1
        for _, v, b, _ in out_edges[o]:
            if dev[v] == d or b == 0:
                deliver(v, t)

    # The next event is the least (time, kind, device); kinds: network, op end, wake-up.
    while True:
        events = []
        t_net = net.next_event()
        if t_net is not None:
            events.append((t_net, 0, -1))
        for d in range(ndev):
            if running[d] is not None:
                events.append((end[running[d]], 1, d))
            else:
                known = [ready[o] for o in waiting[d] if ready[o] is not None]
                if known:
                    events.append((max(free_at[d], min(known)), 2, d))
        if not events:
            break
        t, kind, d = min(events)
        seq += 1
        if kind == 0:
            for record in net.advance(t):
                arrive(record, t)
        elif kind == 1:
            end_seq[running[d]] = seq
            finish_op(running[d], t)
        else:
            # A free device starts its best op among those ready by now; it never waits for one that is not.
            o = min((o for o in waiting[d] if ready[o] is not None and ready[o] <= t), key=priority_key)
            waiting[d].remove(o)
            start[o], end[o], start_seq[o] = t, t + op_times[o][d], seq
            running[d] = o
    assert all(s is not None for s in start), "some op never ran"

    op_time = [op_times[o][dev[o]] for o in range(n)]
    busy = [0.0] * ndev
    for o in sorted(range(n), key=lambda o: (start[o], start_seq[o])):
        busy[dev[o]] += op_time[o]
    peak, held_after, resident = memory_peaks(graph, edges, dev, ndev, start, end, start_seq, end_seq, transfers)
    excess = [max(0, peak[i] - int(c.devices[i]["memory_bytes"])) for i in range(ndev)]
    return dict(
        start=start, end=end, transfers=transfers, step_time_s=max(end),
        # every device and channel free again (gaps and busy_after; sharing ignores busy_after)
        busy_until_s=max([max(end)] + free_at + ([] if share_bandwidth else list(net.free.values()))),
        critical_path_s=critical_path(c, edges, dev, op_time, use_edge_comm),
        total_bytes_moved=total_bytes, num_transfers=num_transfers,
        device_busy_s=busy, device_peak_bytes=peak, device_excess_bytes=excess, oom=any(x > 0 for x in excess),
        resident_bytes=resident, held_after=held_after,
        link_busy_s=net.link_busy, link_bytes=link_bytes)


def critical_path(c, edges, dev, op_time, use_edge_comm):
    """Longest path of op times (on their devices) plus idle-network transfer times between devices.
    An edge between devices costs its comm_s when its transfer is measured (with use_edge_comm, every
    edge the transfer serves has one), else the idle-network time of its own bytes over the pair's
    route; a control edge costs nothing."""
    n = len(op_time)
    order, _ = topological_order(n, edges)
    longest = [0.0] * n  # longest path ending at the op's start
    preds = [[] for _ in range(n)]
    unmeasured = set()  # (producer, destination device) of modelled transfers; a broadcast: (producer, None)
    for s, d, b, cs in edges:
        preds[d].append((s, b, cs))
        if dev[s] != dev[d] and b > 0 and cs is None:
            unmeasured.add((s, None if c.broadcast else dev[d]))
    finish = [0.0] * n
    for v in order:
        for u, b, cs in preds[v]:
            w = 0.0
            if dev[u] != dev[v] and b > 0:
                if use_edge_comm and (u, None if c.broadcast else dev[v]) not in unmeasured:
                    w = float(cs)
                else:
                    w = c.route_time(c.routes[(dev[u], dev[v])], b)
            longest[v] = max(longest[v], finish[u] + w)
        finish[v] = longest[v] + op_time[v]
    return max(finish)


def memory_peaks(graph, edges, dev, ndev, start, end, start_seq, end_seq, transfers):
    """Peak bytes per device. Resident: the param_bytes of its ops, for the whole step. An op's output:
    from its start until its last local consumer and its last outgoing transfer have ended (at its end
    when nobody reads it). A received copy: from its transfer's start until its last consumer on that
    device ends. Temporary bytes: while the op runs.

    At one instant, frees come before allocations. The doc's rule cannot hold for an op that takes
    no time (its temporary bytes would be freed before they are allocated), so the reading here is
    that such an op still starts before it ends: the instant's op starts, zero-time op ends and
    transfer requests happen in the order the events are handled (the engine's (time, kind, device)
    order), after the frees caused by ops that ran for some time and by transfers that ended."""
    ops = graph["ops"]
    n = len(ops)
    readers = [[] for _ in range(n)]  # a control edge carries no data: its consumer reads nothing
    for s, d, b, _ in edges:
        if b > 0:
            readers[s].append(d)

    def op_end(o):  # the order key of the event that ends o
        return (end[o], 1, end_seq[o]) if end[o] == start[o] else (end[o], 0, 0)

    resident = [0] * ndev
    changes = [[] for _ in range(ndev)]  # (time, phase, seq, signed bytes); phase 0: frees of the past

    def hold(d, alloc_key, free_key, nbytes):
        if nbytes > 0:
            changes[d].append((*alloc_key, nbytes))
            changes[d].append((*free_key, -nbytes))

    for o in range(n):
        d = dev[o]
        resident[d] += int(ops[o].get("param_bytes", 0))
        hold(d, (start[o], 1, start_seq[o]), op_end(o), int(ops[o].get("temp_bytes", 0)))
        frees = [op_end(o)] + [op_end(v) for v in readers[o] if dev[v] == d]
        frees += [(tr["end"], 0, 0) for tr in transfers if tr["op"] == o]
        hold(d, (start[o], 1, start_seq[o]), max(frees), int(ops[o].get("output_bytes", 0)))
    for tr in transfers:
        # allocated when requested if it starts at once, else (reserved earlier) before the instant's events
        alloc = (tr["start"], 1, tr["seq"] if tr["start"] == end[tr["op"]] else 0)
        frees = [(tr["end"], 0, 0)] + [op_end(v) for v in readers[tr["op"]] if dev[v] == tr["dst"]]
        hold(tr["dst"], alloc, max(frees), int(tr["bytes"]))
    peaks, held_after = [], []  # held_after[d]: {instant: bytes held once its changes are done}
    for d in range(ndev):
        held = peak = resident[d]
        after = {}
        for t, *_, b in sorted(changes[d], key=lambda x: (x[0], x[1], x[2], x[3] > 0)):
            held += b
            peak = max(peak, held)
            after[t] = held
        peaks.append(peak)
        held_after.append(after)
    return peaks, held_after, resident
