"""GroupVectorEnv: infos whose types differ between members or over time, failed autoresets,
closed envs, and argument checks that must fire before any member moves."""

from __future__ import annotations

import itertools
import sys
import time

import cloudpickle
import numpy as np
import pytest

from progpo_envs.rooms import MIXED_INFO_VALUES, MixedInfoEnv, TextRoomsEnv
from trainers.rollouts.rollout import member_info
from wrappers import GroupVectorEnv
from wrappers.group.member_pools import MemberError

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # worker processes cannot import this file

PERMUTATIONS = list(itertools.permutations(range(len(MIXED_INFO_VALUES))))


def play_mixed(backend: str, orders: list[tuple[int, ...]], group_size: int, **kw) -> None:
    """Every member's ``info["value"]`` comes back as it was emitted, at reset and each step."""
    envs = GroupVectorEnv(
        MixedInfoEnv,
        num_groups=len(orders) // group_size,
        group_size=group_size,
        backend=backend,
        seed=0,
        env_kwargs=[{"order": o} for o in orders],
        **kw,
    )
    try:
        _, infos = envs.reset()
        for t in range(len(orders[0])):
            assert infos["_value"].all()
            for i, order in enumerate(orders):
                assert member_info(infos, i)["value"] == MIXED_INFO_VALUES[order[t]], (t, i)
            if t + 1 < len(orders[0]):
                _, _, term, _, infos = envs.step(np.zeros(envs.num_envs, dtype=np.int64))
                assert not term.any()
        _, _, term, _, infos = envs.step(np.zeros(envs.num_envs, dtype=np.int64))
        assert term.all() and infos["group_reset"].all()
        for i, order in enumerate(orders):  # the final step's value sits in final_info
            assert infos["final_info"]["value"][i] == MIXED_INFO_VALUES[order[0]]
    finally:
        envs.close()


def test_every_order_of_int_none_str_dict_collates_on_sync():
    play_mixed("sync", PERMUTATIONS, group_size=4)


# Each value first at each step (cyclic shifts) and both orders of every neighbour pair (reversed).
SHIFTS = [tuple((k + s) % 4 for k in range(4)) for s in range(4)]
ORDERS_8 = SHIFTS + [tuple(reversed(o)) for o in SHIFTS]


@pytest.mark.slow
def test_mixed_info_types_collate_on_async():
    play_mixed("async", ORDERS_8, group_size=4)


def test_uniform_types_keep_numeric_arrays_and_masks():
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=2, seed=1)
    try:
        _, infos = envs.reset()
        assert infos["task_seed"].dtype == np.int64 and infos["waiting"].dtype == np.bool_
        _, _, _, _, infos = envs.step(["look"] * 4)
        assert infos["step"].dtype.kind == "i" and infos["_step"].all()
    finally:
        envs.close()


def test_ints_and_floats_promote_to_float_and_absent_members_are_masked():
    from wrappers.group.vector_env import _info_array

    a = _info_array([1, 2.5], [0, 2], 3)
    assert a.dtype == np.float64 and a.tolist() == [1.0, 0.0, 2.5]
    b = _info_array([np.zeros(2), np.zeros(3)], [0, 1], 2)  # ragged arrays: objects, kept as they are
    assert b.dtype == object and b[1].shape == (3,)


class FlakyResetRooms(TextRoomsEnv):
    """TextRoomsEnv whose reset raises for the listed task seeds, ``failures`` times each."""

    def __init__(self, bad_seeds: tuple[int, ...] = (), failures: int = 1) -> None:
        super().__init__(max_steps=2)
        self.bad_seeds, self.failures, self.failed = set(bad_seeds), failures, {}

    def reset(self, *, seed=None, options=None):
        if seed in self.bad_seeds and self.failed.get(seed, 0) < self.failures:
            self.failed[seed] = self.failed.get(seed, 0) + 1
            raise OSError(f"game file for seed {seed} is unreadable")
        return super().reset(seed=seed, options=options)


def _second_task_seed(seed: int) -> int:
    from wrappers.group import GroupSeedSchedule

    return GroupSeedSchedule(seed, num_groups=2).seed_for(0, 1)


