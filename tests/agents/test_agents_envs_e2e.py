"""End to end: the SmolLM2 policy (and the scripted baselines) play the real ProGPO envs on CPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from agents.backends import SamplingConfig, TransformersBackend
from agents.policy import GeneratePolicy, ScorePolicy

pytestmark = pytest.mark.slow


def _alfworld_env(shared_data_dir, **kw):
    import gymnasium as gym

    pytest.importorskip("textworld", reason="ALFWorld engine not installed (pip install 'progpo[alfworld]')")
    import progpo_envs  # noqa: F401  (registers the ids)

    try:
        return gym.make("ProGPO-ALFWorld-v0", **kw)
    except FileNotFoundError:  # embedded games not built in this checkout: use the reference games
        real = shared_data_dir / "alfworld-real"
        if not real.is_dir():
            pytest.skip("no embedded ALFWorld games and no reference games in ../shared/data")
        return gym.make("ProGPO-ALFWorld-v0", data_dir=str(real), split="valid_unseen", **kw)


def _webshop_env(**kw):
    import gymnasium as gym

    pytest.importorskip("bm25s", reason="WebShop engine not installed (pip install 'progpo[webshop]')")
    import progpo_envs  # noqa: F401  (registers the ids)

    return gym.make("ProGPO-WebShop-v0", num_products=200, **kw)


@pytest.fixture(scope="module")
def shared_dir():
    """../shared/data (or $PROGPO_SHARED_DATA), as tests/conftest.py locates it; may be absent."""
    env = os.environ.get("PROGPO_SHARED_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(scope="module")
def alfworld(shared_dir):
    env = _alfworld_env(shared_dir, max_episode_steps=2)
    yield env
    env.close()


def _episode(env, policy, seed):
    obs, info = env.reset(seed=seed)
    history, outs, done = [], [], False
    while not done:
        [out] = policy.act([obs], [info], [history[-policy.history_k :]], seed=seed + len(outs))
        outs.append(out)
        history.append((obs, out.action))
        obs, reward, term, trunc, info = env.step(out.action)
        assert isinstance(obs, str) and reward in (0.0, 1.0) or 0.0 <= reward <= 1.0
        done = term or trunc
    return outs


@pytest.mark.parametrize("env_name", ["alfworld", "webshop"])
def test_smollm2_policy_plays_an_episode(env_name, smollm2, request):
    model, tok = smollm2
    env = request.getfixturevalue("alfworld") if env_name == "alfworld" else _webshop_env(max_episode_steps=2)
    policy = GeneratePolicy(
        model,
        tok,
        TransformersBackend(model, tok),
        env_name,
        fmt="think_action",
        history_k=2,
        sampling=SamplingConfig(temperature=0.8, top_p=0.95, max_new_tokens=32),
    )
    outs = _episode(env, policy, seed=0)
    if env_name == "webshop":
        env.close()
    assert 1 <= len(outs) <= 2
    for out in outs:
        assert len(out.response_ids) == len(out.old_logprobs) <= 32
        assert out.penalty == (0.0 if out.valid else 0.1)
    with torch.no_grad():
        new = policy.compute_logprobs(outs)
    diff = max((lp - torch.tensor(o.old_logprobs)).abs().max().item() for lp, o in zip(new, outs))
    assert diff < 1e-4


def test_smollm2_score_mode_step_on_alfworld(smollm2, alfworld):
    model, tok = smollm2
    env = alfworld
    policy = ScorePolicy(model, tok, None, "alfworld", sampling=SamplingConfig(temperature=1.0), avoid_repeats=False)
    obs, info = env.reset(seed=1)
    [out] = policy.act([obs], [info], [[]], seed=0)
    assert out.valid and out.action in info["admissible_commands"]
    _, _, _, _, info2 = env.step(out.action)
    assert info2["valid_action"]
    with torch.no_grad():
        [lp] = policy.compute_logprobs([out])
    assert abs(lp.item() - out.old_action_logprob) < 1e-4


def test_alfworld_expert_agent_wins(shared_dir):
    from agents.baselines import ALFWorldExpertAgent, expert_plans_from_envs

    env = _alfworld_env(shared_dir, max_episode_steps=50)
    agent = ALFWorldExpertAgent()
    obs, info = env.reset(seed=0)
    agent.reset(expert_plans_from_envs([env]))
    done, reward = False, 0.0
    while not done:
        obs, reward, term, trunc, info = env.step(agent.act([obs], [info])[0])
        done = term or trunc
    env.close()
    assert reward == 1.0 and info["won"]
