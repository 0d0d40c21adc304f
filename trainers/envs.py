"""Environment factories for the trainer: env + canonicalizer + first-visit coverage.

``make_env_fn(name, split, max_steps)`` returns a picklable zero-argument factory (usable by
``GroupVectorEnv(backend="async")`` workers) building::

    FirstVisitCoverage(CanonicalizeObservation(gym.make(<id>, split=..., max_episode_steps=...), canon))

``name``: ``alfworld`` (``ProGPO-ALFWorld-v0``), ``webshop`` (``ProGPO-WebShop-v0``) or
``rooms`` (the toy :class:`progpo_envs.rooms.TextRoomsEnv`, for tests and quick checks; its
``train`` and ``valid`` splits are the same rooms, and any other split is refused).
:func:`check_split` says in one line, before a run writes anything, that a split does not exist.

>>> env = make_env_fn("rooms", "train", max_steps=5)()
>>> _, info = env.reset(seed=0)
>>> sorted(k for k in ("canonical_obs", "first_visit", "coverage_rate") if k in info)
['canonical_obs', 'coverage_rate', 'first_visit']
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable

import gymnasium as gym

from progpo_envs.alfworld.canonical import canonicalize_alfworld
from progpo_envs.alfworld.games import check_split as check_alfworld_split
from progpo_envs.rooms import TextRoomsEnv
from progpo_envs.webshop.canonical import canonicalize_webshop
from wrappers.canonicalize import CanonicalizeObservation, default_canonicalizer, identity_canonicalizer
from wrappers.coverage import FirstVisitCoverage
from wrappers.errors import UserError

__all__ = [
    "ENV_IDS",
    "ENV_TABLE",
    "EnvInfo",
    "STATE_KEYS",
    "UnknownSplitError",
    "check_split",
    "make_env",
    "make_env_fn",
    "canonicalizer_for",
]


@dataclass(frozen=True)
class EnvInfo:
    """What the trainer knows of one env (a row of :data:`ENV_TABLE`)."""

    gym_id: str | None  # its Gymnasium id; None: the toy env, built directly
    train_split: str  # what ``train_split: auto`` means
    eval_split: str  # what ``eval_split: auto`` means
    splits: tuple[str, ...] | None  # the splits it has; None: its own check (ALFWorld's games)
    extra_eval_split: str | None  # the second held-out split of ``eval_extra_split: auto``
    score_template: str  # the prompt template of ``template: auto`` in score mode
    generate_template: str  # ... in generate mode
    auto_warm_start: bool  # ``init: auto`` clones the expert (score mode)
    expert: str | None  # ``module:Class`` of the agent ``warm_start: bc`` clones; None: no warm start
    expert_name: str | None  # how the report names that agent
    privileged_info: bool  # offers ``info["privileged_text"]`` (``--distill privileged``)

    def make_expert(self) -> Any:
        """A fresh instance of the agent ``warm_start: bc`` clones."""
        if self.expert is None:
            raise ValueError("this env has no expert to clone")
        module, name = self.expert.split(":")
        return getattr(importlib.import_module(module), name)()


#: every env the trainer plays, and what it knows of each: ids, splits, default templates,
#: warm-start experts (WebShop's test split = goals 0-499, train = 500 on; the toy env has one set
#: of rooms: the trainer's train and eval seeds differ)
ENV_TABLE: dict[str, EnvInfo] = {
    "alfworld": EnvInfo(
        "ProGPO-ALFWorld-v0",
        "easy-train",
        "easy-valid",
        None,
        "valid",
        "alfworld-notes",
        "alfworld",
        True,
        "agents.search_expert:ALFWorldSearchAgent",
        "the searching expert",
        True,
    ),
    "webshop": EnvInfo(
        "ProGPO-WebShop-v0",
        "train",
        "test",
        ("train", "test", "all"),
        None,
        "webshop",
        "webshop",
        False,
        "agents.webshop_expert:WebShopInstructionAgent",
        "the instruction-following shopper",
        True,
    ),
    "rooms": EnvInfo(
        None, "train", "valid", ("train", "valid"), None, "alfworld", "alfworld", False, None, None, False
    ),
}
ENV_IDS = {name: info.gym_id for name, info in ENV_TABLE.items() if info.gym_id is not None}


STATE_KEYS = ("canonical", "exact")


class UnknownSplitError(UserError, ValueError):
    """A split the env does not have (said in one line before a run writes anything)."""


def check_split(name: str, split: str) -> None:
    """Raise a one-line error (a :class:`~wrappers.errors.UserError`) unless env ``name`` has ``split``.

    >>> check_split("rooms", "valid")
    >>> check_split("rooms", "hard")
    Traceback (most recent call last):
    ...
    trainers.envs.UnknownSplitError: env rooms has no split 'hard' (splits: train, valid)
    """
    splits = ENV_TABLE[name].splits
    if splits is None:
        check_alfworld_split(split)
        return
    if split not in splits:
        raise UnknownSplitError(f"env {name} has no split {split!r} (splits: {', '.join(splits)})")


def canonicalizer_for(name: str, state_key: str = "canonical") -> Callable[[Any, Any], str]:
    """The state identity behind first-visit coverage: ``canonical``, the env's own canonicalizer
    (identity-like default for the toy env); ``exact``, the raw observation string itself (D =
    distinct observation strings of the episode, as the paper defines it).

    >>> canonicalizer_for("alfworld", "exact")("Nothing happens.", {})
    'Nothing happens.'
    """
    if state_key not in STATE_KEYS:
        raise ValueError(f"state_key must be one of {STATE_KEYS}, got {state_key!r}")
    if state_key == "exact":
        return identity_canonicalizer
    if name == "alfworld":
        return canonicalize_alfworld
    if name == "webshop":
        return canonicalize_webshop

    return default_canonicalizer


def make_env(name: str, split: str, max_steps: int, state_key: str = "canonical", **kwargs: Any) -> gym.Env:
    """Build one wrapped env (see module docs); ``state_key`` picks the canonicalizer
    (:func:`canonicalizer_for`), the one hook through which coverage and anchors get their key."""
    if name == "rooms":
        base: gym.Env = TextRoomsEnv(max_steps=max_steps)
    elif name in ENV_IDS:
        import progpo_envs  # noqa: F401  (registers the ids)

        base = gym.make(ENV_IDS[name], split=split, max_episode_steps=max_steps, **kwargs)
    else:
        raise ValueError(f"unknown env {name!r}; choose alfworld, webshop or rooms")
    return FirstVisitCoverage(CanonicalizeObservation(base, canonicalizer_for(name, state_key)))


def make_env_fn(
    name: str, split: str, max_steps: int, state_key: str = "canonical", **kwargs: Any
) -> Callable[[], gym.Env]:
    """Picklable factory of :func:`make_env`."""
    return functools.partial(make_env, name, split, max_steps, state_key, **kwargs)
