"""Fixtures for the agents tests: tiny models, one CPU thread, a small text env."""

from __future__ import annotations

from typing import Any

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Run each agents test on one intra-op thread (the CI box has 2 shared cores; several
    threads under contention are >10x slower), restoring the previous setting afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def tiny():
    """(model, tokenizer) of the default tiny Qwen2 (seed 0). Do not mutate its weights."""
    from agents.models import make_tiny_model

    return make_tiny_model()


@pytest.fixture(scope="session")
def smollm2():
    """(model, tokenizer) of the bundled SmolLM2 (slow tests only; skips without the package)."""
    from agents.models import ModelLoadError, load_model

    try:
        return load_model("smollm2")
    except ModelLoadError as exc:
        pytest.skip(f"bundled SmolLM2 unavailable: {exc}")


class CorridorEnv:
    """A small text env with the ProGPO info contract: walk east ``length`` rooms to win.

    Commands: ``go east``, ``go west``, ``look``; anything else is not understood.
    """

    def __init__(self, length: int = 3, max_steps: int = 6) -> None:
        self.length, self.max_steps = length, max_steps
        self.pos = self.t = 0

    def _obs(self) -> str:
        return f"You are in room {self.pos}. Exits lead east and west."

    def _info(self, valid: bool = True) -> dict[str, Any]:
        return {
            "goal": f"reach room {self.length}.",
            "admissible_commands": ["go east", "go west", "look"],
            "step": self.t,
            "valid_action": valid,
            "won": self.pos >= self.length,
            "task_id": "corridor",
        }

    def reset(self, seed: int | None = None) -> tuple[str, dict[str, Any]]:
        self.pos = self.t = 0
        return self._obs(), self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        self.t += 1
        valid = action in ("go east", "go west", "look")
        if action == "go east":
            self.pos += 1
        elif action == "go west":
            self.pos = max(0, self.pos - 1)
        won = self.pos >= self.length
        obs = self._obs() if valid else "Nothing happens."
        return obs, float(won), won, self.t >= self.max_steps and not won, self._info(valid)


@pytest.fixture
def corridor():
    return CorridorEnv
