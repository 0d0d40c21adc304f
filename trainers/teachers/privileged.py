"""The privileged teacher (I-SDPO): an EMA of the student that reads the env's privileged text
re-scores the student's own decisions in the all-failed groups, which take its loss instead of
the RL loss. It reads information the agent never sees: its runs are never pure RL."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from agents.contract import scoring_with
from trainers.teachers.base import ContextTeacher, StepTexts, TeacherInputs
from trainers.teachers.losses import ema_update, entropies, normalised_weights
from trainers.teachers.registry import PRIVILEGED_KEY, teacher
from trainers.teachers.targets import PrivilegedTargets
from wrappers.errors import UserError

__all__ = ["PrivilegedTeacher", "make_privileged", "privileged_inputs"]


class PrivilegedTeacher(ContextTeacher):
    """I-SDPO: an EMA of the student reads the env's privileged text and re-scores the student's
    own decisions in the all-failed groups, whose steps take the distillation loss instead of the
    RL loss. ``tau``: EMA rate; ``top_k``: generate mode, tokens compared per position."""

    name = "privileged"

    def __init__(
        self, policy: Any, model: torch.nn.Module, *, tau: float = 0.05, top_k: int = 20, samples_per_iteration: int = 4
    ) -> None:
        if not 0.0 <= tau <= 1.0:
            raise ValueError(f"tau must be in [0, 1] (the EMA rate of the teacher), got {tau!r}")
        super().__init__(policy, model, samples_per_iteration=samples_per_iteration)
        self.tau, self.top_k = tau, top_k

    def after_step(self) -> None:
        """The EMA teacher follows the student."""
        if self.ema is not None:
            ema_update(self.ema, self.model, self.tau)

    def inputs(self, rollout: Any, step_failed: Sequence[bool], env: str = "this") -> "TeacherInputs":
        """This teacher's inputs of an iteration's ``rollout`` (:func:`privileged_inputs`)."""
        return privileged_inputs(rollout, step_failed, env=env)

    def kept(self, inputs: "TeacherInputs", n_steps: int) -> list[bool]:
        """The routed steps take its loss whatever their advantage."""
        return list(inputs.routed)

    def targets(
        self, steps: Sequence[Any], chosen: Sequence[int], texts: StepTexts, routed: Sequence[bool], iteration: int
    ) -> tuple[PrivilegedTargets, dict[str, float]]:
        """Targets of the ``chosen`` steps (indices into ``steps``); ``texts[i]``: step i's
        privileged text; ``routed[i]``: step i's group failed completely."""
        n = len(chosen)
        out = PrivilegedTargets(routed=[bool(routed[i]) for i in chosen])
        out.teacher, out.index, out.weight = [None] * n, [None] * n, [None] * n
        work = [j for j in range(n) if out.routed[j]]
        if not work:
            return out, {"distill/steps": 0.0}
        ctx = self._contexts(steps, chosen, texts, work)
        with torch.no_grad():
            with scoring_with(self.policy, self.ensure_ema()):
                dists = self.policy.distributions(ctx)
            h_rows = []
            for j, d in zip(work, dists):
                d = d.detach().float().cpu()
                if d.dim() == 2:  # generate mode: the teacher's top-k tokens per position
                    top, idx = d.topk(min(self.top_k, d.shape[-1]), dim=-1)
                    out.teacher[j], out.index[j] = top, idx
                else:
                    out.teacher[j], d = d, d[None]
                h_rows.append(entropies(d))
            w = normalised_weights(torch.cat(h_rows))  # over every routed row of the batch
            at = 0
            for j, h in zip(work, h_rows):
                out.weight[j] = w[at : at + h.numel()]
                at += h.numel()
        self._sample(steps, chosen, texts, work, iteration)
        return out, {"distill/steps": float(len(work))}


def make_privileged(cfg: Any, policy: Any, model: torch.nn.Module) -> PrivilegedTeacher:
    """The privileged teacher of a run's config (its options: ``--distill-tau`` / ``--teacher-option tau=``, ``top_k``)."""
    options = teacher("privileged").option_values(cfg)
    return PrivilegedTeacher(policy, model, tau=options.tau, top_k=options.top_k)


def privileged_inputs(rollout: Any, step_failed: Sequence[bool], env: str = "this") -> TeacherInputs:
    """Per step of ``rollout``, the privileged teacher's context and routing: the privileged text of
    the step's trajectory; a step takes the distillation loss exactly when its group failed
    completely (``step_failed``, the estimator's all-failed flag per step), the others the RL loss alone.

    Raises:
        UserError: a rollout whose env offered no privileged text.
    """
    texts = [rollout.trajectories[s.traj].privileged for s in rollout.steps]
    if rollout.steps and not any(texts):
        raise UserError(
            f"distill privileged: the {env} env gave no info['{PRIVILEGED_KEY}'] at reset; only an env "
            "that offers privileged text can be distilled from it (ALFWorld, WebShop)"
        )
    routed = [bool(f) for f in step_failed]
    groups = {t.group for t in rollout.trajectories}
    failed_groups = {rollout.trajectories[s.traj].group for s, f in zip(rollout.steps, routed) if f}
    share = len(failed_groups) / max(len(groups), 1)
    return TeacherInputs(texts, routed, {"distill/group_frac": share})
