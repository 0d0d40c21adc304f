"""The fast path's env and engine: ``PddlEnv`` over the cached grammar, translation and state.

:class:`FastPddlEnv` mirrors textworld 1.7.0's ``textworld.envs.pddl.pddl.PddlEnv`` (``load``,
``reset``, ``_gather_infos``), reading the cached :func:`~progpo_envs.alfworld.fast.grammar.game_logic`
and :func:`~progpo_envs.alfworld.fast.translation.translation`, and deriving the command of an
action whose template reads only static facts once per operator and game.
:class:`FastEngine` is the drop-in replacement of :class:`~progpo_envs.alfworld.engine.StockEngine`.

Memory: the first engine of a process loads fast-downward's ``libdownward.so`` from its installed
path (one copy in the OS page cache, shared by every worker process); further engines in the
same process get a private temporary copy as the stock engine does (the library keeps its
state in globals, so two engines must not share one mapping).
"""

from __future__ import annotations

import json
import threading
from ctypes import cdll
from typing import Any, Callable, Mapping
from unittest import mock

import fast_downward
import textworld
from fast_downward import interface
from textworld.core import GameState
from textworld.envs import PddlEnv

from progpo_envs.alfworld.engine import StockEngine
from progpo_envs.alfworld.fast.grammar import game_logic, template_is_static
from progpo_envs.alfworld.fast.memo import bound_memento_cache
from progpo_envs.alfworld.fast.state import FastPddlState
from progpo_envs.alfworld.fast.translation import translation
from progpo_envs.alfworld.install import require_engine

__all__ = ["FastEngine", "FastPddlEnv"]

# ---------------------------------------------------------------------------------------------
# fast-downward library: the installed copy for the first engine of a process
# ---------------------------------------------------------------------------------------------
_LIB_LOCK = threading.Lock()
_LIB_POOL: list[Any] = []  # loaded libraries no engine holds right now (never dlclose'd)
_INSTALLED_LIB_LOADED = False


def _load_lib() -> tuple[Any, bool]:
    """(library, pooled): a libdownward handle for one engine of this process.

    fast-downward's plugin registry lives in a GNU-unique static (``RawRegistry::instance``)
    that every copy of ``libdownward.so`` in a process binds to. ``dlclose``-ing one copy and
    ``dlopen``-ing another later runs the static initializers against a registry that points
    into unmapped code: a segfault on the second or third engine of a process (seen with three
    envs created, closed and created again). So handles are never closed: a released handle is
    ``cleanup()``-ed and kept in a process-wide pool for the next engine (``load_sas`` resets it,
    as it does between resets of one stock env). The first handle maps the installed file
    itself (no 33 MB temporary copy); further concurrent engines get the stock private copies.
    """
    global _INSTALLED_LIB_LOADED
    with _LIB_LOCK:
        if _LIB_POOL:
            return _LIB_POOL.pop(), True
        if not _INSTALLED_LIB_LOADED:
            # Reuse the stock loader (it sets every argtypes/restype) but have it open the
            # installed file instead of its private temporary copy.
            with mock.patch.object(interface, "cdll", _InstalledLoader()):
                lib = fast_downward.load_lib()
            _INSTALLED_LIB_LOADED = True
            return lib, True
    return fast_downward.load_lib(), True


class _InstalledLoader:
    """Stands in for ``ctypes.cdll`` inside ``fast_downward.interface.load_lib``."""

    def LoadLibrary(self, _path: str) -> Any:  # ctypes' name
        return cdll.LoadLibrary(interface.DOWNWARD_LIB_PATH)


def _release_lib(lib: Any, pooled: bool, close_lib: Callable[[Any], None]) -> None:
    """Give a handle back: ``cleanup()`` it and keep it for the next engine (see _load_lib)."""
    if not pooled:
        close_lib(lib)
        return
    try:
        lib.cleanup()
    except Exception:  # best effort (e.g. at interpreter shutdown)
        return  # a handle whose cleanup failed is not reused
    with _LIB_LOCK:
        _LIB_POOL.append(lib)


