"""Costs of ONNX operators for placelab.onnx_import: FLOPs, product shapes, which inputs are data, and the
expansion of LSTM, GRU and RNN nodes into per-direction, per-time-step cell ops.

Conventions are torch_import's: a multiply-add is 2 FLOPs, convolutions and Gemm count no bias FLOPs, norms 5
FLOPs per element, softmax 5, GELU 8 (its Div, Erf, Add, Mul, Mul decomposition sums to the same 8), views
(reshape, transpose, slice, split, ...) cost nothing and copies (Concat, Gather, Pad, ...) move bytes only.
Every function reads tensor sizes through `t`, onnx_import's table of inferred shapes.
"""

from __future__ import annotations

import functools
import math

try:
    import numpy as np
except ImportError:  # onnx needs numpy too: onnx_import reports a missing onnx first
    np = None

# FLOPs per output element.
ELEMENTWISE = {
    "Add": 1, "Sub": 1, "Mul": 1, "Div": 1, "Neg": 1, "Abs": 1, "Sqrt": 1, "Pow": 1, "Exp": 1, "Log": 1,
    "Reciprocal": 1, "Max": 1, "Min": 1, "Where": 1, "Equal": 1, "Less": 1, "LessOrEqual": 1, "Greater": 1,
    "GreaterOrEqual": 1, "Not": 1, "And": 1, "Or": 1, "Xor": 1, "Floor": 1, "Ceil": 1, "Round": 1, "Sign": 1,
    "Mod": 1, "BitShift": 1, "IsNaN": 1, "IsInf": 1, "CumSum": 1, "Mean": 1,
    "Erf": 4, "Sin": 4, "Cos": 4, "Tan": 4, "Asin": 4, "Acos": 4, "Atan": 4, "Sinh": 4, "Cosh": 4,
    "Relu": 1, "Clip": 2, "LeakyRelu": 2, "PRelu": 2, "ThresholdedRelu": 1, "Elu": 4, "Selu": 4, "Celu": 4,
    "Sigmoid": 4, "Tanh": 4, "HardSwish": 4, "HardSigmoid": 3, "Softplus": 4, "Softsign": 3, "Mish": 8,
    "Gelu": 8, "Softmax": 5, "LogSoftmax": 6, "Hardmax": 2, "Dropout": 1, "Shrink": 2,
}
NORMS = {"BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
         "LpNormalization", "LRN", "MeanVarianceNormalization"}
NORM_FLOPS_PER_ELEMENT = 5  # mean, variance, normalise, scale, shift
REDUCTIONS = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin",
              "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}
POOLS = {"MaxPool", "AveragePool", "LpPool"}
# Free of cost: they carry their tensor (output_bytes) but read and write nothing, as torch_import's views.
VIEWS = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose", "Slice", "Split", "Expand"}
# Data movement without arithmetic: bytes read and written, no FLOPs.
COPIES = {"Concat", "Gather", "GatherElements", "GatherND", "Pad", "Tile", "Cast", "CastLike", "DepthToSpace",
          "SpaceToDepth", "ScatterND", "ScatterElements", "Scatter", "Trilu", "OneHot", "ConstantOfShape", "Range",
          "EyeLike", "Compress", "ReverseSequence", "Shape", "Size", "NonZero", "Unique"}
RECURRENT = {"LSTM", "GRU", "RNN"}
_FORMULAS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "Sum", "Resize", "Upsample"}

# Inputs that hold shapes, axes, indices of a slice or pads: read as metadata, never as tensors moved between
# ops (no edge, no bytes, no parameters). Position -> meaning, per op type.
META_INPUTS = {
    "Reshape": {1}, "Expand": {1}, "Squeeze": {1}, "Unsqueeze": {1}, "Tile": {1}, "Pad": {1, 3},
    "Slice": {1, 2, 3, 4}, "Split": {1}, "Resize": {1, 2, 3}, "Upsample": {1}, "ConstantOfShape": {0},
    "TopK": {1}, "OneHot": {1}, "CumSum": {1}, "ReduceMean": {1}, "ReduceSum": {1}, "ReduceMax": {1},
    "ReduceMin": {1}, "ReduceProd": {1}, "ReduceL1": {1}, "ReduceL2": {1}, "ReduceLogSum": {1},
    "ReduceLogSumExp": {1}, "ReduceSumSquare": {1}, "Range": {0, 1, 2}, "Clip": {1, 2},
    "LSTM": {4}, "GRU": {4}, "RNN": {4},  # sequence_lens
}


