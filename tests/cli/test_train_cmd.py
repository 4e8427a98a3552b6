"""The `placelab train` verb: a real learned policy on a tiny graph, its log and checkpoint, exact resume,
the learned placers through `placelab place`, and bad input."""
import json
import signal
import subprocess

from cli_runner import BIN, placelab

# Two tiny graphs whose specs carry their own commas, on a 2-GPU server; a small, fast policy setting.
GRAPHS = "random_dag:ops=16,width=4,seed=2,random_dag:ops=12,width=3,seed=5"
CLUSTER = "v100-nvlink-2"
OPTIONS = {"rollouts": 2, "hidden": 8, "groups": 4}
POLICY = ("--policy", "hdp", "--options", json.dumps(OPTIONS))


def train(*args, check=True):
    return placelab("train", "--graphs", GRAPHS, "--cluster", CLUSTER, *POLICY, *args, check=check)


def log_without_wall(path):
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    for line in lines:
        line.pop("wall_s")
    return lines


def test_train_writes_summary_log_and_checkpoint(tmp_path):
    out = train("--steps", "4", "--checkpoint", str(tmp_path / "run"), "--json")
    doc = json.loads(out.stdout)
    assert doc["policy"] == "hdp" and doc["steps"] == 4 and doc["options"]["rollouts"] == 2
    assert doc["reward"] == {"objective": "step_time", "oom_penalty": 1.0}
    assert [t["task"] for t in doc["tasks"]] == ["random_dag:ops=16,width=4,seed=2 on v100-nvlink-2",
                                                 "random_dag:ops=12,width=3,seed=5 on v100-nvlink-2"]
    assert all(t["best_cost_s"] > 0 and t["reference_s"] > 0 for t in doc["tasks"])
    assert "train: step" in out.stderr  # progress on stderr
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == [0, 1, 2, 3]
    assert log[1]["task"].startswith("random_dag:ops=12")  # steps alternate over the graphs
    for key in ("reward", "cost_s", "best_cost_s", "wall_s", "loss", "entropy", "simulations"):
        assert key in log[0]
    checkpoint = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert checkpoint["format"] == "placelab.checkpoint" and checkpoint["version"] == 1
    assert checkpoint["policy"] == "hdp" and checkpoint["step"] == 4

    text = train("--steps", "2").stdout
    for word in ("hdp", "best", "reference", "speedup", "random_dag:ops=12,width=3,seed=5 on v100-nvlink-2"):
        assert word in text


def test_resume_continues_the_run_exactly(tmp_path):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    train("--steps", "6", "--checkpoint", str(straight), "--checkpoint-every", "2")
    train("--steps", "3", "--checkpoint", str(resumed))
    # --resume takes the policy and options from the checkpoint when left out.
    placelab("train", "--graphs", GRAPHS, "--cluster", CLUSTER, "--steps", "6", "--checkpoint", str(resumed), "--resume")
    assert log_without_wall(resumed / "log.jsonl") == log_without_wall(straight / "log.jsonl")
    a = json.loads((straight / "checkpoint.json").read_text())
    b = json.loads((resumed / "checkpoint.json").read_text())
    assert a["step"] == b["step"] == 6 and a["learner"] == b["learner"]
    assert a["trainer"]["tasks"] == b["trainer"]["tasks"]
    # The run keeps its seed and policy; another graph under the same file name is refused.
    def error(*args):
        proc = placelab("train", "--graphs", GRAPHS, "--cluster", CLUSTER, "--steps", "8", "--checkpoint", str(resumed),
                        "--resume", *args, check=False)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        return proc.stderr
    assert "a resumed run keeps its seed" in error("--seed", "5")
    assert "resume with --policy" in error("--policy", "gdp" if a["policy"] != "gdp" else "hdp")


