"""agents.baselines: random, ALFWorld expert replay, WebShop oracle."""

from __future__ import annotations

import pytest

from agents.baselines import ALFWorldExpertAgent, RandomAgent, WebShopOracleAgent, expert_plans_from_envs


def test_random_agent_is_seeded_and_admissible():
    infos = [{"admissible_commands": ["a", "b", "c", "d"]}] * 20
    x = RandomAgent(seed=1).act(["o"] * 20, infos)
    assert x == RandomAgent(seed=1).act(["o"] * 20, infos)
    assert set(x) <= {"a", "b", "c", "d"} and len(set(x)) > 1
    assert RandomAgent(seed=0).act(["o"], [{"admissible_commands": []}]) == ["look"]
    # a placeholder command is only chosen when nothing else is admissible
    assert RandomAgent(seed=0).act(["o"], [{"admissible_commands": ["search[<query>]"]}]) == ["search[<query>]"]


def test_expert_replays_plans_by_step():
    agent = ALFWorldExpertAgent()
    agent.reset([["go to desk 1", "take mug 1 from desk 1"], None])
    assert agent.act(["o", "o"], [{"step": 0}, {"step": 0}]) == ["go to desk 1", "look"]
    assert agent.act(["o", "o"], [{"step": 1}, {"step": 1}]) == ["take mug 1 from desk 1", "look"]
    assert agent.act(["o"], [{"step": 2}]) == ["look"]
    assert agent.act(["o"], [{"step": 0, "walkthrough": ["open fridge 1"]}]) == ["open fridge 1"]
    counting = ALFWorldExpertAgent([["a", "b"]])  # no step in info: counts its own calls
    assert [counting.act(["o"], [{}])[0] for _ in range(3)] == ["a", "b", "look"]


def test_expert_plans_from_envs():
    class Env:
        def __init__(self, plan):
            self.unwrapped = self
            self.plan = plan

        def expert_plan(self):
            return self.plan

    assert expert_plans_from_envs([Env(["x"]), Env(None)]) == [["x"], []]
    with pytest.raises(TypeError, match="expert_plan"):
        expert_plans_from_envs([object()])


GOAL = {
    "asin": "B0ABC",
    "goal_options": {"color": "Navy/Blue", "size": "XL"},
    "query": "red shoes",
    "instruction_text": "i want navy shoes",
}


def _info(page, cmds, step):
    return {"page": page, "admissible_commands": cmds, "step": step, "goal": GOAL}


def test_webshop_oracle_flow():
    agent = WebShopOracleAgent(max_pages=1)
    assert agent.act(["o"], [_info("search", ["search[<query>]"], 0)]) == ["search[red shoes]"]
    res = ["search[<query>]", "click[back to search]", "click[next >]", "click[b0zzz]"]
    assert agent.act(["o"], [_info("results", res, 1)]) == ["click[next >]"]
    assert agent.act(["o"], [_info("results", res, 2)]) == ["click[back to search]"]
    # second search uses the instruction text
    assert agent.act(["o"], [_info("search", ["search[<query>]"], 3)]) == ["search[i want navy shoes]"]
    assert agent.act(["o"], [_info("results", res + ["click[b0abc]"], 4)]) == ["click[b0abc]"]
    item = ["click[< prev]", "click[buy now]", "click[navy | blue]", "click[red]", "click[xl]", "click[description]"]
    got = [agent.act(["o"], [_info("item", item, 5 + k)])[0] for k in range(3)]
    assert got == ["click[navy | blue]", "click[xl]", "click[buy now]"]
    assert agent.act(["o"], [_info("sub-page", ["click[< prev]", "click[back to search]"], 8)]) == ["click[< prev]"]
    with pytest.raises(ValueError, match="asin"):
        agent.act(["o"], [{"goal": "text only"}])


@pytest.mark.slow
def test_webshop_oracle_scores_one_on_the_embedded_shop():
    import gymnasium as gym

    pytest.importorskip("bm25s", reason="WebShop engine deps (extra [webshop]) not installed")
    import progpo_envs  # noqa: F401  (registers the ids)

    env = gym.make("ProGPO-WebShop-v0", num_products=200)
    agent = WebShopOracleAgent()
    rewards = []
    for seed in range(3):
        obs, info = env.reset(seed=seed)
        done, r = False, 0.0
        while not done:
            obs, r, term, trunc, info = env.step(agent.act([obs], [info])[0])
            done = term or trunc
        rewards.append(r)
    env.close()
    assert rewards == [1.0, 1.0, 1.0]
