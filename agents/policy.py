"""The LLM policy: observation -> prompt -> (scored or generated) answer -> env command.

One class per mode, both behind :class:`~agents.policy_base.TrainablePolicy` (``act``,
``compute_logprobs_and_entropy`` of recorded steps, ``behaviour_logprobs``, ``sync``):

* :class:`~agents.score_policy.ScorePolicy` (``mode="score"``): a softmax over the admissible
  commands, each scored by the LM; no backend.
* :class:`~agents.generate_policy.GeneratePolicy` (``mode="generate"``): the backend samples a
  free-text answer in ``fmt``; the parser turns it into a command.

Their options and defaults live in one place, :class:`~agents.policy_base.PolicyOptions` (the
trainer's config takes its defaults from it).

Example:
    >>> from agents.models import make_tiny_model
    >>> model, tok = make_tiny_model()
    >>> policy = make_policy("score", model, tok, env_name="alfworld", options=PolicyOptions(history_k=2))
    >>> type(policy).__name__, policy.history_k
    ('ScorePolicy', 2)
"""

from __future__ import annotations

from typing import Any

from agents.backends.base import SamplingConfig
from agents.generate_policy import GeneratePolicy
from agents.policy_base import LLMPolicy, PolicyOptions, StepOutput, TrainablePolicy
from agents.score_policy import ScorePolicy, repeated_commands

__all__ = [
    "GeneratePolicy",
    "LLMPolicy",
    "POLICY_MODES",
    "PolicyOptions",
    "SamplingConfig",
    "ScorePolicy",
    "StepOutput",
    "TrainablePolicy",
    "make_policy",
    "repeated_commands",
]

#: the policy class of each mode
POLICY_MODES: dict[str, type[LLMPolicy]] = {"score": ScorePolicy, "generate": GeneratePolicy}


def make_policy(mode: str, *args: Any, **kwargs: Any) -> LLMPolicy:
    """The policy of ``mode`` (``"score"`` or ``"generate"``), built from the other arguments as
    :class:`~agents.policy_base.LLMPolicy` takes them (model, tokenizer, backend, env_name, options,
    and option overrides)."""
    if mode not in POLICY_MODES:
        raise ValueError(f"mode must be one of {', '.join(POLICY_MODES)}, got {mode!r}")
    return POLICY_MODES[mode](*args, **kwargs)
