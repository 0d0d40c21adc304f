"""`wrappers` stays light (gymnasium + numpy only) and its documented examples run."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

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
