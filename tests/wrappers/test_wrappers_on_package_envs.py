"""The wrappers on the package's own text envs (integration; slow: real env construction)."""

from __future__ import annotations

import gymnasium as gym
import pytest

from wrappers import CanonicalizeObservation, FirstVisitCoverage, GroupVectorEnv


@pytest.mark.slow
def test_group_env_and_coverage_on_webshop():
    pytest.importorskip("bm25s", reason="WebShop engine (extra [webshop]) not installed")
    import progpo_envs  # the package's own: an import error here is a failure, not a skip
    import progpo_envs.webshop.env

    envs = GroupVectorEnv(progpo_envs.WEBSHOP_ID, num_groups=2, group_size=2, seed=0)
    try:
        obs, infos = envs.reset()
        assert isinstance(obs, tuple) and obs[0] == obs[1] and obs[2] == obs[3]
        assert infos["task_id"][0] == infos["task_id"][1]
    finally:
        envs.close()
    env = FirstVisitCoverage(CanonicalizeObservation(gym.make(progpo_envs.WEBSHOP_ID)))
    obs, info = env.reset(seed=0)
    assert info["coverage"] == 0 and isinstance(info["canonical_obs"], str)
    *_, info = env.step("search[shoes]")
    assert info["first_visit"] is True and info["coverage"] == 1
