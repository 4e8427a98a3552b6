"""The cost table of the importers: FLOPs, bytes and product shapes of operators.

Conventions (the zoo's and every importer's): a multiply-add is 2 FLOPs; an elementwise op or an activation
costs a fixed number of FLOPs per output element (ELEMENTWISE, ACTIVATION); a normalisation NORM_PER_ELEMENT per
output element; views and copies cost nothing. Two layers:

- shape-level helpers that take plain numbers (conv, matmul, mha, lstm_step, gru_step, rnn_step, einsum), for any
  importer that knows tensor shapes but not torch values (an ONNX importer can use them as they are);
- torch-level dispatch: module_flops (a module call), function_flops (a torch function or Tensor method, by its
  canonical name) and gemm_dims (the [batch, m, n, k] of a product, or None).

A function returns None where the table has no formula; the importer then keeps a bytes-only cost and names the
op in an UnsupportedOpWarning.
"""

from __future__ import annotations

import math

__all__ = [
    "ACTIVATION", "ELEMENTWISE", "NORM_PER_ELEMENT", "VIEWS", "COPIES", "canonical", "tensors", "nbytes", "numel",
    "conv", "matmul", "mha", "lstm_step", "gru_step", "rnn_step", "einsum", "module_flops", "function_flops",
    "gemm_dims", "conv_gemm", "mha_shape",
]

# FLOPs per output element.
ELEMENTWISE = {
    "add": 1, "sub": 1, "mul": 1, "truediv": 1, "div": 1, "neg": 1, "abs": 1, "sqrt": 1, "rsqrt": 2, "pow": 1,
    "exp": 1, "log": 1, "clamp": 1, "clamp_min": 1, "clamp_max": 1, "maximum": 1, "minimum": 1, "masked_fill": 1,
    "where": 1, "floordiv": 1, "floor_divide": 1, "reciprocal": 1, "erf": 4, "sin": 4, "cos": 4, "eq": 1, "ne": 1,
    "lt": 1, "le": 1, "gt": 1, "ge": 1, "and": 1, "or": 1, "xor": 1, "invert": 1, "logical_not": 1, "mod": 1,
    "remainder": 1, "addcmul": 2, "addcdiv": 2, "lerp": 2, "square": 1, "sign": 1, "round": 1, "floor": 1,
    "ceil": 1,
}
ACTIVATION = {
    "relu": 1, "relu6": 2, "hardtanh": 2, "leaky_relu": 2, "elu": 4, "selu": 4, "gelu": 8, "silu": 5,
    "sigmoid": 4, "tanh": 4, "hardswish": 4, "hardsigmoid": 3, "softplus": 4, "mish": 8, "softmax": 5,
    "log_softmax": 6, "softmin": 5, "dropout": 1, "alpha_dropout": 1, "feature_alpha_dropout": 1, "identity": 0,
    "prelu": 2,
}
NORM_PER_ELEMENT = 5  # mean, variance, normalise, scale, shift
REDUCTIONS = {"mean", "sum", "amax", "amin", "max", "min", "var", "std", "norm", "argmax", "argmin", "prod",
              "logsumexp", "all", "any", "var_mean", "std_mean"}
NORMS = {"layer_norm", "batch_norm", "group_norm", "instance_norm", "normalize", "local_response_norm"}
# Ops that alias their input (no data moves); ops that copy or create data without arithmetic.
VIEWS = {
    "view", "reshape", "flatten", "permute", "transpose", "squeeze", "unsqueeze", "size", "dim", "t", "expand",
    "expand_as", "view_as", "chunk", "split", "unbind", "narrow", "select", "detach", "type_as", "unflatten",
    "movedim", "getitem", "getattr", "T", "mT", "data", "real", "swapaxes", "split_with_sizes", "tensor_split",
    "as_strided", "diagonal", "_assert", "_assert_is_none", "contiguous_view", "requires_grad", "align_as",
}
COPIES = {
    "cat", "concat", "stack", "contiguous", "clone", "to", "pad", "roll", "repeat", "tile", "float", "half",
    "double", "bfloat16", "int", "long", "bool", "type", "copy", "fill", "zero", "setitem", "index_select",
    "gather", "take", "masked_select", "flip", "repeat_interleave", "zeros", "ones", "full", "empty", "arange",
    "linspace", "eye", "rand", "randn", "randint", "zeros_like", "ones_like", "full_like", "empty_like",
    "rand_like", "randn_like", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor", "tensor",
    "as_tensor", "tril", "triu", "scatter", "index_put", "index_copy", "index_fill", "embedding", "one_hot",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "cpu", "cuda", "clone_",
    "detach_", "masked_scatter", "broadcast_to", "meshgrid", "flatten_parameters", "pack_padded_sequence",
    "pad_packed_sequence", "pack_sequence", "pad_sequence",
}
_DUNDER_IN_PLACE = {"iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor",
                    "imatmul", "ilshift", "irshift"}
