#!/usr/bin/python3
"""Writes the PyTorch golden fixtures of the autodiff layers (tests/golden/autodiff/*.json).

Run once with /usr/bin/python3 (python3-torch); the fixtures are committed and read by
tests/policy/golden_test.cpp, which loads the same weights and inputs into placelab's layers and
compares outputs and gradients. Each fixture holds parameters under placelab's names and layout
(Linear weights input-major: torch's weight transposed), inputs, a projection W of the output, the
output, and the gradients of loss = sum(output * W) for every input and parameter.
"""
import json
import pathlib
import warnings

import torch

warnings.filterwarnings("ignore", message="scatter_reduce")  # beta API in torch 1.13, stable since

OUT = pathlib.Path(__file__).resolve().parents[1] / "golden" / "autodiff"


def mat(t):
    t = t.detach().to(torch.float32)
    if t.dim() == 1:
        t = t.unsqueeze(0)
    return [[float(f"{v:.9g}") for v in row] for row in t.tolist()]


def finish(name, params, inputs, output, extra=None):
    """params/inputs: name -> (torch tensor, transform into placelab's layout), applied to value and grad."""
    g = torch.Generator().manual_seed(7)
    w = torch.rand(output.shape, generator=g) * 2 - 1
    (output * w).sum().backward()
    both = {**params, **inputs}
    doc = {
        "params": {k: mat(f(t)) for k, (t, f) in params.items()},
        "inputs": {k: mat(f(t)) for k, (t, f) in inputs.items()},
        "projection": mat(w),
        "output": mat(output),
        "grads": {k: mat(f(t.grad)) for k, (t, f) in both.items()},
    }
    doc.update(extra or {})
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(doc, separators=(",", ":")) + "\n")


def same(t):
    return t


def tr(t):
    return t.t()


def leaf(*shape, gen):
    return (torch.rand(*shape, generator=gen) * 2 - 1).requires_grad_(True)


def linear_fixture():
    gen = torch.Generator().manual_seed(1)
    lin = torch.nn.Linear(6, 5)
    with torch.no_grad():
        lin.weight.copy_(torch.rand(5, 6, generator=gen) - 0.5)
        lin.bias.copy_(torch.rand(5, generator=gen) - 0.5)
    x = leaf(4, 6, gen=gen)
    y = lin(x)
    finish("linear", {"weight": (lin.weight, tr), "bias": (lin.bias, same)}, {"x": (x, same)}, y)


def layer_norm_fixture():
    gen = torch.Generator().manual_seed(2)
    ln = torch.nn.LayerNorm(8)
    with torch.no_grad():
        ln.weight.copy_(torch.rand(8, generator=gen) + 0.5)
        ln.bias.copy_(torch.rand(8, generator=gen) - 0.5)
    x = (torch.rand(5, 8, generator=gen) * 4 - 2).requires_grad_(True)
    y = ln(x)
    finish("layer_norm", {"weight": (ln.weight, same), "bias": (ln.bias, same)}, {"x": (x, same)}, y)


# Node v's neighbours (both directions of a small DAG); node 6 is isolated.
EDGES = [(0, 1), (0, 2), (1, 3), (2, 3), (3, 4), (1, 4), (4, 5)]
N = 7


def neighbor_lists():
    lists = [set() for _ in range(N)]
    for s, d in EDGES:
        lists[s].add(d)
        lists[d].add(s)
    return [sorted(l) for l in lists]


