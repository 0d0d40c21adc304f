"""Every runnable example in the package's docstrings stays true: the doctests of every module of
``agents``, ``progpo_envs``, ``trainers`` and ``wrappers``, found by walking the packages (a new
module is collected without being listed). A module whose import needs an optional third-party
extra that is not installed is skipped with that reason; a module of the package that fails to
import fails here."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("agents", "progpo_envs", "trainers", "wrappers")
OWN = set(PACKAGES)
#: modules meant to be run, not imported (their import starts a program)
NOT_IMPORTED = {"trainers.__main__", "trainers.lab.__main__", "progpo_envs.__main__"}


def _modules() -> list[str]:
    names = []
    for package in PACKAGES:
        names.append(package)
        for info in pkgutil.walk_packages([str(ROOT / package)], prefix=package + "."):
            if info.name not in NOT_IMPORTED:
                names.append(info.name)
    return sorted(names)


def _has_examples(name: str) -> bool:
    """Whether the module's source holds a ``>>>`` example (read without importing it)."""
    spec = importlib.util.find_spec(name)
    return bool(spec and spec.origin and spec.origin.endswith(".py") and ">>>" in Path(spec.origin).read_text())


MODULES = [m for m in _modules() if _has_examples(m)]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] in OWN:
            raise  # breakage of the package itself is a failure, never a skip
        pytest.skip(f"optional extra not installed: {err.name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0


def test_the_walk_finds_the_modules_with_examples():
    assert {
        "wrappers.coverage",
        "wrappers.canonicalize",
        "wrappers.signals",
        "wrappers.group",
        "progpo_envs.webshop.reward",
        "trainers.loop.ppo",
        "trainers.teachers",
        "trainers.rollouts.tree_rollout",
        "trainers.runs.run_files",
    } <= set(MODULES)
