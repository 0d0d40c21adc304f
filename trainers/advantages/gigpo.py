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

__all__ = ["GiGPOConfig"]


@dataclass(frozen=True)
class GiGPOConfig:
    """GiGPO's own option: the weight ``omega`` of the anchor-state term."""

    omega: float = 1.0
