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

import importlib
from typing import TYPE_CHECKING, Any

#: public name -> the submodule that defines it; loaded on first use (PEP 562), so that importing
#: one wrapper does not import the group vector env's worker pools (multiprocessing) or the SB3 adapter
_SOURCES = {
    "Canonicalizer": "canonicalize",
    "CanonicalizeObservation": "canonicalize",
    "default_canonicalizer": "canonicalize",
    "encode_observation": "canonicalize",
    "identity_canonicalizer": "canonicalize",
    "FirstVisitBonus": "coverage",
    "FirstVisitCoverage": "coverage",
    "GroupSeedSchedule": "group",
    "GroupVectorEnv": "group",
    "AdmissibleActionsToDiscrete": "sb3",
    "hashed_bag_of_words": "sb3",
    "all_failed": "signals",
    "coverage_rate": "signals",
}

if TYPE_CHECKING:
    from wrappers.canonicalize import (
        CanonicalizeObservation,
        Canonicalizer,
        default_canonicalizer,
        encode_observation,
        identity_canonicalizer,
    )
    from wrappers.coverage import FirstVisitBonus, FirstVisitCoverage
    from wrappers.group import GroupSeedSchedule, GroupVectorEnv
    from wrappers.sb3 import AdmissibleActionsToDiscrete, hashed_bag_of_words
    from wrappers.signals import all_failed, coverage_rate


def __getattr__(name: str) -> Any:
    if name in _SOURCES:
        value = getattr(importlib.import_module(f"wrappers.{_SOURCES[name]}"), name)
        globals()[name] = value  # later lookups skip this function
        return value
    raise AttributeError(f"module 'wrappers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_SOURCES))


# a literal list, so that type checkers see the lazy names as the package's exports
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
