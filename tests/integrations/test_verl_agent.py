"""trainers.integrations.verl_agent without verl-agent: the env manager's contract on a toy env and
the real ALFWorld engine, the signals it records, the estimator branch on a verl-agent-shaped
batch. verl-agent's own loop is exercised by ``scripts/check_verl_agent.py`` (needs a checkout)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from progpo_envs.rooms import TextRoomsEnv
from trainers.advantages import AdvantageConfig, episode_advantages, factorize, step_advantages
from trainers.integrations.verl import MissingColumnsError
from trainers.integrations.verl_agent import (
    ProGPOEnvironmentManager,
    alfworld_projection,
    compute_advantage_branch,
    make_manager,
    webshop_projection,
)
from wrappers import CanonicalizeObservation, FirstVisitCoverage, GroupVectorEnv

sys.path.insert(0, str(Path(__file__).parent))
from step_rows import step_rows

ANSWER = "<think>go on</think><action>{}</action>"


def toy_manager(groups: int = 2, size: int = 2, max_steps: int = 6, anchor: str = "raw") -> ProGPOEnvironmentManager:
    envs = GroupVectorEnv(
        lambda: FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv(max_steps=max_steps))),
        groups,
        size,
        seed=3,
        autoreset=False,
    )
    return ProGPOEnvironmentManager(envs, alfworld_projection, {"env": {"history_length": 2}}, anchor=anchor)


def test_projections_have_verl_agents_signatures_and_parse_the_format() -> None:
    assert alfworld_projection([ANSWER.format("go hall"), "go hall", "<action>x</action>"], [[], [], []]) == (
        ["go hall", "go hall", "x"],
        [1, 0, 0],
    )  # no <think>: invalid, as in verl-agent
    cmds, valids = webshop_projection([ANSWER.format("click[buy now]")])
    assert cmds == ["click[buy now]"] and valids == [1]


def test_reset_gives_the_whole_user_turn_and_raw_anchors() -> None:
    mgr = toy_manager()
    obs, infos = mgr.reset(kwargs=None)
    assert len(obs["text"]) == len(obs["anchor"]) == len(infos) == 4 and obs["image"] is None
    text = obs["text"][0]
    assert obs["anchor"][0] in text and "admissible actions" in text and "'look'" in text and "<action>" in text
    assert obs["anchor"][0].startswith("You are in the")  # the raw observation, as verl-agent's GiGPO groups
    assert toy_manager(anchor="canonical").reset()[0]["anchor"][0] == infos[0]["canonical_obs"]
    with pytest.raises(ValueError, match="anchor"):
        toy_manager(anchor="hash")
    with pytest.raises(ValueError, match="autoreset=False"):
        ProGPOEnvironmentManager(GroupVectorEnv(TextRoomsEnv, 1, 2, seed=0), alfworld_projection, None)


def test_history_reaches_the_next_turn() -> None:
    mgr = toy_manager()
    obs, infos = mgr.reset()
    first = obs["anchor"][0]
    go = next(c for c in infos[0]["admissible_commands"] if c.startswith("go "))
    obs, *_ = mgr.step([ANSWER.format(go)] * 4)
    assert f"Action 1: '{go}'" in obs["text"][0] and first in obs["text"][0]


def test_finished_groups_are_held_and_signals_align() -> None:
    mgr = toy_manager(groups=2, size=2, max_steps=4)
    obs, infos = mgr.reset()
    tasks = [i["task_id"] for i in infos]
    dones_seen = []
    for step in range(6):
        # group 0 takes an invalid answer (no tags) then keeps looking; group 1 walks
        answers = ["look", ANSWER.format("look")] + [
            ANSWER.format(c) for c in (next(x for x in mgr.admissible(i) if x.startswith("go ")) for i in (2, 3))
        ]
        obs, rewards, dones, infos = mgr.step(answers)
        dones_seen.append(dones.copy())
        assert [i.get("task_id") for i in infos] == tasks  # no new task drawn while the batch runs
        if step == 0:
            assert not infos[0]["is_action_valid"] and infos[1]["is_action_valid"]
    assert dones_seen[3].all() and not dones_seen[2].any()  # truncated at 4 steps, then held
    assert (rewards == 0).all()
    signals = mgr.progpo_signals()
    assert [len(s) for s in signals] == [6] * 4
    assert [r["progpo_step"] for r in signals[2]] == [0, 1, 2, 3, -1, -1]
    assert not any(r["progpo_first_visit"] for r in signals[1])  # "look" never reaches a new state
    assert any(r["progpo_first_visit"] for r in signals[2][:4])  # walking does
    assert signals[1][0]["progpo_coverage_rate"] == 0.0 < signals[2][0]["progpo_coverage_rate"]
    evaluated = mgr.success_evaluator(total_infos=[[i] for i in infos], total_batch_list=[[{"active_masks": True}]] * 4)
    assert evaluated["success_rate"].tolist() == [0.0] * 4


def _verl_agent_batch(rng: np.random.Generator, duplicate: int = 3):
    """verl-agent's layout: one row per step, ``uid`` = group, ``traj_uid``; the last rows copied as
    ``adjust_batch`` copies rows to fill the batch."""
    lengths, traj, t, anchors, first = step_rows(rng)
    outcome = np.zeros(8)
    outcome[5] = 1.0  # group 1 has a success, group 0 is all-failed
    cover = rng.uniform(size=8).round(3)
    group = np.repeat(np.arange(2), 4)
    rows = np.concatenate([np.arange(traj.size), np.arange(traj.size - duplicate, traj.size)])
    ntb = {
        "uid": np.array([f"g{k}" for k in group[traj]], dtype=object)[rows],
        "traj_uid": np.array([f"t{k}" for k in traj], dtype=object)[rows],
        "anchor_obs": anchors[rows],
        "progpo_first_visit": first[rows],
        "progpo_step": t[rows],
        "progpo_outcome": outcome[traj][rows],
        "progpo_coverage_rate": cover[traj][rows],
        "progpo_turns": lengths[traj][rows],
    }
    mask = torch.ones(rows.size, 3)
    data = SimpleNamespace(
        batch={"response_mask": mask, "token_level_rewards": torch.zeros(rows.size, 3)}, non_tensor_batch=ntb
    )
    return data, (traj, t, anchors, first, outcome, cover, group, rows)


def _trainers_steps(outcome, group, traj, t, anchors, first, config, **kw):
    """What the trainer computes for these steps: the reference the branch must equal."""
    steps = step_advantages(
        outcome, group, traj, t, state_ids=factorize(list(anchors)), first_visit=first, config=config, **kw
    )
    return steps.steps


def test_estimator_branch_equals_trainers_advantages_and_dedupes_copies() -> None:
    calls = []

    def verl_agent_original(data, adv_estimator, gamma=1.0, *args, **kwargs):
        calls.append(adv_estimator)
        return data

    branch = compute_advantage_branch(verl_agent_original)
    data, (traj, t, anchors, first, outcome, cover, group, rows) = _verl_agent_batch(np.random.default_rng(0))
    out = branch(data, "progpo_gigpo", gamma=0.95, step_advantage_w=1.0)
    want = _trainers_steps(
        outcome, group, traj, t, anchors, first, AdvantageConfig(estimator="progpo-gigpo", gamma=0.95)
    )
    np.testing.assert_allclose(out.batch["advantages"][:, 0].numpy(), want[rows], atol=1e-6)
    data, _ = _verl_agent_batch(np.random.default_rng(0))
    out = branch(data, "progpo_grpo", gamma=0.95)
    want = episode_advantages(outcome, group, cover, estimator="progpo-grpo")
    np.testing.assert_allclose(out.batch["advantages"][:, 0].numpy(), want[traj][rows], atol=1e-6)
    branch(data, "gigpo")  # verl-agent's own estimators go to its own code
    assert calls == ["gigpo"]
    data.non_tensor_batch.pop("progpo_step")
    with pytest.raises(MissingColumnsError, match="progpo_gigpo: non_tensor_batch lacks progpo_step"):
        branch(data, "progpo_gigpo")


@pytest.mark.parametrize("name", ["planpo", "progpo_planpo", "hgpo", "progpo_hgpo"])
def test_estimator_branch_runs_planpo_and_hgpo_as_trainers_advantages(name: str) -> None:
    branch = compute_advantage_branch(lambda data, *a, **k: data, {"planpo_alpha": 0.05, "hgpo_depth": 1})
    data, (traj, t, anchors, first, outcome, cover, group, rows) = _verl_agent_batch(np.random.default_rng(1))
    outcome = outcome.copy()
    outcome[4] = 1.0  # two successes of different lengths in group 1 (rows carry the old outcome: rebuild them)
    data.non_tensor_batch["progpo_outcome"] = outcome[traj][rows]
    cover = np.bincount(traj, weights=first) / np.bincount(traj)  # the env's coverage rate of each episode
    data.non_tensor_batch["progpo_coverage_rate"] = cover[traj][rows]
    resp = (np.arange(rows.size) % 3) + 1  # response tokens of each row (PlanPO's turn lengths)
    data.batch["response_mask"] = (torch.arange(3)[None, :] < torch.as_tensor(resp)[:, None]).float()
    out = branch(data, name, gamma=0.95, step_advantage_w=1.0)
    n = traj.size
    cfg = AdvantageConfig(estimator=name.replace("_", "-"), gamma=0.95, planpo_alpha=0.05, hgpo_depth=1)
    want = _trainers_steps(outcome, group, traj, t, anchors, first, cfg, response_lengths=resp[:n].astype(float))
    got = out.batch["advantages"]
    np.testing.assert_allclose(got[:, 0].numpy(), want[rows], atol=1e-6)
    assert torch.all(got[data.batch["response_mask"] == 0] == 0) and np.abs(want).max() > 0.1


@pytest.mark.slow
def test_manager_on_the_real_alfworld_engine(alfworld_engine_available: None) -> None:
    mgr = make_manager("alfworld", 1, 2, split="easy-train", max_steps=3, seed=0, backend="sync")
    obs, infos = mgr.reset()
    assert "Your task is to" in obs["text"][0] and "go to" in obs["text"][0]
    assert obs["anchor"][0].startswith("-= Welcome to TextWorld, ALFRED! =-")
    for _ in range(4):
        go = [next(c for c in mgr.admissible(i) if c.startswith("go to")) for i in range(2)]
        obs, rewards, dones, infos = mgr.step([ANSWER.format(c) for c in go])
    assert dones.all() and all("group_all_failed" in i or d for i, d in zip(infos, dones))
    assert [r["progpo_step"] for r in mgr.progpo_signals()[0]] == [0, 1, 2, -1]
    assert mgr.progpo_signals()[0][0]["progpo_first_visit"]  # arriving somewhere new
    mgr.close()


def test_docstring_examples() -> None:
    import doctest

    import trainers.integrations.verl as verl_mod
    import trainers.integrations.verl_agent as agent_mod

    for module in (verl_mod, agent_mod):
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.attempted > 0 and result.failed == 0, module.__name__
