# Tests of docs/learned.md (and the training parts of docs/python.md and docs/cli.md), written from the
# documentation alone: the reward and its memory penalty recomputed from the simulator's facts, the
# reference, the log's fields and invariants, the checkpoint's format, seeded determinism, exact
# resume and what resume refuses, option validation, the policies' documented input widths, and the
# learned placers' options. Tiny graphs (1-12 ops) and 1-4 training steps keep the file fast.
import itertools
import json
import math
import os
import pathlib

import numpy as np
import pytest

import placelab as pl

POLICIES = ["gdp", "placeto", "hdp", "hsdag"]
LOG_FIELDS = {"step", "task", "reward", "cost_s", "best_cost_s", "wall_s", "loss", "entropy", "simulations"}


def dev(name, flops, mem=10**9):
    return {"name": name, "kind": "gpu", "peak_flops_per_s": flops, "memory_bandwidth_bytes_per_s": 1e12,
            "memory_bytes": mem}


def two_devices(f0=1.0, f1=3.0, m0=1000, m1=10**9, bandwidth=100.0):
    return pl.cluster_from_dict({"format": "placelab.cluster", "version": 1, "name": "two",
                                 "devices": [dev("d0", f0, m0), dev("d1", f1, m1)],
                                 "links": [{"name": "l", "ends": ["d0", "d1"], "bandwidth_bytes_per_s": bandwidth}]})


def graph(ops, edges=(), name="tiny"):
    return pl.graph_from_dict({"format": "placelab.graph", "version": 1, "name": name, "ops": list(ops),
                               "edges": list(edges)})


def small_dag(seed=1):
    return pl.make_model("random_dag", {"ops": 12, "seed": seed, "width": 3})


def small_task():
    return (small_dag(), pl.make_preset("v100-nvlink-2"))


def run(policy, tasks, steps, **kw):
    log = []
    summary = pl.train(policy, tasks, steps=steps, on_step=lambda e: log.append(dict(e)), **kw)
    return summary, log


def all_placements(sim):
    return [np.array(p, dtype=np.int32) for p in itertools.product(range(sim.num_devices), repeat=sim.num_ops)]


def doc_reward(cost, reference, excess, capacity, penalty):
    # learned.md "Reward": -sqrt(cost / reference), minus oom_penalty * (1 + excess / capacity) when it does not fit
    r = -math.sqrt(cost / reference)
    return r - penalty * (1 + excess / capacity) if excess > 0 else r


def facts(sim, p, objective):
    """(cost, excess) of a placement as learned.md defines them for the objective."""
    if objective == "throughput":
        m = sim.max_load(p)
        return m["max_load_s"], float(np.sum(m["excess_bytes"]))
    r = sim.simulate(p)
    return r["step_time_s"], float(np.sum(r["device_excess_bytes"]))


def reference_cost(sim, objective):
    # "reference ... the cost of the better of the single_device and round_robin placements under the same objective"
    return min(facts(sim, pl.place(sim, name)[0], objective)[0] for name in ("single_device", "round_robin"))


def consistent_mean(entry, outcomes, k):
    """Whether some multiset of k rollouts over the possible (cost, reward) outcomes has the logged means
    (the log's "reward (mean of the step)" and "cost_s (mean)")."""
    for counts in itertools.product(range(k + 1), repeat=len(outcomes)):
        if sum(counts) != k:
            continue
        cost = sum(n * c for n, (c, _) in zip(counts, outcomes)) / k
        reward = sum(n * r for n, (_, r) in zip(counts, outcomes)) / k
        if math.isclose(cost, entry["cost_s"], rel_tol=1e-9) and math.isclose(reward, entry["reward"], rel_tol=1e-9):
            return True
    return False


def check_reward_log(g, c, objective, penalty, policy="hdp", steps=3, options=None):
    sim = pl.Simulator(g, c)
    capacity = sum(d["memory_bytes"] for d in c.to_dict()["devices"])
    reference = reference_cost(sim, objective)
    options = options or {"rollouts": 4}
    summary, log = run(policy, [(g, c)], steps, seed=3, options=options,
                       reward={"objective": objective, "oom_penalty": penalty})
    assert summary["reference_s"][0] == pytest.approx(reference, rel=1e-12)
    outcomes = []
    for p in all_placements(sim):
        cost, excess = facts(sim, p, objective)
        outcomes.append((cost, doc_reward(cost, reference, excess, capacity, penalty)))
    for e in log:
        assert consistent_mean(e, outcomes, options["rollouts"]), (e, outcomes)
    return summary, log, outcomes


