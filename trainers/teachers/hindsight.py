"""The hindsight teacher (SEED): the student re-scores its own sampled actions with a hindsight
skill of its trajectory in context, and a gated term pulls it there, on every group. The skill
reads only the trajectory (the template writer): no ground truth."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from trainers.teachers.base import ContextTeacher, StepTexts, TeacherInputs
from trainers.teachers.registry import teacher
from trainers.teachers.skills import PolicySkillWriter, SkillWriter, TemplateSkillWriter, transcripts_of
from trainers.teachers.targets import HindsightTargets

__all__ = ["HindsightTeacher", "hindsight_inputs", "make_hindsight"]


class HindsightTeacher(ContextTeacher):
    """SEED: the student re-scores its own sampled actions with a hindsight skill of its
    trajectory in context, and a gated term pulls it there on every group. ``writer``: the
    :class:`SkillWriter`; ``coef``, ``beta``: the term's lambda and gate beta."""

    name = "hindsight"

    def __init__(
        self,
        policy: Any,
        model: torch.nn.Module,
        writer: "SkillWriter | None" = None,
        *,
        coef: float = 0.01,
        beta: float = 5.0,
        samples_per_iteration: int = 4,
    ) -> None:
        super().__init__(policy, model, samples_per_iteration=samples_per_iteration)
        self.writer, self.coef, self.beta = writer, coef, beta

    def inputs(self, rollout: Any, step_failed: Sequence[bool], env: str = "this") -> "TeacherInputs":
        """This teacher's inputs of an iteration's ``rollout`` (:func:`hindsight_inputs`)."""
        return hindsight_inputs(rollout, self.writer)

    def kept(self, inputs: "TeacherInputs", n_steps: int) -> list[bool]:
        """Its term acts on every step."""
        return [True] * n_steps

    def targets(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: StepTexts, routed: Sequence[bool], iteration: int
    ) -> tuple[HindsightTargets, dict[str, float]]:
        """Targets of the ``chosen`` steps; ``texts[i]``: the skill of step i's trajectory."""
        n = len(chosen)
        out = HindsightTargets(skill=[None] * n, coef=self.coef, beta=self.beta)
        work = [j for j in range(n) if texts[chosen[j]]]
        if not work:
            return out, {"distill/steps": 0.0}
        ctx = self._contexts(steps, chosen, texts, work)
        with torch.no_grad():
            lps, _ = self.policy.compute_logprobs_and_entropy(ctx, with_entropy=False)
            for j, lp in zip(work, lps):
                out.skill[j] = lp.detach().float().cpu()
        self._sample(steps, chosen, texts, work, iteration)
        return out, {"distill/steps": float(len(work))}


def make_hindsight(cfg: Any, policy: Any, model: torch.nn.Module) -> HindsightTeacher:
    """The hindsight teacher of a run's config (its options: ``skill_writer``, ``coef`` / ``--distill-lambda``, ``gate_beta``)."""
    options = teacher("hindsight").option_values(cfg)
    writer = PolicySkillWriter(policy) if options.skill_writer == "policy" else TemplateSkillWriter()
    return HindsightTeacher(policy, model, writer, coef=options.coef, beta=options.gate_beta)


def hindsight_inputs(rollout: Any, writer: "SkillWriter | None") -> TeacherInputs:
    """Per step of ``rollout``, the hindsight teacher's context: the skill ``writer`` wrote for the
    step's trajectory; no step is routed (the gated term applies to every group)."""
    if writer is None:
        raise ValueError("hindsight needs a skill writer")
    skills = writer.write(transcripts_of(rollout))
    texts = [skills[s.traj] for s in rollout.steps]
    share = 1.0 if rollout.steps else 0.0
    return TeacherInputs(texts, [False] * len(rollout.steps), {"distill/group_frac": share})
