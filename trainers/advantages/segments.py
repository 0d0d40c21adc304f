"""Segment statistics: the numeric primitives every estimator is built from.

A *segment* is any set of entries compared with each other: a group of trajectories, an anchor
group of steps, a history cluster. Everything here is numpy only, vectorised over segments given
as dense integer ids.

>>> count, mean, std = segment_stats(np.array([1., 3., 5.]), np.array([0, 0, 1]), 2)
>>> count.tolist(), mean.tolist(), std.tolist()
([2.0, 1.0], [2.0, 5.0], [1.0, 0.0])
"""

from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

__all__ = [
    "Norm",
    "anchor_advantages",
    "as_float",
    "check_norm",
    "dense_ids",
    "discounted_returns",
    "factorize",
    "safe_divide",
    "segment_stats",
]

Norm = Literal["mean_std", "mean"]


def segment_stats(x: np.ndarray, seg: np.ndarray, n_seg: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-segment (count, mean, population std) of ``x``; two-pass for accuracy."""
    count = np.bincount(seg, minlength=n_seg).astype(np.float64)
    safe = np.maximum(count, 1.0)
    mean = np.bincount(seg, weights=x, minlength=n_seg) / safe
    dev = x - mean[seg]
    std = np.sqrt(np.bincount(seg, weights=dev * dev, minlength=n_seg) / safe)
    return count, mean, std


def as_float(x: np.ndarray | Sequence[float], name: str) -> np.ndarray:
    """``x`` as float64; a NaN or inf is refused with ``name`` in the message."""
    a = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or inf")
    return a


def check_norm(norm: str) -> None:
    """Refuse a group normalisation other than ``mean_std`` and ``mean``."""
    if norm not in ("mean_std", "mean"):
        raise ValueError(f"norm must be 'mean_std' or 'mean', got {norm!r}")


def safe_divide(centered: np.ndarray, denom: np.ndarray) -> np.ndarray:
    """``centered / denom``, 0 where ``denom`` is 0 (eps = 0 and a group whose values are all equal)."""
    return np.divide(centered, denom, out=np.zeros_like(centered, dtype=np.float64), where=denom > 0)


def dense_ids(group_ids: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense group index 0..n-1 of each entry (sorted unique ids) and n."""
    _, gid = np.unique(np.asarray(group_ids).reshape(-1), return_inverse=True)
    gid = gid.reshape(-1)
    return gid, (int(gid.max()) + 1 if gid.size else 0)


def factorize(keys: Sequence[object]) -> np.ndarray:
    """Map hashable keys (e.g. canonical observation strings) to dense int ids, first seen first.

    >>> factorize(["b", "a", "b"])
    array([0, 1, 0])
    """
    table: dict[object, int] = {}
    return np.fromiter((table.setdefault(k, len(table)) for k in keys), dtype=np.int64, count=len(keys))


#: above this many cells (trajectories x longest length) the padded matrix would waste memory:
#: the returns are then computed step by step
PADDED_CELLS_MAX = 50_000_000


def discounted_returns(
    rewards: np.ndarray, step_traj: np.ndarray, step_index: np.ndarray, gamma: float = 0.95
) -> np.ndarray:
    """``ret_t = sum_{k >= t} gamma^(k - t) r_k`` within each trajectory; steps in any order.

    ``step_traj`` gives each step's trajectory (dense ints 0..N-1), ``step_index`` its time t.

    >>> discounted_returns(np.array([0., 0., 1.]), np.array([0, 0, 0]), np.array([0, 1, 2]), 0.5)
    array([0.25, 0.5 , 1.  ])
    """
    r = as_float(rewards, "rewards")
    traj = np.asarray(step_traj, dtype=np.int64)
    t = np.asarray(step_index, dtype=np.int64)
    if r.size == 0:
        return r.copy()
    if t.min() < 0:
        raise ValueError("step_index must be >= 0")
    n_traj, t_max = int(traj.max()) + 1, int(t.max()) + 1
    if n_traj * t_max <= PADDED_CELLS_MAX:  # padded (N, T) matrix, backward recursion over columns
        seen = np.zeros((n_traj, t_max), dtype=bool)
        seen[traj, t] = True
        if int(seen.sum()) != r.size:
            raise ValueError("two steps share one (step_traj, step_index) pair")
        pad = np.zeros((n_traj, t_max))
        pad[traj, t] = r
        ret = np.zeros_like(pad)
        acc = np.zeros(n_traj)
        for col in range(t_max - 1, -1, -1):
            acc = pad[:, col] + gamma * acc
            ret[:, col] = acc
        return ret[traj, t]
    # Very long, very uneven trajectories: sort by (traj, t) and recurse step by step.
    order = np.lexsort((t, traj))
    out = np.empty_like(r)
    prev = -1
    run = 0.0
    for k in order[::-1]:
        run = r[k] + (gamma * run if traj[k] == prev else 0.0)
        prev = traj[k]
        out[k] = run
    return out


def anchor_advantages(
    returns: np.ndarray, anchor_keys: np.ndarray, eps: float = 1e-6, norm: Norm = "mean_std"
) -> np.ndarray:
    """GiGPO's step-level advantage: returns normalized within anchor groups; singletons get 0.

    ``anchor_keys`` identifies the anchor group of each step (e.g. ``group * S + state_id``).

    >>> anchor_advantages(np.array([1.0, 0.5, 0.2]), np.array([7, 7, 3])).round(4)
    array([ 1., -1.,  0.])
    """
    check_norm(norm)
    ret = as_float(returns, "returns")
    _, aid = np.unique(np.asarray(anchor_keys), return_inverse=True)
    aid = aid.reshape(-1)
    n = int(aid.max()) + 1 if aid.size else 0
    count, mean, std = segment_stats(ret, aid, n)
    centered = ret - mean[aid]
    scaled = safe_divide(centered, std[aid] + eps) if norm == "mean_std" else centered  # eps 0: equal returns give 0
    return np.where(count[aid] > 1, scaled, 0.0)
