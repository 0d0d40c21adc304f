"""The SB3 adapter: spaces, masks, command mapping, SB3's env checker and a PPO run."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from progpo_envs.rooms import TextRoomsEnv
from wrappers import AdmissibleActionsToDiscrete, CanonicalizeObservation, FirstVisitCoverage, hashed_bag_of_words

ROOT = Path(__file__).resolve().parents[2]


class _ManyCommands(gym.Env):
    """Text env listing ``n`` commands; echoes the command it got."""

    observation_space = gym.spaces.Text(100)
    action_space = gym.spaces.Text(100)

    def __init__(self, n: int):
        self.n = n

    def _info(self):
        return {"admissible_commands": [f"cmd {i}" for i in range(self.n)]}

    def reset(self, *, seed=None, options=None):
        return "start", self._info()

    def step(self, action):
        return f"got {action}", 0.0, False, False, self._info()


def test_spaces_mask_and_command_mapping():
    env = AdmissibleActionsToDiscrete(TextRoomsEnv(), max_actions=6, obs_dim=32, action_dim=4)
    obs, info = env.reset(seed=0)
    assert env.action_space == gym.spaces.Discrete(6)
    assert obs.shape == (32 + 6 * 4,) and obs.dtype == np.float32 and obs in env.observation_space
    n = len(info["admissible_commands"])
    assert env.action_masks().tolist() == [True] * n + [False] * (6 - n)
    assert env.commands == info["admissible_commands"]
    np.testing.assert_allclose(obs[:32], hashed_bag_of_words(env.unwrapped._describe(), 32))
    slot = env.commands.index("inventory")
    np.testing.assert_allclose(obs[32 + 4 * slot : 32 + 4 * slot + 4], hashed_bag_of_words("inventory", 4))
    _, _, _, _, info = env.step(slot)
    assert info["adapter_command"] == "inventory" and not info["adapter_invalid_action"]
    assert info["valid_action"]


def test_out_of_range_slots_wrap_and_truncation_is_flagged():
    env = AdmissibleActionsToDiscrete(_ManyCommands(3), max_actions=5, obs_dim=8)
    env.reset()
    _, _, _, _, info = env.step(4)
    assert info["adapter_command"] == "cmd 1" and info["adapter_invalid_action"]
    env = AdmissibleActionsToDiscrete(_ManyCommands(9), max_actions=4, obs_dim=8)
    _, info = env.reset()
    assert info["admissible_truncated"] and env.action_masks().all() and env.commands[-1] == "cmd 3"
    env = AdmissibleActionsToDiscrete(_ManyCommands(0), max_actions=4, obs_dim=8, fallback_command="wait")
    env.reset()
    assert env.action_masks().tolist() == [True, False, False, False]
    assert env.step(0)[4]["adapter_command"] == "wait"


def test_adapter_bad_input():
    with pytest.raises(ValueError, match="max_actions"):
        AdmissibleActionsToDiscrete(TextRoomsEnv(), max_actions=0)
    with pytest.raises(TypeError, match="text_fn"):
        AdmissibleActionsToDiscrete(gym.make("FrozenLake-v1")).reset(seed=0)
    env = AdmissibleActionsToDiscrete(gym.make("FrozenLake-v1"), text_fn=lambda o, i: f"cell {o}")
    with pytest.raises(KeyError, match="admissible_commands"):
        env.reset(seed=0)
    big = hashed_bag_of_words("word " * 300_000, 16)  # 1.5 MB of text stays bounded and finite
    assert np.isfinite(big).all() and abs(np.linalg.norm(big) - 1) < 1e-5


def test_bag_of_words_is_stable_across_processes():
    code = "from wrappers import hashed_bag_of_words as h; print(h('go to the kitchen', 64).nonzero()[0].tolist())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == str(hashed_bag_of_words("go to the kitchen", 64).nonzero()[0].tolist())


def _sb3_text_env():
    return AdmissibleActionsToDiscrete(
        FirstVisitCoverage(CanonicalizeObservation(TextRoomsEnv(max_steps=10))), max_actions=8, obs_dim=32, action_dim=8
    )


@pytest.mark.slow
def test_sb3_check_env_and_ppo_learn_with_coverage_inside():
    pytest.importorskip("stable_baselines3", reason="extra [sb3] not installed")
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_checker import check_env

    check_env(_sb3_text_env(), warn=True)
    env = _sb3_text_env()
    model = PPO("MlpPolicy", env, n_steps=64, batch_size=32, n_epochs=1, seed=0)
    model.learn(total_timesteps=128)
    obs, info = env.reset(seed=1)
    action, _ = model.predict(obs, deterministic=True)
    *_, info = env.step(action)
    assert "coverage_rate" in info and 0 <= int(action) < 8


@pytest.mark.slow
def test_example_runs_briefly(capsys):
    pytest.importorskip("stable_baselines3", reason="extra [sb3] not installed")
    spec = importlib.util.spec_from_file_location("sb3_coverage_example", ROOT / "examples" / "sb3_coverage.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    for env_name in ("frozenlake", "text"):
        result = example.main(["--env", env_name, "--timesteps", "256", "--episodes", "2"])
        assert set(result) == {"success_before", "coverage_before", "success_after", "coverage_after"}
        assert all(0.0 <= v <= 1.0 for v in result.values())
        lines = capsys.readouterr().out.strip().splitlines()
        assert lines[0].split() == ["policy", "success", "coverage_rate"] and lines[2].startswith("after")


@pytest.mark.parametrize("bad", [b"\x01", b"1", "1", 1.0, True])
def test_non_integer_action_is_a_type_error_and_the_env_does_not_move(bad):
    from progpo_envs.rooms import TextRoomsEnv
    from wrappers.sb3 import AdmissibleActionsToDiscrete

    env = AdmissibleActionsToDiscrete(TextRoomsEnv())
    env.reset(seed=0)
    with pytest.raises(TypeError, match="integer index"):
        env.step(bad)
    _, _, _, _, info = env.step(np.array([0]))
    assert info["step"] == 1  # the refused action was not a step
