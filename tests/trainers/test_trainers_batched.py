"""The batched trainer path against the per-decision one, and the update's micro-batching.

Tolerance: the paths compute the same sums in different groupings (packed rows, token
micro-batches; one prompt trie with chunked tree attention), so log-probs differ by ~1e-6 and the weights after an update by rounding only. A
sampled command would flip only if its draw fell within ~1e-6 of a probability boundary, so
over 3 short iterations the trajectories, and hence the advantages, are expected to be identical,
and every train metric equal to 1e-4 (relative) or 1e-6 (absolute).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainers.config_flags import parse_args
from trainers.loop.ppo import PPOConfig, micro_batches
from trainers.loop.trainer import Trainer

TRAP = (
    "--config configs/alfworld_trap.yaml --iterations 3 --num-groups 2 --group-size 4 --max-steps 6 "
    "--bc-steps 5 --eval-episodes 0 --save-every 0 --no-progress-bars --no-tensorboard"
).split()


def _train(tmp_path, path: str) -> tuple[list[dict], list[np.ndarray], dict[str, torch.Tensor]]:
    cfg, _ = parse_args([*TRAP, "--batch-decisions", path, "--output-dir", str(tmp_path / path)])
    trainer = Trainer(cfg)
    advantages: list[np.ndarray] = []
    original = trainer.advantages

    def record(rollout, iteration):
        out = original(rollout, iteration)
        advantages.append(out.steps.copy())
        return out

    trainer.advantages = record  # type: ignore[method-assign]  # a recording stand-in for the stage
    trainer.train()
    rows = [r for r in trainer.history if r.get("kind") == "train"]
    return rows, advantages, {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


@pytest.mark.slow
@pytest.mark.parametrize("packed", ["on", "tree"])
def test_three_trap_iterations_agree_between_the_paths(tmp_path, packed):
    rows_on, adv_on, w_on = _train(tmp_path, packed)
    rows_off, adv_off, w_off = _train(tmp_path, "off")
    assert len(rows_on) == len(rows_off) == 3
    assert any(a.size and np.abs(a).max() > 0 for a in adv_off)  # the updates had something to learn from
    for a, b in zip(adv_on, adv_off):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)
    for on, off in zip(rows_on, rows_off):
        keys = {
            k
            for k in off
            if isinstance(off[k], (int, float))
            and not k.startswith("time/")
            and k not in ("tokens_per_s", "env_steps_per_s")
        }
        assert keys <= set(on)
        for k in sorted(keys):
            assert math.isclose(on[k], off[k], rel_tol=1e-4, abs_tol=1e-6), (on["iteration"], k, on[k], off[k])
    assert max(float((w_on[k] - w_off[k]).abs().max()) for k in w_off) < 1e-4


def test_token_micro_batches_hold_each_decision_once_and_keep_the_budget():
    cost = [50, 30, 50, 80, 30, 200]
    keys = ["a", "b", "a", "c", "b", "d"]  # steps 0/2 and 1/4 are the same decision
    cfg = PPOConfig(micro_batch_tokens=100)
    passes = micro_batches(range(6), cost, cfg, keys)
    assert sorted(j for p in passes for j in p) == list(range(6))
    for p in passes:
        unique = {keys[j]: cost[j] for j in p}
        assert sum(unique.values()) <= 100 or len(unique) == 1  # a step over the budget goes alone
    where = {j: i for i, p in enumerate(passes) for j in p}
    assert where[0] == where[2] and where[1] == where[4]
    # the per-decision path: fixed counts, in the given order
    assert micro_batches([5, 3, 1], cost, PPOConfig(micro_batch_size=2), keys) == [[5, 3], [1]]


def test_a_checkpoint_from_before_batching_resumes_only_on_the_per_decision_path(tmp_path):
    """A checkpoint whose config lacks ``batch_decisions`` ran one pass per decision: resuming it
    with the new default is refused in one line, with ``--batch-decisions off`` it continues."""
    from tiny_config import config_for_tests

    from trainers.runs.checkpoint import CheckpointError, load_checkpoint, save_checkpoint

    cfg = config_for_tests(output_dir=str(tmp_path / "run"), iterations=1, eval_episodes=0, batch_decisions="off")
    trainer = Trainer(cfg)
    trainer.train()
    ckpt = tmp_path / "run" / "checkpoints" / "iter_000001.pt"
    data = load_checkpoint(ckpt)
    del data["config"]["batch_decisions"]
    save_checkpoint(tmp_path / "run", 1, {k: v for k, v in data.items() if k not in ("format", "iteration")})
    again = Trainer(config_for_tests(output_dir=str(tmp_path / "run"), iterations=2, eval_episodes=0))
    with pytest.raises(CheckpointError, match=r"batch_decisions differ"):
        again.resume(str(ckpt))
    off = Trainer(
        config_for_tests(output_dir=str(tmp_path / "run"), iterations=2, eval_episodes=0, batch_decisions="off")
    )
    assert off.resume(str(ckpt)) == 2