def test_learned_placer_through_place(tmp_path):
    doc = json.loads(placelab("place", "--graph", "random_dag:ops=16,width=4,seed=2", "--cluster", CLUSTER,
                              "--placer", "hdp", "--options", json.dumps({"steps": 3, **OPTIONS}), "--json").stdout)
    assert doc["info"]["policy"] == "hdp" and doc["info"]["steps"] == 3 and doc["info"]["start"] == "scratch"
    assert doc["step_time_s"] == doc["info"]["cost_s"] and not doc["oom"]
    assert "curve_best_cost_s" not in doc["info"]
    # "curve": the best cost after every training step, never rising (null until a placement fits).
    doc = json.loads(placelab("place", "--graph", "random_dag:ops=16,width=4,seed=2", "--cluster", CLUSTER,
                              "--placer", "hdp", "--options", json.dumps({"steps": 4, "curve": True, **OPTIONS}),
                              "--json").stdout)
    curve = [c for c in doc["info"]["curve_best_cost_s"] if c is not None]
    assert len(doc["info"]["curve_best_cost_s"]) == 4 and curve == sorted(curve, reverse=True)
    assert curve[-1] >= doc["info"]["cost_s"] * (1 - 1e-12)  # the answer is at least as good as the best rollout
    # From a checkpoint the placer places zero-shot by default.
    train("--steps", "2", "--checkpoint", str(tmp_path / "run"))
    doc = json.loads(placelab("place", "--graph", "random_dag:ops=16,width=4,seed=2", "--cluster", CLUSTER,
                              "--placer", "hdp", "--options", json.dumps({"checkpoint": str(tmp_path / "run")}),
                              "--json").stdout)
    assert doc["info"]["steps"] == 0 and doc["info"]["start"].endswith("checkpoint.json")
    # gdp with no checkpoint starts from the embedded pre-trained policy and places zero-shot.
    doc = json.loads(placelab("place", "--graph", "random_dag:ops=16,width=4,seed=2", "--cluster", CLUSTER,
                              "--placer", "gdp", "--json").stdout)
    assert doc["info"]["start"] == "pretrained" and doc["info"]["steps"] == 0
    bad = placelab("place", "--graph", "random_dag:ops=16", "--placer", "placeto", "--options",
                   json.dumps({"checkpoint": str(tmp_path / "run")}), check=False)
    assert bad.returncode == 1 and "policy hdp, not placeto" in bad.stderr


def test_train_errors_name_the_fix(tmp_path):
    def error(*args):
        proc = placelab("train", *args, check=False)
        assert proc.returncode == 1 and proc.stderr.count("\n") == 1, proc.stderr
        return proc.stderr

    assert "unknown learned policy \"nope\"" in error("--graphs", "random_dag:ops=8", "--policy", "nope")
    assert "hdp" in error("--graphs", "random_dag:ops=8", "--policy", "nope")
    assert "--policy is required" in error("--graphs", "random_dag:ops=8")
    assert "--graphs is required" in error("--policy", "hdp")
    assert "names no graph" in error("--graphs", ",", "--policy", "hdp")
    assert "--resume needs --checkpoint" in error("--graphs", "random_dag:ops=8", "--policy", "hdp", "--resume")
    assert "no checkpoint there" in error("--graphs", "random_dag:ops=8", "--policy", "hdp", "--resume",
                                          "--checkpoint", str(tmp_path / "none"))
    assert "not valid JSON" in error("--graphs", "random_dag:ops=8", "--policy", "hdp", "--options", "{x")
    assert "bogus" in error("--graphs", "random_dag:ops=8", "--policy", "hdp", "--options", '{"bogus": 1}')
    assert "step_time, throughput" in error("--graphs", "random_dag:ops=8", "--policy", "hdp", "--options",
                                            '{"reward": {"objective": "fast"}}')
    assert "must be >= 0" in error("--graphs", "random_dag:ops=8", "--policy", "hdp", "--minutes", "-1")
    assert "--checkpoint-every -1 must be >= 0" in error("--graphs", "random_dag:ops=8", "--policy", "hdp",
                                                         "--checkpoint-every", "-1")
    # The log and the checkpoint tell tasks apart by name.
    assert ('tasks 0 and 1 are both named "random_dag:ops=8 on v100-nvlink-4"; give each task its own name'
            in error("--graphs", "random_dag:ops=8,random_dag:ops=8", "--policy", "hdp"))
    bad = placelab("place", "--graph", "random_dag:ops=8", "--placer", "hdp", "--options", '{"curve": 1}', check=False)
    assert bad.returncode == 1 and "curve" in bad.stderr and "true or false" in bad.stderr

    run = tmp_path / "run"
    train("--steps", "1", "--checkpoint", str(run))
    assert "--resume" in error("--graphs", GRAPHS, "--cluster", CLUSTER, *POLICY, "--checkpoint", str(run))
    assert "same graphs" in error("--graphs", "random_dag:ops=8", "--cluster", CLUSTER, "--checkpoint", str(run),
                                  "--resume", "--steps", "2")
    checkpoint = run / "checkpoint.json"
    # Bad options saved in a checkpoint (edited by hand) are named as the checkpoint's.
    saved = json.loads(checkpoint.read_text())
    saved["options"]["hidden"] = -3
    checkpoint.write_text(json.dumps(saved))
    message = error("--graphs", GRAPHS, "--cluster", CLUSTER, "--checkpoint", str(run), "--resume")
    assert f"{checkpoint}: options saved there: placer hdp options: hidden" in message
    checkpoint.write_text(checkpoint.read_text()[:100])
    message = error("--graphs", GRAPHS, "--cluster", CLUSTER, "--checkpoint", str(run), "--resume")
    assert str(checkpoint) in message and "truncated" in message