# ---------------------------------------------------------------- reward


def test_reward_is_minus_sqrt_of_cost_over_reference():
    # "reward = -sqrt(cost / reference) when the placement fits in memory"; "reference ... the better of
    # single_device and round_robin". One op, d1 3x faster: rewards -sqrt(3) or -1, and every step's
    # logged mean reward must match its logged mean cost for some split of the 4 rollouts.
    g = graph([{"name": "a", "flops": 8}])
    check_reward_log(g, two_devices(), "step_time", 1.0)


@pytest.mark.parametrize("penalty", [1.0, 2.5, 0.0])
def test_oom_penalty_is_graded_by_excess_over_total_capacity(penalty):
    # "- oom_penalty * (1 + excess / capacity) when it does not"; capacity "the sum of the devices'
    # capacities"; "oom_penalty = 0 ignores memory". d1 is fast but holds 100 of the op's 300 bytes.
    g = graph([{"name": "a", "flops": 8, "param_bytes": 300}])
    c = two_devices(m0=1000, m1=100)
    summary, log, outcomes = check_reward_log(g, c, "step_time", penalty)
    # "the best rollout of a step is the cheapest one that fits in memory": d1 never fits
    for e in log:
        assert e["best_cost_s"] in (None, 8.0), e
    assert summary["best_cost_s"][0] in (None, 8.0)


def test_throughput_objective_uses_max_load():
    # "with the throughput objective, Tarnawski et al.'s max-load"; the reference "under the same objective".
    # A chain of two ops with a transfer: step time and max-load differ when the ops are split.
    g = graph([{"name": "a", "flops": 6}, {"name": "b", "flops": 9}], [{"src": "a", "dst": "b", "bytes": 50}])
    c = two_devices(f0=1.0, f1=3.0)
    sim = pl.Simulator(g, c)
    split = np.array([0, 1], dtype=np.int32)
    assert sim.max_load(split)["max_load_s"] != sim.simulate(split)["step_time_s"]  # the case discriminates
    check_reward_log(g, c, "throughput", 1.0)


def test_best_cost_is_null_until_a_placement_fits():
    # log: "best_cost_s (best so far on that task, null before any placement fits)"
    g = graph([{"name": "a", "flops": 8, "param_bytes": 300}])
    c = two_devices(m0=100, m1=100)
    summary, log = run("hdp", [(g, c)], 2, seed=1, options={"rollouts": 4})
    assert [e["best_cost_s"] for e in log] == [None, None]


# ---------------------------------------------------------------- the log and the summary


