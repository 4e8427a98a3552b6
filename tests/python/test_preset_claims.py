# The cluster presets against docs/simulator.md ("Clusters", "Presets") and docs/python.md, written
# from the docs alone: names and sizes, every number the preset table states, the stated topologies
# (checked through the routes the cluster computes), the placeto preset, and the to_dict round trip.
# Where the doc gives only "typical magnitudes" (latencies other than eth/ib), nothing is checked.
# Datasheets (NVIDIA, Intel, DGX-1V topology) are used only where the doc's own wording is loose.
import itertools

import pytest

import placelab as pl

GiB = 2 ** 30

# The table in docs/simulator.md, "Presets": family -> documented sizes.
TABLE = {
    "k80": [1, 2, 4, 8], "p100": [1, 2, 4, 8], "v100-nvlink": [1, 2, 4, 8], "v100-pcie": [1, 2, 4, 8],
    "a100": [1, 2, 4, 8], "h100": [1, 2, 4, 8], "cpu": [1, 2], "cpu-gpu": [1, 2, 4, 8],
    "eth": [1, 2, 4, 8], "k80-eth": [1, 2, 4, 8], "ib": [1, 2, 4, 8], "placeto": [1, 2, 4, 8], "desktop-igpu": [1],
}
ALL = [f"{f}-{n}" for f, ns in TABLE.items() for n in ns]

# DGX-1 hybrid cube mesh: two fully connected quads, plus gpu i <-> gpu i+4.
CUBE_MESH = {frozenset(p) for q in ((0, 1, 2, 3), (4, 5, 6, 7)) for p in itertools.combinations(q, 2)}
CUBE_MESH |= {frozenset((i, i + 4)) for i in range(4)}


def approx(x):
    return pytest.approx(x, rel=1e-9, abs=0)


class View:
    """A preset, its to_dict() and its routes walked node by node."""

    def __init__(self, name):
        self.c = pl.make_preset(name)
        self.d = self.c.to_dict()
        self.dev = {x["name"]: x for x in self.d["devices"]}
        self.link = {l["name"]: l for l in self.d["links"]}
        self.names = list(self.c.device_names)

    def gpus(self):
        return [x for x in self.d["devices"] if x["kind"] != "cpu"]

    def path(self, s, t):
        """Links and the nodes they visit from device s to device t (indices)."""
        links = self.c.route(s, t)
        node, nodes = self.names[s], [self.names[s]]
        for ln in links:
            ends = self.link[ln].get("ends")
            assert ends is not None and node in ends, (ln, node)
            node = ends[1] if ends[0] == node else ends[0]
            nodes.append(node)
        return links, nodes

    def neighbours(self, node):
        out = []
        for l in self.d["links"]:
            e = l.get("ends") or []
            if node in e:
                out.append((e[1] if e[0] == node else e[0], l))
        return out

    def is_device(self, node):
        return node in self.dev


def test_preset_names_and_families():
    # "Names are FAMILY-N", for the families and N of the table.
    assert sorted(pl.preset_names()) == sorted(ALL)
    fams = {f["family"]: list(f["sizes"]) for f in pl.preset_families()}
    assert fams == TABLE


@pytest.mark.parametrize("name", ALL)
def test_device_count_and_default_routes(name):
    # Every ordered pair of distinct devices has a route; routes of links with ends pass through
    # switches only ("devices never forward traffic for others") and end at the destination.
    v = View(name)
    fam, n = name.rsplit("-", 1)
    n = int(n)
    expect = n + 1 if fam in ("cpu-gpu", "desktop-igpu") else n
    assert v.c.num_devices == len(v.names) == expect
    for s, t in itertools.permutations(range(expect), 2):
        links = v.c.route(s, t)
        assert links, (s, t)
        if fam == "placeto":
            continue
        _, nodes = v.path(s, t)
        assert nodes[-1] == v.names[t]
        assert not any(v.is_device(x) for x in nodes[1:-1]), nodes


# family -> (peak FLOP/s, memory B/s or None, memory bytes or None), as the table writes them.
NUMBERS = {
    "k80": (4.37e12, 240e9, 12 * GiB),
    "p100": (10.6e12, 732e9, 16 * GiB),
    "v100-nvlink": (15.7e12, 900e9, 16 * GiB),
    "v100-pcie": (14e12, None, None),
    "a100": (19.5e12, 1555e9, None),
    "h100": (67e12, 3.35e12, None),
    "cpu": (2.94e12, 204.8e9, 256 * GiB),
}


