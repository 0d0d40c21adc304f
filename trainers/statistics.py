"""The statistics the package reports: intervals over seeds and over episodes, and the AUC of
coverage for success. Pure numpy.

* :func:`mean_ci` -- mean over seeds and the half-width of its 95% t interval (``T975``);
* :func:`paired_bootstrap_ci` -- did RL help? a percentile bootstrap over paired episodes;
* :func:`within_group_auc` / :func:`auc_with_ci` -- does coverage go with success?
* :func:`episodes_to_reach` -- how many episodes a learning curve took to reach a level;
* :func:`paired_t_p` / :func:`holm` -- a paired difference's two-sided t-test p-value, and the
  Holm step-down adjustment when several methods are compared against one baseline.

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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["T975", "AUCResult", "auc_with_ci", "episodes_to_reach", "holm", "mean_ci", "paired_bootstrap_ci",
           "paired_t_p", "t_two_sided_p", "within_group_auc"]

#: two-sided 97.5% t quantiles by degrees of freedom (95% interval of a mean over seeds)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
        11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
        20: 2.086, 21: 2.080, 22: 2.074, 23: 2.069, 24: 2.064, 25: 2.060, 26: 2.056, 27: 2.052, 28: 2.048,
        29: 2.045, 30: 2.042}


def mean_ci(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over seeds (axis 0) and the half-width of its 95% t interval (0 with fewer than 2
    seeds; the normal quantile 1.96 beyond 31 seeds).

    >>> m, h = mean_ci(np.array([[0.1], [0.3]]))
    >>> round(float(m[0]), 3), round(float(h[0]), 3)
    (0.2, 1.271)
    """
    n = x.shape[0]
    m = np.nanmean(x, axis=0)
    if n < 2:
        return m, np.zeros_like(m)
    return m, T975.get(n - 1, 1.96) * np.nanstd(x, axis=0, ddof=1) / np.sqrt(n)


def paired_bootstrap_ci(start: Sequence[float], end: Sequence[float], n_boot: int = 10_000, seed: int = 0,
                        alpha: float = 0.05) -> tuple[float, float, float]:
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


def episodes_to_reach(train: np.ndarray, levels: Sequence[float], per_iteration: int) -> list[str]:
    """Per level: the episodes played by the first iteration at which the seed-mean train success
    (rows: seeds, columns: iterations; 2-iteration running mean) reaches it, or "-" (never).

    >>> episodes_to_reach(np.array([[0.0, 0.2, 0.4], [0.0, 0.2, 0.2]]), [0.1, 0.25, 0.9], 64)
    ['128', '192', '-']
    """
    tr = np.nanmean(train, axis=0)
    smooth = np.array([np.nanmean(tr[max(0, i - 1): i + 1]) for i in range(len(tr))])
    hits = [np.flatnonzero(smooth >= lv) for lv in levels]
    return [str((int(h[0]) + 1) * per_iteration) if h.size else "-" for h in hits]


def t_two_sided_p(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with an integer ``df`` >= 1, in closed form (Abramowitz and
    Stegun 26.7.3-4: a finite series in cos(theta), theta = atan(|t| / sqrt(df))).

    >>> round(t_two_sided_p(2.306, 8), 4), round(t_two_sided_p(0.0, 3), 4)
    (0.05, 1.0)
    """
    if df < 1 or int(df) != df:
        raise ValueError(f"t_two_sided_p needs an integer df >= 1, got {df}")
    if not np.isfinite(t):
        return 0.0
    theta = np.arctan(abs(t) / np.sqrt(df))
    c2, s = np.cos(theta) ** 2, np.sin(theta)
    if df % 2:  # odd: A = 2/pi * (theta + sin cos (1 + 2/3 cos^2 + 2*4/(3*5) cos^4 + ...))
        term, total = 1.0, 1.0 if df > 1 else 0.0
        for k in range(1, (df - 1) // 2):
            term *= c2 * (2 * k) / (2 * k + 1)
            total += term
        inside = 2 / np.pi * (theta + s * np.cos(theta) * total)
    else:  # even: A = sin (1 + 1/2 cos^2 + 1*3/(2*4) cos^4 + ...)
        term, total = 1.0, 1.0
        for k in range(1, df // 2):
            term *= c2 * (2 * k - 1) / (2 * k)
            total += term
        inside = s * total
    return float(min(1.0, max(0.0, 1.0 - inside)))


def paired_t_p(diffs: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test that the mean of ``diffs`` (one per seed) is 0: the
    test behind :func:`mean_ci`'s interval (p < 0.05 when that interval excludes 0, up to the
    rounding of ``T975``). NaN
    with fewer than 2 values; 0 or 1 when every difference is the same.

    >>> round(paired_t_p([0.1, 0.3, 0.2, 0.25]), 4)
    0.0156
    """
    d = np.asarray(diffs, dtype=np.float64).reshape(-1)
    if d.size < 2:
        return float("nan")
    sd = float(np.std(d, ddof=1))
    if sd == 0.0:
        return 1.0 if float(np.mean(d)) == 0.0 else 0.0
    return t_two_sided_p(float(np.mean(d)) / (sd / np.sqrt(d.size)), d.size - 1)


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order as given): comparisons whose
    adjusted p-value is below alpha are rejected with the family-wise error rate held at alpha.

    >>> holm([0.01, 0.04, 0.03, 0.5])
    [0.04, 0.09, 0.09, 0.5]
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    order = np.argsort(p, kind="stable")
    k = p.size
    adjusted = np.empty(k)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        adjusted[i] = running
    return [round(float(x), 12) for x in adjusted]


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
