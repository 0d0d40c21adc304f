"""Shared fixtures of the WebShop shop tests: one embedded catalog + index per session."""

from __future__ import annotations

import pytest

from progpo_envs.webshop.data import load_catalog
from progpo_envs.webshop.shop import Shop


@pytest.fixture(scope="session")
def ws_shop() -> Shop:
    """The default embedded catalog (1,000 products) with its search index."""
    return Shop(load_catalog(num_products=1000, seed=0))


@pytest.fixture()
def ws_env(ws_shop):
    from progpo_envs.webshop.env import WebShopEnv

    env = WebShopEnv(shop=ws_shop, split="all")
    yield env
    env.close()


@pytest.fixture()
def ws_oracle():
    """The scripted oracle (:func:`oracle_actions`) as a fixture."""
    return oracle_actions


def oracle_actions(env, info) -> list[str]:
    """Actions a scripted oracle takes to buy the goal product with the goal options.

    Searches the goal's instruction, pages through results until the goal ASIN shows up,
    opens it, picks each goal option, buys. Returns the actions it took.
    """
    goal = info["goal"]
    asin = goal["asin"].lower()
    taken = []

    def do(action):
        taken.append(action)
        return env.step(action)

    obs, r, term, trunc, info = do(f"search[{goal['instruction_text']}]")
    for _ in range(5):
        if asin in info["available_actions"]["clickables"]:
            break
        obs, r, term, trunc, info = do("click[next >]")
    assert asin in info["available_actions"]["clickables"], "goal product not in the top 50"
    obs, r, term, trunc, info = do(f"click[{asin}]")
    for value in (goal["goal_options"] or {}).values():
        obs, r, term, trunc, info = do(f"click[{value}]")
        assert info["valid_action"], value
    do("click[buy now]")
    return taken
