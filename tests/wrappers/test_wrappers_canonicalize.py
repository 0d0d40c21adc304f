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

from progpo_envs.rooms import TextRoomsEnv
from wrappers import CanonicalizeObservation, FirstVisitCoverage, default_canonicalizer, identity_canonicalizer


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
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**__import__("os").environ, "PYTHONHASHSEED": seed},
        ).stdout.strip()
        for seed in ("1", "2")
    }
    here = default_canonicalizer({"pos": np.arange(3, dtype=np.int32), "name": "x", "t": (1, 2.5)}, {})
    assert outs == {here}


@settings(max_examples=60, deadline=None)
@given(a=st.lists(st.integers(-5, 5), max_size=4), b=st.lists(st.integers(-5, 5), max_size=4))
def test_default_canonicalizer_equal_iff_equal_arrays(a, b):
    same = default_canonicalizer(np.array(a, dtype=np.int64), {}) == default_canonicalizer(
        np.array(b, dtype=np.int64), {}
    )
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


# ------------------------------------------------------------------ the encoding is a key: injective
def _corpus():
    """Observation parts that must all get distinct keys (types, lengths, nesting, dtypes, shapes)."""
    return [
        None,
        True,
        False,
        0,
        1,
        -1,
        10,
        2**70,
        0.5,
        1.5,
        float("inf"),
        float("nan"),
        "",
        "N",
        "1",
        "ab",
        "a",
        "b",
        "é",
        b"",
        b"1",
        b"ab",
        bytearray(b"ab")[:1],
        (),
        [],
        {},
        (1,),
        [1],
        (1, 2),
        [1, 2],
        ((1,), 2),
        (1, (2,)),
        ["ab", "c"],
        ["a", "bc"],
        ("a", "b"),
        {"a": 1},
        {"a": 2},
        {"b": 1},
        {"a": 1, "b": 2},
        [("a", 1)],
        {1: "a"},
        {"1": "a"},
        np.array([1]),
        np.array([1.0]),
        np.array([1], dtype=np.int32),
        np.array([[1]]),
        np.zeros(2),
        np.zeros((1, 2)),
        np.array([1, 2]),
        np.array([2, 1]),
        np.array(["a", None], dtype=object),
        np.array([None, "a"], dtype=object),
        np.array([[None]], dtype=object),
        {"x": np.zeros(2)},
        [None],
        [None, None],
        (None,),
        [[]],
        [[], []],
        [True],
        [1.0],
    ]


def test_distinct_observations_get_distinct_keys():
    from wrappers.canonicalize import encode_observation

    corpus = _corpus()
    keys = [encode_observation(v) for v in corpus]
    seen: dict[bytes, object] = {}
    for v, k in zip(corpus, keys):
        assert k not in seen, (v, seen.get(k))
        seen[k] = v
    # concatenations never collide: a list's parts are length-prefixed and counted
    assert encode_observation(["ab", "c"]) != encode_observation(["a", "bc"])
    assert encode_observation([[1], 2]) != encode_observation([[1, 2]])
    assert encode_observation({"a": "b", "c": "d"}) != encode_observation({"a": "bc", "": "d"})


def test_equal_observations_get_equal_keys():
    from wrappers.canonicalize import default_canonicalizer, encode_observation

    pairs = [
        (1, np.int64(1)),
        (1.5, np.float32(1.5)),
        (True, np.bool_(True)),
        (0.0, -0.0),
        (float("nan"), float("-nan")),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({1: "x", 2: "y"}, {2: "y", 1: "x"}),
        (np.array([1, 2]), np.array([1, 2])[::1].copy()),
        (np.arange(4)[::2], np.array([0, 2])),
        (b"ab", bytearray(b"ab")),
        (b"ab", memoryview(b"ab")),
        ({(1, 2): 3}, {(1, 2): 3}),
    ]
    for a, b in pairs:
        assert encode_observation(a) == encode_observation(b), (a, b)
        assert default_canonicalizer(a, {}) == default_canonicalizer(b, {})
    assert default_canonicalizer("text", {}) == "text"  # strings are their own key
    mixed = {1: "a", "x": "b"}  # keys that do not sort together still encode deterministically
    assert encode_observation(mixed) == encode_observation({"x": "b", 1: "a"})


def test_encoding_refuses_what_it_cannot_key():
    from wrappers.canonicalize import _MAX_DEPTH, default_canonicalizer, encode_observation

    with pytest.raises(TypeError, match="cannot encode an observation part of type set"):
        encode_observation({1, 2})
    deep: list = []
    node = deep
    for _ in range(_MAX_DEPTH + 2):
        node.append([])
        node = node[0]
    with pytest.raises(ValueError, match=f"nested deeper than {_MAX_DEPTH} levels"):
        encode_observation(deep)
    with pytest.raises(TypeError, match="default_canonicalizer cannot hash an observation of type object"):
        default_canonicalizer(object(), {})
    cyclic: list = []
    cyclic.append(cyclic)
    with pytest.raises(TypeError, match="nested deeper"):
        default_canonicalizer(cyclic, {})


def test_encoding_edges_floats_surrogates_depth_and_rejected_steps():
    from wrappers.canonicalize import _MAX_DEPTH, encode_observation, is_rejected

    assert encode_observation(1e-17) != encode_observation(0.0) != encode_observation(1.0)
    assert encode_observation(-1e-300) != encode_observation(0.0)
    assert encode_observation("\ud800") != encode_observation("\ud801")  # a lone surrogate still encodes
    deep: list = []
    node = deep
    for _ in range(_MAX_DEPTH):  # the innermost list at depth _MAX_DEPTH: the limit, accepted
        node.append([])
        node = node[0]
    assert encode_observation(deep).startswith(b"L1:")
    assert is_rejected({"valid_action": np.array([True, False])}) is False  # several flags: no per-step verdict
    assert is_rejected({"valid_action": 0}) is True and is_rejected("not a mapping") is False
    assert is_rejected({"valid_action": np.bool_(True)}) is False
