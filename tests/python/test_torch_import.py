# placelab.from_torch: op counts derived from the architectures, FLOPs against published figures,
# parameter sizes against PyTorch's own count, the unsupported-op fallback and training expansion.
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

import placelab  # noqa: E402


def n_params(module):
    return sum(p.numel() for p in module.parameters())


@pytest.fixture(scope="module")
def resnet50():
    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None).eval()
    return m, placelab.import_torch(m, torch.randn(1, 3, 224, 224))


def test_resnet50_op_count_and_flops(resnet50):
    module, (g, info) = resnet50
    # 1 input + stem (conv, bn, relu, maxpool) + 16 bottlenecks x (3 conv + 3 bn + 3 relu + 1 add)
    # + 4 downsample branches x (conv + bn) + head (avgpool, flatten, fc) = 1 + 4 + 160 + 8 + 3 = 176;
    # the zoo's resnet50, written independently, has the same 176 plus its loss op.
    assert g.num_ops == 176
    assert info["op_types"]["Conv2d"] == 53 and info["op_types"]["add"] == 16
    assert info["unsupported"] == {}
    # Published: 4.1G multiply-adds at 224x224 (He et al. 2016); a multiply-add is 2 FLOPs here.
    assert g.flops.sum() / 2 == pytest.approx(4.1e9, rel=0.03)
    assert g.param_bytes.sum() == 4 * n_params(module) + 4 * sum(b.numel() for b in module.buffers()
                                                                  if b.dtype == torch.float32) \
        + 8 * sum(b.numel() for b in module.buffers() if b.dtype == torch.int64)
    fc = g.find_op("fc")
    assert g.flops[fc] == 2 * 2048 * 1000
    assert g.output_bytes[fc] == 4 * 1000


def test_products_carry_their_shape(resnet50):
    """A convolution is its implicit GEMM [groups, N Ho Wo, Cout / groups, Cin / groups kh kw] (a depthwise one has
    none), a Linear [1, rows, out, in]; the shape's FLOPs are the op's, and ops that multiply no matrices have none."""
    _, (g, _) = resnet50
    dims = g.gemm
    assert dims.shape == (g.num_ops, 4) and dims.dtype == np.int64
    assert list(dims[g.find_op("conv1")]) == [1, 112 * 112, 64, 3 * 7 * 7]
    assert list(dims[g.find_op("layer1_0_conv2")]) == [1, 56 * 56, 64, 64 * 3 * 3]
    assert list(dims[g.find_op("fc")]) == [1, 1, 1000, 2048]
    shaped = dims[:, 0] > 0
    assert shaped.sum() == 53 + 1  # the convolutions and the fc
    assert np.allclose(2.0 * dims[shaped].prod(axis=1), g.flops[shaped])
    assert not dims[g.find_op("relu")].any()
    # Grouped and depthwise convolutions, functions and batched products.
    x = torch.randn(2, 8, 10, 10)

    class Mixed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
            self.w = torch.nn.Parameter(torch.randn(16, 4, 1, 1))

        def forward(self, x):
            y = torch.nn.functional.conv2d(self.dw(x), self.w, groups=2)  # [2, 16, 10, 10]
            a = y.flatten(2)                                            # [2, 16, 100]
            return torch.bmm(a, a.transpose(1, 2))                      # [2, 16, 16]

    m = placelab.from_torch(Mixed(), x)
    by_type = {t: list(d) for t, d in zip(m.op_types, m.gemm) if d[0] > 0}
    assert by_type == {"conv2d": [2, 200, 8, 4], "bmm": [2, 16, 16, 100]}  # the depthwise Conv2d: none
    # A training step's gradients are two products of each forward's shape.
    t = placelab.from_torch(Mixed(), x, training=True)
    grads = {n: list(d) for n, d in zip(t.op_names, t.gemm) if n.endswith("/grad") and d[0] > 0}
    assert grads == {"conv2d/grad": [4, 200, 8, 4], "bmm/grad": [4, 16, 16, 100]}