def _numel(shape):
    return math.prod(shape) if shape is not None else 0


def _product_dims(a, b, out):
    """[batch, m, n, k] of out = a @ b (numpy's matmul broadcasting; a vector is one row or column)."""
    m = a[-2] if len(a) >= 2 else 1
    n = b[-1] if len(b) >= 2 else 1
    k = a[-1] if len(a) >= 1 else 1
    if m * n * k == 0:
        return None
    return [max(1, _numel(out) // (m * n)), m, n, k]


def _conv_dims(out, out_channels, in_channels, groups, kernel):
    """The implicit GEMM of a convolution, [groups, N * positions, Cout / groups, Cin / groups * kernel]; None
    for a depthwise one (one output channel per group: a direct, memory-bound kernel), as torch_import gives."""
    positions = _numel(out) // out_channels if out_channels else 0
    if positions == 0 or out_channels // groups == 1:
        return None
    return [groups, positions, out_channels // groups, in_channels // groups * math.prod(kernel)]


def _gemm_mnk(node, t):
    a, b = t.shape(node.inputs[0]), t.shape(node.inputs[1])
    m, k = (a[1], a[0]) if node.attrs.get("transA", 0) else (a[0], a[1])
    n = b[0] if node.attrs.get("transB", 0) else b[1]
    return m, n, k


def known(op_type):
    """Whether `flops` has a formula for nodes of this type."""
    return op_type in _FORMULAS or any(op_type in s for s in (ELEMENTWISE, NORMS, REDUCTIONS, POOLS, VIEWS, COPIES))


def _einsum_parts(equation, shapes):
    """(size of each label, broadcast shape of the ellipses, the output's term) of an Einsum equation."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms, sizes, ellipsis = lhs.split(","), {}, ()
    for term, shape in zip(terms, shapes):
        head, dots, tail = term.partition("...")
        sizes.update(zip(head, shape))
        sizes.update(zip(tail, shape[len(shape) - len(tail):]))
        if dots:
            ellipsis = np.broadcast_shapes(ellipsis, tuple(shape[len(head):len(shape) - len(tail)]))
    if not arrow:  # implicit output: the ellipsis, then the labels used once, in order
        letters = "".join(term.replace("...", "") for term in terms)
        rhs = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    return sizes, tuple(ellipsis), rhs


def output_shape(node, t):
    """The output size of a node whose size ONNX 1.12's shape inference leaves unknown (Einsum: it infers only the
    rank), or None."""
    shapes = [t.shape(i) for i in node.inputs]
    if node.op_type != "Einsum" or any(s is None for s in shapes):
        return None
    sizes, ellipsis, rhs = _einsum_parts(_names(node.attrs["equation"]), shapes)
    head, dots, tail = rhs.partition("...")
    return tuple(sizes[c] for c in head) + (ellipsis if dots else ()) + tuple(sizes[c] for c in tail)


def _einsum(node, t):
    """2 FLOPs per multiply-add: per output element, one per combination of the summed labels (one FLOP per output
    element and operand past the first when nothing is summed)."""
    shapes = [t.shape(i) for i in node.inputs]
    sizes, _, rhs = _einsum_parts(_names(node.attrs["equation"]), shapes)
    summed = [d for c, d in sizes.items() if c not in rhs]
    out = _numel(t.shape(node.outputs[0]))
    return 2.0 * out * math.prod(summed) if summed else float(out * max(0, len(shapes) - 1))


def flops(node, t):
    """FLOPs of one execution of `node` (a multiply-add is 2), or None when there is no formula for its type.
    Shapes come from t.shape(name); the caller checks that those of the node's tensors are known."""
    op = node.op_type
    out = t.shape(node.outputs[0]) if node.outputs else None
    x = t.shape(node.inputs[0]) if node.inputs and node.inputs[0] else None
    if op in VIEWS or op in COPIES:
        return 0.0
    if op == "Conv":
        w = t.shape(node.inputs[1])  # [Cout, Cin / groups, k...]
        return 2.0 * _numel(out) * w[1] * math.prod(w[2:])
    if op == "ConvTranspose":
        w = t.shape(node.inputs[1])  # [Cin, Cout / groups, k...]
        return 2.0 * _numel(x) * w[1] * math.prod(w[2:])
    if op == "Gemm":
        m, n, k = _gemm_mnk(node, t)
        return 2.0 * m * n * k
    if op == "MatMul":
        return 2.0 * _numel(out) * (x[-1] if x else 1)
    if op == "Einsum":
        return _einsum(node, t)
    if op in NORMS:
        return NORM_FLOPS_PER_ELEMENT * float(_numel(out))
    if op in POOLS:
        return float(_numel(out) * math.prod(node.attrs.get("kernel_shape", [1])))
    if op in REDUCTIONS:
        return float(_numel(x))
    if op == "Sum":
        return float(_numel(out) * max(1, len(node.inputs) - 1))
    if op in ("Resize", "Upsample"):
        mode = node.attrs.get("mode", b"nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        per_axis = {"linear": 2, "bilinear": 2, "cubic": 4}.get(mode)
        if not per_axis:
            return 0.0  # nearest: a copy
        resized = sum(1 for i, o in zip(x or (), out) if i != o)
        return 2.0 * per_axis ** resized * _numel(out)  # a weight times a tap, added, per tap
    if op in ELEMENTWISE:
        return float(ELEMENTWISE[op] * _numel(out))
    return None


def gemm_dims(node, t):
    """[batch, m, n, k] of the matrix products `node` computes, or None (the graph format's `gemm`)."""
    op, out = node.op_type, t.shape(node.outputs[0])
    if out is None or _numel(out) == 0:
        return None
    if op == "Conv":
        w = t.shape(node.inputs[1])
        groups = node.attrs.get("group", 1)
        return _conv_dims(out, w[0], w[1] * groups, groups, w[2:])
    if op == "Gemm":
        m, n, k = _gemm_mnk(node, t)
        return [1, m, n, k]
    if op == "MatMul":
        return _product_dims(t.shape(node.inputs[0]), t.shape(node.inputs[1]), out)
    return None


# --- recurrent nodes ----------------------------------------------------------------------------
# B = batch, T = time steps, I = input width, H = hidden units; es = bytes per element.

class _Cell:
    """Adds one time step's ops under the scope `s` to the builder `b`; tensors are lists of (op, bytes) reads."""

    def __init__(self, b, s, es):
        self.b, self.s, self.es = b, s, es

    def op(self, name, type_name, elements, inputs, flops=None, gemm=None):
        if flops is None:
            flops = ELEMENTWISE.get(type_name, 1) * elements
        index = self.b.add(f"{self.s}/{name}", type_name, out_bytes=elements * self.es, inputs=inputs,
                           flops=float(flops), gemm=gemm)
        return [(index, elements * self.es)]

    def part(self, tensor, elements):
        """A slice of `tensor` (read in place: the same producer, fewer bytes)."""
        return [(index, elements * self.es) for index, _ in tensor]

    def product(self, name, x, k, n, batch, weights, bias, biases=1):
        """x [B, k] times a [k, n] weight, plus `biases` bias vectors when there are."""
        y = self.op(f"{name}MatMul", "MatMul", batch * n, x + weights, 2.0 * batch * k * n, [1, batch, n, k])
        return self.op(f"{name}BiasAdd", "BiasAdd", batch * n, y + bias, biases * batch * n) if bias else y


def _lstm_step(cell, x, h, c, kernel, bias, batch, width, hidden, act):
    """NetBuilder::lstm_cell: gates = [x, h] W + Wb + Rb, split into i, o, f, c~; c = f c + i c~; h = o act(c)."""
    bh = batch * hidden
    both = cell.op("Concat", "Concat", batch * (width + hidden), x + h, 0.0)
    gates = cell.product("", both, width + hidden, 4 * hidden, batch, kernel, bias, biases=2)
    split = cell.op("Split", "Split", 4 * bh, gates, 0.0)
    i = cell.op(f"input_gate/{act[0]}", act[0], bh, cell.part(split, bh))
    o = cell.op(f"output_gate/{act[0]}", act[0], bh, cell.part(split, bh))
    f = cell.op(f"forget_gate/{act[0]}", act[0], bh, cell.part(split, bh))
    j = cell.op(f"candidate/{act[1]}", act[1], bh, cell.part(split, bh))
    kept = cell.op("cell/Mul", "Mul", bh, c + f)
    c = cell.op("cell/Add", "Add", bh, kept + cell.op("cell/Mul_1", "Mul", bh, i + j))
    h = cell.op("hidden/Mul", "Mul", bh, cell.op(f"hidden/{act[2]}", act[2], bh, c) + o)
    return h, c


def _gru_step(cell, x, h, w, r, bias_x, bias_h, batch, width, hidden, act, linear_before_reset):
    """z, r = act0(x W_zr + h R_zr + b); n = act1(x W_n + r (h R_n + b)) (or (r h) R_n with linear_before_reset=0);
    h = (1 - z) n + z h, as torch_import counts it."""
    bh = batch * hidden
    gx = cell.product("input/", x, width, 3 * hidden, batch, w, bias_x)
    gh = cell.product("recurrent/", h, hidden, (3 if linear_before_reset else 2) * hidden, batch, r, bias_h)
    pre = cell.op("gates/Add", "Add", 2 * bh, cell.part(gx, 2 * bh) + cell.part(gh, 2 * bh))
    zr = cell.op(f"gates/{act[0]}", act[0], 2 * bh, pre)
    if linear_before_reset:
        reset = cell.op("candidate/Mul", "Mul", bh, cell.part(zr, bh) + cell.part(gh, bh))
    else:
        rh = cell.op("candidate/Mul", "Mul", bh, cell.part(zr, bh) + h)
        reset = cell.product("candidate/", rh, hidden, hidden, batch, r, bias_h)
    n = cell.op(f"candidate/{act[1]}", act[1], bh,
                cell.op("candidate/Add", "Add", bh, cell.part(gx, bh) + reset))
    keep = cell.op("hidden/Mul", "Mul", bh, cell.op("hidden/Sub", "Sub", bh, cell.part(zr, bh)) + n)
    return cell.op("hidden/Add", "Add", bh, keep + cell.op("hidden/Mul_1", "Mul", bh, cell.part(zr, bh) + h))


def _rnn_step(cell, x, h, kernel, bias, batch, width, hidden, act):
    """h = act([x, h] W + Wb + Rb)."""
    both = cell.op("Concat", "Concat", batch * (width + hidden), x + h, 0.0)
    pre = cell.product("", both, width + hidden, hidden, batch, kernel, bias, biases=2)
    return cell.op(act[0], act[0], batch * hidden, pre)


def _names(value):
    return value.decode() if isinstance(value, bytes) else value


def expand_recurrent(node, t, b):
    """Adds the ops of an LSTM, GRU or RNN node to the builder `b` at the zoo's RNNLM granularity
    (NetBuilder::lstm_cell): per direction, its weights as Variable ops that every step reads (LSTM and RNN: one
    kernel, [I + H, gates H], as the zoo's; GRU: input and recurrent kernels) and, per time step, the cell's
    ops. Parameters are counted once, split evenly between the directions. Returns {output name: op index} for
    the outputs something reads: Y (every step's h, one Pack op), Y_h and Y_c (the last step's state)."""
    op = node.op_type
    ins = list(node.inputs) + [""] * 8
    x_name, w_name, r_name, b_name, _, h0_name, c0_name, p_name = ins[:8]
    hidden = int(node.attrs["hidden_size"])
    direction = _names(node.attrs.get("direction", "forward"))
    dirs = ["forward", "reverse"] if direction == "bidirectional" else [direction]
    xs = t.shape(x_name)
    if xs is None or len(xs) != 3:
        raise ValueError(f"{op} node {node.name}: the size of its input {x_name} is unknown (give input_shapes)")
    steps, batch, width = (xs[1], xs[0], xs[2]) if node.attrs.get("layout", 0) else xs
    es = t.itemsize(x_name)
    bh = batch * hidden
    ndir = len(dirs)
    default = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"], "RNN": ["Tanh"]}[op]
    given = [_names(a) for a in node.attrs.get("activations", [])]  # per direction, forward first
    shares = {n: b.claim_params(n) / ndir for n in (w_name, r_name, b_name, p_name) if n and t.is_constant(n)}

    def weights(prefix, what, names):
        """Reads of this direction's share of the weight inputs `names`: a Variable op for the constant ones."""
        names = [n for n in names if n]
        const = [n for n in names if t.is_constant(n)]
        reads = [(p, t.nbytes(n) / ndir) for n in names if not t.is_constant(n) for p, _ in b.producers(n)]
        if const:
            held = sum(t.nbytes(n) for n in const) / ndir
            var = b.add(f"{prefix}/{what}", "Variable", out_bytes=held, read=0.0,
                        params=sum(shares[n] for n in const))
            reads.append((var, held))
        return reads

    def state(name, prefix, zero):
        if name and not t.is_constant(name):
            return [(p, bh * es) for p, _ in b.producers(name)]
        if not zero:  # an initial state that is a constant of the graph (zeros, usually): one Const op
            zero.append(b.add(f"{prefix}/initial_state", "Const", out_bytes=bh * es, read=0.0))
        return [(zero[0], bh * es)]

    every_h = {}  # (step, direction) -> h op, for Y
    last = {"h": [], "c": []}
    for d, dname in enumerate(dirs):
        prefix = f"{node.name}/{'bw' if dname == 'reverse' else 'fw'}"
        act = given[d * len(default):(d + 1) * len(default)] or given[:len(default)] or default
        bias = weights(prefix, "bias", [b_name, p_name]) if b_name or p_name else []
        if op == "GRU":
            w_in, w_rec = weights(prefix, "input_kernel", [w_name]), weights(prefix, "recurrent_kernel", [r_name])
            bias = [(i, nbytes / 2) for i, nbytes in bias]  # [Wb, Rb]: the x and h products each add their half
        else:
            kernel = weights(prefix, "kernel", [w_name, r_name])
        zero = []
        h = state(h0_name, prefix, zero)
        c = state(c0_name, prefix, zero) if op == "LSTM" else None
        for step in (range(steps - 1, -1, -1) if dname == "reverse" else range(steps)):
            cell = _Cell(b, f"{prefix}/step{step}", es)
            x = [(p, batch * width * es) for p, _ in b.producers(x_name)]
            if op == "LSTM":
                h, c = _lstm_step(cell, x, h, c, kernel, bias, batch, width, hidden, act)
            elif op == "GRU":
                h = _gru_step(cell, x, h, w_in, w_rec, bias, bias, batch, width, hidden, act,
                              node.attrs.get("linear_before_reset", 0))
            else:
                h = _rnn_step(cell, x, h, kernel, bias, batch, width, hidden, act)
            every_h[step, d] = h[0][0]
        last["h"].append(h[0][0])
        if c is not None:
            last["c"].append(c[0][0])

    result = {}
    outs = list(node.outputs) + ["", "", ""]
    if outs[0] and b.used(outs[0]):
        y = b.add(f"{node.name}/Y", "Pack", out_bytes=steps * ndir * bh * es,
                  inputs=[(every_h[key], bh * es) for key in sorted(every_h)])
        result[outs[0]] = y
    for name, kind in ((outs[1], "h"), (outs[2], "c")):
        if name and last[kind] and b.used(name):
            ops = last[kind]
            result[name] = ops[0] if ndir == 1 else b.add(
                f"{node.name}/Y_{kind}", "Pack", out_bytes=ndir * bh * es, inputs=[(i, bh * es) for i in ops])
    return result


# --- constant folding ---------------------------------------------------------------------------

def _axes(node, values, position):
    """Axes given as an input (newer opsets) or as an attribute (older ones)."""
    if len(values) > position and values[position] is not None:
        return [int(a) for a in values[position]]
    return node.attrs.get("axes")


def _slice(node, values):
    x = values[0]
    if len(values) > 1:
        starts, ends = values[1], values[2]
        axes = values[3] if len(values) > 3 and values[3] is not None else range(len(starts))
        steps = values[4] if len(values) > 4 and values[4] is not None else [1] * len(starts)
    else:
        starts, ends = node.attrs["starts"], node.attrs["ends"]
        axes, steps = node.attrs.get("axes", range(len(starts))), [1] * len(starts)
    index = [slice(None)] * x.ndim
    for a, s, e, st in zip(axes, starts, ends, steps):
        index[int(a)] = slice(int(s), int(e), int(st))
    return x[tuple(index)]


def _reshape(node, x, shape):
    shape = [int(d) for d in shape]
    if not node.attrs.get("allowzero", 0):
        shape = [x.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    return x.reshape(shape)


def _unsqueeze(x, axes):
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return x


def _reduce(fn, node, values):
    axes = _axes(node, values, 1)
    axes = tuple(axes) if axes else None
    return fn(values[0], axis=axes, keepdims=bool(node.attrs.get("keepdims", 1)))


def _divide(a, b):
    return (np.trunc(a / b).astype(np.result_type(a, b)) if np.issubdtype(np.result_type(a, b), np.integer)
            else a / b)


# Value-level semantics of the ops shape computations and masks are made of: evaluated on constants only.
_EVAL = {
    "Identity": lambda n, v: v[0],
    "Cast": lambda n, v: v[0].astype(_numpy_type(n.attrs["to"])),
    "Gather": lambda n, v: np.take(v[0], v[1].astype(np.int64), axis=n.attrs.get("axis", 0)),
    "Unsqueeze": lambda n, v: _unsqueeze(v[0], _axes(n, v, 1)),
    "Squeeze": lambda n, v: np.squeeze(v[0], axis=tuple(_axes(n, v, 1)) if _axes(n, v, 1) else None),
    "Concat": lambda n, v: np.concatenate(v, axis=n.attrs["axis"]),
    "Slice": _slice,
    "Reshape": lambda n, v: _reshape(n, v[0], v[1]),
    "Flatten": lambda n, v: v[0].reshape(int(np.prod(v[0].shape[: n.attrs.get("axis", 1)])), -1),
    "Transpose": lambda n, v: np.transpose(v[0], n.attrs.get("perm")),
    "Expand": lambda n, v: np.broadcast_to(v[0], np.broadcast_shapes(v[0].shape, tuple(int(d) for d in v[1]))),
    "Tile": lambda n, v: np.tile(v[0], [int(r) for r in v[1]]),
    "Add": lambda n, v: v[0] + v[1], "Sub": lambda n, v: v[0] - v[1], "Mul": lambda n, v: v[0] * v[1],
    "Div": lambda n, v: _divide(v[0], v[1]), "Mod": lambda n, v: np.fmod(v[0], v[1]),
    "Neg": lambda n, v: -v[0], "Abs": lambda n, v: np.abs(v[0]), "Sqrt": lambda n, v: np.sqrt(v[0]),
    "Pow": lambda n, v: np.power(v[0], v[1]), "Floor": lambda n, v: np.floor(v[0]), "Ceil": lambda n, v: np.ceil(v[0]),
    "Equal": lambda n, v: v[0] == v[1], "Less": lambda n, v: v[0] < v[1], "Greater": lambda n, v: v[0] > v[1],
    "Not": lambda n, v: ~v[0], "And": lambda n, v: v[0] & v[1], "Or": lambda n, v: v[0] | v[1],
    "Where": lambda n, v: np.where(v[0], v[1], v[2]),
    "Min": lambda n, v: functools.reduce(np.minimum, v), "Max": lambda n, v: functools.reduce(np.maximum, v),
    "Range": lambda n, v: np.arange(v[0], v[1], v[2]).astype(v[0].dtype),
    "ConstantOfShape": lambda n, v: np.full([int(d) for d in v[0]], n.attrs["value"].ravel()[0]
                                            if "value" in n.attrs else np.float32(0)),
    "ScatterND": lambda n, v: _scatter_nd(*v[:3]),
    "Trilu": lambda n, v: (np.triu if n.attrs.get("upper", 1) else np.tril)(v[0], int(v[1]) if len(v) > 1 else 0),
    "ReduceProd": lambda n, v: _reduce(np.prod, n, v), "ReduceSum": lambda n, v: _reduce(np.sum, n, v),
    "ReduceMax": lambda n, v: _reduce(np.max, n, v), "ReduceMin": lambda n, v: _reduce(np.min, n, v),
}


def _scatter_nd(data, indices, updates):
    out = data.copy()
    out[tuple(np.moveaxis(indices.astype(np.int64), -1, 0))] = updates
    return out


def _numpy_type(onnx_type):
    import onnx

    return onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[onnx_type]


def evaluate(node, values):
    """The output values of `node` on constant inputs (numpy arrays; None for an omitted optional input), or None
    when numpy cannot compute them here (an op not in the table, an input it does not expect)."""
    if node.op_type == "Split":
        axis = node.attrs.get("axis", 0)
        sizes = values[1] if len(values) > 1 and values[1] is not None else node.attrs.get("split")
        if sizes is None:
            return np.array_split(values[0], len(node.outputs), axis=axis)
        return np.split(values[0], np.cumsum([int(s) for s in sizes])[:-1], axis=axis)
    fn = _EVAL.get(node.op_type)
    if fn is None:
        return None
    try:
        with np.errstate(all="ignore"):
            return [np.asarray(fn(node, values))]
    except Exception:  # noqa: BLE001 - left unknown: the value is then a constant of known size only
        return None
