#!/usr/bin/python3
"""The reference a user cares about: the real PyTorch training step of each fidelity graph's model.

For every model below, the zoo graph (`placelab graph --model M ... --training`) and a PyTorch module of
the same architecture and batch: torchvision's ResNet-50, Inception-v3 (without its auxiliary head, as
the zoo's) and ViT, and plain-PyTorch BERT and GPT-2 written to the zoo's shapes (separate q, k, v
projections and a pooler for BERT; GPT-2's fused qkv projection, pre-norm blocks, GELU MLP and an LM
head tied to the token embedding). One training step is zero_grad, forward, loss, backward and an Adam
step (the zoo's training expansion models Adam); it is timed with CUDA events on a GPU (the wall clock
on a CPU), the median of --steps after --warmup. With --bin and --cluster, the graph's training
expansion is also replayed with every op on the cluster's first device of the backend's kind (the
single-GPU placement), which gives the replay's measured step and the simulator's prediction beside
PyTorch's.

    python3 bench/cuda_check/torch_step.py --device cuda --bin .devbundle/bin/placelab --cluster cluster.json \\
        --out torch_step.json
    /usr/bin/python3 bench/cuda_check/torch_step.py --device cpu --tiny --models gpt,resnet50 \\
        --bin build/release/cli/placelab --cluster cpu-1 --backend cpu      # seconds: the smoke test

--gpu-math tf32 (the default, as the replay's) lets PyTorch's products and convolutions use TF32 tensor
cores; fp32 keeps them to FP32. cuDNN picks its algorithms by heuristics (no benchmark mode), as the
replay's libraries do.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

# Zoo parameters: the run on a GPU (full) and the smoke test (tiny). Batch as the zoo names it.
MODELS = {
    "resnet50": {"full": {"batch": 32, "image_size": 224, "classes": 1000},
                 "tiny": {"batch": 2, "image_size": 32, "classes": 10}},
    "inception_v3": {"full": {"batch": 32, "image_size": 299, "classes": 1000},
                     "tiny": {"batch": 2, "image_size": 75, "classes": 10}},
    "vit": {"full": {"batch": 32, "image_size": 224, "patch": 16, "layers": 12, "hidden": 768, "heads": 12,
                     "ffn": 3072, "classes": 1000},
            "tiny": {"batch": 2, "image_size": 32, "patch": 16, "layers": 1, "hidden": 32, "heads": 2, "ffn": 64,
                     "classes": 10}},
    "bert": {"full": {"batch": 32, "seq_len": 128, "layers": 12, "hidden": 768, "heads": 12, "vocab": 30522},
             "tiny": {"batch": 2, "seq_len": 16, "layers": 1, "hidden": 32, "heads": 2, "vocab": 100}},
    "gpt": {"full": {"batch": 8, "seq_len": 512, "layers": 12, "hidden": 768, "heads": 12, "vocab": 50257},
            "tiny": {"batch": 2, "seq_len": 16, "layers": 1, "hidden": 32, "heads": 2, "vocab": 100}},
}


def zoo_spec(name, params):
    """The graph argument every placelab verb takes: NAME:key=value,...,training=1."""
    return name + ":" + ",".join(f"{k}={v}" for k, v in params.items()) + ",training=1"


def build_model(name, p, torch):
    """(module, inputs, target, loss(output, target)): the PyTorch model of zoo model `name` at params `p`."""
    nn = torch.nn
    batch = p["batch"]
    if name in ("resnet50", "inception_v3", "vit"):
        import torchvision
        if name == "resnet50":
            model = torchvision.models.resnet50(num_classes=p["classes"])
        elif name == "inception_v3":
            model = torchvision.models.inception_v3(num_classes=p["classes"], aux_logits=False, init_weights=False)
        else:
            model = torchvision.models.VisionTransformer(p["image_size"], p["patch"], p["layers"], p["heads"],
                                                         p["hidden"], p["ffn"], num_classes=p["classes"])
        images = torch.randn(batch, 3, p["image_size"], p["image_size"])
        labels = torch.randint(0, p["classes"], (batch,))
        return model, (images,), labels, nn.functional.cross_entropy
    tokens = torch.randint(0, p["vocab"], (batch, p["seq_len"]))
    if name == "bert":  # the zoo's BERT ends at the pooler: a loss of its output
        return Bert(p, nn), (tokens,), torch.zeros(batch, p["hidden"]), nn.functional.mse_loss
    next_tokens = tokens.roll(-1, dims=1).flatten()
    return Gpt(p, nn), (tokens,), next_tokens, lambda logits, t: nn.functional.cross_entropy(logits.flatten(0, 1), t)


def Bert(p, nn):
    """The zoo's BERT encoder: word, token-type and position embeddings, post-norm layers with separate q, k
    and v projections and a GELU feed-forward of 4 x hidden, and the pooler on the first token."""
    import torch
    h, heads = p["hidden"], p["heads"]

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.q, self.k, self.v, self.o = (nn.Linear(h, h) for _ in range(4))
            self.norm1, self.norm2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.fc, self.proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x, mask):
            b, t, _ = x.shape
            split = lambda y: y.view(b, t, heads, h // heads).transpose(1, 2)  # noqa: E731 - B, N, T, D
            q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
            probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h // heads) + mask, dim=-1)
            context = (probs @ v).transpose(1, 2).reshape(b, t, h)
            x = self.norm1(x + self.o(context))
            return self.norm2(x + self.proj(nn.functional.gelu(self.fc(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.words, self.types = nn.Embedding(p["vocab"], h), nn.Embedding(2, h)
            self.positions = nn.Embedding(512, h)
            self.norm = nn.LayerNorm(h)
            self.layers = nn.ModuleList(Layer() for _ in range(p["layers"]))
            self.pooler = nn.Linear(h, h)

        def forward(self, ids):
            positions = torch.arange(ids.shape[1], device=ids.device)
            x = self.norm(self.words(ids) + self.types(torch.zeros_like(ids)) + self.positions(positions))
            mask = torch.zeros(ids.shape[0], 1, 1, ids.shape[1], device=ids.device)
            for layer in self.layers:
                x = layer(x, mask)
            return torch.tanh(self.pooler(x[:, 0]))

    return Model()


def Gpt(p, nn):
    """The zoo's GPT-2: token and learned position embeddings, pre-norm blocks (fused qkv projection, causal
    attention, GELU MLP of 4 x hidden), a final norm and the LM head tied to the token embedding."""
    import torch
    h, heads, t = p["hidden"], p["heads"], p["seq_len"]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm1, self.norm2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.out = nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.fc, self.proj = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x, mask):
            b = x.shape[0]
            q, k, v = (y.view(b, t, heads, h // heads).transpose(1, 2) for y in self.qkv(self.norm1(x)).split(h, dim=2))
            probs = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(h // heads) + mask, dim=-1)
            x = x + self.out((probs @ v).transpose(1, 2).reshape(b, t, h))
            return x + self.proj(nn.functional.gelu(self.fc(self.norm2(x))))

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(p["vocab"], h), nn.Embedding(t, h)
            self.blocks = nn.ModuleList(Block() for _ in range(p["layers"]))
            self.norm = nn.LayerNorm(h)

        def forward(self, ids):
            mask = torch.full((t, t), float("-inf"), device=ids.device).triu(1)
            x = self.tokens(ids) + self.positions(torch.arange(t, device=ids.device))
            for block in self.blocks:
                x = block(x, mask)
            return self.norm(x) @ self.tokens.weight.t()  # tied to the token embedding

    return Model()


def time_steps(name, params, device, warmup, steps, torch):
    """Seconds of each measured training step of model `name` on `device` (and its parameter count)."""
    torch.manual_seed(0)
    model, inputs, target, loss_of = build_model(name, params, torch)
    model = model.to(device).train()
    inputs, target = [x.to(device) for x in inputs], target.to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_of(model(*inputs), target).backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    times = []
    if device == "cuda":
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(steps)]
        for start, end in events:
            start.record()
            step()
            end.record()
        torch.cuda.synchronize()
        times = [1e-3 * start.elapsed_time(end) for start, end in events]
    else:
        for _ in range(steps):
            t0 = time.perf_counter()
            step()
            times.append(time.perf_counter() - t0)
    return times, sum(x.numel() for x in model.parameters())


def placelab(bin_path, *args, timeout=600):
    proc = subprocess.run([bin_path, *args], capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"placelab {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def first_device(bin_path, cluster, kind):
    """Index of the cluster's first device of `kind` (a cluster file or a preset name)."""
    source = ["--file", cluster] if os.path.exists(cluster) else ["--preset", cluster]
    devices = json.loads(placelab(bin_path, "cluster", *source, "--json"))["devices"]
    for i, d in enumerate(devices):
        if d["kind"] == kind:
            return i
    raise ValueError(f"cluster {cluster} has no device of kind {kind!r} (its kinds: "
                     f"{sorted({d['kind'] for d in devices})}); give a cluster from placelab calibrate")


