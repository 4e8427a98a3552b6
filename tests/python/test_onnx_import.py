# placelab.from_onnx: torchvision exports against their torch import, recurrent nodes expanded per step with
# hand-computed FLOPs, a small GPT decoder three ways (torch, ONNX, the zoo), constant folding and fusing, the
# unknown-operator warning, symbolic inputs and bad files.
import io
import math
import re
import warnings
from collections import Counter

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

from onnx import TensorProto, helper  # noqa: E402

import placelab as pl  # noqa: E402

nn = torch.nn


def export(module, args, **kwargs):
    """The ModelProto torch.onnx.export writes (its own TracerWarnings and advice silenced)."""
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, f, **kwargs)
    return onnx.load_from_string(f.getvalue())


def randomized(module):
    """`module` with every float parameter and buffer drawn at random: an untrained model's BatchNorm statistics and
    scales are all equal, and the exporter stores equal tensors once, which a trained model never has."""
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            if t.is_floating_point():
                t.uniform_(0.5, 1.5)
    return module


def n_params(module):
    return sum(p.numel() for p in module.parameters())


def edge_names(g):
    names = g.op_names
    return {(names[s], names[d]) for s, d in zip(g.edge_src, g.edge_dst)}


# --- torchvision: the same totals as the torch import --------------------------------------------

@pytest.mark.parametrize("name", ["resnet18", "mobilenet_v2"])
def test_torchvision_exports_match_their_torch_import(name):
    torch.manual_seed(0)
    m = randomized(getattr(torchvision.models, name)(weights=None).eval())
    x = torch.randn(1, 3, 224, 224)
    g = pl.from_torch(m, x)
    # PRESERVE keeps each BatchNorm apart from its convolution, as the module has it (see the next test).
    o, info = pl.import_onnx(export(m, x, training=torch.onnx.TrainingMode.PRESERVE))
    assert info["unsupported"] == {} and info["unknown_sizes"] == []
    assert o.flops.sum() == pytest.approx(g.flops.sum(), rel=0.01)
    assert o.param_bytes.sum() == pytest.approx(g.param_bytes.sum(), rel=0.01)
    assert info["op_types"]["Conv"] == sum(isinstance(mod, nn.Conv2d) for mod in m.modules())
    # The products carry their shape as the torch import's do (depthwise convolutions none), FLOPs included.
    shaped = o.gemm[:, 0] > 0
    assert shaped.sum() == (g.gemm[:, 0] > 0).sum()
    assert np.allclose(2.0 * o.gemm[shaped].prod(axis=1), o.flops[shaped])


def test_an_eval_export_folds_batch_norm_into_the_convolutions():
    torch.manual_seed(0)
    m = randomized(torchvision.models.resnet18(weights=None).eval())
    x = torch.randn(1, 3, 224, 224)
    g = pl.from_torch(m, x)
    o, info = pl.import_onnx(export(m, x))
    assert "BatchNormalization" not in info["op_types"]
    # The exporter's scale and shift live on in the convolutions' biases, which cost no FLOPs: exactly the
    # BatchNorms' 5 FLOPs per element are gone.
    batch_norm = sum(f for t, f in zip(g.op_types, g.flops) if t == "BatchNorm2d")
    assert o.flops.sum() == pytest.approx(g.flops.sum() - batch_norm, rel=1e-9)
    assert o.flops.sum() == pytest.approx(g.flops.sum(), rel=0.01)


def small_cnn():
    torch.manual_seed(0)
    return randomized(nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                    nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 4)).eval())


def test_a_file_and_its_model_proto_import_alike(tmp_path):
    proto = export(small_cnn(), torch.randn(2, 3, 8, 8))
    path = tmp_path / "cnn.onnx"
    onnx.save(proto, str(path))
    from_path = pl.from_onnx(path)
    assert from_path.name == "cnn"
    assert pl.from_onnx(str(path)).to_dict() == from_path.to_dict()
    assert pl.from_onnx(proto, name="cnn").to_dict() == from_path.to_dict()
    # Conv [2, 8, 8, 8] of 3 x 3 x 3 inputs each (the export folds the BatchNorm into it), ReLU on it, the pool,
    # the [2, 8] x [8, 4] product
    assert list(from_path.op_types) == ["Input", "Conv", "Relu", "GlobalAveragePool", "Flatten", "Gemm"]
    assert from_path.flops.sum() == 2 * 1024 * 27 + 1024 + 1024 + 2 * 2 * 4 * 8


