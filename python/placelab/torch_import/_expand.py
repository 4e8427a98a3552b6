"""Recurrent modules and nn.MultiheadAttention as the ops they compute, at the zoo's granularity.

nn.LSTM, nn.GRU and nn.RNN become, per layer and direction, Variable ops holding the weights (a kernel, a
bias: read by every step, held once) and per time step the cell's ops (graphs/zoo/rnn.cpp, NetBuilder::lstm_cell):
an LSTM step is Concat [x, h] -> MatMul -> BiasAdd -> three Sigmoid gates and a Tanh candidate -> the cell update
(Mul, Mul, Add) -> Tanh -> the hidden Mul (-> a projection MatMul with proj_size); a GRU step is the input and the
hidden MatMul (biases folded in), the reset and update gates, the candidate and the hidden update; an RNN step is
Concat -> MatMul -> BiasAdd -> Tanh or Relu. A reverse direction runs its steps backwards; a layer above a
bidirectional one reads a Concat of both directions per step. The module's output is a Stack of the last layer's
steps (h_n and c_n one of the final states, made when something reads them). nn.LSTMCell, nn.GRUCell and
nn.RNNCell are one step per call; their Variables are made at the first call and read by every later one.

nn.MultiheadAttention becomes its q, k and v projections, the score products of all heads, the softmax (with the
masks as inputs), the weighted sum and the output projection. FLOPs come from costs.py.

Each expansion writes through an emitter `em`: em.op(part, type, flops, reads, out_bytes, params, gemm) makes an
op (reads: (op, bytes) pairs; params: (key, tensor, share) triples, 1/share of the tensor held once per key),
em.src(tensor) is the producer of an input as it was before the call, em.output(tensor, op or a callable making
it when first read) registers a result, em.scope(name) nests op names, and em.state is a dict kept per module
across calls.
"""

from __future__ import annotations

import inspect

from . import costs

_RNN_TYPES = ("LSTM", "GRU", "RNN")


def expandable(module):
    import torch.nn as nn

    return isinstance(module, (nn.RNNBase, nn.RNNCellBase, nn.MultiheadAttention))


def expand(em, module, args, kwargs, out):
    import torch.nn as nn

    if isinstance(module, nn.MultiheadAttention):
        _mha(em, module, args, kwargs, out)
    elif isinstance(module, nn.RNNCellBase):
        _cell(em, module, args, kwargs, out)
    else:
        _rnn(em, module, args, kwargs, out)


def _input_and_state(args, kwargs):
    """(input, hx) of a recurrent module's call, by position or by torch's names."""
    x = args[0] if args else kwargs["input"]
    return x, args[1] if len(args) > 1 else kwargs.get("hx")


def _mode(module):
    """'LSTM', 'GRU', 'RNN_TANH' or 'RNN_RELU' for a recurrent module or cell."""
    import torch.nn as nn

    if isinstance(module, nn.RNNBase):
        return module.mode
    kind = type(module).__name__
    for base in ("LSTMCell", "GRUCell", "RNNCell"):
        if any(c.__name__ == base for c in type(module).__mro__):
            kind = base[:-4]
    if kind == "RNN":
        return "RNN_TANH" if module.nonlinearity == "tanh" else "RNN_RELU"
    return kind


def _variables(em, key, module, suffix, es):
    """The Variable ops of one layer and direction (`suffix` names its tensors: '_l0', '_l1_reverse', '' for a
    cell), made once per module and reused by later calls."""
    if key in em.state:
        return em.state[key]
    names = [f"weight_ih{suffix}", f"weight_hh{suffix}"]
    ws = [getattr(module, n) for n in names]
    bs = [getattr(module, f"bias_{n[7:]}") for n in names] if module.bias else []
    made = {"kernel": [(em.op("kernel", "Variable", 0, [], _bytes(ws), params=[(id(w), w, 1) for w in ws]),
                        _bytes(ws))], "bias": [], "proj": []}
    if bs:
        made["bias"] = [(em.op("bias", "Variable", 0, [], _bytes(bs), params=[(id(b), b, 1) for b in bs]), _bytes(bs))]
    proj = getattr(module, f"weight_hr{suffix}", None)
    if proj is not None:
        made["proj"] = [(em.op("projection_kernel", "Variable", 0, [], _bytes([proj]), params=[(id(proj), proj, 1)]),
                         _bytes([proj]))]
    em.state[key] = made
    return made


def _bytes(ts):
    return float(sum(t.numel() * t.element_size() for t in ts))


