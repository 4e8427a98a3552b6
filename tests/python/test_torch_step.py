"""bench/cuda_check/torch_step.py on the CPU at tiny shapes, so that the GPU session's PyTorch reference cannot
rot: its models are the zoo graphs' architectures (the same parameter counts), their training steps run and
are timed, and the single-device replay and prediction come out beside them."""
import importlib.util
import json
import os
import subprocess
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("PLACELAB_BIN", "placelab-binary-not-given"))
needs_cli = pytest.mark.skipif(not BIN.exists(), reason=f"placelab binary not found at {BIN} (set PLACELAB_BIN)")


def torch_step():
    spec = importlib.util.spec_from_file_location("torch_step", ROOT / "bench" / "cuda_check" / "torch_step.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def graph_weights(name, params):
    """The zoo graph's parameters (its param_bytes in 4-byte floats) at `params`."""
    args = [x for k, v in params.items() for x in (f"--{k}", str(v))]
    out = subprocess.run([str(BIN), "graph", "--model", name, *args, "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)["param_bytes"] / 4


@needs_cli
def test_the_steps_run_and_replay_beside_pytorch(tmp_path):
    ts = torch_step()
    out = tmp_path / "steps.json"
    report = ts.main(["--device", "cpu", "--tiny", "--models", "vit,bert,gpt", "--warmup", "1", "--steps", "2",
                      "--bin", str(BIN), "--cluster", "cpu-1", "--backend", "cpu", "--replay-repeats", "2",
                      "--out", str(out)])
    rows = {r["graph"]: r for r in report["rows"]}
    assert list(rows) == ["vit", "bert", "gpt"]
    for name, r in rows.items():
        assert r["params"] == r["graph_params"], name  # the same architecture as the zoo graph
        assert len(r["torch_steps_s"]) == 2 and min(r["torch_steps_s"]) > 0
        assert r["replay_s"] > 0 and r["predicted_s"] > 0
        assert r["zoo"].startswith(name + ":") and r["zoo"].endswith(",training=1")
    assert json.loads(out.read_text())["rows"] == report["rows"]
    assert report["environment"]["device"] == "cpu"
    assert report["table"].count("\n") == 4  # header, rule and a row per graph


@needs_cli
@pytest.mark.parametrize("name", ["resnet50", "inception_v3"])
def test_the_torchvision_models_are_the_zoo_graphs(name):
    # The zoo counts batch norm's running statistics as resident too: 0.2% more at full size.
    ts = torch_step()
    for size in ("tiny", "full"):
        params = ts.MODELS[name][size]
        model = ts.build_model(name, params, torch)[0]
        weights = sum(p.numel() for p in model.parameters())
        assert graph_weights(name, params) == pytest.approx(weights, rel=0.005), size


def test_bad_arguments_are_refused():
    ts = torch_step()
    with pytest.raises(SystemExit):
        ts.main(["--device", "cpu", "--models", "resnet51"])
    with pytest.raises(SystemExit):
        ts.main(["--device", "cpu", "--bin", "placelab"])  # no --cluster
