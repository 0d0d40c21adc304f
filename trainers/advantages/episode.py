"""The episode level: each trajectory's advantage ``A^E_i``, any estimator, many groups at once.

:func:`episode_flat` is the one implementation: the base's episode term
(:func:`~trainers.advantages.registry.estimator`), with ProGPO's progress term where the
estimator is ``progpo-<base>``. :func:`episode_advantages` takes any group ids;
:func:`progpo_episode_advantages` is the paper's function (one group), and
:func:`progpo_episode_advantages_batched` its ``(B, G)`` form.

>>> progpo_episode_advantages(np.array([0.0, 0.0]), np.array([0.2, 0.6])).round(4)
array([-1.,  1.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from trainers.advantages.grpo import rows
from trainers.advantages.progpo import ProgressTerm, with_progress
from trainers.advantages.registry import estimator as registered
from trainers.advantages.segments import Norm, as_float, check_norm, dense_ids
from wrappers.signals import TAU_P, TAU_R

__all__ = ["episode_advantages", "episode_flat", "progpo_episode_advantages", "progpo_episode_advantages_batched"]


def episode_flat(
    r: np.ndarray,
    gid: np.ndarray,
    n: int,
    base: str,
    p: np.ndarray | None,
    term: ProgressTerm,
    *,
    failed: np.ndarray | None = None,
    turns: np.ndarray | None = None,
    options: Any = None,
) -> np.ndarray:
    """A^E_i of every trajectory (flat arrays, dense group ids ``gid`` of ``n`` groups): the base's
    episode term (normalised by ``term.norm``, ``term.eps``), and with progress ``p`` ProGPO's
    term (:func:`~trainers.advantages.progpo.with_progress`)."""
    spec = registered(base)
    opts = spec.make_options() if options is None else options
    adv = spec.run_episode(r, gid, n, eps=term.eps, norm=term.norm, turns=turns, options=opts)
    if p is None:  # plain base estimator
        return adv
    return with_progress(adv, r, gid, n, p, term, failed)


def episode_advantages(
    outcomes: np.ndarray,
    group_ids: np.ndarray,
    coverage: np.ndarray | None = None,
    *,
    estimator: str = "progpo-grpo",
    lam: float = 1.0,
    norm: Norm = "mean_std",
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    eps: float = 1e-6,
    turns: np.ndarray | None = None,
    **options: Any,
) -> np.ndarray:
    """Episode-level advantage of each trajectory, many (possibly ragged) groups at once.

    ``outcomes[i]`` is ``R_i``, ``group_ids[i]`` the group of trajectory ``i`` (any ints),
    ``coverage[i]`` its progress ``P_i`` (needed by ``progpo-*`` estimators), ``turns[i]`` its
    number of turns ``T_i`` (needed by a base that needs ``turns``, as PlanPO). ``options``: the
    base's own options by name (PlanPO's ``success_threshold``). GiGPO's and HGPO's episode level
    is GRPO's.

    >>> episode_advantages(np.array([1., 0., 0., 0.]), np.array([0, 0, 1, 1]),
    ...                    np.array([.1, .2, .1, .3]), estimator="progpo-grpo").round(3)
    array([ 1., -1., -1.,  1.])
    """
    spec = registered(estimator)
    check_norm(norm)
    r = as_float(outcomes, "outcomes").reshape(-1)
    gid, n = dense_ids(group_ids)
    if gid.shape != r.shape:
        raise ValueError(f"group_ids has {gid.size} entries, outcomes {r.size}")
    p = None
    if estimator.startswith("progpo-"):
        if coverage is None:
            raise ValueError(f"estimator {estimator!r} needs the coverage P_i of each trajectory")
        p = as_float(coverage, "coverage").reshape(-1)
        if p.shape != r.shape:
            raise ValueError(f"coverage has {p.size} entries, outcomes {r.size}")
    t = None if turns is None else as_float(turns, "turns").reshape(-1)
    if t is not None and t.shape != r.shape:
        raise ValueError(f"turns has {t.size} entries, outcomes {r.size}")
    term = ProgressTerm(lam, norm, tau_r, tau_p, eps)
    return episode_flat(r, gid, n, spec.name, p, term, turns=t, options=spec.make_options(options))


def _check_base(base: str) -> None:
    if base not in ("grpo", "rloo", "gigpo"):
        raise ValueError(f"base must be 'grpo', 'rloo' or 'gigpo', got {base!r}")


def progpo_episode_advantages(
    outcomes: np.ndarray,
    coverage_rate: np.ndarray,
    base: str = "grpo",
    lam: float = 1.0,
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    eps: float = 1e-6,
) -> np.ndarray:
    """ProGPO episode advantages of ONE group (1-D arrays of length G).

    Any success (``max R >= tau_R``): the base estimator (``"grpo"``, ``"rloo"``, or
    ``"gigpo"`` whose episode level is GRPO) unchanged. All failed: progress advantages
    ``lambda * (P_i - mean P) / (std P + eps)``, or zeros when ``std P < tau_P``.

    >>> progpo_episode_advantages(np.zeros(3), np.array([0.0, 0.5, 1.0]), lam=0.5).round(4)
    array([-0.6124,  0.    ,  0.6124])
    """
    r = as_float(outcomes, "outcomes")
    p = as_float(coverage_rate, "coverage_rate")
    if r.ndim != 1 or p.shape != r.shape:
        raise ValueError(f"expected two 1-D arrays of one length, got {r.shape} and {p.shape}")
    _check_base(base)
    return progpo_episode_advantages_batched(r[None], p[None], base, lam=lam, tau_r=tau_r, tau_p=tau_p, eps=eps)[0]


def progpo_episode_advantages_batched(
    outcomes: np.ndarray, coverage_rate: np.ndarray, base: str = "grpo", **term: Any
) -> np.ndarray:
    """:func:`progpo_episode_advantages` for ``B`` groups at once: ``(B, G)`` arrays in and out;
    ``term``: its keyword arguments (``lam``, ``tau_r``, ``tau_p``, ``eps``).

    >>> progpo_episode_advantages_batched(np.array([[1., 0.], [0., 0.]]),
    ...                                   np.array([[.1, .5], [.1, .5]])).round(4)
    array([[ 1., -1.],
           [-1.,  1.]])
    """
    r = as_float(outcomes, "outcomes")
    p = as_float(coverage_rate, "coverage_rate")
    if r.ndim != 2 or p.shape != r.shape:
        raise ValueError(f"expected two (B, G) arrays of one shape, got {r.shape} and {p.shape}")
    _check_base(base)
    flat, gid, n = rows(r)
    adv = episode_flat(flat, gid, n, base, p.reshape(-1), ProgressTerm(norm="mean_std", **term))
    return adv.reshape(r.shape)