@pytest.mark.parametrize("policy", POLICIES)
def test_log_lines_fields_and_invariants(policy, tmp_path):
    # "DIR/log.jsonl gets one line per step: {step, task, reward, cost_s, best_cost_s, wall_s, loss, entropy,
    # simulations (so far)}"; "Step s trains on task s mod T"; best so far per task never gets worse.
    g2 = pl.make_model("random_dag", {"ops": 10, "seed": 2, "width": 3})
    c = pl.make_preset("v100-nvlink-2")
    tasks = [("first", small_dag(), c), ("second", g2, c)]
    summary, seen = run(policy, tasks, 4, seed=1, checkpoint=tmp_path / "run")
    lines = [json.loads(x) for x in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert len(lines) == 4
    for s, e in enumerate(lines):
        assert set(e) == LOG_FIELDS, sorted(e)
        assert e["step"] == s and e["task"] == ["first", "second"][s % 2]
    assert [{k: v for k, v in e.items() if k != "wall_s"} for e in lines] == \
           [{k: v for k, v in e.items() if k != "wall_s"} for e in seen]
    sims = [e["simulations"] for e in lines]
    assert sims == sorted(sims) and sims[0] > 0
    walls = [e["wall_s"] for e in lines]
    assert walls == sorted(walls)
    for name in ("first", "second"):
        bests = [e["best_cost_s"] for e in lines if e["task"] == name and e["best_cost_s"] is not None]
        assert bests == sorted(bests, reverse=True)
    # the summary's best per task is the log's last best, and its placement has that cost and fits
    header = pl.read_checkpoint(tmp_path / "run")
    assert header["trainer"]["simulations"] == sims[-1]
    for k, (name, g, cl) in enumerate(tasks):
        last = [e["best_cost_s"] for e in lines if e["task"] == name][-1]
        assert summary["best_cost_s"][k] == last
        r = pl.Simulator(g, cl).simulate(summary["best_placement"][k])
        assert r["step_time_s"] == pytest.approx(last, rel=1e-12) and not r["oom"]
        assert header["trainer"]["tasks"][k]["best_cost_s"] == last


def test_hdp_simulations_count_rollouts():
    # "each step ... sample rollouts, simulate them": hdp simulates `rollouts` placements a step
    _, log = run("hdp", [small_task()], 3, seed=1, options={"rollouts": 5})
    assert [e["simulations"] for e in log] == [5, 10, 15]


def test_gdp_warm_start_logs_greedy_and_target_and_is_never_worse_than_the_heuristics():
    # gdp "Warm start": steps 0 to warm_steps - 1 are imitation steps; "the step logs two rollouts, the
    # policy's greedy placement and the target, so the run's best placement is never worse than the best
    # heuristic's" (the target: the warm_start placers' placement of highest reward; their placements are
    # simulated once, counted in the first imitation step); PPO steps then simulate `rollouts` placements.
    g, c = small_task()
    sim = pl.Simulator(g, c)
    _, log = run("gdp", [(g, c)], 3, seed=1, options=dict(TINY["gdp"], warm_steps=2, rollouts=3))
    assert [e["simulations"] for e in log] == [3 + 2, 3 + 4, 3 + 7]
    heuristics = [sim.simulate(pl.place(sim, n, seed=1)[0]) for n in ("metis", "m_etf", "heft")]
    best = min(r["step_time_s"] for r in heuristics if not r["oom"])
    assert log[0]["best_cost_s"] <= best * (1 + 1e-12)


def test_placeto_simulation_count():
    # placeto: "simulations = one full run per episode plus one per unit moved"; a move that keeps the
    # unit where it is costs no simulation: between `episodes` and episodes * (1 + units) per step.
    g, c = small_task()
    _, log = run("placeto", [(g, c)], 3, seed=1, options={"episodes": 2, "hidden": 8})
    sims = [0] + [e["simulations"] for e in log]
    for a, b in zip(sims, sims[1:]):
        assert 2 <= b - a <= 2 * (1 + g.num_ops), sims


# ---------------------------------------------------------------- checkpoints

DEFAULTS = {
    "gdp": {"hidden": 32, "sage_layers": 2, "aggregator": "mean", "segment": 64, "attention_layers": 2, "heads": 2,
            "ff": 64, "head_hidden": 32, "superposition": True, "decoder": "schedule", "rollouts": 12, "ppo_epochs": 3,
            "clip": 0.2, "entropy": 0.01, "entropy_target": 0, "value_coef": 0.5, "lr": 1e-2, "rl_lr": 0,
            "max_grad_norm": 1.0,
            "self_imitation": 0.5, "place_samples": 16, "place_temperature": 1.0, "place_starts": "",
            "window_share": 0.5, "decisions_per_step": 2048,
            "warm_steps": 20, "warm_start": "metis,m_etf,heft", "distill_from": 0},
    "placeto": {"hidden": 32, "type_dim": 8, "rounds": 3, "episodes": 4, "embed_every": 0, "lr": 0.01, "gamma": 0.9,
                "baseline_decay": 0.9, "entropy": 0.05, "grad_clip": 1, "normalize": True, "initial": "random"},
    # groups: min(256, 20 x devices) for the 2-device task the checkpoint test trains on
    "hdp": {"groups": 40, "hidden": 64, "rollouts": 8, "lr": 0.003, "entropy": 0.01, "baseline_decay": 0.9,
            "max_grad_norm": 1, "algorithm": "reinforce", "ppo_epochs": 2, "ppo_clip": 0.2, "place_samples": 16,
            "block_prior": 1, "logits_noise": 0.5, "stop_noise_step": 300, "tanh_constant": 1, "lr_decay": 1,
            "decay_steps": 50, "start_decay_step": 400, "failing_signal": 0},
}
DEFAULTS["hsdag"] = dict(DEFAULTS["hdp"], groups=8, algorithm="ppo", max_chain=4, gcn_layers=2, logits_noise=0,
                         stop_noise_step=750, tanh_constant=0)


@pytest.mark.parametrize("policy", POLICIES)
def test_checkpoint_format(policy, tmp_path):
    # learned.md "Checkpoints": placelab.checkpoint version 1; options "completed with defaults" (each
    # policy's documented defaults); parameters a placelab.params document; Adam state
    # {"kind": "adam", "lr", "steps", "m", "v"}; "the RNG is the standard text form of std::mt19937_64's
    # state" (312 state words and a position: 313 integers); the trainer's seed, wall time, simulations
    # and per-task name, fingerprint, reward, best cost, step and placement.
    g, c = small_task()
    run(policy, [(g, c)], 2, seed=7, checkpoint=tmp_path / "run")
    doc = json.loads((tmp_path / "run" / "checkpoint.json").read_text())
    assert set(doc) == {"format", "version", "policy", "options", "step", "learner", "trainer"}
    assert (doc["format"], doc["version"], doc["policy"], doc["step"]) == ("placelab.checkpoint", 1, policy, 2)
    assert doc["options"] == DEFAULTS[policy]
    learner = doc["learner"]
    assert learner["params"]["format"] == "placelab.params"
    tensors = learner["params"]["params"]
    for t in tensors:
        assert {"name", "shape", "data"} <= set(t)
        assert len(np.ravel(t["data"])) == math.prod(t["shape"]), t["name"]
    opt = learner["optimizer"]
    assert opt["kind"] == "adam" and {"lr", "steps", "m", "v"} <= set(opt)
    assert opt["lr"] == DEFAULTS[policy]["lr"] and len(opt["m"]) == len(opt["v"]) == len(tensors)
    words = learner["rng"].split()
    assert len(words) == 313 and all(w.isdigit() for w in words), f"rng state has {len(words)} words"
    trainer = doc["trainer"]
    assert trainer["seed"] == 7 and trainer["wall_s"] > 0 and trainer["simulations"] > 0
    (task,) = trainer["tasks"]
    assert task["name"] == f"{g.name} on {c.name}"  # python.md: (graph, cluster) tasks
    fp = task["fingerprint"]
    assert (fp["ops"], fp["devices"], fp["cost_model"]) == (12, 2, "roofline")
    assert {"graph_hash", "cluster_hash"} <= set(fp)
    assert task["reward"] == {"objective": "step_time", "oom_penalty": 1}
    assert len(task["best_placement"]) == 12 and all(0 <= d < 2 for d in task["best_placement"])
    assert task["best_step"] in (0, 1)
    # read_checkpoint gives the header: "policy, options, step, trainer state"
    header = pl.read_checkpoint(tmp_path / "run")
    assert header["policy"] == policy and header["step"] == 2 and header["trainer"] == trainer


def learner_input_widths(policy, tmp_path):
    run(policy, [small_task()], 1, seed=1, checkpoint=tmp_path / policy)
    doc = json.loads((tmp_path / policy / "checkpoint.json").read_text())
    return {t["name"]: t["shape"] for t in doc["learner"]["params"]["params"]}


def test_documented_feature_widths_appear_in_the_parameters(tmp_path):
    # The documented feature counts (unit_x 12, device_x 7, pair_x 3, 64 type buckets, 8-wide type
    # embeddings) fix the input widths of the first layers: e.g. HDP's grouper input is
    # [unit_x (12), sin/cos for s = 0,1,2 (6), op-type embedding (8)] = 26, and its group embedding
    # 26 + 1 + groups + groups = 107 (40 groups: 20 x the task's 2 devices); Placeto's node input 12 + 3 + 2 + 8 + hidden = 57 and its device
    # key hidden + hidden + 7 = 71; HSDAG's coarse node 12 + 8 + 2 + 1 + 6 = 29; GDP's head position
    # sin/cos for k = 1..4 = 8, 64 device-index slots, and its schedule decoder's 12 decision features
    # (head.schedule and its linear path to the logit, head.schedule_skip [12, 1]).
    shapes = {p: learner_input_widths(p, tmp_path) for p in POLICIES}
    firsts = {p: sorted(s[0] for s in shapes[p].values()) for p in POLICIES}
    assert {26, 107, 7} <= set(firsts["hdp"]) and [16, 64] in shapes["hdp"].values()  # 16 device slots
    assert {57, 71, 7} <= set(firsts["placeto"]) and [64, 8] in shapes["placeto"].values()
    assert {29, 7, 3} <= set(firsts["hsdag"]) and [16, 64] in shapes["hsdag"].values()
    assert {12, 7, 8} <= set(firsts["gdp"]) and [64, 32] in shapes["gdp"].values()
    assert shapes["gdp"]["head.schedule.weight"] == [12, 32] and shapes["gdp"]["head.schedule_skip.weight"] == [12, 1]


def test_checkpoint_every_and_steps_zero(tmp_path):
    # cli.md: checkpoint.json "every K steps (default 10; 0: only at the end) and at the end, atomically
    # (so with --steps 0 too)". The on_step callback sees the file as the run writes it.
    seen = []
    d = tmp_path / "every"
    pl.train("hdp", [small_task()], steps=5, seed=1, checkpoint=d, checkpoint_every=2, options={"rollouts": 2},
             on_step=lambda e: seen.append(json.loads((d / "checkpoint.json").read_text())["step"]
                                           if (d / "checkpoint.json").exists() else None))
    assert set(seen) - {None} <= {2, 4} and 2 in seen, seen
    assert pl.read_checkpoint(d)["step"] == 5
    assert not [p for p in os.listdir(d) if ".tmp" in p]
    seen.clear()
    d = tmp_path / "zero"
    pl.train("hdp", [small_task()], steps=3, seed=1, checkpoint=d, checkpoint_every=0, options={"rollouts": 2},
             on_step=lambda e: seen.append((d / "checkpoint.json").exists()))
    assert seen == [False, False, False] and pl.read_checkpoint(d)["step"] == 3
    pl.train("hdp", [small_task()], steps=0, seed=1, checkpoint=tmp_path / "none")
    assert pl.read_checkpoint(tmp_path / "none")["step"] == 0


def test_checkpoint_reader_is_strict(tmp_path):
    # "Readers are strict: a wrong format or version, an unknown field, an unknown policy, a truncated
    # file ... is an error naming the file and the field." read_checkpoint (python.md) is such a reader.
    run("hdp", [small_task()], 1, seed=1, checkpoint=tmp_path / "ok", options={"rollouts": 2})
    text = (tmp_path / "ok" / "checkpoint.json").read_text()
    doc = json.loads(text)
    cases = {"version": dict(doc, version=2), "format": dict(doc, format="placelab.graph"),
             "extra": dict(doc, extra=1), "policy": dict(doc, policy="nonesuch")}
    accepted = []
    for name, bad in cases.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        try:
            pl.read_checkpoint(path)
            accepted.append(name)
        except ValueError as e:
            assert f"{name}.json" in str(e)
    assert not accepted, f"read_checkpoint accepted a checkpoint with a bad {accepted}"
    path = tmp_path / "truncated.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ValueError, match="truncated.json"):
        pl.read_checkpoint(path)


@pytest.mark.parametrize("policy", POLICIES)
def test_learner_state_with_an_unknown_field_is_refused(policy, tmp_path):
    # "Readers are strict: ... an unknown field ... is an error naming the file and the field", and
    # "a state whose parameter names ... differ from the policy's is an error". Loaded through the
    # placer's "checkpoint" option (rl::load_learner).
    run(policy, [small_task()], 1, seed=1, checkpoint=tmp_path / "ok", options=TINY[policy])
    doc = json.loads((tmp_path / "ok" / "checkpoint.json").read_text())
    sim = pl.Simulator(*small_task())
    renamed = json.loads(json.dumps(doc))
    renamed["learner"]["params"]["params"][0]["name"] += "X"
    for name, bad in {"bogus": dict(doc, learner=dict(doc["learner"], bogus=True)), "renamed": renamed}.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(bad))
        try:
            pl.place(sim, policy, {"checkpoint": str(path), "steps": 0})
        except ValueError as e:
            assert f"{name}.json" in str(e) and (name != "bogus" or "bogus" in str(e)), str(e)
        else:
            pytest.fail(f"{policy}: a checkpoint whose learner state is {name} was accepted")


