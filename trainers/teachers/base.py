"""What the two built-in teachers share (:class:`ContextTeacher`): a student to distill into, a
context text (the privileged text, a skill) put before a step's prompt, and the samples of what
they read; and what a teacher is given of an iteration (:class:`TeacherInputs`)."""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import torch

from trainers.teachers.contract import TeacherBase
from wrappers.errors import UserError

__all__ = ["ContextTeacher", "StepTexts", "TeacherInputs"]


def _with_context(step: Any, prefix: list[int]) -> Any:
    """``step`` with ``prefix`` (the privileged text or the skill) before its prompt."""
    return dataclasses.replace(step, prompt_ids=list(prefix) + list(step.prompt_ids))


#: each step's context text (privileged or a skill), or ``None`` for none
StepTexts = Sequence[Optional[str]]


class ContextTeacher(TeacherBase):
    """What the two built-in teachers share: the policy they distill into, the samples of what
    they read, the encoding of a context text, and EMA weights made on demand. A teacher
    (:class:`trainers.teachers.Teacher`): :meth:`inputs` of a rollout, :meth:`kept` steps,
    :meth:`loss_targets` of the update's steps (no gradient) and :meth:`after_step`.

    Args:
        policy: the student (its ``distributions``, ``compute_logprobs_and_entropy``, ``tokenizer``).
        model: the student's module.
        samples_per_iteration: context texts kept per iteration for ``distill_samples.jsonl``.
    """

    def __init__(self, policy: Any, model: torch.nn.Module, *, samples_per_iteration: int = 4) -> None:
        if not hasattr(policy, "distributions"):
            raise UserError(
                f"distill {self.name}: the policy {type(policy).__name__} has no distributions() to distill "
                "into (the LLM policies of agents.policy have)"
            )
        super().__init__()
        self.policy, self.model = policy, model
        self.samples_per_iteration = samples_per_iteration

    def ensure_ema(self) -> torch.nn.Module:
        """The EMA teacher, first copied from the student's current weights."""
        if self.ema is None:
            self.ema = copy.deepcopy(self.model).eval()
            for p in self.ema.parameters():
                p.requires_grad_(False)
        return self.ema

    def loss_targets(
        self, steps: Sequence[Any], chosen: Sequence[int], inputs: "TeacherInputs", iteration: int
    ) -> tuple[Any, dict[str, float]]:
        """:meth:`targets` of an iteration's :class:`TeacherInputs`, with their metrics."""
        out, stats = self.targets(steps, chosen, inputs.texts, inputs.routed, iteration)
        return out, {**stats, **inputs.metrics}

    def targets(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: StepTexts, routed: Sequence[bool], iteration: int
    ) -> tuple[Any, dict[str, float]]:
        raise NotImplementedError

    def _encode(self, text: str) -> list[int]:
        return list(self.policy.tokenizer.encode(text.strip() + "\n\n", add_special_tokens=False))

    def _contexts(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: Sequence[str | None], work: Sequence[int]
    ) -> list[Any]:
        """The ``work`` steps' outputs with their context text before the prompt (encoded once per text)."""
        prefix = {text: self._encode(text) for text in {texts[chosen[j]] or "" for j in work}}
        return [_with_context(steps[chosen[j]].output, prefix[texts[chosen[j]] or ""]) for j in work]

    def _sample(
        self,
        steps: Sequence[Any],
        chosen: Sequence[int],
        texts: Sequence[str | None],
        work: Sequence[int],
        iteration: int,
    ) -> None:
        seen: set[str] = set()
        for j in work:
            text = texts[chosen[j]] or ""
            if text in seen:
                continue
            seen.add(text)
            step = steps[chosen[j]]
            self.samples.append(
                {
                    "iteration": iteration,
                    "mode": self.name,
                    "context": text,
                    "observation": step.obs[:300],
                    "action": step.action,
                }
            )
            if len(seen) >= self.samples_per_iteration:
                break


@dataclass
class TeacherInputs:
    """What the teacher needs of an iteration beside the steps: per step its context text and
    whether it takes the distillation loss (privileged: its group failed completely), and the
    share of groups that got the teacher's loss."""

    texts: list[str]
    routed: list[bool]
    metrics: dict[str, float]
