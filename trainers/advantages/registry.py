"""The base estimators, by name: each one's episode term and step term.

A :class:`BaseEstimator` gives each trajectory its episode term ``A^E_i`` (:attr:`~BaseEstimator.episode`)
and may add a step term to each step (:attr:`~BaseEstimator.step`, from a :class:`StepContext`):

================  ===============================  =============================================
base              episode term                     step term
================  ===============================  =============================================
grpo              z-score of R in the group        none
rloo              R_i - mean of the others' R      none
gigpo             GRPO's                           ``omega`` x anchor-state term (same ``o_t``)
planpo            z(R / T) among the successes     ``alpha`` x turn term (shorter answers first)
hgpo              GRPO's                           ``omega`` x history-depth term (+ potential credit)
================  ===============================  =============================================

Each base with options of its own reads them from a frozen config of its family's module
(:class:`~trainers.advantages.gigpo.GiGPOConfig`, :class:`~trainers.advantages.planpo.PlanPOConfig`,
:class:`~trainers.advantages.hgpo.HGPOConfig`), which :attr:`BaseEstimator.options` builds from
the flat :class:`~trainers.advantages.config.AdvantageConfig` the flags and YAML write.

Each base also runs as ``progpo-<base>`` (:data:`ESTIMATORS`): ProGPO's progress term in its
all-failed groups (:func:`trainers.advantages.progpo.with_progress`). A new base is one entry
of :data:`BASE_ESTIMATORS`.

>>> sorted(BASE_ESTIMATORS) == sorted(BASES), STEP_BASES
(True, ('gigpo', 'hgpo'))
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from trainers.advantages.gigpo import GiGPOConfig
from trainers.advantages.grpo import grpo_flat, rloo_flat
from trainers.advantages.hgpo import HGPOConfig, hgpo_history_advantages, history_clusters, potential_credit
from trainers.advantages.planpo import PlanPOConfig, planpo_episode_flat, planpo_turn_advantages
from trainers.advantages.segments import anchor_advantages, as_float, discounted_returns

__all__ = ["BASES", "BASE_ESTIMATORS", "ESTIMATORS", "STEP_BASES", "BaseEstimator", "StepContext"]


@dataclass
class StepContext:
    """What a step term reads: the config (``cfg``: the shared options; ``options``: the base's
    own frozen config, :attr:`BaseEstimator.options`), the trajectories (``r`` R_i, ``gid`` dense group,
    ``length`` T_i) and the steps (``traj``, ``t``, ``fv`` first visits as floats, ``failed`` each
    group's all-failed flag, ``state_ids``, ``step_rewards``, ``response_lengths``); ``acted``
    takes the counts of where the term acted."""

    cfg: Any
    options: Any
    r: np.ndarray
    gid: np.ndarray
    n_groups: int
    length: np.ndarray
    traj: np.ndarray
    t: np.ndarray
    fv: np.ndarray
    failed: np.ndarray
    state_ids: np.ndarray | None
    step_rewards: np.ndarray | None
    response_lengths: np.ndarray | None
    acted: dict[str, float]

    def returns(self) -> tuple[np.ndarray, np.ndarray]:
        """Each step's reward ``r_t`` and discounted return ``ret_t`` (ProGPO: first visits in the
        all-failed groups, where no tau_P gate applies)."""
        cfg, traj, t = self.cfg, self.traj, self.t
        if self.step_rewards is None:
            last = np.zeros(self.r.size, dtype=np.int64)
            np.maximum.at(last, traj, t)
            rew = np.where(t == last[traj], self.r[traj], 0.0)  # r_t: sparse outcome R_i on the final step
        else:
            rew = as_float(self.step_rewards, "step_rewards").reshape(-1)
        ret = discounted_returns(rew, traj, t, cfg.gamma)  # ret_t = sum_k gamma^k r_{t+k}
        if cfg.progpo:  # all-failed groups: the step reward is first_visit_t
            step_failed = self.failed[self.gid[traj]]
            ret = np.where(step_failed, discounted_returns(self.fv, traj, t, cfg.gamma), ret)
            rew = np.where(step_failed, self.fv, rew)
        return rew, ret

    def states(self) -> np.ndarray:
        """The anchor state id ``o_t`` of each step."""
        s = np.asarray(self.state_ids, dtype=np.int64).reshape(-1)
        if s.size != self.traj.size:
            raise ValueError(f"state_ids has {s.size} entries, step_traj {self.traj.size}")
        return s


#: ``episode(r, gid, n, *, eps, norm, turns, success_threshold)``: the episode term of each trajectory
EpisodeTerm = Callable[..., np.ndarray]
#: ``step(ctx)``: what the base adds to each step's advantage, or ``None``
StepTerm = Callable[[StepContext], "np.ndarray | None"]


@dataclass(frozen=True)
class BaseEstimator:
    """A base estimator: its episode term, its step term (or none), whether the step term reads
    the canonical states ``o_t``, and ``options``: its own frozen config out of the flat
    :class:`~trainers.advantages.config.AdvantageConfig` (``None``: a base without options)."""

    name: str
    episode: EpisodeTerm
    step: StepTerm | None = None
    needs_states: bool = False
    options: Callable[[Any], Any] | None = None


def _grpo_episode(r: np.ndarray, gid: np.ndarray, n: int, *, eps: float, norm: str, **_: Any) -> np.ndarray:
    return grpo_flat(r, gid, n, eps, norm)


def _rloo_episode(r: np.ndarray, gid: np.ndarray, n: int, **_: Any) -> np.ndarray:
    return rloo_flat(r, gid, n)


def _planpo_episode(r: np.ndarray, gid: np.ndarray, n: int, *, eps: float, norm: str, turns: np.ndarray | None,
                    success_threshold: float, **_: Any) -> np.ndarray:
    if turns is None:
        raise ValueError("planpo needs the number of turns T_i of each trajectory")
    return planpo_episode_flat(r, turns, gid, n, success_threshold=success_threshold, eps=eps, norm=norm)


def _gigpo_step(ctx: StepContext) -> np.ndarray | None:
    """GiGPO: ``omega`` x the anchor-state term (steps of one group with the same ``o_t``)."""
    if not ctx.traj.size:
        return None
    _, ret = ctx.returns()
    s, step_group = ctx.states(), ctx.gid[ctx.traj]
    _, skey = np.unique(s, return_inverse=True)
    keys = step_group.astype(np.int64) * (int(skey.max()) + 1) + skey.reshape(-1)
    return ctx.options.omega * anchor_advantages(ret, keys, ctx.cfg.eps, ctx.cfg.norm)


def _hgpo_step(ctx: StepContext) -> np.ndarray | None:
    """HGPO: ``omega`` x the history term over depths 0..K (+ the potential credit)."""
    if not ctx.traj.size:
        return None
    cfg, opts, traj, t = ctx.cfg, ctx.options, ctx.traj, ctx.t
    rew, ret = ctx.returns()
    s, step_group = ctx.states(), ctx.gid[traj]
    clusters = history_clusters(step_group, traj, t, s, opts.depth)
    term = hgpo_history_advantages(ret, step_group, traj, t, s, alpha=opts.alpha, fusion=opts.fusion,
                                   eps=cfg.eps, norm=cfg.norm, clusters=clusters)
    ctx.acted["hgpo_peer_steps"] = float(np.sum((clusters.count > 1).any(axis=0)))
    ctx.acted["hgpo_deep_steps"] = float(np.sum((clusters.count[1:] > 1).any(axis=0)))
    if opts.potential_credit:
        term = term + potential_credit(ret, rew, traj, t, clusters, gamma=cfg.gamma, eps=cfg.eps)
    return opts.omega * term


def _planpo_step(ctx: StepContext) -> np.ndarray | None:
    """PlanPO: ``alpha`` x the turn term (one group's turn-t answers); counts where its
    trajectory term acted."""
    cfg, opts, r, gid, n_groups = ctx.cfg, ctx.options, ctx.r, ctx.gid, ctx.n_groups
    planpo_ep = planpo_episode_flat(r, ctx.length, gid, n_groups, success_threshold=opts.success_threshold,
                                    eps=cfg.eps, norm=cfg.norm) if r.size else np.zeros(0)
    ctx.acted["planpo_groups"] = float(np.sum(np.bincount(gid, weights=(planpo_ep != 0).astype(float),
                                                          minlength=n_groups) > 0)) if r.size else 0.0
    alpha = opts.alpha if ctx.response_lengths is not None else 0.0
    ctx.acted["planpo_turn_alpha"] = float(alpha)
    if not (alpha and ctx.traj.size):
        return None
    return alpha * planpo_turn_advantages(r, gid, ctx.traj, ctx.t, ctx.response_lengths,
                                          success_threshold=opts.success_threshold, eps=cfg.eps, norm=cfg.norm)


#: the base estimators by name
BASE_ESTIMATORS: dict[str, BaseEstimator] = {
    "grpo": BaseEstimator("grpo", _grpo_episode),
    "rloo": BaseEstimator("rloo", _rloo_episode),
    "gigpo": BaseEstimator("gigpo", _grpo_episode, _gigpo_step, needs_states=True,
                           options=lambda c: GiGPOConfig(omega=c.omega)),
    "planpo": BaseEstimator("planpo", _planpo_episode, _planpo_step,
                            options=lambda c: PlanPOConfig(success_threshold=c.success_threshold, alpha=c.planpo_alpha)),
    "hgpo": BaseEstimator("hgpo", _grpo_episode, _hgpo_step, needs_states=True,
                          options=lambda c: HGPOConfig(depth=c.hgpo_depth, alpha=c.hgpo_alpha, fusion=c.hgpo_fusion,
                                                       potential_credit=c.potential_credit, omega=c.omega)),
}
#: the base estimators; each also has a ``progpo-`` variant
BASES: tuple[str, ...] = tuple(BASE_ESTIMATORS)
ESTIMATORS: tuple[str, ...] = BASES + tuple(f"progpo-{b}" for b in BASES)
#: the bases with a step-level term on the canonical states (GiGPO's anchor groups, HGPO's history clusters)
STEP_BASES: tuple[str, ...] = tuple(name for name, b in BASE_ESTIMATORS.items() if b.needs_states)