def test_resnet50_edges_follow_the_dataflow(resnet50):
    _, (g, _) = resnet50
    # Every op but the 16 residual adds has one data input; each add has two; the input op has none:
    # 175 - 16 + 2 * 16 = 191 edges, each carrying its producer's output tensor.
    assert g.num_edges == 191
    assert np.array_equal(g.edge_bytes, g.output_bytes[g.edge_src])
    conv1 = g.find_op("conv1")
    assert g.output_bytes[conv1] == 4 * 64 * 112 * 112


def test_transformer_op_count():
    torch.manual_seed(0)
    m = torch.nn.Transformer(d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2,
                             dim_feedforward=64).eval()
    src, tgt = torch.randn(10, 2, 32), torch.randn(7, 2, 32)
    # torch.fx: 2 inputs; encoder layer = self-attn (MHA leaf, getitem [0], dropout, add, norm) + feed-forward
    # (linear, relu, dropout, linear, dropout, add, norm) = 12; decoder layer = two attention blocks
    # (5 each) + feed-forward (7) = 17; final encoder and decoder norms: 2 + 2*12 + 1 + 2*17 + 1 = 62.
    fx, fx_info = placelab.import_torch(m, (src, tgt), method="fx")
    assert fx.num_ops == 62 and fx_info["op_types"]["MultiheadAttention"] == 6
    # Recorded: each of the 6 attentions is its q, k, v projections, scores, softmax, weighted sum and output
    # projection (7 ops) in place of the leaf and the getitem of its tuple (2): 62 + 6 * 5 = 92.
    g, info = placelab.import_torch(m, (src, tgt))
    assert g.num_ops == 92
    assert "MultiheadAttention" not in info["op_types"] and info["op_types"]["Softmax"] == 6
    assert info["op_types"]["LayerNorm"] == 12
    assert info["unsupported"] == {} and fx_info["unsupported"] == {}
    assert info["constants_skipped"] > 0  # the batch-size checks of nn.Transformer.forward
    assert g.param_bytes.sum() == fx.param_bytes.sum() == 4 * n_params(m)
    assert g.flops.sum() == pytest.approx(fx.flops.sum())
    parts = [i for i, n in enumerate(g.op_names) if n.startswith("encoder_layers_0_self_attn/")]
    assert [g.op_names[i].split("/")[1] for i in parts] == ["q_proj", "k_proj", "v_proj", "scores", "softmax",
                                                          "context", "out_proj"]
    e, tokens, heads = 32, 10 * 2, 4
    # q/k/v and output projections (4 E^2 per token) + scores and weighted sum (2 * tokens * S * E) + softmax
    expected = 2 * 4 * tokens * e * e + 2 * 2 * tokens * 10 * e + 5 * tokens * 10 * heads
    assert g.flops[parts].sum() == pytest.approx(expected)
    assert fx.flops[fx.find_op("encoder_layers_0_self_attn")] == pytest.approx(expected)
    scores = g.find_op("encoder_layers_0_self_attn/scores")
    assert list(g.gemm[scores]) == [2 * heads, 10, 10, e // heads]
    q, k = g.find_op("encoder_layers_0_self_attn/q_proj"), g.find_op("encoder_layers_0_self_attn/k_proj")
    assert sorted(g.predecessors(scores)) == sorted([q, k])


@pytest.mark.parametrize("name, make, size, ops, macs", [
    # Inception-v3 without the auxiliary head: 94 conv + 94 bn + 94 relu (BasicConv2d), 15 concats,
    # 4 max pools of the stem and reductions, 9 avg pools of the blocks, input, avgpool, dropout,
    # flatten, fc = 315, as the zoo's inception_v3.
    ("inception_v3", lambda: torchvision.models.inception_v3(weights=None, aux_logits=False, init_weights=False),
     299, 315, 5.7e9),  # Szegedy et al. 2016: 5.7G multiply-adds
    # VGG-16: input + 13 conv + 15 relu + 5 max pools + avgpool + flatten + 3 linear + 2 dropout = 41.
    ("vgg16", lambda: torchvision.models.vgg16(weights=None), 64, 41, None),
    # MobileNet-v2: 52 conv + 52 bn + 35 relu6 + 10 residual adds + input, pool, flatten, dropout, linear.
    ("mobilenet_v2", lambda: torchvision.models.mobilenet_v2(weights=None), 64, 154, None),
])
def test_torchvision_models_import_fully(name, make, size, ops, macs):
    torch.manual_seed(0)
    m = make().eval()
    g, info = placelab.import_torch(m, torch.randn(1, 3, size, size))
    assert g.num_ops == ops
    assert info["unsupported"] == {}
    assert g.param_bytes.sum() >= 4 * n_params(m)  # plus batch-norm running statistics
    assert (g.flops > 0).sum() > ops // 2
    if macs is not None:
        assert g.flops.sum() / 2 == pytest.approx(macs, rel=0.03)


class Unknown(torch.nn.Module):
    """A leaf module the cost table cannot know."""

    def forward(self, x):
        return x.cumsum(-1)


class WithUnsupported(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.odd = Unknown()

    def forward(self, x):
        return torch.cumprod(self.odd(self.fc(x)), -1)


def test_unsupported_ops_are_reported_and_kept_with_bytes():
    x = torch.randn(4, 8)
    with pytest.warns(placelab.UnsupportedOpWarning, match="Unknown x1.*cumprod x1|cumprod x1.*Unknown x1"):
        g, info = placelab.import_torch(WithUnsupported(), x)
    assert info["unsupported"] == {"Unknown": 1, "cumprod": 1}
    assert g.op_types == ["Input", "Linear", "Unknown", "cumprod"]
    odd = g.find_op("odd")
    assert g.flops[odd] == 0
    assert g.output_bytes[odd] == 4 * 32 and g.bytes_read[odd] == 4 * 32 and g.bytes_written[odd] == 4 * 32
    assert g.num_edges == 3


def test_training_expansion_of_an_import():
    m = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fwd = placelab.from_torch(m, torch.randn(2, 16))
        train = placelab.from_torch(m, torch.randn(2, 16), training=True)
    s = train.stats()
    assert fwd.num_ops == 4
    assert s["forward_ops"] == 4 and s["backward_ops"] == 4 and s["update_ops"] == 2  # two Linear layers hold weights


def test_bad_arguments_raise_value_error():
    with pytest.raises(ValueError, match="torch.nn.Module"):
        placelab.from_torch(lambda x: x, torch.randn(2))
    with pytest.raises(ValueError, match="example_inputs is empty"):
        placelab.from_torch(torch.nn.ReLU(), ())
    with pytest.raises(ValueError, match="positional"):
        placelab.from_torch(torch.nn.ReLU(), (torch.randn(2), torch.randn(2)))
    # The recorded run names the module it failed in (torch.fx named its node).
    with pytest.raises(ValueError, match=r"running Sequential on the example inputs failed in module '0' \(Linear\)"
                                         r": RuntimeError: mat1 and mat2"):
        placelab.from_torch(torch.nn.Sequential(torch.nn.Linear(3, 3)), torch.randn(2, 5))
    with pytest.raises(ValueError, match=r"node _0 \(call_module 0\) failed: mat1 and mat2"):
        placelab.from_torch(torch.nn.Sequential(torch.nn.Linear(3, 3)), torch.randn(2, 5), method="fx")
    with pytest.raises(ValueError, match="method must be one of record, fx"):
        placelab.from_torch(torch.nn.ReLU(), torch.randn(2), method="trace")
    with pytest.raises(ValueError, match="keep_whole entry 'nope' names no submodule of Sequential"):
        placelab.from_torch(torch.nn.Sequential(torch.nn.ReLU()), torch.randn(2), keep_whole=["nope"])


class Looped(torch.nn.Module):
    """One cell applied three times, and an output head tied to the embedding."""

    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.cell = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        h = self.embed(tokens)
        for _ in range(3):
            h = torch.relu(self.cell(h))
        return self.head(h)


def test_reused_and_tied_weights_are_held_once_and_read_at_every_call():
    m = Looped()
    g = placelab.from_torch(m, torch.randint(0, 50, (2, 5)))
    assert g.param_bytes.sum() == 4 * n_params(m)  # parameters() counts the tied weight once too
    cells = [i for i, t in enumerate(g.op_types) if t == "Linear"][:3]
    assert [g.param_bytes[i] for i in cells] == [4 * (16 * 16 + 16), 0, 0]  # the first call holds them
    assert all(g.bytes_read[i] >= 4 * (16 * 16 + 16) for i in cells)  # every call reads them


def test_import_leaves_a_training_module_and_the_generator_as_they_were():
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Dropout(0.5)).train()
    before = {k: v.clone() for k, v in m.state_dict().items()}
    x = torch.randn(2, 3, 8, 8)
    torch.manual_seed(3)
    placelab.from_torch(m, x)
    after_import = torch.rand(1)
    torch.manual_seed(3)
    assert torch.equal(after_import, torch.rand(1))
    for key, value in m.state_dict().items():
        assert torch.equal(value, before[key]), key


# --- recorded runs: code torch.fx cannot trace, recurrent modules, attention, keep_whole -----------------------

def test_record_and_fx_give_the_same_resnet50(resnet50):
    module, (g, info) = resnet50
    fx, _ = placelab.import_torch(module, torch.randn(1, 3, 224, 224), method="fx")
    assert info["method"] == "record"
    assert g.op_types == fx.op_types
    # Modules are named by their path in both; a function is named after the module it ran in (fx: after itself).
    assert [n for n, t in zip(g.op_names, g.op_types) if t[0].isupper()] == \
        [n for n, t in zip(fx.op_names, fx.op_types) if t[0].isupper()]
    add = g.op_types.index("add")
    assert g.op_names[add] == "layer1_0_add"
    # A call has the layer of the top-level module it ran in (torch.fx gave calls none).
    conv = g.find_op("layer1_0_conv1")  # layer1 is the 5th top-level module: conv1, bn1, relu, maxpool, layer1
    assert g.layer[add] == g.layer[conv] == fx.layer[conv] == 4 and fx.layer[add] < 0
    assert np.array_equal(g.flops, fx.flops) and np.array_equal(g.param_bytes, fx.param_bytes)
    assert sorted(zip(g.edge_src, g.edge_dst)) == sorted(zip(fx.edge_src, fx.edge_dst))


def step_ops(g, prefix):
    """{step index: {part: op id}} of the ops named prefix/step<t>/<part>."""
    steps = {}
    for i, name in enumerate(g.op_names):
        if name.startswith(prefix + "/step"):
            step, part = name[len(prefix) + 5:].split("/")
            steps.setdefault(int(step), {})[part] = i
    return steps


def lstm_step_flops(b, inputs, h):
    """One LSTM step, by hand: [x, h] x W (2 b 4h (inputs + h)), two bias adds (2 x 4bh), 3 sigmoids and a tanh
    gate (4 FLOPs each per element: 16bh), c = f c + i g (3bh), tanh(c) (4bh), h = o tanh(c) (bh)."""
    return 2 * b * 4 * h * (inputs + h) + 8 * b * h + 16 * b * h + 3 * b * h + 4 * b * h + b * h


def test_two_layer_lstm_unrolls_into_cell_steps():
    torch.manual_seed(0)
    m = torch.nn.LSTM(256, 512, num_layers=2, batch_first=True).eval()
    b, steps = 2, 4
    g, info = placelab.import_torch(m, torch.randn(b, steps, 256))
    assert info["unsupported"] == {}
    # 2 layers x 4 steps x 12 ops + 2 layers x (kernel, bias) Variables + the input = 101 ops
    assert g.num_ops == 2 * steps * 12 + 4 + 1
    assert info["op_types"]["MatMul"] == 2 * steps and info["op_types"]["Variable"] == 4
    expected = steps * (lstm_step_flops(b, 256, 512) + lstm_step_flops(b, 512, 512))
    assert g.flops.sum() == pytest.approx(expected)
    assert g.param_bytes.sum() == 4 * n_params(m)
    kernel = g.find_op("lstm/layer0/kernel")
    assert g.param_bytes[kernel] == 4 * 4 * 512 * (256 + 512)  # W_ih and W_hh of layer 0, held once
    layer0, layer1 = step_ops(g, "lstm/layer0"), step_ops(g, "lstm/layer1")
    for t in range(steps):
        matmul = layer0[t]["matmul"]
        assert list(g.gemm[matmul]) == [1, b, 4 * 512, 256 + 512]
        assert kernel in g.predecessors(matmul)  # every step reads the shared weights
        preds = set(g.predecessors(layer0[t]["concat"]))
        assert len(preds) == (2 if t > 0 else 1)  # the input, and from step 1 on step t-1's state
        if t > 0:
            assert layer0[t - 1]["hidden"] in preds
        assert layer0[t]["hidden"] in g.predecessors(layer1[t]["concat"])  # layer 1 reads layer 0's output
        if t > 0:
            assert layer0[t - 1]["cell"] in g.predecessors(layer0[t]["cell_forget"])


def test_bidirectional_gru_runs_each_direction_its_way():
    torch.manual_seed(0)
    m = torch.nn.GRU(16, 32, num_layers=2, bidirectional=True).eval()
    steps, b, h = 5, 3, 32
    g, info = placelab.import_torch(m, torch.randn(steps, b, 16))
    assert info["unsupported"] == {}
    assert info["op_types"]["MatMul"] == 2 * steps * 2 * 2  # input and hidden products, 2 layers, 2 directions

    def step(inputs):  # x W_ih + b_ih, h W_hh + b_hh, two gates (add + sigmoid), n = tanh(gx + r gh), h update
        return (2 * b * 3 * h * inputs + 3 * b * h) + (2 * b * 3 * h * h + 3 * b * h) + 2 * 5 * b * h \
            + 6 * b * h + 4 * b * h

    assert g.flops.sum() == pytest.approx(2 * steps * (step(16) + step(2 * h)))
    assert g.param_bytes.sum() == 4 * n_params(m)
    fw, bw = step_ops(g, "gru/layer0"), step_ops(g, "gru/layer0_reverse")
    for t in range(steps - 1):
        assert fw[t]["hidden"] in g.predecessors(fw[t + 1]["hidden_matmul"])
        assert bw[t + 1]["hidden"] in g.predecessors(bw[t]["hidden_matmul"])  # the reverse runs backwards
    # kernel, bias and the state before; the first step of each direction reads no state (zeros)
    assert [len(g.predecessors(fw[t]["hidden_matmul"])) for t in range(steps)] == [2] + [3] * (steps - 1)
    assert [len(g.predecessors(bw[t]["hidden_matmul"])) for t in range(steps)] == [3] * (steps - 1) + [2]
    concat = g.find_op("gru/layer0/step2/concat_directions")
    assert sorted(g.predecessors(concat)) == sorted([fw[2]["hidden"], bw[2]["hidden"]])
    assert concat in g.predecessors(g.find_op("gru/layer1/step2/input_matmul"))


class CellLoop(torch.nn.Module):
    """An LSTMCell stepped in a Python loop from zero states built from the input's shape."""

    def __init__(self):
        super().__init__()
        self.cell = torch.nn.LSTMCell(8, 16)
        self.out = torch.nn.Linear(16, 4)

    def forward(self, x):
        h = torch.zeros(x.shape[0], 16)
        c = torch.zeros(x.shape[0], 16)
        for t in range(x.shape[1]):
            h, c = self.cell(x[:, t], (h, c))
        return self.out(h)


def test_lstm_cell_loop_chains_its_steps():
    m = CellLoop()
    g, info = placelab.import_torch(m, torch.randn(2, 3, 8))
    assert info["unsupported"] == {}
    steps = step_ops(g, "cell")
    assert sorted(steps) == [0, 1, 2]
    assert g.param_bytes.sum() == 4 * n_params(m)
    kernel, bias = g.find_op("cell/kernel"), g.find_op("cell/bias")
    assert g.param_bytes[kernel] == 4 * 4 * 16 * (8 + 16)
    assert [g.op_names[i] for i in g.predecessors(steps[0]["concat"])] == ["getitem", "zeros"]
    for t in (1, 2):
        assert steps[t - 1]["hidden"] in g.predecessors(steps[t]["concat"])
        assert steps[t - 1]["cell"] in g.predecessors(steps[t]["cell_forget"])
        assert kernel in g.predecessors(steps[t]["matmul"]) and bias in g.predecessors(steps[t]["bias_add"])
    assert list(g.predecessors(g.find_op("out"))) == [steps[2]["hidden"]]
    assert g.flops.sum() == pytest.approx(3 * lstm_step_flops(2, 8, 16) + 2 * 2 * 4 * 16)
    with pytest.raises(Exception):  # noqa: PT011 - symbolic tracing cannot build zeros from a traced shape
        placelab.from_torch(m, torch.randn(2, 3, 8), method="fx")


class TinyGPT(torch.nn.Module):
    """A GPT decoder as most people write one: a causal mask from the input's length, tied embeddings."""

    def __init__(self, d=32, heads=4, layers=2, vocab=50):
        super().__init__()
        self.embed, self.pos = torch.nn.Embedding(vocab, d), torch.nn.Embedding(64, d)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "ln1": torch.nn.LayerNorm(d), "attn": torch.nn.MultiheadAttention(d, heads, batch_first=True),
            "ln2": torch.nn.LayerNorm(d), "mlp": torch.nn.Sequential(torch.nn.Linear(d, 4 * d), torch.nn.GELU(),
                                                                      torch.nn.Linear(4 * d, d))})
            for _ in range(layers))
        self.norm = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        t = tokens.shape[1]
        x = self.embed(tokens) + self.pos(torch.arange(t))
        mask = torch.tril(torch.ones(t, t)) == 0
        for block in self.blocks:
            y = block["ln1"](x)
            x = x + block["attn"](y, y, y, attn_mask=mask, need_weights=False)[0]
            x = x + block["mlp"](block["ln2"](x))
        return self.head(self.norm(x))


