"""trainers.integrations.trl: TRL's group normalisation of the progress-conditioned reward gives
ProGPO(GRPO)'s episode advantages; GRPOTrainer runs on both envs through the rollout_func."""

from __future__ import annotations

import math

import numpy as np
import pytest

from trainers.advantages import episode_advantages, progpo_episode_advantages
from trainers.integrations.trl import (
    make_planpo_reward,
    make_progress_conditioned_reward,
    planpo_values,
    progpo_advantage_reward,
    progress_conditioned_reward,
    progress_conditioned_values,
    trl_to_progpo_scale,
)


def _episodes(rng: np.random.Generator, n_groups: int, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups of every kind: with successes, partial WebShop scores, all-failed, all-failed and gated."""
    outcome = np.zeros((n_groups, g))
    cover = rng.uniform(0, 1, (n_groups, g)).round(3)
    outcome[0::4] = rng.integers(0, 2, (len(outcome[0::4]), g))  # ALFWorld-like 0/1
    outcome[0::4, 0] = 1.0
    outcome[1::4] = rng.uniform(0, 1, (len(outcome[1::4]), g))  # WebShop-like scores
    cover[3::4] = 0.25  # all-failed and no spread: gated to 0
    gid = np.repeat(np.arange(n_groups), g)
    return outcome.reshape(-1), cover.reshape(-1), gid


def _trl_group_advantages(rewards: np.ndarray, g: int) -> np.ndarray:
    """GRPOTrainer's scale_rewards="group" advantages (trl 1.16 grpo_trainer.py, sum_then_normalize):
    ``(r - nanmean) / (nanstd + 1e-4)``, nanstd being TRL's own (unbiased, Bessel)."""
    torch = pytest.importorskip("torch", reason="extra [trl] not installed")
    nanstd = pytest.importorskip("trl.trainer.utils", reason="extra [trl] not installed").nanstd
    r = torch.tensor(rewards, dtype=torch.float64)
    mean = torch.nanmean(r.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    std = nanstd(r.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    return ((r - mean) / (std + 1e-4)).numpy()


@pytest.mark.parametrize("g", [2, 4, 8])
def test_trl_normalisation_of_scaled_reward_equals_progpo_advantages(g: int) -> None:
    pytest.importorskip("trl", reason="extra [trl] not installed")
    out, cov, gid = _episodes(np.random.default_rng(g), 12, g)
    want = np.concatenate([progpo_episode_advantages(out[gid == k], cov[gid == k]) for k in range(12)])
    reward = make_progress_conditioned_reward(g)
    adv_trl = _trl_group_advantages(np.array(reward([], [], outcome=out, coverage_rate=cov, group_id=gid)), g)
    np.testing.assert_allclose(trl_to_progpo_scale(g) * adv_trl, want, atol=1e-6, rtol=0)
    # The unscaled reward: same signs and ranking, off by the std convention and the epsilons.
    plain = _trl_group_advantages(
        np.array(progress_conditioned_reward([], [], outcome=out, coverage_rate=cov, group_id=gid)), g
    )
    assert np.all(np.sign(plain.round(9)) == np.sign(want.round(9)))
    assert np.max(np.abs(plain * math.sqrt(g / (g - 1)) - want)) < 1e-2  # eps 1e-4 vs 1e-6 on small spreads


def test_advantage_reward_with_scale_none_is_exact_for_any_lambda() -> None:
    out, cov, gid = _episodes(np.random.default_rng(0), 8, 4)
    r = np.array(progpo_advantage_reward([], [], outcome=out, coverage_rate=cov, group_id=gid, lam=0.3))
    adv_none = r - np.repeat(r.reshape(-1, 4).mean(axis=1), 4)  # scale_rewards="none": r - mean
    want = np.concatenate([progpo_episode_advantages(out[gid == k], cov[gid == k], lam=0.3) for k in range(8)])
    np.testing.assert_allclose(adv_none, want, atol=1e-9)


@pytest.mark.parametrize("g", [2, 4, 8])
def test_trl_normalisation_of_planpo_reward_equals_planpo_advantages(g: int) -> None:
    pytest.importorskip("trl", reason="extra [trl] not installed")
    out, cov, gid = _episodes(np.random.default_rng(10 + g), 12, g)
    steps = np.random.default_rng(g).integers(1, 9, out.size)
    for progress, estimator in ((False, "planpo"), (True, "progpo-planpo")):
        want = episode_advantages(out, gid, cov, estimator=estimator, turns=steps)
        reward = make_planpo_reward(g, progress=progress)
        rewards = reward([], [], outcome=out, num_steps=steps, coverage_rate=cov, group_id=gid)
        np.testing.assert_allclose(
            trl_to_progpo_scale(g) * _trl_group_advantages(np.array(rewards), g), want, atol=1e-6, rtol=0
        )
        assert np.abs(want).max() > 0.5
    with pytest.raises(ValueError, match="coverage_rate"):
        make_planpo_reward(g, progress=True)([], [], outcome=out, num_steps=steps, group_id=gid)
    # partial scores below the threshold are no success: R^E = 0 there
    assert planpo_values([0.9, 0.4], [3, 2], [0, 0]).tolist() == [0.0, 0.0]
    assert planpo_values([0.9, 0.4], [3, 2], [0, 0], success_threshold=0.4).tolist() == [0.3, 0.2]


def test_progress_conditioned_values_gate_and_groups_in_any_order() -> None:
    v = progress_conditioned_values([0, 0.5, 0, 0], [0.3, 0.1, 0.2, 0.3], ["b", "a", "b", "a"])
    assert v.tolist() == [0.2 * 0 + 0.3, 0.5, 0.2, 0.0]  # group a has a score: outcomes; b: coverage
    with pytest.raises(ValueError):
        progress_conditioned_values([0, 0], [0.1], [0, 0])


# ----------------------------------------------------------------------------------------------
# GRPOTrainer on CPU with the tiny model, through the rollout_func.
# ----------------------------------------------------------------------------------------------
ACTION_PROMPT = (
    "You are an agent in a text environment. Answer with <action>...</action>.\n"
    "Task: {goal}\nObservation: {observation}\nAdmissible actions: [{admissible}]\n"
)


def _train_two_steps(env_id: str, tmp_path, warm_start: int = 0, env_steps: int = 2, **env_kwargs):
    pytest.importorskip("trl", reason="extra [trl] not installed")
    pytest.importorskip("datasets", reason="extra [trl] not installed")
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    from agents.models import load_model
    from trainers.integrations.trl import expert_warm_start, make_rollout_func, outcome_reward

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model, tok = load_model("tiny-128x2")
    g = 2
    if warm_start:
        rollout = make_rollout_func(
            env_id, max_steps=env_steps, prompt_template=ACTION_PROMPT, action_format="action", **env_kwargs
        )
        expert_warm_start(model, tok, rollout, steps=warm_start)
    else:
        rollout = make_rollout_func(env_id, max_steps=env_steps, **env_kwargs)
    args = GRPOConfig(
        output_dir=str(tmp_path),
        num_generations=g,
        per_device_train_batch_size=4,
        max_steps=2,
        max_completion_length=24 if warm_start else 8,
        learning_rate=1e-4,
        beta=0.0,
        scale_rewards="group",
        use_cpu=True,
        report_to=[],
        logging_steps=1,
        save_strategy="no",
        reward_weights=[1.0, 0.0],
        seed=0,
        dataloader_num_workers=0,
        bf16=False,
    )
    trainer = GRPOTrainer(
        model=model,
        processing_class=tok,
        args=args,
        rollout_func=rollout,
        reward_funcs=[make_progress_conditioned_reward(g), outcome_reward],
        train_dataset=Dataset.from_dict({"prompt": [str(s) for s in range(8)]}),
    )
    seen: list[tuple[list, dict]] = []
    orig = trainer._generate_and_score_completions

    def capture(inputs):
        out = orig(inputs)
        seen.append(
            ([dict(r.__dict__) for r in rollout.last_records], {"advantages": out["advantages"].detach().clone()})
        )
        return out

    trainer._generate_and_score_completions = capture
    result = trainer.train()
    return trainer, rollout, result, seen, g


def _check_run(env_id: str, trainer, rollout, result, seen, g: int, env_steps: int = 2, **env_kwargs) -> None:
    from trainers.integrations.trl import _wrapped_env

    assert math.isfinite(result.training_loss)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses and all(math.isfinite(x) for x in losses)
    assert seen
    replay = _wrapped_env(env_id, env_steps, env_kwargs)
    for records, out in seen:
        assert len(records) % g == 0 and records
        for k in range(0, len(records), g):
            grp = records[k : k + g]
            assert len({r["task_id"] for r in grp}) == 1  # one group = one task
        for r in records[:2]:  # the reward the trainer saw is the env's outcome of those commands
            obs, info = replay.reset(options={"task_id": r["task_id"]})
            reward = 0.0
            for cmd in r["commands"]:
                obs, reward, term, trunc, info = replay.step(cmd)
            assert info.get("outcome", reward) == pytest.approx(r["outcome"])
            assert info["coverage_rate"] == pytest.approx(r["coverage_rate"])
        # The advantages GRPOTrainer computed are ProGPO's (after the sqrt(G/(G-1)) factor).
        out_arr = np.array([r["outcome"] for r in records])
        cov = np.array([r["coverage_rate"] for r in records])
        want = np.concatenate(
            [progpo_episode_advantages(out_arr[k : k + g], cov[k : k + g]) for k in range(0, len(records), g)]
        )
        np.testing.assert_allclose(trl_to_progpo_scale(g) * out["advantages"].numpy(), want, atol=1e-5)
    # The logged outcome reward is the mean env outcome of the rollouts.
    logged = [h["rewards/outcome_reward/mean"] for h in trainer.state.log_history if "rewards/outcome_reward/mean" in h]
    assert logged == pytest.approx([np.mean([r["outcome"] for r in recs]) for recs, _ in seen])
    rollout.close()
    replay.close()


@pytest.mark.slow
def test_grpo_trainer_two_steps_alfworld(tmp_path, alfworld_engine_available) -> None:
    """From a short expert clone: rewards, advantages and the loss are not all zero, and the
    advantages are ProGPO's (a random model's all-zero run would prove nothing)."""
    run = _train_two_steps("ProGPO-ALFWorld-v0", tmp_path, warm_start=40, env_steps=4, split="easy-train")
    _check_run("ProGPO-ALFWorld-v0", *run, env_steps=4, split="easy-train")
    trainer, _, _, seen, _ = run
    assert any(float(out["advantages"].abs().max()) > 0 for _, out in seen)
    assert any(r["coverage_rate"] > 0 for records, _ in seen for r in records)
    assert any(abs(float(h["loss"])) > 0 for h in trainer.state.log_history if "loss" in h)


def test_rollout_fails_with_one_line_without_trls_generation_hook() -> None:
    from types import SimpleNamespace

    from trainers.integrations.trl import generation_hook, make_rollout_func

    rollout = make_rollout_func("ProGPO-WebShop-v0", max_steps=1, split="test")
    trainer = SimpleNamespace(processing_class=None, model=SimpleNamespace(training=True), num_generations=2)
    with pytest.raises(
        RuntimeError,
        match=r"needs GRPOTrainer._generate_single_turn, which TRL .* does not have: "
        r"install a tested release \(pip install 'trl>=1.16,<1.17'\)",
    ):
        rollout(["0", "0"], trainer)
    assert generation_hook(SimpleNamespace(_generate_single_turn=print)) is print


@pytest.mark.slow
def test_grpo_trainer_two_steps_webshop(tmp_path) -> None:
    run = _train_two_steps("ProGPO-WebShop-v0", tmp_path)
    _check_run("ProGPO-WebShop-v0", *run)