# ---------------------------------------------------------------- determinism and resume


def strip_wall(entries):
    return [{k: v for k, v in e.items() if k != "wall_s"} for e in entries]


def saved_state(d):
    doc = json.loads((pathlib.Path(d) / "checkpoint.json").read_text())
    doc["trainer"].pop("wall_s")
    return doc


def log_lines(d):
    return strip_wall(json.loads(x) for x in (pathlib.Path(d) / "log.jsonl").read_text().splitlines())


TINY = {"gdp": {"rollouts": 3, "warm_steps": 1, "hidden": 8, "heads": 2, "ff": 8, "head_hidden": 8},
        "placeto": {"episodes": 2, "hidden": 8}, "hdp": {"rollouts": 3}, "hsdag": {"rollouts": 3}}


@pytest.mark.parametrize("policy", POLICIES)
def test_same_seed_same_run_and_resume_is_exact(policy, tmp_path):
    # "a learner made with the same options and seed, trained on the same tasks, gives the same parameters
    # bit for bit"; "Resuming at step k and running to N writes the same log lines (wall time aside) and
    # ends in the same state, bit for bit, as an uninterrupted run of N steps"; resumed steps count.
    tasks = [small_task()]
    opts = TINY[policy]
    run(policy, tasks, 4, seed=5, checkpoint=tmp_path / "a", options=opts)
    run(policy, tasks, 4, seed=5, checkpoint=tmp_path / "b", options=opts)
    assert log_lines(tmp_path / "a") == log_lines(tmp_path / "b")
    assert saved_state(tmp_path / "a") == saved_state(tmp_path / "b")
    run(policy, tasks, 2, seed=5, checkpoint=tmp_path / "c", options=opts)
    # resume takes seed and options from the checkpoint when left out
    summary, seen = run(policy, tasks, 4, checkpoint=tmp_path / "c", resume=True)
    assert [e["step"] for e in seen] == [2, 3]
    assert log_lines(tmp_path / "c") == log_lines(tmp_path / "a")
    assert saved_state(tmp_path / "c") == saved_state(tmp_path / "a")
    assert summary["seed"] == 5
    # "the checkpoint already has the steps asked": nothing more runs
    _, seen = run(policy, tasks, 4, checkpoint=tmp_path / "c", resume=True)
    assert seen == [] and saved_state(tmp_path / "c") == saved_state(tmp_path / "a")


