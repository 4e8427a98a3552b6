"""Data-parallel `placelab train` on 2 MPI ranks (docs/distributed.md): the replicas keep identical
parameters, a run is deterministic for a seed and a rank count, 1 rank under mpirun is the plain run,
resume works with the same and another rank count, and a rank that dies ends the run without a hang,
leaving the last checkpoint resumable. ctest runs this only where the build has MPI (PLACELAB_MPI)."""
import json
import os
import subprocess

BIN = os.environ.get("PLACELAB_BIN", "build/release/cli/placelab")
MPIRUN = os.environ.get("PLACELAB_MPIEXEC", "mpirun")
# Root in CI, 2 cores here; --timeout makes mpirun kill a run that hangs anyway.
MPI_FLAGS = ["--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "--timeout", "60"]

GRAPHS = "random_dag:ops=16,width=4,seed=2,random_dag:ops=12,width=3,seed=5"
TRAIN = ["train", "--graphs", GRAPHS, "--cluster", "v100-nvlink-2", "--policy", "hdp",
         "--options", json.dumps({"rollouts": 2, "hidden": 8, "groups": 4}), "--seed", "3"]


def run(ranks, *args, check=True, env=None):
    command = [BIN, *args] if ranks == 0 else [MPIRUN, "-np", str(ranks), *MPI_FLAGS, BIN, *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=90, env={**os.environ, **(env or {})})
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr}")
    return proc


def log_without_wall(run_dir):
    lines = [json.loads(line) for line in (run_dir / "log.jsonl").read_text().splitlines()]
    for line in lines:
        line.pop("wall_s")
    return lines


def checkpoint_without_wall(run_dir):
    doc = json.loads((run_dir / "checkpoint.json").read_text())
    doc["trainer"].pop("wall_s")
    return doc


def test_two_ranks_keep_identical_parameters_and_repeat_exactly(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    out = run(2, *TRAIN, "--steps", "6", "--checkpoint-every", "2", "--checkpoint", str(a), "--json")
    run(2, *TRAIN, "--steps", "6", "--checkpoint-every", "2", "--checkpoint", str(b))
    summary = json.loads(out.stdout)  # one summary: rank 0's
    assert summary["steps"] == 6 and len(summary["tasks"]) == 2
    assert out.stderr.count("train: step 6/6") == 1  # progress from rank 0 only
    # A step covers both tasks (one per rank): every task has a best from step 0 on.
    assert all(t["best_cost_s"] > 0 for t in summary["tasks"])
    # Training checks the parameter hash of every rank against rank 0's at each checkpoint; rank 1's is recorded.
    replicas = checkpoint_without_wall(a)["trainer"]["replicas"]
    assert [r["rank"] for r in replicas] == [1] and "rng" in replicas[0]["own"]
    assert log_without_wall(a) == log_without_wall(b)
    assert checkpoint_without_wall(a) == checkpoint_without_wall(b)
    # Twice the rollouts of one rank per step.
    log = log_without_wall(a)
    assert [e["step"] for e in log] == list(range(6))


def test_one_rank_under_mpirun_is_the_plain_run(tmp_path):
    run(0, *TRAIN, "--steps", "4", "--checkpoint", str(tmp_path / "plain"))
    run(1, *TRAIN, "--steps", "4", "--checkpoint", str(tmp_path / "mpi"))
    assert log_without_wall(tmp_path / "plain") == log_without_wall(tmp_path / "mpi")
    assert checkpoint_without_wall(tmp_path / "plain") == checkpoint_without_wall(tmp_path / "mpi")


def test_resume_with_the_same_and_another_rank_count(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run(2, *TRAIN, "--steps", "6", "--checkpoint-every", "3", "--checkpoint", str(straight))
    run(2, *TRAIN, "--steps", "3", "--checkpoint", str(resumed))
    run(2, *TRAIN, "--steps", "6", "--checkpoint", str(resumed), "--resume")
    assert log_without_wall(resumed) == log_without_wall(straight)
    assert checkpoint_without_wall(resumed) == checkpoint_without_wall(straight)
    # Another rank count continues the run (parameters, optimizer, step and bests carry; the curve differs).
    run(1, *TRAIN, "--steps", "8", "--checkpoint", str(resumed), "--resume")
    doc = checkpoint_without_wall(resumed)
    assert doc["step"] == 8 and "replicas" not in doc["trainer"]
    assert [e["step"] for e in log_without_wall(resumed)] == list(range(8))


def test_a_rank_that_dies_ends_the_run_and_keeps_the_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    proc = run(2, *TRAIN, "--steps", "8", "--checkpoint-every", "2", "--checkpoint", str(run_dir), check=False,
               env={"PLACELAB_TEST_FAULT": "exit:1:3", "PLACELAB_MPI_TIMEOUT_S": "20"})
    assert proc.returncode != 0
    assert "rank 1" in proc.stderr
    assert json.loads((run_dir / "checkpoint.json").read_text())["step"] == 2
    run(2, *TRAIN, "--steps", "4", "--checkpoint", str(run_dir), "--resume")
    assert json.loads((run_dir / "checkpoint.json").read_text())["step"] == 4


def test_a_rank_that_hangs_ends_the_run_at_the_timeout(tmp_path):
    proc = run(2, *TRAIN, "--steps", "8", "--checkpoint", str(tmp_path / "run"), check=False,
               env={"PLACELAB_TEST_FAULT": "hang:1:3", "PLACELAB_MPI_TIMEOUT_S": "2"})
    assert proc.returncode != 0
    assert "step 3: gradient sum: no word from rank 1 in 2 s" in proc.stderr


def test_replicas_that_differ_are_an_error_naming_the_rank(tmp_path):
    proc = run(2, *TRAIN, "--steps", "2", "--checkpoint", str(tmp_path / "run"), check=False,
               env={"PLACELAB_TEST_FAULT": "unsynced:1"})
    assert proc.returncode != 0
    assert "the parameters of rank 1 differ from rank 0's" in proc.stderr
    assert not (tmp_path / "run" / "checkpoint.json").exists()


def test_place_with_a_learned_placer_trains_over_the_ranks(tmp_path):
    # `mpirun -np 2 placelab place --placer hdp` trains data-parallel (the same machinery as train) and rank
    # 0 alone answers: one JSON document on stdout, the same on a second run (deterministic for a rank count).
    args = ["place", "--graph", "random_dag:ops=16,width=4,seed=2", "--cluster", "v100-nvlink-2", "--placer", "hdp",
            "--options", json.dumps({"steps": 4, "rollouts": 2, "hidden": 8, "groups": 4}), "--seed", "3", "--json"]
    out = [tmp_path / "first.json", tmp_path / "second.json"]
    doc = json.loads(run(2, *args, "--out", str(out[0])).stdout)  # one document: the other rank printed nothing
    assert doc["placer"] == "hdp" and doc["info"]["steps"] == 4 and doc["step_time_s"] > 0
    again = json.loads(run(2, *args, "--out", str(out[1])).stdout)
    assert (again["step_time_s"], again["info"]["cost_s"]) == (doc["step_time_s"], doc["info"]["cost_s"])
    assert json.loads(out[0].read_text())["device_of"] == json.loads(out[1].read_text())["device_of"]
