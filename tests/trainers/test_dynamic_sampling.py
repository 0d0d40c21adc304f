"""Dynamic sampling (drop the groups whose outcomes are all equal, draw more) and the sample
budget every record carries, on real tiny trainer runs of the rooms env."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from plugin_runs import ROOT, TINY_RUN, train

from trainers.loop.collector import varied_groups
from trainers.rollouts.rollout import Rollout, StepRecord, Trajectory
from trainers.runs.metrics import read_metrics
from trainers.sharding import select_groups

BASE = TINY_RUN.split()
TIMING = ("time/", "tokens_per_s", "env_steps_per_s")


def _train_records(run: Path) -> list[dict]:
    return [
        {k: v for k, v in r.items() if not k.startswith(TIMING)}
        for r in read_metrics(run / "metrics.jsonl")
        if r.get("kind") == "train"
    ]


def test_varied_groups_keeps_groups_with_differing_outcomes_and_select_groups_keeps_their_steps():
    trajs = [Trajectory(g, i, f"t{g}", "x", outcome=o) for i, (g, o) in enumerate([(0, 0), (0, 0), (1, 0), (1, 1)])]
    steps = [StepRecord(i, 0, f"out{i}", "s", "s2", True, 0.0, True, "go") for i in range(4)]
    steps.append(StepRecord(3, 1, "out4", "s2", "s3", True, 1.0, True, "go"))
    rollout = Rollout(steps=steps, trajectories=trajs)
    assert varied_groups(rollout) == [1]  # all failed (group 0) dropped; all won would be too
    kept = select_groups(rollout, [1])
    assert [(t.group, t.task_id, t.outcome) for t in kept.trajectories] == [(0, "t1", 0), (0, "t1", 1)]
    assert [s.output for s in kept.steps] == ["out2", "out3", "out4"] and [s.traj for s in kept.steps] == [0, 1, 1]
    assert kept.paths() == [[0], [1, 2]]
    assert select_groups(rollout, []).trajectories == []


@pytest.mark.slow  # a trainer or script in a subprocess
def test_every_train_record_carries_the_cumulative_budget(tmp_path):
    assert train(tmp_path, BASE, "--iterations", "2").returncode == 0
    recs = _train_records(tmp_path / "run")
    per_iteration = 8 * 8  # the rooms defaults: 8 groups of 8
    assert [r["budget/episodes"] for r in recs] == [per_iteration, 2 * per_iteration]
    assert recs[0]["budget/env_steps"] == recs[0]["env_steps"]
    assert recs[1]["budget/env_steps"] == recs[0]["env_steps"] + recs[1]["env_steps"]
    assert not any(k.startswith("dynamic/") for r in recs for k in r)


@pytest.fixture(scope="module")
def dynamic_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dynamic")
    proc = train(root, BASE, "--iterations", "3", "--dynamic-sampling", "--max-gen-batches", "3", "--save-every", "1")
    assert proc.returncode == 0, proc.stderr[-2000:]
    return root / "run"


@pytest.mark.slow  # a trainer or script in a subprocess
def test_dynamic_sampling_records_what_it_drew_dropped_and_kept(dynamic_run):
    recs = _train_records(dynamic_run)
    total = 0.0
    for r in recs:
        drawn = r["dynamic/gen_batches"]
        assert 1 <= drawn <= 3
        total += drawn * 64
        assert r["budget/episodes"] == total  # dropped and unused groups are spent too
        assert r["dynamic/groups_kept"] == 8 or drawn == 3  # short only when the batches ran out
        assert r["dynamic/groups_kept"] + r["dynamic/groups_dropped"] + r["dynamic/groups_unused"] == drawn * 8
        assert r["all_failed_frac"] == 0.0 and r["adv/groups"] == r["dynamic/groups_kept"]  # trained on kept only
        assert 0.0 <= r["dynamic/first_all_failed_frac"] <= 1.0
    assert any(r["dynamic/groups_dropped"] > 0 for r in recs)


@pytest.mark.slow  # a trainer or script in a subprocess
def test_dynamic_sampling_is_deterministic_and_resumes_bit_exact(dynamic_run, tmp_path):
    flags = ["--dynamic-sampling", "--max-gen-batches", "3", "--save-every", "1"]
    assert train(tmp_path, BASE, "--iterations", "1", *flags).returncode == 0
    resumed = train(tmp_path, BASE, "--iterations", "3", *flags, "--resume")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert _train_records(tmp_path / "run") == _train_records(dynamic_run)


@pytest.mark.slow  # a trainer or script in a subprocess
def test_its_first_generation_batch_is_the_iteration_a_run_without_it_plays(dynamic_run, tmp_path):
    assert train(tmp_path, BASE, "--iterations", "1").returncode == 0
    plain = _train_records(tmp_path / "run")[0]
    first = _train_records(dynamic_run)[0]
    assert first["dynamic/first_all_failed_frac"] == plain["all_failed_frac"]


@pytest.mark.slow  # a trainer or script in a subprocess
def test_dynamic_sampling_of_a_tree_is_refused_in_one_line(tmp_path):
    proc = train(tmp_path, BASE, "--iterations", "1", "--dynamic-sampling", "--rollout", "tree", "--group-size", "4")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "dynamic_sampling draws flat generation batches" in proc.stderr.strip().splitlines()[-1]


@pytest.mark.slow  # a trainer or script in a subprocess
def test_a_budget_ends_the_run_within_one_generation_batch_and_evaluates_it_as_the_last(tmp_path):
    proc = train(
        tmp_path, BASE, "--iterations", "10", "--budget-episodes", "150", "--dynamic-sampling",
        "--max-gen-batches", "3", "--eval-episodes", "4", "--eval-every", "0",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    recs = read_metrics(tmp_path / "run" / "metrics.jsonl")
    train_recs = [r for r in recs if r["kind"] == "train"]
    spent = train_recs[-1]["budget/episodes"]
    assert 150 <= spent < 150 + 64 and train_recs[-2]["budget/episodes"] < 150
    last_eval = [r for r in recs if r["kind"] == "eval"][-1]
    assert last_eval["iteration"] == train_recs[-1]["iteration"] < 10
    assert (tmp_path / "run" / "summary.md").exists()


@pytest.mark.slow
def test_an_equal_budget_tiny_lab_ends_every_run_within_one_batch_of_the_budget(tmp_path):
    config = tmp_path / "tiny.yaml"
    config.write_text(
        "env: rooms\nmodel: tiny\nwarm_start: none\nmax_steps: 4\nnum_groups: 2\ngroup_size: 4\n"
        "eval_episodes: 4\nbaseline_random: false\neval_extra_split: none\nmax_gen_batches: 4\n"
    )
    proc = subprocess.run(
        [
            sys.executable, "-m", "trainers.lab", "--config", str(config),
            "--methods", "gigpo", "gigpo+dynamic", "progpo-gigpo", "--seeds", "0", "1",
            "--iterations", "40", "--budget-episodes", "48",
            "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
        ],
        capture_output=True, text=True, cwd=ROOT, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    record = json.loads((tmp_path / "out" / "progpo_effect.json").read_text())
    for entry in record["runs"]:
        spent = entry["train"][-1]["sampled_episodes"]
        assert 48 <= spent <= 2 * 48, (entry["method"], spent)
        assert entry["eval"][-1]["sampled_episodes"] == spent  # the curves' x is the episodes sampled
    table = (tmp_path / "out" / "table.md").read_text()
    assert "| gigpo+dynamic | 2 |" in table
    shutil.rmtree(tmp_path / "work", ignore_errors=True)


def test_the_budget_fields_of_a_gathered_run_count_every_rank():
    from trainers.loop.train_record import budget_fields

    rollout = Rollout(trajectories=[Trajectory(0, i, "t", "x") for i in range(6)])
    assert budget_fields(rollout, {}, (10.0, 5.0)) == {"budget/episodes": 16.0, "budget/env_steps": 5.0}
    sampled = {"episodes": 24.0, "env_steps": 40.0, "dynamic/gen_batches": 3.0}
    assert budget_fields(rollout, sampled, (0.0, 0.0)) == {
        "budget/episodes": 24.0,
        "budget/env_steps": 40.0,
        "dynamic/gen_batches": 3.0,
    }
    assert np.isclose(budget_fields(Rollout(), {}, (1.0, 1.0))["budget/episodes"], 1.0)


@pytest.mark.slow  # a trainer in a subprocess
def test_on_webshop_an_iteration_that_keeps_no_group_trains_nothing_and_its_report_says_so(tmp_path):
    base = TINY_RUN.replace("--env rooms", "--env webshop").split()
    proc = train(
        tmp_path, base, "--num-groups", "2", "--group-size", "4", "--max-steps", "6", "--iterations", "1",
        "--dynamic-sampling", "--max-gen-batches", "3",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = _train_records(tmp_path / "run")[0]
    assert rec["dynamic/gen_batches"] == 3 and rec["budget/episodes"] == 24
    # an untrained policy buys nothing at seed 0: every group all-failed, none kept, nothing trained
    assert rec["dynamic/groups_kept"] == 0 and rec["dynamic/groups_dropped"] == 6 and rec["update/steps"] == 0
    assert "Iteration 1 ran out of generation batches" in (tmp_path / "run" / "summary.md").read_text()


# ------------------------------------------------------ the drawing loop, on scripted batches
def _batch(outcomes: list[list[float]], tag: str, seconds: float = 1.0) -> Rollout:
    """A generation batch: per group, its members' outcomes; one step per member whose output
    names the batch, the group and the member."""
    trajs, steps = [], []
    for g, members in enumerate(outcomes):
        for m, o in enumerate(members):
            steps.append(StepRecord(len(trajs), 0, f"{tag}/g{g}/m{m}", "s", "s2", True, o, True, "go"))
            trajs.append(Trajectory(g, m, f"{tag}{g}", "x", outcome=o, won=o >= 1.0, length=1))
    return Rollout(steps=steps, trajectories=trajs, seconds=seconds, response_tokens=len(trajs))


def _collector(batches: list[Rollout], num_groups: int, max_gen_batches: int, failures=None):
    """The collector's drawing loop over ``batches`` (its k-th generation batch is ``batches[k]``)."""
    from types import SimpleNamespace

    from trainers.loop.collector import Rollouts

    c = object.__new__(Rollouts)
    c.cfg = SimpleNamespace(dynamic_sampling=True, num_groups=num_groups, max_gen_batches=max_gen_batches, tau_r=1e-3)
    c.dist = SimpleNamespace(enabled=False)
    c.env_failures, c.drawn = {}, []

    def rollout(iteration, gen_batch=0):
        c.drawn.append((iteration, gen_batch))
        c.env_failures = dict(failures[gen_batch]) if failures else {}
        return batches[gen_batch]

    c.rollout = rollout
    return c