def test_different_seeds_differ():
    # the seed drives sampling: two seeds give two runs (else "seeded" would mean nothing)
    a = run("hdp", [small_task()], 2, seed=1, options={"rollouts": 3})[1]
    b = run("hdp", [small_task()], 2, seed=2, options={"rollouts": 3})[1]
    assert strip_wall(a) != strip_wall(b)


def test_resume_refusals(tmp_path):
    # "A new run refuses a directory that already holds a checkpoint"; "The policy ... the graphs, the cluster and the reward must
    # match"; "a file edited since the checkpoint is caught even under the same name"; "a shorter log is an
    # error".
    g, c = small_task()
    d = tmp_path / "run"
    run("hdp", [("t", g, c)], 2, seed=1, checkpoint=d, options={"rollouts": 2})
    with pytest.raises(ValueError):
        run("hdp", [("t", g, c)], 3, seed=1, checkpoint=d)
    with pytest.raises(ValueError):
        run("hsdag", [("t", g, c)], 3, checkpoint=d, resume=True)
    with pytest.raises(ValueError):
        run("hdp", [("t", small_dag(seed=9), c)], 3, checkpoint=d, resume=True)
    with pytest.raises(ValueError):
        run("hdp", [("t", g, pl.make_preset("k80-2"))], 3, checkpoint=d, resume=True)
    with pytest.raises(ValueError):
        run("hdp", [("t", g, c)], 3, checkpoint=d, resume=True, reward={"objective": "throughput", "oom_penalty": 1})
    log = (d / "log.jsonl").read_text().splitlines()
    (d / "log.jsonl").write_text(log[0] + "\n")
    with pytest.raises(ValueError):
        run("hdp", [("t", g, c)], 3, checkpoint=d, resume=True)
    assert saved_state(d)["step"] == 2  # a refused resume leaves the checkpoint alone


