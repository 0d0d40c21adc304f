"""`wrappers` stays light (gymnasium + numpy only) and its documented examples run."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys
import types

import pytest

HEAVY = ("torch", "textworld", "flask", "stable_baselines3", "transformers", "selenium", "progpo_envs")


def test_import_wrappers_does_not_import_heavy_packages():
    code = (
        "import sys, wrappers, wrappers.sb3, wrappers.group, wrappers.group.member_pools, wrappers.group.ray_pool\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    "module",
    [
        "wrappers",
        "wrappers.canonicalize",
        "wrappers.coverage",
        "wrappers.group",
        "wrappers.sb3",
        "wrappers.signals",
        "progpo_envs.rooms",
    ],
)
def test_docstring_examples(module):
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_every_export_resolves_and_every_lazy_name_is_exported():
    """``__all__`` is a literal list (type checkers read it, so ``from wrappers import X`` passes
    their re-export check); each name in it loads from its submodule, and none is left out."""
    import wrappers

    assert sorted(wrappers.__all__) == sorted(set(dir(wrappers)) & set(wrappers.__all__))
    lazy = {
        name
        for name in dir(wrappers)
        if not name.startswith("_")
        and name not in ("TYPE_CHECKING", "Any")
        and not isinstance(getattr(wrappers, name), types.ModuleType)
    }
    assert lazy == set(wrappers.__all__)
    submodules = [
        importlib.import_module(f"wrappers.{m}") for m in ("canonicalize", "coverage", "group", "sb3", "signals")
    ]
    for name in wrappers.__all__:
        assert any(getattr(m, name, None) is getattr(wrappers, name) for m in submodules), name
