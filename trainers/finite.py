"""Stopping at the first non-finite number of an update, before anything non-finite is saved.

A NaN or an infinity in an advantage, a loss, a gradient or a weight poisons every later
iteration: saved, it would become the run's ``latest`` checkpoint and prune the last good one.
Each stage checks its own output and raises :class:`NonFiniteError`; the trainer adds the
estimator and the iteration, and the run stops with one line, its last checkpoint finite.

>>> check_finite("advantage", np.array([0.5, -0.5]))
>>> check_finite("advantage", np.array([0.5, np.nan]))
Traceback (most recent call last):
...
trainers.finite.NonFiniteError: non-finite advantage (1 of 2 values)
"""

from __future__ import annotations

from typing import Iterable

import numpy as np
import torch

from wrappers.errors import UserError

__all__ = ["EstimatorTermError", "NonFiniteError", "check_finite", "check_finite_weights"]


class NonFiniteError(UserError):
    """An advantage, a loss, a gradient or a weight of the update is NaN or infinite.

    Attributes:
        what: which of them (``"advantage"``, ``"loss"``, ``"gradient"``, ``"weight"``).
    """

    def __init__(self, what: str, detail: str = "", context: str = "") -> None:
        self.what, self.detail = what, detail
        text = f"non-finite {what}{f' ({detail})' if detail else ''}"
        super().__init__(f"{context}: {text}" if context else text)

    def within(self, context: str) -> NonFiniteError:
        """The same error with ``context`` (the iteration, the estimator, what was kept) in front."""
        return NonFiniteError(self.what, self.detail, context)


class EstimatorTermError(UserError, ValueError):
    """An estimator's term returned what no advantage can be made of
    (:class:`trainers.advantages.registry.TermError`), as the trainer says it: one line."""


def check_finite(what: str, values: np.ndarray | float) -> None:
    """:class:`NonFiniteError` naming ``what`` where any of ``values`` is NaN or infinite."""
    arr = np.asarray(values, dtype=np.float64)
    bad = int(arr.size - np.isfinite(arr).sum())
    if bad:
        raise NonFiniteError(what, f"{bad} of {arr.size} values")


def check_finite_weights(params: Iterable[torch.Tensor]) -> None:
    """:class:`NonFiniteError` where any weight of ``params`` is NaN or infinite."""
    params = list(params)
    bad = sum(1 for p in params if not bool(torch.isfinite(p.detach()).all()))
    if bad:
        raise NonFiniteError("weight", f"{bad} of {len(params)} parameter tensors")
