"""A new teacher in one file, outside the package: self-imitation. Beside the RL loss, each
step of a won trajectory adds ``coef`` times its negative log-likelihood (the policy imitates
its own successes). It reads the reward alone, so its runs are labelled as such.

    python -m trainers.progpo --plugin examples/custom_teacher.py --distill self-imitation \
        --teacher-option coef=0.05 --env rooms --warm-start none --iterations 2
    python -m trainers.lab --plugin examples/custom_teacher.py --methods gigpo+self-imitation --seeds 0

In a YAML config: ``plugins: [examples/custom_teacher.py]`` and
``distill: {mode: self-imitation, options: {coef: 0.05}}``. Installed as a distribution, the
entry point ``[project.entry-points."progpo.teachers"] self-imitation = "my_package.self_imitation"``
loads it everywhere.

A teacher (:class:`trainers.teachers.Teacher`) gives, per iteration, its
:meth:`~SelfImitation.inputs` of the rollout, the steps it :meth:`~SelfImitation.kept` at zero
advantage, and its :meth:`~SelfImitation.loss_targets` for the update's steps, whose
``micro_term`` adds to each micro-batch's RL loss (:class:`trainers.loop.ppo.AuxTerm`).
:class:`trainers.teachers.TeacherBase` gives the rest (no EMA weights, no samples).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from trainers.teachers import TeacherBase, TeacherSpec, register_teacher


@dataclass
class SelfImitationInputs:
    """Per step of an iteration's rollout: whether its trajectory was won."""

    won: list[bool]
    metrics: dict[str, float]


@dataclass
class SelfImitationTerm:
    """The update's term: ``-coef * sum(w * lp) / mb_weight`` over the won steps' tokens."""

    won: list[bool]
    coef: float
    sums: dict[str, float] = field(default_factory=lambda: {"nll": 0.0, "tokens": 0.0})

    def micro_term(
        self, micro: Sequence[int], lp: torch.Tensor, w_t: torch.Tensor, batch: Any, mb_weight: float, loss_scale: float
    ) -> torch.Tensor | None:
        mask = torch.cat([torch.full((batch.token_counts[j],), float(self.won[j])) for j in micro]).to(lp.device)
        self.sums["nll"] += float(-(mask * lp.detach()).sum())
        self.sums["tokens"] += float(mask.sum())
        return -self.coef * loss_scale * (w_t * mask * lp).sum() / mb_weight

    def stats(self, comm: Any) -> dict[str, float]:
        nll, tokens = comm.sum(list(self.sums.values()))
        return {"distill/self_imitation_nll": nll / tokens if tokens > 0 else 0.0}


class SelfImitation(TeacherBase):
    """The run's teacher: it reads which trajectories were won, nothing else."""

    name = "self-imitation"

    def __init__(self, coef: float) -> None:
        super().__init__()
        self.coef = coef

    def inputs(self, rollout: Any, step_failed: Sequence[bool], env: str = "this") -> SelfImitationInputs:
        won = [bool(rollout.trajectories[s.traj].won) for s in rollout.steps]
        groups = {t.group for t in rollout.trajectories}
        with_win = {t.group for t in rollout.trajectories if t.won}
        return SelfImitationInputs(won, {"distill/group_frac": len(with_win) / max(len(groups), 1)})

    def kept(self, inputs: SelfImitationInputs, n_steps: int) -> list[bool]:
        return list(inputs.won)  # a won step imitates itself even at zero advantage

    def loss_targets(
        self, steps: Sequence[Any], chosen: Sequence[int], inputs: SelfImitationInputs, iteration: int
    ) -> tuple[SelfImitationTerm, dict[str, float]]:
        won = [inputs.won[i] for i in chosen]
        return SelfImitationTerm(won, self.coef), {"distill/steps": float(np.sum(won)), **inputs.metrics}


def _coef(cfg: Any) -> Any:
    return cfg.teacher_options.get("coef", 0.1)


def _check(cfg: Any) -> str | None:
    unknown = set(cfg.teacher_options) - {"coef"}
    if unknown:
        return f"self-imitation has no option {', '.join(sorted(unknown))}; it takes coef"
    coef = _coef(cfg)
    if isinstance(coef, bool) or not isinstance(coef, (int, float)) or not 0 <= coef:
        return f"self-imitation option coef must be a number >= 0, got {coef!r}"
    return None


register_teacher(
    TeacherSpec(
        "self-imitation",
        lambda cfg, policy, model: SelfImitation(float(_coef(cfg))),
        label=lambda c: "self-imitation (reward only)",
        check=_check,
        help="adds coef x the negative log-likelihood of the steps of won trajectories",
        report=lambda train, label: f"**Teacher: {label}.** The policy imitated its own won trajectories.",
    )
)
