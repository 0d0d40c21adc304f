"""Group-relative advantage estimators: GRPO, RLOO, GiGPO, PlanPO, HGPO and ProGPO on top of any of them.

Pure numpy functions, no env, no model. Notation follows the ProGPO paper (its advantage section):

- ``R_i``: outcome reward of trajectory ``i`` in a group of ``G`` trajectories of one task.
- ``P_i``: progress of trajectory ``i`` = first-visit coverage rate ``(D_i - 1) / T_i``
  (``D_i`` distinct canonical observations seen, reset one included; ``T_i`` steps).
- all-failed group: ``max_i R_i < tau_R``. Only there ProGPO replaces the base estimator:
  ``A^E_i = lambda * (P_i - mean P) / (std P + eps)`` if ``std P >= tau_P`` else ``0``.
  "Failed" is about the *outcome reward*, not about winning: as in the paper, a group with a
  partial WebShop score (``0 < R_i < 1``) has an outcome signal, so it is not all-failed and
  keeps the base estimator, although no member *won* (the ``success`` metric counts wins only,
  see :func:`trainers.metrics.rollout_metrics`).
- GiGPO step level: steps of one group with the same current canonical state ``o_t`` form an
  anchor group; ``A^S = (ret_t - mean_anchor ret) / (std_anchor ret + eps)`` where ``ret_t`` is
  the discounted (``gamma``) return from step ``t``; a step alone in its anchor group gets 0.
  ``A = A^E + omega * A^S``. ProGPO's step level uses ``first_visit_t`` as the step reward.

Conventions (each a choice other stacks make differently):

- std is the population std (``ddof=0``) everywhere; TRL and verl normalise GRPO with the unbiased one (``ddof=1``).
- Episode statistics are per trajectory (each of the G trajectories counts once); verl-agent's
  ``episode_norm_reward`` computes them across steps by default (a trajectory weighted by its length).
- In ``progpo-gigpo`` the ``tau_P`` gate applies to the episode term ``A^E`` only; the step term
  ``omega * A^S`` (first-visit returns within anchor groups) is kept in every all-failed group.

PlanPO (:mod:`trainers.advantages.planpo`) and HGPO (:mod:`trainers.advantages.hgpo`, with the
reconstructed potential credit of arXiv 2607.04242) have their modules; the numeric primitives
(segment statistics, discounted returns, anchor groups) are in :mod:`trainers.advantages.segments`.

Which groups each estimator acts on:

================  ==========================  =============================  ==========================
estimator         all-failed group            mixed group                    all-success group
================  ==========================  =============================  ==========================
grpo, rloo        0                           outcome z-score                0
gigpo             step term on ``o_t`` only   outcome + anchor-state term    anchor-state term
planpo            0                           z(R / T) among the successes   z(R / T): shorter first
hgpo              step term on histories      outcome + history-depth term   history-depth term
progpo-*          progress z(P) (+ the base   the base                       the base
                  step term on first visits)
================  ==========================  =============================  ==========================

One implementation per formula: the flat functions (``_grpo_flat``, ``_rloo_flat``,
``_progress_flat``, ``_episode_flat``: flat arrays with dense group ids, ragged groups allowed)
compute everything; the rest are views over them, from the simplest to the one the trainer calls:

1. one group per row of the last axis (1-D, or ``(B, G)``): :func:`grpo_advantages`,
   :func:`rloo_advantages`, :func:`progress_advantages`, :func:`progpo_episode_advantages` (the
   paper's function, exact signature) and :func:`progpo_episode_advantages_batched`;
2. episode level over flat arrays with group ids: :func:`episode_advantages`;
3. step level over flat step arrays: :func:`step_advantages` with an :class:`AdvantageConfig`
   (``estimator`` one of :data:`ESTIMATORS`), which is
   what the trainer calls (rollout -> :func:`step_advantages` -> ``trainers.losses``).

>>> import numpy as np
>>> progpo_episode_advantages(np.array([0.0, 0.0]), np.array([0.2, 0.6])).round(4)
array([-1.,  1.])
>>> progpo_episode_advantages(np.array([1.0, 0.0]), np.array([0.2, 0.6])).round(4)  # success: GRPO
array([ 1., -1.])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Sequence

import numpy as np

from trainers.advantages.segments import (
    Norm,
    anchor_advantages,
    as_float,
    check_norm,
    dense_ids,
    discounted_returns,
    factorize,
    safe_divide,
    segment_stats,
)
from trainers.advantages.hgpo import (
    FUSIONS,
    Fusion,
    hgpo_history_advantages,
    history_clusters,
    potential_credit,
)
from trainers.advantages.planpo import (
    planpo_alpha,
    planpo_episode_advantages,
    planpo_episode_flat,
    planpo_turn_advantages,
)
from wrappers.signals import TAU_P, TAU_R

try:
    from wrappers.signals import all_failed_groups, coverage_rate
except ImportError:  # another distribution's `wrappers` first on sys.path: one line that says so
    from progpo_envs.guard import check_import_names

    check_import_names(("wrappers",))
    raise

__all__ = [
    "penalized_advantages",
    "BASES",
    "ESTIMATORS",
    "FUSIONS",
    "AdvantageConfig",
    "StepAdvantages",
    "grpo_advantages",
    "rloo_advantages",
    "progress_advantages",
    "progpo_episode_advantages",
    "progpo_episode_advantages_batched",
    "episode_advantages",
    "discounted_returns",
    "anchor_advantages",
    "group_scope_first_visit",
    "shuffle_within_groups",
    "step_advantages",
    "factorize",
    "hgpo_history_advantages",
    "planpo_alpha",
    "planpo_episode_advantages",
    "planpo_turn_advantages",
    "potential_credit",
]

Base = Literal["grpo", "rloo", "gigpo", "planpo", "hgpo"]
#: the base estimators; each also has a ``progpo-`` variant
BASES: tuple[str, ...] = ("grpo", "rloo", "gigpo", "planpo", "hgpo")
ESTIMATORS: tuple[str, ...] = BASES + tuple(f"progpo-{b}" for b in BASES)
#: the bases with a step-level term (GiGPO's anchor groups, HGPO's history clusters)
STEP_BASES: tuple[str, ...] = ("gigpo", "hgpo")


# ----------------------------------------------------------------------------------------------
# Episode level, flat arrays with dense group ids gid (ragged groups allowed): the only
# implementation of each formula; everything else calls these.
# ----------------------------------------------------------------------------------------------
def _grpo_flat(r: np.ndarray, gid: np.ndarray, n: int, eps: float, norm: str) -> np.ndarray:
    _, mean, std = segment_stats(r, gid, n)
    centered = r - mean[gid]  # R_i - mean_j R_j
    return safe_divide(centered, std[gid] + eps) if norm == "mean_std" else centered


def _rloo_flat(r: np.ndarray, gid: np.ndarray, n: int) -> np.ndarray:
    count, mean, _ = segment_stats(r, gid, n)
    g = count[gid]
    # R_i - mean_{j != i} R_j = G / (G - 1) * (R_i - mean_j R_j); a group of one gets 0.
    return np.where(g > 1, (r - mean[gid]) * g / np.maximum(g - 1.0, 1.0), 0.0)


def _progress_flat(p: np.ndarray, gid: np.ndarray, n: int, lam: float, tau_p: float, eps: float, norm: str) -> np.ndarray:
    _, mean, std = segment_stats(p, gid, n)
    centered = p - mean[gid]  # P_i - mean_j P_j
    scaled = safe_divide(centered, std[gid] + eps) if norm == "mean_std" else centered
    return np.where(std[gid] >= tau_p, lam * scaled, 0.0)  # gate: no progress signal -> 0


def _all_failed_flat(r: np.ndarray, gid: np.ndarray, n: int, tau_r: float) -> np.ndarray:
    return all_failed_groups(r, gid, n, tau_r)  # max_i R_i < tau_R


def _episode_flat(
    r: np.ndarray, gid: np.ndarray, n: int, base: str, p: np.ndarray | None, *, lam: float, norm: str,
    tau_r: float, tau_p: float, eps: float, gate: str = "all_failed", failed: np.ndarray | None = None,
    turns: np.ndarray | None = None, success_threshold: float = 1.0,
) -> np.ndarray:
    """A^E_i of every trajectory: the one implementation behind every episode-level function."""
    # base A^E_i: RLOO, PlanPO's R / T among the successes, or GRPO (GiGPO's and HGPO's episode level)
    if base == "rloo":
        adv = _rloo_flat(r, gid, n)
    elif base == "planpo":
        if turns is None:
            raise ValueError("planpo needs the number of turns T_i of each trajectory")
        adv = planpo_episode_flat(r, turns, gid, n, success_threshold=success_threshold, eps=eps, norm=norm)
    else:
        adv = _grpo_flat(r, gid, n, eps, norm)
    if p is None:  # plain base estimator
        return adv
    prog = _progress_flat(p, gid, n, lam, tau_p, eps, norm)  # lambda * (P_i - mean P) / (std P + eps), gated
    if gate == "always":  # control: progress added in every group
        return adv + prog
    if failed is None:
        failed = _all_failed_flat(r, gid, n, tau_r)
    return np.where(failed[gid], prog, adv)  # ProGPO: progress replaces the base in all-failed groups


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
    success_threshold: float = 1.0,
) -> np.ndarray:
    """Episode-level advantage of each trajectory, many (possibly ragged) groups at once.

    ``outcomes[i]`` is ``R_i``, ``group_ids[i]`` the group of trajectory ``i`` (any ints),
    ``coverage[i]`` its progress ``P_i`` (needed by ``progpo-*`` estimators), ``turns[i]`` its
    number of turns ``T_i`` (needed by ``planpo`` and ``progpo-planpo``). GiGPO's and HGPO's
    episode level is GRPO's.

    >>> episode_advantages(np.array([1., 0., 0., 0.]), np.array([0, 0, 1, 1]),
    ...                    np.array([.1, .2, .1, .3]), estimator="progpo-grpo").round(3)
    array([ 1., -1., -1.,  1.])
    """
    if estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {estimator!r}")
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
    return _episode_flat(r, gid, n, estimator.removeprefix("progpo-"), p, lam=lam, norm=norm, tau_r=tau_r,
                         tau_p=tau_p, eps=eps, turns=t, success_threshold=success_threshold)


# ----------------------------------------------------------------------------------------------
# Single group (1-D) and batched (B, G) views: one group per row of the last axis, computed by
# the flat functions above (so every formula has exactly one implementation).
# ----------------------------------------------------------------------------------------------
def _rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
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
    flat, gid, n = _rows(r)
    return _grpo_flat(flat, gid, n, eps, norm).reshape(r.shape)


def rloo_advantages(outcomes: np.ndarray) -> np.ndarray:
    """RLOO: ``A_i = R_i - mean_{j != i} R_j`` over the last axis (0 for a group of one).

    >>> rloo_advantages(np.array([1.0, 0.0, 0.0]))
    array([ 1. , -0.5, -0.5])
    """
    r = as_float(outcomes, "outcomes")
    flat, gid, n = _rows(r)
    return _rloo_flat(flat, gid, n).reshape(r.shape)


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
    flat, gid, n = _rows(p)
    return _progress_flat(flat, gid, n, lam, tau_p, eps, norm).reshape(p.shape)


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
    return progpo_episode_advantages_batched(r[None], p[None], base, lam, tau_r, tau_p, eps)[0]


def progpo_episode_advantages_batched(
    outcomes: np.ndarray,
    coverage_rate: np.ndarray,
    base: str = "grpo",
    lam: float = 1.0,
    tau_r: float = TAU_R,
    tau_p: float = TAU_P,
    eps: float = 1e-6,
) -> np.ndarray:
    """:func:`progpo_episode_advantages` for ``B`` groups at once: ``(B, G)`` arrays in and out.

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
    flat, gid, n = _rows(r)
    adv = _episode_flat(flat, gid, n, base, p.reshape(-1), lam=lam, norm="mean_std", tau_r=tau_r, tau_p=tau_p, eps=eps)
    return adv.reshape(r.shape)


