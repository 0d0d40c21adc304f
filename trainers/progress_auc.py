"""Does coverage go with success? The within-group AUC of the progress P_i for R_i > 0.

ProGPO ranks the trajectories of an all-failed group by their coverage P_i. That can only help if,
among trajectories of the same task, higher coverage goes with success. This module measures it
where it can be seen: in groups with mixed outcomes. For every pair (i, j) of one group with
R_i > 0 and R_j = 0 (below ``tau_r``), the pair counts 1 when P_i > P_j, 0.5 on a tie, 0
otherwise; the AUC is the mean over all such pairs of all groups (0.5: coverage says nothing
about success; 1: the successful trajectory always covered more). The 95% interval resamples
groups (tasks), the unit that repeats.

Example (two groups of three; in each, the successful trajectory covered the most):

    >>> p = np.array([0.5, 0.2, 0.1, 0.4, 0.4, 0.1])
    >>> r = np.array([1.0, 0.0, 0.0, 0.0, 0.7, 0.0])
    >>> g = np.array([0, 0, 0, 1, 1, 1])
    >>> res = within_group_auc(p, r, g)
    >>> res.auc, res.pairs, res.groups
    (0.875, 4, 2)
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["AUCResult", "auc_with_ci", "within_group_auc"]


@dataclass(frozen=True)
class AUCResult:
    auc: float  # NaN without a single mixed group
    pairs: int  # (success, failure) pairs compared
    groups: int  # groups with mixed outcomes
    ci: tuple[float, float] = (float("nan"), float("nan"))  # 95% bootstrap over groups


def _group_scores(p: np.ndarray, won: np.ndarray, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per mixed group: (sum of pair scores, number of pairs)."""
    sums, counts = [], []
    for gid in np.unique(g):
        m = g == gid
        pos, neg = p[m & won], p[m & ~won]
        if pos.size and neg.size:
            diff = pos[:, None] - neg[None, :]
            sums.append(float(np.sum(diff > 0) + 0.5 * np.sum(diff == 0)))
            counts.append(pos.size * neg.size)
    return np.array(sums, dtype=np.float64), np.array(counts, dtype=np.float64)


def within_group_auc(coverage: np.ndarray, outcome: np.ndarray, group: np.ndarray, tau_r: float = 1e-3) -> AUCResult:
    """AUC of ``coverage`` for ``outcome >= tau_r`` over the pairs inside each group (module docs)."""
    p = np.asarray(coverage, dtype=np.float64).reshape(-1)
    won = np.asarray(outcome, dtype=np.float64).reshape(-1) >= tau_r
    g = np.asarray(group).reshape(-1)
    if not p.size == won.size == g.size:
        raise ValueError(f"coverage, outcome and group need one entry per trajectory ({p.size}, {won.size}, {g.size})")
    sums, counts = _group_scores(p, won, g)
    if not counts.size:
        return AUCResult(float("nan"), 0, 0)
    return AUCResult(float(sums.sum() / counts.sum()), int(counts.sum()), int(counts.size))


def auc_with_ci(coverage: np.ndarray, outcome: np.ndarray, group: np.ndarray, tau_r: float = 1e-3,
                n_boot: int = 2000, seed: int = 0) -> AUCResult:
    """:func:`within_group_auc` with a 95% percentile bootstrap interval over mixed groups.

    >>> res = auc_with_ci(np.array([2., 1., 1., 2.]), np.array([1., 0., 1., 0.]), np.array([0, 0, 1, 1]))
    >>> res.auc, res.groups, res.ci[0] <= res.auc <= res.ci[1]
    (0.5, 2, True)
    """
    p = np.asarray(coverage, dtype=np.float64).reshape(-1)
    won = np.asarray(outcome, dtype=np.float64).reshape(-1) >= tau_r
    g = np.asarray(group).reshape(-1)
    point = within_group_auc(p, np.where(won, 1.0, 0.0), g, tau_r=0.5)
    sums, counts = _group_scores(p, won, g)
    if counts.size < 2:
        return point
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, counts.size, size=(n_boot, counts.size))
    boots = sums[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.percentile(boots, [2.5, 97.5])
    return AUCResult(point.auc, point.pairs, point.groups, (float(lo), float(hi)))
