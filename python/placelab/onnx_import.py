"""Import an ONNX model as a placelab Graph.

Tensor sizes come from ONNX shape inference (onnx.shape_inference, with data propagation), after the graph's
inputs get concrete sizes. Everything computable before the run is folded away, as torch_import skips values
without tensors: Constant nodes, shapes of tensors of known size and whatever is computed from constants only
(Shape -> Gather -> Unsqueeze -> Concat feeding a Reshape, a mask sliced from a buffer, a transposed weight).
Initializers (weights), and the constants derived from them, are the parameters of the op that reads them,
counted once even when shared. Two decompositions an exporter writes are fused back into one op each: the
ReduceMean/Sub/Pow/ReduceMean/Add/Sqrt/Div(/Mul/Add) of a LayerNorm (LayerNormalization) and a MatMul followed
by the Add of its bias (Gemm, no bias FLOPs, as torch_import's Linear). LSTM, GRU and RNN nodes are expanded into
per-direction, per-time-step cell ops (_onnx_ops.expand_recurrent). Costs per op follow torch_import: a
multiply-add is 2 FLOPs; bytes_read = input tensors + constants read, bytes_written = output_bytes; views cost
nothing but carry their tensor. An operator without a formula is kept with a bytes-only cost and named in one
UnsupportedOnnxOpWarning.

Run as a program, it writes the placelab.graph document of an ONNX file (what `placelab graph --onnx` does,
without needing the compiled placelab._core): python3 onnx_import.py MODEL.onnx --out GRAPH.json
"""

from __future__ import annotations

import json
import math
import os
import sys
import warnings
from collections import Counter

try:
    from . import _onnx_ops as costs
except ImportError:  # run as a file, outside the package (placelab graph --onnx)
    import _onnx_ops as costs

__all__ = ["from_onnx", "import_onnx", "UnsupportedOnnxOpWarning"]


class UnsupportedOnnxOpWarning(UserWarning):
    """Some operators of an imported ONNX model have no FLOP formula (or no inferred size); they got a bytes-only
    cost."""


def _onnx(caller):
    try:
        import onnx
        import onnx.numpy_helper  # noqa: F401
        import onnx.shape_inference  # noqa: F401
    except ImportError as e:
        raise ImportError(f"{caller} needs the Python package onnx, which does not import ({e}): install "
                          f"python3-onnx (apt-get install python3-onnx)") from e
    return onnx


# Bytes per element of ONNX's TensorProto data types (bfloat16 and the float8 kinds included).
_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 8: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8, 15: 16,
             16: 2, 17: 1, 18: 1, 19: 1, 20: 1}
_NO_FOLD = {"RandomNormal", "RandomNormalLike", "RandomUniform", "RandomUniformLike", "Multinomial", "Bernoulli",
            "If", "Loop", "Scan"}  # random draws and control flow are never constants of the import
_EVAL_LIMIT = 1 << 24  # elements: a folded value larger than this keeps its size but not its contents


class _Node:
    """A node of the ONNX graph, or one fused from several (type_name then differs from op_type)."""

    def __init__(self, name, op_type, inputs, outputs, attrs, type_name=None, proto=None):
        self.name, self.op_type, self.inputs, self.outputs, self.attrs = name, op_type, inputs, outputs, attrs
        self.type_name, self.proto = type_name or op_type, proto


def _attrs(onnx, proto):
    """A node's attributes; tensors as numpy arrays."""
    out = {}
    for a in proto.attribute:
        value = onnx.helper.get_attribute_value(a)
        out[a.name] = onnx.numpy_helper.to_array(value) if isinstance(value, onnx.TensorProto) else value
    return out


# --- loading ------------------------------------------------------------------------------------

