"""The instruction-following WebShop shopper (an imitable expert) and the webshop-notes prompt."""

from __future__ import annotations

import numpy as np
import pytest

from agents.webshop_expert import WebShopInstructionAgent, named_options, webshop_command_notes


@pytest.fixture(scope="module")
def ws_shop():
    from progpo_envs.webshop.shop import get_shop

    return get_shop(num_products=1000)  # the embedded default catalog


def _play(env, agent, goal_index: int) -> tuple[float, list[str]]:
    obs, info = env.reset(options={"task_id": goal_index})
    actions, history = [], []
    for _ in range(15):
        a = agent.act([obs], [info], [history])[0]
        actions.append(a)
        history.append((obs, a))
        obs, r, term, trunc, info = env.step(a)
        assert info["valid_action"], (a, info["admissible_commands"])
        if term or trunc:
            return float(r), actions
    return 0.0, actions


def test_expert_reads_only_the_page_and_buys_with_partial_scores(ws_shop):
    from progpo_envs.webshop.env import WebShopEnv

    env, agent = WebShopEnv(shop=ws_shop, split="test"), WebShopInstructionAgent()
    scores = []
    for g in range(40):
        score, actions = _play(env, agent, g)
        assert actions[0].startswith("search[") and actions[-1] == "click[buy now]"
        scores.append(score)
    scores = np.array(scores)
    assert 0.3 < scores.mean() < 0.9 and (scores == 1.0).any() and (scores < 1.0).any()


def test_expert_never_looks_at_the_goal_product_or_its_options():
    info = {
        "page": "results",
        "goal": {"instruction_text": "i want red tea", "asin": "B01", "goal_options": {"flavor": "mint"}},
        "admissible_commands": ["click[back to search]", "click[b01]", "click[b02]"],
    }
    obs = "Page 1 (Total results: 2) [SEP] B01 [SEP] Blue coffee mug [SEP] $9 [SEP] B02 [SEP] Red tea bags [SEP] $5"
    assert WebShopInstructionAgent().act([obs], [info]) == ["click[b02]"]  # the title, not the goal's ASIN
    item = {
        "page": "item",
        "goal": info["goal"],
        "state": {"options": {}},
        "admissible_commands": ["click[buy now]", "click[mint]", "click[red]"],
    }
    assert WebShopInstructionAgent().act(["..."], [item]) == ["click[red]"]  # named in the text, not the goal's "mint"


def test_notes_mark_the_best_title_and_the_named_options_once():
    obs = (
        "Page 1 (Total results: 3) [SEP] B01 [SEP] Blue mug [SEP] $9 [SEP] B02 [SEP] Red tea, black [SEP] $5 [SEP] "
        "B03 [SEP] Red tea, mint [SEP] $6"
    )
    cmds = ["click[back to search]", "click[b01]", "click[b02]", "click[b03]"]
    assert webshop_command_notes("red tea with mint", obs, cmds) == ["", "", "", "best match: "]
    item = ["click[buy now]", "click[red]", "click[large]", "click[< prev]"]
    assert webshop_command_notes("a red shirt, large", "...", item) == ["", "named: ", "named: ", ""]
    assert webshop_command_notes("a red shirt, large", "...", item, {"color": "red"}) == ["", "", "named: ", ""]
    assert named_options("nothing named", ["buy now", "red"], {}) == []


@pytest.mark.slow
def test_score_mode_webshop_notes_policy_scores_the_noted_commands(ws_shop):
    import dataclasses

    import torch

    from progpo_envs.webshop.env import WebShopEnv
    from trainers.build import build_policy
    from trainers.config import TrainConfig

    cfg = dataclasses.replace(TrainConfig(), env="webshop", template="webshop-notes", device="cpu", lora=False)
    policy = build_policy(cfg, torch.device("cpu"))
    env = WebShopEnv(shop=ws_shop, split="test")
    obs, info = env.reset(options={"task_id": 0})
    obs, _, _, _, info = env.step(f"search[{info['goal']['instruction_text'].lower()}]")
    [out] = policy.act([obs], [info], [[]], seed=0)
    assert out.valid and out.action in out.candidates
    notes = policy.command_notes(obs, info, [], out.candidates)
    assert notes.count("best match: ") >= 1 and len(notes) == len(out.candidates)
    step = policy.forced_step(obs, info, [], out.candidates[notes.index("best match: ")])
    assert step is not None and step.candidates == out.candidates
    assert notes[step.chosen_index] == "best match: "
