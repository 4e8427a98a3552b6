# Shared fixtures of the placelab package tests: a small zoo graph, a preset cluster and their simulator.
import pytest

import placelab


@pytest.fixture(scope="session")
def graph():
    return placelab.make_model("resnet50", {"batch": 2, "image_size": 75})


@pytest.fixture(scope="session")
def cluster():
    return placelab.make_preset("v100-nvlink-4")


@pytest.fixture(scope="session")
def simulator(graph, cluster):
    return placelab.Simulator(graph, cluster)
