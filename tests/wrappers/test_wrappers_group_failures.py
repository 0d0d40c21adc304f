"""GroupVectorEnv failure contract: members never fall out of step, a member
exception truncates only that member, hung steps time out with a default that fits the env."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import cloudpickle
import gymnasium as gym
import numpy as np
import pytest

from progpo_envs.rooms import SleepEnv, TextRoomsEnv
from wrappers import GroupVectorEnv
from wrappers.group import DEFAULT_STEP_TIMEOUT
from wrappers.group.member_pools import UnsentActionError

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # worker processes cannot import this file


class BoomRooms(TextRoomsEnv):
    """TextRoomsEnv whose step raises on the action ``boom``."""

    def step(self, action: str):
        if action == "boom":
            raise ValueError("engine exploded on 'boom'")
        return super().step(action)


class DeclaredTimeout(SleepEnv):
    metadata = {"render_modes": [], "step_timeout": 7.5}


def _go(info_commands) -> str:
    return next(c for c in info_commands if c.startswith("go "))


def test_unpicklable_action_sends_nothing_and_members_stay_in_step():
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=4, backend="async", seed=0)
    try:
        obs, infos = envs.reset()
        go = _go(infos["admissible_commands"][0])
        with pytest.raises(TypeError, match=r"actions\[2\].*picklable.*No member was stepped") as exc:
            envs.step(["look", "look", threading.Lock(), "look"])
        assert isinstance(exc.value, UnsentActionError)
        obs2, _, _, _, infos2 = envs.step([go] * 4)
        room = go[3:]
        assert all(o.startswith(f"You are in the {room}.") for o in obs2), obs2
        assert infos2["step"].tolist() == [1, 1, 1, 1]  # the failed call advanced nobody
        obs3, _, _, _, infos3 = envs.step(["inventory"] * 4)
        assert list(obs3) == ["You carry nothing."] * 4 and infos3["step"].tolist() == [2, 2, 2, 2]
    finally:
        envs.close()


def test_interrupted_step_requires_reset_and_reset_drains_unread_answers():
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=3, backend="async", seed=1)
    try:
        envs.reset()
        pool = envs.pool
        real = pool._receive_raw
        calls = {"n": 0}

        def flaky(i, timeout):
            calls["n"] += 1
            if calls["n"] == 2:
                raise KeyboardInterrupt
            return real(i, timeout)

        pool._receive_raw = flaky
        with pytest.raises(KeyboardInterrupt):
            envs.step(["inventory"] * 3)  # member 0 answered; members 1, 2 left unread
        pool._receive_raw = real
        with pytest.raises(RuntimeError, match="interrupted part-way.*call reset"):
            envs.step(["look"] * 3)
        obs, infos = envs.reset()
        assert infos["step"].tolist() == [0, 0, 0] and obs[0] == obs[1] == obs[2]
        assert all(o.startswith("You are in the") for o in obs)  # not a stale "You carry nothing."
        obs2, _, _, _, infos2 = envs.step(["inventory"] * 3)
        assert infos2["step"].tolist() == [1, 1, 1] and list(obs2) == ["You carry nothing."] * 3
    finally:
        envs.close()


@pytest.mark.parametrize("backend", ["sync", "async"])
def test_member_exception_truncates_that_member_only_and_loses_no_transition(backend):
    envs = GroupVectorEnv(BoomRooms, num_groups=1, group_size=3, backend=backend, seed=2)
    try:
        envs.reset()
        envs.step(["look"] * 3)
        obs, rew, term, trunc, infos = envs.step(["inventory", "boom", "inventory"])
        assert trunc.tolist() == [False, True, False] and not term.any()
        assert "ValueError: engine exploded on 'boom'" in infos["worker_error"][1]
        assert infos["_worker_error"].tolist() == [False, True, False]
        assert not infos["worker_restarted"].any()
        # members 0 and 2 advanced and their transition is here: t = [2, -, 2]
        assert infos["step"][[0, 2]].tolist() == [2, 2] and obs[0] == obs[2] == "You carry nothing."
        assert infos["final_info"]["worker_error"][1].startswith("ValueError")
        assert envs.member_errors == 1
        # member 1 waits; the others play on; when they finish the group resets together
        _, _, _, _, infos = envs.step(["look", None, "look"])
        assert infos["waiting"].tolist() == [False, True, False] and infos["step"][[0, 2]].tolist() == [3, 3]
        for _ in range(30):
            obs, rew, term, trunc, infos = envs.step(["look", None, "look"])
            if "group_outcomes" in infos:
                break
        assert infos["group_outcomes"][0].tolist() == [0.0, 0.0, 0.0] and infos["group_reset"].all()
        _, _, _, _, infos = envs.step(["look"] * 3)  # the failed member plays the next task normally
        assert infos["step"].tolist() == [1, 1, 1] and infos["valid_action"].all()
    finally:
        envs.close()


def test_sync_hung_step_is_interrupted_and_the_env_rebuilt():
    import signal

    assert signal.getsignal(signal.SIGALRM) in (signal.SIG_DFL, signal.SIG_IGN, None), (
        "another SIGALRM handler is installed (pytest-timeout must use timeout_method = thread)"
    )
    kwargs = [{"step_time": 0.0}, {"step_time": 30.0}]
    envs = GroupVectorEnv(SleepEnv, num_groups=1, group_size=2, backend="sync", step_timeout=0.5, env_kwargs=kwargs)
    try:
        envs.reset(seed=0)
        t0 = time.monotonic()
        _, _, _, trunc, infos = envs.step(np.array([0, 0]))
        assert time.monotonic() - t0 < 10
        assert trunc.tolist() == [False, True] and infos["worker_restarted"].tolist() == [False, True]
        assert "did not answer within 0.5 s" in infos["worker_error"][1]
        assert envs.worker_restarts == 1
    finally:
        envs.close()


def test_step_timeout_auto_reads_the_env_and_is_finite_by_default():
    envs = GroupVectorEnv(SleepEnv, num_groups=1, group_size=1)
    assert envs.step_timeout == DEFAULT_STEP_TIMEOUT  # never "wait forever" by default
    envs.close()
    envs = GroupVectorEnv(DeclaredTimeout, num_groups=1, group_size=1)
    assert envs.step_timeout == 7.5
    envs.close()
    envs = GroupVectorEnv(DeclaredTimeout, num_groups=1, group_size=1, step_timeout=None)
    assert envs.step_timeout is None
    envs.close()
    with pytest.raises(ValueError, match="step_timeout"):
        GroupVectorEnv(SleepEnv, num_groups=1, group_size=1, step_timeout=-1)


def test_package_envs_declare_a_step_timeout_that_covers_slow_planner_steps():
    from progpo_envs.webshop.env import WebShopEnv

    assert WebShopEnv.metadata["step_timeout"] >= 30
    import progpo_envs

    module, cls = gym.spec(progpo_envs.ALFWORLD_ID).entry_point.split(":")
    env_cls: Any = getattr(__import__(module, fromlist=[cls]), cls)
    assert env_cls.metadata["step_timeout"] >= 93  # the stock planner has taken 93 s on a real game
