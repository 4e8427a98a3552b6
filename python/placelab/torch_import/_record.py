"""Import by recording one real run of the module (the default method).

The module runs once on the example inputs under a torch.overrides.TorchFunctionMode, with nn.Module.__call__
wrapped so that every module call is seen with its arguments, its result and its path from the root. Whatever
the forward does in Python (loops, shape arithmetic, tuples, tensors built from shapes) simply runs: the record
holds the torch functions and Tensor methods that were called, outermost calls only (the mode is off inside a
call), with their real values.

Granularity, as torch.fx's with leaf modules: a module without children (other than the root) is one op (FLOPs
from its formula in costs.py, else the sum over the calls it made); recurrent modules and nn.MultiheadAttention are expanded
(_expand.py); modules named in keep_whole are one op each, their FLOPs the sum of what ran inside; every other
call (functions, Tensor methods, operators) outside those is one op, named after the module it ran in. Calls that
return no tensor (shape arithmetic) are constants of the run, not ops.

Dataflow by tensor identity: each tensor an op returns maps to that op (weakly: ids of dead tensors are never
matched), with the tensor's version counter at that time. An in-place op (add_, x[...] = y, ReLU(inplace=True),
a write through a view) bumps the version shared by a tensor and its views; the writer is recorded under (storage,
version), so a later read of the base or of any view of it depends on the last write. Parameters and buffers read
outside the modules that own them become Parameter ops (held once); tensors of unknown origin become Constant ops.
"""

from __future__ import annotations

import contextlib
import weakref

from . import costs
from ._expand import expand, expandable
from ._graph import GraphBuilder


class ImportFailure(ValueError):
    """A module of the run cannot be imported; the message names it and the way out."""


def _func_name(func):
    name = getattr(func, "__name__", None) or str(func)
    if name == "__get__":  # a Tensor property read, e.g. Tensor.T.__get__
        name = getattr(getattr(func, "__self__", None), "__name__", name)
    return name


def _storage(t):
    try:
        return t.storage().data_ptr()
    except Exception:  # noqa: BLE001 - sparse and other storage-less tensors: their identity stands in
        return ("id", id(t))


def _display(path):
    return path.replace(".", "_")


class _Frame:
    """One module call on the stack. kind: 'open' (its calls become ops), 'whole' (one op, or part of an enclosing
    one: its calls add FLOPs) or 'expand' (ops from _expand)."""

    def __init__(self, module, path, kind, own=None):
        self.module, self.path, self.kind = module, path, kind
        self.flops, self.unsupported, self.reads = 0.0, False, {}
        self.own = own if own is not None else set()


class _Emitter:
    """Writes an expansion's ops into the graph under the module's name (see _expand's docstring)."""

    def __init__(self, rec, frame, versions):
        self.rec, self.versions = rec, versions
        self.prefix = [_display(frame.path) or type(frame.module).__name__.lower()]
        self.layer = rec.layer_of(frame.path)
        self.state = rec.state.setdefault(id(frame.module), {})

    @contextlib.contextmanager
    def scope(self, name):
        self.prefix.append(name)
        try:
            yield
        finally:
            self.prefix.pop()

    def op(self, part, type_name, flops, reads, out_bytes, params=(), gemm=None):
        weight = held = 0.0
        for key, t, share in params:
            n = t.numel() * t.element_size() / share
            weight += n
            held += self.rec.b.hold(key, n)
        return self.rec.b.op("/".join(self.prefix + [part]), type_name, flops, reads, out_bytes, weight, held, gemm,
                             self.layer)

    def src(self, t):
        return self.rec.source(t, self.versions.get(id(t), t._version))

    def output(self, t, made):
        if callable(made):
            self.rec.pending[id(t)] = (weakref.ref(t), made)
        else:
            self.rec.register([t], made)


class _Sum:
    """An emitter that only adds up FLOPs: the cost of an expanded module inside a module kept whole."""

    def __init__(self):
        self.flops, self.state = 0.0, {}

    def op(self, part, type_name, flops, *args, **kwargs):
        self.flops += flops

    def src(self, t):
        return None

    def output(self, t, made):
        pass

    def scope(self, name):
        return contextlib.nullcontext()


