"""Import a PyTorch module as a placelab Graph.

The module is traced with torch.fx, evaluating every node on the example inputs as it is created (a
"concrete" trace: shape propagation during tracing rather than after it). That is what lets control
flow on shapes trace, such as nn.Transformer's batch checks and torchvision's Inception-v3 branches,
which a purely symbolic trace rejects; tensor-dependent branches are resolved for the example inputs.

Leaf modules (modules without children, and nn.MultiheadAttention as a whole) become one op each;
every other node (functions, tensor methods, attribute reads) becomes one op. Nodes whose value holds
no tensor (shape arithmetic such as ``x.size(1) != y.size(1)``) are constants of the trace and are not
ops. Costs per op: FLOPs count a multiply-add as 2; bytes_read = input tensors + parameters,
bytes_written = output_bytes = the output tensors; param_bytes = the leaf module's parameters and
buffers. View-like ops (reshape, getitem, getattr, ...) cost nothing but still carry their tensor.
Ops the cost table does not know are reported by name (an UnsupportedOpWarning and the ``unsupported``
entry of import_torch's info) and keep a bytes-only cost: they are never dropped.
"""

from __future__ import annotations

import inspect
import math
import warnings
from collections import Counter

from . import _core

__all__ = ["from_torch", "import_torch", "UnsupportedOpWarning"]


class UnsupportedOpWarning(UserWarning):
    """Some ops of an imported module have no FLOP formula; they got a bytes-only cost."""


def _tensors(value):
    """Every tensor inside a value (tensors, tuples, lists, dicts)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors(v)]
    return []


def _nbytes(value):
    return float(sum(t.numel() * t.element_size() for t in _tensors(value)))


def _numel(value):
    return float(sum(t.numel() for t in _tensors(value)))


def _first(value):
    ts = _tensors(value)
    return ts[0] if ts else None


def _make_tracer_class():
    import torch
    import torch.fx
    from torch.fx.node import map_arg

    # torch.fx patches these while tracing (module calls and parameter reads become nodes); evaluating a node
    # needs the real ones back for that moment.
    plain_call, plain_getattr = torch.nn.Module.__call__, torch.nn.Module.__getattr__

    class ConcreteTracer(torch.fx.Tracer):
        """A torch.fx tracer that computes every node's value on the example inputs while tracing."""

        def __init__(self, example_inputs, input_names):
            super().__init__()
            self.values = {}
            self._inputs = dict(zip(input_names, example_inputs))

        def is_leaf_module(self, m, qualname):
            return isinstance(m, torch.nn.MultiheadAttention) or len(list(m.children())) == 0

        def create_node(self, kind, target, args, kwargs, name=None, type_expr=None):
            node = super().create_node(kind, target, args, kwargs, name, type_expr)
            if kind == "output":
                return node
            a = map_arg(node.args, lambda n: self.values[n])
            kw = map_arg(node.kwargs, lambda n: self.values[n])
            patched = torch.nn.Module.__call__, torch.nn.Module.__getattr__
            torch.nn.Module.__call__, torch.nn.Module.__getattr__ = plain_call, plain_getattr
            try:
                if kind == "placeholder":
                    value = self._inputs[target] if target in self._inputs else (a[0] if a else None)
                elif kind == "get_attr":
                    value = self.root
                    for part in target.split("."):
                        value = getattr(value, part)
                elif kind == "call_module":
                    value = self.root.get_submodule(target)(*a, **kw)
                elif kind == "call_method":
                    value = getattr(a[0], target)(*a[1:], **kw)
                else:
                    value = target(*a, **kw)
            except Exception as e:  # noqa: BLE001 - reported with the node that failed
                raise ValueError(f"from_torch: evaluating node {node.name} ({kind} {target}) failed: {e}") from e
            finally:
                torch.nn.Module.__call__, torch.nn.Module.__getattr__ = patched
            self.values[node] = value
            return node

        def to_bool(self, obj):
            return bool(self.values[obj.node])

        def iter(self, obj):
            return iter([obj[i] for i in range(len(self.values[obj.node]))])

    return ConcreteTracer


