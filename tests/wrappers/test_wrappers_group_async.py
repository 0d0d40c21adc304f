"""GroupVectorEnv, multiprocess backend: parity with sync, worker crash recovery, errors."""

from __future__ import annotations

import functools
import os
import signal

import numpy as np
import pytest

from progpo_envs.rooms import SleepEnv, TextRoomsEnv
from wrappers import GroupVectorEnv
from wrappers.group.member_pools import MemberError


def _run(backend, steps=7):
    kwargs = [{"step_time": 0.0, "episode_length": n} for n in (2, 3, 1, 2)]
    envs = GroupVectorEnv(SleepEnv, num_groups=2, group_size=2, backend=backend, seed=9, env_kwargs=kwargs)
    rng = np.random.default_rng(0)
    trace = [envs.reset()[0]]
    for _ in range(steps):
        obs, rew, term, trunc, infos = envs.step(rng.integers(0, 2, size=4))
        trace += [obs, rew, term, trunc, infos["waiting"], infos.get("group_outcomes", np.zeros((4, 2)))]
    envs.close()
    return trace


def test_async_matches_sync():
    for a, b in zip(_run("sync"), _run("async")):
        np.testing.assert_array_equal(a, b)


def test_killed_worker_is_restarted_and_only_its_episode_is_truncated(kill_member_1):
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=2, backend="async", seed=4)
    try:
        obs, obs2, infos, pids = kill_member_1(envs)
        new_pids = envs.worker_pids
        assert new_pids[1] != pids[1] and new_pids[0] == pids[0] and new_pids[2:] == pids[2:]
        # member 1 waits; member 0 finishes by winning -> group 0 completes with outcomes [1, 0]
        room, key_room = infos["task_id"][0].split("->")
        if room != key_room:
            for nxt in _path(TextRoomsEnv.EXITS, room, key_room):
                _, _, _, _, infos = envs.step([f"go {nxt}", None, "look", "look"])
                assert infos["waiting"].tolist() == [False, True, False, False]
        obs3, rew, term, trunc, infos = envs.step(["take key", None, "look", "look"])
        assert rew[0] == 1.0 and term[0]
        assert infos["group_outcomes"][0].tolist() == [1.0, 0.0] and not infos["group_all_failed"][0]
        assert infos["group_reset"][:2].all() and obs3[0] == obs3[1]  # restarted member joins the next task
        assert infos["task_seed"][0] == infos["task_seed"][1]
    finally:
        envs.close()


def _path(exits, start, goal):
    frontier, parent = [start], {start: None}
    while frontier:
        room = frontier.pop(0)
        for nxt in exits[room]:
            if nxt not in parent:
                parent[nxt] = room
                frontier.append(nxt)
    path, room = [], goal
    while room != start:
        path.append(room)
        room = parent[room]
    return path[::-1]


def test_worker_killed_while_waiting_is_restarted_at_group_reset():
    kwargs = [{"step_time": 0.0, "episode_length": n} for n in (1, 3)]
    envs = GroupVectorEnv(SleepEnv, num_groups=1, group_size=2, backend="async", seed=0, env_kwargs=kwargs)
    try:
        envs.reset()
        envs.step(np.array([1, 0]))  # member 0 done, waiting
        os.kill(envs.worker_pids[0], signal.SIGKILL)
        envs.step(np.array([0, 0]))
        obs, _, term, _, infos = envs.step(np.array([0, 1]))
        assert term[1] and infos["group_outcomes"][0].tolist() == [1.0, 1.0]
        assert infos["worker_restarted"].tolist() == [True, False]
        assert obs[0, 1] == obs[1, 1] and obs[0, 0] == 0.0
    finally:
        envs.close()


def test_hung_worker_times_out_and_is_restarted():
    kwargs = [{"step_time": 0.0}, {"step_time": 5.0}]
    envs = GroupVectorEnv(SleepEnv, num_groups=1, group_size=2, backend="async", step_timeout=0.5, env_kwargs=kwargs)
    try:
        envs.reset(seed=0)
        _, _, _, trunc, infos = envs.step(np.array([0, 0]))
        assert trunc.tolist() == [False, True] and infos["worker_restarted"][1]
        assert "did not answer" in infos["worker_error"][1]
    finally:
        envs.close()


def test_errors_inside_workers_are_reported_with_their_traceback():
    with pytest.raises(MemberError, match="(?s)env_fns_or_id: creating member 0 failed.*episode_length must be >= 1"):
        GroupVectorEnv(functools.partial(SleepEnv, 0.0, 0), num_groups=1, group_size=1, backend="async")
    envs = GroupVectorEnv(SleepEnv, num_groups=1, group_size=2, backend="async", env_kwargs={"step_time": 0.0})
    try:
        envs.reset(seed=0)
        _, _, _, trunc, infos = envs.step(["not-an-int", "1"])  # a member's exception truncates that member only
        assert trunc.tolist() == [True, False] and infos["worker_error"][0].startswith("ValueError")
    finally:
        envs.close()


def test_env_id_works_in_workers():
    envs = GroupVectorEnv(
        "FrozenLake-v1", num_groups=1, group_size=2, backend="async", seed=0, env_kwargs={"is_slippery": False}
    )
    try:
        envs.reset()
        assert envs.step(np.array([2, 1]))[0].tolist() == [1, 4]
    finally:
        envs.close()