def replay_single_device(args, name, params, folder):
    """`placelab replay` of the model's training graph with every op on the backend's first device."""
    graph = os.path.join(folder, f"{name}.json")
    placelab(args.bin, "graph", "--model", name, *[x for k, v in params.items() for x in (f"--{k}", str(v))],
             "--training", "--out", graph)
    with open(graph) as f:
        graph_ops = json.load(f)["ops"]
    ops = len(graph_ops)
    # The forward ops' resident bytes are the weights (4-byte floats; the update ops hold Adam's state).
    weights = sum(op.get("param_bytes", 0) for op in graph_ops if op.get("phase", "forward") == "forward") / 4
    device = first_device(args.bin, args.cluster, "gpu" if args.backend == "cuda" else "cpu")
    placement = os.path.join(folder, f"{name}-single.json")
    with open(placement, "w") as f:
        json.dump({"format": "placelab.placement", "version": 1, "device_of": [device] * ops}, f)
    extra = ["--gpu-math", args.gpu_math] if args.backend == "cuda" else []
    doc = json.loads(placelab(args.bin, "replay", "--graph", graph, "--cluster", args.cluster, "--placement", placement,
                              "--backend", args.backend, "--repeats", str(args.replay_repeats), "--warmup", "2",
                              "--json", *extra))
    return {"graph_ops": ops, "graph_params": weights, "replay_s": doc["measured_step_s"], "predicted_s": doc["predicted_step_s"],
            "replay_runs_s": doc["step_times_s"], "gpu_versions": doc.get("gpu_versions", "")}