_DUNDER_REFLECTED = {"radd", "rsub", "rmul", "rtruediv", "rdiv", "rfloordiv", "rpow", "rmatmul", "rmod", "rand",
                     "ror", "rxor"}


_KNOWN = frozenset(ACTIVATION) | frozenset(ELEMENTWISE) | COPIES | VIEWS


def canonical(name):
    """The table's name of a torch function or Tensor method: dunders and in-place forms folded into the plain
    op ('__iadd__', 'add_' and '__radd__' are 'add'); the in-place writes themselves show in the dataflow."""
    if name.startswith("__") and name.endswith("__") and len(name) > 4:
        name = name[2:-2]
        if name in _DUNDER_IN_PLACE or name in _DUNDER_REFLECTED:
            name = name[1:]
    elif name.startswith("_") and name[1:] in _KNOWN:  # torch's private spellings (_pack_padded_sequence)
        name = name[1:]
    if name.endswith("_") and not name.startswith("_") and len(name) > 1:
        name = name[:-1]
    return {"truediv": "div", "rdiv": "div", "concat": "cat", "floor_divide": "floordiv"}.get(name, name)


# --- values ----------------------------------------------------------------------------------------------------

def tensors(value):
    """Every tensor inside a value (tensors, tuples, lists, dicts), in order, each once."""
    import torch

    out, seen = [], set()

    def walk(v):
        if isinstance(v, torch.Tensor):
            if id(v) not in seen:
                seen.add(id(v))
                out.append(v)
        elif isinstance(v, (tuple, list)):
            for x in v:
                walk(x)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)

    walk(value)
    return out


def nbytes(value):
    return float(sum(t.numel() * t.element_size() for t in tensors(value)))


def numel(value):
    return float(sum(t.numel() for t in tensors(value)))


def _first(value):
    ts = tensors(value)
    return ts[0] if ts else None


# --- shape-level formulas --------------------------------------------------------------------------------------

def conv(out_elements, in_channels_per_group, kernel):
    """A convolution: every output element is a dot product over Cin / groups x kernel inputs."""
    return 2.0 * out_elements * in_channels_per_group * math.prod(kernel)


def matmul(out_elements, k):
    """A product whose every output element sums k products."""
    return 2.0 * out_elements * k


