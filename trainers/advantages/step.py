"""The step level: every step's advantage, for any estimator (what the trainer calls).

:func:`step_advantages` computes first visits and progress
(:func:`~trainers.advantages.progpo.progress_of`), the episode term of each trajectory
(:func:`~trainers.advantages.episode.episode_flat`), and adds the base's step term
(:class:`~trainers.advantages.registry.Estimator`); :func:`penalized_advantages` takes each
invalid answer's penalty off.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from trainers.advantages.config import AdvantageConfig
from trainers.advantages.episode import episode_flat
from trainers.advantages.progpo import all_failed_flat, progress_of, shuffle_within_groups
from trainers.advantages.registry import StepContext
from trainers.advantages.segments import as_float, dense_ids

__all__ = ["StepAdvantages", "base_step_term", "penalized_advantages", "step_advantages"]


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
    step_term: np.ndarray | None = None  # (S,) the base's step term alone (None: it adds none)


def _batch(
    outcomes: np.ndarray, traj_group: np.ndarray, step_traj: np.ndarray, step_index: np.ndarray, tau_r: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray, np.ndarray]:
    """The arrays a step term reads, checked against each other: ``R_i``, each step's trajectory
    ``i`` and time ``t``, each trajectory's dense group, the number of groups, ``T_i``, and each
    group's all-failed flag."""
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
    failed = all_failed_flat(r, gid, n_groups, tau_r) if n_traj else np.zeros(0, bool)  # max_i R_i < tau_R
    return r, traj, t, gid, n_groups, length, failed


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
    r, traj, t, gid, n_groups, length, failed = _batch(outcomes, traj_group, step_traj, step_index, cfg.tau_r)
    base, options = cfg.spec, cfg.base_options

    need_states = base.needs_states or (cfg.progpo and cfg.scope == "group")
    if need_states and state_ids is None:
        raise ValueError(f"estimator {cfg.estimator!r} (scope={cfg.scope}) needs state_ids (o_t of each step)")
    if cfg.progpo and first_visit is None:
        raise ValueError(f"estimator {cfg.estimator!r} needs first_visit of each step")

    # Progress P_i = (D_i - 1) / T_i (or D_i - 1) from first_visit_t (episode or group scope).
    fv, coverage = progress_of(cfg, first_visit, traj, t, gid, length, state_ids, next_ids)

    # Episode level A^E_i (base estimator; ProGPO: progress A^E_i in all-failed groups).
    p_used = None
    if cfg.progpo:
        p_used = (
            shuffle_within_groups(coverage, gid, failed[gid], cfg.shuffle_seed) if cfg.shuffle_coverage else coverage
        )
    ep = episode_flat(
        r, gid, n_groups, cfg.base, p_used, cfg.progress_term, failed=failed, turns=length, options=options
    )
    adv = ep[traj]  # every step t of trajectory i starts from A^E_i
    acted: dict[str, float] = {}

    # Step level: the base's step term (GiGPO's anchor groups, HGPO's history clusters, PlanPO's turns).
    ctx = StepContext(
        cfg, options, r, gid, n_groups, length, traj, t, fv, failed, state_ids, step_rewards, response_lengths, acted
    )
    step_term = base.run_step(ctx)
    if step_term is not None:
        adv = adv + step_term  # A_t = A^E_i + omega * A^S_t (PlanPO: + alpha * its turn term)
    return StepAdvantages(steps=adv, episode=ep, coverage=coverage, all_failed=failed, acted=acted, step_term=step_term)


def base_step_term(
    outcomes: np.ndarray,
    traj_group: np.ndarray,
    step_traj: np.ndarray,
    step_index: np.ndarray,
    config: AdvantageConfig,
    *,
    state_ids: np.ndarray | None = None,
    response_lengths: np.ndarray | None = None,
) -> np.ndarray | None:
    """The base's step term alone (without ProGPO's first visits): what an integration adds to
    an episode term it computed from its own columns (PlanPO's turn term on verl's step rows).
    ``None`` where the base adds nothing.

    >>> from trainers.advantages.config import AdvantageConfig
    >>> base_step_term(np.array([1., 1.]), np.array([0, 0]), np.array([0, 1]), np.array([0, 0]),
    ...                AdvantageConfig(estimator="planpo", planpo_alpha=0.5), response_lengths=np.array([2, 6])).round(4)
    array([ 0.5, -0.5])
    """
    spec = config.spec
    if spec.step is None:
        return None
    r, traj, t, gid, n_groups, length, failed = _batch(outcomes, traj_group, step_traj, step_index, config.tau_r)
    ctx = StepContext(
        config,
        config.base_options,
        r,
        gid,
        n_groups,
        length,
        traj,
        t,
        np.zeros(traj.size),
        failed,
        state_ids,
        None,
        response_lengths,
        {},
    )
    return spec.run_step(ctx)
