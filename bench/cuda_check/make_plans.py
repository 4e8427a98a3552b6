"""Writes the hand-made replay plans the GPU checks run: host<->GPU ping-pongs (one per size), chains of
empty host ops (the CUDA backend's cost per host function) and of empty, compute and streaming GPU ops."""
import json, sys, os

out = sys.argv[1]
os.makedirs(out, exist_ok=True)

def plan(name, devices, ops, transfers):
    return {"format": "placelab.replay", "version": 1, "graph": name, "cluster": "hand-made",
            "predicted_step_s": 0, "devices": devices, "ops": ops, "transfers": transfers}

def op(name, device, kernel="none", flops=0, bytes=0, after_ops=(), after_transfers=()):
    return {"name": name, "type": kernel, "device": device, "kernel": kernel, "flops": flops, "bytes": bytes,
            "after_ops": list(after_ops), "after_transfers": list(after_transfers), "start_s": 0, "end_s": 0}

HOPS = 200
for size in [0, 4e3, 6.4e4, 1e6, 1.6e7]:
    devices = [{"name": "cpu0", "kind": "cpu", "ops": []}, {"name": "gpu0", "kind": "gpu", "ops": []}]
    ops, transfers = [], []
    for i in range(HOPS + 1):
        ops.append(op(f"hop{i}", i % 2, after_transfers=[i - 1] if i else []))
        if i:
            transfers.append({"producer": i - 1, "src": (i - 1) % 2, "dst": i % 2, "bytes": size, "start_s": 0, "end_s": 0})
        devices[i % 2]["ops"].append(i)
    with open(f"{out}/pingpong_{int(size)}.json", "w") as f:
        json.dump(plan(f"pingpong-{int(size)}", devices, ops, transfers), f)

def chain(kind, n, kernel="none", bytes=0, flops=0):
    ops = [op(f"op{i}", 0, kernel=kernel, bytes=bytes, flops=flops, after_ops=[i - 1] if i else []) for i in range(n)]
    return plan(f"chain-{kind}-{n}", [{"name": f"{kind}0", "kind": kind, "ops": list(range(n))}], ops, [])

for n in [10, 30, 60, 100, 200]:  # host functions: where does enqueuing behind the gate block?
    with open(f"{out}/chain_cpu_{n}.json", "w") as f:
        json.dump(chain("cpu", n), f)
for n in [200, 225, 300, 400, 1000, 3000]:  # kernels: 4 commands per op; 900 commands per stream is the gate limit
    with open(f"{out}/chain_gpu_{n}.json", "w") as f:
        json.dump(chain("gpu", n), f)
with open(f"{out}/memchain_gpu.json", "w") as f:  # 50 streaming ops of 64 MB (8 Mi floats through a 4 Mi ring)
    json.dump(chain("gpu", 50, kernel="memory", bytes=6.4e7), f)
# Compute chains (cal_check.py): 1e7 FLOP ops (~1220 warps each: the checksum's atomics once dominated
# them) and 1e9 FLOP ops (the FMA rate).
with open(f"{out}/compute7_gpu.json", "w") as f:
    json.dump(chain("gpu", 200, kernel="compute", flops=1e7), f)
with open(f"{out}/compute9_gpu.json", "w") as f:
    json.dump(chain("gpu", 50, kernel="compute", flops=1e9), f)
