"""Tree rollouts: forks by replay on the real envs, the clear line for an env that cannot be
branched, the decision budget, the shared-prefix credit rule, and training with every estimator."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from fake_policy import FakeScoringPolicy
from tiny_config import config_for_tests

from agents.contract import StepOutput
from trainers.advantages import ESTIMATORS, AdvantageConfig, step_advantages
from trainers.envs import make_env_fn
from trainers.loop.trainer import Trainer
from trainers.rollouts.rollout import Rollout, StepRecord, Trajectory
from trainers.rollouts.tree_rollout import (
    CoverageScorer,
    NondeterministicEnvError,
    RandomScorer,
    TreeConfig,
    collect_tree_rollout,
)
from wrappers import GroupVectorEnv


class RandomAdmissible:
    """A scripted policy: a seeded random admissible command (``look`` and ``inventory`` left out
    where there is another), so that branches differ."""

    def act(self, observations, infos, histories=None, *, seed=None):
        rng = random.Random(seed)
        out = []
        for info in infos:
            cmds = (
                [c for c in info.get("admissible_commands", []) if c not in ("look", "inventory")]
                or list(info.get("admissible_commands", []))
                or ["look"]
            )
            out.append(StepOutput(action=rng.choice(sorted(cmds))))
        return out


@pytest.mark.slow
@pytest.mark.parametrize("env_name,split", [("alfworld", "easy-train"), ("webshop", "train")])
def test_forks_replay_the_recorded_observations_on_real_envs(env_name, split, request):
    if env_name == "alfworld":
        request.getfixturevalue("alfworld_engine_available")
    envs = GroupVectorEnv(make_env_fn(env_name, split, max_steps=8), num_groups=2, group_size=4, seed=0)
    try:
        tasks = [11, 12]
        cfg = TreeConfig(branches=2, interval=2, children=2, top_k=2)
        rollout = collect_tree_rollout(envs, RandomAdmissible(), tasks, seed=3, cfg=cfg, max_steps=8)
        stats = rollout.tree_stats
        assert stats["rollout/forks"] > 0 and stats["rollout/replay_steps"] > 0  # every fork checked its replay
        # forked children share their parent's prefix: some step belongs to two leaves
        rows = rollout.row_steps()
        assert np.bincount(rows).max() >= 2
        # a leaf's path, replayed by hand on a fresh env, gives the recorded observations
        env = envs.pool.envs[0]
        for j, path in enumerate(rollout.paths()[:4]):
            obs, info = env.reset(seed=tasks[rollout.trajectories[j].group])
            for i in path:
                assert str(info.get("canonical_obs", obs)) == rollout.steps[i].state
                obs, _, term, trunc, info = env.step(rollout.steps[i].action)
                assert str(info.get("canonical_obs", obs)) == rollout.steps[i].next_state
        with pytest.raises(RuntimeError, match="reset"):  # the vector env knows its members moved
            envs.step([""] * envs.num_envs)
    finally:
        envs.close()


class Noisy(gym.Env):
    """A toy env whose observations depend on an unseeded draw: it cannot be branched."""

    observation_space = gym.spaces.Text(64)
    action_space = gym.spaces.Text(64)
    metadata: dict = {}

    def __init__(self) -> None:
        self.rng = np.random.default_rng()
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return "start", {"admissible_commands": ["a", "b"]}

    def step(self, action):
        self.t += 1
        return f"room {self.rng.integers(10**9)}", 0.0, False, self.t >= 6, {"admissible_commands": ["a", "b"]}


def test_a_nondeterministic_env_cannot_be_branched():
    envs = GroupVectorEnv(Noisy, num_groups=1, group_size=4, seed=0)
    try:
        with pytest.raises(
            NondeterministicEnvError, match="replaying step 0 .* cannot be branched .use --rollout flat."
        ):
            collect_tree_rollout(
                envs, RandomAdmissible(), [5], seed=0, cfg=TreeConfig(branches=2, interval=2), max_steps=6
            )
    finally:
        envs.close()


def test_an_env_error_inside_a_tree_leaves_the_vector_env_needing_a_reset():
    envs = GroupVectorEnv(Noisy, num_groups=1, group_size=4, seed=0)
    try:
        envs.reset(seed=0)
        with pytest.raises(NondeterministicEnvError):
            collect_tree_rollout(
                envs, RandomAdmissible(), [5], seed=0, cfg=TreeConfig(branches=2, interval=2), max_steps=6
            )
        with pytest.raises(RuntimeError, match="reset"):  # its members were moved one by one: its view is stale
            envs.step(["look"] * 4)
    finally:
        envs.close()


@pytest.mark.parametrize("budget,branches", [(1, 4), (3, 4), (1, 2)])
def test_a_budget_below_the_branches_is_refused_before_any_branch_starts(budget, branches):
    """Branches cut before their first decision would be leaves that never played, counted as failures."""
    from trainers.config import ConfigError

    with pytest.raises(ValueError, match=f"tree_budget {budget} < tree_branches {branches}"):
        TreeConfig(branches=branches, budget=budget)
    with pytest.raises(ConfigError, match="tree_budget"):
        config_for_tests(rollout="tree", group_size=4, tree_branches=branches, tree_budget=budget)
    TreeConfig(branches=branches, budget=branches)  # one decision a branch: allowed


@pytest.mark.parametrize("budget", [0, 7, 13, 30])
def test_decisions_never_exceed_the_budget(budget):
    g, max_steps = 6, 10
    envs = GroupVectorEnv(make_env_fn("rooms", "train", max_steps=max_steps), num_groups=3, group_size=g, seed=0)
    try:
        cfg = TreeConfig(branches=3, interval=2, children=3, top_k=2, budget=budget)
        rollout = collect_tree_rollout(envs, RandomAdmissible(), [1, 2, 3], seed=1, cfg=cfg, max_steps=max_steps)
        cap = budget or g * max_steps
        per_tree = np.bincount([rollout.trajectories[s.traj].group for s in rollout.steps], minlength=3)
        assert per_tree.max() <= cap and per_tree.min() > 0
        assert rollout.tree_stats["rollout/decisions"] == len(rollout.steps) == per_tree.sum()
        assert all(len(p) <= max_steps for p in rollout.paths())
        if budget and budget < 3 * max_steps:
            assert rollout.tree_stats["rollout/budget_cut"] > 0
    finally:
        envs.close()


def _step(t: int, state: str, action: str, fv: bool = True, reward: float = 0.0) -> StepRecord:
    return StepRecord(
        traj=0,
        t=t,
        output=StepOutput(action=action),
        state=state,
        next_state=state + "'",
        first_visit=fv,
        reward=reward,
        valid=True,
        action=action,
    )


def test_a_shared_step_gets_the_mean_of_its_leaves_advantages():
    # one task: steps 0-1 shared; leaf A = 0, 1, 2 (won), leaf B = 0, 1, 3, 4 (lost), leaf C = 0, 5 (lost)
    steps = [
        _step(0, "s0", "a"),
        _step(1, "s1", "b"),
        _step(2, "s2", "c", reward=1.0),
        _step(2, "s2", "d"),
        _step(3, "s3", "e"),
        _step(1, "s4", "f"),
    ]
    rollout = Rollout(
        steps=steps,
        trajectories=[
            Trajectory(0, 0, "t", "x", outcome=1.0, length=3, won=True),
            Trajectory(0, 1, "t", "x", outcome=0.0, length=4),
            Trajectory(0, 2, "t", "x", outcome=0.0, length=2),
        ],
        rows=[(j, i) for j, path in enumerate([[0, 1, 2], [0, 1, 3, 4], [0, 5]]) for i in path],
    )
    arrays = rollout.advantage_inputs()
    assert arrays["step_traj"].tolist() == [0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert arrays["step_index"].tolist() == [0, 1, 2, 0, 1, 2, 3, 0, 1]
    rows = step_advantages(**arrays, config=AdvantageConfig(estimator="grpo")).steps
    merged = rollout.merge_rows(rows)
    a_won, a_lost = rows[0], rows[3]  # GRPO: every row of a leaf carries the leaf's advantage
    assert merged[0] == pytest.approx((a_won + 2 * a_lost) / 3)  # in all three leaves
    assert merged[1] == pytest.approx((a_won + a_lost) / 2)  # in A and B
    assert (
        merged[2] == pytest.approx(a_won) and merged[4] == pytest.approx(a_lost) and merged[5] == pytest.approx(a_lost)
    )
    # GiGPO: the shared prefix fills anchor groups at the fork (s2 reached by A and B)
    gi = rollout.merge_rows(step_advantages(**arrays, config=AdvantageConfig(estimator="gigpo")).steps)
    assert gi[2] > gi[3]


def test_scorers():
    from types import SimpleNamespace as Partial  # what a scorer reads: first-visit flags and actions

    looping = Partial(first_visits=[True, False, False, False], actions=["a", "b", "a", "b"])
    exploring = Partial(first_visits=[True, True, True, False], actions=["a", "b", "c", "d"])
    s = CoverageScorer(loop_penalty=0.5).score([looping, exploring])
    assert s.tolist() == pytest.approx([0.25 - 0.5 * 0.5, 0.75])
    r1, r2 = RandomScorer(3).score([looping, exploring]), RandomScorer(3).score([looping, exploring])
    assert r1.tolist() == r2.tolist() and len(set(r1.tolist())) == 2
    with pytest.raises(ValueError, match="tree_scorer"):
        TreeConfig(scorer="best")  # type: ignore[arg-type]  # a wrong value on purpose: it must be refused


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_tree_rollout_trains_with_every_estimator(tmp_path, estimator):
    flags = (
        "--group-size 4 --max-steps 6 --lr 0.05 --rollout tree --tree-branches 2 --tree-interval 2 --eval-episodes 0"
    )
    cfg = config_for_tests(flags, output_dir=str(tmp_path), estimator=estimator)
    tr = Trainer(cfg, policy=FakeScoringPolicy(seed=0))
    tr.train()
    train = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r.get("kind") == "train"]
    assert [r["iteration"] for r in train] == [1, 2]
    for r in train:
        assert r["rollout/decisions"] <= 2 * 4 * 6 and r["rollout/leaves"] >= 4
        assert r["rollout/forks"] > 0 and r["update/steps"] >= 0


@pytest.mark.slow
@pytest.mark.parametrize(
    "env,extra",
    [
        ("rooms", ["--group-size", "8", "--max-steps", "12"]),
        ("alfworld", ["--group-size", "8", "--max-steps", "10", "--bc-steps", "5", "--tree-scorer", "random"]),
    ],
)
def test_two_tree_iterations_from_the_cli(tmp_path, env, extra, request):
    if env == "alfworld":
        request.getfixturevalue("alfworld_engine_available")
    from trainers.cli.train import main

    model = ["--model", "tiny"] if env == "rooms" else []
    assert (
        main(
            [
                "--env",
                env,
                *model,
                *"--rollout tree --iterations 2 --num-groups 2 --eval-episodes 4 --output-dir".split(),
                str(tmp_path / "run"),
                *"--no-progress-bars --no-tensorboard --no-baseline-random --eval-extra-split none".split(),
                *extra,
            ]
        )
        == 0
    )
    train = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r.get("kind") == "train"]
    assert len(train) == 2 and all(r["rollout/replay_steps"] > 0 for r in train)


def test_the_multiprocess_pool_grows_the_same_tree():
    """The async member pool (one process per member) forks the same way as the sync one."""
    trees = []
    for backend in ("sync", "async"):
        envs = GroupVectorEnv(
            make_env_fn("rooms", "train", max_steps=8), num_groups=2, group_size=4, seed=0, backend=backend
        )
        try:
            rollout = collect_tree_rollout(
                envs, RandomAdmissible(), [4, 9], seed=2, cfg=TreeConfig(branches=2, interval=2), max_steps=8
            )
        finally:
            envs.close()
        trees.append(
            ([(s.t, s.state, s.action, s.next_state) for s in rollout.steps], rollout.rows, rollout.tree_stats)
        )
    assert trees[0] == trees[1] and trees[0][2]["rollout/forks"] > 0