def _load(onnx, model, caller):
    """(ModelProto, origin for messages, default name) of a path or a ModelProto; errors name the file."""
    if isinstance(model, onnx.ModelProto):
        return model, f"{caller}(ModelProto)", model.graph.name or "onnx"
    try:
        path = os.fspath(model)
    except TypeError:
        raise ValueError(f"{caller}: model must be a path or an onnx.ModelProto, got {type(model).__name__}") \
            from None
    origin = f"{caller}: {path}"
    if not os.path.exists(path):
        raise ValueError(f"{origin}: no such file")
    if os.path.isdir(path):
        raise ValueError(f"{origin}: is a folder, not an ONNX file")
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ValueError(f"{origin}: cannot read it ({e.strerror})") from None
    if not data:
        raise ValueError(f"{origin}: the file is empty, not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)  # external data (models over 2 GB) stays on disk: only sizes are needed
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError, whose module varies
        raise ValueError(f"{origin}: not a readable ONNX model, truncated or another kind of file ({e})") from None
    name = os.path.splitext(os.path.basename(path))[0] or "onnx"
    return proto, origin, name


def _check(model, origin):
    """Refuses what parsed as protobuf but is no ONNX model, or a graph whose nodes read undefined tensors."""
    g = model.graph
    if not g.node or not model.opset_import or model.ir_version <= 0:
        missing = "nodes" if not g.node else "opset_import" if not model.opset_import else "ir_version"
        raise ValueError(f"{origin}: not an ONNX model (no {missing}): a truncated file or another format")
    defined = {i.name for i in g.input} | {i.name for i in g.initializer} | {""}
    for n in g.node:
        for i in n.input:
            if i not in defined:
                raise ValueError(f"{origin}: node {n.name or n.op_type} reads {i!r}, which no input, initializer "
                                 f"or earlier node defines (the file is damaged, or its nodes are not in order)")
        defined.update(n.output)
    for domain in model.opset_import:
        if domain.domain in ("", "ai.onnx"):
            return domain.version
    return 0


def _copy_fields(src, dst, skip):
    for field, value in src.ListFields():
        if field.name == skip:
            continue
        if field.message_type:  # a message, or a list of them
            getattr(dst, field.name).MergeFrom(value)
        else:
            setattr(dst, field.name, value)


def _skeleton(onnx, model):
    """`model` without the contents of its large initializers (their names, types and sizes stay): what shape
    inference needs, at a fraction of the copying."""
    m = onnx.ModelProto()
    _copy_fields(model, m, skip="graph")
    _copy_fields(model.graph, m.graph, skip="initializer")
    for init in model.graph.initializer:
        if math.prod(init.dims) <= 4096:
            m.graph.initializer.add().CopyFrom(init)  # may hold sizes that data propagation reads
        else:
            m.graph.initializer.add(name=init.name, dims=init.dims, data_type=init.data_type)
    return m


def _fix_inputs(onnx, model, input_shapes, origin):
    """The skeleton of `model` (for shape inference) with inputs of the concrete sizes of input_shapes, and
    {input: shape}. Symbolic sizes left over are an error naming them and the option to give."""
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    input_shapes = dict(input_shapes or {})
    unknown = set(input_shapes) - {i.name for i in inputs}
    if unknown:
        raise ValueError(f"{origin}: input_shapes names {sorted(unknown)}, but the model's inputs are "
                         f"{[i.name for i in inputs]}")
    fixed = _skeleton(onnx, model)
    shapes = {}
    for inp in fixed.graph.input:
        if inp.name in initializers:
            continue
        if not inp.type.HasField("tensor_type"):
            raise ValueError(f"{origin}: input {inp.name} is not a tensor (sequences and maps are not supported)")
        dims = inp.type.tensor_type.shape.dim
        if inp.name in input_shapes:
            want = [int(d) for d in input_shapes[inp.name]]
            if any(d <= 0 for d in want) or (len(dims) and len(dims) != len(want)):
                raise ValueError(f"{origin}: input_shapes[{inp.name!r}] = {want}, but the input has {len(dims)} "
                                 f"dimensions and each size must be >= 1")
            inp.type.tensor_type.shape.ClearField("dim")
            for d in want:
                inp.type.tensor_type.shape.dim.add().dim_value = d
        else:
            shown = [d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else (d.dim_param or "?")
                     for d in dims]
            if not inp.type.tensor_type.HasField("shape") or any(isinstance(d, str) for d in shown):
                example = ", ".join(str(d) if isinstance(d, int) else "N" for d in shown)
                raise ValueError(f"{origin}: input {inp.name!r} has symbolic sizes {shown}; give them, e.g. "
                                 f"input_shapes={{{inp.name!r}: [{example}]}} (placelab graph --input-shape "
                                 f"{inp.name}={example.replace(', ', ',')})")
        shapes[inp.name] = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    # Recorded sizes that are symbolic (an exporter's placeholders), or made for other input sizes, would stand in
    # the way of inference's; concrete ones stay (a custom op's output has no other source).
    for vi in list(fixed.graph.value_info) + list(fixed.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if input_shapes or any(not d.HasField("dim_value") for d in dims):
            vi.type.tensor_type.ClearField("shape")
    return fixed, shapes


# --- tensor sizes and constants -----------------------------------------------------------------

class _Tensors:
    """Sizes of every tensor (from shape inference, initializers and folded values) and the constants of the
    import: values where known, and per constant the initializers and Constant outputs it derives from."""

    def __init__(self, onnx, model):
        self.onnx = onnx
        self.shapes, self.types = {}, {}
        self.initializers = {i.name: i for i in model.graph.initializer}
        self.values, self.sources = {}, {}
        self.inference_error = None
        self.unevaluated = set()  # ids of folded nodes whose values are unknown: inference still sizes them
        for name, init in self.initializers.items():
            self.shapes[name], self.types[name] = tuple(init.dims), init.data_type
            self.sources[name] = frozenset([name])
        self._alias_transposed_copies()

    def _array(self, name):
        """An initializer's contents (a view of its bytes where it can), or None when they are on disk."""
        import numpy as np

        init = self.initializers[name]
        if init.data_location == init.EXTERNAL:
            return None
        if init.raw_data and init.data_type in (1, 10, 11):  # float32, float16, float64
            dtype = self.onnx.mapping.TENSOR_TYPE_TO_NP_TYPE[init.data_type]
            return np.frombuffer(init.raw_data, dtype).reshape(tuple(init.dims))
        return self.onnx.numpy_helper.to_array(init)

    def _alias_transposed_copies(self):
        """A weight the exporter stored twice, once transposed (an LM head tied to the token embedding, which
        constant folding turns into a second initializer), is held once, as the model holds it."""
        import numpy as np

        by_shape, edges = {}, {}
        for name, init in self.initializers.items():
            if len(init.dims) == 2 and init.dims[0] != init.dims[1] and init.data_type in (1, 10, 11):
                by_shape.setdefault(tuple(init.dims), []).append(name)

        def edge(name):
            """The start of the first row and column: a pair can only be transposes if these match crosswise."""
            if name not in edges:
                a = self._array(name)
                edges[name] = None if a is None else (a[0, :8].copy(), a[:8, 0].copy())
            return edges[name]

        for shape, names in by_shape.items():
            for other in by_shape.get(shape[::-1], []) if shape[0] < shape[1] else []:
                for name in names:
                    e, f = edge(name), edge(other)
                    if e is not None and f is not None and np.array_equal(e[0], f[1]) and \
                            np.array_equal(e[1], f[0]) and (self._array(name) == self._array(other).T).all():
                        self.sources[other] = frozenset([name])
                        break

    def add_inferred(self, graph):
        for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
            tt = vi.type.tensor_type
            if not vi.type.HasField("tensor_type") or vi.name in self.initializers:
                continue
            if tt.elem_type:
                self.types.setdefault(vi.name, tt.elem_type)
            dims = tt.shape.dim
            if tt.HasField("shape") and all(d.HasField("dim_value") and d.dim_value >= 0 for d in dims):
                self.shapes.setdefault(vi.name, tuple(d.dim_value for d in dims))

    def shape(self, name):
        return self.shapes.get(name)

    def itemsize(self, name):
        return _ITEMSIZE.get(self.types.get(name, 1), 4)

    def numel(self, name):
        shape = self.shapes.get(name)
        n = 1
        for d in shape or ():
            n *= d
        return n if shape is not None else 0

    def nbytes(self, name):
        return float(self.numel(name) * self.itemsize(name))

    def is_constant(self, name):
        return name in self.sources

    def value(self, name):
        """The numpy value of a constant, or None when it is unknown (not evaluated, or data kept on disk)."""
        if name not in self.values and name in self.initializers:
            self.values[name] = self._array(name) if self.numel(name) <= _EVAL_LIMIT else None
        return self.values.get(name)

    def set_constant(self, name, value, sources):
        self.values[name], self.sources[name] = value, frozenset(sources)
        if value is not None:
            self.shapes[name] = tuple(value.shape)
            if name not in self.types:
                self.types[name] = self.onnx.mapping.NP_TYPE_TO_TENSOR_TYPE.get(value.dtype, 1)


def _unsized(nodes, t):
    """The outputs of `nodes` whose size is unknown, after the importer's own inference where ONNX's has none."""
    for n in nodes:
        if n.outputs and n.outputs[0] and t.shape(n.outputs[0]) is None:
            shape = costs.output_shape(n, t)
            if shape is not None:
                t.shapes[n.outputs[0]] = shape
    return [o for n in nodes for o in n.outputs if o and t.shape(o) is None]


def _infer(onnx, skeleton, t, nodes=None):
    """Adds the sizes shape inference finds to `t`; given nodes (those left after folding, and the folded ones
    whose values are unknown), on those alone, with the folded values as initializers and the sizes known so far."""
    m = skeleton
    if nodes is not None:
        m = onnx.ModelProto()
        m.CopyFrom(skeleton)
        del m.graph.node[:]
        m.graph.node.extend(n.proto for n in nodes)
        m.graph.initializer.extend(onnx.numpy_helper.from_array(v, name) for name, v in t.values.items()
                                   if name not in t.initializers and v is not None)
        declared = {vi.name for vi in m.graph.value_info} | {vi.name for vi in m.graph.output}
        m.graph.value_info.extend(onnx.helper.make_tensor_value_info(o, t.types.get(o, 1), t.shape(o))
                                  for n in nodes for o in n.outputs
                                  if o and o not in declared and t.shape(o) is not None)
    try:
        inferred = onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:  # noqa: BLE001 - a model inference rejects still imports where sizes are known
        t.inference_error = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        inferred = m
    t.add_inferred(inferred.graph)


def _constant_value(node):
    import numpy as np

    for key, value in node.attrs.items():
        if key == "value":
            return value
        if key in ("value_float", "value_int"):
            return np.array(value, dtype=np.float32 if key == "value_float" else np.int64)
        if key in ("value_floats", "value_ints"):
            return np.array(value, dtype=np.float32 if key == "value_floats" else np.int64)
    return None


def _fold(onnx, nodes, t):
    """Marks the nodes computable before the run as constants of the import (values where numpy evaluates them);
    returns the nodes left, which become ops, and the number folded."""
    import numpy as np

    done, folded = [], 0
    for node in nodes:
        data = [i for pos, i in enumerate(node.inputs) if i and pos not in costs.META_INPUTS.get(node.op_type, ())]
        if node.op_type == "Constant":
            value = [_constant_value(node)]
            sources = node.outputs[:1]
        elif node.op_type in ("Shape", "Size") and t.shape(node.inputs[0]) is not None:
            shape = t.shape(node.inputs[0])
            start, end = node.attrs.get("start", 0), node.attrs.get("end", len(shape))
            value = [np.array(shape[start:end] if node.op_type == "Shape" else t.numel(node.inputs[0]), np.int64)]
            sources = []  # a size, not data: no parameters
        elif node.op_type not in _NO_FOLD and node.inputs and all(t.is_constant(i) for i in node.inputs if i):
            values = [t.value(i) if i else None for i in node.inputs]
            known = all(v is not None for i, v in zip(node.inputs, values) if i)
            small = sum(t.numel(i) for i in node.inputs if i) <= _EVAL_LIMIT
            value = (costs.evaluate(node, values) if known and small else None) or []
            sources = set().union(*(t.sources[i] for i in data)) if data else set()
        else:
            done.append(node)
            continue
        folded += 1
        if not value or value[0] is None:
            t.unevaluated.add(id(node))
        for k, out in enumerate(node.outputs):
            if out:
                t.set_constant(out, value[k] if k < len(value) else None, sources)
    return done, folded


# --- fusing an exporter's decompositions --------------------------------------------------------

def _fuse(nodes, t, graph_outputs):
    """Replaces each decomposed LayerNorm by one LayerNormalization node and each MatMul whose only reader adds a
    constant bias by one Gemm node; returns the nodes and {fused type: count}."""
    readers = {}
    for n in nodes:
        for i in n.inputs:
            readers.setdefault(i, []).append(n)

    def only_reader(name, op_type, position=None):
        """The one node reading `name`, when it is an op_type (reading it at `position`) and name is internal."""
        rs = readers.get(name, [])
        if len(rs) != 1 or rs[0].op_type != op_type or name in graph_outputs:
            return None
        return rs[0] if position is None or rs[0].inputs[position] == name else None

    def other_constant(node, name):
        others = [i for i in node.inputs if i != name]
        return others[0] if len(others) == 1 and t.is_constant(others[0]) else None

    replaced, counts = {}, Counter()
    for n in nodes:
        if n.op_type == "ReduceMean" and id(n) not in replaced:
            group = _layer_norm_group(n, readers, only_reader, other_constant, graph_outputs)
            if group:
                scope = n.name.rsplit("/", 1)[0] + "/" if "/" in n.name else n.name + "_"
                weights = [other_constant(g, prev.outputs[0]) for prev, g in zip(group[6:], group[7:])]
                fused = _Node(scope + "LayerNormalization", "LayerNormalization",
                              [n.inputs[0]] + [w for w in weights if w], group[-1].outputs, {"axis": -1})
                counts["LayerNormalization"] += 1
                replaced.update({id(g): None for g in group})
                replaced[id(n)] = fused
        elif n.op_type == "MatMul" and id(n) not in replaced and t.is_constant(n.inputs[1]):
            add = only_reader(n.outputs[0], "Add")
            bias = add and other_constant(add, n.outputs[0])
            out = t.shape(n.outputs[0])
            if bias and out and t.shape(bias) in ((out[-1],), (1,) * (len(out) - 1) + (out[-1],)):
                replaced[id(add)] = None
                replaced[id(n)] = _Node(n.name, "MatMul", n.inputs[:2] + [bias], add.outputs, n.attrs, "Gemm")
                counts["Gemm"] += 1
    return [replaced.get(id(n), n) for n in nodes if replaced.get(id(n), n) is not None], dict(counts)


def _layer_norm_group(mean, readers, only_reader, other_constant, graph_outputs):
    """The nodes of x -> ReduceMean -> Sub -> Pow -> ReduceMean -> Add(eps) -> Sqrt -> Div (-> Mul(gamma)
    -> Add(beta)) starting at `mean`, as torch exports layer_norm below opset 17, or None."""
    x = mean.inputs[0]
    sub = only_reader(mean.outputs[0], "Sub", 1)
    if not sub or sub.inputs[0] != x or sub.outputs[0] in graph_outputs:
        return None
    users = readers.get(sub.outputs[0], [])
    pow_ = next((u for u in users if u.op_type == "Pow"), None)
    if len(users) != 2 or not pow_ or not other_constant(pow_, sub.outputs[0]):
        return None
    var = only_reader(pow_.outputs[0], "ReduceMean")
    eps = var and only_reader(var.outputs[0], "Add")
    sqrt = eps and other_constant(eps, var.outputs[0]) and only_reader(eps.outputs[0], "Sqrt")
    div = sqrt and only_reader(sqrt.outputs[0], "Div", 1)
    if not div or div.inputs[0] != sub.outputs[0] or div not in users:
        return None
    group = [mean, sub, pow_, var, eps, sqrt, div]
    for op_type in ("Mul", "Add"):  # the affine scale and shift, when there are
        nxt = only_reader(group[-1].outputs[0], op_type)
        if not nxt or not other_constant(nxt, group[-1].outputs[0]):
            break
        group.append(nxt)
    return group


# --- building the graph -------------------------------------------------------------------------

class _Builder:
    """The placelab.graph document being built: ops, edges, which op produces each tensor, parameters held."""

    def __init__(self, t, read_tensors):
        self.t, self.read_tensors = t, read_tensors
        self.ops, self.edges, self.producer, self.names, self.owned = [], [], {}, set(), set()
        self.layer = None

    def add(self, name, type_name, out_bytes, inputs=(), flops=0.0, params=0.0, read=None, weights=0.0,
            view=False, gemm=None):
        """Adds an op reading `inputs` ((op index, bytes) pairs) and returns its index. bytes_read is `read`,
        else the inputs' bytes plus `weights`; a view reads and writes nothing."""
        name = name.lstrip("/") or type_name
        unique, k = name, 0
        while unique in self.names:  # onnx names are unique per node; expansions and fusions may repeat one
            k += 1
            unique = f"{name}_{k}"
        self.names.add(unique)
        op = {"name": unique, "type": type_name, "flops": float(flops), "output_bytes": float(out_bytes)}
        merged = {}
        for src, nbytes in inputs:
            merged[src] = merged.get(src, 0.0) + nbytes
        if not view:
            op["bytes_read"] = float(read if read is not None else sum(merged.values()) + weights)
            op["bytes_written"] = float(out_bytes)
        if params:
            op["param_bytes"] = float(params)
        if gemm is not None and all(d >= 1 for d in gemm) and flops > 0:
            op["gemm"] = [int(d) for d in gemm]
        if self.layer is not None:
            op["layer"] = self.layer
        index = len(self.ops)
        for src, nbytes in merged.items():  # reading one tensor twice moves it once
            self.edges.append({"src": src, "dst": index, "bytes": min(nbytes, self.ops[src]["output_bytes"])})
        self.ops.append(op)
        return index

    def producers(self, name):
        """[(op index, bytes)] of the op producing tensor `name` (none for a constant)."""
        return [(self.producer[name], self.t.nbytes(name))] if name in self.producer else []

    def claim_params(self, name):
        """Bytes of the initializers and Constant tensors behind constant `name` that no op holds yet; from now
        on the caller's op holds them."""
        new = [s for s in self.t.sources.get(name, ()) if s not in self.owned]
        self.owned.update(new)
        return sum(self.t.nbytes(s) for s in new)

    def used(self, name):
        return name in self.read_tensors


def _layer_of(name, layers):
    """Block index of a node from its scope, as torch exports it ('/layer1/layer1.0/conv1/Conv' -> layer1)."""
    parts = name.strip("/").split("/")
    if not name.startswith("/") or len(parts) < 2:
        return None
    return layers.setdefault(parts[0], len(layers))


def _add_node(b, node, t, unsupported, unshaped):
    op = node.op_type
    meta = costs.META_INPUTS.get(op, ())
    reads, weights, params = [], 0.0, 0.0
    for name in dict.fromkeys(node.inputs):  # a tensor read twice is read once
        if not name or node.inputs.index(name) in meta:
            continue
        if name in b.producer:
            reads += b.producers(name)
        elif t.is_constant(name):
            weights += t.nbytes(name)
            params += b.claim_params(name)
    data = [i for pos, i in enumerate(node.inputs) if i and pos not in meta]
    missing = [x for x in list(node.outputs) + data if x and t.shape(x) is None]
    unshaped.extend(o for o in node.outputs if o and t.shape(o) is None)
    if not costs.known(op):
        unsupported[op] += 1
    flops = costs.flops(node, t) if costs.known(op) and not missing else 0.0
    out_bytes = sum(t.nbytes(o) for o in node.outputs if o)
    read = None
    if op == "Gather" and t.is_constant(node.inputs[0]):
        read = out_bytes + sum(n for _, n in reads)  # an embedding lookup reads the rows it returns
    gemm = costs.gemm_dims(node, t) if not missing else None
    index = b.add(node.name or op, node.type_name, out_bytes, reads, flops, params, read, weights,
                  view=op in costs.VIEWS, gemm=gemm)
    for o in node.outputs:
        if o:
            b.producer[o] = index


def onnx_to_dict(model, name=None, input_shapes=None, caller="from_onnx"):
    """The placelab.graph document (a dict) of an ONNX model (a path or a ModelProto) and an info dict; warns
    (UnsupportedOnnxOpWarning) about ops without a FLOP formula or an inferred size. Needs no compiled module.
    Messages start with `caller`."""
    onnx = _onnx(caller)
    proto, origin, default_name = _load(onnx, model, caller)
    opset = _check(proto, origin)
    skeleton, shapes = _fix_inputs(onnx, proto, input_shapes, origin)
    t = _Tensors(onnx, proto)
    _infer(onnx, skeleton, t)
    every = [_Node(n.name or f"{n.op_type}_{k}", n.op_type, list(n.input), list(n.output), _attrs(onnx, n),
                   proto=n) for k, n in enumerate(proto.graph.node)]
    nodes, folded = _fold(onnx, every, t)
    lost = _unsized(nodes, t)
    while lost:  # sizes inference could not follow: again, with the folded values and the sizes found since
        keep = {id(n) for n in nodes} | t.unevaluated
        _infer(onnx, skeleton, t, [n for n in every if id(n) in keep])
        nodes, more = _fold(onnx, nodes, t)
        folded += more
        still = _unsized(nodes, t)
        lost = still if len(still) < len(lost) or more else []
    graph_outputs = {o.name for o in proto.graph.output}
    nodes, fused = _fuse(nodes, t, graph_outputs)

    read_tensors = graph_outputs | {i for n in nodes for i in n.inputs}
    b = _Builder(t, read_tensors)
    for inp, shape in shapes.items():
        b.producer[inp] = b.add(inp, "Input", t.nbytes(inp), view=True)
    unsupported, unshaped, layers = Counter(), [], {}
    for node in nodes:
        b.layer = _layer_of(node.name, layers)
        if node.op_type in costs.RECURRENT:
            b.producer.update(costs.expand_recurrent(node, t, b))
        else:
            _add_node(b, node, t, unsupported, unshaped)
    if not b.ops:
        raise ValueError(f"{origin}: the model computes nothing from inputs (every node folds to a constant)")

    problems = []
    if unsupported:
        problems.append("no FLOP formula for " + ", ".join(f"{k} x{v}" for k, v in sorted(unsupported.items())))
    if unshaped:
        shown = ", ".join(unshaped[:5]) + (f" and {len(unshaped) - 5} more" if len(unshaped) > 5 else "")
        why = f" (it failed: {t.inference_error})" if t.inference_error else ""
        problems.append(f"shape inference{why} gave no size for {len(unshaped)} tensors ({shown}), counted as "
                        f"0 bytes")
    if problems:
        warnings.warn(f"{origin}: {'; '.join(problems)}; those ops got a bytes-only cost",
                      UnsupportedOnnxOpWarning, stacklevel=3)
    doc = {"format": "placelab.graph", "version": 1, "name": name or default_name, "ops": b.ops, "edges": b.edges}
    info = {"unsupported": dict(unsupported), "op_types": dict(Counter(op["type"] for op in b.ops)),
            "constants_folded": folded, "fused": fused, "unknown_sizes": unshaped, "opset": opset,
            "inputs": shapes}
    return doc, info


def import_onnx(model, training=False, name=None, input_shapes=None):
    """Like from_onnx, and also returns an info dict: unsupported ops by type and count, op counts by type, the
    number of nodes folded into constants, fused decompositions, tensors without an inferred size, the opset and
    the inputs' shapes."""
    from . import _core

    doc, info = onnx_to_dict(model, name=name, input_shapes=input_shapes)
    graph = _core.graph_from_dict(doc, f"from_onnx({doc['name']})")
    if training:
        graph = _core.expand_training(graph)
    return graph, info


def from_onnx(model, training=False, name=None, input_shapes=None):
    """A placelab Graph of an ONNX model (a file path or an onnx.ModelProto), with FLOPs, bytes and parameter
    sizes per op; training=True expands it into one training step (forward, backward, update). Inputs with
    symbolic sizes need input_shapes={input name: [sizes]}. Ops without a FLOP formula raise an
    UnsupportedOnnxOpWarning naming them and keep a bytes-only cost."""
    graph, _ = import_onnx(model, training=training, name=name, input_shapes=input_shapes)
    return graph


def _parse_shape(text, caller):
    name, sep, dims = text.rpartition("=")
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        shape = None
    if not sep or not name or not shape:
        raise ValueError(f"{caller}: --input-shape {text!r}: expected NAME=D,D,... such as input=1,3,224,224")
    return name, shape


def main(argv=None):
    """python3 onnx_import.py MODEL --out GRAPH.json [--name N] [--input-shape NAME=D,D,...]: one line
    `error: ...` on stderr and exit status 1 on bad input; warnings as `warning: ...` lines."""
    import argparse

    parser = argparse.ArgumentParser(description="Writes the placelab.graph JSON of an ONNX model.")
    parser.add_argument("model")
    parser.add_argument("--out", required=True)
    parser.add_argument("--name")
    parser.add_argument("--input-shape", action="append", default=[], metavar="NAME=D,D,...")
    parser.add_argument("--caller", default="onnx_import", help="how messages name the program")
    args = parser.parse_args(argv)
    try:
        shapes = dict(_parse_shape(s, args.caller) for s in args.input_shape)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            doc, _ = onnx_to_dict(args.model, name=args.name, input_shapes=shapes, caller=args.caller)
        for w in caught:
            print(f"warning: {w.message}", file=sys.stderr)
        with open(args.out, "w") as f:
            json.dump(doc, f)
    except (ValueError, ImportError) as e:
        print(f"error: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {args.caller}: {e}".replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
