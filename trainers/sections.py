"""Each loop stage's own typed section of a run's configuration: what the stage reads, and no
more (:meth:`trainers.config.TrainConfig.credit_section`, ``rollout_section``, ``eval_section``
build them). A stage, its tests and a caller that drives it alone need only its section.

>>> from trainers.config import TrainConfig
>>> section = TrainConfig(estimator="grpo", iterations=3).credit_section()
>>> section.advantage.estimator, section.iterations, section.generate
('grpo', 3, False)
"""
from __future__ import annotations

from dataclasses import dataclass

from trainers.advantages import AdvantageConfig
from trainers.tree_rollout import TreeConfig

__all__ = ["CreditSection", "EvalSection", "RolloutSection"]


@dataclass(frozen=True)
class CreditSection:
    """What the credit stage (:class:`trainers.credit.CreditAssigner`) reads.

    Attributes:
        advantage: the estimator and its options.
        seed: the run's seed (the shuffled-coverage control's permutation of each iteration).
        iterations: the run's iterations (a base's schedule over the run, as PlanPO's turn weight).
        generate: whether the policy writes its answers (generate mode) or ranks commands.
    """

    advantage: AdvantageConfig
    seed: int
    iterations: int
    generate: bool


@dataclass(frozen=True)
class RolloutSection:
    """What the collection stage (:class:`trainers.collector.Rollouts`) reads.

    Attributes:
        num_groups: B tasks per iteration. group_size: G members per task.
        max_steps: steps per episode at most.
        seed: the run's seed (task schedule, sampling).
        tau_r: the success threshold of the group flags.
        env_backend: sync | async | ray. ray_num_cpus: CPUs a Ray member reserves.
        step_timeout: seconds one env step may take, or ``"auto"`` (the env's own).
        rollout: flat | tree. tree: the tree collector's options (seeded per iteration).
        history_k: (observation, action) pairs a flat collector keeps in the prompt.
        rollout_streams: processes one rollout is played in.
        progress_bars: whether a bar is drawn.
    """

    num_groups: int
    group_size: int
    max_steps: int
    seed: int
    tau_r: float
    env_backend: str
    ray_num_cpus: float
    step_timeout: float | str
    rollout: str
    tree: TreeConfig
    history_k: int
    rollout_streams: int
    progress_bars: bool


@dataclass(frozen=True)
class EvalSection:
    """What the evaluation stage (:class:`trainers.evaluator.Evaluator`) reads.

    Attributes:
        env: the env's name. splits: (train split, eval split).
        eval_episodes: episodes per evaluation. eval_streams: concurrent evaluation streams.
        max_steps: steps per episode at most. state_key: the state identity of coverage.
        seed: the run's seed (the evaluation panel, the random baseline).
        tau_r: the success threshold.
        step_timeout: seconds one env step may take, or ``"auto"``.
        progress_bars: whether a bar is drawn.
        teacher_label: the label of the run's teacher (its held-out records carry it), or None.
    """

    env: str
    splits: tuple[str, str]
    eval_episodes: int
    eval_streams: int
    max_steps: int
    state_key: str
    seed: int
    tau_r: float
    step_timeout: float | str
    progress_bars: bool
    teacher_label: str | None
