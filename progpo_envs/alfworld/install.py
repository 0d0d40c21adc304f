"""What the ``alfworld`` extra provides, checked and read without importing the engine itself.

Shared by the stock engine (:mod:`~progpo_envs.alfworld.engine`), the fast path
(:mod:`~progpo_envs.alfworld.fast`) and the embedded game set (:mod:`~progpo_envs.alfworld.embedded`):
the import check with its one-line fix, the wheel's domain and grammar files, and the guard
around fast-downward's translator, which overwrites ``sys.argv``.

>>> isinstance(engine_available(), bool)
True
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

from wrappers.errors import UserError

__all__ = [
    "ENGINE_MISSING_HINT",
    "EngineUnavailableError",
    "RestoreArgv",
    "alfworld_logic_files",
    "engine_available",
    "import_alfworld",
    "require_engine",
]

ENGINE_MISSING_HINT = (
    "The ALFWorld engine is not installed: `pip install 'progpo[alfworld]'` "
    "(installs alfworld==0.4.2, textworld[pddl] and tatsu==5.8.3; compiles fast-downward, "
    "needs cmake and g++)."
)


class EngineUnavailableError(UserError, ImportError):
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
    unset; it is undone here so that the package's data-dir resolution sees the user's
    real setting.
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


class RestoreArgv:
    """fast-downward's translator overwrites ``sys.argv`` (and never restores it): restore it."""

    def __enter__(self) -> None:
        self.argv = list(sys.argv)

    def __exit__(self, *exc: Any) -> None:
        sys.argv[:] = self.argv
