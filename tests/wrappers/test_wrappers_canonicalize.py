"""CanonicalizeObservation and the generic canonicalizers."""
from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from wrappers import CanonicalizeObservation, FirstVisitCoverage, default_canonicalizer, identity_canonicalizer
from progpo_envs.rooms import TextRoomsEnv


def test_observation_unchanged_and_key_added_on_reset_and_step():
    env = CanonicalizeObservation(gym.make("FrozenLake-v1", is_slippery=False))
    raw = gym.make("FrozenLake-v1", is_slippery=False)
    obs, info = env.reset(seed=1)
    raw_obs, raw_info = raw.reset(seed=1)
    assert obs == raw_obs and info["canonical_obs"] == default_canonicalizer(obs, {})
    for action in (2, 1, 1):
        step = env.step(action)
        raw_step = raw.step(action)
        assert step[:4] == raw_step[:4]
        assert step[4]["canonical_obs"] == default_canonicalizer(step[0], {})
        assert set(step[4]) == set(raw_step[4]) | {"canonical_obs"}


def test_text_observations_map_to_themselves():
    env = CanonicalizeObservation(TextRoomsEnv())
    obs, info = env.reset(seed=0)
    assert info["canonical_obs"] == obs
    obs, *_, info = env.step("inventory")
    assert info["canonical_obs"] == "You carry nothing."


def test_custom_canonicalizer_sees_obs_and_info():
    seen = []

    def fn(obs, info):
        seen.append(info["step"])
        return obs.split(".")[0]

    env = CanonicalizeObservation(TextRoomsEnv(), canonicalizer=fn)
    _, info = env.reset(seed=0)
    assert info["canonical_obs"].startswith("You are in the") and "." not in info["canonical_obs"]
    env.step("look")
    assert seen == [0, 1]


def test_default_canonicalizer_is_content_based():
    assert default_canonicalizer(3, {}) == default_canonicalizer(np.int64(3), {})
    assert default_canonicalizer(3, {}) != default_canonicalizer(3.0, {})
    assert default_canonicalizer(0.0, {}) == default_canonicalizer(-0.0, {})
    assert default_canonicalizer({"a": 1, "b": np.ones(2)}, {}) == default_canonicalizer({"b": np.ones(2), "a": 1}, {})
    assert default_canonicalizer(np.zeros(2), {}) != default_canonicalizer(np.zeros((1, 2)), {})
    assert default_canonicalizer(np.zeros(2, np.float32), {}) != default_canonicalizer(np.zeros(2, np.float64), {})
    assert default_canonicalizer(("a", 1), {}) != default_canonicalizer(["a", 1], {})
    assert default_canonicalizer(("ab", "c"), {}) != default_canonicalizer(("a", "bc"), {})
    big = np.arange(12).reshape(3, 4)
    assert default_canonicalizer(big[:, ::2], {}) == default_canonicalizer(np.ascontiguousarray(big[:, ::2]), {})


def test_default_canonicalizer_is_stable_across_processes():
    code = (
        "import numpy as np; from wrappers import default_canonicalizer as d; "
        "print(d({'pos': np.arange(3, dtype=np.int32), 'name': 'x', 't': (1, 2.5)}, {}))"
    )
    outs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                       env={**__import__('os').environ, "PYTHONHASHSEED": seed}).stdout.strip()
        for seed in ("1", "2")
    }
    here = default_canonicalizer({"pos": np.arange(3, dtype=np.int32), "name": "x", "t": (1, 2.5)}, {})
    assert outs == {here}


@settings(max_examples=60, deadline=None)
@given(a=st.lists(st.integers(-5, 5), max_size=4), b=st.lists(st.integers(-5, 5), max_size=4))
def test_default_canonicalizer_equal_iff_equal_arrays(a, b):
    same = default_canonicalizer(np.array(a, dtype=np.int64), {}) == default_canonicalizer(np.array(b, dtype=np.int64), {})
    assert same == (a == b)


@pytest.mark.parametrize("obs", [object(), {1, 2}, {"k": object()}])
def test_unhashable_observation_names_canonicalizer(obs):
    with pytest.raises(TypeError, match="canonicalizer"):
        default_canonicalizer(obs, {})


def test_bad_canonicalizers_fail_clearly():
    with pytest.raises(TypeError, match="canonicalizer must be a callable"):
        CanonicalizeObservation(TextRoomsEnv(), canonicalizer="identity")
    env = CanonicalizeObservation(TextRoomsEnv(), canonicalizer=lambda o, i: len(o))
    with pytest.raises(TypeError, match="returned int, expected str"):
        env.reset(seed=0)
    with pytest.raises(TypeError, match="identity_canonicalizer needs str"):
        identity_canonicalizer(np.zeros(2), {})
    assert identity_canonicalizer("x", {}) == "x"


def test_huge_text_observation_is_fine():
    text = "a" * 1_000_000
    assert default_canonicalizer(text, {}) is text
    assert len(default_canonicalizer(text.encode(), {})) == 40


@pytest.mark.filterwarnings("ignore:.*different from the unwrapped")
def test_gymnasium_env_checker_passes_on_wrapped_envs():
    check_env(CanonicalizeObservation(gym.make("FrozenLake-v1")), skip_render_check=True)
    check_env(FirstVisitCoverage(CanonicalizeObservation(gym.make("FrozenLake-v1"))), skip_render_check=True)
    check_env(FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv())), skip_render_check=True)