class Recorder:
    def __init__(self, root, keep_whole):
        import torch

        self.b = GraphBuilder()
        self.names, self.params = {}, {}
        for path, m in root.named_modules(remove_duplicate=False):
            self.names.setdefault(id(m), path)
            for key, p in list(m._parameters.items()) + list(m._buffers.items()):
                if p is not None:
                    self.params.setdefault(id(p), (p, f"{path}.{key}" if path else key))
        self.keep_names = {k for k in keep_whole if isinstance(k, str)}
        self.keep_types = tuple(k for k in keep_whole if isinstance(k, type))
        self.script = torch.jit.ScriptModule
        self.producer, self.writes, self.pending = {}, {}, {}
        self.layers, self.state = {}, {}
        self.stack = [_Frame(None, "", "open")]
        self.busy, self.failed, self.constants = False, None, 0

    # --- dataflow ---------------------------------------------------------------------------------------------

    def register(self, ts, op, written=()):
        for t in ts:
            self.producer[id(t)] = (weakref.ref(t), op, t._version)
        for t in written:
            self.producer[id(t)] = (weakref.ref(t), op, t._version)
            self.writes[(_storage(t), t._version)] = op

    def lookup(self, t, version):
        """The op whose result `t` is at `version`, or None when no op made it."""
        entry = self.producer.get(id(t))
        if entry is not None and entry[0]() is t:
            if entry[2] == version:
                return entry[1]
            return self.writes.get((_storage(t), version), entry[1])
        made = self.pending.pop(id(t), None)
        if made is not None and made[0]() is t:
            op = made[1]()
            self.register([t], op)
            return op
        return None

    def source(self, t, version):
        """lookup(), or the Parameter op of a parameter or buffer, or a new Constant op."""
        op = self.lookup(t, version)
        if op is None:
            if id(t) in self.params:
                op = self.parameter(t)
            else:
                op = self.b.op("constant", "Constant", 0, [], costs.nbytes(t), traffic=False)
                self.register([t], op)
        return op

    def parameter(self, t):
        path = self.params[id(t)][1]
        size = costs.nbytes(t)
        op = self.b.op(_display(path), "Parameter", 0, [], size, size, self.b.hold(id(t), size),
                       layer=self.layer_of(path))
        self.register([t], op)
        return op

    def reads(self, ins, before):
        return [(self.source(t, v), t.numel() * t.element_size()) for t, v in zip(ins, before)]

    def layer_of(self, path):
        """The index of the top-level module `path` lies in (in order of first use); None at the root."""
        return self.layers.setdefault(path.split(".")[0], len(self.layers)) if path else None

    # --- torch functions --------------------------------------------------------------------------------------

    def function(self, func, args, kwargs, ins, before, out):
        frame = self.stack[-1]
        name = costs.canonical(_func_name(func))
        outs = costs.tensors(out)
        written = [t for t, v in zip(ins, before) if t._version != v]
        if not outs and not written:
            self.constants += frame.kind == "open"
            return
        try:
            flops = costs.function_flops(name, args, kwargs, out)
        except Exception:  # noqa: BLE001 - an odd signature: reported as an op without a formula
            flops = None
        if frame.kind != "open":
            frame.flops += flops or 0.0
            frame.unsupported |= flops is None
            for t, v in zip(ins, before):
                if id(t) not in frame.own:
                    src = self.lookup(t, v) or (self.parameter(t) if id(t) in self.params else None)
                    if src is not None:
                        frame.reads[id(t)] = (src, t.numel() * t.element_size())
            return
        gemm = None
        if flops:
            try:
                gemm = costs.gemm_dims(name, None, args, kwargs, out)
            except Exception:  # noqa: BLE001 - no shape is no worse than today's fx import
                gemm = None
        prefix = _display(frame.path)
        op = self.b.op(f"{prefix}_{name}" if prefix else name, name, flops, self.reads(ins, before),
                       costs.nbytes(outs or written), gemm=gemm, layer=self.layer_of(frame.path),
                       traffic=name not in costs.VIEWS)
        if flops is None:
            self.b.unsupported[name] += 1
        self.register(outs, op, written)

    # --- modules ----------------------------------------------------------------------------------------------

    def kind(self, m, path, parent):
        if parent.kind != "open":
            return "expand" if expandable(m) else "whole"
        if path in self.keep_names or type(m).__name__ in self.keep_names or isinstance(m, self.keep_types):
            return "whole"
        if expandable(m):
            return "expand"
        if parent.module is not None and (isinstance(m, self.script) or next(m.children(), None) is None):
            return "whole"
        return "open"  # the root's own forward is always recorded

    def module_call(self, plain, m, args, kwargs):
        if self.busy:
            return plain(m, *args, **kwargs)
        parent = self.stack[-1]
        path = self.names.get(id(m))
        if path is None:  # a module made during the forward: named after its type, under its caller
            path = ".".join(p for p in (parent.path, type(m).__name__.lower()) if p)
        self.busy = True
        kind = self.kind(m, path, parent)
        own = parent.own if parent.kind != "open" else None
        frame = _Frame(m, path, kind, own)
        if own is None and kind != "open":
            frame.own.update(id(t) for t in list(m.parameters()) + list(m.buffers()))
        ins = costs.tensors((args, kwargs))
        before = [t._version for t in ins]
        self.busy = False
        self.stack.append(frame)
        try:
            out = plain(m, *args, **kwargs)
        except Exception:
            if self.failed is None:
                self.failed = (path, type(m).__name__)
            raise
        finally:
            self.stack.pop()
        self.busy = True
        try:
            self.finish(frame, parent, args, kwargs, ins, before, out)
        except ImportFailure:
            raise
        except Exception as e:  # noqa: BLE001 - our formulas or expansions on an unusual module
            label = path or type(m).__name__
            raise ImportFailure(
                f"from_torch: cannot import module '{label}' ({type(m).__name__}): {_one_line(e)}; keep it whole "
                f"(keep_whole=['{label}']) or export the model to ONNX (torch.onnx.export) and import that") from e
        finally:
            self.busy = False
        return out

    def cost(self, frame, args, kwargs, out):
        """(FLOPs, unsupported) of a module call that becomes one op or a part of one."""
        m = frame.module
        try:
            if expandable(m):
                total = _Sum()
                expand(total, m, args, kwargs, out)
                return total.flops, False
            if next(m.children(), None) is None:
                flops = costs.module_flops(m, list(args), kwargs, out)
                if flops is not None:
                    return flops, False
        except Exception:  # noqa: BLE001 - what ran inside still counts
            pass
        return frame.flops, frame.unsupported

    def finish(self, frame, parent, args, kwargs, ins, before, out):
        m = frame.module
        if parent.kind != "open":  # part of an enclosing op
            flops, unsupported = self.cost(frame, args, kwargs, out)
            parent.flops += flops
            parent.unsupported |= unsupported
            for key, read in frame.reads.items():
                parent.reads.setdefault(key, read)
            return
        if frame.kind == "open":
            return
        if frame.kind == "expand":
            expand(_Emitter(self, frame, {id(t): v for t, v in zip(ins, before)}), m, args, kwargs, out)
            return
        flops, unsupported = self.cost(frame, args, kwargs, out)
        gemm = None
        if not unsupported and flops and next(m.children(), None) is None:
            gemm = costs.gemm_dims(None, m, list(args), kwargs, out)
        outs = costs.tensors(out)
        written = [t for t, v in zip(ins, before) if t._version != v]
        reads = dict(zip(map(id, ins), self.reads(ins, before)))
        reads.update((k, r) for k, r in frame.reads.items() if k not in reads)
        weights = [t for t in {id(t): t for t in list(m.parameters()) + list(m.buffers())}.values()]
        weight_bytes = costs.nbytes(weights)
        held = sum(self.b.hold(id(t), t.numel() * t.element_size()) for t in weights)
        op = self.b.op(_display(frame.path) or type(m).__name__.lower(), type(m).__name__, flops, reads.values(),
                       costs.nbytes(outs or written), weight_bytes, held, gemm, self.layer_of(frame.path))
        if unsupported:
            self.b.unsupported[type(m).__name__] += 1
        self.register(outs, op, written)


