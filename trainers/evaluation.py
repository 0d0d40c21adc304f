"""Held-out evaluation with a fixed episode list.

An evaluation plays every task of a split ``episodes_per_task`` times (task order and sampling
seeds fixed by ``seed``), so two evaluations of the same :class:`EvalPlan` see the same tasks in
the same order: their per-episode wins can be compared pairwise.
:func:`trainers.statistics.paired_bootstrap_ci` turns two such win vectors into the difference of
success rates with a 95% confidence interval ("did RL help?").

Example:
    >>> import numpy as np
    >>> from trainers.statistics import paired_bootstrap_ci
    >>> start = np.array([0, 1, 0, 0, 1, 0, 0, 1] * 18)
    >>> end = np.array([1, 1, 0, 1, 1, 0, 1, 1] * 18)
    >>> diff, lo, hi = paired_bootstrap_ci(start, end, seed=0)
    >>> round(diff, 3), lo > 0, hi < 1
    (0.375, True, True)
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from trainers import seeds

__all__ = ["EvalPlan", "RandomPolicy", "episode_records", "run_eval"]

#: commands a random baseline leaves out: they never change an ALFWorld state
PASSIVE = ("look", "inventory", "examine ", "help")


@dataclass(frozen=True)
class EvalPlan:
    """Which episodes an evaluation plays: ``task_ids`` in order, each ``episodes_per_task`` times."""

    split: str
    task_ids: tuple[str, ...]
    episodes_per_task: int
    seed: int

    @property
    def num_episodes(self) -> int:
        return len(self.task_ids) * self.episodes_per_task

    def episodes(self) -> list[str]:
        """Task id of each episode (task-major: t0, t0, ..., t1, ...)."""
        return [t for t in self.task_ids for _ in range(self.episodes_per_task)]

    @classmethod
    def for_episodes(cls, split: str, task_ids: Sequence[str], num_episodes: int, seed: int) -> "EvalPlan":
        """At least ``num_episodes`` episodes spread evenly over ``task_ids`` (every task alike).

        Without task ids (an env that picks its task from the reset seed only), ``num_episodes``
        episodes with distinct fixed seeds.
        """
        if not task_ids:
            return cls(split, ("",) * int(num_episodes), 1, int(seed))
        reps = max(1, -(-int(num_episodes) // len(task_ids)))
        return cls(split, tuple(task_ids), reps, int(seed))

    @classmethod
    def for_env(cls, env_fn: Callable[[], Any], split: str, num_episodes: int, seed: int) -> "EvalPlan":
        """:meth:`for_episodes` over the task ids of ``env_fn()``'s split (``env.unwrapped.task_ids``)."""
        env = env_fn()
        try:
            ids = list(getattr(env.unwrapped, "task_ids", None) or [])
        finally:
            env.close()
        return cls.for_episodes(split, ids, num_episodes, seed)


def run_eval(policy: Any, env_fn: Callable[[], Any], plan: EvalPlan, batch: int = 48,
             on_step: Callable[[int], None] | None = None, step_timeout: float | str | None = "auto") -> Any:
    """Play ``plan`` with ``policy`` (one member per group, sync envs, ``batch`` at a time).

    ``step_timeout`` is passed to :class:`~wrappers.GroupVectorEnv` (a step past it truncates its episode).

    Returns a :class:`trainers.rollout.Rollout` whose trajectories follow ``plan.episodes()``.
    """
    from trainers.rollout import Rollout, collect_rollout
    from wrappers import GroupVectorEnv

    episodes = plan.episodes()
    total = Rollout()
    n = min(batch, len(episodes))
    envs = GroupVectorEnv(env_fn, num_groups=n, group_size=1, backend="sync", seed=plan.seed,
                              step_timeout=step_timeout)
    try:
        for start in range(0, len(episodes), n):
            chunk = episodes[start:start + n]
            if len(chunk) < n:  # last, smaller chunk: a fresh vector env of the right width
                envs.close()
                envs = GroupVectorEnv(env_fn, num_groups=len(chunk), group_size=1, backend="sync", seed=plan.seed,
                              step_timeout=step_timeout)
            task_seeds = [seeds.eval_task(plan.seed, start + j) for j in range(len(chunk))]
            rollout = collect_rollout(envs, policy, task_seeds, seed=seeds.eval_sampling(plan.seed, start),
                                 options=[{"task_id": t} if t else None for t in chunk], on_step=on_step)
            offset = len(total.trajectories)
            for s in rollout.steps:
                s.traj += offset
            for tr in rollout.trajectories:
                tr.group += start
            total.steps += rollout.steps
            total.trajectories += rollout.trajectories
            total.seconds += rollout.seconds
            total.env_seconds += rollout.env_seconds
            total.response_tokens += rollout.response_tokens
    finally:
        envs.close()
    return total


def episode_records(rollout: Any) -> dict[str, list[Any]]:
    """Per-episode columns of an evaluation (stored in the eval record for later comparison)."""
    return {"task_id": [t.task_id for t in rollout.trajectories], "won": [int(bool(t.won)) for t in rollout.trajectories],
            "score": [float(t.outcome) for t in rollout.trajectories]}


class RandomPolicy:
    """A uniformly random admissible command (``look``/``inventory``/``examine``/``help`` left out),
    with the rollout's policy interface: the scale against which a trained policy is read."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, observations: Sequence[str], infos: Sequence[dict[str, Any]], histories: Any = None,
            seed: int | None = None) -> list[Any]:
        from agents.contract import StepOutput

        if seed is not None:
            self.rng = np.random.default_rng(seed)
        out = []
        for info in infos:
            cmds = [str(c) for c in (info.get("admissible_commands") or [])]
            active = [c for c in cmds if not c.startswith(PASSIVE)] or cmds
            out.append(StepOutput(action=str(active[int(self.rng.integers(len(active)))]) if active else ""))
        return out