def test_it_keeps_the_first_varied_groups_in_draw_order_and_stops_once_it_has_enough():
    first = _batch([[0, 0], [0, 1], [1, 1]], "a")  # group 1 varies
    second = _batch([[1, 0], [1, 1], [0, 1]], "b")  # groups 0 and 2 vary: one is needed
    third = _batch([[0, 1]], "c")
    c = _collector(
        [first, second, third],
        num_groups=2,
        max_gen_batches=5,
        failures=[{"env/crashed": 1.0}, {"env/crashed": 2.0}, {}],
    )
    out = c.collect(iteration=7)
    assert c.drawn == [(7, 0), (7, 1)]  # full after the second batch: no third
    assert [s.output for s in out.steps] == ["a/g1/m0", "a/g1/m1", "b/g0/m0", "b/g0/m1"]
    assert [(t.group, t.outcome) for t in out.trajectories] == [(0, 0), (0, 1), (1, 1), (1, 0)]
    assert out.sampling == {
        "episodes": 12.0,
        "env_steps": 12.0,
        "dynamic/gen_batches": 2.0,
        "dynamic/groups_kept": 2.0,
        "dynamic/groups_dropped": 3.0,  # a's groups 0 and 2, b's group 1
        "dynamic/groups_unused": 1.0,  # b's group 2: varied, not needed
        "dynamic/first_all_failed_frac": 1 / 3,  # the first batch alone (the second has none)
        "dynamic/sampled_success": 7 / 12,  # every episode drawn
        "dynamic/sampled_all_failed_frac": 1 / 6,
    }
    assert c.env_failures == {"env/crashed": 3.0} and out.seconds == 2.0 and out.response_tokens == 12


