"""The pre-training suite and the held-out set (policy/learned/pretrained/suite.json): disjoint, held-out means held
out, and bench/pretrain_gdp.py resumes a run exactly."""
import json
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))
import pretrain_gdp  # noqa: E402

# Of torchvision's models only these may be trained on; every other one is kept for held-out checks.
TORCHVISION_TRAINABLE = {"resnet18", "vgg11", "mobilenet_v2", "alexnet"}


@pytest.fixture(scope="module")
def suite():
    return pretrain_gdp.read_suite()


def family(spec):
    """The model a graph spec builds: 'torchvision:NAME' or the zoo model's name."""
    parts = spec.split(":")
    return ":".join(parts[:2]) if parts[0] == "torchvision" else parts[0]


def cluster_family(preset):
    return preset.rsplit("-", 1)[0]


def test_train_and_held_out_share_no_graph_model_or_cluster_family(suite):
    train, held = suite["train"], suite["held_out"]
    assert set(train["graphs"]).isdisjoint(held["graphs"])
    assert {family(g) for g in train["graphs"]}.isdisjoint(family(g) for g in held["graphs"])
    assert {cluster_family(c) for c in train["clusters"]}.isdisjoint(cluster_family(c) for c in held["clusters"])
    for split in (train, held):
        assert len(set(split["graphs"])) == len(split["graphs"]) and len(set(split["clusters"])) == len(split["clusters"])


def test_only_the_four_allowed_torchvision_models_are_trained_on(suite):
    trained = {family(g).split(":")[1] for g in suite["train"]["graphs"] if g.startswith("torchvision:")}
    held = {family(g).split(":")[1] for g in suite["held_out"]["graphs"] if g.startswith("torchvision:")}
    assert trained and trained <= TORCHVISION_TRAINABLE
    assert held and held.isdisjoint(TORCHVISION_TRAINABLE)


def test_every_spec_names_a_model_and_a_preset(suite):
    import placelab
    zoo = {m["name"] for m in placelab.models()}
    families = {p["family"] for p in placelab.preset_families()}
    for split in ("train", "held_out"):
        for g in suite[split]["graphs"]:
            name = family(g)
            if name.startswith("torchvision:"):
                torchvision = pytest.importorskip("torchvision")
                assert hasattr(torchvision.models, name.split(":")[1]), g
            else:
                assert name in zoo, g
        for c in suite[split]["clusters"]:
            assert cluster_family(c) in families, c
            placelab.make_preset(c)


def test_pretraining_resumes_exactly(tmp_path):
    straight, halves = tmp_path / "straight", tmp_path / "halves"
    assert pretrain_gdp.main(["--quick", "--steps", "4", "--checkpoint", str(straight)]) == 0
    assert pretrain_gdp.main(["--quick", "--steps", "2", "--checkpoint", str(halves)]) == 0
    assert pretrain_gdp.main(["--quick", "--steps", "4", "--checkpoint", str(halves)]) == 0  # resumes at step 2
    a, b = (json.loads((d / "gdp.json").read_text()) for d in (straight, halves))
    for doc in (a, b):
        doc["trainer"].pop("wall_s")
        doc["trainer"].pop("made_by")  # the command, which names the folder
    assert a["step"] == 4 and a == b
    assert "optimizer" not in a["learner"] and "best" not in a["learner"]
    assert a["options"]["warm_steps"] == 0  # fine-tuning starts with RL


def test_pretraining_goes_on_from_an_exported_policy(tmp_path):
    first, more = tmp_path / "first", tmp_path / "more"
    assert pretrain_gdp.main(["--quick", "--steps", "2", "--checkpoint", str(first)]) == 0
    assert pretrain_gdp.main(["--quick", "--steps", "2", "--checkpoint", str(more), "--init",
                              str(first / "gdp.json")]) == 0
    a, b = (json.loads((d / "gdp.json").read_text()) for d in (first, more))
    assert b["step"] == 2  # the new run's own steps
    assert b["trainer"]["continued_from"]["made_by"] == a["trainer"]["made_by"]
    assert b["trainer"]["continued_from"]["simulations"] == a["trainer"]["simulations"]
    assert b["learner"]["params"] != a["learner"]["params"]
    # Resumed, it goes on from its own checkpoint (the policy it started from is recorded once).
    assert pretrain_gdp.main(["--quick", "--steps", "3", "--checkpoint", str(more), "--init",
                              str(first / "gdp.json")]) == 0
    c = json.loads((more / "gdp.json").read_text())
    assert c["step"] == 3 and c["trainer"]["continued_from"] == b["trainer"]["continued_from"]