def _step(em, mode, v, batch, inputs, hidden, proj, x, h, c, es):
    """One cell step. x: reads of the step's input; h, c: (op, bytes) of the state or None (zeros). Returns
    (h, c) of the new state."""
    bh = batch * hidden * es
    kern, bias = v["kernel"], v["bias"]
    state = [h] if h is not None else []
    if mode == "GRU":
        f = costs.gru_step(batch, inputs, hidden, 2 if bias else 0)
        gx = em.op("input_matmul", "MatMul", f["input_matmul"], x + kern + bias, 3 * bh, gemm=[1, batch, 3 * hidden,
                                                                                                   inputs])
        gh = em.op("hidden_matmul", "MatMul", f["hidden_matmul"], state + kern + bias, 3 * bh,
                   gemm=[1, batch, 3 * hidden, hidden])
        r = em.op("reset_gate", "Sigmoid", f["reset_gate"], [(gx, bh), (gh, bh)], bh)
        z = em.op("update_gate", "Sigmoid", f["update_gate"], [(gx, bh), (gh, bh)], bh)
        n = em.op("candidate", "Tanh", f["candidate"], [(gx, bh), (gh, bh), (r, bh)], bh)
        return (em.op("hidden", "Add", f["hidden"], [(z, bh), (n, bh)] + state, bh), bh), None
    width = inputs + (proj or hidden)
    gates = 4 if mode == "LSTM" else 1
    if mode == "LSTM":
        f = costs.lstm_step(batch, inputs, hidden, 2 if bias else 0, proj)
    else:
        f = costs.rnn_step(batch, inputs, hidden, 2 if bias else 0, "tanh" if mode == "RNN_TANH" else "relu")
    cat = em.op("concat", "Concat", 0, x + state, width * batch * es)
    g = em.op("matmul", "MatMul", f["matmul"], [(cat, width * batch * es)] + kern, gates * bh,
              gemm=[1, batch, gates * hidden, width])
    if bias:
        g = em.op("bias_add", "BiasAdd", f["bias_add"], [(g, gates * bh)] + bias, gates * bh)
    if mode != "LSTM":
        act = "Tanh" if mode == "RNN_TANH" else "Relu"
        return (em.op("activation", act, f["activation"], [(g, bh)], bh), bh), None
    i, fg, j, o = (em.op(n, t, f[n], [(g, bh)], bh) for n, t in (
        ("input_gate", "Sigmoid"), ("forget_gate", "Sigmoid"), ("candidate", "Tanh"), ("output_gate", "Sigmoid")))
    kept = em.op("cell_forget", "Mul", f["cell_forget"], [(fg, bh)] + ([c] if c is not None else []), bh)
    new = em.op("cell_input", "Mul", f["cell_input"], [(i, bh), (j, bh)], bh)
    cell = em.op("cell", "Add", f["cell"], [(kept, bh), (new, bh)], bh)
    squashed = em.op("cell_tanh", "Tanh", f["cell_tanh"], [(cell, bh)], bh)
    hid = em.op("hidden", "Mul", f["hidden"], [(o, bh), (squashed, bh)], bh)
    if proj:
        pb = batch * proj * es
        hid = em.op("projection", "MatMul", f["projection"], [(hid, bh)] + v["proj"], pb,
                    gemm=[1, batch, proj, hidden])
        return (hid, pb), (cell, bh)
    return (hid, bh), (cell, bh)


def _state_reads(em, hx, batch, width, es):
    """(op, bytes) of one layer's slice of an initial state tensor, or None when the state is zeros."""
    if hx is None:
        return None
    return em.src(hx), batch * width * es


def _cell(em, m, args, kwargs, out):
    x, hx = _input_and_state(args, kwargs)
    mode = _mode(m)
    es = m.weight_ih.element_size()
    batch = x.shape[0] if x.dim() == 2 else 1
    em.state["calls"] = em.state.get("calls", -1) + 1
    v = _variables(em, "weights", m, "", es)
    h0, c0 = (hx if isinstance(hx, (tuple, list)) else (hx, None)) if hx is not None else (None, None)
    with em.scope(f"step{em.state['calls']}"):
        h, c = _step(em, mode, v, batch, m.input_size, m.hidden_size, 0, [(em.src(x), x.numel() * es)],
                     _state_reads(em, h0, batch, m.hidden_size, es), _state_reads(em, c0, batch, m.hidden_size, es), es)
    if mode == "LSTM":
        em.output(out[0], h[0])
        em.output(out[1], c[0])
    else:
        em.output(out, h[0])


