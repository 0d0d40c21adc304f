"""The lab's significance tests and learning-speed count: pure numpy.

* :func:`paired_t_p` / :func:`holm` -- a paired difference's two-sided t-test p-value, and the
  Holm step-down adjustment when several methods are compared against one baseline;
* :func:`paired_t_power` / :func:`seeds_for_power` -- the power of that test at an effect, from the
  spread of per-seed differences measured before, and the seeds a registered block needs;
* :func:`episodes_to_reach` -- how many episodes a learning curve took to reach a level.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from trainers.statistics import t975, t_two_sided_p

__all__ = ["episodes_to_reach", "holm", "paired_t_p", "paired_t_power", "seeds_for_power"]


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
    sd = float(np.std(d, ddof=1))
    if sd == 0.0:
        return 1.0 if float(np.mean(d)) == 0.0 else 0.0
    return t_two_sided_p(float(np.mean(d)) / (sd / np.sqrt(d.size)), d.size - 1)


def paired_t_power(effect: float, sd: float, n: int) -> float:
    """Power of the two-sided paired t-test at alpha 0.05 over ``n`` seeds when the per-seed
    differences have mean ``effect`` and standard deviation ``sd``: the noncentral t's mass beyond
    the critical values, integrated over the chi-square of the sample SD (exact to about 1e-6).

    >>> round(paired_t_power(0.08, 0.143, 28), 3), round(paired_t_power(0.0, 0.143, 28), 3)
    (0.814, 0.05)
    """
    if n < 3:
        raise ValueError(f"paired_t_power needs n >= 3 seeds, got {n}")
    df = n - 1
    crit = t975(df)
    lam = effect / sd * math.sqrt(n)
    # v ~ chi-square(df) on a grid wide enough to hold all but ~1e-12 of its mass
    v = np.linspace(1e-9, df + 60.0 * math.sqrt(2.0 * df) + 60.0, 200_001)
    log_pdf = (df / 2 - 1) * np.log(v) - v / 2 - (df / 2) * math.log(2.0) - math.lgamma(df / 2)
    w = np.exp(log_pdf)
    s = np.sqrt(v / df)
    phi = np.vectorize(lambda x: 0.5 * math.erfc(-x / math.sqrt(2.0)))
    beyond = (1.0 - phi(crit * s - lam)) + phi(-crit * s - lam)
    return float(np.trapezoid(beyond * w, v) / np.trapezoid(w, v))


def seeds_for_power(effect: float, sd: float, power: float = 0.8, most: int = 1000) -> int:
    """The fewest seeds whose paired t-test (two-sided, alpha 0.05) reaches ``power`` at ``effect``
    given the per-seed SD ``sd`` (3 at least: the integral above needs df >= 2).

    >>> seeds_for_power(0.08, 0.143), seeds_for_power(0.117, 0.143)
    (28, 14)
    """
    for n in range(3, most + 1):
        if paired_t_power(effect, sd, n) >= power:
            return n
    raise ValueError(f"more than {most} seeds for {power:.0%} power at {effect} with SD {sd}")


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


def episodes_to_reach(train: np.ndarray, levels: Sequence[float], per_iteration: int) -> list[str]:
    """Per level: the episodes played by the first iteration at which the seed-mean train success
    (rows: seeds, columns: iterations; 2-iteration running mean) reaches it, or "-" (never).

    >>> episodes_to_reach(np.array([[0.0, 0.2, 0.4], [0.0, 0.2, 0.2]]), [0.1, 0.25, 0.9], 64)
    ['128', '192', '-']
    """
    tr = np.nanmean(train, axis=0)
    smooth = np.array([np.nanmean(tr[max(0, i - 1) : i + 1]) for i in range(len(tr))])
    hits = [np.flatnonzero(smooth >= lv) for lv in levels]
    return [str((int(h[0]) + 1) * per_iteration) if h.size else "-" for h in hits]
