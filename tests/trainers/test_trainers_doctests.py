"""The runnable examples in the trainers docstrings stay true (config errors, seed streams, the
penalty and token weights next to the loss, the report's wording, ...)."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["trainers.advantages", "trainers.advantages.hgpo", "trainers.advantages.planpo", "trainers.advantages.segments",
           "trainers.checkpoint", "trainers.config", "trainers.distributed", "trainers.envs",
           "trainers.evaluation", "trainers.forked", "trainers.losses", "trainers.metrics", "trainers.statistics", "trainers.report",
           "trainers.rollout", "trainers.run_dir", "trainers.seeds", "trainers.sharding", "trainers.trainer"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
