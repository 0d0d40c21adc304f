"""Log-probabilities of the distribution a sampler actually draws from, and batched scoring.

:func:`processed_log_softmax` applies temperature and top-p exactly as the transformers
backend does when it samples; :func:`sequence_logprobs` runs one (optionally differentiable)
forward pass over prompt + response pairs and returns per-token log-probs under that same
processing. Using both for sampling and for the PPO update makes the first ratio exactly 1.

Example:
    >>> import torch
    >>> lp = processed_log_softmax(torch.tensor([[2.0, 1.0, -3.0]]), temperature=1.0, top_p=0.7)
    >>> lp.exp().round(decimals=3).tolist()   # the last two tokens fall outside the nucleus
    [[1.0, 0.0, 0.0]]
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

__all__ = ["candidate_logprobs", "logprob_mismatch", "processed_log_softmax", "sequence_logprobs"]


def processed_log_softmax(
    logits: torch.Tensor,
    temperature: float = 1.0,
    top_p: float = 1.0,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """Log-softmax of ``logits / temperature`` restricted to the top-p nucleus.

    Args:
        logits: ``[..., V]``; computed in float32 whatever the input dtype.
        temperature: 0 is treated as 1 (greedy decoding records untempered log-probs).
        top_p: nucleus mass; a token is kept when the probability mass of the tokens ranked
            above it is below ``top_p`` (the most likely token is always kept).
        keep: optional ``[...]`` token ids forced into the nucleus (the sampled tokens), so
            that a tie at the nucleus boundary can never give ``-inf``.
    """
    x = logits.float()
    if temperature not in (0, 1, 0.0, 1.0):
        x = x / float(temperature)
    if top_p < 1.0:
        sorted_x, order = torch.sort(x, dim=-1, descending=True)
        probs = torch.softmax(sorted_x, dim=-1)
        before = torch.cumsum(probs, dim=-1) - probs
        drop_sorted = before >= top_p
        drop_sorted[..., 0] = False
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        if keep is not None:
            drop = drop.scatter(-1, keep.unsqueeze(-1), False)
        x = x.masked_fill(drop, float("-inf"))
    return torch.log_softmax(x, dim=-1)


def _entropy(logp: torch.Tensor) -> torch.Tensor:
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(logp)).sum(-1)


def sequence_logprobs(
    model: Any,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    pad_token_id: int,
    temperature: float = 1.0,
    top_p: float = 1.0,
    with_entropy: bool = False,
    batch_size: int = 16,
) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """Per-token log-probs (and entropies) of each response given its prompt.

    Runs under the caller's grad mode: inside ``torch.no_grad()`` it is a cheap scorer, outside
    it returns tensors that backpropagate into ``model``. Sequences are left-padded (positions
    counted from the first real token, as in generation) and only the logits of the response
    positions are materialized (``logits_to_keep``).

    Returns:
        ``(logprobs, entropies)``: lists of 1-D tensors of length ``len(responses[i])``;
        ``entropies`` is ``None`` unless ``with_entropy``.
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    device = next(model.parameters()).device
    out_lp: list[torch.Tensor] = []
    out_ent: list[torch.Tensor] = []
    for start in range(0, len(prompts), max(1, batch_size)):
        chunk_p = prompts[start: start + batch_size]
        chunk_r = responses[start: start + batch_size]
        seqs = [list(p) + list(r) for p, r in zip(chunk_p, chunk_r)]
        if any(len(p) == 0 for p in chunk_p):
            raise ValueError("every prompt needs at least one token")
        width = max(len(s) for s in seqs)
        r_max = max(len(r) for r in chunk_r)
        ids = torch.full((len(seqs), width), pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(seqs), width), dtype=torch.long)
        for i, s in enumerate(seqs):
            ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
        ids, mask = ids.to(device), mask.to(device)
        if r_max == 0:
            out_lp += [torch.zeros(0, device=device) for _ in seqs]
            out_ent += [torch.zeros(0, device=device) for _ in seqs]
            continue
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        logits = _forward(model, ids, mask, pos, r_max + 1)[:, -(r_max + 1): -1, :]
        targets = ids[:, width - r_max:]
        logp = processed_log_softmax(logits, temperature, top_p, keep=targets)
        tok_lp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        ent = _entropy(logp) if with_entropy else None
        for i, r in enumerate(chunk_r):
            n = len(r)
            out_lp.append(tok_lp[i, r_max - n:])
            if ent is not None:
                out_ent.append(ent[i, r_max - n:])
    return out_lp, (out_ent if with_entropy else None)


