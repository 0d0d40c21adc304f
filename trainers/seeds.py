"""Named seed streams: every random choice of a run derives from ``cfg.seed`` through one of these.

Pure integer functions. Their values are part of every recorded run (a resumed or re-run run
draws the same numbers), so they never change; the constants are primes, so that distinct
(seed, index) pairs give distinct seeds for any index below the prime.

>>> update_order(0, 3), rollout(1, 2), eval_plan(5), eval_task(5, 1), eval_sampling(5, 8), step(3, 2)
(3, 100005, 7924, 500016, 39603, 3000011)
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "MAX_SEED",
    "gen_batch_rollout",
    "gen_batch_tasks",
    "eval_plan",
    "eval_sampling",
    "eval_task",
    "rollout",
    "shuffle",
    "step",
    "task_seeds",
    "update_order",
]

#: one past the largest seed ``torch.Generator.manual_seed`` and vLLM take
MAX_SEED = 2**63 - 1
_ITERATION = 1_000_003  # streams indexed by iteration or by vector step
_TASK = 100_003  # streams indexed by task (rollout sampling of an iteration, eval task seeds)
_EVAL = 7_919  # the evaluation's own stream, apart from training's


def update_order(seed: int, iteration: int) -> int:
    """The mini-batch permutation of ``iteration``'s PPO update."""
    return (int(seed) * _ITERATION + int(iteration)) % MAX_SEED


def shuffle(seed: int, iteration: int) -> int:
    """The permutation of coverage in the ``shuffle_coverage`` control at ``iteration``."""
    return int(seed) * _ITERATION + int(iteration)


def rollout(seed: int, iteration: int) -> int:
    """The policy's sampling seed of ``iteration``'s rollout (shard 0; others: ``distributed.shard_seed``)."""
    return int(seed) * _TASK + int(iteration)


def step(seed: int, k: int) -> int:
    """The policy's sampling seed at vector step ``k`` of a rollout seeded ``seed``; below 2**63 for
    any ``seed`` (``seed * 1_000_003`` alone overflows ``torch.Generator.manual_seed`` above ~9e12).

    >>> step(3, 2), step(2**62, 0) < 2**63
    (3000011, True)
    """
    return (int(seed) * _ITERATION + int(k)) % MAX_SEED


def eval_plan(seed: int) -> int:
    """The seed of a run's evaluation plan (which tasks, in which order)."""
    return int(seed) + _EVAL


def eval_task(plan_seed: int, index: int) -> int:
    """The task seed of the evaluation's ``index``-th episode."""
    return int(plan_seed) * _TASK + int(index)


def eval_sampling(plan_seed: int, start: int) -> int:
    """The sampling seed of the evaluation chunk that starts at episode ``start``."""
    return int(plan_seed) * _EVAL + int(start)


def task_seeds(seed: int, iteration: int, num_groups: int, stream: int = 0) -> list[int]:
    """Task seed of each group at ``iteration`` (``stream`` 0: training, 1: evaluation).

    >>> task_seeds(0, 1, 2) == task_seeds(0, 1, 2), task_seeds(0, 1, 2) != task_seeds(0, 2, 2)
    (True, True)
    """
    seq = np.random.SeedSequence(seed, spawn_key=(stream, iteration))
    return [int(x) for x in seq.generate_state(num_groups, np.uint32)]


def gen_batch_tasks(seed: int, iteration: int, k: int, num_groups: int) -> list[int]:
    """Task seeds of generation batch ``k`` of ``iteration`` under dynamic sampling: batch 0 is
    the iteration's own schedule (:func:`task_seeds`), so a run with dynamic sampling starts each
    iteration on the tasks a run without it plays; batch k > 0 draws new tasks.

    >>> gen_batch_tasks(0, 1, 0, 2) == task_seeds(0, 1, 2), gen_batch_tasks(0, 1, 1, 2) != task_seeds(0, 1, 2)
    (True, True)
    """
    if k == 0:
        return task_seeds(seed, iteration, num_groups)
    seq = np.random.SeedSequence(seed, spawn_key=(2, iteration, k))
    return [int(x) for x in seq.generate_state(num_groups, np.uint32)]


def gen_batch_rollout(seed: int, iteration: int, k: int) -> int:
    """The sampling seed of generation batch ``k`` of ``iteration`` (batch 0: :func:`rollout`'s).

    >>> gen_batch_rollout(1, 2, 0) == rollout(1, 2), gen_batch_rollout(1, 2, 1) != rollout(1, 2)
    (True, True)
    """
    base = rollout(seed, iteration)
    return base if k == 0 else (base * _ITERATION + int(k)) % MAX_SEED