def test_training_expands_an_onnx_graph_as_any_other():
    proto = export(small_cnn(), torch.randn(2, 3, 8, 8))
    g = pl.from_onnx(proto)
    t = pl.from_onnx(proto, training=True)
    assert t.to_dict() == pl.expand_training(g).to_dict()
    stats = t.stats()
    assert stats["forward_ops"] == stats["backward_ops"] == g.num_ops and stats["update_ops"] > 0


# --- recurrent nodes, expanded per layer, direction and step -------------------------------------

def lstm_step_flops(b, i, h):
    """One LSTM step (NetBuilder::lstm_cell): [x, h] [B, I + H] times the [I + H, 4H] kernel, 2 B (I + H) 4H;
    adding its two biases, 2 B 4H; three sigmoid gates and the candidate's tanh, 4 FLOPs each on B H;
    c = f c + i j, 3 B H; h = o tanh(c), 4 B H + B H."""
    return 2 * b * (i + h) * 4 * h + 8 * b * h + 4 * 4 * b * h + 3 * b * h + 5 * b * h


def test_lstm_expands_into_steps_with_hand_computed_flops():
    torch.manual_seed(0)
    b, t, i, h = 3, 5, 16, 32
    m = nn.LSTM(i, h, num_layers=2, batch_first=True, bidirectional=True)
    x = torch.randn(b, t, i)
    g, info = pl.import_onnx(export(m, x))
    names = g.op_names
    products = [k for k, n in enumerate(names) if re.search(r"/step\d+/MatMul$", n)]
    assert len(products) == 2 * 2 * t  # layers x directions x steps
    # Layer 2 reads both directions of layer 1: 2H wide.
    assert g.flops.sum() == t * 2 * (lstm_step_flops(b, i, h) + lstm_step_flops(b, 2 * h, h))
    assert sorted({tuple(g.gemm[k]) for k in products}) == [(1, b, 4 * h, i + h), (1, b, 4 * h, 3 * h)]
    # Weights are held once, by one kernel and one bias Variable per layer and direction, which every step reads.
    assert g.param_bytes.sum() == 4 * n_params(m)
    torch_graph = pl.from_torch(m, x)  # unrolled by the torch importer at the same granularity
    assert (g.flops.sum(), g.param_bytes.sum()) == (torch_graph.flops.sum(), torch_graph.param_bytes.sum())
    assert info["op_types"]["Variable"] == 2 * 2 * 2
    kernels = [k for k, n in enumerate(names) if n.endswith("/kernel")]
    assert [int((g.edge_src == k).sum()) for k in kernels] == [t] * 4
    # Forward steps run 0, 1, ...; the reverse direction from the last step to the first.
    edges = edge_names(g)
    assert ("LSTM/fw/step0/hidden/Mul", "LSTM/fw/step1/Concat") in edges
    assert ("LSTM/bw/step4/hidden/Mul", "LSTM/bw/step3/Concat") in edges
    assert ("LSTM/bw/step0/hidden/Mul", "LSTM/bw/step1/Concat") not in edges


@pytest.mark.parametrize("kind", ["GRU", "RNN"])
def test_gru_and_rnn_expand_with_hand_computed_flops(kind):
    torch.manual_seed(0)
    b, t, i, h = 2, 4, 8, 16
    m = getattr(nn, kind)(i, h)
    x = torch.randn(t, b, i)
    g = pl.from_onnx(export(m, x))
    if kind == "GRU":
        # x [B, I] and h [B, H] times their [., 3H] kernels, 6 B H (I + H); two bias adds, 6 B H; z and r: an add and
        # a sigmoid on B 2H, 2 B H + 8 B H; n = tanh(xn + r hn), B H + B H + 4 B H; h = (1 - z) n + z h, 4 B H
        step = 6 * b * h * (i + h) + 26 * b * h
    else:
        step = 2 * b * h * (i + h) + 2 * b * h + 4 * b * h  # [x, h] times the kernel, adding two biases, tanh
    assert g.flops.sum() == t * step == pl.from_torch(m, x).flops.sum()
    assert g.param_bytes.sum() == 4 * n_params(m)
    assert sum(bool(re.search(r"/step\d+/(input/)?MatMul$", n)) for n in g.op_names) == t


# --- a GPT decoder three ways: torch, ONNX and the zoo --------------------------------------------

