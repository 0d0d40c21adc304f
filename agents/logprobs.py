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

# Over 500 lines: the sampler's exact log-probs and the batched scoring that must agree with them, kept side
# by side.
from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import torch

from agents.batching import token_chunks

__all__ = [
    "candidate_logprobs",
    "chunked_head_logprobs",
    "head_inputs",
    "left_padded",
    "logprob_mismatch",
    "packed_candidate_logprobs",
    "processed_log_softmax",
    "sequence_distributions",
    "sequence_logprobs",
]


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


def left_padded(
    seqs: Sequence[Sequence[int]], width: int, pad_token_id: int, device: Any
) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and attention mask of ``seqs`` left-padded to ``width``, on ``device`` (as the
    backends and the log-prob passes feed a batch of prompts).

    >>> ids, mask = left_padded([[5, 6], [7]], 3, pad_token_id=0, device="cpu")
    >>> ids.tolist(), mask.tolist()
    ([[0, 5, 6], [0, 0, 7]], [[0, 1, 1], [0, 0, 1]])
    """
    ids = torch.full((len(seqs), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, width - len(s) :] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s) :] = 1
    return ids.to(device), mask.to(device)


def _entropy(logp: torch.Tensor) -> torch.Tensor:
    # the tokens outside the nucleus (-inf) add nothing; masking the log-prob rather than the
    # product keeps their gradient 0 (0 * -inf in the backward pass of a where() would be nan)
    safe = logp.masked_fill(torch.isneginf(logp), 0.0)
    return -(logp.exp() * safe).sum(-1)


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
    logit_chunk: int = 0,
) -> tuple[list[torch.Tensor], list[torch.Tensor] | None]:
    """Per-token log-probs (and entropies) of each response given its prompt.

    Runs under the caller's grad mode: inside ``torch.no_grad()`` it is a cheap scorer, outside
    it returns tensors that backpropagate into ``model``. Sequences are left-padded (positions
    counted from the first real token, as in generation) and only the logits of the response
    positions are materialized (``logits_to_keep``).

    ``logit_chunk > 0`` never materializes them whole either: the output head and the log-softmax
    run over ``logit_chunk`` response positions at a time (:func:`chunked_head_logprobs`; each
    chunk recomputed in the backward pass), so a pass holds ``logit_chunk x V`` logits instead of
    ``batch x response x V``. Equal to the whole pass up to float rounding.

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
        chunk_p = prompts[start : start + batch_size]
        chunk_r = responses[start : start + batch_size]
        seqs = [list(p) + list(r) for p, r in zip(chunk_p, chunk_r)]
        if any(len(p) == 0 for p in chunk_p):
            raise ValueError("every prompt needs at least one token")
        width = max(len(s) for s in seqs)
        r_max = max(len(r) for r in chunk_r)
        ids, mask = left_padded(seqs, width, pad_token_id, device)
        if r_max == 0:
            out_lp += [torch.zeros(0, device=device) for _ in seqs]
            out_ent += [torch.zeros(0, device=device) for _ in seqs]
            continue
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        targets = ids[:, width - r_max :]
        if logit_chunk > 0:
            hidden = head_inputs(model, ids, mask, pos, r_max + 1)[:, :-1]
            tok_lp, ent = chunked_head_logprobs(
                hidden,
                model.get_output_embeddings(),
                targets,
                temperature,
                top_p,
                chunk=logit_chunk,
                with_entropy=with_entropy,
            )
        else:
            logits = _forward(model, ids, mask, pos, r_max + 1)[:, -(r_max + 1) : -1, :]
            logp = processed_log_softmax(logits, temperature, top_p, keep=targets)
            tok_lp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
            ent = _entropy(logp) if with_entropy else None
        for i, r in enumerate(chunk_r):
            n = len(r)
            out_lp.append(tok_lp[i, r_max - n :])
            if ent is not None:
                out_ent.append(ent[i, r_max - n :])
    return out_lp, (out_ent if with_entropy else None)


