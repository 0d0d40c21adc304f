"""PlanPO (arXiv 2608.17289): among a group's successes, the shorter ones rank higher.

PlanPO acts only in groups with a success; ProGPO acts only in all-failed groups, so the two
cover disjoint groups and stack (``progpo-planpo``). Notation: ``R_i`` the outcome of trajectory ``i``, ``success_i = R_i >= success_threshold``, ``T_i`` its
number of turns, ``z(x) = (x - mean x) / (std x + eps)`` with the population std, in the group.

- Trajectory term: ``R^E_i = 1[success_i] * R_i / T_i``; ``A^E_i = z(R^E)_i``, broadcast to
  every turn of ``i``. A group without a success gets 0, and so does a group whose ``R^E`` is
  constant (every success as long as the others, or a single member).
- Turn term (only meaningful when the model writes its own answer): ``R^S_{i,t} = 1[success_i]
  * R_i / L_{i,t}`` with ``L_{i,t}`` the answer's token count at turn ``t``. The paper's
  equation and its prose disagree on the turn group; this package takes the equation's reading:
  the turn-``t`` answers of every trajectory of the group, failures included at 0, form one
  group (:func:`planpo_turn_advantages`). A turn index that only one trajectory reached gets 0.
- ``A = A^E + alpha(k) * A^S``, ``alpha`` decaying linearly over the run from 0.1 to 0.05
  (:func:`planpo_alpha`). In score mode ``L`` would be the length of a command's name, so the
  trainer sets ``alpha = 0`` there and its report says so.

``T_i`` counts every turn the agent played, a rejected command included: a wasted turn makes a
success longer.

>>> planpo_episode_advantages(np.array([1.0, 1.0, 0.0]), np.array([2, 4, 3])).round(4)
array([ 1.2247,  0.    , -1.2247])
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from trainers.advantages.registry import Estimator, StepContext, option, register_builtin
from trainers.advantages.segments import Norm, as_float, check_norm, safe_divide, segment_stats

__all__ = ["PlanPOConfig", "planpo_alpha", "planpo_episode_advantages", "planpo_episode_flat", "planpo_turn_advantages"]


@dataclass(frozen=True)
class PlanPOConfig:
    """PlanPO's own options: an outcome at or above ``success_threshold`` is a success (WebShop: a
    partial score below it is not); ``alpha`` weights the turn term at this iteration (the trainer
    sets it from :func:`planpo_alpha` between ``alpha_start`` and ``alpha_end``; 0 in score mode)."""

    success_threshold: float = option(
        1.0,
        "an outcome at or above it is a success (a partial WebShop score below it is not)",
        flag="success_threshold",
        ge=0,
    )
    alpha: float = option(
        0.1,
        "weight of the turn term at this iteration (set from alpha_start and alpha_end)",
        flag="planpo_alpha",
        train=False,
        ge=0,
    )
    alpha_start: float = option(
        0.1,
        "weight of the turn term (shorter answers among successes) at the first "
        "iteration, decaying linearly to planpo_alpha_end; generate mode only (score mode: 0, "
        "it would reward short command names)",
        flag="planpo_alpha_start",
        ge=0,
    )
    alpha_end: float = option(0.05, "weight of the turn term at the last iteration", flag="planpo_alpha_end", ge=0)


def _constant_segments(x: np.ndarray, seg: np.ndarray, n_seg: int) -> np.ndarray:
    """Per segment: whether all its values are equal (exactly: a z-score of equal values must be 0,
    not a rounding residue divided by eps)."""
    hi = np.full(n_seg, -np.inf)
    lo = np.full(n_seg, np.inf)
    np.maximum.at(hi, seg, x)
    np.minimum.at(lo, seg, x)
    return hi == lo


def _z(x: np.ndarray, seg: np.ndarray, n_seg: int, eps: float, norm: str) -> np.ndarray:
    """``x`` z-scored (or only centred, ``norm="mean"``) in its segment; 0 in a constant segment."""
    _, mean, std = segment_stats(x, seg, n_seg)
    centered = x - mean[seg]
    out = safe_divide(centered, std[seg] + eps) if norm == "mean_std" else centered
    return np.where(_constant_segments(x, seg, n_seg)[seg], 0.0, out)


def planpo_episode_flat(
    outcomes: np.ndarray,
    turns: np.ndarray,
    gid: np.ndarray,
    n: int,
    *,
    success_threshold: float = 1.0,
    eps: float = 1e-6,
    norm: Norm = "mean_std",
) -> np.ndarray:
    """PlanPO's trajectory term ``A^E`` over flat arrays (dense group ids ``gid``, ragged groups).

    >>> planpo_episode_flat(np.array([1., 1., 0., 0.]), np.array([2, 4, 5, 5]), np.array([0, 0, 1, 1]), 2).round(4)
    array([ 1., -1.,  0.,  0.])
    """
    r = as_float(outcomes, "outcomes")
    t = as_float(turns, "turns")
    success = r >= success_threshold
    if np.any(success & (t < 1)):
        raise ValueError("turns: a successful trajectory needs at least one turn")
    r_e = np.where(success, r / np.maximum(t, 1.0), 0.0)  # R^E_i = 1[success_i] R_i / T_i
    adv = _z(r_e, gid, n, eps, norm)
    any_success = np.bincount(gid, weights=success.astype(np.float64), minlength=n) > 0
    return np.where(any_success[gid], adv, 0.0)


def planpo_episode_advantages(
    outcomes: np.ndarray, turns: np.ndarray, *, success_threshold: float = 1.0, eps: float = 1e-6
) -> np.ndarray:
    """PlanPO's trajectory term ``A^E`` of ONE group (1-D arrays of length G).

    ``R^E_i = R_i / T_i`` for members with ``R_i >= success_threshold``, else 0; population
    z-score in the group; zeros where no member succeeded or where ``R^E`` is constant.

    >>> planpo_episode_advantages(np.array([0.5, 0.0]), np.array([3, 3]))  # a partial score is no success
    array([0., 0.])
    >>> planpo_episode_advantages(np.array([0.5, 0.0]), np.array([3, 3]), success_threshold=0.5).round(4)
    array([ 1., -1.])
    """
    r = as_float(outcomes, "outcomes")
    t = as_float(turns, "turns")
    if r.ndim != 1 or t.shape != r.shape:
        raise ValueError(f"expected two 1-D arrays of one length, got {r.shape} and {t.shape}")
    return planpo_episode_flat(
        r, t, np.zeros(r.size, dtype=np.int64), 1 if r.size else 0, success_threshold=success_threshold, eps=eps
    )


def planpo_turn_advantages(
    outcomes: np.ndarray,
    traj_group: np.ndarray,
    step_traj: np.ndarray,
    step_index: np.ndarray,
    response_lengths: np.ndarray,
    *,
    success_threshold: float = 1.0,
    eps: float = 1e-6,
    norm: Norm = "mean_std",
) -> np.ndarray:
    """PlanPO's turn term ``A^S`` of every step: ``R^S_{i,t} = 1[success_i] R_i / L_{i,t}``
    z-scored among the steps of one group with the same turn index ``t`` (failures at 0).

    ``traj_group`` holds dense group ids per trajectory; the step arrays are as in
    :func:`trainers.advantages.step_advantages`.

    >>> planpo_turn_advantages(np.array([1., 1., 0.]), np.array([0, 0, 0]), np.array([0, 1, 2, 0]),
    ...     np.array([0, 0, 0, 1]), np.array([10, 40, 5, 4])).round(4)
    array([ 1.3728, -0.3922, -0.9806,  0.    ])
    """
    check_norm(norm)
    r = as_float(outcomes, "outcomes")
    traj = np.asarray(step_traj, dtype=np.int64)
    t = np.asarray(step_index, dtype=np.int64)
    length = as_float(response_lengths, "response_lengths")
    if length.shape != traj.shape or t.shape != traj.shape:
        raise ValueError(f"response_lengths and step_index need one entry per step ({traj.size})")
    if traj.size == 0:
        return np.zeros(0)
    success = r[traj] >= success_threshold
    r_s = np.where(success, r[traj] / np.maximum(length, 1.0), 0.0)  # R^S_{i,t}
    grp = np.asarray(traj_group, dtype=np.int64)[traj]
    _, seg = np.unique(grp * (int(t.max()) + 1) + t, return_inverse=True)  # (group, turn index)
    seg = seg.reshape(-1)
    return _z(r_s, seg, int(seg.max()) + 1, eps, norm)


def planpo_alpha(iteration: int, iterations: int, start: float = 0.1, end: float = 0.05) -> float:
    """The turn term's weight at ``iteration`` (1-based) of ``iterations``: linear from ``start``
    at the first iteration to ``end`` at the last.

    >>> [round(planpo_alpha(k, 5), 6) for k in (1, 3, 5)], planpo_alpha(1, 1)
    ([0.1, 0.075, 0.05], 0.1)
    """
    if iterations < 1 or not 1 <= iteration <= iterations:
        raise ValueError(f"iteration must be in 1..{iterations}, got {iteration}")
    frac = (iteration - 1) / (iterations - 1) if iterations > 1 else 0.0
    return start + (end - start) * frac


def planpo_episode(
    r: np.ndarray,
    gid: np.ndarray,
    n: int,
    *,
    eps: float,
    norm: Norm,
    turns: np.ndarray | None,
    options: PlanPOConfig | None = None,
    **_: Any,
) -> np.ndarray:
    """PlanPO's trajectory term (needs the number of turns ``T_i``)."""
    if turns is None:
        raise ValueError("planpo needs the number of turns T_i of each trajectory")
    threshold = (options or PlanPOConfig()).success_threshold
    return planpo_episode_flat(r, turns, gid, n, success_threshold=threshold, eps=eps, norm=norm)


