"""Policy adapters over ``agents.policy.LLMPolicy`` (no copies of its logic).

:func:`length_normalized` makes score mode rank commands by their *mean* token log-probability
instead of the sum. With the sum, an untrained model prefers the shortest commands
(``look``, ``help``: every extra token costs ~log|V| nats), so all G members of a group take the
same actions and no group-relative signal exists; the mean gives every command a fair start.
"""
from __future__ import annotations

from typing import Any

import torch

__all__ = ["length_normalized"]


def length_normalized(policy: Any) -> Any:
    """Return ``policy`` with per-candidate log-probs divided by the candidate's token count.

    Works on an ``LLMPolicy`` in score mode by wrapping its ``_score`` hook (used both when acting
    and in ``compute_logprobs``), so the candidate softmax is over mean token log-probs.
    """
    inner = policy._score

    def _score_mean(prompt: list[int], candidate_ids: list[list[int]], *args: Any, **kwargs: Any) -> list[torch.Tensor]:
        return [t / max(int(t.numel()), 1) for t in inner(prompt, candidate_ids, *args, **kwargs)]

    policy._score = _score_mean
    policy.score_norm = "mean"
    return policy
