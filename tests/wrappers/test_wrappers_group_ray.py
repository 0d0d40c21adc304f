"""GroupVectorEnv(backend="ray"): same rollouts as sync/async, fault handling, 2 nodes.

Every test here shares one 2-node Ray cluster on loopback (``LoopbackRayCluster`` of
``benchmarks/ray_cluster.py``: two ``ray start --block`` nodes of 1 CPU on 127.0.0.2, each in its own
process group, ended by group id, never ``ray stop``). Starting it costs ~20 s on 2 cores, hence
``slow`` and one cluster for the module.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="extra [ray] not installed")

from wrappers import GroupVectorEnv
from wrappers.group.member_pools import MemberError, UnsentActionError

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the test-cluster launcher
from ray_cluster import LoopbackRayCluster

from progpo_envs.rooms import SleepEnv, TextRoomsEnv

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def cluster():
    env = dict(
        os.environ,
        PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        OMP_NUM_THREADS="1",
    )
    c = LoopbackRayCluster(num_nodes=2, num_cpus=1, env=env)
    try:
        c.start()
        c.connect(log_to_driver=False)
        yield c
    finally:
        if ray.is_initialized():
            ray.shutdown()
        c.stop()


def _trace(backend, steps=7, **kw):
    kwargs = [{"step_time": 0.0, "episode_length": n} for n in (2, 3, 1, 2)]
    envs = GroupVectorEnv(SleepEnv, num_groups=2, group_size=2, backend=backend, seed=9, env_kwargs=kwargs, **kw)
    rng = np.random.default_rng(0)
    try:
        trace = [envs.reset()[0]]
        for _ in range(steps):
            obs, rew, term, trunc, infos = envs.step(rng.integers(0, 2, size=4))
            trace += [
                obs,
                rew,
                term,
                trunc,
                infos["waiting"],
                infos.get("group_outcomes", np.zeros((4, 2))),
                infos.get("task_seed", np.zeros(4)),
            ]
    finally:
        envs.close()
    return trace


def _rooms(backend, **kw):
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=2, backend=backend, seed=3, **kw)
    out = []
    try:
        obs, infos = envs.reset()
        out.append((list(obs), infos["task_id"].tolist()))
        for _ in range(6):  # each member walks its own way: first/last exit alternately
            cmds = [
                infos["admissible_commands"][i][(i + len(out)) % len(infos["admissible_commands"][i])] for i in range(4)
            ]
            obs, rew, term, trunc, infos = envs.step(cmds)
            out.append((list(obs), rew.tolist(), term.tolist(), trunc.tolist(), infos["waiting"].tolist()))
    finally:
        envs.close()
    return out


@pytest.mark.slow
def test_sync_async_ray_give_identical_rollouts(cluster):
    reference = _trace("sync")
    for other in (_trace("async"), _trace("ray", num_cpus=0.5), _trace("ray", num_cpus=0.5, members_per_actor=2)):
        for a, b in zip(reference, other, strict=True):
            np.testing.assert_array_equal(a, b)
    assert _rooms("sync") == _rooms("ray", num_cpus=0.25) == _rooms("async")


@pytest.mark.slow
def test_killed_actor_truncates_only_its_member_and_is_restarted(cluster, kill_member_1):
    envs = GroupVectorEnv(TextRoomsEnv, num_groups=2, group_size=2, backend="ray", num_cpus=0.5, seed=4)
    try:
        obs, obs2, infos, pids = kill_member_1(envs)
        assert "worker exited" in infos["worker_error"][1]
        assert envs.worker_pids[1] != pids[1] and envs.worker_restarts == 1
        # member 1 waits; its group finishes when member 0 does, then both play the next task
        for _ in range(20):
            obs3, _, term, trunc, infos = envs.step(["look", None, "look", "look"])
            if "group_outcomes" in infos and infos["_group_outcomes"][0]:
                break
        assert infos["group_outcomes"][0].tolist() == [0.0, 0.0] and infos["group_reset"][0] and obs3[0] == obs3[1]
    finally:
        envs.close()


@pytest.mark.slow
def test_pack_actor_killed_or_hung_truncates_its_members_only_once(cluster):
    envs = GroupVectorEnv(
        SleepEnv,
        num_groups=1,
        group_size=4,
        backend="ray",
        num_cpus=0.5,
        members_per_actor=2,
        env_kwargs=[{"step_time": 0.0}] * 3 + [{"step_time": 30.0}],
        step_timeout=1.0,
    )
    try:
        envs.reset(seed=0)
        os.kill(envs.worker_pids[0], signal.SIGKILL)  # the actor of members 0 and 1
        _, _, _, trunc, infos = envs.step(np.array([0, 0, 0, 0]))
        assert trunc.tolist() == [True, True, True, True]  # a pack answers as one: member 3 hung, (2, 3) restarted
        assert infos["worker_restarted"].tolist() == [True, True, True, True]
        assert "worker exited" in infos["final_info"]["worker_error"][0]
        assert "did not answer within 1.0 s" in infos["final_info"]["worker_error"][3]
        assert infos["group_reset"].all() and envs.worker_restarts == 2 and len(set(envs.worker_pids)) == 2
    finally:
        envs.close()


@pytest.mark.slow
def test_member_errors_and_unsendable_actions_follow_the_async_contract(cluster):
    envs = GroupVectorEnv(
        SleepEnv, num_groups=1, group_size=2, backend="ray", num_cpus=0.5, env_kwargs={"step_time": 0.0}
    )
    try:
        envs.reset(seed=0)
        with pytest.raises(UnsentActionError, match="No member was stepped"):
            envs.step([threading.Lock(), 0])
        _, _, _, trunc, infos = envs.step(["not-an-int", "1"])
        assert trunc.tolist() == [True, False] and infos["worker_error"][0].startswith("ValueError")
        assert not infos["worker_restarted"].any() and envs.worker_restarts == 0
    finally:
        envs.close()
    with pytest.raises(MemberError, match="episode_length must be >= 1"):
        GroupVectorEnv(
            SleepEnv,
            num_groups=1,
            group_size=1,
            backend="ray",
            num_cpus=0.5,
            env_kwargs={"step_time": 0.0, "episode_length": 0},
        )


@pytest.mark.slow
def test_alfworld_group_env_runs_on_both_nodes_and_matches_sync(cluster):
    pytest.importorskip("textworld", reason="ALFWorld engine (extra [alfworld]) not installed")
    import progpo_envs  # noqa: F401  (registers the ids)

    kw = {"split": "easy-train", "max_episode_steps": 3}

    def play(backend, **extra):
        envs = GroupVectorEnv(
            "ProGPO-ALFWorld-v0", num_groups=2, group_size=2, backend=backend, seed=5, env_kwargs=kw, **extra
        )
        try:
            obs, infos = envs.reset()
            out = [list(obs)]
            for _ in range(3):
                obs, rew, term, trunc, infos = envs.step([c[-1] for c in infos["admissible_commands"]])
                out.append((list(obs), rew.tolist(), term.tolist(), trunc.tolist()))
            return out, envs.worker_node_ids
        finally:
            envs.close()

    on_ray, nodes = play("ray", num_cpus=0.5)
    alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
    assert len(set(nodes)) == 2 and set(nodes) <= alive  # actors ran on both nodes
    assert on_ray == play("sync")[0]


def test_wrappers_import_without_ray():
    code = (
        "import sys; sys.modules['ray'] = None\n"
        "import wrappers, wrappers.group, wrappers.group.ray_pool\n"
        "from progpo_envs.rooms import TextRoomsEnv\n"
        "try:\n    wrappers.GroupVectorEnv(TextRoomsEnv, 1, 1, backend='ray')\n"
        "except ImportError as e:\n    print('ImportError', e)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert "pip install 'progpo[ray]'" in out.stdout


def test_ray_arguments_are_checked():
    with pytest.raises(ValueError, match="num_cpus: apply to backend='ray' only"):
        GroupVectorEnv(TextRoomsEnv, 1, 1, backend="async", num_cpus=1)
    with pytest.raises(ValueError, match="backend must be 'sync', 'async' or 'ray'"):
        GroupVectorEnv(TextRoomsEnv, 1, 1, backend="dask")


@pytest.mark.slow
def test_mixed_info_types_collate_on_ray(cluster):
    from test_wrappers_group_infos import ORDERS_8, play_mixed  # same folder: on sys.path under pytest

    play_mixed("ray", ORDERS_8, group_size=4, num_cpus=0.25, members_per_actor=2)
