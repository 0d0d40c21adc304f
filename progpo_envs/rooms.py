"""Three tiny environments for documentation examples, tests and benchmarks (``--env rooms`` is
:class:`TextRoomsEnv`).

* :class:`TextRoomsEnv`: a five-room text game with ``info["admissible_commands"]``, the same
  contract as the package's ALFWorld / WebShop envs (text in, text out, outcome reward).
* :class:`SleepEnv`: a numeric env whose step sleeps a fixed time (a stand-in for a slow
  engine) and whose final reward is the last action, so tests can choose outcomes.
* :class:`MixedInfoEnv`: an env whose ``info["value"]`` changes type from step to step (int,
  ``None``, str, dict, as optional fields of real envs do), for testing info collation.

All three are importable by worker processes (needed by ``GroupVectorEnv(backend="async")``).

Example:
    >>> env = TextRoomsEnv()
    >>> obs, info = env.reset(seed=0)
    >>> obs.startswith("You are in the")
    True
    >>> "look" in info["admissible_commands"]
    True
"""

from __future__ import annotations

import string
import time
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["MIXED_INFO_VALUES", "MixedInfoEnv", "SleepEnv", "TextRoomsEnv"]

_ROOMS = ("kitchen", "hall", "bedroom", "garden", "cellar")
_EXITS = {
    "kitchen": ("hall", "cellar"),
    "hall": ("kitchen", "bedroom", "garden"),
    "bedroom": ("hall",),
    "garden": ("hall",),
    "cellar": ("kitchen",),
}


class TextRoomsEnv(gym.Env[str, str]):
    """Find the key: walk between five rooms and ``take key`` where it lies.

    The seed picks the task (start room and key room), so equal seeds give equal tasks.
    Reward 1.0 and ``terminated`` on ``take key`` in the key's room; ``truncated`` after
    ``max_steps``. Unknown commands answer ``Nothing happens.`` with ``valid_action=False``.
    ``inventory`` answers a feedback text that is not a new state (a canonicalizer's job).
    """

    metadata = {"render_modes": []}
    ROOMS: tuple[str, ...] = _ROOMS
    EXITS: dict[str, tuple[str, ...]] = _EXITS

    def __init__(self, max_steps: int = 20) -> None:
        if max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {max_steps}")
        self.max_steps = max_steps
        self.observation_space = spaces.Text(max_length=512, min_length=0, charset=string.printable)
        self.action_space = spaces.Text(max_length=64, min_length=0, charset=string.printable)
        self._room = "kitchen"
        self._key_room = "garden"
        self._steps = 0
        self._task_id = "kitchen->garden"

    def _describe(self) -> str:
        exits = ", ".join(_EXITS[self._room])
        seen = " You see a key." if self._room == self._key_room else ""
        return f"You are in the {self._room}. Exits: {exits}.{seen}"

    def _commands(self) -> list[str]:
        cmds = ["look", "inventory"] + [f"go {room}" for room in _EXITS[self._room]]
        if self._room == self._key_room:
            cmds.append("take key")
        return cmds

    def _info(self, valid: bool, won: bool) -> dict[str, Any]:
        return {
            "admissible_commands": self._commands(),
            "task_id": self._task_id,
            "won": won,
            "valid_action": valid,
            "step": self._steps,
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        start, key = self.np_random.choice(len(_ROOMS), size=2, replace=False)
        self._room, self._key_room = _ROOMS[int(start)], _ROOMS[int(key)]
        self._steps = 0
        self._task_id = f"{self._room}->{self._key_room}"
        return self._describe(), self._info(True, False)

    def step(self, action: str):
        self._steps += 1
        command = action.strip().lower() if isinstance(action, str) else ""
        reward, terminated, valid = 0.0, False, True
        if command == "look":
            obs = self._describe()
        elif command == "inventory":
            obs = "You carry nothing."
        elif command.startswith("go ") and command[3:] in _EXITS[self._room]:
            self._room = command[3:]
            obs = self._describe()
        elif command == "take key" and self._room == self._key_room:
            obs, reward, terminated = "You take the key. You won!", 1.0, True
        else:
            obs, valid = "Nothing happens.", False
        truncated = not terminated and self._steps >= self.max_steps
        return obs, reward, terminated, truncated, self._info(valid, terminated)


class SleepEnv(gym.Env[np.ndarray, np.int64]):
    """A fixed-length episode whose step sleeps ``step_time`` seconds.

    Observation ``[t / episode_length, task]`` (float32), where ``task`` in [0, 1) is drawn
    from the reset seed; action ``Discrete(2)``; reward 0 until the last step, then the action
    taken there (1 = success). ``info["outcome"]`` repeats the final reward when
    ``report_outcome``.
    """

    metadata = {"render_modes": []}

    def __init__(self, step_time: float = 0.02, episode_length: int = 5, report_outcome: bool = False) -> None:
        if episode_length < 1:
            raise ValueError(f"episode_length must be >= 1, got {episode_length}")
        self.step_time = float(step_time)
        self.episode_length = int(episode_length)
        self.report_outcome = report_outcome
        self.observation_space = spaces.Box(0.0, 1.0, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self._t = 0
        self._task = 0.0

    def _obs(self) -> np.ndarray:
        return np.array([self._t / self.episode_length, self._task], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        self._task = float(self.np_random.random())
        return self._obs(), {"task": self._task}

    def step(self, action: Any):
        if self.step_time > 0:
            time.sleep(self.step_time)
        chosen = int(action)
        self._t += 1
        terminated = self._t >= self.episode_length
        reward = float(chosen) if terminated else 0.0
        info: dict[str, Any] = {"task": self._task}
        if terminated and self.report_outcome:
            info["outcome"] = reward
        return self._obs(), reward, terminated, False, info


#: What :class:`MixedInfoEnv` puts in ``info["value"]``: an int, None, a str and a dict.
MIXED_INFO_VALUES: tuple[Any, ...] = (7, None, "page 2", {"page_num": 3, "query": None})


class MixedInfoEnv(gym.Env[np.int64, np.int64]):
    """An episode of ``len(order)`` steps whose ``info["value"]`` is
    ``MIXED_INFO_VALUES[order[t]]`` at step ``t`` (reset is ``t = 0``), so the type of one info
    key changes over time and, with members of different orders, between members.

    >>> env = MixedInfoEnv(order=(1, 0))
    >>> env.reset(seed=0)[1]["value"], env.step(0)[4]["value"]
    (None, 7)
    """

    metadata = {"render_modes": []}

    def __init__(self, order: tuple[int, ...] = (0, 1, 2, 3)) -> None:
        if not order or any(not 0 <= k < len(MIXED_INFO_VALUES) for k in order):
            raise ValueError(f"order must index MIXED_INFO_VALUES, got {order!r}")
        self.order = tuple(order)
        self.observation_space = spaces.Discrete(len(self.order) + 1)
        self.action_space = spaces.Discrete(2)
        self._t = 0

    def _info(self) -> dict[str, Any]:
        return {"value": MIXED_INFO_VALUES[self.order[self._t % len(self.order)]]}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        self._t = 0
        return np.int64(0), self._info()

    def step(self, action: Any):
        self._t += 1
        return np.int64(self._t), 0.0, self._t >= len(self.order), False, self._info()
