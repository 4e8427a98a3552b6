"""The `placelab graph` verb: output for people and scripts, files, and bad input."""
import json
import subprocess

import pytest

from cli_runner import BIN, placelab


def graph_json(*args):
    return json.loads(placelab("graph", *args, "--json").stdout)


def test_json_has_the_documented_keys():
    stats = graph_json("--model", "resnet50")
    for key in ("ops", "edges", "flops", "param_bytes", "output_bytes", "depth"):
        assert key in stats
    assert stats["ops"] > 100 and stats["edges"] >= stats["ops"] - 1
    # ResNet-50: 25.6M parameters of 4 bytes
    assert abs(stats["param_bytes"] / 4 - 25.6e6) / 25.6e6 < 0.03


def test_stats_are_printed_for_people():
    out = placelab("graph", "--model", "inception_v3", "--stats").stdout
    assert "ops" in out and "FLOPs" in out and "parameters" in out


@pytest.mark.parametrize("model, published", [("gpt", 124e6), ("llama", 6.74e9), ("mixtral", 46.7e9)])
def test_stats_count_todays_models_parameters_as_published(model, published):
    """GPT-2 small, Llama-2-7B and Mixtral 8x7B at the zoo's defaults: within 1% of the published counts, also for
    a training step (whose resident bytes add Adam's state, which is not a parameter)."""
    for extra in ([], ["--training"]):
        stats = graph_json("--model", model, *extra)
        assert abs(stats["parameters"] - published) / published < 0.01, (model, extra, stats["parameters"])
    assert "float32 values" in placelab("graph", "--model", model, "--stats").stdout


def test_model_parameters_and_training_expansion():
    two = graph_json("--model", "rnnlm", "--layers", "2")
    four = graph_json("--model", "rnnlm", "--layers", "4")
    assert four["ops"] > two["ops"]
    training = graph_json("--model", "rnnlm", "--layers", "2", "--training")
    assert training["backward_ops"] == two["ops"]
    assert training["forward_ops"] == two["ops"]
    assert training["update_ops"] > 0


def test_write_then_read_gives_the_same_graph(tmp_path):
    out = tmp_path / "g.json"
    placelab("graph", "--model", "bert", "--layers", "2", "--out", str(out))
    doc = json.loads(out.read_text())
    assert doc["format"] == "placelab.graph" and doc["version"] == 1
    assert graph_json("--file", str(out)) == graph_json("--model", "bert", "--layers", "2")
    again = tmp_path / "again.json"
    placelab("graph", "--file", str(out), "--out", str(again))
    assert again.read_text() == out.read_text()


def test_list_names_every_model():
    out = placelab("graph", "--list").stdout
    for model in ("inception_v3", "resnet50", "bert", "gnmt", "rnnlm", "random_dag"):
        assert model in out


def write(tmp_path, text):
    path = tmp_path / "bad.json"
    path.write_text(text)
    return str(path)


GOOD = {"format": "placelab.graph", "version": 1, "name": "g",
        "ops": [{"name": "a", "flops": 1}, {"name": "b"}], "edges": [{"src": 0, "dst": 1}]}


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["edges"].append({"src": 1, "dst": 0}), "has a cycle"),
    (lambda d: d["edges"].append({"src": 0, "dst": 5}), "edges[1].dst: op index 5 does not exist"),
    (lambda d: d["ops"].append({"name": "a"}), "ops[2].name: duplicate op name \"a\""),
    (lambda d: d["ops"][0].update(flops=-1), "ops[0].flops: is -1, must be >= 0"),
    (lambda d: d["ops"][0].update(flopz=1), "ops[0]: unknown field \"flopz\""),
    (lambda d: d.pop("name"), "missing field \"name\""),
    (lambda d: d.update(format="other"), "format is \"other\""),
    (lambda d: d.update(version=2), "version 2 is not supported (supported: 1)"),
    (lambda d: d.update(ops=[], edges=[]), "has no ops"),
    (lambda d: d.update(ops=[]), "ops: has no ops"),
    # A huge field name: the line keeps the place and the fix, and elides the middle.
    (lambda d: d["ops"][0].update({"x" * 100_000: 1}), "characters ...] xxx"),
    (lambda d: d["ops"][0].update({"x" * 100_000: 1}), "(known fields: name, type"),
])
def test_bad_graph_files_fail_with_one_line(tmp_path, mutate, message):
    doc = json.loads(json.dumps(GOOD))
    mutate(doc)
    proc = placelab("graph", "--file", write(tmp_path, json.dumps(doc)), check=False)
    assert proc.returncode == 1
    assert message in proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("placelab: error: ")
    assert len(proc.stderr) < 2000


