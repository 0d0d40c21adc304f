"""HGPO (arXiv 2602.22817): step returns compared among steps that share a history, at several depths.

For each depth ``k = 0..K``, the steps of one group whose current state ``o_t`` and last ``k``
states ``o_{t-k}..o_{t-1}`` all match form a cluster (depth 0 is GiGPO's anchor group). Each
step's discounted return is z-scored inside its cluster (population std); a cluster of one gives
nothing. A step at time ``t`` has a history of ``t`` states, so it takes part in depths
``0..min(K, t)`` only. A step's history term fuses its clusters' z-scores:

- ``fusion="power"`` (the public recipe's): weights ``(k + 1)^alpha``, ``alpha = 1``, over the
  depths where the step's cluster has at least two steps;
- ``fusion="inverse-variance"``: weights ``n_k / (s_k^2 + eps)``, the inverse variance of the
  depth-``k`` cluster's mean return (``n_k`` steps, return std ``s_k``): a cluster whose peers
  agree on the return weighs most.

Where no depth has a peer the term is 0. The trainer adds it as GiGPO does its step term:
``A = A^E + omega * A^H``, with ``A^E`` GRPO's episode term (ProGPO's progress term in
all-failed groups under ``progpo-hgpo``, where the step rewards are first visits).

Differences from the public recipe (``recipe/hgpo/core_hgpo.py`` in verl-agent forks), each a
choice: it counts matched observations from 1 (its weights are ``(k + 2)^alpha`` in this
numbering, its optional trajectory term weight 1); it also drops a cluster whose z-score is
exactly 0, where this module keeps it (a return equal to its peers' mean is a real comparison);
this module always adds GRPO's episode term, as GiGPO does.

Potential credit (``potential_credit=True``) is a **reconstruction** of arXiv 2607.04242
("Progress- and Reliability-Oriented GPO", ProGPO-FL), whose text is not public beyond its
abstract: state potentials ``Phi_k(s)`` = the mean return of the depth-``k`` cluster of ``s``,
variance ``v_k = (s_k^2 + eps) / n_k``, fused across depths by inverse variance, ``Phi(s) =
sum_k Phi_k / v_k / sum_k 1 / v_k`` (over clusters of two or more; a step without peers keeps its
own return as its potential, so it gets no credit); the transition credit of step ``t`` is
``r_t + gamma * Phi(s_{t+1}) - Phi(s_t)``, with ``Phi = 0`` after the last step. Before the last
step ``r_t = 0`` under outcome rewards, so the credit is ``gamma * Phi(s') - Phi(s)`` there; at
the last step the outcome stands in for the terminal state's potential. It is added to the
history term: ``A = A^E + omega * (A^H + credit)``.

>>> s = np.array([0, 1, 0, 1])            # two trajectories with the same history
>>> ret = np.array([0.9, 1.0, 0.0, 0.0])  # the first succeeded
>>> hgpo_history_advantages(ret, np.array([0, 0, 0, 0]), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
...                         s, depth=1).round(4)
array([ 1.,  1., -1., -1.])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from trainers.advantages.registry import Estimator, StepContext, grpo_episode, option, register_builtin
from trainers.advantages.segments import Norm, as_float, check_norm, safe_divide, segment_stats

__all__ = [
    "Fusion",
    "HGPOConfig",
    "HistoryClusters",
    "FUSIONS",
    "history_clusters",
    "hgpo_history_advantages",
    "potential_credit",
    "fuse",
]

Fusion = Literal["power", "inverse-variance"]
FUSIONS: tuple[str, ...] = ("power", "inverse-variance")


@dataclass(frozen=True)
class HGPOConfig:
    """HGPO's own options: the deepest history matched ``depth`` (K), the power ``alpha`` of the
    depth weights ``(k + 1)^alpha``, the ``fusion`` of the depths, whether the reconstructed
    ``potential_credit`` is added, and the weight ``omega`` of the history term.

    >>> HGPOConfig(depth=-1)
    Traceback (most recent call last):
    ...
    ValueError: hgpo depth must be an integer >= 0, got -1
    """

    depth: int = option(
        2,
        "the deepest history matched, K (depths 0..K: o_t plus the last k states; 0 is GiGPO's anchor grouping)",
        flag="hgpo_depth",
        ge=0,
    )
    alpha: float = option(1.0, "depth weights (k + 1)^alpha of the power fusion", flag="hgpo_alpha", ge=0)
    fusion: Fusion = option(
        "power",
        "fuse the depths by power weights (k + 1)^alpha (the public recipe) | "
        "inverse-variance (of each cluster's mean return)",
        flag="hgpo_fusion",
        choices=FUSIONS,
    )
    potential_credit: bool = option(
        False,
        "add the transition credit gamma * Phi(s') - Phi(s) from depth-fused state "
        "potentials (a reconstruction of arXiv 2607.04242, whose text is not public)",
        flag="potential_credit",
        exclusive=True,
    )
    omega: float = option(1.0, "weight of the history term", shared=True, ge=0)

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise ValueError(f"hgpo fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError(f"hgpo depth must be an integer >= 0, got {self.depth!r}")


@dataclass(frozen=True)
class HistoryClusters:
    """The clusters of every step at every depth: ``ids[k, j]`` is step ``j``'s cluster at depth
    ``k`` (dense per depth; -1 where the step's history is shorter than ``k``), ``count[k, j]``
    that cluster's size (0 where -1)."""

    ids: np.ndarray  # (K + 1, S) int64
    count: np.ndarray  # (K + 1, S) float64


def history_clusters(
    group_of_step: np.ndarray, step_traj: np.ndarray, step_index: np.ndarray, state_ids: np.ndarray, depth: int
) -> HistoryClusters:
    """Cluster ids of each step at depths ``0..depth``: same group, same ``o_t``, same last ``k``
    states.

    >>> c = history_clusters(np.zeros(4, int), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
    ...                      np.array([5, 6, 7, 6]), depth=1)
    >>> c.ids.tolist(), c.count.tolist()
    ([[0, 1, 2, 1], [-1, 0, -1, 1]], [[1.0, 2.0, 1.0, 2.0], [0.0, 1.0, 0.0, 1.0]])
    """
    if depth < 0:
        raise ValueError(f"depth must be >= 0, got {depth}")
    grp = np.asarray(group_of_step, dtype=np.int64).reshape(-1)
    traj = np.asarray(step_traj, dtype=np.int64).reshape(-1)
    t = np.asarray(step_index, dtype=np.int64).reshape(-1)
    _, s = np.unique(np.asarray(state_ids).reshape(-1), return_inverse=True)
    s = s.reshape(-1).astype(np.int64)
    n = traj.size
    ids = np.full((depth + 1, n), -1, dtype=np.int64)
    count = np.zeros((depth + 1, n))
    if n == 0:
        return HistoryClusters(ids, count)
    n_traj, t_max = int(traj.max()) + 1, int(t.max()) + 1
    grid = np.full((n_traj, t_max), -1, dtype=np.int64)  # state id of (trajectory, time); -1: no step
    grid[traj, t] = s
    n_states = int(s.max()) + 2
    key = grp * n_states + s  # depth 0: (group, o_t)
    valid = np.ones(n, dtype=bool)
    for k in range(depth + 1):
        if k:
            back = t - k
            prev = np.where(back >= 0, grid[traj, np.maximum(back, 0)], -1)
            valid &= prev >= 0
            key = key * n_states + (prev + 1)  # key stays dense below (re-indexed each depth)
        dense = np.full(n, -1, dtype=np.int64)
        if valid.any():
            _, inv = np.unique(key[valid], return_inverse=True)
            dense[valid] = inv.reshape(-1)
            count[k, valid] = np.bincount(dense[valid])[dense[valid]]
        ids[k] = dense
        key = np.where(valid, dense, 0)  # keep the product small: the next depth multiplies it again
    return HistoryClusters(ids, count)


def _inverse_variance(count: np.ndarray, std: np.ndarray, eps: float) -> np.ndarray:
    """``n / (s^2 + eps)``, the inverse variance of a cluster's mean; 0 for a cluster of one."""
    return np.where(count > 1, safe_divide(count, std * std + eps), 0.0)


def _depth_stats(values: np.ndarray, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per step: its cluster's (count, mean, std) of ``values`` (zeros where ``ids`` is -1)."""
    ok = ids >= 0
    count = np.zeros(values.size)
    mean = np.zeros(values.size)
    std = np.zeros(values.size)
    if ok.any():
        n_seg = int(ids[ok].max()) + 1
        c, m, sd = segment_stats(values[ok], ids[ok], n_seg)
        count[ok], mean[ok], std[ok] = c[ids[ok]], m[ids[ok]], sd[ids[ok]]
    return count, mean, std


def fuse(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``sum_k w_k v_k / sum_k w_k`` per column, 0 where every weight is 0.

    >>> fuse(np.array([[1.0, 2.0], [4.0, 0.0]]), np.array([[1.0, 0.0], [2.0, 0.0]]))
    array([3., 0.])
    """
    return safe_divide((weights * values).sum(axis=0), weights.sum(axis=0))


def hgpo_history_advantages(
    returns: np.ndarray,
    group_of_step: np.ndarray,
    step_traj: np.ndarray,
    step_index: np.ndarray,
    state_ids: np.ndarray,
    *,
    depth: int = 2,
    alpha: float = 1.0,
    fusion: Fusion = "power",
    eps: float = 1e-6,
    norm: Norm = "mean_std",
    clusters: HistoryClusters | None = None,
) -> np.ndarray:
    """HGPO's history term ``A^H`` of every step (module docstring): per depth, ``returns``
    z-scored in the step's history cluster, fused across the depths with peers."""
    check_norm(norm)
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {', '.join(FUSIONS)}, got {fusion!r}")
    ret = as_float(returns, "returns").reshape(-1)
    if clusters is None:
        clusters = history_clusters(group_of_step, step_traj, step_index, state_ids, depth)
    k_levels = clusters.ids.shape[0]
    adv = np.zeros((k_levels, ret.size))
    weight = np.zeros((k_levels, ret.size))
    for k in range(k_levels):
        count, mean, std = _depth_stats(ret, clusters.ids[k])
        peers = count > 1
        centered = ret - mean
        adv[k] = np.where(peers, safe_divide(centered, std + eps) if norm == "mean_std" else centered, 0.0)
        weight[k] = (
            np.where(peers, float(k + 1) ** alpha, 0.0) if fusion == "power" else _inverse_variance(count, std, eps)
        )
    return fuse(adv, weight)


def potential_credit(
    returns: np.ndarray,
    step_rewards: np.ndarray,
    step_traj: np.ndarray,
    step_index: np.ndarray,
    clusters: HistoryClusters,
    *,
    gamma: float = 0.95,
    eps: float = 1e-6,
) -> np.ndarray:
    """The reconstructed transition credit ``r_t + gamma * Phi(s_{t+1}) - Phi(s_t)`` of every step
    (module docstring), from depth-fused, inverse-variance-weighted potentials.

    >>> c = history_clusters(np.zeros(4, int), np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1]),
    ...                      np.array([0, 1, 0, 2]), depth=1)
    >>> potential_credit(np.array([.95, 1., 0., 0.]), np.array([0., 1., 0., 0.]), np.array([0, 0, 1, 1]),
    ...                  np.array([0, 1, 0, 1]), c).round(4)
    array([ 0.475,  0.   , -0.475,  0.   ])
    """
    ret = as_float(returns, "returns").reshape(-1)
    rew = as_float(step_rewards, "step_rewards").reshape(-1)
    traj = np.asarray(step_traj, dtype=np.int64).reshape(-1)
    t = np.asarray(step_index, dtype=np.int64).reshape(-1)
    if ret.size == 0:
        return ret.copy()
    k_levels = clusters.ids.shape[0]
    phi_k = np.zeros((k_levels, ret.size))
    inv_var = np.zeros((k_levels, ret.size))
    for k in range(k_levels):
        count, phi_k[k], std = _depth_stats(ret, clusters.ids[k])
        inv_var[k] = _inverse_variance(count, std, eps)
    has_peers = inv_var.sum(axis=0) > 0
    phi = np.where(has_peers, fuse(phi_k, inv_var), ret)  # no peer: its own return, no credit
    n_traj, t_max = int(traj.max()) + 1, int(t.max()) + 2
    grid = np.zeros((n_traj, t_max))  # Phi of (trajectory, time); 0 after the last step
    grid[traj, t] = phi
    return rew + gamma * grid[traj, t + 1] - phi


def hgpo_step(ctx: StepContext) -> np.ndarray | None:
    """HGPO: ``omega`` x the history term over depths 0..K (+ the potential credit)."""
    if not ctx.traj.size:
        return None
    cfg, opts, traj, t = ctx.cfg, ctx.options, ctx.traj, ctx.t
    rew, ret = ctx.returns()
    s, step_group = ctx.states(), ctx.gid[traj]
    clusters = history_clusters(step_group, traj, t, s, opts.depth)
    term = hgpo_history_advantages(
        ret, step_group, traj, t, s, alpha=opts.alpha, fusion=opts.fusion, eps=cfg.eps, norm=cfg.norm, clusters=clusters
    )
    ctx.acted["hgpo_peer_steps"] = float(np.sum((clusters.count > 1).any(axis=0)))
    ctx.acted["hgpo_deep_steps"] = float(np.sum((clusters.count[1:] > 1).any(axis=0)))
    if opts.potential_credit:
        term = term + potential_credit(ret, rew, traj, t, clusters, gamma=cfg.gamma, eps=cfg.eps)
    return opts.omega * term


def hgpo_metrics(acted: Mapping[str, float], n_groups: int, n_steps: int) -> dict[str, float]:
    """Where HGPO's history term acted: the share of steps with a peer at some depth, and at depth 1 or more.

    >>> hgpo_metrics({"hgpo_peer_steps": 30.0, "hgpo_deep_steps": 10.0}, 8, 100)
    {'adv/hgpo_peer_step_frac': 0.3, 'adv/hgpo_deep_step_frac': 0.1}
    """
    if "hgpo_peer_steps" not in acted:
        return {}
    return {
        "adv/hgpo_peer_step_frac": float(acted["hgpo_peer_steps"]) / max(n_steps, 1),
        "adv/hgpo_deep_step_frac": float(acted.get("hgpo_deep_steps", 0.0)) / max(n_steps, 1),
    }


def hgpo_report(train: Sequence[dict[str, Any]], options: HGPOConfig) -> list[str]:
    """The report's paragraph: how often a step had a history peer, and the depths and fusion used."""
    peer = sum(float(r.get("adv/hgpo_peer_step_frac", 0.0)) for r in train) / len(train)
    deep = sum(float(r.get("adv/hgpo_deep_step_frac", 0.0)) for r in train) / len(train)
    credit = " with the reconstructed potential credit (arXiv 2607.04242)" if options.potential_credit else ""
    return [
        "## Where HGPO acted",
        "",
        f"On average {peer:.1%} of the steps of an iteration had a peer with the same state in their group, "
        f"and {deep:.1%} one with the same state and at least the last state before it (depths 1.."
        f"{options.depth}, {options.fusion} fusion{credit}).",
        "",
    ]


register_builtin(
    Estimator(
        "hgpo",
        grpo_episode,
        hgpo_step,
        needs=frozenset({"states"}),
        options=HGPOConfig,
        help="step returns compared over matching histories (GRPO's episode term plus omega x the history-depth term)",
        metrics=hgpo_metrics,
        report=hgpo_report,
        acted={"HGPO peer steps": "adv/hgpo_peer_step_frac", "HGPO deep steps": "adv/hgpo_deep_step_frac"},
    ),
    rank=4,
)
