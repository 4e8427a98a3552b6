"""Import a PyTorch module as a placelab Graph.

Two methods:

- "record" (the default): the module runs once on the example inputs and the torch functions, Tensor methods and
  module calls of that run become the graph (_record.py). Whatever runs imports: Python loops are unrolled,
  shapes are concrete, tuples unpacked, tensors built from an input's shape are ordinary values. Recurrent modules
  (nn.LSTM, nn.GRU, nn.RNN and their cells) become per-layer, per-step cell ops and nn.MultiheadAttention its
  projections, score products, softmax and weighted sum (_expand.py); other modules without children are one op
  each; keep_whole names more modules to keep as one op.
- "fx": a concrete torch.fx trace (_fx.py), the importer before this one: the same ops for code symbolic tracing
  can follow (leaf modules, nn.MultiheadAttention and recurrent modules whole), and an error for the rest.

Costs per op (costs.py, shared with any other importer): FLOPs count a multiply-add as 2; bytes_read = input
tensors + parameters read, bytes_written = output_bytes = the tensors produced; param_bytes = the parameters and
buffers the op holds, each tensor by its first user only (tied weights, modules called twice). Views cost
nothing and move nothing but still carry their tensor. Ops without a FLOP formula are named in an
UnsupportedOpWarning and info["unsupported"] and keep a bytes-only cost: they are never dropped.
"""

from __future__ import annotations

import inspect
import warnings
from collections import Counter

from .. import _core
from . import costs  # noqa: F401 - the cost table, importable as placelab.torch_import.costs

__all__ = ["from_torch", "import_torch", "UnsupportedOpWarning"]

METHODS = ("record", "fx")


class UnsupportedOpWarning(UserWarning):
    """Some ops of an imported module have no FLOP formula; they got a bytes-only cost."""


def _keep_list(module, keep_whole):
    """keep_whole as a tuple of module paths, type names and types; a name matching no module is an error."""
    import torch

    if keep_whole is None:
        return ()
    if isinstance(keep_whole, (str, type)):
        keep_whole = (keep_whole,)
    keep = tuple(keep_whole)
    paths = {p for p, _ in module.named_modules()}
    types = {type(m).__name__ for m in module.modules()}
    for k in keep:
        if isinstance(k, type) and issubclass(k, torch.nn.Module):
            continue
        if not isinstance(k, str) or (k not in paths and k not in types):
            raise ValueError(f"from_torch: keep_whole entry {k!r} names no submodule of {type(module).__name__} "
                             f"(give module paths such as 'encoder.layers.0', type names or nn.Module classes)")
    return keep


def import_torch(module, example_inputs, training=False, name=None, method="record", keep_whole=None):
    """Like from_torch, and also returns an info dict: unsupported ops by name and count, op counts by type, the
    number of constants skipped (calls or nodes that yield no tensor) and the method used."""
    import torch

    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"from_torch: module must be a torch.nn.Module, got {type(module).__name__}")
    if method not in METHODS:
        raise ValueError(f"from_torch: method must be one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(example_inputs, torch.Tensor):
        example_inputs = (example_inputs,)
    example_inputs = tuple(example_inputs)
    if not example_inputs:
        raise ValueError("from_torch: example_inputs is empty; pass the tensors forward() takes")
    params = list(inspect.signature(module.forward).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(example_inputs) > len(positional) and not any(p.kind == p.VAR_POSITIONAL for p in params):
        raise ValueError(f"from_torch: {len(example_inputs)} example inputs, but {type(module).__name__}.forward "
                         f"takes {len(positional)} positional arguments")
    input_names = [p.name for p in positional[:len(example_inputs)]]
    input_names += [f"input{i}" for i in range(len(input_names), len(example_inputs))]
    keep = _keep_list(module, keep_whole)
    if keep and method == "fx":
        raise ValueError("from_torch: keep_whole needs method='record'")

    # The run is real: in train mode it would update BatchNorm statistics and draw from torch's generator
    # (dropout). The user's module and generator are left as they were.
    buffers = [(b, b.clone()) for b in module.buffers()]
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            if method == "fx":
                from ._fx import trace

                concrete = {p.name: p.default for p in params[len(example_inputs):]
                            if p.default is not inspect.Parameter.empty}
                builder, skipped = trace(module, example_inputs, input_names, concrete)
            else:
                from ._record import record

                builder, skipped = record(module, example_inputs, input_names, keep)
    finally:
        with torch.no_grad():
            for buffer, saved in buffers:
                buffer.copy_(saved)

    doc = builder.document(name or type(module).__name__)
    graph = _core.graph_from_dict(doc, f"from_torch({type(module).__name__})")
    unsupported = builder.unsupported
    if unsupported:
        listed = ", ".join(f"{k} x{v}" for k, v in sorted(unsupported.items()))
        warnings.warn(f"from_torch: no FLOP formula for {listed}; they got a bytes-only cost",
                      UnsupportedOpWarning, stacklevel=3)
    if training:
        graph = _core.expand_training(graph)
    info = {"unsupported": dict(unsupported), "op_types": dict(Counter(op["type"] for op in doc["ops"])),
            "constants_skipped": skipped, "method": method}
    return graph, info


def from_torch(module, example_inputs, training=False, name=None, method="record", keep_whole=None):
    """A placelab Graph of `module` run on `example_inputs` (a tensor or a tuple of them), with FLOPs, bytes and
    parameter sizes per op; training=True expands it into one training step (forward, backward, update).

    method="record" (default) records one real run, so any module that runs imports; method="fx" traces with
    torch.fx. keep_whole: module paths ('encoder.layers.0'), type names ('LSTM') or nn.Module classes to keep as
    one op each, FLOPs the sum of what ran inside. Ops without a FLOP formula raise an UnsupportedOpWarning naming
    them and keep a bytes-only cost. A module that cannot be imported raises a ValueError naming it and the way
    out (keep it whole, or export the model to ONNX)."""
    graph, _ = import_torch(module, example_inputs, training=training, name=name, method=method,
                            keep_whole=keep_whole)
    return graph