# --- cost formulas ------------------------------------------------------------------------------
# Each takes (inputs: list of argument values, kwargs, output value, module or None) and returns FLOPs.

_VIEW_METHODS = {
    "view", "reshape", "flatten", "permute", "transpose", "squeeze", "unsqueeze", "size", "dim", "t",
    "expand", "expand_as", "view_as", "chunk", "split", "unbind", "narrow", "select", "detach", "type_as",
    "unflatten", "movedim", "__getitem__",
}
_VIEW_FUNCTIONS = {
    "getattr", "getitem", "flatten", "reshape", "permute", "transpose", "squeeze", "unsqueeze", "chunk",
    "split", "unbind", "narrow", "select", "t", "movedim", "_assert", "_assert_is_none",
}
_COPY_FUNCTIONS = {"cat", "stack", "contiguous", "clone", "to", "pad", "roll", "repeat", "tile"}

# FLOPs per output element.
_ELEMENTWISE = {
    "add": 1, "sub": 1, "mul": 1, "truediv": 1, "div": 1, "iadd": 1, "isub": 1, "imul": 1, "itruediv": 1,
    "add_": 1, "mul_": 1, "neg": 1, "abs": 1, "sqrt": 1, "rsqrt": 2, "pow": 1, "exp": 1, "log": 1,
    "clamp": 1, "clamp_min": 1, "clamp_max": 1, "maximum": 1, "minimum": 1, "masked_fill": 1, "where": 1,
    "floordiv": 1, "matmul_scale": 1, "reciprocal": 1, "erf": 4, "sin": 4, "cos": 4,
}
_ACTIVATION = {
    "relu": 1, "relu_": 1, "relu6": 2, "hardtanh": 2, "leaky_relu": 2, "elu": 4, "gelu": 8, "silu": 5,
    "sigmoid": 4, "tanh": 4, "hardswish": 4, "hardsigmoid": 3, "softplus": 4, "mish": 8, "softmax": 5,
    "log_softmax": 6, "dropout": 1, "identity": 0,
}
_NORM_FLOPS_PER_ELEMENT = 5  # mean, variance, normalise, scale, shift


def _conv_flops(out, in_channels, groups, kernel):
    return 2.0 * _numel(out) * (in_channels // groups) * math.prod(kernel)


def _matmul_flops(a, b, out):
    k = a.shape[-1] if a.dim() > 0 else 1
    return 2.0 * _numel(out) * k


def _mha_flops(m, args, kwargs, out):
    q = args[0]
    k = args[1] if len(args) > 1 else kwargs.get("key", q)
    e = m.embed_dim
    lq = q.numel() / e
    lk = k.numel() / (m.kdim if k.shape[-1] == m.kdim else e)
    proj = 2.0 * e * (lq * e + lk * m.kdim + lk * m.vdim)   # q, k and v projections
    seq_k = k.shape[1] if m.batch_first and k.dim() == 3 else k.shape[0]
    attention = 2 * 2.0 * lq * seq_k * e                   # scores and weighted sum over all heads
    softmax = _ACTIVATION["softmax"] * lq * seq_k * m.num_heads
    out_proj = 2.0 * lq * e * e
    return proj + attention + softmax + out_proj


def _module_flops(m, args, kwargs, out):
    """FLOPs of a leaf module, or None when there is no formula for it."""
    import torch.nn as nn

    x = _first(args)
    if isinstance(m, nn.modules.conv._ConvNd):
        if m.transposed:
            return 2.0 * _numel(x) * (m.out_channels // m.groups) * math.prod(m.kernel_size)
        return _conv_flops(out, m.in_channels, m.groups, m.kernel_size)
    if isinstance(m, nn.Linear):
        return 2.0 * _numel(out) * m.in_features
    if isinstance(m, nn.Bilinear):
        return 2.0 * _numel(out) * m.in1_features * m.in2_features
    if isinstance(m, nn.MultiheadAttention):
        return _mha_flops(m, args, kwargs, out)
    if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm, nn.GroupNorm,
                      nn.modules.instancenorm._InstanceNorm, nn.LocalResponseNorm)):
        return _NORM_FLOPS_PER_ELEMENT * _numel(out)
    if isinstance(m, (nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AvgPool1d, nn.AvgPool2d, nn.AvgPool3d)):
        k = m.kernel_size if isinstance(m.kernel_size, tuple) else (m.kernel_size,) * (x.dim() - 2)
        return _numel(out) * math.prod(k)
    if isinstance(m, (nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool2d, nn.AdaptiveAvgPool3d,
                      nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d, nn.AdaptiveMaxPool3d)):
        return _numel(x)
    if isinstance(m, (nn.Embedding, nn.Identity, nn.Flatten, nn.Unflatten)):
        return 0.0
    name = type(m).__name__.lower()
    if name in _ACTIVATION:
        return _ACTIVATION[name] * _numel(out)
    return None


