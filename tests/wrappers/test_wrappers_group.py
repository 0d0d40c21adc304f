"""GroupVectorEnv, synchronous backend: shared tasks, waiting, group flags, seeds, bad input."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st

from progpo_envs.rooms import SleepEnv, TextRoomsEnv
from wrappers import FirstVisitCoverage, GroupSeedSchedule, GroupVectorEnv


def sleep_envs(lengths, **kw):
    """Group env of SleepEnv members with the given episode lengths (no sleeping)."""
    kwargs = [{"step_time": 0.0, "episode_length": n} for n in lengths]
    return GroupVectorEnv(SleepEnv, env_kwargs=kwargs, **kw)


def test_members_of_a_group_share_the_task():
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=3, group_size=4, seed=1)
    assert isinstance(envs, VectorEnv) and envs.num_envs == 12
    assert envs.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, infos = envs.reset()
    assert isinstance(obs, tuple) and all(isinstance(o, str) for o in obs)
    for g in range(3):
        members = slice(4 * g, 4 * g + 4)
        assert len(set(obs[members])) == 1
        assert len(set(infos["task_id"][members])) == 1
        assert len(set(infos["task_seed"][members])) == 1
    assert len(set(infos["task_seed"])) == 3
    assert infos["group_id"].tolist() == [0] * 4 + [1] * 4 + [2] * 4
    assert envs.single_observation_space == TextRoomsEnv().observation_space


def test_waiting_then_group_completion_and_same_step_reset():
    envs = sleep_envs([2, 3, 1, 1], num_groups=2, group_size=2, seed=0)
    obs, infos = envs.reset()
    first_tasks = obs[:, 1].copy()
    # step 1: group 1 (lengths 1, 1) finishes at once: member 2 succeeds, member 3 fails
    obs, rew, term, trunc, infos = envs.step(np.array([0, 0, 1, 0]))
    assert term.tolist() == [False, False, True, True] and not trunc.any()
    assert rew.tolist() == [0.0, 0.0, 1.0, 0.0]
    assert infos["_group_outcomes"].tolist() == [False, False, True, True]
    assert infos["group_outcomes"][2].tolist() == [1.0, 0.0]
    assert infos["group_all_failed"][2] == np.False_
    assert infos["group_reset"][2] and obs[2, 0] == 0.0 and obs[2, 1] == obs[3, 1] != first_tasks[2]
    assert infos["final_obs"][2][0] == 1.0  # the real last observation
    assert infos["final_info"]["task"][2] == pytest.approx(first_tasks[2])
    # step 2: member 0 ends (fails) and starts waiting
    obs, rew, term, trunc, infos = envs.step(np.array([0, 1, 0, 0]))
    assert term.tolist() == [True, False, True, True]
    assert obs[0, 0] == 1.0 and infos["final_obs"][0][0] == 1.0
    assert not infos["_group_outcomes"][:2].any()
    # step 3: member 0 waits (action ignored, reward 0, final obs kept); member 1 ends -> group 0 completes
    obs, rew, term, trunc, infos = envs.step(np.array([1, 1, 1, 1]))
    assert infos["waiting"].tolist() == [True, False, False, False]
    assert rew[0] == 0.0 and not term[0] and not trunc[0]
    assert term[1] and rew[1] == 1.0
    assert infos["group_outcomes"][0].tolist() == [0.0, 1.0] == infos["group_outcomes"][1].tolist()
    assert infos["group_id"][:2].tolist() == [0, 0]
    assert obs[0, 1] == obs[1, 1] != first_tasks[0] and obs[0, 0] == obs[1, 0] == 0.0
    assert envs.episode_index.tolist() == [1, 3]


def test_autoreset_false_holds_a_finished_group_until_reset():
    envs = sleep_envs([1, 1, 2, 3], num_groups=2, group_size=2, seed=0, autoreset=False)
    assert envs.metadata["group_autoreset"] == "hold"
    obs, infos = envs.reset()
    tasks = obs[:, 1].copy()
    # step 1: group 0 finishes; its flags come, but no reset: the final obs stays in obs
    obs, rew, term, trunc, infos = envs.step(np.array([1, 0, 0, 0]))
    assert term[:2].all() and infos["group_outcomes"][0].tolist() == [1.0, 0.0]
    assert not infos["group_reset"][0] and "worker_error" not in infos
    assert obs[0, 0] == 1.0 and obs[0, 1] == tasks[0]
    # later steps: group 0 waits on its final obs (no new task drawn) while group 1 plays on
    for _ in range(3):
        obs, rew, term, trunc, infos = envs.step(np.array([1, 1, 0, 0]))
        assert infos["waiting"][:2].all() and rew[:2].tolist() == [0.0, 0.0] and not term[:2].any()
        assert obs[0, 1] == obs[1, 1] == tasks[0]
    assert envs.episode_index.tolist() == [0, 0]
    assert infos["waiting"].all()  # group 1 finished and is held too
    obs, infos = envs.reset()
    assert envs.episode_index.tolist() == [1, 1] and not infos["waiting"].any()
    with pytest.raises(TypeError, match="autoreset"):
        sleep_envs([1, 1], num_groups=1, group_size=2, autoreset="no")


def test_all_failed_flag_and_outcome_from_info():
    envs = sleep_envs([1, 1], num_groups=1, group_size=2, seed=0, tau_r=0.5)
    envs.reset()
    infos = envs.step(np.array([0, 0]))[4]
    assert infos["group_all_failed"].tolist() == [True, True]

    class Outcome(gym.Wrapper):  # the env reports a graded outcome that differs from the reward
        def step(self, action):
            obs, r, te, tr, info = self.env.step(action)
            return obs, r, te, tr, {**info, "outcome": 0.25} if te else info

    envs = GroupVectorEnv(lambda: Outcome(SleepEnv(0.0, 1)), num_groups=1, group_size=2, tau_r=0.3)
    envs.reset(seed=0)
    infos = envs.step(np.array([1, 1]))[4]
    assert infos["group_outcomes"][0].tolist() == [0.25, 0.25] and infos["group_all_failed"].all()


def test_schedule_is_deterministic_whatever_the_finishing_order():
    def task_seeds(actions_seed, lengths):
        envs = sleep_envs(lengths, num_groups=2, group_size=2, seed=42)
        _, infos = envs.reset()
        seen = [infos["task_seed"].tolist()]
        rng = np.random.default_rng(actions_seed)
        for _ in range(12):
            infos = envs.step(rng.integers(0, 2, size=4))[4]
            if "task_seed" in infos:
                seen.append([int(s) if m else None for s, m in zip(infos["task_seed"], infos["_task_seed"])])
        return envs.episode_index.tolist(), [s for row in seen for s in row if s is not None]

    idx_a, a = task_seeds(0, [1, 2, 3, 3])
    idx_b, b = task_seeds(1, [3, 3, 1, 2])
    schedule = GroupSeedSchedule(42, num_groups=2)
    for idx, seeds in ((idx_a, a), (idx_b, b)):
        expected = {schedule.seed_for(g, k) for g in range(2) for k in range(idx[g] + 1)}
        assert set(seeds) == expected
    assert schedule.seed_for(0, 1) != schedule.seed_for(0, 0)


def test_reset_seeds_int_per_group_per_member_and_inconsistent():
    envs = GroupVectorEnv(SleepEnv, num_groups=2, group_size=2, env_kwargs={"step_time": 0.0})
    obs_a, _ = envs.reset(seed=5)
    obs_b, _ = GroupVectorEnv(SleepEnv, num_groups=2, group_size=2, seed=5, env_kwargs={"step_time": 0.0}).reset()
    np.testing.assert_array_equal(obs_a, obs_b)
    _, infos = envs.reset()  # no seed: every group moves on to its next task
    assert envs.episode_index.tolist() == [1, 1] and infos["task_seed"][0] == GroupSeedSchedule(5, 2).seed_for(0, 1)
    _, infos = envs.reset(seed=[11, 12])
    assert infos["task_seed"].tolist() == [11, 11, 12, 12]
    _, infos = envs.reset(seed=[7, 7, 8, 8])
    assert infos["task_seed"].tolist() == [7, 7, 8, 8]
    with pytest.raises(ValueError, match=r"seed: members \[0, 1\] of group 0 got different seeds"):
        envs.reset(seed=[7, 8, 9, 9])
    with pytest.raises(ValueError, match="seed: a list needs one seed per group"):
        envs.reset(seed=[1, 2, 3])
    with pytest.raises(ValueError, match="seed"):
        envs.reset(seed=-1)


class _OptionsEcho(gym.Env):
    observation_space = gym.spaces.Discrete(100)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return int(self.np_random.integers(100)), {"level": (options or {}).get("level", -1)}

    def step(self, action):
        return 0, 0.0, True, False, {}


def test_options_reach_every_member_and_per_group():
    envs = GroupVectorEnv(_OptionsEcho, num_groups=2, group_size=3, seed=0)
    assert envs.reset(options={"level": 4})[1]["level"].tolist() == [4] * 6
    assert envs.reset(options=[{"level": 1}, {"level": 2}])[1]["level"].tolist() == [1, 1, 1, 2, 2, 2]
    infos = envs.step(np.zeros(6, dtype=int))[4]  # autoreset: no options
    assert infos["level"].tolist() == [-1] * 6
    with pytest.raises(ValueError, match="options"):
        envs.reset(options=[{"level": 1}])


def test_env_id_and_kwargs_and_wrappers_inside():
    envs = GroupVectorEnv("FrozenLake-v1", num_groups=1, group_size=2, env_kwargs={"is_slippery": False}, seed=0)
    assert envs.spec.id == "FrozenLake-v1"
    envs.reset()
    assert envs.step(np.array([2, 1]))[0].tolist() == [1, 4]
    covered = GroupVectorEnv(lambda: FirstVisitCoverage(TextRoomsEnv()), num_groups=1, group_size=2, seed=0)
    covered.reset()
    infos = covered.step(["look", "inventory"])[4]
    assert infos["first_visit"].tolist() == [False, True]


def test_bad_arguments_name_the_argument():
    with pytest.raises(ValueError, match="env_fns_or_id: unknown environment id 'NoSuchEnv-v9'"):
        GroupVectorEnv("NoSuchEnv-v9", num_groups=1, group_size=2)
    with pytest.raises(ValueError, match="group_size must be an int >= 1"):
        GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=0)
    with pytest.raises(ValueError, match="num_groups must be an int >= 1"):
        GroupVectorEnv(TextRoomsEnv, num_groups=0, group_size=2)
    with pytest.raises(ValueError, match="backend must be"):
        GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2, backend="threads")
    with pytest.raises(ValueError, match="env_fns_or_id: a list must hold one env factory per member"):
        GroupVectorEnv([TextRoomsEnv] * 3, num_groups=2, group_size=2)
    with pytest.raises(TypeError, match="env_fns_or_id must be"):
        GroupVectorEnv(42, num_groups=1, group_size=2)
    with pytest.raises(ValueError, match="env_kwargs: a list must hold one dict per member"):
        GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2, env_kwargs=[{}])
    with pytest.raises(ValueError, match="tau_r"):
        GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2, tau_r=float("nan"))
    with pytest.raises(ValueError, match="env_fns_or_id: member 1 has observation/action spaces"):
        GroupVectorEnv([TextRoomsEnv, functools.partial(SleepEnv, 0.0)], num_groups=1, group_size=2)
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2)
    with pytest.raises(RuntimeError, match="before reset"):
        envs.step(["look", "look"])
    envs.reset(seed=0)
    with pytest.raises(ValueError, match="actions: expected 2 actions"):
        envs.step(["look"])


def test_group_size_one_is_a_plain_vector_env():
    envs = sleep_envs([1, 1], num_groups=2, group_size=1, seed=3)
    envs.reset()
    infos = envs.step(np.array([1, 0]))[4]
    assert infos["group_all_failed"].tolist() == [False, True]
    assert infos["group_outcomes"].tolist() == [[1.0], [0.0]]


def test_info_layout_matches_gymnasium_add_info():
    envs = GroupVectorEnv(SleepEnv, num_groups=2, group_size=2, env_kwargs={"step_time": 0.0})
    per_member = [
        {"a": 1, "s": "x", "arr": np.ones(2), "final_obs": np.zeros(2), "final_info": {"t": 0.5, "q": [1]}},
        {"b": True, "a": 3},
        {},
        {"s": "y", "final_info": {"t": 1.5}, "np": np.float32(2)},
    ]
    reference: dict = {}
    for i, info in enumerate(per_member):
        reference = envs._add_info(reference, info, i)

    def same(a, b):
        assert set(a) == set(b)
        for key in a:
            if isinstance(a[key], dict):
                same(a[key], b[key])
            else:
                assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape, key
                for x, y in zip(a[key], b[key]):
                    assert np.array_equal(np.asarray(x, dtype=object), np.asarray(y, dtype=object)), key

    same(envs._collect_infos(per_member), reference)


@settings(max_examples=40, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 4), min_size=6, max_size=6),
    group_size=st.sampled_from([1, 2, 3]),
    action_seed=st.integers(0, 2**16),
)
def test_group_invariants_under_random_play(lengths, group_size, action_seed):
    """Shared task seeds, waiting no-ops, flags exactly at completion, outcomes = final rewards."""
    num_groups = 6 // group_size
    envs = sleep_envs(lengths, num_groups=num_groups, group_size=group_size, seed=action_seed)
    obs, infos = envs.reset()
    rng = np.random.default_rng(action_seed)
    done = np.zeros(6, dtype=bool)
    final_reward = np.zeros(6)
    for _ in range(10):
        obs, rew, term, trunc, infos = envs.step(rng.integers(0, 2, size=6))
        assert (infos["waiting"] == done).all()
        assert (rew[done] == 0).all() and not (term[done] | trunc[done]).any()
        newly = (term | trunc) & ~done
        final_reward[newly] = rew[newly]
        done |= newly
        completed = infos.get("_group_outcomes", np.zeros(6, dtype=bool))
        for g in range(num_groups):
            members = slice(g * group_size, (g + 1) * group_size)
            assert completed[members].all() == done[members].all() == completed[members].any()
            if completed[members].all():
                assert (infos["group_outcomes"][members] == final_reward[members]).all()
                assert infos["group_all_failed"][members].all() == (final_reward[members].max() < 1e-3)
                assert len(set(infos["task_seed"][members])) == 1 and (obs[members, 0] == 0).all()
                assert len({float(x) for x in obs[members, 1]}) == 1  # one shared task after the reset
                done[members] = False


def test_members_driven_one_by_one_replay_a_branch_and_leave_the_schedule_alone():
    """reset_members / step_members / fork: what a tree rollout uses instead of the member pool;
    the vector env then refuses step() until reset(), and reset() plays the schedule as before."""
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=1, group_size=2, seed=3)
    try:
        envs.reset()
        ((obs0, info0),) = envs.reset_members([1], [11])
        played = envs.step_members([1], ["look"])[0]
        assert isinstance(played, tuple) and len(played) == 5
        (obs, info), results = envs.fork(0, 11, None, ["look", "inventory"])
        assert obs == obs0 and [r[0] for r in results] == [played[0], "You carry nothing."]  # the same task, replayed
        with pytest.raises(RuntimeError, match="reset"):
            envs.step(["look", "look"])
        again, _ = envs.reset()
        assert again[0] == again[1]  # the group plays one task again
        _, _, _, _, infos = envs.step(["look", "look"])
        assert not infos["waiting"].any()
    finally:
        envs.close()
