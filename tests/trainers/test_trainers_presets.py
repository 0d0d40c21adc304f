"""The shipped configs build the settings their comments describe."""
from __future__ import annotations

from pathlib import Path

import pytest

from trainers.config import TrainConfig, load_yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _cfg(name: str) -> TrainConfig:
    cfg = TrainConfig.from_dict(load_yaml(CONFIGS / name))
    cfg.validate()
    return cfg


def test_trap_preset_keeps_the_trap():
    cfg = _cfg("alfworld_trap.yaml")
    assert (cfg.avoid_repeats, cfg.history_k, cfg.template, cfg.resolved_init) == (False, 2, "alfworld-task-notes", "bc")
    assert cfg.bc_steps < _cfg("alfworld_cpu_demo.yaml").bc_steps  # a weaker clone than the demo's

    from agents.prompting import build_messages

    hist = [("You are in the middle of a room.", "go to desk 1")]
    msgs = build_messages(cfg.template, goal="put a mug in desk.", observation="On the desk 1, you see a mug 1.",
                          admissible=["go to desk 1", "go to shelf 1", "take mug 1 from desk 1"], history=hist,
                          step=1, k=cfg.history_k, fmt="action")
    assert "visited" not in msgs[-1]["content"] and "seen: mug 1 at desk 1" in msgs[-1]["content"]


def test_webshop_demo_clones_the_shopper_with_the_notes_prompt():
    cfg = _cfg("webshop_cpu_demo.yaml")
    assert (cfg.env, cfg.template, cfg.resolved_init, cfg.policy_mode) == ("webshop", "webshop-notes", "bc", "score")
    assert cfg.bc_episodes > 0 and cfg.eval_episodes >= 200


@pytest.mark.parametrize("name", sorted(p.name for p in CONFIGS.glob("*.yaml")))
def test_every_shipped_config_validates(name):
    _cfg(name)


def test_every_config_field_documents_itself_in_help() -> None:
    """TRL-style: each field carries one line of help and a --help section, and --help prints both."""
    import dataclasses

    from trainers.config import TrainConfig, build_parser

    text = " ".join(build_parser().format_help().split())
    for f in dataclasses.fields(TrainConfig):
        assert f.metadata.get("help") and f.metadata.get("group"), f.name
        if f.name != "extra":
            assert " ".join(f.metadata["help"].split()) in text, f.name
    sections = list(dict.fromkeys(f.metadata["group"] for f in dataclasses.fields(TrainConfig)))
    assert sections == ["what to train", "policy", "warm start", "estimator", "rollout", "teacher", "budget", "PPO update",
                        "outputs"]
    assert all(f"{s}:" in build_parser().format_help() for s in sections)
