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
    g, info = placelab.import_torch(m, (src, tgt))
    # 2 inputs; encoder layer = self-attn (MHA leaf, getitem [0], dropout, add, norm) + feed-forward
    # (linear, relu, dropout, linear, dropout, add, norm) = 12; decoder layer = two attention blocks
    # (5 each) + feed-forward (7) = 17; final encoder and decoder norms: 2 + 2*12 + 1 + 2*17 + 1 = 62.
    assert g.num_ops == 62
    assert info["op_types"]["MultiheadAttention"] == 6 and info["op_types"]["LayerNorm"] == 12
    assert info["unsupported"] == {}
    assert info["constants_skipped"] > 0  # the batch-size checks of nn.Transformer.forward
    assert g.param_bytes.sum() == 4 * n_params(m)
    mha = g.find_op("encoder_layers_0_self_attn")
    e, tokens = 32, 10 * 2
    # q/k/v and output projections (4 E^2 per token) + scores and weighted sum (2 * tokens * S * E) + softmax
    expected = 2 * 4 * tokens * e * e + 2 * 2 * tokens * 10 * e + 5 * tokens * 10 * 4
    assert g.flops[mha] == pytest.approx(expected)


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
    with pytest.raises(ValueError, match=r"node _0 \(call_module 0\) failed: mat1 and mat2"):
        placelab.from_torch(torch.nn.Sequential(torch.nn.Linear(3, 3)), torch.randn(2, 5))


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