def environment(torch, device):
    env = {"torch": torch.__version__, "device": device}
    if device == "cuda":
        env.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   cudnn=torch.backends.cudnn.version(), tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                   tf32_cudnn=torch.backends.cudnn.allow_tf32)
    return env


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {', '.join(MODELS)}")
    ap.add_argument("--tiny", action="store_true", help="the smoke test's small shapes")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--gpu-math", default="tf32", choices=["tf32", "fp32"])
    ap.add_argument("--bin", help="placelab CLI: also replay each graph on one device")
    ap.add_argument("--cluster", help="with --bin: a calibrated cluster (placelab calibrate) or a preset")
    ap.add_argument("--backend", default=None, help="replay backend (default: cuda with --device cuda, else cpu)")
    ap.add_argument("--replay-repeats", type=int, default=5)
    ap.add_argument("--out", help="write the rows and the environment as JSON")
    args = ap.parse_args(argv)
    args.backend = args.backend or ("cuda" if args.device == "cuda" else "cpu")
    names = [m for m in args.models.split(",") if m]
    unknown = sorted(set(names) - set(MODELS))
    if unknown:
        ap.error(f"--models: unknown {', '.join(unknown)} (known: {', '.join(MODELS)})")
    if bool(args.bin) != bool(args.cluster):
        ap.error("--bin and --cluster go together (the replay needs both)")
    import torch
    if args.device == "cuda":
        if not torch.cuda.is_available():
            ap.error("--device cuda: PyTorch sees no GPU (use --device cpu)")
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = args.gpu_math == "tf32"
        torch.backends.cudnn.benchmark = False
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for name in names:
            params = MODELS[name]["tiny" if args.tiny else "full"]
            times, n_params = time_steps(name, params, args.device, args.warmup, args.steps, torch)
            row = {"graph": name, "zoo": zoo_spec(name, params), "params": n_params,
                   "torch_s": statistics.median(times), "torch_steps_s": times}
            if args.bin:
                row.update(replay_single_device(args, name, params, folder))
            rows.append(row)
            print(json.dumps({k: v for k, v in row.items() if not k.endswith("steps_s") and k != "replay_runs_s"}),
                  file=sys.stderr, flush=True)
    report = {"environment": environment(torch, args.device), "gpu_math": args.gpu_math, "warmup": args.warmup,
              "steps": args.steps, "rows": rows}
    lines = ["| graph | parameters | PyTorch step | replay (one device) | predicted | predicted / PyTorch - 1 | "
             "replay / PyTorch - 1 |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        cells = [r["graph"], f"{r['params'] / 1e6:.1f} M", f"{1e3 * r['torch_s']:.2f} ms"]
        if "replay_s" in r:
            cells += [f"{1e3 * r['replay_s']:.2f} ms", f"{1e3 * r['predicted_s']:.2f} ms",
                      f"{100 * (r['predicted_s'] / r['torch_s'] - 1):+.1f}%", f"{100 * (r['replay_s'] / r['torch_s'] - 1):+.1f}%"]
        else:
            cells += ["-"] * 4
        lines.append("| " + " | ".join(cells) + " |")
    report["table"] = "\n".join(lines)
    print(report["table"])
    if args.out:
        with open(args.out, "w") as f:
            json.dump(report, f, indent=1)
    return report


if __name__ == "__main__":
    main()