@pytest.mark.parametrize("name", [p for p in ALL if p.rsplit("-", 1)[0] in NUMBERS])
def test_device_numbers(name):
    # "K80 dies (4.37 TFLOP/s, 240 GB/s, 12 GiB)", "P100 SXM2 (10.6 TFLOP/s, 732 GB/s, 16 GiB)",
    # "V100 SXM2 (15.7 TFLOP/s, 900 GB/s, 16 GiB)", "V100 PCIe (14 TFLOP/s)", "A100 SXM4 40GB
    # (19.5 TFLOP/s, 1555 GB/s)", "H100 SXM5 80GB (67 TFLOP/s, 3.35 TB/s)", "Xeon Platinum 8380 sockets
    # (2.94 TFLOP/s, 204.8 GB/s, 256 GiB)". 2.94 is rounded (8380: 40 cores x 2.3 GHz x 32 = 2.944).
    v = View(name)
    fam = name.rsplit("-", 1)[0]
    flops, bw, mem = NUMBERS[fam]
    assert len({x["kind"] for x in v.d["devices"]}) == 1, "one kind per family"
    for x in v.d["devices"]:
        assert x["peak_flops_per_s"] == pytest.approx(flops, rel=2e-3 if fam == "cpu" else 1e-9)
        if bw is not None:
            assert x["memory_bandwidth_bytes_per_s"] == approx(bw)
        if mem is not None:
            assert x["memory_bytes"] == mem


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_a100_h100_memory_as_named(n):
    # "A100 SXM4 40GB", "H100 SXM5 80GB": the product names; the HBM stacks hold 40 / 80 GiB
    # (5 x 8 GiB, 5 x 16 GiB), so either reading of "GB" is accepted, nothing else.
    for fam, g in (("a100", 40), ("h100", 80)):
        for x in View(f"{fam}-{n}").d["devices"]:
            assert x["memory_bytes"] in (g * 10 ** 9, g * GiB), (fam, x["memory_bytes"])


@pytest.mark.parametrize("name", ALL)
def test_launch_overheads_and_efficiencies(name):
    # "launch overheads (5 us per GPU op, 2 us per CPU op) and efficiencies (0.7 for GPUs, 0.5 for
    # CPUs)". The placeto preset models Placeto's simulator, whose per-op cost is the 5.7 us gap
    # (checked below), so its launch overhead is not asserted here.
    v = View(name)
    for x in v.d["devices"]:
        cpu = x["kind"] == "cpu"
        assert x["efficiency"] == approx(0.5 if cpu else 0.7), x["name"]
        if not name.startswith("placeto") and x["kind"] != "igpu":  # the igpu: 10 us, checked below
            assert x["launch_overhead_s"] == approx(2e-6 if cpu else 5e-6), x["name"]


def test_v100_pcie_devices_are_the_same_everywhere():
    # v100-pcie, cpu-gpu, eth and ib all say "V100 PCIe": the same device numbers in each.
    ref = View("v100-pcie-2").gpus()[0]
    keys = ["kind", "peak_flops_per_s", "memory_bandwidth_bytes_per_s", "memory_bytes",
            "launch_overhead_s", "efficiency"]
    for name in ["cpu-gpu-2", "eth-2", "ib-2"]:
        for x in View(name).gpus():
            assert {k: x[k] for k in keys} == {k: ref[k] for k in keys}, name


def pcie_tree(v):
    """GPU -> its PCIe switch; switch -> its upstream node (socket / root complex)."""
    sw_of, up_of = {}, {}
    for g in v.gpus():
        ups = [(o, l) for o, l in v.neighbours(g["name"]) if not v.is_device(o)]
        assert len(ups) == 1, (g["name"], ups)
        sw_of[g["name"]] = ups[0][0]
    for sw in set(sw_of.values()):
        ups = [(o, l) for o, l in v.neighbours(sw) if not v.is_device(o)]
        assert len(ups) == 1, (sw, ups)
        up_of[sw] = ups[0]
    return sw_of, up_of


