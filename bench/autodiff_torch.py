#!/usr/bin/python3
"""PyTorch twin of bench/bm_autodiff.cpp: the same GDP policy network (2 GraphSAGE mean layers,
2 Transformer-XL blocks over 128-node segments with previous-segment memory, hidden 128) on the same
splitmix64 random DAG, timed for forward + backward on the CPU.

Usage: autodiff_torch.py --nodes N [--threads T] [--min-time S]; prints one JSON line.
"""
import argparse
import json
import math
import os
import resource
import time

import torch
import torch.nn.functional as F

FEATURES, HIDDEN, HEADS, FF, SEGMENT, DEVICES = 16, 128, 4, 256, 128, 8
MASK64 = (1 << 64) - 1


class SplitMix64:
    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def random_dag_neighbors(n):
    lists = [[] for _ in range(n)]
    rng = SplitMix64(12345)
    for i in range(1, n):
        preds = 1 + rng.next() % 2
        for _ in range(preds):
            p = i - 1 - rng.next() % min(i, 64)
            if p in lists[i]:
                continue
            lists[i].append(p)
            lists[p].append(i)
    return [sorted(l) for l in lists]


def random_features(n):
    rng = SplitMix64(777)
    values = [((rng.next() >> 11) * 2.0 ** -53) * 2 - 1 for _ in range(n * FEATURES)]
    return torch.tensor(values, dtype=torch.float32).view(n, FEATURES)


def mean_adjacency(lists):
    """Row-normalised sparse adjacency: A @ x is the neighbour mean (0 for isolated nodes)."""
    rows = [v for v, l in enumerate(lists) for _ in l]
    cols = [u for l in lists for u in l]
    vals = [1.0 / len(l) for l in lists for _ in l]
    n = len(lists)
    return torch.sparse_coo_tensor([rows, cols], vals, (n, n), dtype=torch.float32).coalesce()


class Sage(torch.nn.Module):
    def __init__(self, fin, fout):
        super().__init__()
        self.neigh = torch.nn.Linear(fin, fout)
        self.self_ = torch.nn.Linear(fin, fout, bias=False)

    def forward(self, x, adj):
        return self.neigh(torch.sparse.mm(adj, x)) + self.self_(x)


class XlBlock(torch.nn.Module):
    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.q, self.k, self.v, self.o = (torch.nn.Linear(d, d) for _ in range(4))
        self.norm1, self.norm2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.ff1, self.ff2 = torch.nn.Linear(d, ff), torch.nn.Linear(ff, d)

    def forward(self, x, keep):
        """x [B, L, d]; memory = previous segment (detached, zeros for the first); keep [B, L, 2L]."""
        B, L, d = x.shape
        h, dh = self.heads, d // self.heads
        memory = torch.cat([torch.zeros_like(x[:1]), x[:-1]], 0).detach()
        kv = torch.cat([memory, x], 1)
        q = self.q(x).view(B, L, h, dh).transpose(1, 2)
        k = self.k(kv).view(B, 2 * L, h, dh).transpose(1, 2)
        v = self.v(kv).view(B, 2 * L, h, dh).transpose(1, 2)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(dh)
        scores = scores.masked_fill(~keep.unsqueeze(1), float("-inf"))
        out = (torch.softmax(scores, -1) @ v).transpose(1, 2).reshape(B, L, d)
        x = self.norm1(x + self.o(out))
        return self.norm2(x + self.ff2(F.relu(self.ff1(x))))


class GdpNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(FEATURES, HIDDEN)
        self.sage1, self.sage2 = Sage(HIDDEN, HIDDEN), Sage(HIDDEN, HIDDEN)
        self.block1, self.block2 = XlBlock(HIDDEN, HEADS, FF), XlBlock(HIDDEN, HEADS, FF)
        self.head = torch.nn.Linear(HIDDEN, DEVICES)

    def loss(self, x, adj, keep, actions):
        n = x.shape[0]
        blocks = (n + SEGMENT - 1) // SEGMENT
        h = F.relu(self.embed(x))
        h = F.relu(self.sage1(h, adj))
        h = F.relu(self.sage2(h, adj))
        h = torch.cat([h, h.new_zeros(blocks * SEGMENT - n, HIDDEN)], 0).view(blocks, SEGMENT, HIDDEN)
        h = self.block2(self.block1(h, keep), keep)
        logp = torch.log_softmax(self.head(h.reshape(-1, HIDDEN)[:n]), -1)
        return -logp.gather(1, actions.unsqueeze(1)).mean()


def segment_keep(n):
    """Same mask as placelab's segment_mask(blocks, 128, 128, n, first_has_memory=False)."""
    blocks = (n + SEGMENT - 1) // SEGMENT
    keep = torch.zeros(blocks, SEGMENT, 2 * SEGMENT, dtype=torch.bool)
    keep[1:, :, :SEGMENT] = True
    valid = torch.arange(blocks * SEGMENT).view(blocks, SEGMENT) < n
    keep[:, :, SEGMENT:] = valid.unsqueeze(1)
    return keep


def loaded_blas():
    """The BLAS this process really runs (Debian's torch reaches it through the libblas.so.3 alternative)."""
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "blas" in line.rsplit("/", 1)[-1]}
    return ", ".join(sorted(os.path.realpath(p) for p in paths)) or "none found"


def current_rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 2 ** 20


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--min-time", type=float, default=2.0)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)
    n = args.nodes
    adj = mean_adjacency(random_dag_neighbors(n))
    x = random_features(n)
    keep = segment_keep(n)
    actions = torch.arange(n) % DEVICES
    net = GdpNet()
    baseline_mb = current_rss_mb()
    times, cpu_times = [], []
    start = time.perf_counter()
    while True:
        t0, c0 = time.perf_counter(), time.process_time()
        loss = net.loss(x, adj, keep, actions)
        loss.backward()
        net.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
        cpu_times.append(time.process_time() - c0)
        if len(times) >= 3 and time.perf_counter() - start >= args.min_time:
            break
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times, cpu_times = times[1:], cpu_times[1:]  # the first step warms allocator and caches
    print(json.dumps({"framework": "pytorch", "version": torch.__version__, "nodes": n, "threads": args.threads,
                      "blas": loaded_blas(),
                      "iterations": len(times), "mean_ms": 1e3 * sum(times) / len(times),
                      "min_ms": 1e3 * min(times),
                      "cpu_ms": 1e3 * sum(cpu_times) / len(cpu_times), "peak_rss_mb": peak_mb, "step_peak_mb": peak_mb - baseline_mb,
                      "params": sum(p.numel() for p in net.parameters())}))


if __name__ == "__main__":
    main()