def head_inputs(model: Any, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, keep: int) -> torch.Tensor:
    """The last hidden states of the final ``keep`` positions: what the output head turns into logits.

    Taken through the model's own forward (``output_hidden_states``, one logit row kept), so
    wrappers (LoRA, compile) see an ordinary call. The one row of logits the model does compute
    is checked against the output head applied to the hidden state it returned: a model whose
    logits are more than ``head(hidden)`` (soft-capping, a logit scale) is refused, loudly.
    """
    out = model(
        input_ids=ids,
        attention_mask=mask,
        position_ids=pos,
        use_cache=False,
        output_hidden_states=True,
        logits_to_keep=1,
    )
    hidden = out.hidden_states[-1]
    with torch.no_grad():
        mine = model.get_output_embeddings()(hidden[:, -1:]).float()
        if not torch.allclose(mine, out.logits.float(), rtol=1e-3, atol=1e-3):
            raise ValueError(
                f"logit_chunk: {type(model).__name__}'s logits are not its output head applied to its "
                "last hidden state (soft-capping or a logit scale?); use logit chunks of 0"
            )
    return hidden[:, -keep:]


def chunked_head_logprobs(
    hidden: torch.Tensor,
    head: Any,
    targets: torch.Tensor,
    temperature: float = 1.0,
    top_p: float = 1.0,
    *,
    chunk: int = 1024,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probs of ``targets`` (and entropies) under ``head(hidden)`` processed as
    :func:`processed_log_softmax`, ``chunk`` positions at a time.

    Under grad each chunk is checkpointed: the backward pass recomputes its logits, so at most one
    chunk's ``[chunk, V]`` logits exist at a time, forward or backward.

    Args:
        hidden: ``[B, R, H]`` hidden states; position ``r`` predicts ``targets[:, r]``.
        head: the output projection (``model.get_output_embeddings()``).
        targets: ``[B, R]`` token ids.

    Returns:
        ``([B, R] log-probs, [B, R] entropies or None)``.

    >>> import torch
    >>> head = torch.nn.Linear(4, 6, bias=False)
    >>> hidden, targets = torch.randn(2, 3, 4), torch.tensor([[0, 5, 2], [1, 1, 3]])
    >>> lp, _ = chunked_head_logprobs(hidden, head, targets, chunk=2)
    >>> whole = torch.log_softmax(head(hidden), -1).gather(-1, targets[..., None])[..., 0]
    >>> bool(torch.allclose(lp, whole, atol=1e-6))
    True
    """
    from torch.utils.checkpoint import checkpoint  # activation checkpointing's module: loaded where a head is chunked

    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    b, r, h = hidden.shape
    flat_h, flat_t = hidden.reshape(b * r, h), targets.reshape(b * r)

    def piece(x: torch.Tensor, t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logp = processed_log_softmax(head(x), temperature, top_p, keep=t)
        lp = logp.gather(-1, t.unsqueeze(-1)).squeeze(-1)
        return lp, (_entropy(logp) if with_entropy else lp.new_zeros(0))

    recompute = torch.is_grad_enabled() and (flat_h.requires_grad or any(p.requires_grad for p in head.parameters()))
    lps, ents = [], []
    for s in range(0, b * r, chunk):
        x, t = flat_h[s : s + chunk], flat_t[s : s + chunk]
        lp, ent = checkpoint(piece, x, t, use_reentrant=False) if recompute else piece(x, t)
        lps.append(lp)
        ents.append(ent)
    lp_all = torch.cat(lps).reshape(b, r) if lps else flat_h.new_zeros(b, r)
    return lp_all, (torch.cat(ents).reshape(b, r) if with_entropy and ents else None)


def sequence_distributions(
    model: Any,
    prompts: Sequence[Sequence[int]],
    responses: Sequence[Sequence[int]],
    *,
    pad_token_id: int,
    temperature: float = 1.0,
    batch_size: int = 16,
) -> list[torch.Tensor]:
    """The whole next-token log-distribution at each response position: one ``[len(response), V]``
    tensor per sequence (what a token-level distillation loss compares), under the caller's grad
    mode; left-padded like :func:`sequence_logprobs`.

    >>> import torch
    >>> class Uniform(torch.nn.Module):
    ...     def __init__(self):
    ...         super().__init__(); self.w = torch.nn.Parameter(torch.zeros(4))
    ...     def forward(self, input_ids, attention_mask=None, position_ids=None, logits_to_keep=0, **kw):
    ...         return type("Out", (), {"logits": self.w.expand(*input_ids.shape, 4)[:, -logits_to_keep:]})()
    >>> [d.shape for d in sequence_distributions(Uniform(), [[1, 2], [3]], [[0, 1], [2]], pad_token_id=0)]
    [torch.Size([2, 4]), torch.Size([1, 4])]
    """
    if len(prompts) != len(responses):
        raise ValueError(f"{len(prompts)} prompts but {len(responses)} responses")
    device = next(model.parameters()).device
    out: list[torch.Tensor] = []
    for start in range(0, len(prompts), max(1, batch_size)):
        chunk_p = prompts[start : start + batch_size]
        chunk_r = responses[start : start + batch_size]
        if any(len(p) == 0 for p in chunk_p):
            raise ValueError("every prompt needs at least one token")
        seqs = [list(p) + list(r) for p, r in zip(chunk_p, chunk_r)]
        width, r_max = max(len(s) for s in seqs), max(len(r) for r in chunk_r)
        if r_max == 0:
            out += [torch.zeros(0, 0, device=device) for _ in seqs]
            continue
        ids, mask = left_padded(seqs, width, pad_token_id, device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        logp = processed_log_softmax(_forward(model, ids, mask, pos, r_max + 1)[:, -(r_max + 1) : -1, :], temperature)
        out += [logp[i, r_max - len(r) :] for i, r in enumerate(chunk_r)]
    return out


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
        return sequence_logprobs(
            model,
            [prompt] * len(candidates),
            candidates,
            pad_token_id=pad_token_id,
            temperature=temperature,
            batch_size=batch_size,
        )[0]
    device = next(model.parameters()).device
    n_prompt = len(prompt)
    results: list[torch.Tensor] = []
    for start in range(0, len(candidates), max(1, batch_size)):
        chunk = [list(c) for c in candidates[start : start + batch_size]]
        total = n_prompt + sum(len(c) for c in chunk)
        allowed = torch.zeros((total, total), dtype=torch.bool)
        allowed[:n_prompt, :n_prompt] = torch.ones((n_prompt, n_prompt), dtype=torch.bool).tril()
        positions = list(range(n_prompt))
        rows: list[list[int]] = []  # logit rows predicting each candidate's tokens
        offset = n_prompt
        for c in chunk:
            n = len(c)
            allowed[offset : offset + n, :n_prompt] = True
            allowed[offset : offset + n, offset : offset + n] = torch.ones((n, n), dtype=torch.bool).tril()
            positions += range(n_prompt, n_prompt + n)
            rows.append([n_prompt - 1] + list(range(offset, offset + n - 1)))
            offset += n
        ids = torch.tensor([list(prompt) + [t for c in chunk for t in c]], dtype=torch.long, device=device)
        keep = total - n_prompt + 1  # logits of rows n_prompt-1 .. total-1
        logits = _forward(
            model, ids, allowed[None, None].to(device), torch.tensor([positions], dtype=torch.long, device=device), keep
        )[0, -keep:]
        logp = processed_log_softmax(logits, temperature, 1.0)
        for c, r in zip(chunk, rows):
            idx = torch.tensor([x - (n_prompt - 1) for x in r], dtype=torch.long, device=device)
            tgt = torch.tensor(c, dtype=torch.long, device=device)
            results.append(logp[idx, tgt])
    return results


def check_decisions(decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]]) -> None:
    """Raise ValueError for a ``(prompt, candidates)`` pair with an empty prompt or candidate."""
    for prompt, cands in decisions:
        if len(prompt) == 0:
            raise ValueError("the prompt needs at least one token")
        if any(len(c) == 0 for c in cands):
            raise ValueError("every candidate needs at least one token")


def packed_candidate_logprobs(
    model: Any,
    decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
    *,
    pad_token_id: int,
    temperature: float = 1.0,
    max_tokens: int = 8192,
    row_tokens: int = 512,
) -> list[list[torch.Tensor]]:
    """:func:`candidate_logprobs` of many decisions in few forward passes, sharing prompt prefixes.

    ``decisions``: ``(prompt, candidates)`` pairs. Decisions are sorted by prompt and packed into
    rows of about ``row_tokens`` token positions: a row holds the prefix tree (trie) of its
    prompts (a prefix two prompts share is encoded once: the G members of a group, the steps of
    one episode), then, per decision, its last prompt token followed by its candidates. Every
    token attends to its ancestors in that tree and sits at its depth as position id, so each
    candidate token sees exactly its own prompt and its own earlier tokens, as in
    :func:`candidate_logprobs`. Rows are left-padded to one width (padding attends to itself
    only) and grouped so that rows x width stays within ``max_tokens``. Runs under the caller's
    grad mode. Equal to :func:`candidate_logprobs` decision by decision up to float rounding
    (~1e-6). Flash-attention models (no 4-D masks) score one decision at a time.

    Returns: per decision, the per-token log-prob tensor of each candidate.
    """
    check_decisions(decisions)
    out: list[list[torch.Tensor]] = [[] for _ in decisions]
    todo = [i for i, (_, cands) in enumerate(decisions) if len(cands)]
    impl = str(getattr(getattr(model, "config", None), "_attn_implementation", "") or "")
    if "flash" in impl:
        for i in todo:
            out[i] = candidate_logprobs(
                model, decisions[i][0], decisions[i][1], pad_token_id=pad_token_id, temperature=temperature
            )
        return out
    rows = _pack_rows(decisions, sorted(todo, key=lambda i: tuple(decisions[i][0])), max(1, int(row_tokens)))
    rows.sort(key=lambda r: r.size)
    for chunk in token_chunks([r.size for r in rows], max(1, int(max_tokens))):
        for row, lps in zip(
            [rows[j] for j in chunk], _tree_pass(model, [rows[j] for j in chunk], pad_token_id, temperature)
        ):
            for i, mine in zip(row.decisions, lps):
                out[i] = mine
    return out


class _TreeRow:
    """One packed row: a prompt trie, then each decision's last prompt token and candidates.

    Prompts arrive sorted, so the longest prefix a prompt shares with any earlier prompt of the row
    is the one it shares with the previous prompt: the trie grows by ``prompt[lcp:-1]`` only."""

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.parents: list[int] = []  # token row of each token's parent, -1 for none
        self.depth: list[int] = []
        #: per decision: (token row of its head's parent, -1 for none; its last prompt token; its candidates)
        self.tails: list[tuple[int, int, list[list[int]]]] = []
        self.decisions: list[int] = []
        self.tail_tokens = 0
        self._last: list[int] = []  # previous prompt (less its last token)
        self._path: list[int] = []  # its token rows

    def shared(self, prompt: Sequence[int]) -> int:
        """Tokens of ``prompt[:-1]`` already in the trie."""
        head, last = list(prompt[:-1]), self._last
        n = min(len(head), len(last))
        k = 0
        while k < n and head[k] == last[k]:
            k += 1
        return k

    def add(self, index: int, prompt: Sequence[int], cands: Sequence[Sequence[int]], k: int) -> None:
        """Add decision ``index``: ``prompt[:-1]`` into the trie (its first ``k`` tokens, :meth:`shared`,
        are there already), the rest as its tail."""
        path = self._path[:k]
        base = len(self.tokens)
        new = [int(t) for t in prompt[k:-1]]
        self.tokens += new
        self.parents += [path[-1] if path else -1] + list(range(base, base + len(new) - 1)) if new else []
        self.depth += list(range(k, k + len(new)))
        path += range(base, base + len(new))
        self._last, self._path = list(prompt[:-1]), path
        self.tails.append((path[-1] if path else -1, int(prompt[-1]), [[int(x) for x in c] for c in cands]))
        self.decisions.append(index)
        self.tail_tokens += 1 + sum(len(c) for c in cands)

    @property
    def size(self) -> int:
        return len(self.tokens) + self.tail_tokens


def _pack_rows(
    decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], order: Sequence[int], row_tokens: int
) -> list[_TreeRow]:
    rows: list[_TreeRow] = []
    row = _TreeRow()
    for i in order:
        prompt, cands = decisions[i]
        k = row.shared(prompt)
        if row.decisions and row.size + (len(prompt) - 1 - k) + 1 + sum(len(c) for c in cands) > row_tokens:
            rows.append(row)
            row, k = _TreeRow(), 0
        row.add(i, prompt, cands, k)
    if row.decisions:
        rows.append(row)
    return rows


def _tree_pass(
    model: Any, rows: Sequence[_TreeRow], pad_token_id: int, temperature: float
) -> list[list[list[torch.Tensor]]]:
    """One forward pass over left-padded tree rows; per row, per decision, per candidate log-probs."""
    device = next(model.parameters()).device
    width = max(r.size for r in rows)
    keep = max(r.tail_tokens for r in rows)
    ids = np.full((len(rows), width), pad_token_id, dtype=np.int64)
    pos = np.zeros((len(rows), width), dtype=np.int64)
    allowed = np.zeros((len(rows), width, width), dtype=bool)
    gathers: list[list[list[tuple[np.ndarray, np.ndarray]]]] = []  # per row/decision/candidate: (kept rows, targets)
    for r, row in enumerate(rows):
        start = width - row.size
        tokens, parents, depth = list(row.tokens), list(row.parents), list(row.depth)
        mine: list[list[tuple[np.ndarray, np.ndarray]]] = []
        for head_parent, head_token, cands in row.tails:
            head = len(tokens)
            tokens.append(head_token)
            parents.append(head_parent)
            depth.append(depth[head_parent] + 1 if head_parent >= 0 else 0)
            per_cand = []
            for c in cands:
                prev = head
                logit_rows = []
                for t in c:
                    logit_rows.append(prev)
                    tokens.append(t)
                    parents.append(prev)
                    depth.append(depth[prev] + 1)
                    prev = len(tokens) - 1
                per_cand.append((np.array(logit_rows) + start - (width - keep), np.array(c)))
            mine.append(per_cand)
        gathers.append(mine)
        ids[r, start:] = tokens
        pos[r, start:] = depth
        anc = allowed[r]
        for j, p in enumerate(parents):
            if p >= 0:
                anc[start + j, start : start + j] = anc[start + p, start : start + j]
            anc[start + j, start + j] = True
        for j in range(start):  # padding: itself only
            anc[j, j] = True
    logits = _forward(
        model,
        torch.from_numpy(ids).to(device),
        torch.from_numpy(allowed)[:, None].to(device),
        torch.from_numpy(pos).to(device),
        keep,
    )[:, -keep:]
    logp = processed_log_softmax(logits, temperature, 1.0)
    # one gather for every candidate token of the pass (an index op per candidate would give each
    # its own full-size gradient buffer), then split per candidate
    flat = [(r, rows_, tgt) for r, mine in enumerate(gathers) for per_cand in mine for rows_, tgt in per_cand]
    r_idx = torch.from_numpy(np.concatenate([np.full(len(t), r) for r, _, t in flat])).to(device)
    p_idx = torch.from_numpy(np.concatenate([p for _, p, _ in flat])).to(device)
    t_idx = torch.from_numpy(np.concatenate([t for _, _, t in flat])).to(device)
    values = iter(logp[r_idx, p_idx, t_idx].split([len(t) for _, _, t in flat]))
    out: list[list[list[torch.Tensor]]] = []
    for mine in gathers:
        out.append([[next(values) for _ in per_cand] for per_cand in mine])
    return out


def _forward(model: Any, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, keep: int) -> torch.Tensor:
    try:
        out = model(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=False, logits_to_keep=keep)
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
        return {
            "logprob_mismatch_max": float("inf"),
            "logprob_mismatch_mean": float("inf"),
            "logprob_mismatch_tokens": float(diff.numel()),
        }
    if diff.numel() == 0:
        return {"logprob_mismatch_max": 0.0, "logprob_mismatch_mean": 0.0, "logprob_mismatch_tokens": 0.0}
    return {
        "logprob_mismatch_max": float(diff.max()),
        "logprob_mismatch_mean": float(diff.mean()),
        "logprob_mismatch_tokens": float(diff.numel()),
    }