def _function_flops(name, args, kwargs, out):
    """FLOPs of a function or tensor method called `name`, or None when there is no formula."""
    import torch

    if name in _VIEW_FUNCTIONS or name in _VIEW_METHODS or name in _COPY_FUNCTIONS:
        return 0.0
    if name in ("matmul", "mm", "bmm", "baddbmm", "addmm", "linear", "einsum_matmul"):
        if name in ("addmm", "baddbmm"):
            a, b = args[1], args[2]
        elif name == "linear":
            return 2.0 * _numel(out) * args[0].shape[-1]
        else:
            a, b = args[0], args[1]
        return _matmul_flops(a, b, out)
    if name in ("conv1d", "conv2d", "conv3d"):
        w = args[1] if len(args) > 1 else kwargs["weight"]
        groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
        return _conv_flops(out, w.shape[1] * groups, groups, w.shape[2:])
    if name in ("layer_norm", "batch_norm", "group_norm", "instance_norm", "normalize"):
        return _NORM_FLOPS_PER_ELEMENT * _numel(out)
    if name in ("max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d"):
        k = args[1] if len(args) > 1 else kwargs["kernel_size"]
        x = args[0]
        k = tuple(k) if isinstance(k, (tuple, list)) else (k,) * (x.dim() - 2)
        return _numel(out) * math.prod(k)
    if name.startswith("adaptive_"):
        return _numel(args[0])
    if name in ("mean", "sum", "amax", "amin", "max", "min", "var", "std", "norm", "argmax", "argmin"):
        return _numel(_first(args))
    if name in ("scaled_dot_product_attention",):
        q, k = args[0], args[1]
        return 4.0 * q.numel() * k.shape[-2] + 5.0 * q.numel() / q.shape[-1] * k.shape[-2]
    if name in ("embedding",):
        return 0.0
    if name in _ELEMENTWISE:
        return _ELEMENTWISE[name] * _numel(out)
    if name in _ACTIVATION:
        return _ACTIVATION[name] * _numel(out)
    if isinstance(out, torch.Tensor) and name.endswith("_") and name[:-1] in _ELEMENTWISE:
        return _numel(out)
    return None


