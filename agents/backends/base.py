"""The generation-backend interface shared by the transformers and vLLM backends.

A backend turns batches of prompt token ids into sampled responses and reports, for every
sampled token, its log-probability under the distribution it was actually drawn from (after
temperature and top-p). The policy stores those as PPO's ``old_logprobs``.

Example:
    >>> cfg = SamplingConfig(temperature=0.7, max_new_tokens=32)
    >>> cfg.stop
    ('</action>',)
    >>> SamplingConfig(top_p=0.0)
    Traceback (most recent call last):
    ...
    ValueError: top_p must be in (0, 1], got 0.0
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, Sequence, runtime_checkable

__all__ = ["FINISH_REASONS", "Generation", "GenerationBackend", "SamplingConfig"]

#: ``"stop"``: EOS or a stop string was produced; ``"length"``: ``max_new_tokens`` reached.
FINISH_REASONS = ("stop", "length")


@dataclass(frozen=True)
class SamplingConfig:
    """Sampling parameters.

    Attributes:
        temperature: softmax temperature; ``0`` means greedy decoding (the recorded log-probs
            are then those of the untempered distribution).
        top_p: nucleus mass in (0, 1]; 1 disables it.
        max_new_tokens: response length limit.
        min_new_tokens: EOS and stop strings end a response only from this length on (with
            ``min_new_tokens == max_new_tokens`` every response has that length: fixed-shape
            speed measurements).
        stop: strings that end a response; the stop string is kept in the response.
        n: samples per prompt; results come prompt-major (prompt 0's n samples first).
    """

    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 128
    stop: tuple[str, ...] = ("</action>",)
    n: int = 1
    min_new_tokens: int = 0

    def __post_init__(self) -> None:
        if not (
            isinstance(self.temperature, (int, float)) and math.isfinite(self.temperature) and self.temperature >= 0
        ):
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature!r}")
        if not (0.0 < float(self.top_p) <= 1.0):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")
        if int(self.max_new_tokens) < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens!r}")
        if not 0 <= int(self.min_new_tokens) <= int(self.max_new_tokens):
            raise ValueError(
                f"min_new_tokens must be in [0, max_new_tokens={self.max_new_tokens}], got {self.min_new_tokens!r}"
            )
        if int(self.n) < 1:
            raise ValueError(f"n must be >= 1, got {self.n!r}")
        stop = (self.stop,) if isinstance(self.stop, str) else tuple(self.stop or ())
        if any(not isinstance(s, str) or not s for s in stop):
            raise ValueError(f"stop strings must be non-empty strings, got {self.stop!r}")
        object.__setattr__(self, "stop", stop)

    @property
    def greedy(self) -> bool:
        return self.temperature == 0

    def with_(self, **changes: Any) -> "SamplingConfig":
        """A copy with some fields changed."""
        return replace(self, **changes)


@dataclass
class Generation:
    """One sampled response.

    Attributes:
        prompt_ids: the prompt's token ids (no padding).
        response_ids: sampled token ids, including a final EOS token when one was sampled.
        logprobs: log-prob of each response token under the distribution sampled from.
        text: the response decoded without special tokens.
        finish_reason: one of :data:`FINISH_REASONS`.
    """

    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    text: str
    finish_reason: str = "length"
    extra: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class GenerationBackend(Protocol):
    """What the policy needs from a generation engine."""

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], cfg: SamplingConfig, *, seed: int | None = None
    ) -> list[Generation]:
        """Sample ``cfg.n`` responses per prompt (prompt-major order); ``seed`` makes it repeatable."""
        ...

    def sync_weights(self, model: Any) -> None:
        """Make the engine sample from ``model``'s current weights."""
        ...
