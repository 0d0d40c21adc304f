"""Each loop stage's own typed section of a run's configuration: what the stage reads, and no
more (:func:`credit_section`, :func:`rollout_section`, :func:`update_section`, :func:`eval_section`
and :func:`run_section` build them from a :class:`~trainers.config.TrainConfig`). A stage, its tests
and a caller that drives it alone need only its section.

>>> from trainers.config import TrainConfig
>>> section = credit_section(TrainConfig(estimator="grpo", iterations=3))
>>> section.advantage.estimator, section.iterations, section.generate
('grpo', 3, False)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, TypeVar

from trainers.advantages import AdvantageConfig
from trainers.loop.ppo import PPOConfig
from trainers.rollouts.tree_rollout import TreeConfig
from trainers.runs.run_dir import RunSection

if TYPE_CHECKING:  # the sections are read from a config; the config does not import them
    from _typeshed import DataclassInstance

    from trainers.config import TrainConfig

__all__ = [
    "CreditSection",
    "EvalSection",
    "RolloutSection",
    "RunSection",
    "UpdateSection",
    "credit_section",
    "eval_section",
    "rollout_section",
    "run_section",
    "update_section",
]


@dataclass(frozen=True)
class CreditSection:
    """What the credit stage (:class:`trainers.loop.credit.CreditAssigner`) reads.

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
    """What the collection stage (:class:`trainers.loop.collector.Rollouts`) reads.

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
        dynamic_sampling: drop the groups whose outcomes are all equal and draw more generation
            batches, up to ``max_gen_batches``.
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
    dynamic_sampling: bool = False
    max_gen_batches: int = 1


@dataclass(frozen=True)
class EvalSection:
    """What the evaluation stage (:class:`trainers.loop.evaluator.Evaluator`) reads.

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


@dataclass(frozen=True)
class UpdateSection:
    """What the update stage (:class:`trainers.loop.updater.Updater`) reads.

    Attributes:
        ppo: PPO-clip's options (:class:`trainers.loop.ppo.PPOConfig`).
        lr: AdamW's learning rate. weight_decay: AdamW's weight decay.
        lr_warmup_iterations: iterations of linear warm-up.
        loss_agg: token-mean | traj-mean.
        skip_zero_advantage: drop steps with advantage 0 when no other term acts on them.
        recompute_old_logprobs: old log-probs from a training-side forward, not the sampler.
        vllm: whether vLLM samples (its log-probs are always recomputed).
        bf16: bf16 autocast on a GPU.
        gradient_checkpointing: recompute activations in the backward pass.
        lora: LoRA adapters (the KL reference is the adapter-free model).
        batch_decisions: tree | on | off.
        seed: the run's seed (each update's mini-batch order).
        progress_bars: whether a bar is drawn.
    """

    ppo: PPOConfig
    lr: float
    weight_decay: float
    lr_warmup_iterations: int
    loss_agg: str
    skip_zero_advantage: bool
    recompute_old_logprobs: bool
    vllm: bool
    bf16: bool
    gradient_checkpointing: bool
    lora: bool
    batch_decisions: str
    seed: int
    progress_bars: bool


def credit_section(cfg: TrainConfig) -> CreditSection:
    """The credit stage's section of ``cfg``."""
    return CreditSection(cfg.advantage_config(), cfg.seed, cfg.iterations, cfg.policy_mode == "generate")


_SectionT = TypeVar("_SectionT", bound="DataclassInstance")


def _section(cls: type[_SectionT], cfg: TrainConfig, **derived: Any) -> _SectionT:
    """A ``cls`` section: ``derived`` as given, each other field the config's field of its name."""
    return cls(**{f.name: getattr(cfg, f.name) for f in fields(cls) if f.name not in derived}, **derived)


def rollout_section(cfg: TrainConfig) -> RolloutSection:
    """The collection stage's section of ``cfg``."""
    return _section(RolloutSection, cfg, step_timeout=cfg.resolved_step_timeout, tree=cfg.tree_config())


def update_section(cfg: TrainConfig) -> UpdateSection:
    """The update stage's section of ``cfg``."""
    return _section(UpdateSection, cfg, ppo=PPOConfig.from_config(cfg), vllm=cfg.backend == "vllm")


def eval_section(cfg: TrainConfig) -> EvalSection:
    """The evaluation stage's section of ``cfg``."""
    return _section(EvalSection, cfg, step_timeout=cfg.resolved_step_timeout, teacher_label=cfg.distill_label)


def run_section(cfg: TrainConfig) -> RunSection:
    """The run dir's section of ``cfg`` (its flat fields and sections taken now)."""
    return _section(RunSection, cfg, trackers=tuple(cfg.trackers), config=cfg.to_dict(), sections=cfg.to_sections())