def mha(batch, lq, lk, embed, kdim, vdim, heads):
    """nn.MultiheadAttention on batch x lq queries over lk keys, by part: the q, k, v projections, the score
    products (all heads: 2 lq lk embed per sequence), softmax, the weighted sum, the output projection."""
    return {
        "q_proj": matmul(batch * lq * embed, embed), "k_proj": matmul(batch * lk * embed, kdim),
        "v_proj": matmul(batch * lk * embed, vdim), "scores": matmul(batch * heads * lq * lk, embed // heads),
        "softmax": ACTIVATION["softmax"] * batch * heads * lq * lk,
        "context": matmul(batch * lq * embed, lk), "out_proj": matmul(batch * lq * embed, embed),
    }


def lstm_step(batch, inputs, hidden, biases=2, proj=0):
    """One LSTM time step by part (the zoo's NetBuilder::lstm_cell): one product of [x, h] with the four gates'
    weights, the bias adds, three sigmoid gates and a tanh candidate, the cell update c = f c + i g, the hidden
    state h = o tanh(c), and with proj > 0 the projection of h (h has then `proj` units)."""
    h_in = proj or hidden
    bh = batch * hidden
    parts = {"matmul": matmul(4 * bh, inputs + h_in), "bias_add": biases * 4.0 * bh,
             "input_gate": ACTIVATION["sigmoid"] * bh, "forget_gate": ACTIVATION["sigmoid"] * bh,
             "candidate": ACTIVATION["tanh"] * bh, "output_gate": ACTIVATION["sigmoid"] * bh,
             "cell_forget": 1.0 * bh, "cell_input": 1.0 * bh, "cell": 1.0 * bh,
             "cell_tanh": ACTIVATION["tanh"] * bh, "hidden": 1.0 * bh}
    if proj:
        parts["projection"] = matmul(batch * proj, hidden)
    if not biases:
        del parts["bias_add"]
    return parts


def gru_step(batch, inputs, hidden, biases=2):
    """One GRU time step by part: the input and the hidden products (bias folded in: 1 FLOP per element), the reset
    and update gates (add + sigmoid), the candidate n = tanh(x_n + r h_n) and h = (1 - z) n + z h."""
    bh = batch * hidden
    bias = 3.0 * bh if biases else 0.0
    return {"input_matmul": matmul(3 * bh, inputs) + bias, "hidden_matmul": matmul(3 * bh, hidden) + bias,
            "reset_gate": (1 + ACTIVATION["sigmoid"]) * bh, "update_gate": (1 + ACTIVATION["sigmoid"]) * bh,
            "candidate": (2 + ACTIVATION["tanh"]) * bh, "hidden": 4.0 * bh}


def rnn_step(batch, inputs, hidden, biases=2, nonlinearity="tanh"):
    """One Elman RNN time step by part: one product of [x, h], the bias adds, tanh or relu."""
    bh = batch * hidden
    parts = {"matmul": matmul(bh, inputs + hidden), "bias_add": biases * 1.0 * bh,
             "activation": ACTIVATION[nonlinearity] * bh}
    if not biases:
        del parts["bias_add"]
    return parts


def einsum(equation, shapes):
    """FLOPs of torch.einsum(equation, operands of `shapes`): 2 per multiply-add over every index (one per output
    element when nothing is summed over); ellipses take their sizes from the operands' leading dimensions."""
    equation = equation.replace(" ", "")
    lhs, _, rhs = equation.partition("->")
    sizes = {}
    for term, shape in zip(lhs.split(","), shapes):
        if "..." in term:
            head, tail = term.split("...")
            term = head + "".join(chr(0x100 + i) for i in range(len(shape) - len(head) - len(tail))) + tail
        for letter, size in zip(term, shape):
            sizes[letter] = max(sizes.get(letter, 1), size)
    if not rhs:
        rhs = "".join(sorted(c for c in sizes if lhs.count(c) == 1))
    out_letters = {c for c in rhs if c != "."} | {c for c in sizes if ord(c) >= 0x100}
    summed = [s for c, s in sizes.items() if c not in out_letters]
    total = math.prod(sizes.values())
    return 2.0 * total if summed else float(total) * max(0, len(shapes) - 1)


# --- torch-level dispatch --------------------------------------------------------------------------------------

def mha_shape(m, query, key):
    """(batch, query length, key length) of a call of nn.MultiheadAttention `m` (batch_first or not, or unbatched)."""
    if query.dim() == 2:
        return 1, query.shape[0], key.shape[0]
    if m.batch_first:
        return query.shape[0], query.shape[1], key.shape[1]
    return query.shape[1], query.shape[0], key.shape[0]


def _conv_flops(out, in_channels, groups, kernel):
    return conv(numel(out), in_channels // groups, kernel)


def module_flops(m, args, kwargs, out):
    """FLOPs of one call of a module without children (and of a few with: nn.MultiheadAttention), or None when
    there is no formula for it."""
    import torch.nn as nn

    x = _first(args)
    if isinstance(m, nn.modules.conv._ConvNd):
        if m.transposed:
            return 2.0 * numel(x) * (m.out_channels // m.groups) * math.prod(m.kernel_size)
        return _conv_flops(out, m.in_channels, m.groups, m.kernel_size)
    if isinstance(m, nn.Linear):
        return matmul(numel(out), m.in_features)
    if isinstance(m, nn.Bilinear):
        return 2.0 * numel(out) * m.in1_features * m.in2_features
    if isinstance(m, nn.MultiheadAttention):
        q = args[0]
        k = args[1] if len(args) > 1 else kwargs.get("key", q)
        return sum(mha(*mha_shape(m, q, k), m.embed_dim, m.kdim, m.vdim, m.num_heads).values())
    if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
                      nn.modules.instancenorm._InstanceNorm, nn.LocalResponseNorm)):
        return NORM_PER_ELEMENT * numel(out)
    if isinstance(m, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
        k = m.kernel_size if isinstance(m.kernel_size, tuple) else (m.kernel_size,) * (x.dim() - 2)
        return numel(out) * math.prod(k)
    if isinstance(m, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
                      nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)):
        return numel(x)
    if isinstance(m, (nn.Embedding, nn.Identity, nn.Flatten, nn.Unflatten, nn.ChannelShuffle)):
        return 0.0
    name = type(m).__name__.lower()
    if name in ACTIVATION:
        return ACTIVATION[name] * numel(out)
    return None


def function_flops(name, args, kwargs, out):
    """FLOPs of a torch function or Tensor method (any spelling canonical() folds), or None without a formula."""
    import torch

    name = canonical(name)
    if name in VIEWS or name in COPIES:
        return 0.0
    if name in ("matmul", "mm", "bmm", "baddbmm", "addmm", "addbmm", "addmv", "mv", "dot", "linear", "inner"):
        a = args[1] if name in ("addmm", "baddbmm", "addbmm", "addmv") else args[0]
        if name == "linear":
            return matmul(numel(out), a.shape[-1])
        return matmul(numel(out), a.shape[-1] if a.dim() > 0 else 1)
    if name == "einsum":
        ops = args[1:] if len(args) > 2 or not isinstance(args[1], (list, tuple)) else args[1]
        return einsum(args[0], [tuple(t.shape) for t in ops])
    if name in ("conv1d", "conv2d", "conv3d"):
        w = args[1] if len(args) > 1 else kwargs["weight"]
        groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
        return _conv_flops(out, w.shape[1] * groups, groups, w.shape[2:])
    if name in NORMS:
        return NORM_PER_ELEMENT * numel(out)
    if name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
        k = args[1] if len(args) > 1 else kwargs["kernel_size"]
        k = tuple(k) if isinstance(k, (tuple, list)) else (k,) * (args[0].dim() - 2)
        return numel(out) * math.prod(k)
    if name.startswith("adaptive_"):
        return numel(args[0])
    if name in REDUCTIONS:
        return numel(_first(args))
    if name == "scaled_dot_product_attention":
        q, k = args[0], args[1]
        return 4.0 * q.numel() * k.shape[-2] + 5.0 * q.numel() / q.shape[-1] * k.shape[-2]
    if name in ELEMENTWISE:
        return ELEMENTWISE[name] * numel(out if isinstance(out, torch.Tensor) else _first(args))
    if name in ACTIVATION:
        return ACTIVATION[name] * numel(out)
    return None


def _product_dims(a, b, out):
    """[batch, m, n, k] of out = a @ b (torch.matmul's broadcasting; a vector is one row or column)."""
    m = a.shape[-2] if a.dim() >= 2 else 1
    n = b.shape[-1] if b.dim() >= 2 else 1
    k = a.shape[-1] if a.dim() >= 1 else 1
    if m * n * k == 0:
        return None
    return [max(1, numel(out) // (m * n)), m, n, k]


def conv_gemm(out_elements, out_channels, in_channels, groups, kernel):
    """The implicit GEMM of a convolution: [groups, N * output positions, Cout / groups, Cin / groups * kernel];
    None for a depthwise one (one output channel per group), which libraries run as a direct, memory-bound kernel,
    not as products of one column."""
    positions = out_elements // out_channels
    if positions == 0 or out_channels // groups == 1:
        return None
    return [groups, positions, out_channels // groups, in_channels // groups * math.prod(kernel)]


def gemm_dims(name, sub, args, kwargs, out):
    """[batch, m, n, k] of the matrix products a module (`sub`) or a function (`name`) computes, or None."""
    import torch
    import torch.nn as nn

    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return None
    if sub is not None:
        if isinstance(sub, nn.modules.conv._ConvNd) and not sub.transposed:
            return conv_gemm(numel(out), sub.out_channels, sub.in_channels, sub.groups, sub.kernel_size)
        if isinstance(sub, nn.Linear):
            return [1, numel(out) // sub.out_features, sub.out_features, sub.in_features]
        return None
    name = canonical(name)
    if name in ("matmul", "mm", "bmm"):
        return _product_dims(args[0], args[1], out)
    if name in ("addmm", "baddbmm"):
        return _product_dims(args[1], args[2], out)
    if name == "linear":
        w = args[1] if len(args) > 1 else kwargs["weight"]
        return [1, numel(out) // w.shape[0], w.shape[0], w.shape[1]]
    if name in ("conv1d", "conv2d", "conv3d"):
        w = args[1] if len(args) > 1 else kwargs["weight"]
        groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
        return conv_gemm(numel(out), w.shape[0], w.shape[1] * groups, groups, w.shape[2:])
    return None