def sage_fixture(aggregator):
    gen = torch.Generator().manual_seed(3 if aggregator == "mean" else 4)
    fin, fout = 5, 4
    lists = neighbor_lists()
    dst = torch.tensor([v for v, l in enumerate(lists) for _ in l])
    src = torch.tensor([u for l in lists for u in l])
    x = leaf(N, fin, gen=gen)
    params = {}

    def weight(name, rows, cols, bias):
        w = (torch.rand(cols, rows, generator=gen) - 0.5).requires_grad_(True)  # torch layout [out, in]
        params[f"{name}.weight"] = (w, tr)
        if bias:
            b = (torch.rand(cols, generator=gen) - 0.5).requires_grad_(True)
            params[f"{name}.bias"] = (b, same)
            return lambda t: t @ w.t() + b
        return lambda t: t @ w.t()

    pool = weight("pool", fin, fin, True) if aggregator == "max_pool" else None
    neigh = weight("neigh", fin, fout, True)
    self_ = weight("self", fin, fout, False)
    if aggregator == "mean":
        total = torch.zeros(N, fin).index_add(0, dst, x[src])
        count = torch.tensor([max(len(l), 1) for l in lists], dtype=torch.float32).unsqueeze(1)
        agg = total / count
    else:
        h = torch.relu(pool(x))
        agg = torch.zeros(N, fin).scatter_reduce(0, dst.unsqueeze(1).expand(-1, fin), h[src], reduce="amax",
                                                 include_self=False)
    y = neigh(agg) + self_(x)
    finish(f"graphsage_{aggregator}", params, {"x": (x, same)}, y, {"neighbors": lists})


def attention_fixture():
    gen = torch.Generator().manual_seed(5)
    d, heads, L, M = 8, 2, 4, 3
    mha = torch.nn.MultiheadAttention(d, heads, batch_first=True)
    with torch.no_grad():
        for p in mha.parameters():
            p.copy_(torch.rand(p.shape, generator=gen) - 0.5)
    x = leaf(L, d, gen=gen)
    memory = torch.rand(M, d, generator=gen) * 2 - 1
    keep = torch.rand(L, M + L, generator=gen) > 0.3
    keep[:, M] = True  # every query may attend at least to the first row of its segment
    kv = torch.cat([memory, x], 0)
    y, _ = mha(x.unsqueeze(0), kv.unsqueeze(0), kv.unsqueeze(0), attn_mask=~keep, need_weights=False)
    y = y.squeeze(0)
    W, b = mha.in_proj_weight, mha.in_proj_bias

    def part(i, transpose):
        return lambda t: t[i * d:(i + 1) * d].t() if transpose else t[i * d:(i + 1) * d]

    params = {}
    for i, name in enumerate(["query", "key", "value"]):
        params[f"{name}.weight"] = (W, part(i, True))
        params[f"{name}.bias"] = (b, part(i, False))
    params["output.weight"] = (mha.out_proj.weight, tr)
    params["output.bias"] = (mha.out_proj.bias, same)
    finish("attention", params, {"x": (x, same)}, y,
           {"memory": mat(memory), "mask": [[int(v) for v in row] for row in keep.tolist()], "heads": heads})


def lstm_fixture():
    gen = torch.Generator().manual_seed(6)
    fin, hidden, n, steps = 5, 6, 3, 3
    cell = torch.nn.LSTMCell(fin, hidden)
    with torch.no_grad():
        for p in cell.parameters():
            p.copy_(torch.rand(p.shape, generator=gen) - 0.5)
    xs = [leaf(n, fin, gen=gen) for _ in range(steps)]
    h0 = leaf(n, hidden, gen=gen)
    c0 = leaf(n, hidden, gen=gen)
    h, c = h0, c0
    outs = []
    for x in xs:
        h, c = cell(x, (h, c))
        outs.append(h)
    y = torch.cat(outs + [c], 0)
    finish("lstm", {
        "input.weight": (cell.weight_ih, tr), "input.bias": (cell.bias_ih, same),
        "recurrent.weight": (cell.weight_hh, tr), "recurrent.bias": (cell.bias_hh, same),
    }, {**{f"x{t}": (x, same) for t, x in enumerate(xs)}, "h0": (h0, same), "c0": (c0, same)}, y, {"steps": steps})


if __name__ == "__main__":
    torch.manual_seed(0)
    linear_fixture()
    layer_norm_fixture()
    sage_fixture("mean")
    sage_fixture("max_pool")
    attention_fixture()
    lstm_fixture()
    total = sum(p.stat().st_size for p in OUT.glob("*.json"))
    print(f"wrote {len(list(OUT.glob('*.json')))} fixtures, {total} bytes, into {OUT}")