def planpo_step(ctx: StepContext) -> np.ndarray | None:
    """PlanPO: ``alpha`` x the turn term (one group's turn-t answers); counts where its
    trajectory term acted."""
    cfg, opts, r, gid, n_groups = ctx.cfg, ctx.options, ctx.r, ctx.gid, ctx.n_groups
    planpo_ep = (
        planpo_episode_flat(
            r, ctx.length, gid, n_groups, success_threshold=opts.success_threshold, eps=cfg.eps, norm=cfg.norm
        )
        if r.size
        else np.zeros(0)
    )
    ctx.acted["planpo_groups"] = (
        float(np.sum(np.bincount(gid, weights=(planpo_ep != 0).astype(float), minlength=n_groups) > 0))
        if r.size
        else 0.0
    )
    alpha = opts.alpha if ctx.response_lengths is not None else 0.0
    ctx.acted["planpo_turn_alpha"] = float(alpha)
    if not (alpha and ctx.traj.size) or ctx.response_lengths is None:
        return None
    return alpha * planpo_turn_advantages(
        r,
        gid,
        ctx.traj,
        ctx.t,
        ctx.response_lengths,
        success_threshold=opts.success_threshold,
        eps=cfg.eps,
        norm=cfg.norm,
    )


def planpo_schedule(options: PlanPOConfig, iteration: int, iterations: int, generate: bool) -> PlanPOConfig:
    """The options at ``iteration``: the turn weight on its linear schedule in generate mode, 0 in
    score mode (there a response is a command's name, and the term would reward short names).

    >>> planpo_schedule(PlanPOConfig(), 1, 2, True).alpha, planpo_schedule(PlanPOConfig(), 1, 2, False).alpha
    (0.1, 0.0)
    """
    if not generate:
        return replace(options, alpha=0.0)
    return replace(
        options,
        alpha=planpo_alpha(min(max(iteration, 1), iterations), iterations, options.alpha_start, options.alpha_end),
    )