def candidate_logprobs(
    model: Any,
    prompt: Sequence[int],
    candidates: Sequence[Sequence[int]],
    *,
    pad_token_id: int,
    temperature: float = 1.0,
    batch_size: int = 64,
) -> list[torch.Tensor]:
    """Per-token log-probs of several continuations of ONE prompt, encoding the prompt once.

    The prompt and the candidates are packed into one sequence with a tree-shaped 4-D attention
    mask (each candidate sees the prompt and its own earlier tokens; positions restart after
    the prompt for each candidate), so scoring K commands of ~10 tokens after a 500-token
    prompt costs ~500 + 10 K token positions instead of ~510 K, with or without grad. Equal to
    :func:`sequence_logprobs` up to float rounding (~1e-6). Flash-attention models (no 4-D
    masks) fall back to :func:`sequence_logprobs`. ``batch_size`` candidates share one pass.
    """
    if not candidates:
        return []
    if len(prompt) == 0:
        raise ValueError("the prompt needs at least one token")
    if any(len(c) == 0 for c in candidates):
        raise ValueError("every candidate needs at least one token")
    impl = str(getattr(getattr(model, "config", None), "_attn_implementation", "") or "")
    if "flash" in impl:
        return sequence_logprobs(model, [prompt] * len(candidates), candidates, pad_token_id=pad_token_id,
                                 temperature=temperature, batch_size=batch_size)[0]
    device = next(model.parameters()).device
    n_prompt = len(prompt)
    results: list[torch.Tensor] = []
    for start in range(0, len(candidates), max(1, batch_size)):
        chunk = [list(c) for c in candidates[start: start + batch_size]]
        total = n_prompt + sum(len(c) for c in chunk)
        allowed = torch.zeros((total, total), dtype=torch.bool)
        allowed[:n_prompt, :n_prompt] = torch.ones((n_prompt, n_prompt), dtype=torch.bool).tril()
        positions = list(range(n_prompt))
        rows: list[list[int]] = []  # logit rows predicting each candidate's tokens
        offset = n_prompt
        for c in chunk:
            n = len(c)
            allowed[offset: offset + n, :n_prompt] = True
            allowed[offset: offset + n, offset: offset + n] = torch.ones((n, n), dtype=torch.bool).tril()
            positions += range(n_prompt, n_prompt + n)
            rows.append([n_prompt - 1] + list(range(offset, offset + n - 1)))
            offset += n
        ids = torch.tensor([list(prompt) + [t for c in chunk for t in c]], dtype=torch.long, device=device)
        keep = total - n_prompt + 1  # logits of rows n_prompt-1 .. total-1
        logits = _forward(model, ids, allowed[None, None].to(device),
                          torch.tensor([positions], dtype=torch.long, device=device), keep)[0, -keep:]
        logp = processed_log_softmax(logits, temperature, 1.0)
        for c, r in zip(chunk, rows):
            idx = torch.tensor([x - (n_prompt - 1) for x in r], dtype=torch.long, device=device)
            tgt = torch.tensor(c, dtype=torch.long, device=device)
            results.append(logp[idx, tgt])
    return results


def _forward(model: Any, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, keep: int) -> torch.Tensor:
    try:
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False,
                    logits_to_keep=keep)
    except TypeError:  # models without logits_to_keep
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False)
    return out.logits


def logprob_mismatch(old: Sequence[Any], new: Sequence[Any]) -> dict[str, float]:
    """How far the sampler's log-probs are from the trainer's, over every response token.

    ``old[i]`` / ``new[i]``: per-token log-probs of step ``i``'s response (lists or tensors of
    equal length), e.g. the rollout engine's (vLLM) ``old_logprobs`` and the trainer's
    recompute of the same tokens. Returns ``logprob_mismatch_max`` / ``_mean`` (of
    ``|old - new|``, nats) and ``logprob_mismatch_tokens`` (how many tokens were compared; 0
    gives zeros). The PPO ratio of a token starts at ``exp(new - old)`` when ``old`` is not
    recomputed, so a max of 0.18 means some ratios start ~20% away from 1.

    >>> logprob_mismatch([[-1.0, -2.0], [-0.5]], [torch.tensor([-1.0, -2.5]), torch.tensor([-0.25])])
    {'logprob_mismatch_max': 0.5, 'logprob_mismatch_mean': 0.25, 'logprob_mismatch_tokens': 3.0}
    """
    if len(old) != len(new):
        raise ValueError(f"{len(old)} old and {len(new)} new log-prob sequences")
    parts = []
    for i, (a, b) in enumerate(zip(old, new)):
        a_t = torch.as_tensor(a, dtype=torch.float64).detach().reshape(-1).cpu()
        b_t = torch.as_tensor(b.detach() if isinstance(b, torch.Tensor) else b, dtype=torch.float64).reshape(-1).cpu()
        if a_t.numel() != b_t.numel():
            raise ValueError(f"step {i}: {a_t.numel()} old and {b_t.numel()} new log-probs")
        parts.append((a_t - b_t).abs())
    diff = torch.cat(parts) if parts else torch.zeros(0, dtype=torch.float64)
    finite = diff[torch.isfinite(diff)]
    if finite.numel() < diff.numel():  # -inf on one side only: report it, do not hide it
        return {"logprob_mismatch_max": float("inf"), "logprob_mismatch_mean": float("inf"),
                "logprob_mismatch_tokens": float(diff.numel())}
    if diff.numel() == 0:
        return {"logprob_mismatch_max": 0.0, "logprob_mismatch_mean": 0.0, "logprob_mismatch_tokens": 0.0}
    return {"logprob_mismatch_max": float(diff.max()), "logprob_mismatch_mean": float(diff.mean()),
            "logprob_mismatch_tokens": float(diff.numel())}