def _rnn(em, m, args, kwargs, out):
    import torch
    from torch.nn.utils.rnn import PackedSequence

    x, hx = _input_and_state(args, kwargs)
    mode, dirs, hidden = m.mode, 2 if m.bidirectional else 1, m.hidden_size
    proj = getattr(m, "proj_size", 0)
    h_width = proj or hidden
    es = m.weight_ih_l0.element_size()
    if isinstance(x, PackedSequence):
        data, batches = x.data, [int(b) for b in x.batch_sizes]
    else:
        data = x
        steps = x.shape[1] if m.batch_first and x.dim() == 3 else x.shape[0]
        batches = [x.shape[0] if m.batch_first else x.shape[1]] * steps if x.dim() == 3 else [1] * steps
    h0, c0 = (hx if isinstance(hx, (tuple, list)) else (hx, None)) if hx is not None else (None, None)
    x_src = em.src(data)
    below = [[(x_src, b * m.input_size * es)] for b in batches]  # each step's input reads
    finals = []
    for layer in range(m.num_layers):
        inputs = m.input_size if layer == 0 else dirs * h_width
        outs = [[None] * dirs for _ in batches]
        for d in range(dirs):
            suffix = f"_l{layer}" + ("_reverse" if d else "")
            with em.scope(f"layer{layer}" + ("_reverse" if d else "")):
                v = _variables(em, suffix, m, suffix, es)
                h = _state_reads(em, h0, batches[0], h_width, es)
                c = _state_reads(em, c0, batches[0], hidden, es)
                order = range(len(batches) - 1, -1, -1) if d else range(len(batches))
                for t in order:
                    with em.scope(f"step{t}"):
                        h, c = _step(em, mode, v, batches[t], inputs, hidden, proj, below[t], h, c, es)
                    outs[t][d] = h
                finals.append((h, c))
        if dirs == 1:
            below = [[o[0]] for o in outs]
        else:
            below = []
            for t, o in enumerate(outs):
                with em.scope(f"layer{layer}/step{t}"):
                    below.append([(em.op("concat_directions", "Concat", 0, o, sum(b for _, b in o)), sum(
                        b for _, b in o))])
    output, state = out
    last = [r for o in outs for r in o]
    em.output(output.data if isinstance(output, PackedSequence) else output,
              lambda: em.op("output", "Stack", 0, last, float(sum(b for _, b in last))))
    h_n, c_n = (state if isinstance(state, (tuple, list)) else (state, None))
    for tensor, which, label in ((h_n, 0, "h_n"), (c_n, 1, "c_n")):
        if isinstance(tensor, torch.Tensor):
            reads = [f[which] for f in finals]
            em.output(tensor, lambda reads=reads, label=label: em.op(label, "Stack", 0, reads,
                                                                     float(sum(b for _, b in reads))))


def _mha(em, m, args, kwargs, out):
    a = inspect.signature(m.forward).bind(*args, **kwargs).arguments
    q, k, v = a["query"], a["key"], a["value"]
    masks = [t for t in (a.get("key_padding_mask"), a.get("attn_mask")) if t is not None]
    batch, lq, lk = costs.mha_shape(m, q, k)
    extra = int(m.bias_k is not None) + int(m.add_zero_attn)
    e, heads = m.embed_dim, m.num_heads
    es = m.out_proj.weight.element_size()
    f = costs.mha(batch, lq, lk + extra, e, m.kdim, m.vdim, heads)
    proj = costs.mha(batch, lq, lk, e, m.kdim, m.vdim, heads)
    if m._qkv_same_embed_dim:
        weights = [[(m.in_proj_weight, (i, 3))] for i in range(3)]
    else:
        weights = [[(m.q_proj_weight, None)], [(m.k_proj_weight, None)], [(m.v_proj_weight, None)]]
    if m.in_proj_bias is not None:
        for i in range(3):
            weights[i].append((m.in_proj_bias, (i, 3)))
    for i, extra_bias in ((1, m.bias_k), (2, m.bias_v)):
        if extra_bias is not None:
            weights[i].append((extra_bias, None))
    params = [[((id(t), part), t, part[1] if part else 1) for t, part in w] for w in weights]
    q_out, kv_rows = batch * lq * e * es, batch * lk
    parts = []
    for i, (name, x, width) in enumerate((("q_proj", q, e), ("k_proj", k, m.kdim), ("v_proj", v, m.vdim))):
        rows = batch * lq if i == 0 else kv_rows
        parts.append(em.op(name, "Linear", proj[name], [(em.src(x), x.numel() * es)], rows * e * es, params[i],
                           gemm=[1, rows, e, width]))
    score_bytes = batch * heads * lq * (lk + extra) * es
    scores = em.op("scores", "BatchMatMul", f["scores"], [(parts[0], q_out), (parts[1], kv_rows * e * es)],
                   score_bytes, gemm=[batch * heads, lq, lk + extra, e // heads])
    mask_reads = [(em.src(t), t.numel() * t.element_size()) for t in masks]
    soft = em.op("softmax", "Softmax", f["softmax"] + (score_bytes / es if masks else 0),
                 [(scores, score_bytes)] + mask_reads, score_bytes)
    context = em.op("context", "BatchMatMul", f["context"], [(soft, score_bytes), (parts[2], kv_rows * e * es)],
                    q_out, gemm=[batch * heads, lq, e // heads, lk + extra])
    o = m.out_proj
    outp = em.op("out_proj", "Linear", f["out_proj"], [(context, q_out)], q_out,
                 [(id(t), t, 1) for t in (o.weight, o.bias) if t is not None], gemm=[1, batch * lq, e, e])
    em.output(out[0], outp)
    if out[1] is not None:
        em.output(out[1], soft)
