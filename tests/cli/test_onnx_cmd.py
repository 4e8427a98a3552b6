"""`placelab graph --onnx`: the Python importer run by the CLI, its options, and what a missing interpreter,
importer or onnx package says."""
import json
import os
import stat
import subprocess
import sys

import pytest

from cli_runner import BIN, placelab

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
import numpy as np  # noqa: E402


def mlp(path, batch=4, custom=False):
    """x [batch, 16] -> Gemm (W [16, 32], b [32]) -> Relu -> MatMul (V [32, 8]) -> y; batch None: symbolic."""
    rng = np.random.default_rng(0)
    weights = [numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)
               for name, shape in (("W", (16, 32)), ("b", (32,)), ("V", (32, 8)))]
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["h"], name="fc1"),
             helper.make_node("Relu", ["h"], ["r"], name="act"),
             helper.make_node("MatMul", ["r", "V"], ["y"], name="fc2")]
    if custom:  # an operator the importer has no formula for, between the two products
        nodes[1] = helper.make_node("Swishy", ["h"], ["r"], name="act", domain="com.example")
    rows = batch if batch else "N"
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 16])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [rows, 8])], weights,
                              value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [rows, 32])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14),
                                                    helper.make_opsetid("com.example", 1)])
    onnx.save(model, str(path))
    return str(path)


def stats(*args):
    return json.loads(placelab("graph", *args, "--json").stdout)


def run(*args, env):
    """`placelab graph ARGS` with `env` added to the environment."""
    return subprocess.run([BIN, "graph", *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


# 2 x 4 x 16 x 32 for the Gemm (no bias FLOPs), 4 x 32 for the Relu, 2 x 4 x 32 x 8 for the MatMul
MLP_FLOPS = 2 * 4 * 16 * 32 + 4 * 32 + 2 * 4 * 32 * 8


def test_an_onnx_file_becomes_a_graph(tmp_path):
    s = stats("--onnx", mlp(tmp_path / "mlp.onnx"))
    assert s["name"] == "mlp" and s["ops"] == 4 and s["edges"] == 3  # the input and the three nodes
    assert s["flops"] == MLP_FLOPS
    assert s["param_bytes"] == 4 * (16 * 32 + 32 + 32 * 8)
    people = placelab("graph", "--onnx", str(tmp_path / "mlp.onnx")).stdout
    assert "graph mlp" in people and "FLOPs" in people


def test_training_and_writing_work_as_with_a_file(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    training = stats("--onnx", model, "--training")
    assert training["forward_ops"] == training["backward_ops"] == 4 and training["update_ops"] > 0
    out = tmp_path / "g.json"
    placelab("graph", "--onnx", model, "--out", str(out))
    assert json.loads(out.read_text())["format"] == "placelab.graph"
    assert stats("--file", str(out)) == stats("--onnx", model)


def test_symbolic_inputs_take_their_sizes_from_input_shape(tmp_path):
    model = mlp(tmp_path / "mlp.onnx", batch=None)
    proc = placelab("graph", "--onnx", model, check=False)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1
    assert proc.stderr.startswith("placelab: error: graph --onnx: ") and "--input-shape x=N,16" in proc.stderr
    assert stats("--onnx", model, "--input-shape", "x=8,16")["flops"] == 2 * MLP_FLOPS
    bad = placelab("graph", "--onnx", model, "--input-shape", "x=8x16", check=False)
    assert bad.returncode == 1 and "expected NAME=D,D,..." in bad.stderr


def test_unknown_operators_are_a_warning_not_an_error(tmp_path):
    proc = placelab("graph", "--onnx", mlp(tmp_path / "mlp.onnx", custom=True), "--json")
    assert "placelab: warning: graph --onnx: " in proc.stderr and "no FLOP formula for Swishy x1" in proc.stderr
    assert json.loads(proc.stdout)["flops"] == MLP_FLOPS - 4 * 32


@pytest.mark.parametrize("content", [b"", b"\x00\x01garbage", b"placelab"])
def test_a_bad_file_is_one_line_naming_it(tmp_path, content):
    path = tmp_path / "bad.onnx"
    path.write_bytes(content)
    proc = placelab("graph", "--onnx", str(path), check=False)
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"placelab: error: graph --onnx: {path}: ")


def test_options_that_do_not_go_together(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    both = placelab("graph", "--onnx", model, "--model", "resnet50", check=False)
    assert both.returncode == 1 and "exactly one of --model NAME, --file F or --onnx F" in both.stderr
    alone = placelab("graph", "--model", "resnet50", "--input-shape", "x=1,16", check=False)
    assert alone.returncode == 1 and "--input-shape only applies with --onnx" in alone.stderr
    over = placelab("graph", "--onnx", model, "--out", model, check=False)
    assert over.returncode == 1 and "also an input of this run" in over.stderr


def test_what_is_missing_is_named_with_what_to_install(tmp_path):
    model = mlp(tmp_path / "mlp.onnx")
    no_python = run("--onnx", model, env={"PLACELAB_PYTHON": str(tmp_path / "python9")})
    assert no_python.returncode == 1 and no_python.stderr.count("\n") == 1
    assert "cannot run the Python interpreter" in no_python.stderr and "install python3" in no_python.stderr
    no_package = run("--onnx", model, env={"PLACELAB_PYTHON_DIR": str(tmp_path)})
    assert no_package.returncode == 1 and "set PLACELAB_PYTHON_DIR" in no_package.stderr
    # An interpreter without its site packages: no onnx there.
    bare = tmp_path / "bare-python"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(bare.stat().st_mode | stat.S_IXUSR)
    no_onnx = run("--onnx", model, env={"PLACELAB_PYTHON": str(bare)})
    assert no_onnx.returncode == 1 and no_onnx.stderr.count("\n") == 1
    assert "needs the Python package onnx" in no_onnx.stderr and "install python3-onnx" in no_onnx.stderr
