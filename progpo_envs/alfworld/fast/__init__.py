"""The fast path of the ALFWorld engine: same transcripts as the stock engine, less work.

Where the stock TextWorld PDDL backend spends its time, and which module does less instead:

* **load** -- TatSu parses the whole twl2 grammar for every game file.
  :mod:`~progpo_envs.alfworld.fast.grammar` caches the parsed ``GameLogic`` per sha256 of
  (domain, grammar), shared across the task sentences of one grammar version.
* **reset** -- the PDDL problem is translated to SAS twice on every load and every reset.
  :mod:`~progpo_envs.alfworld.fast.translation` caches the play translation in memory and on
  disk (checksummed, atomic; ``PROGPO_ALFWORLD_SAS_CACHE=0`` turns the disk part off) and makes
  the planner's translation only if the planner is asked for (``replan``), which the env never does.
* **step** -- every applicable action's command template is re-parsed and derived with
  deep-copied contexts. :mod:`~progpo_envs.alfworld.fast.grammar` parses snippets and queries
  once and copies contexts shallowly; :mod:`~progpo_envs.alfworld.fast.state` builds the
  per-operator part of the applicable actions once per game; :mod:`~progpo_envs.alfworld.fast.env`
  derives the command of an action whose template reads only static facts once per operator.

Cache keys are content hashes of the texts that determine the result, so a cache cannot go
stale. In-memory caches are per process (fast-downward's translator is not thread-safe: use
processes) and LRU bounded; :func:`clear_caches` empties them. :func:`warm_translation_cache`
fills the disk cache ahead of rollout workers. Grammar expressions are evaluated with explicit
variables (:func:`progpo_envs.alfworld.engine.eval_expression`), which works on Python 3.13 too.

Identity with the stock engine is tested (``tests/alfworld``) and checked for every game by
``python -m progpo_envs.alfworld.identity``. Importing this package needs the ``alfworld`` extra
(:class:`~progpo_envs.alfworld.install.EngineUnavailableError`, an ``ImportError``, says the fix).
"""

from __future__ import annotations

from progpo_envs.alfworld.install import require_engine

require_engine()  # one clear error when the extra is missing, before any TextWorld import below

from progpo_envs.alfworld.fast.env import FastEngine, FastPddlEnv  # noqa: E402  # after require_engine(): one clear error when the extra is missing
from progpo_envs.alfworld.fast.memo import clear_caches  # noqa: E402  # as above
from progpo_envs.alfworld.fast.translation import warm_translation_cache  # noqa: E402  # as above

__all__ = ["FastEngine", "FastPddlEnv", "clear_caches", "warm_translation_cache"]