def test_gpt_with_a_causal_mask_from_the_input_shape():
    torch.manual_seed(0)
    m = TinyGPT().eval()
    b, t, d = 2, 10, 32
    g, info = placelab.import_torch(m, torch.randint(0, 50, (b, t)))
    assert info["unsupported"] == {}
    assert g.param_bytes.sum() == 4 * n_params(m)  # the tied head holds nothing more
    assert g.param_bytes[g.find_op("head")] == 0
    mask = g.find_op("eq")
    assert [g.op_names[i] for i in g.predecessors(mask)] == ["tril"]
    for layer in range(2):
        attn = [i for i, n in enumerate(g.op_names) if n.startswith(f"blocks_{layer}_attn/")]
        assert len(attn) == 7
        softmax = g.find_op(f"blocks_{layer}_attn/softmax")
        assert mask in g.predecessors(softmax)  # the mask is an input of the softmax
        # projections 4 x 2 t d^2 per sequence, scores and weighted sum 2 x 2 t^2 d, softmax 5 + 1 (mask) per score
        expected = b * (4 * 2 * t * d * d + 2 * 2 * t * t * d + (5 + 1) * 4 * t * t)
        assert g.flops[attn].sum() == pytest.approx(expected)
    with pytest.raises(Exception):  # noqa: PT011 - symbolic tracing hands torch.ones a Proxy
        placelab.from_torch(m, torch.randint(0, 50, (b, t)), method="fx")
    # Training expansion works on the recorded graph; the same module and inputs give the same graph.
    train = placelab.from_torch(m, torch.randint(0, 50, (b, t)), training=True)
    s = train.stats()
    assert s["forward_ops"] == g.num_ops and s["backward_ops"] == g.num_ops
    held = int((g.param_bytes > 0).sum())
    assert s["update_ops"] == held
    again = placelab.from_torch(m, torch.randint(0, 50, (b, t)))
    assert again.to_dict() == g.to_dict()


