"""Canonical observations: a string that identifies the *state* behind an observation.

A canonicalizer is any callable ``fn(obs, info) -> str``. Two observations of the same state
must map to the same string (drop step counters, feedback noise, list order...), and the
function must be deterministic across processes and runs (no ``hash()`` of str, no ``id()``).

Two generic canonicalizers live here; environment-specific ones (ALFWorld, WebShop) live
next to their environments in ``progpo_envs``.

Example:
    >>> import gymnasium as gym
    >>> env = CanonicalizeObservation(gym.make("FrozenLake-v1"))
    >>> obs, info = env.reset(seed=0)
    >>> obs                                   # the agent's observation is unchanged
    0
    >>> len(info["canonical_obs"])            # sha1 hex digest of the encoded int
    40
    >>> default_canonicalizer("You are in a kitchen.", {})
    'You are in a kitchen.'
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable, Mapping
from typing import Any, SupportsFloat

import gymnasium as gym
import numpy as np

__all__ = [
    "Canonicalizer",
    "CanonicalizeObservation",
    "default_canonicalizer",
    "encode_observation",
    "identity_canonicalizer",
    "is_rejected",
]

Canonicalizer = Callable[[Any, Mapping[str, Any]], str]
"""Type of a canonicalizer: ``fn(obs, info) -> str``."""

# Nesting limit for dict/tuple observations: deeper structures are almost surely a bug
# (or a cycle) and would otherwise end in a RecursionError deep inside the encoder.
_MAX_DEPTH = 64


def is_rejected(info: Mapping[str, Any]) -> bool:
    """True when the env rejected the step's action: ``info["valid_action"]`` is present and falsy.

    Such a step leaves the state where it was (no first visit, same canonical observation).
    A missing ``valid_action`` means "not rejected", so envs that do not report it are unaffected.

    Example:
        >>> is_rejected({"valid_action": False}), is_rejected({"valid_action": True}), is_rejected({})
        (True, False, False)
    """
    if not isinstance(info, Mapping) or "valid_action" not in info:
        return False
    value = info["valid_action"]
    try:
        return not bool(value)
    except (TypeError, ValueError):  # an array-like of several flags: not a per-step verdict
        return False


def identity_canonicalizer(obs: Any, info: Mapping[str, Any]) -> str:
    """Return a text observation unchanged.

    Args:
        obs: the observation; must be a ``str``.
        info: the step's info dict (unused).

    Raises:
        TypeError: if ``obs`` is not a ``str``.

    Example:
        >>> identity_canonicalizer("On the table you see a mug.", {})
        'On the table you see a mug.'
    """
    if not isinstance(obs, str):
        raise TypeError(
            f"identity_canonicalizer needs str observations, got {type(obs).__name__}; "
            "use default_canonicalizer (stable hash) or pass your own canonicalizer=fn(obs, info)->str"
        )
    return obs


def _encode(value: Any, out: list[bytes], depth: int) -> None:
    """Append a type-tagged, unambiguous byte encoding of ``value`` to ``out``."""
    if depth > _MAX_DEPTH:
        raise ValueError(f"observation nested deeper than {_MAX_DEPTH} levels (cycle?)")
    if isinstance(value, np.generic) and not isinstance(value, (np.str_, np.bytes_, np.void)):
        value = value.item()  # numpy scalars hash like the Python number they hold
    if value is None:
        out.append(b"N")
    elif isinstance(value, bool):
        out.append(b"B1" if value else b"B0")
    elif isinstance(value, int):
        text = str(value).encode()
        out.append(b"I%d:" % len(text) + text)
    elif isinstance(value, float):
        if math.isnan(value):
            out.append(b"Fnan")  # all NaNs are one state
        else:
            out.append(b"F" + struct.pack("<d", value + 0.0))  # +0.0 folds -0.0 into 0.0
    elif isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        out.append(b"S%d:" % len(data) + data)
    elif isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        out.append(b"Y%d:" % len(data) + data)
    elif isinstance(value, np.ndarray):
        if value.dtype == object:
            out.append(b"O%s:" % repr(value.shape).encode())
            for item in value.reshape(-1):
                _encode(item, out, depth + 1)
        else:
            arr = np.ascontiguousarray(value)
            header = f"A{arr.dtype.str}{arr.shape}:".encode()
            out.append(header + arr.tobytes())
    elif isinstance(value, Mapping):
        try:
            keys = sorted(value.keys())
        except TypeError:
            keys = sorted(value.keys(), key=repr)
        out.append(b"D%d:" % len(keys))
        for key in keys:
            _encode(key, out, depth + 1)
            _encode(value[key], out, depth + 1)
    elif isinstance(value, (tuple, list)):
        out.append((b"T" if isinstance(value, tuple) else b"L") + b"%d:" % len(value))
        for item in value:
            _encode(item, out, depth + 1)
    else:
        raise TypeError(
            f"cannot encode an observation part of type {type(value).__name__}: supported are "
            "str, bytes, int, float, bool, None, numpy arrays/scalars, dicts, tuples and lists"
        )


def encode_observation(obs: Any) -> bytes:
    """Canonical, type-tagged byte encoding of an observation (deterministic across runs).

    Dict keys are sorted; numpy scalars encode like the Python numbers they hold; arrays
    include dtype and shape, so ``np.zeros(2)`` and ``np.zeros((1, 2))`` differ.

    Raises:
        TypeError: for values of an unsupported type (e.g. arbitrary objects, sets).

    Example:
        >>> encode_observation({"b": 1, "a": (2.0, "x")}) == encode_observation({"a": (2.0, "x"), "b": 1})
        True
    """
    out: list[bytes] = []
    _encode(obs, out, 0)
    return b"".join(out)


def default_canonicalizer(obs: Any, info: Mapping[str, Any]) -> str:
    """Identity for ``str`` observations, else the sha1 hex digest of :func:`encode_observation`.

    Works for ``int`` (Discrete), ``np.ndarray`` (Box, MultiDiscrete...), dicts and tuples of
    those. Continuous observations rarely repeat exactly: discretize them first (e.g. with
    ``FirstVisitCoverage(env, key_fn=...)``).

    Raises:
        TypeError: naming ``canonicalizer`` when the observation cannot be encoded.

    Example:
        >>> default_canonicalizer(3, {}) == default_canonicalizer(np.int64(3), {})
        True
        >>> default_canonicalizer(np.array([1, 2]), {}) == default_canonicalizer(np.array([1, 3]), {})
        False
    """
    if isinstance(obs, str):
        return obs
    try:
        data = encode_observation(obs)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"default_canonicalizer cannot hash an observation of type {type(obs).__name__} ({err}); "
            "pass canonicalizer=fn(obs, info) -> str (or key_fn= for FirstVisitCoverage)"
        ) from err
    return hashlib.sha1(data).hexdigest()


class CanonicalizeObservation(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Add ``info["canonical_obs"]`` (a ``str``) on reset and on every step.

    The observation the agent sees is left unchanged; only ``info`` gains one key.

    A step the env rejects (``info["valid_action"] is False``, e.g. ALFWorld's "Nothing
    happens.") leaves the state where it was: its ``canonical_obs`` is the previous one, and
    the canonicalizer is not called. So GiGPO anchors and ``next_state`` see "same state", and
    :class:`~wrappers.coverage.FirstVisitCoverage` never counts it as a first visit. Envs that
    do not report ``valid_action`` (or report it True) are canonicalized on every step.

    Args:
        env: any Gymnasium env.
        canonicalizer: ``fn(obs, info) -> str``; ``None`` uses :func:`default_canonicalizer`
            (identity for text, stable sha1 hash for everything else). ``info`` is the info
            dict the wrapped env returned for ``obs``.

    Raises:
        TypeError: if ``canonicalizer`` is not callable, or (at reset/step) returns a non-str.

    Example:
        >>> import gymnasium as gym
        >>> env = CanonicalizeObservation(gym.make("FrozenLake-v1"), canonicalizer=lambda o, i: f"cell {o}")
        >>> env.reset(seed=0)[1]["canonical_obs"]
        'cell 0'

        A rejected command keeps the previous canonical observation:

        >>> from progpo_envs.rooms import TextRoomsEnv
        >>> env = CanonicalizeObservation(TextRoomsEnv())
        >>> start = env.reset(seed=0)[1]["canonical_obs"]
        >>> obs, *_, info = env.step("fly away")
        >>> obs, info["valid_action"], info["canonical_obs"] == start
        ('Nothing happens.', False, True)
    """

    def __init__(self, env: gym.Env, canonicalizer: Canonicalizer | None = None) -> None:
        if canonicalizer is not None and not callable(canonicalizer):
            raise TypeError(
                f"canonicalizer must be a callable fn(obs, info) -> str or None, got {type(canonicalizer).__name__}"
            )
        gym.utils.RecordConstructorArgs.__init__(self, canonicalizer=canonicalizer)
        super().__init__(env)
        self.canonicalizer: Canonicalizer = canonicalizer or default_canonicalizer
        self._last: str | None = None  # canonical obs of the current state

    def _canonical(self, obs: Any, info: dict[str, Any], rejected: bool = False) -> dict[str, Any]:
        if rejected and self._last is not None:
            info = dict(info)
            info["canonical_obs"] = self._last
            return info
        key = self.canonicalizer(obs, info)
        if not isinstance(key, str):
            raise TypeError(
                f"canonicalizer {getattr(self.canonicalizer, '__name__', self.canonicalizer)!r} "
                f"returned {type(key).__name__}, expected str"
            )
        info = dict(info)
        info["canonical_obs"] = key
        self._last = key
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        self._last = None
        obs, info = self.env.reset(seed=seed, options=options)
        return obs, self._canonical(obs, info)

    def step(self, action: Any) -> tuple[Any, SupportsFloat, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs, reward, terminated, truncated, self._canonical(obs, info, rejected=is_rejected(info))
