"""The built-in teachers' terms of one update (:class:`trainers.loop.ppo.AuxTerm`): what
:func:`trainers.loop.ppo.ppo_update` adds to the RL loss, per step of its batch.

:class:`PrivilegedTargets` also routes steps away from the RL loss (the all-failed groups take
its distillation loss instead: :class:`trainers.loop.ppo.RoutingTerm`); :class:`HindsightTargets`
only adds a term to each micro-batch's loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import torch

from trainers.teachers.losses import gated_distill, symmetric_kl, topk_symmetric_kl

__all__ = ["HindsightTargets", "PrivilegedTargets"]


@dataclass
class PrivilegedTargets:
    """What :func:`trainers.loop.ppo.ppo_update` needs for the privileged teacher's term, per step of the
    batch (the update's :class:`~trainers.loop.ppo.RoutingTerm`: the routed steps take its loss alone).

    Attributes:
        routed: the step takes the distillation loss instead of the RL loss (its group failed completely).
        teacher: the teacher's log-distribution of a routed step (score mode ``[K]``; generate mode
            ``[n, k]``, its top-k tokens), else None.
        index: generate mode: the top-k token ids ``[n, k]``; else None.
        weight: each routed step's per-row weights (:func:`entropy_weights`).
    """

    routed: list[bool] = field(default_factory=list)
    teacher: list[torch.Tensor | None] = field(default_factory=list)
    index: list[torch.Tensor | None] = field(default_factory=list)
    weight: list[torch.Tensor | None] = field(default_factory=list)
    #: the update's sums: the weighted KL and its weight
    sums: dict[str, float] = field(default_factory=lambda: {"kl": 0.0, "kl_weight": 0.0})

    def split(self, part: list[int]) -> tuple[list[int], list[int]]:
        """A mini-batch's routed steps take the distillation loss, the others the RL loss."""
        return [j for j in part if not self.routed[j]], [j for j in part if self.routed[j]]

    def routed_loss(self, routed: list[int], batch: Any, cfg: Any, learner: Any, comm: Any, share: float) -> None:
        """The loss on a mini-batch's ``routed`` steps: the weighted mean of the symmetric KL
        between teacher and student over their decisions (score mode) or response tokens
        (generate mode), times ``share`` (the routed steps' part of the mini-batch)."""
        if learner.distributions is None:
            raise RuntimeError("a privileged teacher needs Learner.distributions (the student's whole distributions)")
        total_w = float(comm.sum([sum(float(self.weight[j].sum()) for j in routed)])[0])  # type: ignore[union-attr, misc]  # a routed step always has its weights (Optional in the list type)
        if total_w <= 0:
            return
        for micro in batch.passes(routed, cfg):
            dists = learner.distributions([batch.outputs[j] for j in micro])
            losses = []
            for j, d in zip(micro, dists):
                t, w = self.teacher[j].to(d.device), self.weight[j].to(d.device)  # type: ignore[union-attr]  # a routed step always has its teacher and weights
                idx = self.index[j]
                kl = (
                    topk_symmetric_kl(t, idx.to(d.device), d)
                    if idx is not None
                    else symmetric_kl(t, d.float()).reshape(1)
                )
                losses.append((w.reshape(-1) * kl.reshape(-1)).sum())
                self.sums["kl"] += float((w.reshape(-1) * kl.detach().reshape(-1)).sum())
                self.sums["kl_weight"] += float(w.sum())
            (comm.loss_scale * share * torch.stack(losses).sum() / total_w).backward()

    def micro_term(
        self, micro: Sequence[int], lp: torch.Tensor, w_t: torch.Tensor, batch: Any, mb_weight: float, loss_scale: float
    ) -> torch.Tensor | None:
        """No term beside the RL loss (the routed steps take their own loss)."""
        return None

    def stats(self, comm: Any) -> dict[str, float]:
        """The mean symmetric KL under the entropy weights."""
        kl, kl_w = comm.sum(list(self.sums.values()))
        return {"distill/kl": kl / kl_w if kl_w > 0 else 0.0}


@dataclass
class HindsightTargets:
    """What :func:`trainers.loop.ppo.ppo_update` needs for the hindsight teacher's term, per step of the
    batch (the update's :class:`~trainers.loop.ppo.AuxTerm`).

    Attributes:
        skill: ``l_skill``, the log-probs of the step's own tokens with the skill in context (None:
            no skill).
        coef, beta: SEED's lambda and gate beta.
    """

    skill: list[torch.Tensor | None] = field(default_factory=list)
    coef: float = 0.01
    beta: float = 5.0
    #: the update's sums: the gates and their tokens
    sums: dict[str, float] = field(default_factory=lambda: {"gate": 0.0, "gate_tokens": 0.0})

    def micro_term(
        self, micro: Sequence[int], lp: torch.Tensor, w_t: torch.Tensor, batch: Any, mb_weight: float, loss_scale: float
    ) -> torch.Tensor | None:
        """SEED's gated term of a micro-batch, ``lambda * sum(w * g * (sg[l_skill] - l_theta)) /
        mb_weight`` (the RL loss's token weights and normaliser), over the steps that have a skill."""
        offsets = np.cumsum([0] + [batch.token_counts[j] for j in micro])
        terms, gates, weights = [], [], []
        for i, j in enumerate(micro):
            skill = self.skill[j]
            if skill is None:
                continue
            mine = lp[offsets[i] : offsets[i + 1]]
            term, gate = gated_distill(mine, skill.to(lp.device).reshape(mine.shape), self.beta)
            terms.append(term)
            gates.append(gate)
            weights.append(w_t[offsets[i] : offsets[i + 1]])
        if not terms:
            return lp.sum() * 0.0
        gate = torch.cat(gates)
        self.sums["gate"] += float(gate.sum())
        self.sums["gate_tokens"] += float(gate.numel())
        return self.coef * loss_scale * (torch.cat(weights) * torch.cat(terms)).sum() / mb_weight

    def stats(self, comm: Any) -> dict[str, float]:
        """The mean gate."""
        gate, gate_n = comm.sum(list(self.sums.values()))
        return {"distill/gate": gate / gate_n if gate_n > 0 else 0.0}
