"""Import-time guard: ``agents``, ``wrappers`` and ``trainers`` must be progpo's own packages.

Those top-level names are generic: another distribution on PyPI (``agents``, for one) may install
the same import name. Python then silently imports whichever comes first on ``sys.path``, and
progpo fails later in ways that do not say why. :func:`check_import_names` runs when
``progpo_envs``, ``agents``, ``trainers.config`` or ``trainers.advantages`` is imported (``trainers``
itself checks nothing: the verl plugin loads beside any ``agents``) and raises :class:`ImportNameConflictError`,
one line naming the conflict, when a name resolves outside progpo's install (another folder
earlier on ``sys.path``) or to a file another distribution overwrote. ``wrappers`` runs no
check itself (it must import with gymnasium and numpy alone); the others check it.

Uses ``importlib.util.find_spec`` and reads three small files: nothing foreign is executed.

>>> check_import_names()  # progpo's own install: silent
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

__all__ = ["GENERIC_NAMES", "MARKER", "ImportNameConflictError", "check_import_names"]

#: progpo's top-level packages whose names other distributions may also use
GENERIC_NAMES = ("agents", "wrappers", "trainers")
#: a line every progpo top-level ``__init__.py`` holds
MARKER = "__progpo_package__ = True"
_ROOT = Path(__file__).resolve().parent.parent  # the folder holding progpo_envs/ and its siblings


class ImportNameConflictError(ImportError):
    """A top-level name of progpo resolves to another distribution's package."""


def _owner(name: str) -> tuple[str, str]:
    """(who installs the top-level ``name`` besides progpo, how to get rid of it), for the message."""
    try:
        from importlib.metadata import packages_distributions  # the error path only: the guard runs on every import

        dists = sorted(set(packages_distributions().get(name, [])) - {"progpo"})
    except Exception:  # only decorates the message
        dists = []
    if dists:
        return f"distribution {', '.join(dists)}", f"`pip uninstall {' '.join(dists)}`"
    return "a folder on sys.path, not a distribution", "remove that folder from sys.path"


def check_import_names(names: tuple[str, ...] = GENERIC_NAMES) -> None:
    """Raise :class:`ImportNameConflictError` if one of ``names`` is not progpo's package."""
    for name in names:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue  # not importable at all: the import itself will say so
        expected = _ROOT / name / "__init__.py"
        origin = Path(spec.origin).resolve() if spec.origin else None
        if origin == expected:
            try:
                if MARKER in origin.read_text(encoding="utf-8", errors="replace"):
                    continue
            except OSError:
                continue
            owner, fix = _owner(name)
            where = f"{origin}, overwritten by {owner}"
        else:
            owner, fix = _owner(name)
            where = f"{origin or spec.submodule_search_locations} from {owner}"
        raise ImportNameConflictError(
            f"progpo: import name {name!r} resolves to {where}, not to progpo's {expected}; "
            f"{fix}, or install progpo in its own virtual environment"
        )
