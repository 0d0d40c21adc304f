"""A tiny CPU trainer config for the tests: the toy rooms env, the tiny model, no progress bars.

The configs are written as the trainer's own command line (``python -m trainers.progpo`` flags),
so a test reads as the run a user would start.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from trainers.config import TrainConfig
from trainers.config_flags import parse_args

#: no progress bars, no TensorBoard
QUIET = "--no-progress-bars --no-tensorboard"
#: small sizes, quiet, the synchronous env backend, no random-policy baseline
TINY_FLAGS = (
    "--env rooms --model tiny --iterations 2 --num-groups 2 --group-size 2 --max-steps 4 --eval-episodes 2 "
    f"{QUIET} --device cpu --no-lora --history-k 2 --lr 1e-3 --env-backend sync --no-baseline-random --bc-steps 5"
)


def config_from_flags(flags: str = "", **overrides: Any) -> TrainConfig:
    """The ``TrainConfig`` of the command line ``flags``, with the given fields then replaced."""
    cfg, _ = parse_args(flags.split())
    return dataclasses.replace(cfg, **overrides)


def config_for_tests(flags: str = "", **overrides: Any) -> TrainConfig:
    """The tiny config (:data:`TINY_FLAGS`) with ``flags`` on top and the given fields replaced."""
    return config_from_flags(f"{TINY_FLAGS} {flags}", **overrides)
