"""Adapter from a text env with admissible commands to the fixed spaces SB3 needs.

Stable-Baselines3 handles Box, Discrete, MultiDiscrete, MultiBinary and flat Dict spaces only.
:class:`AdmissibleActionsToDiscrete` turns an env whose observation is text and whose info
carries ``info["admissible_commands"]`` (the package's ALFWorld/WebShop envs, TextWorld games)
into one with

* action space ``Discrete(max_actions)``: action k sends the k-th admissible command;
* ``action_masks()`` (the method ``sb3_contrib.MaskablePPO`` calls): True for the slots that
  hold a command;
* observation space ``Box(0, 1, (obs_dim + max_actions * action_dim,), float32)``: an
  L2-normalized hashed bag of words of the observation text, followed (when
  ``action_dim > 0``) by one hashed bag of words per command slot, so a policy can tell the
  slots apart.

The hashing is stable across processes (blake2b of each token, not Python's ``hash``).
Nothing here imports stable_baselines3 or torch; wrappers such as
:class:`~wrappers.coverage.FirstVisitCoverage` work unchanged inside (under) the adapter.

Unmasked algorithms (plain PPO) may pick an empty slot k >= n commands: the adapter then
sends command ``k mod n`` and sets ``info["adapter_invalid_action"]``. With no admissible
command at all, slot 0 is unmasked and sends ``fallback_command``.

Example:
    >>> from progpo_envs.rooms import TextRoomsEnv
    >>> env = AdmissibleActionsToDiscrete(TextRoomsEnv(), max_actions=8, obs_dim=64)
    >>> obs, info = env.reset(seed=0)
    >>> obs.shape, env.action_space
    ((64,), Discrete(8))
    >>> int(env.action_masks().sum()) == len(info["admissible_commands"])
    True
"""

from __future__ import annotations

import hashlib
import numbers
import re
from collections.abc import Callable, Mapping
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np
from gymnasium import spaces

__all__ = ["AdmissibleActionsToDiscrete", "hashed_bag_of_words"]

_TOKEN = re.compile(r"[a-z0-9]+")


def hashed_bag_of_words(text: str, dim: int, max_chars: int = 100_000) -> np.ndarray:
    """L2-normalized token counts hashed into ``dim`` buckets (float32, values in [0, 1]).

    Only the first ``max_chars`` characters are read, so a huge observation stays cheap.

    Example:
        >>> v = hashed_bag_of_words("Open the drawer. Open it!", 16)
        >>> v.shape, round(float(np.linalg.norm(v)), 5)
        ((16,), 1.0)
        >>> float(hashed_bag_of_words("", 16).sum())
        0.0
    """
    vec = np.zeros(dim, dtype=np.float32)
    for token in _TOKEN.findall(text[:max_chars].lower()):
        bucket = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little") % dim
        vec[bucket] += 1.0
    norm = float(np.linalg.norm(vec))
    if norm > 0:
        vec /= norm
    return vec


def _command_index(action: Any) -> int:
    """The ``Discrete`` action as an int: a Python or NumPy integer, or an integer array of one
    element (what SB3 passes); anything else (bytes, str, float, bool) is a ``TypeError``.

    >>> _command_index(np.array([2])), _command_index(np.int64(1))
    (2, 1)
    """
    if isinstance(action, np.ndarray) and action.size == 1 and np.issubdtype(action.dtype, np.integer):
        return int(action.reshape(()))
    if isinstance(action, (numbers.Integral, np.integer)) and not isinstance(action, (bool, np.bool_)):
        return int(action)
    raise TypeError(
        f"the action must be an integer index into the admissible commands, got {type(action).__name__} {action!r:.60}"
    )


