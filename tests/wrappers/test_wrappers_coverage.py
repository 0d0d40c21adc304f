"""FirstVisitCoverage on a discrete, a continuous and a text env."""
from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from wrappers import CanonicalizeObservation, FirstVisitBonus, FirstVisitCoverage
from wrappers.toy_envs import TextRoomsEnv

LEFT, DOWN, RIGHT, UP = 0, 1, 2, 3


def test_frozenlake_coverage_by_hand():
    env = FirstVisitCoverage(gym.make("FrozenLake-v1", is_slippery=False))
    _, info = env.reset(seed=0)
    assert (info["first_visit"], info["coverage"], info["coverage_rate"]) == (True, 0, 0.0)
    # cells: 0 -> 1 -> 2 -> 1 -> 0 -> 4
    expected = [(True, 1), (True, 2), (False, 2), (False, 2), (True, 3)]
    for t, (action, (first, cov)) in enumerate(zip([RIGHT, RIGHT, LEFT, LEFT, DOWN], expected), start=1):
        *_, info = env.step(action)
        assert (info["first_visit"], info["coverage"]) == (first, cov)
        assert info["coverage_rate"] == pytest.approx(cov / t)
    assert env.num_steps == 5 and env.coverage == 3 and len(env.visited) == 4
    _, info = env.reset(seed=0)  # a new episode forgets the old states
    assert info["coverage"] == 0 and env.num_steps == 0
    *_, info = env.step(RIGHT)
    assert info["first_visit"] is True


def test_continuous_env_with_discretizing_key():
    key = lambda obs, info: tuple(np.floor(obs / 0.02).astype(int))  # noqa: E731
    env = FirstVisitCoverage(gym.make("MountainCarContinuous-v0"), key_fn=key)
    obs, info = env.reset(seed=3)
    keys = {key(obs, info)}
    rng = np.random.default_rng(0)
    for t in range(1, 40):
        obs, _, _, _, info = env.step(rng.uniform(-1, 1, size=(1,)).astype(np.float32))
        k = key(obs, info)
        assert info["first_visit"] == (k not in keys)
        keys.add(k)
        assert info["coverage"] == len(keys) - 1
        assert info["coverage_rate"] == pytest.approx((len(keys) - 1) / t)
    assert 0 < info["coverage"] < 39  # the car does revisit cells at this resolution


def test_text_env_uses_canonical_obs_when_present():
    plain = FirstVisitCoverage(TextRoomsEnv())
    plain.reset(seed=0)
    start = plain.unwrapped._room
    exit_room = TextRoomsEnv.EXITS[start][0]
    assert plain.step("look")[4]["first_visit"] is False  # same room text
    assert plain.step("inventory")[4]["first_visit"] is True  # feedback text counts without canonicalizer
    assert plain.step(f"go {exit_room}")[4]["first_visit"] is True
    info = plain.step(f"go {start}")[4]
    assert info["first_visit"] is False and info["coverage"] == 2

    # a canonicalizer that ignores feedback lines: "inventory" is no longer a new state
    canon = lambda o, i: o if o.startswith("You are in") else "same-room"  # noqa: E731
    env = FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv(), canonicalizer=canon))
    env.reset(seed=0)
    assert env.step("inventory")[4]["first_visit"] is True  # "same-room" is new once
    assert env.step("inventory")[4]["first_visit"] is False
    const = FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv(), canonicalizer=lambda o, i: "s"))
    const.reset(seed=0)
    assert const.step(f"go {exit_room}")[4]["coverage"] == 0


def test_key_errors_are_clear():
    with pytest.raises(TypeError, match="key_fn must be callable"):
        FirstVisitCoverage(TextRoomsEnv(), key_fn=3)
    env = FirstVisitCoverage(TextRoomsEnv(), key_fn=lambda o, i: [o])
    with pytest.raises(TypeError, match="unhashable list"):
        env.reset(seed=0)


class _ObjectObsEnv(gym.Env):
    observation_space = gym.spaces.Discrete(2)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return object(), {}

    def step(self, action):
        return object(), 0.0, False, False, {}


def test_unhashable_observation_without_canonicalizer():
    with pytest.raises(TypeError, match="key_fn"):
        FirstVisitCoverage(_ObjectObsEnv()).reset()
    env = FirstVisitCoverage(_ObjectObsEnv(), key_fn=lambda o, i: "x")
    assert env.reset()[1]["coverage"] == 0


def test_first_visit_bonus():
    env = FirstVisitBonus(FirstVisitCoverage(gym.make("FrozenLake-v1", is_slippery=False)), coef=0.5)
    env.reset(seed=0)
    _, reward, *_, info = env.step(RIGHT)
    assert reward == 0.5 and info["extrinsic_reward"] == 0.0
    _, reward, *_ = env.step(LEFT)
    assert reward == 0.0
    with pytest.raises(KeyError, match="FirstVisitCoverage"):
        bare = FirstVisitBonus(gym.make("FrozenLake-v1"))
        bare.reset(seed=0)
        bare.step(0)
