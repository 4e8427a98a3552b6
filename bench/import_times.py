"""How long bringing a model in takes, three ways: the zoo's generators (C++), PyTorch import (a recorded run,
and torch.fx where it traces) and ONNX (torch.onnx.export, then placelab.from_onnx). Each row is the median of
--repeats runs in one process, with the graph's size beside it; export and import are timed apart, since a user
with an ONNX file pays only the import.

    /usr/bin/python3 bench/import_times.py              # writes bench/results/import_times.md
    /usr/bin/python3 bench/import_times.py --quick      # small models, seconds (the bench_import_times_quick test)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
import warnings

import paperlib
from paperlib import placelab

FULL = {
    "zoo": [("Llama-2-7B training step", "llama", {}, True),
            ("Llama-2-70B training step", "llama", {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8,
                                                    "ffn": 28672}, True),
            ("Mixtral 8x7B training step", "mixtral", {}, True),
            ("GPT-2 small, 8 micro-batches, training step", "gpt", {"micro_batches": 8, "batch": 8}, True),
            ("ViT-B/16", "vit", {}, False)],
    "torch": [("resnet50", 224), ("vit_b_16", 224)],
}
QUICK = {
    "zoo": [("Llama, 2 small layers, training step", "llama",
             {"layers": 2, "hidden": 256, "heads": 4, "ffn": 512, "seq_len": 128}, True)],
    "torch": [("resnet18", 64)],
}


def median_time(fn, repeats: int):
    """(median seconds, last result) of `repeats` calls."""
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def zoo_rows(specs, repeats):
    rows = []
    for label, model, params, training in specs:
        def build():
            g = placelab.make_model(model, params)
            return placelab.expand_training(g) if training else g
        seconds, g = median_time(build, repeats)
        rows.append({"model": label, "route": "zoo" + (" + expand_training" if training else ""),
                     "export": "-", "import": paperlib.fmt_s(seconds), "ops": g.num_ops,
                     "GFLOP": f"{g.flops.sum() / 1e9:.4g}"})
        print(f"import_times: {label}: {seconds:.3f} s, {g.num_ops} ops", file=sys.stderr)
    return rows


def torch_rows(specs, repeats):
    import torch
    import torchvision

    rows = []
    for name, size in specs:
        torch.manual_seed(0)
        module = getattr(torchvision.models, name)(weights=None).eval()
        x = torch.randn(1, 3, size, size)
        for method in ("record", "fx"):
            try:
                seconds, g = median_time(lambda: placelab.from_torch(module, x, method=method), repeats)
            except Exception as e:  # noqa: BLE001 - torch.fx cannot trace every model (the ViTs): say so in the row
                rows.append({"model": name, "route": f"from_torch ({method})", "export": "-",
                             "import": f"fails ({type(e).__name__})", "ops": "-", "GFLOP": "-"})
                continue
            rows.append({"model": name, "route": f"from_torch ({method})", "export": "-",
                         "import": paperlib.fmt_s(seconds), "ops": g.num_ops, "GFLOP": f"{g.flops.sum() / 1e9:.4g}"})
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, f"{name}.onnx")
            export_s, _ = median_time(lambda: torch.onnx.export(module, x, path), repeats)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", placelab.UnsupportedOnnxOpWarning)
                seconds, g = median_time(lambda: placelab.from_onnx(path), repeats)
        rows.append({"model": name, "route": "torch.onnx.export + from_onnx", "export": paperlib.fmt_s(export_s),
                     "import": paperlib.fmt_s(seconds), "ops": g.num_ops, "GFLOP": f"{g.flops.sum() / 1e9:.4g}"})
        print(f"import_times: {name}: onnx export {export_s:.2f} s, import {seconds:.3f} s", file=sys.stderr)
    return rows


def main(argv=None) -> str:
    def extra(parser):
        parser.add_argument("--repeats", type=int, default=3, help="runs per row; the median is reported")
    args = paperlib.parse_args(__doc__.splitlines()[0], argv, extra)
    specs = QUICK if args.quick else FULL
    repeats = 1 if args.quick else args.repeats
    report = paperlib.Report("import_times", "Bringing a model in: zoo, PyTorch and ONNX import times", args)
    report.intro.append(f"Median of {repeats} runs per row in one process (`--repeats`); torchvision models at batch "
                        "1 in eval mode, ONNX exported with torch.onnx.export's defaults (batch norms folded).")
    columns = ["model", "route", "export", "import", "ops", "GFLOP"]
    report.table("Import times", columns, zoo_rows(specs["zoo"], repeats) + torch_rows(specs["torch"], repeats))
    report.notes += [
        "The zoo builds today's largest training steps in milliseconds; a recorded PyTorch run costs about one "
        "forward pass of the model on top of its own bookkeeping; ONNX costs the export (seconds) and then an import "
        "of tens of milliseconds to a second. torch.fx cannot trace the ViTs (it fails inside nn.MultiheadAttention), "
        "which the default recorded import handles. ONNX graphs have fewer ops where the export folds batch norms "
        "into the convolutions; their FLOPs differ from the recorded import's by those batch norms' FLOPs.",
        "", "Times on a shared machine: the load average above says how busy it was; read them as upper bounds."]
    return report.write()


if __name__ == "__main__":
    print(main())