@pytest.mark.parametrize("backend", ["sync", pytest.param("async", marks=pytest.mark.slow)])
def test_failed_autoreset_keeps_the_step_and_is_retried(backend):
    bad = _second_task_seed(5)
    kwargs = [{"bad_seeds": (bad,), "failures": 1}] + [{}] * 3  # member 0's game file fails to load once
    envs = GroupVectorEnv(FlakyResetRooms, num_groups=2, group_size=2, backend=backend, seed=5, env_kwargs=kwargs)
    try:
        envs.reset()
        envs.step(["look"] * 4)
        obs, rew, term, trunc, infos = envs.step(["look"] * 4)  # max_steps=2: every member truncates now
        assert trunc.all()  # the transitions of both groups are returned
        assert infos["_group_outcomes"].all() and infos["group_all_failed"].all()
        assert infos["final_info"]["step"].tolist() == [2, 2, 2, 2]
        assert infos["group_reset"].tolist() == [False, False, True, True]
        assert infos["worker_error"][0].startswith("reset failed: ") and "unreadable" in infos["worker_error"][0]
        assert infos["_worker_error"].tolist() == [True, True, False, False]
        assert envs.member_errors == 1
        # the next step retries group 0's reset: its actions are ignored, it gets the new first obs
        obs, rew, term, trunc, infos = envs.step(["look"] * 4)
        assert infos["waiting"].tolist() == [True, True, False, False]
        assert infos["group_reset"][:2].all() and infos["task_seed"][:2].tolist() == [bad, bad]
        assert "worker_error" not in infos
        _, _, _, _, infos = envs.step(["look"] * 4)
        assert infos["step"][:2].tolist() == [1, 1]  # group 0 now plays its task
    finally:
        envs.close()


def test_autoreset_that_fails_twice_raises_one_clear_error():
    bad = _second_task_seed(5)
    envs = GroupVectorEnv(
        FlakyResetRooms, num_groups=2, group_size=2, seed=5, env_kwargs={"bad_seeds": (bad,), "failures": 5}
    )
    try:
        envs.reset()
        envs.step(["look"] * 4)
        envs.step(["look"] * 4)
        with pytest.raises(MemberError, match=r"group 0: resetting to its next task failed twice .*unreadable"):
            envs.step(["look"] * 4)
        with pytest.raises(RuntimeError, match="reset"):
            envs.step(["look"] * 4)
    finally:
        envs.close()


class BoomOnLastStep(TextRoomsEnv):
    def step(self, action):
        if action == "boom":
            raise ValueError("engine exploded")
        return super().step(action)


def test_step_exception_that_completes_its_group_reports_worker_error_at_top_level():
    envs = GroupVectorEnv(BoomOnLastStep, num_groups=1, group_size=2, seed=0, env_kwargs={"max_steps": 2})
    try:
        envs.reset()
        envs.step(["look", "look"])
        _, _, _, trunc, infos = envs.step(["look", "boom"])  # member 0 truncates at 2, member 1 raises
        assert trunc.all() and infos["group_reset"].all()
        assert infos["_worker_error"].tolist() == [False, True]
        assert infos["worker_error"][1].startswith("ValueError: engine exploded")
        assert infos["final_info"]["worker_error"][1].startswith("ValueError")
    finally:
        envs.close()


@pytest.mark.slow
def test_async_after_close_raises_and_starts_no_worker():
    import psutil

    envs = GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2, backend="async", seed=0)
    envs.reset()
    pids = [p for p in envs.worker_pids if p is not None]
    envs.close()
    for call in (lambda: envs.step(["look", "look"]), lambda: envs.reset()):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    children = psutil.Process().children(recursive=True)
    assert not [c for c in children if c.name().startswith("python") and "GroupVectorEnv" in " ".join(c.cmdline())]
    time.sleep(0.2)
    assert not [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    envs.close()  # a second close is a no-op


def test_sync_after_close_raises():
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2, seed=0)
    envs.reset()
    envs.close()
    with pytest.raises(RuntimeError, match="closed"):
        envs.step(["look", "look"])


def test_per_group_seed_beyond_int64_is_refused_before_any_member_moves():
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=1, seed=0)
    try:
        with pytest.raises(ValueError, match=r"2\*\*63 - 1"):
            envs.reset(seed=[1, 2**63])
        obs, infos = envs.reset(seed=[1, 2**63 - 1])
        assert infos["task_seed"].tolist() == [1, 2**63 - 1]
    finally:
        envs.close()


def test_bytes_or_str_as_the_whole_action_batch_is_refused():
    from progpo_envs.rooms import SleepEnv

    envs = GroupVectorEnv(SleepEnv, num_groups=1, group_size=2, seed=0, env_kwargs={"step_time": 0.0})
    try:
        envs.reset()
        with pytest.raises(TypeError, match="bytes"):
            envs.step(b"\x01\x00")
        obs, *_ = envs.step(np.array([1, 0]))  # nothing moved before: the first real step is t = 1
        assert np.allclose(obs[:, 0], 0.2)
    finally:
        envs.close()
