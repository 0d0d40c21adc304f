"""A tiny CPU trainer config for the tests: the toy rooms env, the tiny model, no progress bars."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainers.config import TrainConfig


def config_for_tests(**overrides: Any) -> TrainConfig:
    """``TrainConfig`` with small sizes, no TensorBoard and the given fields replaced."""
    base = dict(
        env="rooms",
        model="tiny",
        iterations=2,
        num_groups=2,
        group_size=2,
        max_steps=4,
        eval_episodes=2,
        progress_bars=False,
        tensorboard=False,
        device="cpu",
        lora=False,
        history_k=2,
        lr=1e-3,
        env_backend="sync",
        baseline_random=False,
        bc_steps=5,
    )
    base.update(overrides)
    return dataclasses.replace(TrainConfig(), **base)