def test_vision_transformer_imports():
    torch.manual_seed(0)
    m = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2,
                                             hidden_dim=16, mlp_dim=32, num_classes=10).eval()
    g, info = placelab.import_torch(m, torch.randn(1, 3, 32, 32))
    assert info["unsupported"] == {}
    assert g.param_bytes.sum() == 4 * n_params(m)
    assert info["op_types"]["Softmax"] == 2 and info["op_types"]["BatchMatMul"] == 4
    # The class token is read where it is expanded and concatenated to the 16 patches.
    token = g.find_op("class_token")
    assert [g.op_types[i] for i in g.successors(token)] == ["expand"]
    scores = g.find_op("encoder_layers_encoder_layer_0_self_attention/scores")
    assert list(g.gemm[scores]) == [2, 17, 17, 8]
    with pytest.raises(Exception):  # noqa: PT011 - torch.fx fails where nn.MultiheadAttention's tuple is unpacked
        placelab.from_torch(m, torch.randn(1, 3, 32, 32), method="fx")


def test_keep_whole_makes_one_op_of_what_ran_inside():
    torch.manual_seed(0)
    m = TinyGPT().eval()
    x = torch.randint(0, 50, (2, 10))
    full = placelab.from_torch(m, x)
    by_path = placelab.from_torch(m, x, keep_whole=["blocks.0.mlp"])
    block = by_path.find_op("blocks_0_mlp")
    inside = [i for i, n in enumerate(full.op_names) if n.startswith("blocks_0_mlp")]
    assert len(inside) == 3
    assert by_path.num_ops == full.num_ops - len(inside) + 1
    assert by_path.flops[block] == pytest.approx(full.flops[inside].sum())
    assert by_path.param_bytes[block] == full.param_bytes[inside].sum()
    assert by_path.flops.sum() == pytest.approx(full.flops.sum())
    by_type = placelab.from_torch(m, x, keep_whole=[torch.nn.MultiheadAttention])
    assert by_type.op_types.count("MultiheadAttention") == 2 and by_type.flops.sum() == pytest.approx(full.flops.sum())
    # A recurrent module kept whole costs what its expansion does.
    rnn = torch.nn.LSTM(8, 16, num_layers=2)
    whole, info = placelab.import_torch(rnn, torch.randn(3, 2, 8), keep_whole=["LSTM"])
    assert info["op_types"] == {"Input": 1, "LSTM": 1} and info["unsupported"] == {}
    assert whole.flops.sum() == pytest.approx(placelab.from_torch(rnn, torch.randn(3, 2, 8)).flops.sum())
    assert whole.param_bytes.sum() == 4 * n_params(rnn)