def test_it_trains_on_what_it_kept_after_max_gen_batches_and_draws_no_batch_past_the_budget():
    flat = [_batch([[0, 0], [0, 1]], tag) for tag in "abcd"]
    c = _collector(flat, num_groups=4, max_gen_batches=3)
    out = c.collect(iteration=1)
    assert c.drawn == [(1, 0), (1, 1), (1, 2)] and len({t.group for t in out.trajectories}) == 3
    assert out.sampling["dynamic/groups_kept"] == 3.0 and out.sampling["episodes"] == 12.0
    c = _collector(flat, num_groups=4, max_gen_batches=4)
    c.collect(iteration=1, budget_left=8)  # two batches of 4 episodes spend it: no third
    assert c.drawn == [(1, 0), (1, 1)]
    c = _collector(flat, num_groups=4, max_gen_batches=4)
    c.collect(iteration=1, budget_left=9)
    assert c.drawn == [(1, 0), (1, 1), (1, 2)]
    c = _collector(flat, num_groups=4, max_gen_batches=4)
    c.collect(iteration=1, budget_left=0)  # the first batch is always drawn
    assert c.drawn == [(1, 0)]


def test_a_batch_with_no_varied_group_keeps_nothing_of_it_and_without_the_option_one_batch_is_played():
    c = _collector([_batch([[0, 0]], "a"), _batch([[1, 1]], "b")], num_groups=1, max_gen_batches=2)
    out = c.collect(iteration=3)
    assert out.trajectories == [] and out.steps == [] and out.sampling["dynamic/groups_dropped"] == 2.0
    c = _collector([_batch([[0, 0]], "a")], num_groups=1, max_gen_batches=2)
    c.cfg.dynamic_sampling = False
    assert c.collect(iteration=3).sampling == {} and c.drawn == [(3, 0)]
    c.cfg.dynamic_sampling, c.dist.enabled = True, True
    with pytest.raises(Exception, match="without torchrun"):
        c.collect(iteration=3)
