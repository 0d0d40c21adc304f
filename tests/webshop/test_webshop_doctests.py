"""The docstring examples of the shop modules run and hold."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["search", "pages", "shop", "server", "env", "canonical"]


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name):
    module = importlib.import_module(f"progpo_envs.webshop.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
