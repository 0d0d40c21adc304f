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
    return ctx.options.omega * anchor_advantages(ret, keys, ctx.cfg.eps, ctx.cfg.norm)


register_builtin(
    Estimator(
        "gigpo",
        grpo_episode,
        gigpo_step,
        needs=frozenset({"states"}),
        options=GiGPOConfig,
        help="GRPO's episode term plus omega x the anchor-state term (steps from the same o_t)",
    ),
    rank=2,
)