def planpo_metrics(acted: Mapping[str, float], n_groups: int, n_steps: int) -> dict[str, float]:
    """Where PlanPO acted: the groups its trajectory term ranked, and the turn weight used.

    >>> planpo_metrics({"planpo_groups": 2.0, "planpo_turn_alpha": 0.0}, 8, 100)
    {'adv/planpo_groups': 2.0, 'adv/planpo_group_frac': 0.25, 'adv/planpo_turn_alpha': 0.0}
    """
    if "planpo_groups" not in acted:
        return {}
    return {
        "adv/planpo_groups": float(acted["planpo_groups"]),
        "adv/planpo_group_frac": float(acted["planpo_groups"]) / max(n_groups, 1),
        "adv/planpo_turn_alpha": float(acted.get("planpo_turn_alpha", 0.0)),
    }


def planpo_report(train: Sequence[dict[str, Any]], options: PlanPOConfig) -> list[str]:
    """The report's paragraph: the groups PlanPO ranked, and whether its turn term was on (its
    schedule turns it off in score mode: :func:`planpo_schedule`)."""
    acted = sum(float(r.get("adv/planpo_groups", 0.0)) for r in train)
    groups = sum(float(r["adv/groups"]) for r in train)
    alphas = [float(r.get("adv/planpo_turn_alpha", 0.0)) for r in train]
    turn = (
        f"The turn term's weight went from {alphas[0]:.3f} to {alphas[-1]:.3f}."
        if any(alphas)
        else "The turn term was off (alpha 0): in score mode a response is a command's name, and the term "
        "would reward short names."
        if options.alpha_start > 0 or options.alpha_end > 0  # on in the options: the schedule's score mode
        else "The turn term was off (alpha 0)."
    )
    return [
        "## Where PlanPO acted",
        "",
        f"The trajectory term (shorter successes rank higher) acted in **{acted:.0f} of {groups:.0f} "
        f"groups** ({acted / max(groups, 1):.1%}): the groups with a success whose successes differ in "
        f"length. {turn}",
        "",
    ]


register_builtin(
    Estimator(
        "planpo",
        planpo_episode,
        planpo_step,
        needs=frozenset({"turns"}),
        options=PlanPOConfig,
        help="shorter successes rank higher (the trajectory term z(R / T) among the "
        "successes, plus alpha x the turn term in generate mode)",
        metrics=planpo_metrics,
        acted={"PlanPO groups": "adv/planpo_group_frac"},
        report=planpo_report,
        schedule=planpo_schedule,
    ),
    rank=3,
)
