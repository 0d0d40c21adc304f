"""The lab's significance tests and learning-speed count, on ``scipy.stats``.

* :func:`paired_t_p` / :func:`holm` -- a paired difference's two-sided t-test p-value
  (``scipy.stats.ttest_1samp``), and the Holm step-down adjustment when several methods are
  compared against one baseline;
* :func:`paired_t_power` / :func:`seeds_for_power` -- the power of that test at an effect (the
  noncentral t, ``scipy.stats.nct``), from the spread of per-seed differences measured before, and
  the seeds a registered block needs;
* :func:`robustness` -- how much a paired verdict rests on a few seeds: the Wilcoxon signed-rank
  p, the sign test (``scipy.stats.binomtest``), the count of positive seeds, the median seed and
  the leave-one-seed-out range of the mean;
* :func:`episodes_to_reach` -- how many episodes a learning curve took to reach a level.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats

from trainers.statistics import t975

__all__ = ["episodes_to_reach", "holm", "paired_t_p", "paired_t_power", "robustness", "seeds_for_power"]


def paired_t_p(diffs: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test that the mean of ``diffs`` (one per seed) is 0: the
    test behind :func:`mean_ci`'s interval (p < 0.05 exactly when that interval excludes 0). NaN
    with fewer than 2 values or with any value that is not finite (a failed or unread run is no
    evidence); 0 or 1 when every difference is the same.

    >>> round(paired_t_p([0.1, 0.3, 0.2, 0.25]), 4), paired_t_p([0.1, float("nan"), 0.3])
    (0.0156, nan)
    """
    d = np.asarray(diffs, dtype=np.float64).reshape(-1)
    if d.size < 2 or not np.all(np.isfinite(d)):
        return float("nan")
    if float(np.ptp(d)) == 0.0:  # every seed the same: no spread to test against
        return 1.0 if float(np.mean(d)) == 0.0 else 0.0
    return float(stats.ttest_1samp(d, 0.0).pvalue)


def paired_t_power(effect: float, sd: float, n: int) -> float:
    """Power of the two-sided paired t-test at alpha 0.05 over ``n`` seeds when the per-seed
    differences have mean ``effect`` and standard deviation ``sd``: the noncentral t's mass beyond
    the critical values (``scipy.stats.nct``, noncentrality ``effect / sd * sqrt(n)``).

    >>> round(paired_t_power(0.08, 0.143, 28), 3), round(paired_t_power(0.0, 0.143, 28), 3)
    (0.814, 0.05)
    """
    if n < 3:
        raise ValueError(f"paired_t_power needs n >= 3 seeds, got {n}")
    df = n - 1
    crit = t975(df)
    lam = effect / sd * math.sqrt(n)
    return float(stats.nct.sf(crit, df, lam) + stats.nct.cdf(-crit, df, lam))


def seeds_for_power(effect: float, sd: float, power: float = 0.8, most: int = 1000) -> int:
    """The fewest seeds whose paired t-test (two-sided, alpha 0.05) reaches ``power`` at ``effect``
    given the per-seed SD ``sd`` (3 at least).

    >>> seeds_for_power(0.08, 0.143), seeds_for_power(0.117, 0.143), seeds_for_power(0.1, 0.21)
    (28, 14, 37)
    """
    for n in range(3, most + 1):
        if paired_t_power(effect, sd, n) >= power:
            return n
    raise ValueError(f"more than {most} seeds for {power:.0%} power at {effect} with SD {sd}")


def robustness(diffs: Sequence[float]) -> dict[str, float | int] | None:
    """How a paired verdict over seeds holds up, from the per-seed differences: the Wilcoxon
    signed-rank p (two-sided; zero differences dropped), the sign test's p (``binomtest`` of the
    positive seeds among the nonzero ones), the positive and nonzero counts, the median seed, and
    the leave-one-seed-out range of the mean. ``None`` with fewer than 3 finite values.

    >>> r = robustness([0.1, 0.3, 0.2, 0.25, -0.05, 0.0])
    >>> r["positive"], r["nonzero"], round(r["sign_p"], 3), round(r["wilcoxon_p"], 3), round(r["median"], 3)
    (4, 5, 0.375, 0.125, 0.15)
    >>> round(r["loo_lo"], 3), round(r["loo_hi"], 3)
    (0.1, 0.17)
    """
    d = np.asarray(diffs, dtype=np.float64).reshape(-1)
    if d.size < 3 or not np.all(np.isfinite(d)):
        return None
    nonzero = d[d != 0.0]
    positive = int(np.sum(nonzero > 0))
    wilcoxon_p = float(stats.wilcoxon(nonzero).pvalue) if nonzero.size else 1.0
    sign_p = float(stats.binomtest(positive, nonzero.size, 0.5).pvalue) if nonzero.size else 1.0
    loo = (d.sum() - d) / (d.size - 1)
    return {
        "wilcoxon_p": wilcoxon_p,
        "sign_p": sign_p,
        "positive": positive,
        "nonzero": int(nonzero.size),
        "median": float(np.median(d)),
        "loo_lo": float(loo.min()),
        "loo_hi": float(loo.max()),
    }


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjustment of a family of p-values (same order as given): comparisons whose
    adjusted p-value is below alpha are rejected with the family-wise error rate held at alpha.
    A NaN p-value (a comparison that could not be tested) stays NaN and still counts in the family's
    size, so that it never makes the others look stronger.

    >>> holm([0.01, 0.04, 0.03, 0.5])
    [0.04, 0.09, 0.09, 0.5]
    >>> holm([0.01, float("nan"), 0.04])
    [0.03, nan, 0.08]
    """
    p = np.asarray(pvalues, dtype=np.float64).reshape(-1)
    k = p.size
    tested = np.flatnonzero(~np.isnan(p))
    order = tested[np.argsort(p[tested], kind="stable")]
    adjusted = np.full(k, np.nan)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (k - rank) * p[i]))
        adjusted[i] = running
    return [round(float(x), 12) for x in adjusted]


def episodes_to_reach(
    train: np.ndarray, levels: Sequence[float], per_iteration: int, spent: np.ndarray | None = None
) -> list[str]:
    """Per level: the episodes played by the first iteration at which the seed-mean train success
    (rows: seeds, columns: iterations; 2-iteration running mean) reaches it, or "-" (never).
    ``spent``: the seed-mean episodes sampled by each iteration's end, where runs record them
    (dynamic sampling spends more than ``per_iteration``).

    >>> episodes_to_reach(np.array([[0.0, 0.2, 0.4], [0.0, 0.2, 0.2]]), [0.1, 0.25, 0.9], 64)
    ['128', '192', '-']
    >>> episodes_to_reach(np.array([[0.0, 0.2, 0.4]]), [0.1], 64, spent=np.array([64.0, 320.0, 448.0]))
    ['320']
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a column no seed reached: NaN, never a hit
        tr = np.nanmean(train, axis=0)
        smooth = np.array([np.nanmean(tr[max(0, i - 1) : i + 1]) for i in range(len(tr))])
    hits = [np.flatnonzero(smooth >= lv) for lv in levels]
    if spent is not None:
        return [str(int(round(float(spent[int(h[0])])))) if h.size else "-" for h in hits]
    return [str((int(h[0]) + 1) * per_iteration) if h.size else "-" for h in hits]
