"""FirstVisitCoverage on a discrete, a continuous and a text env."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from progpo_envs.rooms import TextRoomsEnv
from wrappers import CanonicalizeObservation, FirstVisitBonus, FirstVisitCoverage, identity_canonicalizer

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
    fresh = FirstVisitCoverage(gym.make("FrozenLake-v1", is_slippery=False))
    assert (fresh.coverage, fresh.num_steps, fresh.visited) == (0, 0, frozenset())  # before any reset: nothing reached
    _, info = env.reset(seed=0)  # a new episode forgets the old states
    assert info["coverage"] == 0 and env.num_steps == 0
    *_, info = env.step(RIGHT)
    assert info["first_visit"] is True


def test_continuous_env_with_discretizing_key():
    key = lambda obs, info: tuple(np.floor(obs / 0.02).astype(int))  # noqa: E731 - a one-line callable, read where it is passed
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
    canon = lambda o, i: o if o.startswith("You are in") else "same-room"  # noqa: E731 - a one-line callable, read where it is passed
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


class _FlagEnv(gym.Env):
    """Scripted text env: the action is ``(observation, valid)``; info reports ``valid_action``."""

    observation_space = gym.spaces.Text(64)
    action_space = gym.spaces.Text(64)

    def reset(self, *, seed=None, options=None):
        return "start", {"valid_action": True}

    def step(self, action):
        obs, valid = action
        return obs, 0.0, False, False, {"valid_action": valid}


class _SelfCanonEnv(_FlagEnv):
    def reset(self, *, seed=None, options=None):
        return "start", {"valid_action": True, "canonical_obs": "s:start"}

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        return obs, reward, term, trunc, {**info, "canonical_obs": f"s:{obs}"}


def test_rejected_actions_are_never_first_visits_on_the_toy_env():
    env = FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv()))
    _, info = env.reset(seed=0)
    start = info["canonical_obs"]
    room = env.unwrapped._room
    for bad in ("dance", "fly", "open the portal", "", "dance"):  # each new feedback text... still no
        obs, _, _, _, info = env.step(bad)
        assert obs == "Nothing happens." and info["valid_action"] is False
        assert (info["first_visit"], info["coverage"], info["canonical_obs"]) == (False, 0, start)
    *_, info = env.step(f"go {TextRoomsEnv.EXITS[room][0]}")
    assert info["first_visit"] is True and info["coverage"] == 1
    here = info["canonical_obs"]
    *_, info = env.step("dance")  # the first failure in a new room is not new either
    assert (info["first_visit"], info["coverage"], info["canonical_obs"]) == (False, 1, here)
    assert info["coverage_rate"] == pytest.approx(1 / 7)  # rejected steps still count in T
    assert env.visited == frozenset({start, here})


def test_rejected_step_keeps_the_state_even_with_new_text_and_any_key_source():
    # without a canonicalizer (default key = raw text) and with key_fn: same rule
    for env in (FirstVisitCoverage(_FlagEnv()), FirstVisitCoverage(_FlagEnv(), key_fn=lambda o, i: o.upper())):
        env.reset()
        info = env.step(("error: unknown verb", False))[4]
        assert info["first_visit"] is False and info["coverage"] == 0 and "canonical_obs" not in info
        assert env.step(("room a", True))[4]["first_visit"] is True
        assert env.step(("another error", False))[4]["first_visit"] is False
        assert env.step(("error: unknown verb", True))[4]["first_visit"] is True  # valid: a real state
        assert env.coverage == 2 and env.num_steps == 4
    # a canonical_obs written by the env itself (no CanonicalizeObservation) is put back too
    tagged = FirstVisitCoverage(_SelfCanonEnv())
    assert tagged.reset()[1]["canonical_obs"] == "s:start"
    info = tagged.step(("boom", False))[4]
    assert info["canonical_obs"] == "s:start" and info["first_visit"] is False
    assert tagged.step(("hall", True))[4]["canonical_obs"] == "s:hall"
    envs_without_flag = FirstVisitCoverage(gym.make("FrozenLake-v1", is_slippery=False))
    envs_without_flag.reset(seed=0)
    assert envs_without_flag.step(RIGHT)[4]["first_visit"] is True  # no valid_action: unaffected


def test_canonicalize_observation_keeps_previous_key_on_rejected_step():
    calls = []

    def canon(obs, info):
        calls.append(obs)
        return obs

    env = CanonicalizeObservation(_FlagEnv(), canonicalizer=canon)
    assert env.reset()[1]["canonical_obs"] == "start"
    assert env.step(("oops", False))[4]["canonical_obs"] == "start"
    assert env.step(("hall", True))[4]["canonical_obs"] == "hall"
    assert env.step(("oops", False))[4]["canonical_obs"] == "hall"
    assert calls == ["start", "hall"]  # not called on rejected steps
    env.reset()
    assert env.step(("oops", False))[4]["canonical_obs"] == "start"  # reset forgets the old episode


# ------------------------------------------------------------------ the two signals, at their edges
def test_coverage_rate_scalars_arrays_and_no_step():
    from wrappers.signals import coverage_rate

    assert coverage_rate(3, 6) == 0.5 and isinstance(coverage_rate(3, 6), float)
    assert coverage_rate(0, 0) == 0.0 and coverage_rate(2, 0) == 2.0  # T = 0: divided by 1, not by 0
    assert coverage_rate(1, 1) == 1.0 and coverage_rate(1, 4) == 0.25
    np.testing.assert_array_equal(coverage_rate(np.array([1, 2, 0]), np.array([2, 8, 0])), [0.5, 0.25, 0.0])
    assert coverage_rate(np.array([1]), np.array([2])).shape == (1,)


def test_all_failed_is_strictly_below_tau_r_for_one_group_and_for_many():
    from wrappers.signals import TAU_R, all_failed, all_failed_groups

    assert all_failed([0.0, 0.0]) is True and all_failed([0.0, TAU_R]) is False  # at tau_R: a signal
    assert all_failed([0.0, TAU_R * 0.999]) is True and all_failed([-1.0, -0.5]) is True
    assert all_failed([0.2, 0.3], tau_r=0.5) is True and all_failed([0.2, 0.5], tau_r=0.5) is False
    outcomes = np.array([0.0, TAU_R, 0.0, 0.0, -1.0, 0.9, 0.5])
    groups = np.array([0, 0, 1, 1, 2, 3, 3])
    np.testing.assert_array_equal(all_failed_groups(outcomes, groups, 5), [False, True, True, False, True])
    np.testing.assert_array_equal(all_failed_groups(outcomes, groups, 4, tau_r=0.6), [True, True, True, False])
    assert all_failed_groups(outcomes, groups, 5).dtype == bool  # group 4 has no member: no signal, all failed


class _OptionsEnv(gym.Env):
    """Records the reset options it got; its observation is the step count, its info names a room."""

    observation_space = gym.spaces.Discrete(10)
    action_space = gym.spaces.Discrete(2)

    def __init__(self) -> None:
        self.options_seen: list = []
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.options_seen.append(options)
        self.t = 0
        return 0, {"room": "hall"}

    def step(self, action):
        self.t += 1
        return self.t, 0.0, False, False, {"room": "hall" if action == 0 else "kitchen"}


def test_the_wrappers_pass_reset_options_and_record_their_arguments():
    from wrappers import CanonicalizeObservation, FirstVisitBonus

    key = lambda obs, info: info["room"]  # noqa: E731 - a key read from info
    for make in (
        lambda e: FirstVisitCoverage(e, key_fn=key),
        lambda e: CanonicalizeObservation(e),
        lambda e: FirstVisitBonus(FirstVisitCoverage(e), coef=0.5),
    ):
        base = _OptionsEnv()
        env = make(base)
        env.reset(seed=0, options={"task": 3})
        assert base.options_seen == [{"task": 3}]
    env = FirstVisitCoverage(_OptionsEnv(), key_fn=key)
    assert env._saved_kwargs == {"key_fn": key}  # gymnasium re-creates a wrapper from these
    assert FirstVisitBonus(FirstVisitCoverage(_OptionsEnv()), coef=0.5)._saved_kwargs == {"coef": 0.5}
    canon = lambda obs, info: str(obs)  # noqa: E731 - a one-line callable, read where it is passed
    assert CanonicalizeObservation(_OptionsEnv(), canonicalizer=canon)._saved_kwargs == {"canonicalizer": canon}


def test_a_key_read_from_info_decides_the_first_visits():
    env = FirstVisitCoverage(_OptionsEnv(), key_fn=lambda obs, info: info["room"])
    _, info = env.reset(seed=0)
    assert info["coverage"] == 0
    visits = [env.step(a)[4]["first_visit"] for a in (0, 1, 0, 1)]
    assert visits == [False, True, False, False]  # the hall again, then the kitchen once
    assert env.step(1)[4]["coverage"] == 1 and env.reset(seed=1)[1]["coverage"] == 0  # reset forgets


def test_bad_key_and_canonicalizer_arguments_name_their_type():
    from wrappers import CanonicalizeObservation

    with pytest.raises(TypeError, match="key_fn must be callable .* got int"):
        FirstVisitCoverage(_OptionsEnv(), key_fn=5)
    with pytest.raises(TypeError, match="canonicalizer must be a callable .* got str"):
        CanonicalizeObservation(_OptionsEnv(), canonicalizer="sha1")
    with pytest.raises(TypeError, match="identity_canonicalizer needs str observations, got int"):
        CanonicalizeObservation(_OptionsEnv(), canonicalizer=identity_canonicalizer).reset(seed=0)


class _RejectingEnv(gym.Env):
    """Rejects action 1 (``valid_action`` False) and reports no ``canonical_obs``."""

    observation_space = gym.spaces.Discrete(10)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return 0, {"valid_action": True}

    def step(self, action):
        if action == 1:
            return self.t, 0.0, False, False, {"valid_action": False}
        self.t += 1
        return self.t, 0.0, False, False, {"valid_action": True}


def test_a_rejected_step_adds_no_canonical_obs_an_env_never_gave():
    env = FirstVisitCoverage(_RejectingEnv())
    env.reset(seed=0)
    *_, info = env.step(0)
    *_, rejected = env.step(1)
    assert "canonical_obs" not in rejected and rejected["first_visit"] is False and rejected["coverage"] == 1
    assert env.num_steps == 2 and len(env.visited) == 2
