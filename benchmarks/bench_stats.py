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
