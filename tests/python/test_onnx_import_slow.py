# placelab.from_onnx on larger torchvision exports (a minute in all: label slow, run apart as the ctest
# python_onnx_slow): each imports with no operator left without a formula, no tensor without a size, and the
# FLOPs of its torch import within 1% (parameter bytes within 1% too: the file may hold a little more, such as
# Swin's relative position biases gathered ahead of time into initializers).
import io
import warnings

import pytest

onnx = pytest.importorskip("onnx")
torch = pytest.importorskip("torch")
torchvision = pytest.importorskip("torchvision")

import placelab as pl  # noqa: E402


@pytest.mark.parametrize("name", ["vit_b_16", "swin_t", "convnext_tiny", "efficientnet_b0", "inception_v3",
                                  "densenet121"])
def test_a_torchvision_export_imports_as_its_module_does(name):
    torch.manual_seed(0)
    extra = {"init_weights": True} if name == "inception_v3" else {}  # its default would warn
    m = getattr(torchvision.models, name)(weights=None, **extra).eval()
    with torch.no_grad():  # distinct values, as a trained model has: the exporter stores equal tensors once
        for t in list(m.parameters()) + list(m.buffers()):
            if t.is_floating_point():
                t.uniform_(0.5, 1.5)
    size = 299 if name == "inception_v3" else 224
    x = torch.randn(1, 3, size, size)
    f = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, x, f, training=torch.onnx.TrainingMode.PRESERVE)
    o, info = pl.import_onnx(onnx.load_from_string(f.getvalue()))
    assert info["unsupported"] == {} and info["unknown_sizes"] == []
    g = pl.from_torch(m, x)
    assert o.flops.sum() == pytest.approx(g.flops.sum(), rel=0.01)
    assert o.param_bytes.sum() == pytest.approx(g.param_bytes.sum(), rel=0.01)
