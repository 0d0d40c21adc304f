"""ProGPO's signal: progress ``P_i`` from first visits, and the progress term of all-failed groups.

``P_i = (D_i - 1) / T_i`` (``coverage: rate``; ``count``: ``D_i - 1``), first visits counted in the
episode or once per group (:func:`group_scope_first_visit`). In an all-failed group (``max_i R_i <
tau_R``) the progress term ``lambda * (P_i - mean P) / (std P + eps)``, 0 where ``std P < tau_P``,
replaces the base estimator's episode term (:func:`with_progress`; ``gate: always``, the control,
adds it in every group). :func:`shuffle_within_groups` is the shuffled-coverage control.

>>> progress_advantages(np.array([0.0, 0.5, 1.0]), lam=0.5).round(4)
array([-0.6124,  0.    ,  0.6124])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from trainers.advantages.grpo import rows
from trainers.advantages.segments import Norm, as_float, check_norm, safe_divide, segment_stats
from wrappers.signals import TAU_P, TAU_R, all_failed_groups, coverage_rate

__all__ = [
    "ProgressTerm",
    "all_failed_flat",
    "group_scope_first_visit",
    "progress_advantages",
    "progress_flat",
    "progress_of",
    "shuffle_within_groups",
    "with_progress",
]


def progress_flat(
    p: np.ndarray, gid: np.ndarray, n: int, lam: float, tau_p: float, eps: float, norm: str
) -> np.ndarray:
    _, mean, std = segment_stats(p, gid, n)
    centered = p - mean[gid]  # P_i - mean_j P_j
    scaled = safe_divide(centered, std[gid] + eps) if norm == "mean_std" else centered
    return np.where(std[gid] >= tau_p, lam * scaled, 0.0)  # gate: no progress signal -> 0


def all_failed_flat(r: np.ndarray, gid: np.ndarray, n: int, tau_r: float) -> np.ndarray:
    return all_failed_groups(r, gid, n, tau_r)  # max_i R_i < tau_R


@dataclass(frozen=True)
class ProgressTerm:
    """The settings of ProGPO's progress term (each as in :class:`~trainers.advantages.AdvantageConfig`).

    Attributes:
        lam: its weight lambda.
        norm: ``mean_std`` (divided by ``std P + eps``) or ``mean`` (centred only); the base's
            episode term is normalised alike.
        tau_r: outcome from which a trajectory counts as a success.
        tau_p: the spread of ``P`` under which the term is 0.
        eps: added to the standard deviations.
        gate: ``all_failed`` (ProGPO: it replaces the base's term in all-failed groups) or
            ``always`` (the control: added in every group).
    """

    lam: float = 1.0
    norm: str = "mean_std"
    tau_r: float = TAU_R
    tau_p: float = TAU_P
    eps: float = 1e-6
    gate: str = "all_failed"


def with_progress(
    adv: np.ndarray,
    r: np.ndarray,
    gid: np.ndarray,
    n: int,
    p: np.ndarray,
    term: ProgressTerm,
    failed: np.ndarray | None = None,
) -> np.ndarray:
    """The base estimator's episode term ``adv`` with ProGPO's progress term: in its place in
    all-failed groups, or (``gate: always``) added in every group. ``failed``: each group's
    all-failed flag, when already known."""
    # lambda * (P_i - mean P) / (std P + eps), gated
    prog = progress_flat(p, gid, n, term.lam, term.tau_p, term.eps, term.norm)
    if term.gate == "always":  # control: progress added in every group
        return adv + prog
    if failed is None:
        failed = all_failed_flat(r, gid, n, term.tau_r)
    return np.where(failed[gid], prog, adv)  # ProGPO: progress replaces the base in all-failed groups


def progress_advantages(
    coverage: np.ndarray, lam: float = 1.0, tau_p: float = TAU_P, eps: float = 1e-6, norm: Norm = "mean_std"
) -> np.ndarray:
    """ProGPO's all-failed signal over the last axis: ``lambda * (P - mean P) / (std P + eps)``,
    0 where ``std P < tau_P``.

    >>> progress_advantages(np.array([0.1, 0.1, 0.1]))
    array([0., 0., 0.])
    """
    p = as_float(coverage, "coverage")
    check_norm(norm)
    flat, gid, n = rows(p)
    return progress_flat(flat, gid, n, lam, tau_p, eps, norm).reshape(p.shape)


def group_scope_first_visit(
    first_visit: np.ndarray,
    step_traj: np.ndarray,
    step_index: np.ndarray,
    traj_group: np.ndarray,
    state_ids: np.ndarray,
    next_ids: np.ndarray,
) -> np.ndarray:
    """First visit counted once per group (``scope="group"``).

    A step's resulting state ``o_{t+1}`` (reached at time ``t + 1``) counts if it is new in its
    episode AND no trajectory of the group reached it earlier (reset states count as time 0).
    Ties at the same time all count, so the result does not depend on trajectory order.

    >>> group_scope_first_visit(np.array([True, True, True]), np.array([0, 0, 1]),
    ...     np.array([0, 1, 0]), np.array([0, 0]), np.array([0, 1, 0]), np.array([1, 2, 2]))
    array([ True, False,  True])
    """
    fv = np.asarray(first_visit, dtype=bool)
    traj = np.asarray(step_traj, dtype=np.int64)
    t = np.asarray(step_index, dtype=np.int64)
    grp = np.asarray(traj_group)[traj]
    first = t == 0
    # (group, state, time) for every resulting state, plus every reset state at time 0.
    g_all = np.concatenate([grp, grp[first]])
    s_all = np.concatenate([np.asarray(next_ids), np.asarray(state_ids)[first]])
    time_all = np.concatenate([t + 1, np.zeros(int(first.sum()), dtype=np.int64)])
    _, s_dense = np.unique(s_all, return_inverse=True)
    _, key = np.unique(g_all.astype(np.int64) * (int(s_dense.max()) + 1) + s_dense.reshape(-1), return_inverse=True)
    key = key.reshape(-1)
    earliest = np.full(int(key.max()) + 1 if key.size else 0, np.iinfo(np.int64).max)
    np.minimum.at(earliest, key, time_all)
    return fv & (earliest[key[: fv.size]] == t + 1)


def shuffle_within_groups(values: np.ndarray, gid: np.ndarray, mask: np.ndarray, seed: int = 0) -> np.ndarray:
    """``values`` with the entries of each group permuted among themselves where ``mask`` holds
    (the shuffled-coverage control; entries outside ``mask`` are kept).

    >>> shuffle_within_groups(np.array([1., 2., 3., 4.]), np.array([0, 0, 1, 1]), np.array([True, True, False, False]), 0)[2:]
    array([3., 4.])
    """
    out = np.asarray(values, dtype=np.float64).copy()
    rng = np.random.default_rng(seed)
    for g in np.unique(gid[mask]):
        idx = np.flatnonzero((gid == g) & mask)
        out[idx] = out[rng.permutation(idx)]
    return out


def progress_of(
    cfg: Any,
    first_visit: np.ndarray | None,
    traj: np.ndarray,
    t: np.ndarray,
    gid: np.ndarray,
    length: np.ndarray,
    state_ids: np.ndarray | None,
    next_ids: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray]:
    """``first_visit_t`` as floats (group scope applied) and each trajectory's progress ``P_i``."""
    n_traj, n_steps = length.size, traj.size
    if first_visit is None:
        return np.zeros(n_steps), np.zeros(n_traj)
    fv_b = np.asarray(first_visit, dtype=bool).reshape(-1)
    if fv_b.size != n_steps:
        raise ValueError(f"first_visit has {fv_b.size} entries, step_traj {n_steps}")
    if cfg.scope == "group":
        if next_ids is None:
            raise ValueError("scope='group' needs next_ids (o_{t+1} of each step)")
        fv_b = group_scope_first_visit(fv_b, traj, t, gid, np.asarray(state_ids), np.asarray(next_ids))
    fv = fv_b.astype(np.float64)
    found = np.bincount(traj, weights=fv, minlength=n_traj)  # D_i - 1
    progress = found if cfg.coverage == "count" else np.asarray(coverage_rate(found, length))
    return fv, progress  # P_i
