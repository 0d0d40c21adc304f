"""The built-in teachers' options, one frozen dataclass each, every field an
:func:`~trainers.advantages.options.option` (default, help, bounds or choices) whose ``flag`` is
its flat config field (``--distill-tau``): ``--teacher-option tau=0.1`` and ``--distill-tau 0.1``
spell one option, and a plug-in teacher's options take the same schema
(:attr:`trainers.teachers.registry.TeacherSpec.options`).

>>> from dataclasses import fields
>>> PrivilegedOptions().tau, HindsightOptions().coef, [f.metadata["flag"] for f in fields(HindsightOptions)]
(0.05, 0.01, ['skill_writer', 'distill_lambda', 'distill_gate_beta'])
"""

from __future__ import annotations

from dataclasses import dataclass

from trainers.advantages.options import option
from trainers.teachers.registry import SKILL_WRITERS

__all__ = ["HindsightOptions", "PrivilegedOptions"]


@dataclass(frozen=True)
class PrivilegedOptions:
    """The privileged teacher's (I-SDPO) options."""

    tau: float = option(0.05, "EMA rate of the teacher after each optimizer step", flag="distill_tau", ge=0.0, le=1.0)
    top_k: int = option(
        20, "generate mode: the teacher's top-k tokens compared per position", flag="distill_top_k", ge=1
    )


@dataclass(frozen=True)
class HindsightOptions:
    """The hindsight teacher's (SEED) options."""

    skill_writer: str = option(
        "template",
        "who writes the skills: template (sentences from the trajectory alone, no ground truth) | policy "
        "(generate mode: the policy writes them)",
        flag="skill_writer",
        choices=SKILL_WRITERS,
    )
    coef: float = option(
        0.01, "weight of the gated distillation term beside the RL loss", flag="distill_lambda", ge=0.0
    )
    gate_beta: float = option(5.0, "gate g = sigmoid(beta * (l_skill - l_theta))", flag="distill_gate_beta", ge=0.0)
