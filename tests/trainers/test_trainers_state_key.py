"""--state-key: canonical (the env's canonicalizer) or exact (distinct raw observation strings)."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import pytest
from gymnasium import spaces

from trainers.config import ConfigError, TrainConfig
from trainers.config_flags import parse_args
from trainers.envs import canonicalizer_for


class Replay(gym.Env):
    """Replays a fixed ALFWorld-like transcript: (observation, admissible commands, valid) per step."""

    observation_space = spaces.Text(4096)
    action_space = spaces.Text(256)

    def __init__(self, script):
        self.script, self.t = script, 0

    def _info(self, k):
        obs, cmds, valid = self.script[k]
        return obs, {"admissible_commands": cmds, "valid_action": valid}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._info(0)

    def step(self, action):
        self.t += 1
        obs, info = self._info(self.t)
        return obs, 0.0, False, self.t == len(self.script) - 1, info


START = ["go to bed 1", "go to desk 1", "help", "inventory", "look"]
AT_DESK = ["examine desk 1", "go to bed 1", "help", "inventory", "look", "take mug 1 from desk 1"]
HOLDING = ["examine desk 1", "examine mug 1", "go to bed 1", "help", "inventory", "look", "move mug 1 to desk 1"]
AT_BED = ["examine bed 1", "examine mug 1", "go to desk 1", "help", "inventory", "look", "move mug 1 to bed 1"]
SCRIPT = [
    ("You are in the middle of a room.", START, True),  # reset
    ("You arrive at desk 1. On the desk 1, you see a mug 1.", AT_DESK, True),  # go to desk 1
    ("You are facing the desk 1. Next to it, you see nothing.", AT_DESK, True),  # look
    ("You pick up the mug 1 from the desk 1.", HOLDING, True),  # take mug 1
    ("You are carrying: a mug 1.", HOLDING, True),  # inventory
    ("You arrive at bed 1. On the bed 1, you see nothing.", AT_BED, True),  # go to bed 1 (carrying)
    ("Nothing happens.", AT_BED, False),  # rejected
    ("You are carrying: a mug 1.", AT_BED, True),  # inventory again
]


def _first_visits(state_key: str) -> list[bool]:
    from wrappers import CanonicalizeObservation, FirstVisitCoverage

    env = FirstVisitCoverage(CanonicalizeObservation(Replay(SCRIPT), canonicalizer_for("alfworld", state_key)))
    env.reset(seed=0)
    return [bool(env.step("x")[4]["first_visit"]) for _ in SCRIPT[1:]]


def test_exact_counts_distinct_raw_strings_canonical_counts_states():
    # steps:                      desk  look   take  inv    bed   reject inv-again
    assert _first_visits("exact") == [True, True, True, True, True, False, False]
    assert _first_visits("canonical") == [True, False, True, False, True, False, False]


def test_state_key_flag_and_validation():
    cfg, _ = parse_args(["--state-key", "exact"])
    assert cfg.state_key == "exact" and TrainConfig().state_key == "canonical"
    with pytest.raises(ConfigError, match="state_key"):
        dataclasses.replace(TrainConfig(), state_key="hash").validate()


def test_alfworld_exact_key_is_the_raw_observation():
    info = {"admissible_commands": ["look", "go to desk 1"]}
    assert canonicalizer_for("alfworld", "exact")("You arrive at desk 1.", info) == "You arrive at desk 1."
    assert canonicalizer_for("alfworld", "canonical")("You arrive at desk 1.", info).startswith("@")


def test_report_says_where_the_progress_term_acted(tmp_path):
    import json

    from tiny_config import config_for_tests

    from trainers.loop.trainer import Trainer

    cfg = config_for_tests(output_dir=str(tmp_path / "r"), estimator="progpo-grpo", eval_episodes=0, iterations=2)
    report = Trainer(cfg).train()
    train = [json.loads(x) for x in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in train if r["kind"] == "train"]
    acted = sum(r["adv/progress_groups"] for r in train)
    assert all(r["adv/groups"] == 2 and r["adv/progress_group_frac"] == r["adv/progress_groups"] / 2 for r in train)
    assert all(r["adv/progress_group_frac"] == r["all_failed_frac"] for r in train)  # gate all_failed
    text = report.read_text()
    assert "## Where ProGPO acted" in text and f"in **{acted:.0f} of 4 groups**" in text
