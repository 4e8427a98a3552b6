# Training from Python: placelab.train with a per-step callback (live curves), early stop, checkpoints
# that resume the same run, placing with a trained checkpoint, and bad input as ValueError.
import json

import numpy as np
import pytest

import placelab

POLICY = "gdp"


@pytest.fixture(scope="module")
def task():
    graph = placelab.make_model("random_dag", {"ops": 24, "seed": 5})
    return graph, placelab.make_preset("v100-nvlink-2")


def small(steps):
    return dict(steps=steps, seed=3, options={"rollouts": 4})


def test_callback_sees_every_step_and_can_stop(task):
    seen = []
    summary = placelab.train(POLICY, [task], on_step=lambda e: seen.append(e), **small(3))
    assert [e["step"] for e in seen] == [0, 1, 2] or [e["step"] for e in seen] == [1, 2, 3]
    assert {"reward", "best_cost_s", "wall_s"} <= set(seen[0])
    assert summary["steps"] == 3 and len(summary["best_placement"]) == 1
    placement = summary["best_placement"][0]
    assert placement.dtype == np.int32 and len(placement) == task[0].num_ops
    sim = placelab.Simulator(*task)
    assert sim.simulate(placement)["step_time_s"] == pytest.approx(summary["best_cost_s"][0], rel=1e-12)

    stopped = placelab.train(POLICY, [task], on_step=lambda e: False, **small(5))
    assert stopped["steps"] == 1


def test_checkpoint_resume_continues_the_same_run(task, tmp_path):
    straight = placelab.train(POLICY, [task], **small(4))
    placelab.train(POLICY, [task], checkpoint=str(tmp_path), checkpoint_every=1, **small(2))
    header = placelab.read_checkpoint(str(tmp_path))
    assert header["policy"] == POLICY and header["step"] == 2
    # Resuming takes the checkpoint's options (and keeps its seed) when they are left out.
    resumed = placelab.train(POLICY, [task], checkpoint=tmp_path, resume=True, steps=4, seed=99)
    assert resumed["steps"] == 4 and resumed["seed"] == 3
    assert resumed["best_cost_s"] == straight["best_cost_s"]
    log = [json.loads(line) for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert len(log) == 4

    sim = placelab.Simulator(*task)
    placement, info = placelab.place(sim, POLICY, {"checkpoint": str(tmp_path), "steps": 0})
    sim.check_placement(placement)


def test_an_interrupt_stops_after_a_step_and_keeps_the_checkpoint(task, tmp_path):
    import _thread
    import threading

    timer = threading.Timer(0.5, _thread.interrupt_main)  # what Ctrl-C or a Jupyter interrupt does
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        placelab.train(POLICY, [task], checkpoint=tmp_path, checkpoint_every=1000, **small(3000))  # bounded if it fails
    timer.join()
    step = placelab.read_checkpoint(str(tmp_path))["step"]
    assert 0 < step < 3000
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == step


def test_an_interrupt_in_a_callback_also_stops_after_the_step(task, tmp_path):
    def interrupted(entry):  # Ctrl-C landing while on_step runs
        if entry["step"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        placelab.train(POLICY, [task], checkpoint=tmp_path, checkpoint_every=1000, on_step=interrupted, **small(50))
    assert placelab.read_checkpoint(str(tmp_path))["step"] == 3  # steps 0, 1, 2 ran; the checkpoint holds them
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 3


def test_bad_input_is_a_value_error(task):
    with pytest.raises(ValueError, match="unknown learned policy"):
        placelab.train("no_such_policy", [task], steps=1)
    with pytest.raises(ValueError, match="tuple"):
        placelab.train(POLICY, [task[0]], steps=1)
    with pytest.raises(ValueError, match="at least one"):
        placelab.train(POLICY, [], steps=1)
    with pytest.raises(TypeError, match="on_step callback must be callable, got int"):
        placelab.train(POLICY, [task], steps=1, on_step=3)
    def explode(entry):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="^boom$") as raised:  # the callback's own exception and traceback
        placelab.train(POLICY, [task], steps=2, on_step=explode)
    assert raised.value.__notes__ == ["raised in the on_step callback"]
    assert any(frame.name == "explode" for frame in raised.traceback)
    with pytest.raises(RuntimeError, match="on_step callback returned a value that is not True, False or None"):
        placelab.train(POLICY, [task], steps=2, on_step=lambda e: "no")
    with pytest.raises(TypeError, match=r"tasks\[0\]\[0\] must be a placelab.Graph, got Cluster"):
        placelab.train(POLICY, [(task[1], task[0])], steps=1)
    with pytest.raises(TypeError, match="checkpoint must be a path"):
        placelab.train(POLICY, [task], steps=1, checkpoint=5)
    assert POLICY in dict(placelab.learners())


def test_tasks_are_told_apart_by_name(task, tmp_path):
    # Two graphs of one zoo model share the default name "random_dag on v100-nvlink-2": each gets its
    # position, in the log and in the checkpoint; a name given twice is an error naming both tasks.
    other = placelab.make_model("random_dag", {"ops": 20, "seed": 8})
    assert other.name == task[0].name
    placelab.train(POLICY, [task, (other, task[1])], checkpoint=tmp_path, checkpoint_every=1, **small(2))
    names = [t["name"] for t in placelab.read_checkpoint(tmp_path)["trainer"]["tasks"]]
    default = f"{task[0].name} on {task[1].name}"
    assert names == [default + " (tasks[0])", default + " (tasks[1])"]
    log = [json.loads(line)["task"] for line in (tmp_path / "log.jsonl").read_text().splitlines()]
    assert log == names
    # A named task keeps its name; the one default left is unique, so it stays as it is.
    summary = placelab.train(POLICY, [("mine", *task), (other, task[1])], **small(1))
    assert summary["steps"] == 1
    with pytest.raises(ValueError, match=r'tasks 0 and 1 are both named "x"; give each task its own name'):
        placelab.train(POLICY, [("x", *task), ("x", other, task[1])], steps=1)


def test_init_starts_a_new_run_from_a_checkpoints_policy(task, tmp_path):
    placelab.train(POLICY, [task], checkpoint=str(tmp_path / "first"), **small(2))
    other = (placelab.make_model("random_dag", {"ops": 18, "seed": 8}), placelab.make_preset("v100-pcie-2"))
    # Zero steps from the checkpoint place as the checkpoint does: the same trained policy.
    placelab.train(POLICY, [other], checkpoint=str(tmp_path / "zero"), init=str(tmp_path / "first"), steps=0, seed=3)
    sim = placelab.Simulator(*other)
    placed = [placelab.place(sim, POLICY, {"checkpoint": str(tmp_path / d), "steps": 0})[0]
              for d in ("first", "zero")]
    assert np.array_equal(*placed)
    summary = placelab.train(POLICY, [other], init=str(tmp_path / "first"), **small(2))
    assert summary["steps"] == 2
    with pytest.raises(ValueError, match="give one of them"):
        placelab.train(POLICY, [other], checkpoint=str(tmp_path / "zero"), resume=True, init=str(tmp_path / "first"))
    with pytest.raises(ValueError, match="policy: is \"gdp\" but this run trains hdp"):
        placelab.train("hdp", [other], init=str(tmp_path / "first"), steps=1)
