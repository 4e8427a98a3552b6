# The msr-dnn-partitioning bindings (read_msr, MsrInstance, msr_cluster) on the published BERT-24 layer
# graph: the instance matches its file, and the DP reaches the data README's optimum under max_load.
import json
import os
from pathlib import Path

import numpy as np
import pytest

import placelab

DATA = Path(os.environ.get("PLACELAB_SHARED_DATA") or Path(__file__).resolve().parents[2].parent / "shared" / "data")
BERT = DATA / "msr-dnn-partitioning" / "throughput-inputs" / "LayerGraphs" / "bert24_inference.json"

pytestmark = pytest.mark.skipif(not BERT.exists(), reason=f"msr-dnn-partitioning data not found at {BERT}")


@pytest.fixture(scope="module")
def instance():
    return placelab.read_msr(str(BERT))


def test_read_msr_matches_the_file(instance):
    doc = json.loads(BERT.read_text())
    assert instance.graph.num_ops == len(doc["nodes"])
    assert instance.max_accelerators == doc["maxFPGAs"]
    assert instance.max_cpus == doc["maxCPUs"]
    assert instance.accelerator_memory_bytes == doc["maxSizePerFPGA"]
    assert instance.msr_id.tolist() == [n["id"] for n in doc["nodes"]]
    last = doc["nodes"][-1]["id"]
    assert instance.op_of_msr_id(last) == len(doc["nodes"]) - 1
    assert "bert24_inference" in repr(instance)


def test_msr_cluster_has_the_allowed_devices(instance):
    c = placelab.msr_cluster(instance)
    assert c.device_kinds == ["accelerator"] * instance.max_accelerators + ["cpu"] * instance.max_cpus
    assert placelab.msr_cluster(2, 1, 1e9).device_kinds == ["accelerator", "accelerator", "cpu"]


def test_instance_files_read_as_graph_and_cluster(instance):
    g, c = placelab.read_graph(str(BERT)), placelab.read_cluster(str(BERT))
    assert g.num_ops == instance.graph.num_ops and g.name == "bert24_inference"
    assert c.device_kinds == placelab.msr_cluster(instance).device_kinds


def test_dp_reaches_the_readme_optimum(instance):
    sim = placelab.Simulator(instance.graph, placelab.msr_cluster(instance))
    placement, info = placelab.place(sim, "dp")
    r = sim.max_load(placement)
    assert r["fits"]
    assert r["max_load_s"] == pytest.approx(info["objective"], rel=1e-9)
    assert r["max_load_s"] * 1e3 == pytest.approx(17.7899, rel=1e-4)  # the data README's "optimal (DP)"
    one = sim.max_load(np.zeros(sim.num_ops, dtype=np.int32))
    assert one["max_load_s"] * 1e3 == pytest.approx(92.406, rel=1e-4)  # its "one accelerator" column


def test_msr_errors_are_value_errors(instance, tmp_path):
    with pytest.raises(ValueError, match="no node with id 999999"):
        instance.op_of_msr_id(999999)
    with pytest.raises(ValueError, match="missing.json"):
        placelab.read_msr(str(tmp_path / "missing.json"))
    with pytest.raises(ValueError, match="need at least one device"):
        placelab.msr_cluster(0, 0, 1e9)
    with pytest.raises(ValueError, match="memory_bytes"):
        placelab.msr_cluster(1, 0, float("nan"))


def test_the_instance_outlives_its_reader():
    g = placelab.read_msr(str(BERT)).graph  # the instance object is dropped here; its graph must stay valid
    assert g.num_ops > 0 and g.name == "bert24_inference"


def test_expert_split_gives_the_readme_value(instance):
    split = BERT.parents[2] / "human-experts" / "bert24_inference_expert.json"
    placement = placelab.read_msr_split(str(split), instance)
    assert placement.dtype == np.int32 and (placement >= 0).all()
    sim = placelab.Simulator(instance.graph, placelab.msr_cluster(instance))
    assert sim.max_load(placement)["max_load_s"] * 1e3 == pytest.approx(20.084, rel=1e-4)
    with pytest.raises(ValueError, match="expert"):
        placelab.read_msr_split(str(split.with_name("missing_expert.json")), instance)


INCEPTION = BERT.parent / "inceptionv3_inference.json"


def test_an_interrupt_stops_a_long_placer():
    # The DP over Inception-v3's ideals does not finish in 25 minutes: if the interrupt were missed, its
    # time limit would end it with a ValueError instead. Which placers poll: tests/policy/dp_test.cpp.
    import _thread
    import threading

    sim = placelab.Simulator(placelab.read_graph(str(INCEPTION)), placelab.read_cluster(str(INCEPTION)))
    timer = threading.Timer(0.3, _thread.interrupt_main)  # what Ctrl-C or a Jupyter interrupt does
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        placelab.place(sim, "dp", {"time_limit_s": 20})
    timer.join()
    placement, _ = placelab.place(sim, "single_device")  # the next call runs normally
    assert len(placement) == sim.num_ops


def test_an_interrupt_seen_by_a_callback_is_still_a_keyboard_interrupt(instance):
    # Ctrl-C may land while the progress callback runs: it must not come out as a RuntimeError.
    def interrupted(status):
        raise KeyboardInterrupt

    sim = placelab.Simulator(instance.graph, placelab.msr_cluster(instance))
    with pytest.raises(KeyboardInterrupt):
        placelab.place(sim, "dp", progress=interrupted)
