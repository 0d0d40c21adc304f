"""GRPO and RLOO: each trajectory's outcome against its group's (the episode level of every base).

``_flat`` functions take flat arrays with dense group ids (ragged groups allowed) and hold the
one implementation of each formula; the others are views with one group per row of the last axis.

>>> rloo_advantages(np.array([1.0, 0.0, 0.0]))
array([ 1. , -0.5, -0.5])
"""

from __future__ import annotations

import numpy as np

from trainers.advantages.segments import Norm, as_float, check_norm, safe_divide, segment_stats

__all__ = ["grpo_advantages", "grpo_flat", "rloo_advantages", "rloo_flat", "rows"]


def grpo_flat(r: np.ndarray, gid: np.ndarray, n: int, eps: float, norm: str) -> np.ndarray:
    _, mean, std = segment_stats(r, gid, n)
    centered = r - mean[gid]  # R_i - mean_j R_j
    return safe_divide(centered, std[gid] + eps) if norm == "mean_std" else centered


def rloo_flat(r: np.ndarray, gid: np.ndarray, n: int) -> np.ndarray:
    count, mean, _ = segment_stats(r, gid, n)
    g = count[gid]
    # R_i - mean_{j != i} R_j = G / (G - 1) * (R_i - mean_j R_j); a group of one gets 0.
    return np.where(g > 1, (r - mean[gid]) * g / np.maximum(g - 1.0, 1.0), 0.0)


def rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """``x`` flattened, the row (group) of each entry along the last axis, and the row count."""
    g = x.shape[-1] if x.ndim else 1
    n = x.size // g if g else 0
    return x.reshape(-1), np.repeat(np.arange(n), g), n


def grpo_advantages(outcomes: np.ndarray, eps: float = 1e-6, norm: Norm = "mean_std") -> np.ndarray:
    """GRPO: ``A_i = (R_i - mean R) / (std R + eps)`` over the last axis (one group per row).

    >>> grpo_advantages(np.array([1.0, 0.0, 0.0, 1.0]))
    array([ 0.999998, -0.999998, -0.999998,  0.999998])
    """
    r = as_float(outcomes, "outcomes")
    check_norm(norm)
    flat, gid, n = rows(r)
    return grpo_flat(flat, gid, n, eps, norm).reshape(r.shape)


def rloo_advantages(outcomes: np.ndarray) -> np.ndarray:
    """RLOO: ``A_i = R_i - mean_{j != i} R_j`` over the last axis (0 for a group of one).

    >>> rloo_advantages(np.array([1.0, 0.0, 0.0]))
    array([ 1. , -0.5, -0.5])
    """
    r = as_float(outcomes, "outcomes")
    flat, gid, n = rows(r)
    return rloo_flat(flat, gid, n).reshape(r.shape)