def _product_dims(a, b, out):
    """[batch, m, n, k] of out = a @ b (torch.matmul's broadcasting; a vector is one row or column)."""
    m = a.shape[-2] if a.dim() >= 2 else 1
    n = b.shape[-1] if b.dim() >= 2 else 1
    k = a.shape[-1] if a.dim() >= 1 else 1
    if m * n * k == 0:
        return None
    return [max(1, _numel(out) // (m * n)), m, n, k]


def _conv_dims(out, out_channels, in_channels, groups, kernel):
    """The implicit GEMM of a convolution: [groups, N * output positions, Cout / groups, Cin / groups * kernel]; None
    for a depthwise one (one output channel per group), which libraries run as a direct, memory-bound kernel, not
    as products of one column."""
    positions = _numel(out) // out_channels
    if positions == 0 or out_channels // groups == 1:
        return None
    return [groups, positions, out_channels // groups, in_channels // groups * math.prod(kernel)]


def _gemm_dims(name, sub, args, kwargs, out):
    """[batch, m, n, k] of the matrix products a leaf module or function computes, or None."""
    import torch
    import torch.nn as nn

    if not isinstance(out, torch.Tensor) or out.numel() == 0:
        return None
    if sub is not None:
        if isinstance(sub, nn.modules.conv._ConvNd) and not sub.transposed:
            return _conv_dims(out, sub.out_channels, sub.in_channels, sub.groups, sub.kernel_size)
        if isinstance(sub, nn.Linear):
            return [1, _numel(out) // sub.out_features, sub.out_features, sub.in_features]
        return None
    if name in ("matmul", "mm", "bmm"):
        return _product_dims(args[0], args[1], out)
    if name in ("addmm", "baddbmm"):
        return _product_dims(args[1], args[2], out)
    if name == "linear":
        w = args[1] if len(args) > 1 else kwargs["weight"]
        return [1, _numel(out) // w.shape[0], w.shape[0], w.shape[1]]
    if name in ("conv1d", "conv2d", "conv3d"):
        w = args[1] if len(args) > 1 else kwargs["weight"]
        groups = args[6] if len(args) > 6 else kwargs.get("groups", 1)
        return _conv_dims(out, w.shape[0], w.shape[1] * groups, groups, w.shape[2:])
    return None


def _type_name(node, module):
    if node.op == "call_module":
        return type(module).__name__
    if node.op == "call_method":
        return node.target
    if node.op == "get_attr":
        return "Parameter"
    if node.op == "placeholder":
        return "Input"
    return getattr(node.target, "__name__", str(node.target))


def _function_name(node):
    if node.op == "call_method":
        return node.target
    name = getattr(node.target, "__name__", str(node.target))
    return name.lstrip("_") if name.startswith("__") else name


def import_torch(module, example_inputs, training=False, name=None):
    """Like from_torch, and also returns an info dict: unsupported ops by name and count, op counts by type,
    the number of trace constants skipped."""
    import torch
    from torch.fx.node import map_arg

    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"from_torch: module must be a torch.nn.Module, got {type(module).__name__}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not example_inputs:
        raise ValueError("from_torch: example_inputs is empty; pass the tensors forward() takes")

    params = list(inspect.signature(module.forward).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(example_inputs) > len(positional):
        raise ValueError(f"from_torch: {len(example_inputs)} example inputs, but {type(module).__name__}.forward "
                         f"takes {len(positional)} positional arguments")
    input_names = [p.name for p in positional[:len(example_inputs)]]
    concrete = {p.name: p.default for p in params[len(example_inputs):] if p.default is not inspect.Parameter.empty}

    tracer = _make_tracer_class()(example_inputs, input_names)
    # Tracing runs the module for real: in train mode that would update BatchNorm statistics and draw from
    # torch's generator (dropout). The user's module and generator are left as they were.
    buffers = [(b, b.clone()) for b in module.buffers()]
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        fx_graph = tracer.trace(module, concrete_args=concrete or None)
        for buffer, saved in buffers:
            buffer.copy_(saved)

    top_layers = {}
    owned = set()  # ids of the parameters and buffers already counted: a module called twice, tied weights

    def first_use_bytes(tensors):
        """Bytes of those of `tensors` no op holds yet; they are held by this one from now on."""
        new = [t for t in tensors if id(t) not in owned]
        owned.update(id(t) for t in new)
        return float(sum(t.numel() * t.element_size() for t in new))

    ops, edges, index = [], [], {}
    unsupported = Counter()
    skipped = 0
    for node in fx_graph.nodes:
        if node.op == "output":
            continue
        value = tracer.values[node]
        if not _tensors(value):
            skipped += 1  # a constant of the trace (shape arithmetic, None, flags)
            continue
        inputs = []
        map_arg((node.args, node.kwargs), lambda n: inputs.append(n) or n)
        arg_values = map_arg(node.args, lambda n: tracer.values[n])
        kwarg_values = map_arg(node.kwargs, lambda n: tracer.values[n])
        sub = module.get_submodule(node.target) if node.op == "call_module" else None
        out_bytes = _nbytes(value)
        param_bytes = weight_bytes = 0.0  # held (counted once per tensor) and read at every call
        if node.op in ("placeholder", "get_attr"):
            flops = 0.0
            if node.op == "get_attr":
                weight_bytes = out_bytes
                param_bytes = first_use_bytes([value]) if isinstance(value, torch.Tensor) else out_bytes
        elif sub is not None:
            flops = _module_flops(sub, list(arg_values), kwarg_values, value)
            weights = list(sub.parameters()) + list(sub.buffers())
            weight_bytes = float(sum(t.numel() * t.element_size() for t in weights))
            param_bytes = first_use_bytes(weights)
        else:
            flops = _function_flops(_function_name(node), list(arg_values), kwarg_values, value)
        type_name = _type_name(node, sub)
        if flops is None:
            unsupported[type_name] += 1
            flops = 0.0
        view = node.op in ("call_method", "call_function") and flops == 0.0 and (
            _function_name(node) in _VIEW_FUNCTIONS or _function_name(node) in _VIEW_METHODS)
        in_bytes = sum(_nbytes(tracer.values[n]) for n in dict.fromkeys(inputs) if n in index)
        op = {"name": node.name, "type": type_name, "flops": float(flops), "output_bytes": out_bytes}
        if not view and node.op != "placeholder":
            op["bytes_read"] = in_bytes + weight_bytes
            op["bytes_written"] = out_bytes
        if param_bytes:
            op["param_bytes"] = param_bytes
        if node.op in ("call_module", "call_function", "call_method") and flops > 0:
            dims = _gemm_dims(_function_name(node), sub, list(arg_values), kwarg_values, value)
            if dims is not None and all(d >= 1 for d in dims):
                op["gemm"] = [int(d) for d in dims]
        if node.op in ("call_module", "get_attr"):
            top = node.target.split(".")[0]
            op["layer"] = top_layers.setdefault(top, len(top_layers))
        index[node] = len(ops)
        for src in dict.fromkeys(inputs):
            if src in index:
                edges.append({"src": index[src], "dst": len(ops), "bytes": _nbytes(tracer.values[src])})
        ops.append(op)

    doc = {"format": "placelab.graph", "version": 1, "name": name or type(module).__name__, "ops": ops, "edges": edges}
    graph = _core.graph_from_dict(doc, f"from_torch({type(module).__name__})")
    if unsupported:
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(unsupported.items()))
        warnings.warn(f"from_torch: no FLOP formula for {listed}; they got a bytes-only cost",
                      UnsupportedOpWarning, stacklevel=3)
    if training:
        graph = _core.expand_training(graph)
    info = {"unsupported": dict(unsupported), "op_types": dict(Counter(op["type"] for op in ops)),
            "constants_skipped": skipped}
    return graph, info


def from_torch(module, example_inputs, training=False, name=None):
    """A placelab Graph of `module` run on `example_inputs` (a tensor or a tuple of them), with FLOPs, bytes and
    parameter sizes per op; training=True expands it into one training step (forward, backward, update).
    Ops without a FLOP formula raise an UnsupportedOpWarning naming them and keep a bytes-only cost."""
    graph, _ = import_torch(module, example_inputs, training=training, name=name)
    return graph
