# Placeto's simulator (Addanki et al. 2019; aravic/generalizable-device-placement,
# sim/tf_placement_sim/tf_sim.py) restated from its published rules, written here for the differential
# test in test_placeto_sim.py: the `placeto` preset must give the same schedule, bit for bit.
#
# Its rules, in its units (microseconds, bytes):
# - one event heap ordered by (time, kind, key): kinds "release" < "bus" < "device" (the order of its
#   event names), a release keyed by (producer name, consumer name), a bus or a device by its name;
# - each device and each device's outgoing bus serves a FIFO queue ordered by (ready time, arrival
#   number), arrival numbers counting every queue insertion; sources enter in graph order at time 0;
# - an op runs when its device serves it; after it the device is free again at end + 5.7, or at its end
#   when the op took no time; a consumer on the same device is released at the op's end;
# - the op's output, if some consumer is on another device, joins its device's bus queue, ready at the
#   op's end: one transfer for all those consumers, taking bytes / 7600; each of them is released at
#   the transfer's end, and the bus is free again 25 later;
# - the reported run time is the time of the last event (device or bus freed, op released).
import heapq

GAP_US = 5.7
BUS_HOLD_US = 25
BYTES_PER_US = 7600


def simulate(names, cost_us, out_bytes, edges, placement):
    """Start times (us) of every op and the run time (us). names[i], cost_us[i] and out_bytes[i] per op;
    edges (producer, consumer) in graph order; placement[i] a device index (devices named in index order)."""
    n = len(names)
    children = [[] for _ in range(n)]
    waiting = [0] * n
    for p, c in edges:
        children[p].append(c)
        waiting[c] += 1
    events = []  # (time, kind, key, payload): kind 0 release, 1 bus, 2 device
    queues = {}  # ("dev" | "bus", device) -> heap of (ready, arrival, item)
    active = set()  # queues with a serving event pending
    arrivals = 0
    start = [None] * n
    run_time = 0.0

    def enqueue(t, which, item):
        nonlocal arrivals
        arrivals += 1
        heapq.heappush(queues.setdefault(which, []), (t, arrivals, item))
        if which not in active:
            active.add(which)
            heapq.heappush(events, (t, 1 if which[0] == "bus" else 2, which[1], which))

    for i in range(n):
        if waiting[i] == 0:
            enqueue(0.0, ("dev", placement[i]), i)

    while events:
        t, kind, _, payload = heapq.heappop(events)
        run_time = max(run_time, t)
        if kind == 0:
            c = payload
            waiting[c] -= 1
            if waiting[c] == 0:
                enqueue(t, ("dev", placement[c]), c)
            continue
        queue = queues[payload]
        if not queue:
            active.discard(payload)
            continue
        if kind == 2:
            _, _, op = heapq.heappop(queue)
            d = placement[op]
            start[op] = t
            end = t + cost_us[op]
            heapq.heappush(events, (end + (GAP_US if cost_us[op] != 0 else 0), 2, d, payload))
            remote = []
            for c in children[op]:
                if placement[c] == d:
                    heapq.heappush(events, (end, 0, (names[op], names[c]), c))
                else:
                    remote.append(c)
            if remote:
                enqueue(end, ("bus", d), (op, out_bytes[op] / BYTES_PER_US, remote))
        else:
            ready, arrival, (op, delay, remote) = queue[0]
            if ready > t:  # the next transfer's producer has not ended yet
                heapq.heappush(events, (ready, 1, payload[1], payload))
                continue
            heapq.heappop(queue)
            for c in remote:
                heapq.heappush(events, (t + delay, 0, (names[op], names[c]), c))
            heapq.heappush(events, (t + delay + BUS_HOLD_US, 1, payload[1], payload))
    assert all(s is not None for s in start), "some op never ran"
    return start, run_time