class AdmissibleActionsToDiscrete(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Expose a text env with ``info["admissible_commands"]`` as ``Discrete(K)`` + fixed Box obs.

    Args:
        env: env with text observations (or any obs, via ``text_fn``) and
            ``info["admissible_commands"]`` (list of str) on reset and every step.
        max_actions: K, number of command slots; extra commands are dropped
            (``info["admissible_truncated"]``).
        obs_dim: size of the hashed bag of words of the observation.
        action_dim: size of the per-slot command encoding appended to the obs (0: none).
        text_fn: ``fn(obs, info) -> str`` giving the text to encode (default: ``obs``, which
            must then be a str).
        fallback_command: sent when the env lists no admissible command.

    Raises:
        ValueError: non-positive sizes; TypeError / KeyError at reset/step when the env gives
            no text or no ``admissible_commands``.
    """

    def __init__(
        self,
        env: gym.Env,
        max_actions: int = 32,
        obs_dim: int = 256,
        action_dim: int = 0,
        text_fn: Callable[[Any, Mapping[str, Any]], str] | None = None,
        fallback_command: str = "look",
    ) -> None:
        for name, value, minimum in (
            ("max_actions", max_actions, 1),
            ("obs_dim", obs_dim, 1),
            ("action_dim", action_dim, 0),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
                raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
        gym.utils.RecordConstructorArgs.__init__(
            self,
            max_actions=max_actions,
            obs_dim=obs_dim,
            action_dim=action_dim,
            text_fn=text_fn,
            fallback_command=fallback_command,
        )
        super().__init__(env)
        self.max_actions, self.obs_dim, self.action_dim = max_actions, obs_dim, action_dim
        self.text_fn = text_fn
        self.fallback_command = fallback_command
        self.action_space = spaces.Discrete(max_actions)
        self.observation_space = spaces.Box(0.0, 1.0, shape=(obs_dim + max_actions * action_dim,), dtype=np.float32)
        self._commands: list[str] = []
        self._truncated = False

    @property
    def commands(self) -> list[str]:
        """The admissible commands behind the current slots (slot k -> ``commands[k]``)."""
        return list(self._commands)

    def action_masks(self) -> np.ndarray:
        """Boolean mask over the K slots (True = holds a command), for MaskablePPO."""
        mask = np.zeros(self.max_actions, dtype=bool)
        mask[: max(len(self._commands), 1)] = True
        return mask

    def _encode(self, obs: Any, info: Mapping[str, Any]) -> np.ndarray:
        text = self.text_fn(obs, info) if self.text_fn is not None else obs
        if not isinstance(text, str):
            raise TypeError(
                f"AdmissibleActionsToDiscrete needs text observations, got {type(text).__name__}; pass text_fn=fn(obs, info)->str"
            )
        if "admissible_commands" not in info:
            raise KeyError(
                "AdmissibleActionsToDiscrete needs info['admissible_commands'] (list of str) on reset and every step"
            )
        commands = [str(c) for c in info["admissible_commands"]]
        self._truncated = len(commands) > self.max_actions
        self._commands = commands[: self.max_actions]
        parts = [hashed_bag_of_words(text, self.obs_dim)]
        if self.action_dim:
            slots = np.zeros((self.max_actions, self.action_dim), dtype=np.float32)
            for k, command in enumerate(self._commands):
                slots[k] = hashed_bag_of_words(command, self.action_dim)
            parts.append(slots.reshape(-1))
        return np.concatenate(parts)

    def _info(self, info: Mapping[str, Any], **extra: Any) -> dict[str, Any]:
        out = dict(info)
        out["admissible_truncated"] = self._truncated
        out.update(extra)
        return out

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._encode(obs, info), self._info(info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        k = _command_index(action)
        if not self._commands:
            command, invalid = self.fallback_command, k != 0
        else:
            invalid = not 0 <= k < len(self._commands)
            command = self._commands[k % len(self._commands)]
        obs, reward, terminated, truncated, info = self.env.step(command)
        encoded = self._encode(obs, info)
        return (
            encoded,
            reward,
            terminated,
            truncated,
            self._info(info, adapter_command=command, adapter_invalid_action=invalid),
        )
