"""Env-agnostic Gymnasium wrappers exposing the ProGPO signals.

Depends on gymnasium and numpy only (no torch, TextWorld or Flask), so the wrappers drop into
any RL stack:

* :class:`CanonicalizeObservation` adds ``info["canonical_obs"]`` (a state id string);
* :class:`FirstVisitCoverage` adds ``info["first_visit"]``, ``info["coverage"]``,
  ``info["coverage_rate"]``; :class:`FirstVisitBonus` turns first visits into a reward bonus;
* :class:`GroupVectorEnv` runs B groups x G members on shared tasks and flags all-failed groups;
* :class:`AdmissibleActionsToDiscrete` adapts text envs to ``Discrete(K)`` + Box for SB3.

Example:
    >>> import gymnasium as gym
    >>> import wrappers
    >>> env = wrappers.FirstVisitCoverage(wrappers.CanonicalizeObservation(gym.make("FrozenLake-v1")))
    >>> sorted(k for k in env.reset(seed=0)[1] if k != "prob")
    ['canonical_obs', 'coverage', 'coverage_rate', 'first_visit']
"""
__progpo_package__ = True  # marker read by progpo_envs.guard (generic top-level name)

from wrappers.canonicalize import (
    Canonicalizer,
    CanonicalizeObservation,
    default_canonicalizer,
    encode_observation,
    identity_canonicalizer,
)
from wrappers.coverage import FirstVisitBonus, FirstVisitCoverage
from wrappers.group import GroupSeedSchedule, GroupVectorEnv
from wrappers.sb3 import AdmissibleActionsToDiscrete, hashed_bag_of_words
from wrappers.signals import all_failed, coverage_rate

__all__ = [
    "AdmissibleActionsToDiscrete",
    "CanonicalizeObservation",
    "Canonicalizer",
    "FirstVisitBonus",
    "FirstVisitCoverage",
    "GroupSeedSchedule",
    "GroupVectorEnv",
    "all_failed",
    "coverage_rate",
    "default_canonicalizer",
    "encode_observation",
    "hashed_bag_of_words",
    "identity_canonicalizer",
]
