"""The policy contract shared by the rollout, the evaluation and the trainer.

:class:`Policy` is what playing needs (``act``: one :class:`StepOutput` per observation; the
rollout, the evaluation and scripted baselines use nothing else); :class:`TrainablePolicy` adds
what training needs. Only the standard library is imported here (torch for type hints only), so
the rollout stays light.

Example (a scripted policy):
    >>> class Last:
    ...     def act(self, observations, infos, histories=None, *, seed=None):
    ...         return [StepOutput(action=i["admissible_commands"][-1]) for i in infos]
    >>> [out] = Last().act(["a room"], [{"admissible_commands": ["look", "go to desk 1"]}])
    >>> out.action, out.valid, out.penalty, out.response_ids
    ('go to desk 1', True, 0.0, [])
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Optional, Protocol, Sequence

if TYPE_CHECKING:
    import torch

__all__ = ["Histories", "Infos", "Observations", "Policy", "StepOutput", "TrainablePolicy", "scoring_with"]

#: One batch's observations, one per env (the arguments of :meth:`Policy.act`).
Observations = Sequence[str]
#: Each env's info dict (``admissible_commands``, ``task_type`` ...).
Infos = Sequence[dict[str, Any]]
#: Each env's earlier (observation, action) pairs, or ``None`` for none.
Histories = Optional[Sequence[Sequence[tuple[str, str]]]]


@dataclass(kw_only=True)
class StepOutput:
    """Everything one decision produced (one env step = one prompt/response pair).

    A scripted policy fills ``action`` alone (``StepOutput(action="look")``: valid, no penalty,
    no tokens); the LLM policies fill every field their mode has.

    Attributes:
        prompt_ids: prompt token ids.
        response_ids: response token ids (score mode: the chosen command's ``<action>..</action>``).
        old_logprobs: log-prob of each response token under the distribution sampled from.
        text: the decoded response.
        action: the string to send to the env.
        valid: whether the answer parsed (score mode: always, unless there was no candidate).
        penalty: ``invalid_penalty`` for an invalid answer, else 0.
        reason: the parser's reason (``"ok"`` ...).
        finish_reason: ``"stop"`` / ``"length"`` (generate mode), ``"score"`` (score mode).
        candidates: score mode only -- the commands scored.
        candidate_ids: score mode only -- their response token ids.
        chosen_index: score mode only -- the index drawn.
        old_action_logprob: score mode only -- the log-prob of the drawn command under the
            candidate softmax.
    """

    action: str
    prompt_ids: list[int] = field(default_factory=list)
    response_ids: list[int] = field(default_factory=list)
    old_logprobs: list[float] = field(default_factory=list)
    text: str = ""
    valid: bool = True
    penalty: float = 0.0
    reason: str = "ok"
    finish_reason: str = ""
    candidates: list[str] | None = None
    candidate_ids: list[list[int]] | None = None
    chosen_index: int | None = None
    old_action_logprob: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Policy(Protocol):
    """What playing needs from a policy: one recorded decision per observation."""

    def act(
        self, observations: Observations, infos: Infos, histories: Histories = None, *, seed: int | None = None
    ) -> list[StepOutput]:
        """``histories[i]``: env i's earlier (observation, action) pairs; ``seed`` fixes the sampling."""
        ...


class TrainablePolicy(Policy, Protocol):
    """What the trainer needs from a policy (both LLM modes and the tests' small fakes meet it)."""

    model: Any

    def compute_logprobs_and_entropy(
        self, steps: Sequence[Any], batch_size: int | None = None, with_entropy: bool = True
    ) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Log-probs with grad of recorded steps under the live model (entropies when asked)."""
        ...

    def behaviour_logprobs(self, step: Any) -> torch.Tensor:
        """The log-probs recorded when ``step`` was taken, shaped like the live ones."""
        ...

    def sync(self) -> None:
        """Act with the trained weights from now on."""
        ...


@contextlib.contextmanager
def scoring_with(policy: TrainablePolicy, model: Any) -> Iterator[None]:
    """Within the block ``policy`` scores with ``model`` (a frozen reference, an EMA teacher), then
    with its own model again."""
    live = policy.model
    policy.model = model
    try:
        yield
    finally:
        policy.model = live