# ----------------------------------------------------------------------------------------------
# Step level.
# ----------------------------------------------------------------------------------------------
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


@dataclass(frozen=True)
class AdvantageConfig:
    """Options of :func:`step_advantages`; defaults reproduce the papers.

    estimator: one of :data:`ESTIMATORS` (a base of :data:`BASES`, or ``progpo-<base>``).
    gamma, omega: discount of the step returns and weight of the step-level term (GiGPO's
        anchor term, HGPO's history term). lam: ProGPO lambda.
    norm: ``mean_std`` (divide by std + eps) or ``mean`` (only center), every level.
    coverage: ``rate`` (P = (D - 1) / T) or ``count`` (P = D - 1).
    scope: ``episode`` (first visit within the episode) or ``group`` (once per group).
    gate: where the progress term applies: ``all_failed`` (ProGPO: it replaces the base
        estimator in all-failed groups only) or ``always`` (control: it is ADDED to the base
        estimator's A^E in every group; in an all-failed group the base is 0, so there it
        equals ProGPO).
    shuffle_coverage: control: permute the progress values P_i within each all-failed group
        (seeded by ``shuffle_seed``) before the advantage, which keeps their distribution and
        breaks their link to the trajectories.
    success_threshold: PlanPO: an outcome at or above it is a success (WebShop: a partial score
        below it is not).
    planpo_alpha: PlanPO: weight of the turn term at this iteration (the trainer sets it from
        :func:`planpo_alpha`; 0 in score mode, and whenever no response lengths are given).
    hgpo_depth, hgpo_alpha, hgpo_fusion: HGPO: the deepest history matched (K), the power of the
        depth weights ``(k + 1)^alpha``, and the fusion (``power`` | ``inverse-variance``).
    potential_credit: HGPO: add the reconstructed transition credit of arXiv 2607.04242
        (:func:`potential_credit`) to the history term.
    """

    estimator: str = "progpo-grpo"
    gamma: float = 0.95
    omega: float = 1.0
    lam: float = 1.0
    norm: Norm = "mean_std"
    coverage: Literal["rate", "count"] = "rate"
    scope: Literal["episode", "group"] = "episode"
    tau_r: float = TAU_R
    tau_p: float = TAU_P
    eps: float = 1e-6
    gate: Literal["all_failed", "always"] = "all_failed"
    shuffle_coverage: bool = False
    shuffle_seed: int = 0
    success_threshold: float = 1.0
    planpo_alpha: float = 0.1
    hgpo_depth: int = 2
    hgpo_alpha: float = 1.0
    hgpo_fusion: Fusion = "power"
    potential_credit: bool = False

    def __post_init__(self) -> None:
        if self.gate not in ("all_failed", "always"):
            raise ValueError(f"gate must be 'all_failed' or 'always', got {self.gate!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(f"estimator must be one of {', '.join(ESTIMATORS)}, got {self.estimator!r}")
        check_norm(self.norm)
        if self.coverage not in ("rate", "count"):
            raise ValueError(f"coverage must be 'rate' or 'count', got {self.coverage!r}")
        if self.scope not in ("episode", "group"):
            raise ValueError(f"scope must be 'episode' or 'group', got {self.scope!r}")
        if not 0.0 <= self.gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {self.gamma}")
        if self.hgpo_fusion not in FUSIONS:
            raise ValueError(f"hgpo_fusion must be one of {', '.join(FUSIONS)}, got {self.hgpo_fusion!r}")
        if isinstance(self.hgpo_depth, bool) or not isinstance(self.hgpo_depth, int) or self.hgpo_depth < 0:
            raise ValueError(f"hgpo_depth must be an integer >= 0, got {self.hgpo_depth!r}")
        if self.potential_credit and self.base != "hgpo":
            raise ValueError(f"potential_credit belongs to hgpo and progpo-hgpo, not {self.estimator}")

    @property
    def base(self) -> str:
        return self.estimator.removeprefix("progpo-")

    @property
    def progpo(self) -> bool:
        return self.estimator.startswith("progpo-")


@dataclass(frozen=True)
class StepAdvantages:
    """Result of :func:`step_advantages`: per step, per trajectory and per group arrays.

    ``acted`` counts where the base estimator's own terms acted, for the bases that report it:
    ``planpo_groups`` (groups whose trajectory term is not 0), ``planpo_turn_alpha`` (the turn
    term's weight used), ``hgpo_peer_steps`` (steps with a history peer at some depth) and
    ``hgpo_deep_steps`` (with a peer at depth 1 or more).
    """

    steps: np.ndarray  # (S,) advantage of each step (what the PPO loss uses)
    episode: np.ndarray  # (N,) episode-level advantage A^E of each trajectory
    coverage: np.ndarray  # (N,) progress P_i under the configured coverage / scope
    all_failed: np.ndarray  # (n_groups,) bool, by dense group index (sorted unique group ids)
    acted: dict[str, float] = field(default_factory=dict)


def _progress(cfg: AdvantageConfig, first_visit: np.ndarray | None, traj: np.ndarray, t: np.ndarray, gid: np.ndarray,
              length: np.ndarray, state_ids: np.ndarray | None, next_ids: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
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
    return fv, (found if cfg.coverage == "count" else coverage_rate(found, length))  # P_i


def _step_rewards(cfg: AdvantageConfig, r: np.ndarray, traj: np.ndarray, t: np.ndarray, fv: np.ndarray,
                  step_failed: np.ndarray, step_rewards: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Each step's reward ``r_t`` and discounted return ``ret_t`` (ProGPO: first visits in the
    all-failed groups, where no tau_P gate applies)."""
    if step_rewards is None:
        last = np.zeros(r.size, dtype=np.int64)
        np.maximum.at(last, traj, t)
        rew = np.where(t == last[traj], r[traj], 0.0)  # r_t: sparse outcome R_i on the final step
    else:
        rew = as_float(step_rewards, "step_rewards").reshape(-1)
    ret = discounted_returns(rew, traj, t, cfg.gamma)  # ret_t = sum_k gamma^k r_{t+k}
    if cfg.progpo:  # all-failed groups: the step reward is first_visit_t
        ret = np.where(step_failed, discounted_returns(fv, traj, t, cfg.gamma), ret)
        rew = np.where(step_failed, fv, rew)
    return rew, ret


def _step_term(cfg: AdvantageConfig, rew: np.ndarray, ret: np.ndarray, traj: np.ndarray, t: np.ndarray,
               step_group: np.ndarray, s: np.ndarray, acted: dict[str, float]) -> np.ndarray:
    """The step-level term: GiGPO's anchor-state term, or HGPO's history term (+ potential credit)."""
    if cfg.base == "gigpo":  # anchor groups = steps of one group with the same o_t
        _, skey = np.unique(s, return_inverse=True)
        keys = step_group.astype(np.int64) * (int(skey.max()) + 1) + skey.reshape(-1)
        return anchor_advantages(ret, keys, cfg.eps, cfg.norm)
    clusters = history_clusters(step_group, traj, t, s, cfg.hgpo_depth)
    term = hgpo_history_advantages(ret, step_group, traj, t, s, alpha=cfg.hgpo_alpha, fusion=cfg.hgpo_fusion,
                                   eps=cfg.eps, norm=cfg.norm, clusters=clusters)
    acted["hgpo_peer_steps"] = float(np.sum((clusters.count > 1).any(axis=0)))
    acted["hgpo_deep_steps"] = float(np.sum((clusters.count[1:] > 1).any(axis=0)))
    if cfg.potential_credit:
        term = term + potential_credit(ret, rew, traj, t, clusters, gamma=cfg.gamma, eps=cfg.eps)
    return term


def penalized_advantages(advantages: np.ndarray, outputs: Sequence[Any]) -> np.ndarray:
    """Each step's advantage minus its policy output's ``penalty`` (an answer that did not parse
    into a command pays ``invalid_penalty``; a valid one 0).

    >>> from types import SimpleNamespace as N
    >>> penalized_advantages(np.array([0.5, 0.5]), [N(penalty=0.1), N(penalty=None)]).tolist()
    [0.4, 0.5]
    """
    penalty = np.array([float(getattr(o, "penalty", 0.0) or 0.0) for o in outputs])
    return advantages - penalty


def step_advantages(
    outcomes: np.ndarray,
    traj_group: np.ndarray,
    step_traj: np.ndarray,
    step_index: np.ndarray,
    state_ids: np.ndarray | None = None,
    first_visit: np.ndarray | None = None,
    next_ids: np.ndarray | None = None,
    step_rewards: np.ndarray | None = None,
    config: AdvantageConfig = AdvantageConfig(),
    response_lengths: np.ndarray | None = None,
) -> StepAdvantages:
    """Advantages of every step of a batch of groups, for any estimator.

    Trajectory arrays (length N): ``outcomes`` R_i, ``traj_group`` its group id.
    Step arrays (length S, any order): ``step_traj`` trajectory index in ``0..N-1``,
    ``step_index`` time t, ``state_ids`` int id of the canonical state o_t (anchor; needed by
    gigpo, hgpo and by group scope), ``first_visit`` (needed by progpo), ``next_ids`` id of
    o_{t+1} (group scope only), ``step_rewards`` (step returns; default: R_i on the last step),
    ``response_lengths`` the answer's token count ``L_{i,t}`` (PlanPO's turn term; without it,
    or with ``planpo_alpha`` 0, the term is 0). ``T_i`` (PlanPO) is the trajectory's step count.

    >>> out = step_advantages(np.array([0., 0.]), np.array([0, 0]), np.array([0, 0, 1, 1]),
    ...     np.array([0, 1, 0, 1]), first_visit=np.array([True, True, True, False]))
    >>> out.steps.round(4)
    array([ 1.,  1., -1., -1.])
    """
    cfg = config
    r = as_float(outcomes, "outcomes").reshape(-1)  # R_i, outcome of trajectory i
    traj = np.asarray(step_traj, dtype=np.int64).reshape(-1)  # i of each step
    t = np.asarray(step_index, dtype=np.int64).reshape(-1)  # t of each step
    n_traj, n_steps = r.size, traj.size
    if np.asarray(traj_group).size != n_traj:
        raise ValueError(f"traj_group has {np.asarray(traj_group).size} entries, outcomes {n_traj}")
    if t.size != n_steps:
        raise ValueError(f"step_index has {t.size} entries, step_traj {n_steps}")
    if n_steps and (traj.min() < 0 or traj.max() >= n_traj):
        raise ValueError(f"step_traj must index trajectories 0..{n_traj - 1}")
    gid, n_groups = dense_ids(traj_group)  # g of each trajectory
    length = np.bincount(traj, minlength=n_traj).astype(np.float64)  # T_i
    failed = _all_failed_flat(r, gid, n_groups, cfg.tau_r) if n_traj else np.zeros(0, bool)  # max_i R_i < tau_R

    need_states = cfg.base in STEP_BASES or (cfg.progpo and cfg.scope == "group")
    if need_states and state_ids is None:
        raise ValueError(f"estimator {cfg.estimator!r} (scope={cfg.scope}) needs state_ids (o_t of each step)")
    if cfg.progpo and first_visit is None:
        raise ValueError(f"estimator {cfg.estimator!r} needs first_visit of each step")

    # Progress P_i = (D_i - 1) / T_i (or D_i - 1) from first_visit_t (episode or group scope).
    fv, coverage = _progress(cfg, first_visit, traj, t, gid, length, state_ids, next_ids)

    # Episode level A^E_i (base estimator; ProGPO: progress A^E_i in all-failed groups).
    p_used = None
    if cfg.progpo:
        p_used = shuffle_within_groups(coverage, gid, failed[gid], cfg.shuffle_seed) if cfg.shuffle_coverage else coverage
    ep = _episode_flat(r, gid, n_groups, cfg.base, p_used, lam=cfg.lam, norm=cfg.norm, tau_r=cfg.tau_r,
                       tau_p=cfg.tau_p, eps=cfg.eps, gate=cfg.gate, failed=failed, turns=length,
                       success_threshold=cfg.success_threshold)
    adv = ep[traj]  # every step t of trajectory i starts from A^E_i
    acted: dict[str, float] = {}

    # Step level A^S_t: GiGPO's anchor groups or HGPO's history clusters, within one group.
    if cfg.base in STEP_BASES and n_steps:
        rew, ret = _step_rewards(cfg, r, traj, t, fv, failed[gid[traj]], step_rewards)
        s = np.asarray(state_ids, dtype=np.int64).reshape(-1)
        if s.size != n_steps:
            raise ValueError(f"state_ids has {s.size} entries, step_traj {n_steps}")
        adv = adv + cfg.omega * _step_term(cfg, rew, ret, traj, t, gid[traj], s, acted)  # A_t = A^E_i + omega * A^S_t
    if cfg.base == "planpo":
        planpo_ep = planpo_episode_flat(r, length, gid, n_groups, success_threshold=cfg.success_threshold,
                                        eps=cfg.eps, norm=cfg.norm) if n_traj else np.zeros(0)
        acted["planpo_groups"] = float(np.sum(np.bincount(gid, weights=(planpo_ep != 0).astype(float),
                                                          minlength=n_groups) > 0)) if n_traj else 0.0
        alpha = cfg.planpo_alpha if response_lengths is not None else 0.0
        acted["planpo_turn_alpha"] = float(alpha)
        if alpha and n_steps:  # A = A^E + alpha * A^S (turn groups: one group's turn-t answers)
            adv = adv + alpha * planpo_turn_advantages(r, gid, traj, t, response_lengths,
                                                       success_threshold=cfg.success_threshold, eps=cfg.eps,
                                                       norm=cfg.norm)
    return StepAdvantages(steps=adv, episode=ep, coverage=coverage, all_failed=failed, acted=acted)