def test_ctrl_c_stops_after_the_step_with_its_checkpoint(tmp_path):
    run = tmp_path / "run"
    proc = subprocess.Popen([BIN, "train", "--graphs", GRAPHS, "--cluster", CLUSTER, *POLICY, "--steps", "100000000",
                             "--checkpoint-every", "1000", "--checkpoint", str(run), "--json"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr.readline().startswith("train: step 1/")  # training is under way
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 128 + signal.SIGINT
    doc = json.loads(out)
    assert doc["interrupted"] and 1 <= doc["steps"] < 100000000
    assert "stopping after this step" in err and f"continue with --resume --checkpoint {run}" in err
    # Every step run is in the log and the checkpoint, though no checkpoint step was reached.
    assert json.loads((run / "checkpoint.json").read_text())["step"] == doc["steps"]
    assert len((run / "log.jsonl").read_text().splitlines()) == doc["steps"]


def test_checkpoint_edge_cases(tmp_path):
    run = tmp_path / "run"
    out = train("--steps", "0", "--checkpoint", str(run))  # zero steps still leave a checkpoint
    assert json.loads((run / "checkpoint.json").read_text())["step"] == 0
    train("--steps", "2", "--checkpoint", str(run), "--resume")
    (run / "checkpoint.json.tmp.123.0").write_text('{"half": ')  # left by a run killed while saving
    out = train("--steps", "1", "--checkpoint", str(run), "--resume")
    assert "is at step 2 already" in out.stderr and "ask for more steps" in out.stderr
    assert not (run / "checkpoint.json.tmp.123.0").exists()
    bad = train("--steps", "3", "--checkpoint", str(run / "checkpoint.json"), "--resume", check=False)
    assert bad.returncode == 1 and "is a file; the checkpoint is the run's directory" in bad.stderr
    saved = json.loads((run / "checkpoint.json").read_text())
    saved["policy"] = "foo"
    (run / "checkpoint.json").write_text(json.dumps(saved))
    bad = placelab("train", "--graphs", GRAPHS, "--cluster", CLUSTER, "--checkpoint", str(run), "--resume", check=False)
    assert bad.returncode == 1 and 'policy: "foo" is not a learned policy' in bad.stderr


def test_init_starts_a_new_run_from_a_checkpoints_policy(tmp_path):
    first, zero, more = tmp_path / "first", tmp_path / "zero", tmp_path / "more"
    train("--steps", "2", "--checkpoint", str(first))
    saved = json.loads((first / "checkpoint.json").read_text())
    # The policy and options come from the checkpoint; its graphs need not be the new run's.
    other = ("train", "--graphs", "random_dag:ops=10,width=2,seed=9", "--cluster", CLUSTER, "--init", str(first))
    placelab(*other, "--steps", "0", "--checkpoint", str(zero))
    started = json.loads((zero / "checkpoint.json").read_text())
    assert started["policy"] == "hdp" and started["step"] == 0 and started["options"] == saved["options"]
    assert started["learner"]["params"] == saved["learner"]["params"]
    doc = json.loads(placelab(*other, "--steps", "2", "--checkpoint", str(more), "--json").stdout)
    assert doc["steps"] == 2
    assert json.loads((more / "checkpoint.json").read_text())["learner"]["params"] != saved["learner"]["params"]

    both = placelab(*other, "--steps", "2", "--checkpoint", str(more), "--resume", check=False)
    assert both.returncode != 0 and "give one of them" in both.stderr
    wrong = placelab(*other, "--policy", "gdp", "--steps", "1", check=False)
    assert wrong.returncode != 0 and "policy: is \"hdp\" but this run trains gdp" in wrong.stderr
    missing = placelab("train", "--graphs", "random_dag:ops=10", "--init", str(tmp_path / "none"), check=False)
    assert missing.returncode != 0 and "no checkpoint there" in missing.stderr
