"""The stock ALFWorld text engine: TextWorld's PDDL backend with ALFWorld's name demangling.

This module is the only place that touches TextWorld / fast-downward internals for the stock
path. It imports them lazily so that ``progpo_envs.alfworld`` imports without the ``alfworld``
extra installed; :func:`~progpo_envs.alfworld.install.require_engine` raises one clear error
when they are missing. On Python 3.13 the stock ``EvalSymbol.derive`` gets the explicit-variables
evaluation the fast path uses (:func:`eval_expression`), so both engines run there too.

Example (needs the ``alfworld`` extra)::

    >>> from progpo_envs.alfworld.engine import StockEngine   # doctest: +SKIP
    >>> eng = StockEngine()                                    # doctest: +SKIP
    >>> eng.load("json_2.1.1/valid_unseen/<task>/<trial>/game.tw-pddl")  # doctest: +SKIP
    >>> obs = eng.reset(); eng.admissible_commands[:2]         # doctest: +SKIP
    ['go to bed 1', 'go to desk 1']
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from progpo_envs.alfworld.install import (  # noqa: F401  (re-exported: the engine's public names since 0.1)
    ENGINE_MISSING_HINT,
    EngineUnavailableError,
    RestoreArgv,
    alfworld_logic_files,
    engine_available,
    import_alfworld,
    require_engine,
)


def _import_demangler() -> Any:
    return import_alfworld("alfworld.agents.utils.misc").Demangler


_TEXTGEN: dict[str, Any] | None = None


def eval_expression(code: Any, symbol: Any, context: Mapping[str, Any]) -> Any:
    """Value of a twl2 ``{expression}`` (source or compiled): textgen's globals, and as locals
    ``self``, ``context`` and the grammar's variables, as textworld 1.7.0's
    ``textgen.EvalSymbol.derive`` sees them on Python < 3.13, but passed explicitly."""
    global _TEXTGEN
    if _TEXTGEN is None:
        _TEXTGEN = vars(importlib.import_module("textworld.envs.pddl.textgen"))
    scope = {"self": symbol, "context": context}
    scope.update(context["variables"])
    return eval(code, _TEXTGEN, scope)  # the game's own grammar, as the stock engine does


def _eval_symbol_derive(self: Any, context: Any = None) -> list[Any]:
    # textworld 1.7.0 textgen.EvalSymbol.derive, with the variables passed to eval explicitly
    tg = importlib.import_module("textworld.envs.pddl.textgen")
    context = context or self.context
    return [tg.TerminalSymbol(eval_expression(self.expression, self, context))]


def _fix_eval_symbol_for_py313() -> None:
    """Python 3.13 (PEP 667): ``locals().update(...)`` no longer reaches ``eval``, so the stock
    ``EvalSymbol.derive`` raises ``NameError`` on the first grammar variable. Give it the same
    expression, evaluated with explicit variables (same value on every Python; stock before 3.13)."""
    if sys.version_info >= (3, 13):
        tg = importlib.import_module("textworld.envs.pddl.textgen")
        if tg.EvalSymbol.derive is not _eval_symbol_derive:
            tg.EvalSymbol.derive = _eval_symbol_derive


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
        import textworld  # the [alfworld] extra
        from textworld.envs import PddlEnv  # the [alfworld] extra

        _fix_eval_symbol_for_py313()
        self._env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True))
        self._state: Any = None
        self._loaded: Any = None

    # -- game lifecycle ---------------------------------------------------------------------
    def load(self, game: str | Mapping[str, Any]) -> None:
        """Load a ``game.tw-pddl`` file (path) or its parsed JSON content."""
        with RestoreArgv():
            self._env.load(game)
        self._demangle()
        self._loaded = game

    def _demangle(self) -> None:
        demangler = _import_demangler()(game_infos=self._env._entity_infos, shuffle=False)
        for info in self._env._entity_infos.values():
            info.name = demangler.demangle_alfred_name(info.id)

    def reset(self) -> str:
        """Start the loaded game again; returns the intro observation."""
        with RestoreArgv():
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

    def close(self) -> None:
        self._state = None


def command_for(actions: Sequence[GroundAction], name: str, **args: str) -> str | None:
    """The command of the first applicable action ``name`` whose arguments include ``args``."""
    for a in actions:
        if a.name == name and all(a.args.get(k) == v for k, v in args.items()):
            return a.command
    return None
