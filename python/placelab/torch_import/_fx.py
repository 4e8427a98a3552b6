"""Import by a torch.fx trace (method="fx"): the importer before the recording one, kept for comparison.

The module is traced with torch.fx, evaluating every node on the example inputs as it is created (a "concrete"
trace: shape propagation during tracing rather than after it), so control flow on shapes traces; tensor-dependent
branches are resolved for the example inputs. Leaf modules (modules without children, and nn.MultiheadAttention
and the recurrent modules as a whole) become one op each; every other node (functions, tensor methods, attribute
reads) becomes one op. Nodes whose value holds no tensor (shape arithmetic) are constants of the trace and are not
ops. Costs come from costs.py. Code that symbolic tracing cannot follow (tensors built from a Proxy's shape,
tuples unpacked from a leaf, Python loops over a tensor) fails here; the recording importer takes it.
"""

from __future__ import annotations

from . import costs
from ._graph import GraphBuilder


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
            return isinstance(m, (torch.nn.MultiheadAttention, torch.nn.RNNBase)) or len(list(m.children())) == 0

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


def trace(module, example_inputs, input_names, concrete):
    """The GraphBuilder of a concrete torch.fx trace of `module`, and the number of trace constants skipped."""
    import torch
    import torch.nn as nn
    from torch.fx.node import map_arg

    tracer = _make_tracer_class()(example_inputs, input_names)
    fx_graph = tracer.trace(module, concrete_args=concrete or None)
    b = GraphBuilder()
    top_layers, index, skipped = {}, {}, 0
    for node in fx_graph.nodes:
        if node.op == "output":
            continue
        value = tracer.values[node]
        if not costs.tensors(value):
            skipped += 1  # a constant of the trace (shape arithmetic, None, flags)
            continue
        inputs = []
        map_arg((node.args, node.kwargs), lambda n: inputs.append(n) or n)
        arg_values = list(map_arg(node.args, lambda n: tracer.values[n]))
        kwarg_values = map_arg(node.kwargs, lambda n: tracer.values[n])
        sub = module.get_submodule(node.target) if node.op == "call_module" else None
        out_bytes = costs.nbytes(value)
        param_bytes = weight_bytes = 0.0  # held (counted once per tensor) and read at every call
        if node.op in ("placeholder", "get_attr"):
            flops = 0.0
            if node.op == "get_attr":
                weight_bytes = out_bytes
                param_bytes = b.hold(id(value), out_bytes) if isinstance(value, torch.Tensor) else out_bytes
        elif sub is not None:
            flops = costs.module_flops(sub, arg_values, kwarg_values, value)
            if flops is None and isinstance(sub, nn.RNNBase):
                flops = _rnn_flops(sub, arg_values, kwarg_values, value)
            weights = list(sub.parameters()) + list(sub.buffers())
            weight_bytes = costs.nbytes(weights)
            param_bytes = sum(b.hold(id(t), t.numel() * t.element_size()) for t in weights)
        else:
            flops = costs.function_flops(_function_name(node), arg_values, kwarg_values, value)
        type_name = _type_name(node, sub)
        if flops is None:
            b.unsupported[type_name] += 1
            flops = 0.0
        view = node.op in ("call_method", "call_function") and flops == 0.0 and \
            costs.canonical(_function_name(node)) in costs.VIEWS
        gemm = None
        if node.op in ("call_module", "call_function", "call_method") and flops > 0:
            gemm = costs.gemm_dims(_function_name(node), sub, arg_values, kwarg_values, value)
        layer = None
        if node.op in ("call_module", "get_attr"):
            top = node.target.split(".")[0]
            layer = top_layers.setdefault(top, len(top_layers))
        reads = [(index[n], costs.nbytes(tracer.values[n])) for n in dict.fromkeys(inputs) if n in index]
        index[node] = b.op(node.name, type_name, flops, reads, out_bytes, weight_bytes, param_bytes, gemm, layer,
                           traffic=not view and node.op != "placeholder")
    return b, skipped


def _rnn_flops(m, args, kwargs, out):
    """FLOPs of a whole recurrent module (the sum of the recording importer's expansion)."""
    from ._expand import expand
    from ._record import _Sum

    total = _Sum()
    expand(total, m, args, kwargs, out)
    return total.flops
