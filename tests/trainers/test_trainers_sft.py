"""Behaviour cloning (trainers.sft.behaviour_clone): it fits the demos, and its lr schedule does what it says."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from trainers.build import build_policy
from trainers.config import ConfigError, TrainConfig
from trainers.sft import Demo, behaviour_clone, step_accuracy

pytest.importorskip("transformers", reason="training extra [train] not installed")

INFO = {"goal": "find the key", "admissible_commands": ["look", "inventory", "go hall", "go cellar", "take key"]}
DEMOS = [
    Demo("You are in the kitchen. Exits: hall, cellar.", dict(INFO), [], "go cellar"),
    Demo("You are in the cellar. You see a key.", dict(INFO), [], "take key"),
] * 8


def _policy():
    torch.manual_seed(0)
    cfg = dataclasses.replace(TrainConfig(), env="rooms", model="tiny", device="cpu", lora=False, policy_mode="score")
    return build_policy(cfg, torch.device("cpu"))


def _clone(schedule: str, steps: int = 40) -> tuple[list[float], float]:
    """Clone for ``steps`` steps; returns the size of each step's weight change and the clone's
    step accuracy on the demos."""
    torch.set_num_threads(1)
    policy = _policy()
    params = [p for p in policy.model.parameters() if p.requires_grad]
    last = [p.detach().clone() for p in params]
    moves: list[float] = []

    def on_step(_: int) -> None:
        moves.append(sum(float((p.detach() - q).abs().sum()) for p, q in zip(params, last)))
        for p, q in zip(params, last):
            q.copy_(p.detach())

    behaviour_clone(
        policy, DEMOS, steps=steps, batch_size=4, lr=5e-3, seed=0, holdout=0.0, on_step=on_step, lr_schedule=schedule
    )
    outs = [policy.forced_step(d.observation, d.info, d.history, d.action) for d in DEMOS[:2]]
    return moves, step_accuracy(policy, outs)


def test_cosine_schedule_settles_the_clone_and_both_schedules_fit():
    const_moves, const = _clone("constant")
    cos_moves, cos = _clone("cosine")
    assert len(const_moves) == len(cos_moves) == 40
    # the first step is the same (lr at its peak), the last cosine step is ~0 (lr decayed to ~0)
    assert cos_moves[0] == pytest.approx(const_moves[0], rel=1e-4)
    assert cos_moves[-1] < 0.01 * cos_moves[0]
    assert cos_moves[-1] < 0.1 * const_moves[-1]  # the constant schedule still takes full-size steps
    assert const == cos == 1.0  # both clones pick the expert's command in both situations


def test_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="lr_schedule"):
        behaviour_clone(_policy(), DEMOS, steps=1, lr_schedule="linear")
    with pytest.raises(ConfigError, match="bc_lr_schedule"):
        dataclasses.replace(TrainConfig(), bc_lr_schedule="linear").validate()


def test_a_wider_draw_of_the_tiny_model_clones_faster():
    torch.set_num_threads(1)
    losses = {}
    for std in (0.0, 0.125):  # 0: transformers' 0.02; 0.125 = 1/sqrt(64), the tiny model's width
        torch.manual_seed(0)
        cfg = dataclasses.replace(
            TrainConfig(), env="rooms", model="tiny", device="cpu", lora=False, policy_mode="score", tiny_init_std=std
        )
        policy = build_policy(cfg, torch.device("cpu"))
        if std:
            assert abs(float(policy.model.model.embed_tokens.weight.std()) - std) < 0.1 * std
        losses[std] = behaviour_clone(policy, DEMOS, steps=10, batch_size=4, lr=1e-3, seed=0, holdout=0.0)["bc/loss"]
    # measured: mean -log pi(expert) over the 10 steps 2.61 (0.02) vs 0.75 (0.125)
    assert losses[0.125] < 0.5 * losses[0.0]


def test_init_std_is_for_random_tiny_models_only():
    with pytest.raises(ConfigError, match="tiny-\\* models only"):
        dataclasses.replace(TrainConfig(), model="smollm2", tiny_init_std=0.05).validate()
    with pytest.raises(ConfigError, match="init_std"):
        dataclasses.replace(TrainConfig(), tiny_init_std=-0.1).validate()
    dataclasses.replace(TrainConfig(), tiny_init_std=128**-0.5).validate()  # the CPU demo's tiny-128x2


@pytest.mark.parametrize("micro", [1, 3])
def test_micro_batches_give_the_whole_batch_step(micro, monkeypatch):
    """A step in micro-batches (gradients summed, then scaled by the count) is the step of the whole
    batch in one pass, to float rounding: the warm start's memory is bounded at no cost to what it learns."""
    torch.set_num_threads(1)
    norms: list[float] = []
    clip = torch.nn.utils.clip_grad_norm_
    monkeypatch.setattr(torch.nn.utils, "clip_grad_norm_", lambda params, most: norms.append(float(clip(params, most))))
    results = []
    for m in (0, micro):
        policy = _policy()
        params = [p for p in policy.model.parameters() if p.requires_grad]
        grads: list[list[torch.Tensor]] = []
        stats = behaviour_clone(
            policy,
            DEMOS,
            steps=3,
            batch_size=8,
            lr=5e-3,
            seed=0,
            holdout=0.0,
            micro_batch=m,
            on_step=lambda _: grads.append([p.grad.detach().clone() for p in params]),
        )
        results.append((stats["bc/loss"], grads, [p.detach().clone() for p in params]))
    (loss_a, grads_a, params_a), (loss_b, grads_b, params_b) = results
    assert loss_b == pytest.approx(loss_a, rel=1e-5)
    assert norms[3] == pytest.approx(norms[0], rel=1e-5)  # the first step's gradient norm before clipping
    for a, b in zip(grads_a[0], grads_b[0]):  # the first step's (clipped) gradient: the batch mean's
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-7)
    for a, b in zip(params_a, params_b):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)


def test_the_warm_start_passes_are_whole_steps_for_the_tiny_models_and_micro_batches_for_others():
    assert TrainConfig(model="tiny-128x2").resolved_bc_micro_batch == 0  # its recorded CPU figures: unchanged
    assert TrainConfig(model="smollm2").resolved_bc_micro_batch == TrainConfig().micro_batch_size
    assert TrainConfig(model="smollm2", bc_micro_batch_size=2).resolved_bc_micro_batch == 2
    with pytest.raises(ConfigError, match="bc_micro_batch_size must be an integer >= 0"):
        TrainConfig(bc_micro_batch_size=-1)
