"""Teachers: a distillation loss beside the RL loss, for the groups RL alone leaves without a signal.

``--distill`` is an axis of its own, independent of ``--estimator``:

* ``none``: RL only.
* ``privileged`` (I-SDPO, arXiv 2608.12957; :mod:`~trainers.teachers.privileged`): per group, any
  success -> the RL loss; all failed -> a self-distillation loss on the whole group, in which the
  teacher, an EMA of the student (``tau`` 0.05, updated after every optimizer step), reads the
  privileged text (the env's ``info["privileged_text"]`` at reset: ALFWorld, the expert's plan;
  WebShop, the target product's title and options) before the prompt and re-scores the student's
  own decisions. Loss per decision (score mode) or response token (generate mode): ``0.5 KL(T ||
  S) + 0.5 KL(S || T)``, weighted by ``exp(-beta * H_T)`` normalised to mean 1 and clipped at
  2.0, beta 1. Score mode compares the candidate-command distributions; generate mode the
  teacher's top-k tokens (renormalised on both sides). **It uses privileged information: in
  all-failed groups it is imitation, not RL**, and every output says "privileged (not pure RL)".
* ``hindsight`` (SEED, arXiv 2607.14777; :mod:`~trainers.teachers.hindsight`): after the rollout a
  skill is written for every finished trajectory (:mod:`~trainers.teachers.skills`); the student
  re-scores its own sampled actions with the skill before the prompt (``l_skill``, no gradient)
  and without it (``l_theta``), and ``L = L_RL + lambda * mean(g * (l_skill - l_theta))``,
  ``g = sigmoid(beta * (l_skill - l_theta))``, beta 5, lambda 0.01, on every group. With the
  template writer (the CPU default) the skill reads only the trajectory: "hindsight (no ground truth)".

The package, one concern a module:

* :mod:`~trainers.teachers.contract`: the :class:`Teacher` protocol (every method the loop, the
  update and the checkpoints call) and :class:`TeacherBase`, a plug-in's defaults;
* :mod:`~trainers.teachers.registry`: the teachers by name (``--distill``), standard library only;
* :mod:`~trainers.teachers.losses`: the losses, pure torch;
* :mod:`~trainers.teachers.targets`: the built-in teachers' terms of one update;
* :mod:`~trainers.teachers.base`, :mod:`~trainers.teachers.privileged`,
  :mod:`~trainers.teachers.hindsight`, :mod:`~trainers.teachers.skills`: the built-in teachers.

Importing the package loads the registry and the contract only; the torch modules load when one
of their names is read (a report names a run's teacher without torch).

>>> from trainers.teachers import distill_label
>>> distill_label("privileged"), distill_label("hindsight")
('privileged (not pure RL)', 'hindsight (no ground truth)')
"""

from __future__ import annotations

import importlib
from typing import Any

from trainers.teachers.contract import Teacher, TeacherBase
from trainers.teachers.registry import (
    ENTRY_POINT_GROUP,
    PRIVILEGED_KEY,
    SKILL_WRITERS,
    TeacherSpec,
    distill_label,
    is_builtin_teacher,
    label_of,
    reads_privileged,
    register_teacher,
    teacher,
    teacher_names,
    unregister_teacher,
)

#: name -> the module that holds it, imported when the name is first read (they import torch)
_LAZY = {
    **dict.fromkeys(
        (
            "ema_update",
            "entropies",
            "entropy_weights",
            "gated_distill",
            "normalised_weights",
            "symmetric_kl",
            "topk_symmetric_kl",
        ),
        "losses",
    ),
    **dict.fromkeys(("HindsightTargets", "PrivilegedTargets"), "targets"),
    **dict.fromkeys(
        ("PolicySkillWriter", "SkillWriter", "TemplateSkillWriter", "Transcript", "transcripts_of"), "skills"
    ),
    **dict.fromkeys(("ContextTeacher", "StepTexts", "TeacherInputs"), "base"),
    **dict.fromkeys(("PrivilegedTeacher", "make_privileged", "privileged_inputs"), "privileged"),
    **dict.fromkeys(("HindsightTeacher", "hindsight_inputs", "make_hindsight"), "hindsight"),
}

__all__ = [
    "ContextTeacher",
    "ENTRY_POINT_GROUP",
    "HindsightTargets",
    "HindsightTeacher",
    "PRIVILEGED_KEY",
    "PolicySkillWriter",
    "PrivilegedTargets",
    "PrivilegedTeacher",
    "SKILL_WRITERS",
    "SkillWriter",
    "StepTexts",
    "Teacher",
    "TeacherBase",
    "TeacherInputs",
    "TeacherSpec",
    "TemplateSkillWriter",
    "Transcript",
    "distill_label",
    "ema_update",
    "entropies",
    "entropy_weights",
    "gated_distill",
    "hindsight_inputs",
    "is_builtin_teacher",
    "label_of",
    "make_hindsight",
    "make_privileged",
    "normalised_weights",
    "privileged_inputs",
    "reads_privileged",
    "register_teacher",
    "symmetric_kl",
    "teacher",
    "teacher_names",
    "topk_symmetric_kl",
    "transcripts_of",
    "unregister_teacher",
]  # the lazy names too: star-imports and the API pages see them


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