class InPlace(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.relu = torch.nn.ReLU(inplace=True)

    def forward(self, x):
        y = self.relu(self.conv(x))
        flat = y.view(-1)
        flat.mul_(2)          # writes y through a view
        y[:, 0] = 0           # and through indexing
        return y.sum()


def test_in_place_writes_and_views_order_the_dataflow():
    g, info = placelab.import_torch(InPlace(), torch.randn(1, 3, 6, 6))
    assert info["unsupported"] == {}
    names = g.op_names
    assert names == ["x", "conv", "relu", "view", "mul", "setitem", "sum"]
    pred = {n: sorted(names[i] for i in g.predecessors(g.find_op(n))) for n in names}
    assert pred["relu"] == ["conv"] and pred["view"] == ["relu"] and pred["mul"] == ["view"]
    assert pred["setitem"] == ["mul"]  # y's last writer, through the view
    assert pred["sum"] == ["setitem"]


class Fussy(torch.nn.Module):
    """Refuses to run under a torch function mode (as code with its own dispatch might)."""

    def forward(self, x):
        if torch.overrides.has_torch_function((x,)):
            raise RuntimeError("unexpected dispatch")
        return x * 2


class HoldsFussy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = torch.nn.Sequential(torch.nn.Linear(4, 4), Fussy())

    def forward(self, x):
        return self.inner(x)


def test_a_module_that_cannot_be_recorded_is_named_with_the_way_out():
    with pytest.raises(ValueError, match=r"^from_torch: recording HoldsFussy failed in module 'inner.1' \(Fussy\), "
                                         r"which runs without placelab: RuntimeError: unexpected dispatch; keep it "
                                         r"whole \(keep_whole=\['inner.1'\]\) or export the model to ONNX") as e:
        placelab.from_torch(HoldsFussy(), torch.randn(2, 4))
    assert "\n" not in str(e.value) and isinstance(e.value.__cause__, RuntimeError)


@pytest.mark.parametrize("make, inputs, matmuls", [
    # proj_size: each step adds the projection of h (4 -> its own MatMul); 2 directions x 3 steps x 2 products
    (lambda: torch.nn.LSTM(8, 16, proj_size=4, bidirectional=True), lambda: (torch.randn(3, 2, 8),), 12),
    (lambda: torch.nn.GRUCell(8, 16), lambda: (torch.randn(2, 8),), 2),
    (lambda: torch.nn.RNNCell(8, 16, nonlinearity="relu"), lambda: (torch.randn(8),), 1),
    (lambda: torch.nn.RNN(8, 16, num_layers=2, bias=False), lambda: (torch.randn(3, 2, 8),), 6),
])
def test_recurrent_variants_hold_their_weights_once(make, inputs, matmuls):
    torch.manual_seed(0)
    m = make()
    g, info = placelab.import_torch(m, inputs())
    assert info["unsupported"] == {} and info["op_types"]["MatMul"] == matmuls
    assert g.param_bytes.sum() == 4 * n_params(m)
    assert all(g.op_types[i] == "Variable" for i in np.flatnonzero(g.param_bytes))


class Packed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(8, 16, batch_first=True)

    def forward(self, x, lengths):
        out, h = self.rnn(torch.nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True))
        return h[-1]


