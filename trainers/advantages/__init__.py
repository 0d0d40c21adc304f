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
  see :func:`trainers.runs.metrics.rollout_metrics`).
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

HGPO's potential credit is the reconstruction of arXiv 2607.04242
(:func:`~trainers.advantages.hgpo.potential_credit`).

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

One module per family, and one implementation per formula:

- :mod:`~trainers.advantages.grpo` (GRPO, RLOO), :mod:`~trainers.advantages.planpo`,
  :mod:`~trainers.advantages.hgpo` and :mod:`~trainers.advantages.progpo` (progress, first
  visits, the all-failed gate); GiGPO's anchor term is in :mod:`~trainers.advantages.segments`;
- :mod:`~trainers.advantages.registry`: each base's episode term, step term, needs and options, by name;
  a new base is one :func:`register_estimator` call, in the package or in a plug-in;
- :mod:`~trainers.advantages.episode`: the episode level (:func:`episode_advantages`; the paper's
  :func:`progpo_episode_advantages`, one group, and its ``(B, G)`` form);
- :mod:`~trainers.advantages.step`: the step level, :func:`step_advantages` with an
  :class:`AdvantageConfig` (``estimator`` one of :func:`estimator_names`), which is what the trainer
  calls (rollout -> :func:`step_advantages` -> ``trainers.loop.losses``).

>>> import numpy as np
>>> progpo_episode_advantages(np.array([0.0, 0.0]), np.array([0.2, 0.6])).round(4)
array([-1.,  1.])
>>> progpo_episode_advantages(np.array([1.0, 0.0]), np.array([0.2, 0.6])).round(4)  # success: GRPO
array([ 1., -1.])
"""

from __future__ import annotations

try:  # another distribution's `wrappers` first on sys.path: one line that says so
    import wrappers.signals  # noqa: F401  # imported first, to fail in one line when another `wrappers` shadows this one
except ImportError:
    from progpo_envs.guard import check_import_names

    check_import_names(("wrappers",))
    raise

# (importing gigpo, planpo and hgpo registers their bases)
from trainers.advantages.config import AdvantageConfig
from trainers.advantages.episode import episode_advantages, progpo_episode_advantages, progpo_episode_advantages_batched
from trainers.advantages.gigpo import GiGPOConfig
from trainers.advantages.grpo import grpo_advantages, rloo_advantages
from trainers.advantages.hgpo import FUSIONS, HGPOConfig, hgpo_history_advantages, potential_credit
from trainers.advantages.planpo import PlanPOConfig, planpo_alpha, planpo_episode_advantages, planpo_turn_advantages
from trainers.advantages.progpo import group_scope_first_visit, progress_advantages, shuffle_within_groups
from trainers.advantages.registry import (
    Estimator,
    StepContext,
    base_names,
    estimator,
    estimator_names,
    load_plugin,
    option,
    register,
    register_estimator,
)
from trainers.advantages.segments import anchor_advantages, discounted_returns, factorize
from trainers.advantages.step import StepAdvantages, penalized_advantages, step_advantages

__all__ = [
    "penalized_advantages",
    "BASES",
    "ESTIMATORS",
    "Estimator",
    "StepContext",
    "base_names",
    "estimator",
    "estimator_names",
    "load_plugin",
    "option",
    "register",
    "register_estimator",
    "FUSIONS",
    "AdvantageConfig",
    "GiGPOConfig",
    "HGPOConfig",
    "PlanPOConfig",
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


def __getattr__(name: str) -> object:
    """``BASES`` and ``ESTIMATORS``: the registered names now (a plug-in registered later is in the next read)."""
    if name == "BASES":
        return base_names()
    if name == "ESTIMATORS":
        return estimator_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
