"""First-visit coverage: how many new states an episode reached.

Per episode the wrapper keeps the set of state keys seen so far, the reset observation
included. With D distinct keys after T steps:

* ``info["first_visit"]``: this step's resulting observation was not seen before in the episode,
* ``info["coverage"]`` = D - 1 (new states reached since reset),
* ``info["coverage_rate"]`` = (D - 1) / T (0.0 at reset).

The key of an observation is ``key_fn(obs, info)`` when given, else ``info["canonical_obs"]``
(set by :class:`~wrappers.canonicalize.CanonicalizeObservation` or an env-specific
canonicalizer), else :func:`~wrappers.canonicalize.default_canonicalizer` of the raw observation.

Rejected actions are never a first visit. A step the env rejects (``info["valid_action"] is
False``: ALFWorld's "Nothing happens.", an unknown WebShop click) leaves the state where it was:
its key is the previous step's key, ``first_visit`` is False, ``coverage`` does not change, and
``info["canonical_obs"]`` (when present) is the previous state's, so step-level estimators see
"same state" too. Otherwise an agent could earn coverage by spamming invalid commands, whose
feedback text is new once per place. Envs that do not report ``valid_action`` are unaffected.

Example:
    >>> import gymnasium as gym
    >>> env = FirstVisitCoverage(gym.make("FrozenLake-v1", is_slippery=False))
    >>> _, info = env.reset(seed=0)
    >>> info["coverage"], info["first_visit"]
    (0, True)
    >>> _, _, _, _, info = env.step(2)        # right: a new cell
    >>> info["first_visit"], info["coverage"], info["coverage_rate"]
    (True, 1, 1.0)
    >>> _, _, _, _, info = env.step(0)        # left: back to the start cell
    >>> info["first_visit"], info["coverage"], info["coverage_rate"]
    (False, 1, 0.5)

An invalid command on a text env: new feedback text, yet not a new state:

    >>> from progpo_envs.rooms import TextRoomsEnv
    >>> env = FirstVisitCoverage(TextRoomsEnv())
    >>> obs, info = env.reset(seed=0)
    >>> obs, _, _, _, info = env.step("dance")
    >>> obs, info["valid_action"], info["first_visit"], info["coverage"]
    ('Nothing happens.', False, False, 0)
    >>> info["coverage_rate"]                 # the step still counts in T
    0.0
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, SupportsFloat

import gymnasium as gym

from wrappers.canonicalize import default_canonicalizer, is_rejected
from wrappers.signals import coverage_rate

__all__ = ["FirstVisitBonus", "FirstVisitCoverage"]

#: ``key_fn(observation, info) -> hashable``: the state identity first visits are counted on
KeyFn = Callable[[Any, Mapping[str, Any]], Hashable]


class FirstVisitCoverage(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Track the distinct states of each episode and report first visits and coverage in ``info``.

    Args:
        env: any Gymnasium env.
        key_fn: ``fn(obs, info) -> hashable`` that names the state, e.g. a discretizer for
            continuous observations (``lambda o, i: tuple(np.round(o, 1))``). ``None``: use
            ``info["canonical_obs"]`` when present, else ``default_canonicalizer(obs, info)``.

    A step with ``info["valid_action"]`` False is never a first visit: its key is the current
    state's key (``key_fn`` is not called) and ``info["canonical_obs"]``, when present, is
    reset to the current state's canonical observation (see the module docstring).

    Attributes:
        coverage: D - 1 for the current episode.
        num_steps: T, steps taken in the current episode.
        visited: the state keys seen in the current episode (read-only view).

    Raises:
        TypeError: if ``key_fn`` is not callable; at reset/step if the key is unhashable or the
            observation cannot be hashed by the default (message names ``key_fn``).
    """

    def __init__(self, env: gym.Env, key_fn: KeyFn | None = None) -> None:
        if key_fn is not None and not callable(key_fn):
            raise TypeError(f"key_fn must be callable fn(obs, info) -> hashable or None, got {type(key_fn).__name__}")
        gym.utils.RecordConstructorArgs.__init__(self, key_fn=key_fn)
        super().__init__(env)
        self.key_fn = key_fn
        self._visited: set[Hashable] = set()
        self._steps = 0
        self._current_canonical: Any = None  # info["canonical_obs"] of the state the agent is in, if any
        self._has_current = False

    @property
    def coverage(self) -> int:
        return max(len(self._visited) - 1, 0)

    @property
    def num_steps(self) -> int:
        return self._steps

    @property
    def visited(self) -> frozenset[Hashable]:
        return frozenset(self._visited)

    def _key(self, obs: Any, info: Mapping[str, Any]) -> Hashable:
        if self.key_fn is not None:
            key = self.key_fn(obs, info)
        elif "canonical_obs" in info:
            key = info["canonical_obs"]
        else:
            try:
                key = default_canonicalizer(obs, info)
            except TypeError as err:
                raise TypeError(f"{err}; or pass key_fn=fn(obs, info) -> hashable to FirstVisitCoverage") from err
        try:
            hash(key)
        except TypeError as err:
            raise TypeError(f"key_fn returned an unhashable {type(key).__name__}: {err}") from err
        return key

    def _report(self, info: dict[str, Any], first_visit: bool) -> dict[str, Any]:
        info = dict(info)
        info["first_visit"] = first_visit
        info["coverage"] = self.coverage
        info["coverage_rate"] = coverage_rate(self.coverage, self._steps)
        return info

    def _enter(self, info: Mapping[str, Any]) -> None:
        self._current_canonical = info.get("canonical_obs")
        self._has_current = True

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        obs, info = self.env.reset(seed=seed, options=options)
        key = self._key(obs, info)
        self._visited = {key}
        self._steps = 0
        self._enter(info)
        return obs, self._report(info, True)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        self._steps += 1
        if is_rejected(info) and self._has_current:
            # the env refused the action: the agent is still in the state it was in
            info = dict(info)
            if "canonical_obs" in info and self._current_canonical is not None:
                info["canonical_obs"] = self._current_canonical
            return obs, reward, terminated, truncated, self._report(info, False)
        key = self._key(obs, info)
        first = key not in self._visited
        self._visited.add(key)
        self._enter(info)
        return obs, reward, terminated, truncated, self._report(info, first)


class FirstVisitBonus(gym.RewardWrapper, gym.utils.RecordConstructorArgs):
    """Intrinsic reward: ``reward + coef * info["first_visit"]`` (needs FirstVisitCoverage inside).

    Useful to feed the coverage signal to a standard RL algorithm (e.g. SB3 PPO); the extrinsic
    reward stays available as ``info["extrinsic_reward"]``.

    Example:
        >>> import gymnasium as gym
        >>> env = FirstVisitBonus(FirstVisitCoverage(gym.make("FrozenLake-v1", is_slippery=False)), coef=0.1)
        >>> _ = env.reset(seed=0)
        >>> env.step(2)[1]
        0.1
    """

    def __init__(self, env: gym.Env, coef: float = 0.01) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, coef=coef)
        super().__init__(env)
        self.coef = float(coef)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        if "first_visit" not in info:
            raise KeyError("FirstVisitBonus needs info['first_visit']: wrap the env in FirstVisitCoverage first")
        info = dict(info)
        info["extrinsic_reward"] = reward
        return obs, self.reward(reward, info["first_visit"]), terminated, truncated, info

    def reward(self, reward: SupportsFloat, first_visit: bool = False) -> float:
        return float(reward) + self.coef * float(first_visit)
