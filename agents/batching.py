"""How decisions are grouped into forward passes: by count, or by a budget of padded token positions.

One home for the chunking helpers of acting (:func:`agents.logprobs.packed_candidate_logprobs`),
of the trainer's old / reference log-probs and of the PPO update's micro-batches.

Example:
    >>> chunks(range(5), 2)
    [[0, 1], [2, 3], [4]]
    >>> token_chunks([3, 3, 5, 1], 10)   # rows x longest row <= 10
    [[0, 1], [2, 3]]
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

__all__ = ["chunks", "decision_key", "decision_tokens", "step_key", "step_tokens", "token_chunks"]


def chunks(items: Iterable[int], size: int) -> list[list[int]]:
    """``items`` in consecutive chunks of ``size`` (the last one shorter)."""
    items = list(items)
    size = max(1, int(size))
    return [items[i : i + size] for i in range(0, len(items), size)]


def decision_tokens(prompt: Sequence[int], continuations: Sequence[Sequence[int]]) -> int:
    """Token positions one decision takes in a packed row: its prompt once, then every candidate
    (score mode) or its response (generate mode).

    >>> decision_tokens([1, 2, 3], [[4], [5, 6]])
    6
    """
    return len(prompt) + sum(len(c) for c in continuations)


def _parts(step: Any) -> tuple[Sequence[int], Sequence[Sequence[int]]]:
    """A recorded step's prompt and what follows it in its forward pass: its candidates, or its
    response when it has none (a scripted step has neither)."""
    continuations = getattr(step, "candidate_ids", None)
    if continuations is None:
        continuations = [getattr(step, "response_ids", None) or ()]
    return getattr(step, "prompt_ids", None) or (), continuations


def step_tokens(step: Any) -> int:
    """:func:`decision_tokens` of a recorded step (a ``StepOutput``): its prompt and its candidates,
    or its response when it has no candidates; at least 1 (a scripted step has no tokens).

    >>> from types import SimpleNamespace as S
    >>> step_tokens(S(prompt_ids=[1, 2], candidate_ids=[[3], [4, 5]])), step_tokens(S(action="look"))
    (5, 1)
    """
    return max(1, decision_tokens(*_parts(step)))


def step_key(step: Any) -> tuple:
    """What a step's forward pass computes: (prompt, candidates) or (prompt, response). Steps with
    one key share one computation; sorted keys put prompts with a common prefix side by side.

    >>> from types import SimpleNamespace as S
    >>> step_key(S(prompt_ids=[1, 2], candidate_ids=[[3], [4]])), step_key(S(action="look"))
    (((1, 2), ((3,), (4,))), ((), ((),)))
    """
    return decision_key(*_parts(step))


def decision_key(prompt: Sequence[int], continuations: Sequence[Sequence[int]]) -> tuple:
    """The hashable identity of one (prompt, continuations) pair.

    >>> decision_key([1, 2], [[3]])
    ((1, 2), ((3,),))
    """
    return tuple(prompt), tuple(tuple(c) for c in continuations)


def token_chunks(sizes: Sequence[int], max_tokens: int) -> list[list[int]]:
    """Consecutive index chunks whose padded cost (rows x longest row) stays within ``max_tokens``;
    an item over the budget on its own gets a chunk of its own.

    >>> token_chunks([12, 1], 10), token_chunks([], 10)
    ([[0], [1]], [])
    """
    out: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i, n in enumerate(sizes):
        wider = max(width, int(n))
        if current and wider * (len(current) + 1) > max_tokens:
            out.append(current)
            current, wider = [], int(n)
        current.append(i)
        width = wider
    if current:
        out.append(current)
    return out
