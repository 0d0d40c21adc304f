"""trainers.integrations.verl: estimators vs trainers.advantages on the same tensors, the error
without columns; registration with the real verl (marker ``verl``: its own venv)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import torch

from trainers.advantages import AdvantageConfig, episode_advantages, factorize, step_advantages
from trainers.integrations.verl import (
    ESTIMATOR_NAMES,
    ESTIMATORS,
    REQUIRED_COLUMNS,
    MissingColumnsError,
    advantage_per_row,
    compute_progpo_gigpo_advantage,
    compute_progpo_grpo_advantage,
    compute_progpo_shaped_grpo_advantage,
)

# verl 0.9.1 core_algos.compute_grpo_outcome_advantage / compute_advantage, as read from its source:
VERL_ESTIMATOR_KWARGS = ("token_level_rewards", "response_mask", "index", "config")


def _batch(rng: np.random.Generator, groups: int = 6, g: int = 4, length: int = 7):
    outcome = np.where(rng.uniform(size=groups * g) < 0.2, 1.0, 0.0)
    outcome[: 2 * g] = 0.0  # two all-failed groups at least
    cover = rng.uniform(size=groups * g).round(3)
    index = np.repeat(np.array([f"uid-{k}" for k in range(groups)], dtype=object), g)
    mask = (torch.arange(length)[None, :] < torch.as_tensor(rng.integers(1, length + 1, groups * g))[:, None]).float()
    rewards = torch.zeros(groups * g, length)
    last = mask.sum(-1).long() - 1
    rewards[torch.arange(groups * g), last] = torch.as_tensor(outcome, dtype=torch.float32)
    return rewards, mask, index, outcome, cover


def test_estimator_signatures_accept_what_verl_passes() -> None:
    for fn in (ESTIMATORS[name] for name in REQUIRED_COLUMNS):
        params = inspect.signature(fn).parameters
        assert all(k in params for k in VERL_ESTIMATOR_KWARGS)
        assert "non_tensor_batch" in params


def test_progpo_grpo_estimator_equals_trainers_advantages() -> None:
    rewards, mask, index, outcome, cover = _batch(np.random.default_rng(0))
    adv, ret = compute_progpo_grpo_advantage(
        rewards, mask, index, non_tensor_batch={"progpo_outcome": outcome, "progpo_coverage_rate": cover, "uid": index}
    )
    want = episode_advantages(outcome, index, cover, estimator="progpo-grpo")
    assert adv.shape == rewards.shape and torch.equal(adv, ret)
    np.testing.assert_allclose(
        adv.numpy(), (torch.as_tensor(want, dtype=torch.float32)[:, None] * mask).numpy(), atol=1e-6
    )
    assert torch.all(adv[mask == 0] == 0)
    # Without the columns: one clear error, never GRPO on the token rewards.
    with pytest.raises(
        MissingColumnsError,
        match="progpo_grpo: non_tensor_batch lacks progpo_outcome, "
        "progpo_coverage_rate .no non_tensor_batch was passed.; verl 0.9: `pip install progpo.verl.`",
    ):
        compute_progpo_grpo_advantage(rewards, mask, index)
    # Reward shaping is its own estimator: GRPO (population std) on rewards already progress-conditioned.
    adv2, _ = compute_progpo_shaped_grpo_advantage(rewards, mask, index)
    np.testing.assert_allclose(adv2[:, 0].numpy(), episode_advantages(outcome, index, estimator="grpo"), atol=1e-6)


def test_progpo_grpo_counts_each_trajectory_once_over_step_rows() -> None:
    """verl-agent's layout: one row per step; a long trajectory must not weigh more in the group."""
    outcome = np.array([0.0, 0.0, 0.0])
    cover = np.array([0.2, 0.5, 0.8])
    lengths = np.array([1, 5, 2])
    traj = np.repeat(np.arange(3), lengths)
    ntb = {
        "traj_uid": np.array([f"t{k}" for k in traj], dtype=object),
        "progpo_outcome": outcome[traj],
        "progpo_coverage_rate": cover[traj],
    }
    adv, _ = compute_progpo_grpo_advantage(
        torch.zeros(traj.size, 2),
        torch.ones(traj.size, 2),
        np.array(["g"] * traj.size, dtype=object),
        non_tensor_batch=ntb,
    )
    want = episode_advantages(outcome, np.zeros(3, dtype=int), cover, estimator="progpo-grpo")
    np.testing.assert_allclose(adv[:, 0].numpy(), want[traj], atol=1e-6)


def test_progpo_gigpo_estimator_equals_step_advantages() -> None:
    ntb, mask, index, trainer = _step_batch(1, outcome=(0, 0, 0, 0, 1, 0, 0, 0))
    rewards = torch.zeros(mask.shape)
    adv, _ = compute_progpo_gigpo_advantage(rewards, mask, index, non_tensor_batch=ntb)
    trainer.pop("response_lengths")
    want = step_advantages(**trainer, config=AdvantageConfig(estimator="progpo-gigpo")).steps
    np.testing.assert_allclose(adv[:, 0].numpy(), want, atol=1e-6)
    with pytest.raises(MissingColumnsError, match="progpo_gigpo: non_tensor_batch lacks traj_uid, anchor_obs"):
        compute_progpo_gigpo_advantage(rewards, mask, index)


