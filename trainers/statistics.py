"""The statistics the package reports: intervals over seeds and over episodes, and the AUC of
coverage for success. Pure numpy.

* :func:`mean_ci` -- mean over seeds and the half-width of its 95% t interval (:func:`t975`);
* :func:`paired_bootstrap_ci` -- did RL help? a percentile bootstrap over paired episodes;
* :func:`within_group_auc` / :func:`auc_with_ci` -- does coverage go with success?

The lab's tests (paired t, Holm) are in :mod:`trainers.lab.significance`.

Does coverage go with success? ProGPO ranks the trajectories of an all-failed group by their
coverage P_i. That can only help if, among trajectories of the same task, higher coverage goes
with success. :func:`within_group_auc` measures it where it can be seen: in groups with mixed
outcomes. For every pair (i, j) of one group with R_i > 0 and R_j = 0 (below ``tau_r``), the pair
counts 1 when P_i > P_j, 0.5 on a tie, 0 otherwise; the AUC is the mean over all such pairs of all
groups (0.5: coverage says nothing about success; 1: the successful trajectory always covered
more). The 95% interval resamples groups (tasks), the unit that repeats.

Example (two groups of three; in each, the successful trajectory covered the most):

    >>> p = np.array([0.5, 0.2, 0.1, 0.4, 0.4, 0.1])
    >>> r = np.array([1.0, 0.0, 0.0, 0.0, 0.7, 0.0])
    >>> g = np.array([0, 0, 0, 1, 1, 1])
    >>> res = within_group_auc(p, r, g)
    >>> res.auc, res.pairs, res.groups
    (0.875, 4, 2)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from wrappers.signals import TAU_R

__all__ = ["AUCResult", "auc_with_ci", "mean_ci", "paired_bootstrap_ci", "t975", "t_two_sided_p", "within_group_auc"]


def t975(df: int) -> float:
    """The 97.5% quantile of Student's t with ``df`` >= 1 degrees of freedom (the multiplier of a
    95% interval of a mean over ``df + 1`` seeds): ``scipy.stats.t.ppf``.

    >>> round(t975(7), 4), round(t975(31), 4), round(t975(1000), 3)
    (2.3646, 2.0395, 1.962)
    """
    if isinstance(df, bool) or int(df) != df or df < 1:
        raise ValueError(f"t975 needs an integer df >= 1, got {df}")
    return float(stats.t.ppf(0.975, int(df)))


def t_two_sided_p(t: float, df: int) -> float:
    """P(``|T| >= |t|``) for Student's t with an integer ``df`` >= 1: ``2 * scipy.stats.t.sf``.

    >>> round(t_two_sided_p(2.306, 8), 4), round(t_two_sided_p(0.0, 3), 4)
    (0.05, 1.0)
    """
    if df < 1 or int(df) != df:
        raise ValueError(f"t_two_sided_p needs an integer df >= 1, got {df}")
    if np.isnan(t):  # no statistic: no evidence either way (never "significant")
        return float("nan")
    if not np.isfinite(t):
        return 0.0
    return float(min(1.0, 2.0 * stats.t.sf(abs(t), int(df))))


def mean_ci(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over seeds (axis 0) and the half-width of its 95% t interval, per column over the seeds
    that have a value there (a NaN row is left out of the mean, the spread and the degrees of
    freedom alike); the half-width is 0 where fewer than 2 seeds have a value.

    >>> m, h = mean_ci(np.array([[0.1], [0.3]]))
    >>> round(float(m[0]), 3), round(float(h[0]), 3)
    (0.2, 1.271)
    >>> m, h = mean_ci(np.array([[0.1], [np.nan], [0.3]]))  # two seeds' values: df 1, not 2
    >>> round(float(m[0]), 3), round(float(h[0]), 3)
    (0.2, 1.271)
    """
    x = np.asarray(x, dtype=np.float64)
    counts = np.sum(~np.isnan(x), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: its mean is NaN, said by the NaN
        m = np.nanmean(x, axis=0)
        sd = np.nanstd(x, axis=0, ddof=1)
    quantile = np.array([t975(int(c) - 1) if c >= 2 else 0.0 for c in np.ravel(counts)]).reshape(np.shape(counts))
    half = np.where(counts >= 2, quantile * np.nan_to_num(sd) / np.sqrt(np.maximum(counts, 1)), 0.0)
    return m, half


def paired_bootstrap_ci(
    start: Sequence[float] | np.ndarray,
    end: Sequence[float] | np.ndarray,
    n_boot: int = 10_000,
    seed: int = 0,
    alpha: float = 0.05,
) -> tuple[float, float, float]:
    """(mean(end - start), lower, upper): percentile bootstrap over paired episodes.

    ``start[i]`` and ``end[i]`` must be the same episode (task and seed) under two policies.
    """
    a = np.asarray(start, dtype=np.float64)
    b = np.asarray(end, dtype=np.float64)
    if a.shape != b.shape or a.ndim != 1 or a.size == 0:
        raise ValueError(f"paired_bootstrap_ci needs two equal-length 1-D win vectors, got {a.shape} and {b.shape}")
    d = b - a
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, d.size, size=(n_boot, d.size))
    means = d[idx].mean(axis=1)
    lo, hi = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(d.mean()), float(lo), float(hi)


@dataclass(frozen=True)
class AUCResult:
    """A within-group AUC: its value, the pairs and groups behind it, and its 95% interval."""

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


def within_group_auc(coverage: np.ndarray, outcome: np.ndarray, group: np.ndarray, tau_r: float = TAU_R) -> AUCResult:
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


def auc_with_ci(
    coverage: np.ndarray,
    outcome: np.ndarray,
    group: np.ndarray,
    tau_r: float = TAU_R,
    n_boot: int = 2000,
    seed: int = 0,
) -> AUCResult:
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
