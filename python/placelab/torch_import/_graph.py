"""The graph an importer builds: ops in execution order, dataflow edges, parameters held once."""

from __future__ import annotations

from collections import Counter


class GraphBuilder:
    """Ops and edges of a placelab.graph document being built.

    Parameter bytes are held by the first op that uses a tensor (or a part of one, keyed by (id, part)) and by no
    later one, so a module called twice or a weight tied to another is counted once; every use still reads it.
    Edges from one producer to one consumer merge, their bytes summed over the distinct tensors read."""

    def __init__(self):
        self.ops = []
        self._edges = {}
        self._names = set()
        self._owned = set()
        self.unsupported = Counter()

    def unique(self, base):
        """`base`, or base_1, base_2, ... when taken (torch.fx's scheme)."""
        name, k = base, 0
        while name in self._names:
            k += 1
            name = f"{base}_{k}"
        self._names.add(name)
        return name

    def hold(self, key, nbytes):
        """The bytes of `key` not held by an op yet; from now on they are."""
        if key in self._owned:
            return 0.0
        self._owned.add(key)
        return float(nbytes)

    def op(self, name, type_name, flops, reads=(), out_bytes=0.0, weight_bytes=0.0, param_bytes=0.0, gemm=None,
           layer=None, traffic=True):
        """Appends an op; `reads` lists (producer op or None, bytes) pairs. Returns the op's index.
        traffic=False (views) leaves bytes_read and bytes_written unset: the op moves no data."""
        index = len(self.ops)
        op = {"name": self.unique(name), "type": type_name, "flops": float(flops or 0.0),
              "output_bytes": float(out_bytes)}
        read = 0.0
        for src, nbytes in reads:
            if src is None or src == index:
                continue
            self._edges[(src, index)] = self._edges.get((src, index), 0.0) + float(nbytes)
            read += float(nbytes)
        if traffic:
            op["bytes_read"] = read + float(weight_bytes)
            op["bytes_written"] = float(out_bytes)
        if param_bytes:
            op["param_bytes"] = float(param_bytes)
        if gemm is not None and all(1 <= int(d) < 2**31 for d in gemm):
            op["gemm"] = [int(d) for d in gemm]
        if layer is not None:
            op["layer"] = layer
        self.ops.append(op)
        return index

    def document(self, name):
        edges = [{"src": s, "dst": d, "bytes": b} for (s, d), b in self._edges.items()]
        return {"format": "placelab.graph", "version": 1, "name": name, "ops": self.ops, "edges": edges}