def test_resume_cuts_the_log_back_and_removes_temporaries(tmp_path):
    # "cuts log.jsonl back to the checkpoint's step (dropping lines a crash left after it, even half-written
    # ones)"; cli.md "a run killed while saving leaves a temporary checkpoint.json.tmp.*, which the resumed
    # run removes"; the result equals the uninterrupted run.
    tasks = [small_task()]
    opts = {"rollouts": 2}
    run("hdp", tasks, 3, seed=1, checkpoint=tmp_path / "straight", options=opts)
    d = tmp_path / "crashed"
    run("hdp", tasks, 2, seed=1, checkpoint=d, options=opts)
    with open(d / "log.jsonl", "a") as f:
        f.write('{"step": 2, "task": "junk", "reward": -1}\n{"step": 3, "ta')
    (d / "checkpoint.json.tmp.12345").write_text("{")
    run("hdp", tasks, 3, checkpoint=d, resume=True)
    assert log_lines(d) == log_lines(tmp_path / "straight")
    assert not [p for p in os.listdir(d) if ".tmp" in p]


def test_resume_with_a_missing_log_restarts_it(tmp_path):
    # "a missing log is noted on stderr and restarted there": the resume goes on, and the new log holds
    # the steps after the checkpoint
    d = tmp_path / "run"
    run("hdp", [small_task()], 2, seed=1, checkpoint=d, options={"rollouts": 2})
    (d / "log.jsonl").unlink()
    run("hdp", [small_task()], 3, checkpoint=d, resume=True)
    assert [e["step"] for e in log_lines(d)] == [2]


