# bench/fidelity.py's error against copying: a cost the model misses per byte copied shows as a strong
# negative correlation and that cost per byte; errors unrelated to copying do not.
import importlib.util
import math
import random
from pathlib import Path

spec = importlib.util.spec_from_file_location("fidelity", Path(__file__).resolve().parents[2] / "bench" / "fidelity.py")
fidelity = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fidelity)


def rows(missing_s_per_byte, noise, seed=3):
    rng = random.Random(seed)
    out = []
    for i in range(30):
        copied = rng.uniform(0, 2e8)
        predicted = 0.1 + rng.uniform(0, 0.02)
        measured = (predicted + missing_s_per_byte * copied) * (1 + rng.uniform(-noise, noise))
        out.append({"predicted_s": predicted, "measured_s": measured, "bytes_copied": copied, "rounds_s": [measured] * 2})
    return out


def test_a_cost_per_byte_copied_is_found():
    corr, ns_per_byte = fidelity.copy_miss(rows(1e-10, noise=0.01))
    assert corr < -0.9
    assert abs(ns_per_byte - 0.1) < 0.02
    assert fidelity.metrics(rows(1e-10, noise=0.01))["missing_ns_per_byte_copied"] == ns_per_byte


def test_noise_alone_shows_no_copy_cost():
    corr, ns_per_byte = fidelity.copy_miss(rows(0.0, noise=0.05))
    assert abs(corr) < 0.5
    assert abs(ns_per_byte) < 0.02


def test_no_copying_gives_nan():
    same = [dict(r, bytes_copied=0.0) for r in rows(0.0, noise=0.01)]
    assert all(math.isnan(x) for x in fidelity.copy_miss(same))


def test_rounds_spearman_is_the_measurements_own_rank_agreement():
    rng = random.Random(5)
    base = [0.1 + 0.001 * i for i in range(30)]
    same = [{"rounds_s": [b, b * 1.001, b * 0.999]} for b in base]
    assert math.isclose(fidelity.rounds_spearman(same), 1.0)
    shuffled = [{"rounds_s": [b, rng.uniform(0.1, 0.13), rng.uniform(0.1, 0.13)]} for b in base]
    assert abs(fidelity.rounds_spearman(shuffled)) < 0.5
    assert math.isnan(fidelity.rounds_spearman([{"rounds_s": [b]} for b in base]))
