"""Statistics shared by the benchmark scripts (run them as ``python benchmarks/<name>.py``)."""
from __future__ import annotations

import numpy as np

#: two-sided 97.5% t quantiles by degrees of freedom (95% CI of a mean over seeds)
T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262}


def mean_ci(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean over seeds (axis 0) and the half-width of its 95% t interval (0 with fewer than 2 seeds)."""
    n = x.shape[0]
    m = np.nanmean(x, axis=0)
    if n < 2:
        return m, np.zeros_like(m)
    return m, T975.get(n - 1, 1.96) * np.nanstd(x, axis=0, ddof=1) / np.sqrt(n)


def episodes_to_reach(train: np.ndarray, levels: "list[float]", per_iteration: int) -> list[str]:
    """Per level: the episodes played by the first iteration at which the seed-mean train success
    (rows: seeds, columns: iterations; 2-iteration running mean) reaches it, or "-" (never).

    >>> episodes_to_reach(np.array([[0.0, 0.2, 0.4], [0.0, 0.2, 0.2]]), [0.1, 0.25, 0.9], 64)
    ['128', '192', '-']
    """
    tr = np.nanmean(train, axis=0)
    smooth = np.array([np.nanmean(tr[max(0, i - 1): i + 1]) for i in range(len(tr))])
    hits = [np.flatnonzero(smooth >= lv) for lv in levels]
    return [str((int(h[0]) + 1) * per_iteration) if h.size else "-" for h in hits]
