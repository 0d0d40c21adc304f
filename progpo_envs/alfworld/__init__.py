"""ALFWorld as a Gymnasium environment over the real TextWorld PDDL engine.

Modules (all but ``fast`` import TextWorld lazily, so this package imports without the
``alfworld`` extra):

* :mod:`~progpo_envs.alfworld.env` -- ``ALFWorldEnv`` (``gym.make("ProGPO-ALFWorld-v0")``), ``make_engine``
* :mod:`~progpo_envs.alfworld.install` -- what the extra provides: import check, the wheel's domain/grammar
* :mod:`~progpo_envs.alfworld.engine` -- the stock engine (``PddlEnv`` + ALFWorld demangling)
* :mod:`~progpo_envs.alfworld.fast` -- the cached fast path with identical transcripts: ``grammar``
  (grammar cache), ``translation`` (SAS translation cache), ``state`` (state + applicable
  actions), ``env`` (``FastEngine``); needs the extra
* :mod:`~progpo_envs.alfworld.games` -- game discovery in the original ``json_2.1.1`` layout
* :mod:`~progpo_envs.alfworld.embedded` -- the shipped generated games, materialized on first use
* :mod:`~progpo_envs.alfworld.generate` -- the task generator (``python -m progpo_envs.alfworld.generate``);
  :mod:`~progpo_envs.alfworld.scenes` -- the floor plans it places games in, and the difficulty knob
* :mod:`~progpo_envs.alfworld.expert` -- a handcoded full-knowledge expert (walkthroughs)
* :mod:`~progpo_envs.alfworld.canonical` -- ``canonicalize_alfworld`` for the coverage wrappers
* :mod:`~progpo_envs.alfworld.identity` -- fast-vs-stock transcript check (``python -m ...identity``)

>>> from progpo_envs.alfworld import canonicalize_alfworld, TASK_TYPES
>>> len(TASK_TYPES)
6
"""

from __future__ import annotations

from progpo_envs.alfworld.canonical import canonicalize_alfworld
from progpo_envs.alfworld.tasks import TASK_TYPES

__all__ = ["ALFWorldEnv", "TASK_TYPES", "canonicalize_alfworld"]


def __getattr__(name: str):
    if name == "ALFWorldEnv":
        # lazy (PEP 562): the env module is cheap, but the package's own import stays minimal
        from progpo_envs.alfworld.env import ALFWorldEnv

        return ALFWorldEnv
    raise AttributeError(name)