class Block(nn.Module):
    """Pre-norm decoder block: causal self-attention written with explicit products and a tril mask, a GELU MLP."""

    def __init__(self, width, heads, seq):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.gelu, self.fc_out = nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width)
        self.register_buffer("mask", torch.tril(torch.ones(seq, seq)).bool())

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (y.view(b, t, self.heads, c // self.heads).transpose(1, 2) for y in (q, k, v))
        att = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(c // self.heads)
        att = torch.softmax(torch.where(self.mask, att, float("-inf")), dim=-1)
        y = torch.matmul(att, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.proj(y)
        return x + self.fc_out(self.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and learned position embeddings, pre-norm blocks, a final LayerNorm and an LM head TIED to the token
    embedding (as GPT-2 and the zoo's gpt). It runs at its full context, so the mask and the positions are whole
    buffers: the torch.fx importer could not slice a buffer by a size it traced."""

    def __init__(self, vocab, seq, width, heads, layers):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.register_buffer("pos", torch.arange(seq))
        self.blocks = nn.ModuleList(Block(width, heads, seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, ids):
        x = self.wte(ids) + self.wpe(self.pos)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


SHAPE = {"batch": 2, "seq_len": 64, "layers": 2, "hidden": 128, "heads": 4, "vocab": 512}


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    m = randomized(GPT(SHAPE["vocab"], SHAPE["seq_len"], SHAPE["hidden"], SHAPE["heads"], SHAPE["layers"]).eval())
    ids = torch.randint(0, SHAPE["vocab"], (SHAPE["batch"], SHAPE["seq_len"]))
    return m, ids, export(m, ids)


def test_a_gpt_decoder_imports_alike_through_torch_and_onnx(gpt):
    m, ids, proto = gpt
    g = pl.from_torch(m, ids)
    o, info = pl.import_onnx(proto)
    assert info["unsupported"] == {}
    assert o.flops.sum() == pytest.approx(g.flops.sum(), rel=0.01)
    # Each LayerNorm's decomposition is one op again, each Linear one Gemm (MatMul plus its bias).
    assert info["fused"] == {"LayerNormalization": 2 * SHAPE["layers"] + 1, "Gemm": 4 * SHAPE["layers"]}
    # The head's weight, which the exporter stores a second time transposed, is held once, as the module holds it.
    assert o.param_bytes.sum() == pytest.approx(4 * n_params(m), rel=0.01)
    assert o.param_bytes.sum() == pytest.approx(g.param_bytes.sum(), rel=0.01)


def test_the_zoo_gpt_of_the_same_shape_agrees_with_both(gpt):
    if "gpt" not in {model["name"] for model in pl.models()}:
        pytest.skip("the zoo has no gpt model yet (issue 50, item 3)")
    m, ids, proto = gpt
    zoo = pl.make_model("gpt", SHAPE).flops.sum()
    assert pl.from_torch(m, ids).flops.sum() == pytest.approx(zoo, rel=0.05)
    assert pl.from_onnx(proto).flops.sum() == pytest.approx(zoo, rel=0.05)


def test_shape_computations_fold_away(gpt):
    """With a symbolic batch the exporter computes every reshape's target from Shape nodes at run time; given
    the batch, those fold into constants and the graph is the one of an export at that fixed batch."""
    m, ids, fixed = gpt
    symbolic = export(m, ids, input_names=["ids"], dynamic_axes={"ids": {0: "batch"}})
    assert Counter(n.op_type for n in symbolic.graph.node)["Shape"] > 0
    o, info = pl.import_onnx(symbolic, input_shapes={"ids": list(ids.shape)})
    f, _ = pl.import_onnx(fixed)
    assert Counter(o.op_types) == Counter(f.op_types)
    assert not {"Shape", "Constant", "Unsqueeze", "Cast"} & set(o.op_types)
    assert o.flops.sum() == f.flops.sum() and o.param_bytes.sum() == f.param_bytes.sum()
    assert info["constants_folded"] > len(symbolic.graph.node) / 2


def test_a_decomposed_layer_norm_is_one_op_as_opset_17_writes_it():
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(16, 32), nn.LayerNorm(32)).eval()
    x = torch.randn(4, 16)
    decomposed = export(m, x, opset_version=14)
    assert "ReduceMean" in {n.op_type for n in decomposed.graph.node}
    g = pl.from_onnx(decomposed)
    assert g.to_dict()["ops"][1:] == pl.from_onnx(export(m, x, opset_version=17)).to_dict()["ops"][1:]
    assert list(g.op_types) == ["Input", "Gemm", "LayerNormalization"]
    assert list(g.flops) == [0, 2 * 4 * 16 * 32, 5 * 4 * 32]
    assert g.param_bytes.sum() == 4 * n_params(m)


# --- what the importer does not know -------------------------------------------------------------

def custom_op_model():
    """x -> Relu -> FancyNorm -> FancyNorm -> Det: a custom-domain op twice (its sizes given) and a standard op
    without a FLOP formula."""
    nodes = [helper.make_node("Relu", ["x"], ["a"]),
             helper.make_node("FancyNorm", ["a"], ["b"], domain="com.example"),
             helper.make_node("FancyNorm", ["b"], ["c"], domain="com.example"),
             helper.make_node("Det", ["c"], ["y"])]
    sized = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4, 4]) for n in ("b", "c")]
    graph = helper.make_graph(nodes, "custom", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], value_info=sized)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14), helper.make_opsetid("com.example", 1)])


def test_unknown_operators_keep_a_bytes_only_cost_and_one_warning_lists_them():
    with pytest.warns(pl.UnsupportedOnnxOpWarning, match=r"no FLOP formula for Det x1, FancyNorm x2") as caught:
        g, info = pl.import_onnx(custom_op_model())
    assert len(caught) == 1
    assert info["unsupported"] == {"Det": 1, "FancyNorm": 2}
    d = {op["name"]: op for op in g.to_dict()["ops"]}
    assert list(g.op_types) == ["Input", "Relu", "FancyNorm", "FancyNorm", "Det"]
    assert d["Relu_0"]["flops"] == 32
    for name in ("FancyNorm_1", "FancyNorm_2"):
        assert d[name].get("flops", 0) == 0
        assert d[name]["bytes_read"] == d[name]["bytes_written"] == 4 * 32
    assert d["Det_3"]["bytes_read"] == 4 * 32 and d["Det_3"]["bytes_written"] == 4 * 2


def test_symbolic_input_sizes_need_input_shapes():
    m = small_cnn()
    proto = export(m, torch.randn(1, 3, 8, 8), input_names=["image"], dynamic_axes={"image": {0: "batch"}})
    with pytest.raises(ValueError, match=r"input 'image' has symbolic sizes \['batch', 3, 8, 8\].*input_shapes"):
        pl.from_onnx(proto)
    with pytest.raises(ValueError, match=r"the model's inputs are \['image'\]"):
        pl.from_onnx(proto, input_shapes={"images": [3, 3, 8, 8]})
    one = pl.from_onnx(export(m, torch.randn(1, 3, 8, 8)))
    three = pl.from_onnx(proto, input_shapes={"image": [3, 3, 8, 8]})
    assert three.flops.sum() == 3 * one.flops.sum()


def onnx_bytes():
    return export(small_cnn(), torch.randn(1, 3, 8, 8)).SerializeToString()


@pytest.mark.parametrize("content, problem", [
    (lambda: onnx_bytes()[: len(onnx_bytes()) // 2], "not a readable ONNX model, truncated or another kind"),
    (lambda: b'{"format": "placelab.graph"}', "not a readable ONNX model"),
    (lambda: b"", "the file is empty"),
    (lambda: b"\x08\x07", r"not an ONNX model \(no nodes\)"),  # protobuf of one field: an ir_version, no graph
])
def test_bad_files_get_one_clear_error_naming_them(tmp_path, content, problem):
    path = tmp_path / "model.onnx"
    path.write_bytes(content())
    with pytest.raises(ValueError, match=f"from_onnx: {re.escape(str(path))}: {problem}"):
        pl.from_onnx(path)


def test_missing_paths_folders_and_damaged_graphs_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"nowhere\.onnx: no such file"):
        pl.from_onnx(tmp_path / "nowhere.onnx")
    with pytest.raises(ValueError, match="is a folder, not an ONNX file"):
        pl.from_onnx(tmp_path)
    with pytest.raises(ValueError, match="must be a path or an onnx.ModelProto, got int"):
        pl.from_onnx(42)
    graph = helper.make_graph([helper.make_node("Relu", ["ghost"], ["y"], name="act")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(ValueError, match=r"node act reads 'ghost', which no input, initializer or earlier node"):
        pl.from_onnx(helper.make_model(graph))


def test_einsum_costs_what_torch_import_counts():
    """ONNX 1.12's shape inference gives an Einsum's rank only; the importer finds its sizes, then its FLOPs."""

    class Scores(nn.Module):
        def forward(self, q, k):
            return torch.softmax(torch.einsum("bhqd,bhkd->bhqk", q, k), dim=-1), torch.einsum("...d,...d->...", q, q)

    q, k = torch.randn(2, 4, 8, 16), torch.randn(2, 4, 10, 16)
    g, info = pl.import_onnx(export(Scores(), (q, k)))
    assert info["unknown_sizes"] == []
    flops = {t: f for t, f in zip(g.op_types, g.flops) if t != "Input"}
    assert sorted(g.flops[[t == "Einsum" for t in g.op_types]]) == [2 * 2 * 4 * 8 * 16, 2 * 2 * 4 * 8 * 10 * 16]
    assert flops["Softmax"] == 5 * 2 * 4 * 8 * 10
    assert g.flops.sum() == pl.from_torch(Scores(), (q, k)).flops.sum()
