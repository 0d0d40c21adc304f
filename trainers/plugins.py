"""Loading plug-ins: the modules that register estimators (:mod:`trainers.advantages.registry`)
or teachers (:mod:`trainers.teachers.registry`), named by ``--plugin`` or by an installed
distribution's entry point (standard library only, so that both registries share it).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import sys
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

__all__ = ["load_entry_point_group", "load_plugin", "load_plugins", "note_registration", "resolved"]

_LOADED_GROUPS: set[str] = set()


def load_entry_point_group(group: str, kind: str) -> None:
    """Import every module of the entry point ``group`` once (each registers its ``kind``: an
    estimator, a teacher); a plug-in that fails to load is named in one line and skipped, so that
    a broken one never hides the built-ins."""
    if group in _LOADED_GROUPS:
        return
    _LOADED_GROUPS.add(group)
    for ep in importlib.metadata.entry_points(group=group):
        try:
            ep.load()
        except Exception as err:  # any failure of a third party's module: said, and skipped
            print(
                f"warning: {kind} plug-in {ep.name} ({ep.value}) did not load: {type(err).__name__}: {err}",
                file=sys.stderr,
            )


#: how many estimators and teachers have been registered in this process (the registries count
#: here, so that a plug-in that registers nothing is told apart)
_REGISTERED = [0]


def note_registration() -> None:
    """Called by the registries on each registration."""
    _REGISTERED[0] += 1


def load_plugin(spec: str) -> None:
    """Import a module that registers estimators or teachers: a dotted module name, or a ``.py``
    file (loaded once per path). Every failure is a ``ValueError`` of one line naming the plug-in:
    a missing one, one whose code raises (its file and line; ``PROGPO_DEBUG=1`` keeps the
    traceback), one that exits while loading, and one that registers nothing."""
    path = Path(spec)
    if spec.endswith(".py"):
        if not path.is_file():
            raise ValueError(f"plugin {spec}: no such file")
        name = "progpo_plugin_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
        if name in sys.modules:
            return
        loader_spec = importlib.util.spec_from_file_location(name, path)
        assert loader_spec is not None and loader_spec.loader is not None
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[name] = module
        try:
            _registers(spec, lambda: loader_spec.loader.exec_module(module))  # type: ignore[union-attr]  # checked above
        except BaseException:
            del sys.modules[name]
            raise
        return
    if not spec or not all(part.isidentifier() for part in spec.split(".")):
        raise ValueError(f"plugin {spec}: not a module name (a.b.c) or a .py file")
    if spec in sys.modules:
        return
    try:
        _registers(spec, lambda: importlib.import_module(spec))
    except ModuleNotFoundError as err:
        if err.name is not None and spec.startswith(err.name):  # the plug-in itself, not one of its imports
            raise ValueError(f"plugin {spec}: {err}; pass an importable module or a .py file") from None
        raise


def _registers(spec: str, load: Callable[[], Any]) -> None:
    """Run ``load`` (the plug-in's import); its failures as one line, and a check that it registered."""
    before = _REGISTERED[0]
    try:
        load()
    except SystemExit as err:
        raise ValueError(
            f"plugin {spec} called sys.exit({err.code!r}) while loading; a plug-in only registers"
        ) from None
    except ModuleNotFoundError as err:
        if err.name is not None and spec.startswith(err.name):
            raise
        raise ValueError(_failure(spec, err)) from (err if os.environ.get("PROGPO_DEBUG") else None)
    except Exception as err:  # the plug-in's own code: named with its file and line
        if os.environ.get("PROGPO_DEBUG"):
            raise
        raise ValueError(_failure(spec, err)) from None
    if _REGISTERED[0] == before:
        raise ValueError(
            f"plugin {spec} registered no estimator or teacher (register_estimator / register_teacher); "
            "a plug-in that registers nothing would run the built-ins unnoticed"
        )


def _failure(spec: str, err: BaseException) -> str:
    """``plugin SPEC failed to load: Type: message (file:line)``: the deepest frame of the plug-in's
    own files (a syntax error: where it is)."""
    where = ""
    if isinstance(err, SyntaxError) and err.filename:
        where = f" ({err.filename}:{err.lineno})"
    else:
        frames = traceback.extract_tb(err.__traceback__)
        own = [f for f in frames if "importlib" not in f.filename] or frames
        if own:
            where = f" ({own[-1].filename}:{own[-1].lineno})"
    text = err.msg if isinstance(err, SyntaxError) else str(err).splitlines()[0] if str(err) else ""
    return f"plugin {spec} failed to load: {type(err).__name__}{': ' + text if text else ''}{where}"


def resolved(spec: str, base: str | Path | None = None) -> str:
    """A plug-in as a run stores it: a ``.py`` file as an absolute path (a relative one read
    against ``base``, the folder of the YAML that names it, else the working directory), so that
    the run can be resumed, evaluated or exported from anywhere; a module name as it is.

    >>> resolved("mine.py", "/configs"), resolved("my_pkg.plugin", "/configs")
    ('/configs/mine.py', 'my_pkg.plugin')
    """
    if not spec.endswith(".py"):
        return spec
    path = Path(spec).expanduser()
    if not path.is_absolute():
        path = Path(base or Path.cwd()) / path
    return os.path.abspath(path)


def load_plugins(specs: Sequence[str]) -> None:
    """:func:`load_plugin` each of ``specs``, in order; the first that cannot load is a ``ValueError``."""
    for spec in specs:
        load_plugin(spec)