# ---------------------------------------------------------------------------------------------
# the env
# ---------------------------------------------------------------------------------------------
class FastPddlEnv(PddlEnv):
    """``PddlEnv`` with cached logic/translation and per-operator command caching."""

    def __init__(self, infos: Any) -> None:
        textworld.Environment.__init__(self, infos)
        self.downward_lib, self._pooled_lib = _load_lib()
        self._close_lib = interface.close_lib
        self._commands: dict[str, tuple[str, str]] = {}
        self._static_templates: dict[str, bool] = {}

    def load(self, filename_or_data: Any) -> None:
        # textworld 1.7.0 PddlEnv.load, with the cached logic and translation
        bound_memento_cache()  # between games: memory stays flat however many games a process plays
        if isinstance(filename_or_data, Mapping):
            data, self._game_file = filename_or_data, None
        else:
            with open(filename_or_data, encoding="utf-8") as f:
                data = json.load(f)
            self._game_file = filename_or_data
        self._game_data = data
        self.walkthrough = data.get("walkthrough", None)
        self._logic = game_logic(data["pddl_domain"], data["grammar"])
        self._tr = translation(data["pddl_domain"], data["pddl_problem"])
        self._op_table: dict[int, Any] = {}
        self._pddl_state = FastPddlState(self.downward_lib, data["pddl_problem"], self._logic, self._tr, self._op_table)
        self._entity_infos = self._get_entity_infos()
        self._commands = {}
        self._static_templates = {}
        self._templates = sorted(set(action.template for action in self._logic.actions.values()))

    def reset(self) -> Any:
        # textworld 1.7.0 PddlEnv.reset, reusing the translation
        self._pddl_state = FastPddlState(
            self.downward_lib, self._game_data["pddl_problem"], self._logic, self._tr, self._op_table
        )
        self.prev_state = None
        self.state = GameState()
        self._last_action = None
        self._moves = 0
        context = {
            "state": self._pddl_state,
            "facts": list(self._pddl_state.facts),
            "variables": {},
            "mapping": {},
            "entity_infos": self._entity_infos,
        }
        self.state.feedback = self._logic.grammar.derive("#intro#", context)
        self.state.raw = self.state.feedback
        self._gather_infos()
        if "walkthrough" in self.request_infos.extras:
            self.state["extra.walkthrough"] = self.walkthrough or self._pddl_state.replan(self._entity_infos)
        return self.state

    def _is_static(self, action_name: str, template: str) -> bool:
        hit = self._static_templates.get(action_name)
        if hit is None:
            hit = template_is_static(template, self._tr.dynamic_predicates)
            self._static_templates[action_name] = hit
        return hit

    def _gather_infos(self) -> None:
        # textworld 1.7.0 PddlEnv._gather_infos, deriving a static command once per operator
        st, ps = self.state, self._pddl_state
        st["command_templates"] = self._templates
        st["won"] = ps.check_goal()
        st["lost"] = False
        st["_entity_infos"] = dict(self._entity_infos)
        facts = list(ps.facts)
        st["_facts"] = facts
        if self.request_infos.facts:
            st["facts"] = list(map(self._get_human_readable_fact, facts))
        st["last_action"] = None
        st["_last_action"] = self._last_action
        actions = list(ps.all_applicable_actions())
        st["_valid_actions"] = actions
        mapping = None
        commands = []
        for action in actions:
            key = action.op_name
            hit = self._commands.get(key)
            if hit is None:
                if mapping is None:
                    mapping = {k: info.name for k, info in self._entity_infos.items()}
                context = {
                    "state": ps,
                    "facts": facts,
                    "variables": {ph.name: self._entity_infos[var.name] for ph, var in action.mapping.items()},
                    "mapping": action.mapping,
                    "entity_infos": self._entity_infos,
                }
                template = action.command_template
                derived = self._logic.grammar.derive(template, context)
                action.command_template = derived
                hit = (derived, action.format_command(mapping))
                if self._is_static(action.name, template):
                    self._commands[key] = hit
            else:
                action.command_template = hit[0]
            commands.append(hit[1])
        st["_valid_commands"] = commands
        st["admissible_commands"] = sorted(set(commands))
        if self.request_infos.moves:
            st["moves"] = self._moves
        if self.request_infos.policy_commands:
            st["policy_commands"] = ps.replan(self._entity_infos)

    def close(self) -> None:
        if getattr(self, "downward_lib", None) is not None:
            _release_lib(self.downward_lib, self._pooled_lib, self._close_lib)
            self.downward_lib = None


class FastEngine(StockEngine):
    """Drop-in replacement of :class:`~progpo_envs.alfworld.engine.StockEngine` (same transcripts)."""

    def __init__(self) -> None:
        require_engine()
        self._env = FastPddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
        self._state = None
        self._loaded = None

    def close(self) -> None:
        super().close()
        self._env.close()
