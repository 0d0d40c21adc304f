"""The stock ALFWorld text engine: TextWorld's PDDL backend with ALFWorld's name demangling.

This module is the only place that touches TextWorld / fast-downward internals for the stock
path. It imports them lazily so that ``progpo_envs.alfworld`` imports without the ``alfworld``
extra installed; :func:`require_engine` raises one clear error when they are missing.

Example (needs the ``alfworld`` extra)::

    >>> from progpo_envs.alfworld.engine import StockEngine   # doctest: +SKIP
    >>> eng = StockEngine()                                    # doctest: +SKIP
    >>> eng.load("json_2.1.1/valid_unseen/<task>/<trial>/game.tw-pddl")  # doctest: +SKIP
    >>> obs = eng.reset(); eng.admissible_commands[:2]         # doctest: +SKIP
    ['go to bed 1', 'go to desk 1']
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

ENGINE_MISSING_HINT = (
    "The ALFWorld engine is not installed: `pip install 'progpo[alfworld]'` "
    "(installs alfworld==0.4.2, textworld[pddl] and tatsu==5.8.3; compiles fast-downward, "
    "needs cmake and g++)."
)

NOTHING_HAPPENS = "Nothing happens."


class EngineUnavailableError(ImportError):
    """Raised when ``textworld[pddl]`` or ``alfworld`` cannot be imported."""


def engine_available() -> bool:
    """True when the real engine (textworld PDDL backend + alfworld) can be imported."""
    try:
        require_engine()
    except EngineUnavailableError:
        return False
    return True


def require_engine() -> None:
    """Import the engine's packages, or raise :class:`EngineUnavailableError` with the fix."""
    for name in ("fast_downward", "tatsu", "textworld.envs.pddl.pddl"):
        try:
            importlib.import_module(name)
        except Exception as exc:  # ImportError, or a broken build raising something else
            raise EngineUnavailableError(f"{ENGINE_MISSING_HINT} (import of {name!r} failed: {exc})") from exc
    import_alfworld("alfworld")


def import_alfworld(module: str) -> Any:
    """Import an ``alfworld`` module without leaking ``alfworld.info``'s side effect.

    ``import alfworld`` sets ``os.environ["ALFWORLD_DATA"]`` to ``~/.cache/alfworld`` when it is
    unset; we undo that so our own data-dir resolution sees the user's real setting.
    """
    before = os.environ.get("ALFWORLD_DATA")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise EngineUnavailableError(f"{ENGINE_MISSING_HINT} (import of {module!r} failed: {exc})") from exc
    finally:
        if before is None:
            os.environ.pop("ALFWORLD_DATA", None)
        else:
            os.environ["ALFWORLD_DATA"] = before


def _import_demangler() -> Any:
    return import_alfworld("alfworld.agents.utils.misc").Demangler


def alfworld_logic_files() -> tuple[str, str]:
    """Text of the ``alfred.pddl`` domain and ``alfred.twl2`` grammar shipped in the alfworld wheel."""
    try:
        spec = importlib.util.find_spec("alfworld")
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise EngineUnavailableError(ENGINE_MISSING_HINT)
    root = list(spec.submodule_search_locations)[0]
    with open(os.path.join(root, "data", "alfred.pddl"), encoding="utf-8") as f:
        domain = f.read()
    with open(os.path.join(root, "data", "alfred.twl2"), encoding="utf-8") as f:
        grammar = f.read()
    return domain, grammar


class _Argv:
    """fast-downward's translator overwrites ``sys.argv`` (and never restores it): restore it."""

    def __enter__(self) -> None:
        self.argv = list(sys.argv)

    def __exit__(self, *exc: Any) -> None:
        sys.argv[:] = self.argv


@dataclass(frozen=True)
class GroundAction:
    """An applicable action of the current state: PDDL name, argument ids and its command text."""

    name: str
    args: Mapping[str, str]
    command: str


class StockEngine:
    """One game of the real engine: ``textworld.envs.PddlEnv`` + ALFWorld's demangler.

    Behaves exactly like ALFWorld's ``AlfredTWEnv`` stack (``PddlEnv`` wrapped by
    ``AlfredDemangler(shuffle=False)``): same observations, same sorted admissible commands.
    """

    def __init__(self) -> None:
        require_engine()
        import textworld
        from textworld.envs import PddlEnv

        self._env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
        self._state: Any = None
        self._loaded: Any = None

    # -- game lifecycle ---------------------------------------------------------------------
    def load(self, game: str | Mapping[str, Any]) -> None:
        """Load a ``game.tw-pddl`` file (path) or its parsed JSON content."""
        with _Argv():
            self._env.load(game)
        self._demangle()
        self._loaded = game

    def _demangle(self) -> None:
        demangler = _import_demangler()(game_infos=self._env._entity_infos, shuffle=False)
        for info in self._env._entity_infos.values():
            info.name = demangler.demangle_alfred_name(info.id)

    def reset(self) -> str:
        """Start the loaded game again; returns the intro observation."""
        with _Argv():
            self._state = self._env.reset()
        return self._state.feedback

    def step(self, command: str) -> tuple[str, bool]:
        """Play ``command``; returns (observation, valid). Unknown commands: "Nothing happens."."""
        valid = command.strip() in self._state["_valid_commands"]
        self._state, _, _ = self._env.step(command)
        return self._state.feedback, valid

    # -- state queries ----------------------------------------------------------------------
    @property
    def admissible_commands(self) -> list[str]:
        return list(self._state["admissible_commands"])

    @property
    def won(self) -> bool:
        return bool(self._state["won"])

    @property
    def walkthrough(self) -> list[str] | None:
        w = getattr(self._env, "walkthrough", None)
        return list(w) if w else None

    @property
    def problem_text(self) -> str:
        """The loaded game's PDDL problem."""
        return str(self._env._game_data["pddl_problem"])

    def facts(self) -> list[tuple[str, tuple[str, ...]]]:
        """Current PDDL facts as (predicate, argument ids), ids as fast-downward spells them."""
        return [(p.name, tuple(v.name for v in p.arguments)) for p in self._env._pddl_state.facts]

    def ground_actions(self) -> list[GroundAction]:
        """Applicable actions with their command text (same order as the engine lists them)."""
        out = []
        for action, command in zip(self._state["_valid_actions"], self._state["_valid_commands"]):
            args = {ph.name: var.name for ph, var in action.mapping.items()}
            out.append(GroundAction(action.name.lower(), args, command))
        return out

    def entity_names(self) -> dict[str, str]:
        """Map of PDDL id -> displayed name ("cabinet 3")."""
        return {k: v.name for k, v in self._env._entity_infos.items()}

    def close(self) -> None:
        self._state = None


def make_engine(fast: bool) -> StockEngine:
    """The engine for ``fast`` (the cached fast path) or the stock one."""
    if fast:
        from progpo_envs.alfworld.fast import FastEngine

        return FastEngine()
    return StockEngine()


def command_for(actions: Sequence[GroundAction], name: str, **args: str) -> str | None:
    """The command of the first applicable action ``name`` whose arguments include ``args``."""
    for a in actions:
        if a.name == name and all(a.args.get(k) == v for k, v in args.items()):
            return a.command
    return None