# ---------------------------------------------------------------- options


@pytest.mark.parametrize("policy", POLICIES)
def test_unknown_option_is_an_error_naming_the_known_ones(policy):
    # cli.md "unknown keys are errors listing the known ones"
    with pytest.raises(ValueError) as err:
        pl.train(policy, [small_task()], steps=1, options={"no_such_option": 1})
    known = sorted(DEFAULTS[policy])[0]
    assert "no_such_option" in str(err.value) and known in str(err.value)


@pytest.mark.parametrize("options", [{"hidden": 30, "heads": 4}, {"hidden": 0}, {"rollouts": 0},
                                     {"warm_start": "metis,nonesuch"}])
def test_gdp_option_errors(options):
    # gdp: "Unknown keys, unknown placers, zero sizes and a hidden that is not a multiple of heads are errors."
    with pytest.raises(ValueError):
        pl.train("gdp", [small_task()], steps=1, options=options)


@pytest.mark.parametrize("reward", [{"objective": "latency"}, {"objective": "step_time", "oom_penalty": "x"}])
def test_bad_reward_options_are_errors(reward):
    # "reward": {"objective": "step_time" | "throughput", "oom_penalty": 1.0}
    with pytest.raises(ValueError):
        pl.train("hdp", [small_task()], steps=1, reward=reward)


# ---------------------------------------------------------------- the learned placers


def test_placer_curve_and_choice():
    # "curve": true adds info["curve_best_cost_s"], the best cost after every training step; the placer
    # "returns the better (by reward) of the policy's own placement and the best rollout seen while
    # training" (everything fits here, so by cost too); the same seed gives the same answer.
    g, c = small_task()
    sim = pl.Simulator(g, c)
    p, info = pl.place(sim, "hdp", {"steps": 3, "curve": True, "rollouts": 3}, seed=4)
    curve = info["curve_best_cost_s"]
    assert len(curve) == 3 and all(x is not None for x in curve) and curve == sorted(curve, reverse=True)
    assert sim.simulate(p)["step_time_s"] <= curve[-1] * (1 + 1e-12)
    q, _ = pl.place(sim, "hdp", {"steps": 3, "curve": True, "rollouts": 3}, seed=4)
    assert np.array_equal(p, q)


