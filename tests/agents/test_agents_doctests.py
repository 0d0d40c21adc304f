"""The runnable examples in the agents docstrings stay true."""
from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["agents.parsing", "agents.prompting", "agents.logprobs", "agents.backends.base", "agents.backends",
           "agents.backends.hf", "agents.backends.vllm_backend", "agents.baselines", "agents.policy", "agents.policy_base", "agents.score_policy",
           "agents.generate_policy", "agents.models", "agents.memory"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