def _one_line(e):
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0]}" if text else type(e).__name__


def record(module, example_inputs, input_names, keep_whole=()):
    """Runs `module` once on the example inputs and returns the GraphBuilder of what ran, and the number of calls
    that returned no tensor (constants of the run)."""
    import torch
    from torch.overrides import TorchFunctionMode

    rec = Recorder(module, keep_whole)

    def call(func, args, kwargs, hide=False):
        """Runs func and records it; hide: the call is made with the recording off (no second record of it)."""
        if rec.busy:
            return func(*args, **kwargs)
        ins = costs.tensors((args, kwargs))
        before = [t._version for t in ins]
        rec.busy = hide
        try:
            out = func(*args, **kwargs)
        finally:
            rec.busy = False
        rec.busy = True
        try:
            rec.function(func, args, kwargs, ins, before, out)
        finally:
            rec.busy = False
        return out

    class Mode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            return call(func, args, kwargs or {})

    # Tensor indexing with an integer or a tensor (x[0], table[index]) does not reach a TorchFunctionMode in
    # torch 1.13: __getitem__ is recorded by a wrapper for the time of the run.
    plain_getitem, own_getitem = torch.Tensor.__getitem__, "__getitem__" in vars(torch.Tensor)

    def getitem(t, index):
        return call(plain_getitem, (t, index), {}, hide=True)

    for name, value in zip(input_names, example_inputs):
        for t in costs.tensors(value):
            rec.register([t], rec.b.op(name, "Input", 0, [], costs.nbytes(t), traffic=False))
    plain = torch.nn.Module.__call__

    def module_call(m, *args, **kwargs):
        return rec.module_call(plain, m, args, kwargs)

    torch.nn.Module.__call__, torch.Tensor.__getitem__ = module_call, getitem
    try:
        with Mode():
            module(*example_inputs)
    except ImportFailure:
        raise
    except Exception as e:  # noqa: BLE001 - said in one line, with the module it ran in; the original chained
        failure = e
    else:
        return rec.b, rec.constants
    finally:
        torch.nn.Module.__call__ = plain
        if own_getitem:
            torch.Tensor.__getitem__ = plain_getitem
        else:
            del torch.Tensor.__getitem__
    path, type_name = rec.failed or ("", type(module).__name__)
    where = f"module '{path}' ({type_name})" if path else f"{type_name}.forward"
    try:
        module(*example_inputs)  # does it run without the recording?
    except Exception:  # noqa: BLE001 - it does not: the inputs are wrong
        raise ValueError(f"from_torch: running {type(module).__name__} on the example inputs failed in {where}: "
                         f"{_one_line(failure)}") from failure
    raise ImportFailure(f"from_torch: recording {type(module).__name__} failed in {where}, which runs without "
                        f"placelab: {_one_line(failure)}; keep it whole (keep_whole=['{path or type_name}']) or "
                        f"export the model to ONNX (torch.onnx.export) and import that") from failure
