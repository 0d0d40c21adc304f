"""WebShop honours max_episode_steps from gym.make / the trainer and rejects a
search whose URL would be too long in both modes alike (the text side; the browser side is in
test_webshop_browser.py)."""

from __future__ import annotations

import gymnasium as gym
import pytest

import progpo_envs
from progpo_envs.webshop.env import WebShopEnv
from progpo_envs.webshop.shop import MAX_ACTION_CHARS, MAX_QUERY_URL_BYTES, parse_action, query_url_bytes


def _steps_until_truncated(env, limit: int = 200) -> int:
    env.reset(seed=0)
    for n in range(1, limit + 1):
        _, _, term, trunc, _ = env.step("look")
        assert not term
        if trunc:
            return n
    return -1


@pytest.mark.parametrize("kwargs, expected", [({"max_episode_steps": 30}, 30), ({"max_episode_steps": 4}, 4), ({}, 15)])
def test_gym_make_max_episode_steps_is_honoured(kwargs, expected):
    env = gym.make(progpo_envs.WEBSHOP_ID, num_products=200, **kwargs)
    try:
        assert _steps_until_truncated(env) == expected
    finally:
        env.close()


def test_trainer_max_steps_reaches_webshop():
    from trainers.envs import make_env

    env = make_env("webshop", "train", 30, num_products=200)
    try:
        assert _steps_until_truncated(env) == 30
    finally:
        env.close()


def test_direct_construction_keeps_its_own_limit(ws_shop):
    assert _steps_until_truncated(WebShopEnv(shop=ws_shop)) == 15
    assert _steps_until_truncated(WebShopEnv(shop=ws_shop, max_episode_steps=7)) == 7


def test_search_query_is_capped_by_encoded_url_length(ws_env):
    too_long = "search[" + "茶" * 7300 + "]"
    assert len(too_long) < MAX_ACTION_CHARS and query_url_bytes("茶" * 7300) > 65_536
    assert parse_action(too_long) is None
    assert parse_action("search[" + "a b%" * 2400 + "]") is not None  # any ASCII query within the action limit fits
    assert query_url_bytes("a b%" * 2400) <= MAX_QUERY_URL_BYTES
    obs, info = ws_env.reset(seed=3)
    obs2, reward, term, trunc, info2 = ws_env.step(too_long)
    assert info2["valid_action"] is False and obs2 == obs and info2["page"] == "search" and reward == 0.0
    _, _, _, _, info3 = ws_env.step("search[" + "茶" * 3300 + "]")
    assert info3["valid_action"] is True and info3["page"] == "results"


@pytest.mark.parametrize("make", ["gym.make", "direct"])
def test_nothing_is_played_or_paid_after_truncation(ws_shop, make):
    """The oracle's purchase, one step too late: the truncated episode stays over."""
    from agents.baselines import WebShopOracleAgent

    env = (
        gym.make(progpo_envs.WEBSHOP_ID, shop=ws_shop, max_episode_steps=2)
        if make == "gym.make"
        else WebShopEnv(shop=ws_shop, max_episode_steps=2)
    )
    agent = WebShopOracleAgent()
    obs, info = env.reset(seed=3)
    truncated = False
    for _ in range(2):
        obs, reward, terminated, truncated, info = env.step(agent.act([obs], [info])[0])
    assert truncated and not terminated
    frozen = obs
    for _ in range(6):  # what the oracle would go on to do (its purchase included)
        cmd = agent.act([obs], [info])[0]
        obs, reward, terminated, truncated, info = env.step(cmd)
        assert (reward, terminated, truncated, obs, info["valid_action"]) == (0.0, False, True, frozen, False)
    env.close()


@pytest.mark.parametrize("index", [3.7, True, "5", float("inf"), None.__class__, [1]])
def test_goal_index_must_be_an_integer(ws_env, index):
    with pytest.raises(ValueError, match="goal_index must be an integer"):
        ws_env.reset(options={"goal_index": index})
    with pytest.raises(ValueError, match="goal_index must be an integer"):
        WebShopEnv(shop=ws_env.shop, split="all", goal_index=index)


def test_integer_goal_indices_play_that_goal(ws_env):
    import numpy as np

    for index in (5, np.int64(5)):
        assert ws_env.reset(options={"goal_index": index})[1]["task_id"] == 5


def test_a_task_id_replays_from_its_string_form(ws_env):
    """Cross-env records (the TRL rollout's, dataset columns) keep task ids as strings: the exact
    string of an id plays that goal; anything looser is refused."""
    _, info = ws_env.reset(seed=3)
    again = ws_env.reset(options={"task_id": str(info["task_id"])})[1]
    assert again["task_id"] == info["task_id"] and again["instruction"] == info["instruction"]
    assert ws_env.reset(options={"task_id": 7})[1]["task_id"] == 7
    for bad in ("5.0", " 5", "05", "+5", "five", 3.7, True):
        with pytest.raises(ValueError, match="task_id must be an integer or its decimal string"):
            ws_env.reset(options={"task_id": bad})
    with pytest.raises(ValueError, match="goal_index must be an integer, got '5'"):
        ws_env.reset(options={"goal_index": "5"})