@pytest.mark.parametrize("text, message", [
    ('{"format": "placelab.graph", "version": 1, "ops": [{"name": "a", "flops": NaN}]}', "NaN and Infinity"),
    ('{"format": "placelab.graph", "vers', "truncated"),
    ("", "is empty"),
])
def test_unparseable_files(tmp_path, text, message):
    proc = placelab("graph", "--file", write(tmp_path, text), check=False)
    assert proc.returncode == 1 and message in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--file", "/no/such/graph.json"], "/no/such/graph.json: no such file"),
    (["--model", "alexnet"], "unknown model \"alexnet\""),
    (["--model", "resnet50", "--layers", "3"], "layers"),
    (["--model", "rnnlm", "--layers", "-2"], "layers"),
    ([], "give exactly one of --model NAME, --file F or --onnx F"),
    (["--file", "./no/such.graph"], "./no/such.graph: no such file"),
])
def test_bad_arguments(args, message):
    proc = placelab("graph", *args, check=False)
    assert proc.returncode != 0 and message in proc.stderr


@pytest.mark.parametrize("spec, message", [
    ("gnmt:layers=0x3", "expected a decimal number"),
    ("gnmt:layers=nan", "expected a decimal number"),
    ("gnmt:layers=2,layers=3", "layers is given twice"),
    ("gnmt:layers=2,training=-1", "training is -1, expected 0 or 1"),
    ("./missing.graph", "./missing.graph: no such file"),
    ("resnet", "no file \"resnet\" exists either"),
])
def test_bad_graph_specs(spec, message):
    proc = placelab("simulate", "--graph", spec, "--cluster", "v100-nvlink-2", "--random", "1", check=False)
    assert proc.returncode == 1 and message in proc.stderr


def test_lists_as_json():
    models = json.loads(placelab("graph", "--list", "--json").stdout)["models"]
    assert "gnmt" in [m["name"] for m in models]
    presets = json.loads(placelab("cluster", "--list", "--json").stdout)["presets"]
    assert {"family": "v100-nvlink", "sizes": [1, 2, 4, 8]}.items() <= [p for p in presets if p["family"] == "v100-nvlink"][0].items()
    placers = json.loads(placelab("compare", "--list", "--json").stdout)
    assert set(placers["fast"]) <= {p["name"] for p in placers["placers"]}


def test_output_through_a_link_and_into_a_folder(tmp_path):
    (tmp_path / "target.json").write_text("old")
    (tmp_path / "link.json").symlink_to("target.json")
    placelab("graph", "--model", "rnnlm", "--layers", "1", "--out", str(tmp_path / "link.json"))
    assert (tmp_path / "link.json").is_symlink()
    assert json.loads((tmp_path / "target.json").read_text())["format"] == "placelab.graph"
    (tmp_path / "folder").mkdir()
    proc = placelab("graph", "--model", "rnnlm", "--layers", "1", "--out", str(tmp_path / "folder"), check=False)
    assert proc.returncode == 1 and "is a directory" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["folder", "link.json", "target.json"]


def test_a_full_disk_is_an_error_not_an_abort():
    with open("/dev/full", "w") as full:
        out = subprocess.run([BIN, "cluster", "--preset", "v100-nvlink-8", "--json"], stdout=full, stderr=subprocess.PIPE,
                             text=True, timeout=60)
        assert out.returncode == 1 and "No space left on device" in out.stderr  # not exit 0 with the result lost
        err = subprocess.run([BIN, "graph", "--model", "nope"], stdout=subprocess.PIPE, stderr=full, timeout=60)
        assert err.returncode == 1  # the error could not be shown, but no abort (134)
