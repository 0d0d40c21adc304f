"""GiGPO (arXiv 2505.10978): GRPO's episode term plus a step term over anchor states.

The steps of one group that act from the same canonical state ``o_t`` form an anchor group; each
step's discounted return is normalized inside it (:func:`~trainers.advantages.segments.anchor_advantages`),
and ``A = A^E + omega * A^S``. Under ``progpo-gigpo`` the step rewards of an all-failed group are
its first visits (:meth:`~trainers.advantages.registry.StepContext.returns`).

>>> GiGPOConfig().omega
1.0
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from trainers.advantages.registry import Estimator, StepContext, grpo_episode, option, register_builtin
from trainers.advantages.segments import anchor_advantages

__all__ = ["GiGPOConfig"]


@dataclass(frozen=True)
class GiGPOConfig:
    """GiGPO's own option: the weight ``omega`` of the anchor-state term."""

    omega: float = option(1.0, "weight of the anchor-state term", shared=True, ge=0)


def gigpo_step(ctx: StepContext) -> np.ndarray | None:
    """GiGPO: ``omega`` x the anchor-state term (steps of one group with the same ``o_t``)."""
    if not ctx.traj.size:
        return None
    _, ret = ctx.returns()
    s, step_group = ctx.states(), ctx.gid[ctx.traj]
    _, skey = np.unique(s, return_inverse=True)
    keys = step_group.astype(np.int64) * (int(skey.max()) + 1) + skey.reshape(-1)
    _, aid, count = np.unique(keys, return_inverse=True, return_counts=True)
    term = anchor_advantages(ret, keys, ctx.cfg.eps, ctx.cfg.norm)
    # where the term can act (an anchor group with a second member) and where it does (returns
    # that differ there: an all-failed group's are all 0); counted over the estimator's rows
    ctx.acted["gigpo_rows"] = float(ctx.traj.size)
    ctx.acted["gigpo_peer_steps"] = float(np.sum(count[aid.reshape(-1)] > 1))
    ctx.acted["gigpo_active_steps"] = float(np.count_nonzero(term))
    return ctx.options.omega * term


def gigpo_metrics(acted: Mapping[str, float], n_groups: int, n_steps: int) -> dict[str, float]:
    """Where GiGPO's anchor term could act and where it did: the share of the estimator's rows
    (steps; a tree's shared step once per leaf) in an anchor group of two or more members, and the
    share whose step term is not 0 (returns that differ within the anchor group).

    >>> gigpo_metrics({"gigpo_rows": 100.0, "gigpo_peer_steps": 30.0, "gigpo_active_steps": 12.0}, 8, 80)
    {'adv/gigpo_peer_step_frac': 0.3, 'adv/gigpo_active_step_frac': 0.12}
    """
    if "gigpo_peer_steps" not in acted:
        return {}
    rows = max(float(acted.get("gigpo_rows", n_steps)), 1.0)
    return {
        "adv/gigpo_peer_step_frac": float(acted["gigpo_peer_steps"]) / rows,
        "adv/gigpo_active_step_frac": float(acted.get("gigpo_active_steps", 0.0)) / rows,
    }


register_builtin(
    Estimator(
        "gigpo",
        grpo_episode,
        gigpo_step,
        needs=frozenset({"states"}),
        options=GiGPOConfig,
        help="GRPO's episode term plus omega x the anchor-state term (steps from the same o_t)",
        metrics=gigpo_metrics,
    ),
    rank=2,
)
