"""ProGPO's two signals, each defined here once: the first-visit coverage rate and the all-failed test.

:class:`~wrappers.FirstVisitCoverage` (per step), :class:`~wrappers.GroupVectorEnv` (per group),
``trainers.advantages`` (the estimator) and ``trainers.runs.metrics`` (the logs) all call these, so the
number an env reports, the one the estimator uses and the one the logs show cannot drift apart.

>>> coverage_rate(3, 6), coverage_rate(0, 0)
(0.5, 0.0)
>>> all_failed([0.0, 0.0005]), all_failed([0.0, 0.4])     # a partial WebShop score is a signal
(True, False)
>>> all_failed_groups(np.array([0.0, 1.0, 0.0, 0.0]), np.array([0, 0, 1, 1]), 2).tolist()
[False, True]
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["TAU_P", "TAU_R", "all_failed", "all_failed_groups", "coverage_rate"]

#: default success threshold: a group is all-failed when every outcome is below it
TAU_R = 1e-3
#: default progress gate: ProGPO's term is 0 in a group whose coverage has a std below it
TAU_P = 1e-4


def coverage_rate(new_states: float | np.ndarray, steps: float | np.ndarray) -> float | np.ndarray:
    """``(D - 1) / T``: states first reached (the reset one not counted) per step taken; 0 for T = 0.

    Scalars give a float, arrays an array (element-wise)."""
    rate = np.asarray(new_states, dtype=np.float64) / np.maximum(np.asarray(steps, dtype=np.float64), 1.0)
    return float(rate) if rate.ndim == 0 else rate


def all_failed(outcomes: Sequence[float] | np.ndarray, tau_r: float = TAU_R) -> bool:
    """``max_i R_i < tau_r``: no member of the group has an outcome signal."""
    return bool(np.max(np.asarray(outcomes, dtype=np.float64)) < tau_r)


def all_failed_groups(outcomes: np.ndarray, group_ids: np.ndarray, n_groups: int, tau_r: float = TAU_R) -> np.ndarray:
    """:func:`all_failed` of every group at once (``group_ids`` dense in ``0..n_groups-1``)."""
    best = np.full(n_groups, -np.inf)
    np.maximum.at(best, group_ids, outcomes)
    return best < tau_r