@pytest.mark.parametrize("name", [f"{f}-{n}" for f in ("k80", "v100-pcie") for n in (1, 2, 4, 8)])
def test_pcie_only_hosts(name):
    # k80: "pairs behind PCIe 3.0 switches (15.75 GB/s), switches on two sockets, QPI (38.4 GB/s)";
    # v100-pcie: "PCIe only, as for k80".
    v = View(name)
    n = v.c.num_devices
    sw_of, up_of = pcie_tree(v)
    assert not any(v.is_device(o) for g in v.names for o, _ in v.neighbours(g)), "PCIe only"
    for g in v.names:
        for o, l in v.neighbours(g):
            assert l["bandwidth_bytes_per_s"] == approx(15.75e9), l["name"]
    per_switch = {}
    for g, sw in sw_of.items():
        per_switch.setdefault(sw, []).append(g)
    assert sorted(len(x) for x in per_switch.values()) == [min(2, n)] * ((n + 1) // 2), per_switch
    for sw, (sock, l) in up_of.items():
        assert l["bandwidth_bytes_per_s"] == approx(15.75e9), l["name"]
    sockets = {s for s, _ in up_of.values()}
    if n == 8:
        assert len(sockets) == 2
        qpi = [l for l in v.d["links"] if set(l.get("ends") or []) == sockets]
        assert len(qpi) == 1 and qpi[0]["bandwidth_bytes_per_s"] == approx(38.4e9)
    # A pair behind one switch meets there; others go up through the socket(s).
    for s, t in itertools.permutations(range(n), 2):
        links, nodes = v.path(s, t)
        if sw_of[v.names[s]] == sw_of[v.names[t]]:
            assert nodes[1:-1] == [sw_of[v.names[s]]]
        else:
            assert nodes[1] == sw_of[v.names[s]] and nodes[-2] == sw_of[v.names[t]] and len(nodes) >= 5


def nvlinks(v):
    """{frozenset(gpu indices): bandwidth} of the direct device-device links."""
    out = {}
    for l in v.d["links"]:
        e = l.get("ends") or []
        if len(e) == 2 and v.is_device(e[0]) and v.is_device(e[1]):
            key = frozenset(v.names.index(x) for x in e)
            out[key] = out.get(key, 0) + l["bandwidth_bytes_per_s"]
    return out


@pytest.mark.parametrize("fam", ["p100", "v100-nvlink"])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_dgx1_cube_mesh(fam, n):
    # "DGX-1 hybrid cube mesh ...; PCIe elsewhere": NVLink exactly between the cube-mesh pairs of the
    # first N GPUs, and a pair with an NVLink uses it (one hop); every other pair goes over PCIe.
    v = View(f"{fam}-{n}")
    mesh = {p for p in CUBE_MESH if max(p) < n}
    nv = nvlinks(v)
    assert set(nv) == mesh
    for s, t in itertools.permutations(range(n), 2):
        links, nodes = v.path(s, t)
        if frozenset((s, t)) in mesh:
            assert len(links) == 1 and frozenset((s, t)) in nv
        else:
            assert len(links) >= 2 and not any(v.is_device(x) for x in nodes[1:-1])


def test_p100_nvlink_1():
    # "NVLink 1.0 at 20 GB/s per link": every link single (P100 has 4 links: 3 in the quad + 1 across).
    nv = nvlinks(View("p100-8"))
    assert all(b == approx(20e9) for b in nv.values()), nv


def test_v100_single_and_double_nvlinks():
    # "DGX-1V cube mesh with single and double NVLink 2.0 links (25/50 GB/s)". V100 SXM2 has six
    # NVLinks: each GPU has four neighbours, two of them doubled (150 GB/s per GPU in all). The
    # DGX-1V's doubled pairs (nvidia-smi topo -m: NV2) are 0-3, 0-4, 1-2, 1-5, 2-3, 4-7, 5-6, 6-7.
    nv = nvlinks(View("v100-nvlink-8"))
    assert sorted(set(nv.values())) == [approx(25e9), approx(50e9)]
    for g in range(8):
        mine = [b for p, b in nv.items() if g in p]
        assert len(mine) == 4 and sum(mine) == approx(150e9), (g, mine)
    doubles = {frozenset(p) for p in [(0, 3), (0, 4), (1, 2), (1, 5), (2, 3), (4, 7), (5, 6), (6, 7)]}
    assert {p for p, b in nv.items() if b == approx(50e9)} == doubles


@pytest.mark.parametrize("fam", ["p100", "v100-nvlink"])
def test_dgx1_gpu0_to_gpu5_over_pcie_and_qpi(fam):
    # "on a DGX-1 gpu0 -> gpu5 (no NVLink between them) goes over PCIe and QPI, not over two NVLinks
    # through gpu1"; PCIe switches are shared by GPU pairs, the two sockets joined by QPI.
    v = View(f"{fam}-8")
    sw_of, up_of = pcie_tree(v)
    per_switch = {}
    for g, sw in sw_of.items():
        per_switch.setdefault(sw, set()).add(g)
    assert sorted(len(x) for x in per_switch.values()) == [2, 2, 2, 2]
    sockets = {s for s, _ in up_of.values()}
    assert len(sockets) == 2
    links, nodes = v.path(0, 5)
    assert nodes == ["gpu0", sw_of["gpu0"], up_of[sw_of["gpu0"]][0], up_of[sw_of["gpu5"]][0],
                     sw_of["gpu5"], "gpu5"]
    assert up_of[sw_of["gpu0"]][0] != up_of[sw_of["gpu5"]][0], "crosses QPI"


@pytest.mark.parametrize("fam,per_gpu", [("a100", 300e9), ("h100", 450e9)])
@pytest.mark.parametrize("n", [2, 4, 8])
def test_nvswitch(fam, per_gpu, n):
    # "NVSwitch, 300 GB/s per direction per GPU" (A100), "450 GB/s" (H100): every pair through one
    # switch, each GPU's link to it full duplex at that bandwidth.
    v = View(f"{fam}-{n}")
    switch = None
    for s, t in itertools.permutations(range(n), 2):
        links, nodes = v.path(s, t)
        assert len(nodes) == 3 and not v.is_device(nodes[1])
        switch = switch or nodes[1]
        assert nodes[1] == switch
        for ln in links:
            assert v.link[ln]["bandwidth_bytes_per_s"] == approx(per_gpu)
            assert v.link[ln]["duplex"] == "full"
    assert not nvlinks(v)


def test_cpu_upi():
    # "Xeon Platinum 8380 sockets ...; UPI, 67.2 GB/s".
    v = View("cpu-2")
    assert [x["kind"] for x in v.d["devices"]] == ["cpu", "cpu"]
    for s, t in [(0, 1), (1, 0)]:
        links, _ = v.path(s, t)
        assert len(links) == 1 and v.link[links[0]]["bandwidth_bytes_per_s"] == approx(67.2e9)
    assert View("cpu-1").c.num_devices == 1


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_cpu_gpu(n):
    # "one Xeon socket (kind cpu) + N V100 PCIe: HSDAG's CPU + GPU setting | GPUs in pairs behind PCIe
    # switches on the socket's root complex".
    v = View(f"cpu-gpu-{n}")
    kinds = [x["kind"] for x in v.d["devices"]]
    assert kinds.count("cpu") == 1 and len(kinds) == n + 1
    cpu = next(x for x in v.d["devices"] if x["kind"] == "cpu")
    assert cpu["peak_flops_per_s"] == pytest.approx(2.94e12, rel=2e-3)
    assert cpu["memory_bandwidth_bytes_per_s"] == approx(204.8e9)
    for g in v.gpus():
        assert g["peak_flops_per_s"] == approx(14e12)
    sw_of, up_of = pcie_tree(v)
    per_switch = {}
    for g, sw in sw_of.items():
        per_switch.setdefault(sw, []).append(g)
    assert sorted(len(x) for x in per_switch.values()) == [min(2, n)] * ((n + 1) // 2)
    roots = {r for r, _ in up_of.values()}
    assert len(roots) == 1, "every switch on the one root complex"
    root = roots.pop()
    ci = v.names.index(cpu["name"])
    for gi, gname in enumerate(v.names):
        if gi == ci:
            continue
        _, nodes = v.path(ci, gi)
        assert root in nodes and nodes[-2] == sw_of[gname], nodes
        _, back = v.path(gi, ci)
        assert back[1] == sw_of[gname] and root in back


@pytest.mark.parametrize("fam,bw,lat,flops", [("eth", 3.125e9, 10e-6, 14e12), ("k80-eth", 1.25e9, 10e-6, 4.37e12),
                                              ("ib", 12.5e9, 1e-6, 14e12)])
@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_network_through_one_switch(fam, bw, lat, flops, n):
    # eth: "N hosts with one V100 PCIe each | 25 Gb Ethernet (3.125 GB/s, 10 us per hop) through one
    # switch"; k80-eth: "one K80 die each | 10 Gb Ethernet (1.25 GB/s, 10 us per hop)"; ib: "InfiniBand EDR
    # (12.5 GB/s, 1 us per hop) through one switch".
    v = View(f"{fam}-{n}")
    assert len(v.gpus()) == n
    for g in v.gpus():
        assert g["peak_flops_per_s"] == approx(flops)
    switch = None
    for s, t in itertools.permutations(range(n), 2):
        links, nodes = v.path(s, t)
        net = [ln for ln in links if v.link[ln]["bandwidth_bytes_per_s"] == approx(bw)]
        # the two network hops meet at the one switch; each has the stated bandwidth and latency
        assert len(net) == 2, links
        i = links.index(net[0])
        assert links[i + 1] == net[1]
        mid = nodes[i + 1]
        switch = switch or mid
        assert mid == switch
        for ln in net:
            assert v.link[ln]["latency_s"] == approx(lat)
        # on an idle network: the latencies plus the bytes over the slowest hop
        expect = sum(v.link[ln]["latency_s"] for ln in links) + 1e6 / min(
            v.link[ln]["bandwidth_bytes_per_s"] for ln in links)
        assert v.c.transfer_time_s(s, t, 1e6) == approx(expect)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_placeto(n):
    # "identical K80-like devices | Placeto's simulator: one outgoing half-duplex bus per device at
    # 7600 bytes/us, broadcast transfers, a 5.7 us gap after each op, the bus busy 25 us more after
    # each transfer".
    v = View(f"placeto-{n}")
    assert v.d["transfer_mode"] == "broadcast"
    devs = [{k: x[k] for k in x if k != "name"} for x in v.d["devices"]]
    assert all(d == devs[0] for d in devs), "identical devices"
    assert devs[0]["gap_after_op_s"] == approx(5.7e-6)
    assert len(v.d["links"]) == n
    bus_of = {}
    for l in v.d["links"]:
        assert not l.get("ends"), "a bus has no ends"
        assert l["bandwidth_bytes_per_s"] == approx(7600e6)
        assert l["duplex"] == "half"
        assert l["busy_after_s"] == approx(25e-6)
        assert l.get("latency_s", 0) == 0
    for s in range(n):
        outs = {tuple(v.c.route(s, t)) for t in range(n) if t != s}
        if n > 1:
            assert len(outs) == 1 and len(next(iter(outs))) == 1, outs
            bus_of[s] = next(iter(outs))[0]
    assert len(set(bus_of.values())) == len(bus_of), "one bus per device"
    if n > 1:
        # the documented example: 76000 bytes take 76000 / 7600 = 10 us
        assert v.c.transfer_time_s(0, 1, 76000) == approx(10e-6)


@pytest.mark.parametrize("name", ALL)
def test_round_trip(name):
    # cluster.to_dict() is the placelab.cluster format; reading it back gives the same cluster.
    c = pl.make_preset(name)
    d = c.to_dict()
    c2 = pl.cluster_from_dict(d)
    assert c2.to_dict() == d
    assert list(c2.device_names) == list(c.device_names)
    n = c.num_devices
    for s, t in itertools.permutations(range(n), 2):
        assert c2.route(s, t) == c.route(s, t)


def test_desktop_igpu():
    # "a Core i9-12900K (kind cpu: ... 1.73 TFLOP/s, ... 76.8 GB/s, 32 GiB) and its UHD Graphics 770 (kind
    # igpu: ... 0.79 TFLOP/s, the same DDR5, 16 GiB of it, 10 us per kernel enqueue)"; "one link shared-dram:
    # ... 38.4 GB/s ... after a 20 us queue synchronisation".
    v = View("desktop-igpu-1")
    cpu, igpu = v.d["devices"]
    assert (cpu["kind"], igpu["kind"]) == ("cpu", "igpu")
    assert cpu["peak_flops_per_s"] == approx(8 * 32 * 4.9e9 + 8 * 16 * 3.7e9)
    assert igpu["peak_flops_per_s"] == approx(32 * 16 * 1.55e9)
    assert cpu["memory_bandwidth_bytes_per_s"] == igpu["memory_bandwidth_bytes_per_s"] == approx(76.8e9)
    assert (cpu["memory_bytes"], igpu["memory_bytes"]) == (32 * GiB, 16 * GiB)
    assert igpu["launch_overhead_s"] == approx(10e-6)
    (link,) = v.d["links"]
    assert (link["name"], link["bandwidth_bytes_per_s"], link["latency_s"]) == ("shared-dram", approx(38.4e9), approx(20e-6))
    # "of comparable speed: splits beat both CPU-only and GPU-only": HEFT's split of Inception-v3 inference.
    g = pl.make_model("inception_v3")
    sim = pl.Simulator(g, v.c)
    cpu_only, gpu_only = (sim.simulate([d] * g.num_ops)["step_time_s"] for d in (0, 1))
    placement, _ = pl.place(sim, "heft", {}, 1)
    assert sim.simulate(placement)["step_time_s"] < 0.9 * min(cpu_only, gpu_only)


# ------------------------------------------------------------------- multi-node ("Multi-node presets")

# kind -> (peak FLOP/s, memory B/s, NVLink B/s per GPU and direction, NIC B/s per direction), as the table has them.
MULTI = {"h100": (67e12, 3.35e12, 450e9, 50e9, 80), "a100": (19.5e12, 2039e9, 300e9, 25e9, 80),
         "v100": (15.7e12, 900e9, 150e9, 12.5e9, 32)}


@pytest.mark.parametrize("name", ["h100-nodes-2x8", "a100-nodes-3x8", "h100-nodes-4x4-os2", "a100-nodes-5x2-os4",
                                  "h100-nodes-3x1", "h100-nodes-1x4", "v100-nodes-2x4"])
def test_multinode_presets(name):
    # "GPUs are n<a>.gpu<i> (node a, GPU i), in node order"; the table's numbers; "within a node 2 hops over
    # the NVSwitch; between nodes on one rail 4 (NIC, crossbar, crossbar, NIC); across rails 6 (NIC, port to
    # uplink, uplink to spine, spine to the other leaf's uplink, to the port, NIC)"; uplink `leaf<i>.up<a / R>`,
    # ceil(N / R) per leaf; latencies: NVLink hop 1 us, NIC 1 us, crossbar 0, "the spine adds 1 us".
    kind, _, shape, *over = name.split("-")
    nodes, gpus = (int(x) for x in shape.split("x"))
    r = int(over[0][2:]) if over else 1
    flops, bw, nvlink, nic, memory = MULTI[kind]
    v = View(name)
    assert v.names == [f"n{a}.gpu{i}" for a in range(nodes) for i in range(gpus)]
    for x in v.d["devices"]:
        assert x["kind"] == kind and x["peak_flops_per_s"] == approx(flops)
        assert x["memory_bandwidth_bytes_per_s"] == approx(bw) and x["memory_bytes"] in (memory * 10 ** 9, memory * GiB)
        assert x["launch_overhead_s"] == approx(5e-6) and x["efficiency"] == approx(0.7)
    for l in v.d["links"]:
        assert l["duplex"] == "full"
    uplinks = {l["ends"][0] for l in v.d["links"] if l["name"].endswith("-spine")}
    assert len(uplinks) == (gpus * -(-nodes // r) if nodes > 1 and gpus > 1 else 0)
    for s, t in itertools.permutations(range(nodes * gpus), 2):
        (a, i), (b, j) = divmod(s, gpus), divmod(t, gpus)
        links, path = v.path(s, t)
        lat = sum(v.link[ln]["latency_s"] for ln in links)
        if a == b:
            assert path[1:-1] == [f"n{a}.nvswitch"]
            assert all(v.link[ln]["bandwidth_bytes_per_s"] == approx(nvlink) for ln in links)
            assert lat == approx(2e-6)
            expect = 2e-6 + 1e9 / nvlink
        elif i == j:
            assert path[1:-1] == [f"leaf{i}.port{a}", f"leaf{i}", f"leaf{i}.port{b}"]
            assert lat == approx(2e-6)
            expect = 2e-6 + 1e9 / nic
        else:
            assert path[1:-1] == [f"leaf{i}.port{a}", f"leaf{i}.up{a // r}", "spine", f"leaf{j}.up{b // r}",
                                  f"leaf{j}.port{b}"]
            assert lat == approx(3e-6)
            expect = 3e-6 + 1e9 / nic
        assert v.c.transfer_time_s(s, t, 1e9) == approx(expect)
    assert pl.load_cluster(name).to_dict() == v.d