def test_packed_sequences_step_with_their_batch_sizes():
    g, info = placelab.import_torch(Packed(), (torch.randn(3, 4, 8), torch.tensor([4, 2, 1])))
    assert info["unsupported"] == {}
    steps = step_ops(g, "rnn/layer0")
    # sequences of lengths 4, 2, 1: 3 rows at step 0, 2 at step 1, then 1
    assert [g.gemm[steps[t]["input_matmul"]][1] for t in range(4)] == [3, 2, 1, 1]
    assert g.find_op("pack_padded_sequence") in g.predecessors(steps[0]["input_matmul"])


class OddLSTM(torch.nn.LSTM):
    """Returns the output alone: the unrolling, which reads (output, (h, c)), cannot follow it."""

    def forward(self, x):
        return super().forward(x)[0]


class HoldsOddLSTM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = OddLSTM(4, 8)
        self.fc = torch.nn.Linear(8, 2)

    def forward(self, x):
        return self.fc(self.rnn(x))


def test_a_module_that_cannot_be_unrolled_can_be_kept_whole():
    m, x = HoldsOddLSTM(), torch.randn(3, 2, 4)
    with pytest.raises(ValueError, match=r"^from_torch: cannot import module 'rnn' \(OddLSTM\): ValueError: too many "
                                         r"values to unpack .*; keep it whole \(keep_whole=\['rnn'\]\) or export "
                                         r"the model to ONNX") as e:
        placelab.from_torch(m, x)
    assert "\n" not in str(e.value) and isinstance(e.value.__cause__, ValueError)
    # Kept whole it imports as one op holding its weights; torch's fused lstm inside has no formula.
    with pytest.warns(placelab.UnsupportedOpWarning, match="OddLSTM x1"):
        g = placelab.from_torch(m, x, keep_whole=["rnn"])
    assert g.op_names == ["x", "rnn", "fc"] and g.param_bytes.sum() == 4 * n_params(m)