def _step_batch(seed: int, outcome: tuple[float, ...] = (1, 0, 1, 0, 0, 0, 0, 0)):
    """verl-agent's layout: one row per step of 8 trajectories in 2 groups (by default group 0
    mixed, group 1 all failed)."""
    rng = np.random.default_rng(seed)
    n_traj, groups = 8, 2
    lengths = rng.integers(2, 6, n_traj)
    step_traj = np.repeat(np.arange(n_traj), lengths)
    step_t = np.concatenate([np.arange(k) for k in lengths])
    anchors = np.array([f"s{v}" for v in rng.integers(0, 3, step_traj.size)], dtype=object)
    first_visit = rng.uniform(size=step_traj.size) < 0.5
    outcome = np.array(outcome, dtype=float)
    cover = np.bincount(step_traj, weights=first_visit) / lengths  # the episode's coverage rate, as the env reports it
    traj_group = np.repeat(np.arange(groups), n_traj // groups)
    resp = rng.integers(3, 9, step_traj.size)  # response tokens of each step row
    mask = (torch.arange(10)[None, :] < torch.as_tensor(resp)[:, None]).float()
    ntb = {
        "traj_uid": np.array([f"t{k}" for k in step_traj], dtype=object),
        "anchor_obs": anchors,
        "progpo_first_visit": first_visit,
        "progpo_step": step_t,
        "progpo_outcome": outcome[step_traj],
        "progpo_coverage_rate": cover[step_traj],
        "progpo_turns": lengths[step_traj],
    }
    trainer = dict(
        outcomes=outcome,
        traj_group=traj_group,
        step_traj=step_traj,
        step_index=step_t,
        state_ids=factorize(list(anchors)),
        first_visit=first_visit,
        response_lengths=resp.astype(float),
    )
    return ntb, mask, traj_group[step_traj].astype(str), trainer


@pytest.mark.parametrize("name", ["planpo", "progpo_planpo", "hgpo", "progpo_hgpo"])
def test_new_estimators_equal_step_advantages_on_step_rows(name: str) -> None:
    ntb, mask, index, trainer = _step_batch(4)
    config = {
        "planpo_alpha": 0.07,
        "hgpo_depth": 3,
        "hgpo_fusion": "inverse-variance",
        "hgpo_potential_credit": name.endswith("hgpo"),
    }
    adv, ret = ESTIMATORS[name](torch.zeros_like(mask), mask, index, config=config, non_tensor_batch=ntb)
    cfg = AdvantageConfig(
        estimator=name.replace("_", "-"),
        planpo_alpha=0.07,
        hgpo_depth=3,
        hgpo_fusion="inverse-variance",
        potential_credit=name.endswith("hgpo"),
    )
    want = step_advantages(**trainer, config=cfg).steps
    assert torch.equal(adv, ret) and torch.all(adv[mask == 0] == 0)
    np.testing.assert_allclose(adv[:, 0].numpy(), want, atol=1e-6)
    assert np.abs(want).max() > 0.1
    # the row scalar that verl-agent's branch calls is the same
    np.testing.assert_allclose(
        advantage_per_row(name, index, ntb, config=config, response_lengths=mask.sum(-1).numpy()), want, atol=1e-12
    )
    # Without the columns: one clear line naming them.
    missing = {k: v for k, v in ntb.items() if k != REQUIRED_COLUMNS[name][-1]}
    with pytest.raises(MissingColumnsError, match=f"{name}: non_tensor_batch lacks {REQUIRED_COLUMNS[name][-1]}"):
        ESTIMATORS[name](torch.zeros_like(mask), mask, index, non_tensor_batch=missing)


def test_planpo_on_trajectory_rows_is_the_trajectory_term() -> None:
    """verl 0.9's layout: one row per episode; the turn term needs step rows, so it is absent."""
    outcome = np.array([1.0, 1.0, 0.0, 0.0, 0.0, 0.0])
    turns = np.array([3, 6, 9, 4, 5, 6])
    cover = np.array([0.1, 0.2, 0.3, 0.5, 0.2, 0.2])
    index = np.array(["a", "a", "a", "b", "b", "b"], dtype=object)
    ntb = {"progpo_outcome": outcome, "progpo_turns": turns, "progpo_coverage_rate": cover}
    for name in ("planpo", "progpo_planpo"):
        adv, _ = ESTIMATORS[name](torch.zeros(6, 4), torch.ones(6, 4), index, non_tensor_batch=ntb)
        want = episode_advantages(outcome, index, cover, estimator=name.replace("_", "-"), turns=turns)
        np.testing.assert_allclose(adv[:, 0].numpy(), want, atol=1e-6)
    assert adv[3:, 0].abs().max() > 0.5  # progpo_planpo: the all-failed group gets the progress term


@pytest.mark.verl
def test_register_with_real_verl() -> None:
    core_algos = pytest.importorskip(
        "verl.trainer.ppo.core_algos", reason="verl not installed (extra [verl], own venv)"
    )
    from trainers.integrations.verl import register

    register()
    register()  # idempotent
    for name in ESTIMATOR_NAMES:
        fn = core_algos.get_adv_estimator_fn(name)
        assert fn is ESTIMATORS[name] and fn.__name__ == f"compute_{name}_advantage"
    rewards, mask, index, outcome, cover = _batch(np.random.default_rng(2))
    # Called as verl's compute_advantage calls a registered estimator (verl 0.9.1 ray_trainer.py):
    adv, _ = core_algos.get_adv_estimator_fn("progpo_shaped_grpo")(
        token_level_rewards=rewards, response_mask=mask, index=index, config=None
    )
    np.testing.assert_allclose(adv[:, 0].numpy(), episode_advantages(outcome, index, estimator="grpo"), atol=1e-6)
    # verl's own GRPO on the same tensors: same ranking, unbiased std (differs by sqrt((G-1)/G)).
    verl_adv, _ = core_algos.compute_grpo_outcome_advantage(rewards, mask, index)
    g = 4
    np.testing.assert_allclose(verl_adv[:, 0].numpy() * np.sqrt(g / (g - 1)), adv[:, 0].numpy(), atol=1e-4)
