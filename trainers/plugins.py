"""Loading plug-ins: the modules that register estimators (:mod:`trainers.advantages.registry`)
or teachers (:mod:`trainers.teacher_registry`), named by ``--plugin`` or by an installed
distribution's entry point (standard library only, so that both registries share it).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["load_entry_point_group", "load_plugin", "load_plugins"]

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


def load_plugin(spec: str) -> None:
    """Import a module that registers estimators or teachers: a dotted module name, or a ``.py``
    file (loaded once per path). A missing one is a ``ValueError`` of one line."""
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
            loader_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
        return
    try:
        importlib.import_module(spec)
    except ModuleNotFoundError as err:
        raise ValueError(f"plugin {spec}: {err}; pass an importable module or a .py file") from None


def load_plugins(specs: Sequence[str]) -> None:
    """:func:`load_plugin` each of ``specs``, in order; the first that cannot load is a ``ValueError``."""
    for spec in specs:
        load_plugin(spec)