def test_pretrained_gdp_zero_shot():
    # "placelab place with no --placer runs the pre-trained GDP zero-shot"; steps default "0 from ... the
    # pre-trained GDP"; its place() is "the greedy decode and place_samples (16) decodes sampled from the
    # policy, the best by the task's reward": never worse than the greedy decode alone, which does not depend
    # on the seed.
    g, c = small_task()
    sim = pl.Simulator(g, c)
    a, info = pl.place(sim, "gdp", {}, seed=1)
    assert np.array_equal(a, pl.place(sim, "gdp", {}, seed=1)[0])
    greedy, _ = pl.place(sim, "gdp", {"place_samples": 0}, seed=1)
    assert np.array_equal(greedy, pl.place(sim, "gdp", {"place_samples": 0}, seed=2)[0])
    assert sim.simulate(a)["step_time_s"] <= sim.simulate(greedy)["step_time_s"] * (1 + 1e-12)
    sim.check_placement(a)
    # "info reports where it started, steps, training wall time, the choice and its cost against the reference"
    assert info["start"] == "pretrained" and info["steps"] == 0, info
    assert info["cost_s"] == pytest.approx(sim.simulate(a)["step_time_s"], rel=1e-12)
    assert info["reference_s"] == pytest.approx(reference_cost(sim, "step_time"), rel=1e-12)
    # "pretrained" (gdp only; false starts from scratch)
    _, info = pl.place(sim, "gdp", {"pretrained": False, "steps": 1, "rollouts": 2, "warm_steps": 0}, seed=1)
    assert info["start"] != "pretrained" and info["steps"] == 1, info
    with pytest.raises(ValueError):
        pl.place(sim, "hdp", {"pretrained": False, "steps": 1})


def test_placing_from_a_checkpoint_with_zero_steps_is_the_trained_policy(tmp_path):
    # `"checkpoint"` starts from a trained run, "steps ... 0 from a checkpoint", so placing is the
    # trained policy's own answer; its greedy decode alone (place_samples 0) is the same for any seed
    run("gdp", [small_task()], 2, seed=1, checkpoint=tmp_path / "run", options=TINY["gdp"])
    sim = pl.Simulator(*small_task())
    a, _ = pl.place(sim, "gdp", {"checkpoint": str(tmp_path / "run"), "place_samples": 0}, seed=1)
    b, _ = pl.place(sim, "gdp", {"checkpoint": str(tmp_path / "run" / "checkpoint.json"), "steps": 0,
                                 "place_samples": 0}, seed=9)
    assert np.array_equal(a, b)


CLI = pathlib.Path(__file__).resolve().parents[2] / "build" / "lead-py" / "cli" / "placelab"


@pytest.mark.skipif(not CLI.exists(), reason="no CLI build")
def test_resume_keeps_its_seed(tmp_path):
    # learned.md "the run keeps the seed it started with (a different --seed is an error)"; python.md
    # resume "continues the same run exactly (its seed, ...)": python's seed argument is not taken.
    import subprocess
    d = tmp_path / "run"
    spec = ["train", "--graphs", "random_dag:ops=12,seed=1,width=3", "--cluster", "v100-nvlink-2",
            "--checkpoint", str(d), "--options", '{"rollouts": 2}']
    subprocess.run([str(CLI), *spec, "--policy", "hdp", "--steps", "1", "--seed", "1"], check=True,
                   capture_output=True)
    bad = subprocess.run([str(CLI), *spec, "--steps", "2", "--resume", "--seed", "2"], capture_output=True, text=True)
    assert bad.returncode != 0 and "seed" in bad.stderr
    summary, _ = run("hdp", [("random_dag:ops=12,seed=1,width=3 on v100-nvlink-2", *small_task())], 2, seed=2,
                     checkpoint=d, resume=True)
    assert summary["seed"] == 1 and pl.read_checkpoint(d)["trainer"]["seed"] == 1
