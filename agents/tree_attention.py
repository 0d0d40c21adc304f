"""Score many decisions in one forward pass over their prompt trie, with sparse tree attention.

Every ``prompt + candidate`` sequence of a pass goes into one token trie (a prefix that any two
sequences share is encoded once: the system prompt, a group's task, a member's history, the
words that commands share, such as "go to"). The trie is laid out in preorder as a single row,
so each token's ancestors come before it, and every token sits at its depth as position id:
it sees exactly the tokens of its own sequence before it, as in
:func:`agents.logprobs.candidate_logprobs`.

Attention over that row is computed in chunks of :data:`CHUNK` consecutive tokens. In preorder
the ancestors of any token of a chunk ``[a, b)`` are either in the chunk or on the path to
``a``, so a chunk's keys are that path plus the chunk itself: the cost is linear in the trie's
size (chunk x (depth + chunk) pairs a chunk), where one dense tree mask over packed rows is
quadratic in the row. The logits are computed only at the tokens that predict a candidate
token, and so is the last decoder layer (its attention's queries, output projection and MLP: the
other rows of that layer feed nothing; its keys and values are every token's), where the model's
layers have the usual pre-norm shape. On the credit-trap preset's decisions a pass holds about half the token positions of
the packed rows of :func:`agents.logprobs.packed_candidate_logprobs` (``benchmarks/trainer_speed.py``).

It runs through transformers' attention interface: a function registered as
:data:`IMPLEMENTATION` takes over while a pass runs (the layout rides along as the forward's
``tree_layout`` keyword, which the models hand down to their attention) and hands every other
call to SDPA. Passes of one model may run in several threads at once (:class:`_TreeMode`). Models
that route their attention through that interface (Qwen2, Llama and their kin) qualify;
:func:`tree_attention_error` tells, once per model, whether one does.

    >>> from agents.models import load_model
    >>> model, tok = load_model("tiny", init_std=0.05)
    >>> prompt = tok("task: find the apple. > ")["input_ids"]
    >>> cands = [tok(c)["input_ids"] for c in ("go to fridge 1", "go to table 1")]
    >>> lps = tree_candidate_logprobs(model, [(prompt, cands)], pad_token_id=tok.pad_token_id)
    >>> [len(lp) for lp in lps[0]] == [len(c) for c in cands]
    True
"""

# Over 500 lines: the prompt trie, its chunked sparse attention and the model patch, which only work together.
from __future__ import annotations

import contextlib
import threading
import weakref
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from agents.logprobs import candidate_logprobs, check_decisions, processed_log_softmax

__all__ = ["CHUNK", "IMPLEMENTATION", "TokenTrie", "tree_attention_error", "tree_candidate_logprobs"]

#: tokens per attention chunk (128 was the fastest of 64 / 128 / 256 on the trap preset's decisions, CPU)
CHUNK = 128
#: the name the tree attention is registered under in transformers' AttentionInterface
IMPLEMENTATION = "progpo_tree"


def _common_prefix(a: Sequence[int], b: Sequence[int], start: int = 0) -> int:
    """Length of the common prefix of ``a`` and ``b``, known to be at least ``start``."""
    k, limit = start, min(len(a), len(b))
    while k < limit and a[k] == b[k]:
        k += 1
    return k


@dataclass
class TokenTrie:
    """The trie of a pass's sequences in preorder: ``tokens``, ``parents`` (-1: a root) and ``depth``
    per node; per (decision, candidate), the nodes whose logits predict its tokens (``predictors``).

    A sequence is its prompt and its candidate less the candidate's last token: that token is
    predicted (by its parent) but predicts nothing, and no other token attends to it, so it is
    left out (one node a candidate, ~9% of a pass on the credit-trap preset's decisions).

    >>> trie = TokenTrie.build([([5, 6], [[7, 8], [7, 9], [4]])])
    >>> trie.tokens, trie.parents, trie.depth
    ([5, 6, 7], [-1, 0, 1], [0, 1, 2])
    >>> trie.predictors
    {(0, 2): [1], (0, 0): [1, 2], (0, 1): [1, 2]}
    """

    tokens: list[int]
    parents: list[int]
    depth: list[int]
    predictors: dict[tuple[int, int], list[int]]

    @classmethod
    def build(cls, decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]]) -> "TokenTrie":
        # sequences in sorted order: the nodes a sequence adds are one chain after its longest
        # common prefix with the previous one, and appending them keeps the node list in preorder
        # (decisions by prompt, then each one's candidates: a prompt that is a prefix of the next
        # one can leave a prefix stored twice, never a wrong path)
        tokens: list[int] = []
        parents: list[int] = []
        depth: list[int] = []
        predictors: dict[tuple[int, int], list[int]] = {}
        prev: list[int] = []
        path: list[int] = []
        prompts = [list(map(int, p)) for p, _ in decisions]
        for i in sorted(range(len(decisions)), key=prompts.__getitem__):
            prompt, n_prompt, first = prompts[i], len(prompts[i]), True
            for j, cand in sorted(enumerate(decisions[i][1]), key=lambda jc: list(jc[1][:-1])):
                seq = prompt + list(map(int, cand[:-1]))
                k = _common_prefix(seq, prev, 0 if first else n_prompt)  # not first: prev had this prompt
                start = len(tokens)
                if len(seq) > k:
                    tokens += seq[k:]
                    parents += [path[k - 1] if k else -1] + list(range(start, len(tokens) - 1))
                    depth += range(k, len(seq))
                path = path[:k] + list(range(start, len(tokens)))
                predictors[(i, j)] = path[n_prompt - 1 : n_prompt - 1 + len(cand)]
                prev, first = seq, False
        return cls(tokens, parents, depth, predictors)


def _width_groups(widths: Sequence[int], chunk: int, most: int = 3) -> list[list[int]]:
    """Chunks grouped by the length of their paths, at most ``most`` groups, each padded to its
    longest path: the split of the sorted widths that computes the fewest key columns."""
    order = sorted(range(len(widths)), key=lambda c: widths[c])
    w = [widths[c] for c in order]
    n = len(w)

    def cost(i: int, j: int) -> int:  # chunks order[i:j] in one group
        return (j - i) * (w[j - 1] + chunk) if j > i else 0

    best = (cost(0, n), [0, n])
    for i in range(1, n):
        best = min(best, (cost(0, i) + cost(i, n), [0, i, n]))
        if most >= 3:
            for j in range(i + 1, n):
                best = min(best, (cost(0, i) + cost(i, j) + cost(j, n), [0, i, j, n]))
    cuts = best[1]
    return [order[a:b] for a, b in zip(cuts, cuts[1:])]


@dataclass
class _ChunkLayout:
    """What the attention of one pass needs: chunks in groups of similar path length; per group,
    its chunks, their key nodes and their allowed pairs."""

    groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]]  # (chunk ids, keys, allowed)
    order: torch.Tensor  # position of each chunk in the groups' concatenation
    n: int
    chunk: int
    #: the rows the last decoder layer computes past its attention (None: every row)
    rows: torch.Tensor | None = None
    #: the attention module of that layer, which computes its queries at ``rows`` only
    rows_module: Any = None
    #: per group of that attention: (query rows [G, R], keys, allowed pairs [G, R, keys]); and
    #: where each of ``rows`` lies in the groups' concatenated outputs
    row_groups: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] | None = None
    row_take: torch.Tensor | None = None

    @classmethod
    def of(cls, trie: TokenTrie, chunk: int, device: Any) -> "_ChunkLayout":
        parents, depth, n = trie.parents, trie.depth, len(trie.parents)
        chunks = (n + chunk - 1) // chunk
        groups = []
        for ids in _width_groups([depth[c * chunk] for c in range(chunks)], chunk):
            width = max(depth[c * chunk] for c in ids)  # the longest path to a first token of the group
            keys = np.zeros((len(ids), width + chunk), dtype=np.int64)
            allowed = np.zeros((len(ids), chunk, width + chunk), dtype=bool)
            for g, c in enumerate(ids):
                cls._fill(parents, depth, c * chunk, min((c + 1) * chunk, n), width, keys[g], allowed[g])
            groups.append(
                (
                    torch.tensor(ids, device=device),
                    torch.from_numpy(keys).to(device),
                    torch.from_numpy(allowed).to(device),
                )
            )
        flat = [c for ids, _, _ in groups for c in ids.tolist()]
        order = np.empty(chunks, dtype=np.int64)
        order[flat] = np.arange(chunks)
        return cls(groups, torch.from_numpy(order).to(device), n, chunk)

    def keep_rows(self, rows: Sequence[int], module: Any, device: Any) -> None:
        """Compute the last layer past its attention at ``rows`` (sorted node ids) only, and the
        attention of ``module`` (that layer's) for queries at those rows only: per group, the kept
        rows of each of its chunks that has any, padded to the group's most (a padding query repeats
        one of its chunk's rows and is dropped)."""
        kept = np.asarray(rows, dtype=np.int64)
        self.rows, self.rows_module = torch.from_numpy(kept).to(device), module
        self.row_groups, take = [], np.zeros(len(kept), dtype=np.int64)
        offset = 0
        for ids, keys, allowed in self.groups:
            spans = [
                (g, c, *np.searchsorted(kept, [c * self.chunk, (c + 1) * self.chunk]))
                for g, c in enumerate(ids.tolist())
            ]
            spans = [(g, c, a, b) for g, c, a, b in spans if b > a]
            if not spans:
                continue
            width = max(b - a for _, _, a, b in spans)
            query = np.zeros((len(spans), width), dtype=np.int64)
            for r, (_, c, a, b) in enumerate(spans):
                query[r, : b - a], query[r, b - a :] = kept[a:b], kept[a]
                take[a:b] = offset + r * width + np.arange(b - a)
            offset += query.size
            local = torch.from_numpy(query - (query // self.chunk * self.chunk)).to(device)
            picked = torch.tensor([g for g, _, _, _ in spans], device=device)
            self.row_groups.append((torch.from_numpy(query).to(device), keys[picked], allowed[picked[:, None], local]))
        self.row_take = torch.from_numpy(take).to(device)

    @staticmethod
    def _fill(
        parents: list[int], depth: list[int], a: int, b: int, width: int, keys: np.ndarray, mask: np.ndarray
    ) -> None:
        """Keys and allowed pairs of the chunk of tokens ``[a, b)``."""
        path, x = [], parents[a]
        while x >= 0:
            path.append(x)
            x = parents[x]
        keys[: len(path)] = path[::-1]  # the path to a, by depth: key column d holds depth d
        keys[width : width + b - a] = range(a, b)
        for x in range(a, b):
            p, row = parents[x], x - a
            if p >= a:  # its parent is in the chunk: the parent's keys and itself
                mask[row] = mask[p - a]
            elif p >= 0:  # its parent is on the path: the path down to it
                mask[row, : depth[p] + 1] = True
            mask[row, width + row] = True
        for row in range(b - a, mask.shape[0]):  # padding rows see themselves only
            mask[row, width + row] = True


def _attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' attention-interface signature: chunked tree attention when the forward pass
    carries a ``tree_layout`` (:class:`_ChunkLayout`), SDPA for anything else."""
    layout = kwargs.pop("tree_layout", None)
    if not isinstance(layout, _ChunkLayout):
        from transformers.integrations.sdpa_attention import sdpa_attention_forward  # a slow import

        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs
        )
    q, k, v = query[0], key[0], value[0]  # (heads, n, head_dim); k, v: (kv_heads, n, head_dim)
    heads, n, dim = q.shape
    if layout.row_groups is not None and module is layout.rows_module:
        return _row_attention(q, k, v, layout, scaling), None
    chunks = layout.order.shape[0]
    if chunks * layout.chunk > n:
        q = F.pad(q, (0, 0, 0, chunks * layout.chunk - n))
    q = q.reshape(heads, chunks, layout.chunk, dim).transpose(0, 1)  # (chunks, heads, chunk, head_dim)
    parts = []
    for ids, keys, allowed in layout.groups:
        parts.append(
            F.scaled_dot_product_attention(
                q[ids],
                k[:, keys].transpose(0, 1),
                v[:, keys].transpose(0, 1),
                attn_mask=allowed[:, None],
                scale=scaling,
                enable_gqa=k.shape[0] != heads,
            )
        )
    out = torch.cat(parts)[layout.order]
    return out.transpose(1, 2).reshape(chunks * layout.chunk, heads, dim)[:n][None], None


def _row_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, layout: _ChunkLayout, scaling: float | None
) -> torch.Tensor:
    """The last layer's tree attention at the layout's kept rows only, as ``[1, n, heads, dim]``
    with zeros at the other rows (the output projection's hook drops them)."""
    heads, n, dim = q.shape
    parts = []
    for query, keys, allowed in layout.row_groups or []:
        groups, width = query.shape
        q_rows = q[:, query.reshape(-1)].reshape(heads, groups, width, dim).transpose(0, 1)
        out = F.scaled_dot_product_attention(
            q_rows,
            k[:, keys].transpose(0, 1),
            v[:, keys].transpose(0, 1),
            attn_mask=allowed[:, None],
            scale=scaling,
            enable_gqa=k.shape[0] != heads,
        )
        parts.append(out.transpose(1, 2).reshape(groups * width, heads, dim))
    kept = torch.cat(parts)[layout.row_take]
    return q.new_zeros(n, heads, dim).index_copy(0, layout.rows, kept)[None]  # type: ignore[arg-type]  # a chunked layout on this path has its rows (the caller checks)


def _no_mask(*args: Any, **kwargs: Any) -> None:
    """The mask function of :data:`IMPLEMENTATION`: the layout is the mask, so none is built (a
    causal or packed-sequence mask over a whole trie would be pass-sized squared)."""
    return None


_REGISTERED = False


def _register() -> None:
    global _REGISTERED
    if not _REGISTERED:
        from transformers import AttentionInterface, AttentionMaskInterface  # a slow import

        AttentionInterface.register(IMPLEMENTATION, _attention)
        AttentionMaskInterface.register(IMPLEMENTATION, _no_mask)
        _REGISTERED = True


def _decoder_layers(model: Any) -> Any:
    """The decoder layers of a causal LM (``model.model.layers``; under peft, one level deeper)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(getattr(base, "model", None), "layers", None)


#: per thread, the rows the last layer's output projection keeps while a pruned pass runs it
_ROWS = threading.local()


def _cut_to_rows(module: Any, args: tuple) -> tuple | None:
    """The forward pre-hook of the last layer's output projection: its input at the kept rows
    during a pruned pass of this thread, untouched otherwise."""
    rows = getattr(_ROWS, "rows", None)
    return None if rows is None else (args[0][:, rows], *args[1:])


class _TreeMode:
    """While at least one tree pass of a model runs, in any thread: its attention implementation is
    :data:`IMPLEMENTATION` and its last decoder layer's forward is wrapped (:meth:`_rows_forward`).

    The per-pass state travels with each forward call (the layout and its kept rows; the output
    projection's hook reads them from a thread-local), so tree passes of one model may run in
    several threads at once (each thread's share of a concurrent evaluation, for instance); a
    forward of that model that is not a tree pass must not run alongside them (it would find no
    causal mask).
    """

    _lock = threading.Lock()
    _active: "weakref.WeakKeyDictionary[Any, _TreeMode]" = weakref.WeakKeyDictionary()

    def __init__(self, model: Any) -> None:
        self.model, self.users = model, 0
        self.before = model.config._attn_implementation
        layers = _decoder_layers(model)
        last = layers[-1] if layers else None
        # a layer without the pre-norm parts is never cut (its pruned check fails: computed in full)
        parts = ("input_layernorm", "post_attention_layernorm", "mlp")
        self.layer = (
            last
            if all(hasattr(last, a) for a in parts) and hasattr(getattr(last, "self_attn", None), "o_proj")
            else None
        )
        self.saved: Any = None
        self.hook: Any = None

    @classmethod
    @contextlib.contextmanager
    def of(cls, model: Any) -> Any:
        with cls._lock:
            mode = cls._active.get(model)
            if mode is None:
                mode = cls._active[model] = cls(model)
                mode._switch_on()
            mode.users += 1
        try:
            yield mode
        finally:
            with cls._lock:
                mode.users -= 1
                if not mode.users:
                    del cls._active[model]
                    mode._switch_off()

    def _switch_on(self) -> None:
        self.model.config._attn_implementation = IMPLEMENTATION
        if self.layer is not None:
            self.saved = self.layer.__dict__.get("forward")  # an instance's own forward, if it has one
            self.layer.forward = self._rows_forward(self.layer, self.saved)  # the class's forward is untouched
            self.hook = self.layer.self_attn.o_proj.register_forward_pre_hook(_cut_to_rows)

    def _switch_off(self) -> None:
        self.model.config._attn_implementation = self.before
        if self.layer is not None:
            self.hook.remove()
            if self.saved is None:
                del self.layer.forward
            else:
                self.layer.forward = self.saved

    @staticmethod
    def _rows_forward(layer: Any, saved: Any) -> Any:
        """The last layer's forward in a pass whose layout keeps ``rows``: its attention reads
        the keys and values of every token and computes its queries at the kept rows only
        (:func:`_row_attention`), its output projection (a forward pre-hook cuts its input),
        residual and MLP see the kept rows only, so the layer returns
        ``[1, len(rows), hidden]`` and the model's head reads all of it (``logits_to_keep=0``). A
        pre-norm layer (``input_layernorm``, ``self_attn``, ``post_attention_layernorm``,
        ``mlp``) is assumed: :func:`tree_attention_error` checks the result once per model
        against the per-decision path and turns this off where it differs. Any other call runs
        the layer's own forward."""
        original = saved if saved is not None else type(layer).forward.__get__(layer)

        def forward(hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
            layout = kwargs.get("tree_layout")
            if not isinstance(layout, _ChunkLayout) or layout.rows is None:
                return original(hidden_states, *args, **kwargs)
            if args:
                raise TypeError("the decoder layer got positional arguments past its hidden states")
            _ROWS.rows = layout.rows  # this thread's pass: what the output projection's hook reads
            try:
                out = layer.self_attn(hidden_states=layer.input_layernorm(hidden_states), **kwargs)[0]
            finally:
                _ROWS.rows = None
            hidden = hidden_states[:, layout.rows] + out
            return hidden + layer.mlp(layer.post_attention_layernorm(hidden))

        return forward


def _tree_pass(
    model: Any,
    decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
    temperature: float,
    chunk: int,
    prune: bool,
) -> list[list[torch.Tensor]]:
    device = next(model.parameters()).device
    trie = TokenTrie.build(decisions)
    layout = _ChunkLayout.of(trie, chunk, device)
    order = sorted({p for nodes in trie.predictors.values() for p in nodes})
    row_of = {p: r for r, p in enumerate(order)}
    with _TreeMode.of(model) as mode:
        if prune:
            if mode.layer is None:
                raise TypeError(f"{type(model).__name__} has no model.layers to take the last one of")
            layout.keep_rows(order, mode.layer.self_attn, device)
        out = model(
            input_ids=torch.tensor([trie.tokens], device=device),
            tree_layout=layout,
            position_ids=torch.tensor([trie.depth], device=device),
            use_cache=False,
            logits_to_keep=0 if prune else torch.tensor(order, device=device),
        )
    logp = processed_log_softmax(out.logits[0], temperature, 1.0)
    pairs = [(i, j) for i, (_, cands) in enumerate(decisions) for j in range(len(cands))]
    rows = torch.tensor([row_of[p] for pair in pairs for p in trie.predictors[pair]], dtype=torch.long, device=device)
    targets = torch.tensor([int(t) for i, j in pairs for t in decisions[i][1][j]], dtype=torch.long, device=device)
    values = iter(logp[rows, targets].split([len(decisions[i][1][j]) for i, j in pairs]))
    return [[next(values) for _ in cands] for _, cands in decisions]


def _passes(
    decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]], order: Sequence[int], max_tokens: int
) -> list[list[int]]:
    """Split ``order`` (decisions sorted by prompt) into passes of at most ``max_tokens`` new trie
    tokens each (a prompt's prefix shared with the previous prompt counts once)."""
    passes: list[list[int]] = []
    current: list[int] = []
    used = 0
    prev: tuple[int, ...] = ()
    for i in order:
        prompt, cands = tuple(decisions[i][0]), decisions[i][1]
        k = _common_prefix(prompt, prev)
        cost = len(prompt) - k + sum(len(c) for c in cands)
        if current and used + cost > max_tokens:
            passes.append(current)
            current, used, k = [], 0, 0
            cost = len(prompt) + sum(len(c) for c in cands)
        current.append(i)
        used += cost
        prev = prompt
    if current:
        passes.append(current)
    return passes


def tree_candidate_logprobs(
    model: Any,
    decisions: Sequence[tuple[Sequence[int], Sequence[Sequence[int]]]],
    *,
    pad_token_id: int,
    temperature: float = 1.0,
    max_tokens: int = 8192,
    chunk: int = CHUNK,
    last_layer_rows: bool | None = None,
) -> list[list[torch.Tensor]]:
    """:func:`agents.logprobs.candidate_logprobs` of many decisions, each pass one prompt trie.

    ``decisions``: ``(prompt, candidates)`` pairs. They are sorted by prompt and cut into passes
    of at most ``max_tokens`` trie tokens; each pass runs the model once over its trie with the
    chunked tree attention (the module docstring). Runs under the caller's grad mode. Equal to
    :func:`~agents.logprobs.candidate_logprobs` decision by decision up to float rounding (~1e-6).
    ``pad_token_id`` is unused (nothing is padded) and kept for the signature of the other paths.
    ``last_layer_rows``: compute the last decoder layer past its attention at the rows that
    predict a candidate token only (module docstring); ``None``: where :func:`tree_attention_error`
    found it to give the per-decision log-probs for this model.

    Returns: per decision, the per-token log-prob tensor of each candidate.
    """
    del pad_token_id
    check_decisions(decisions)
    _register()
    if last_layer_rows is None:
        last_layer_rows = tree_attention_error(model) is None and _LAST_LAYER_ROWS.get(model, False)
    out: list[list[torch.Tensor]] = [[] for _ in decisions]
    todo = sorted((i for i, (_, cands) in enumerate(decisions) if len(cands)), key=lambda i: tuple(decisions[i][0]))
    for batch in _passes(decisions, todo, max(1, int(max_tokens))):
        for i, lps in zip(
            batch,
            _tree_pass(model, [decisions[i] for i in batch], temperature, max(1, int(chunk)), bool(last_layer_rows)),
        ):
            out[i] = lps
    return out


_CHECKED: "weakref.WeakKeyDictionary[Any, str | None]" = weakref.WeakKeyDictionary()
#: per checked model, whether the last layer's rows can be pruned (``last_layer_rows``)
_LAST_LAYER_ROWS: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()
_CHECK_LOCK = threading.RLock()


def tree_attention_error(model: Any) -> str | None:
    """Why ``model`` cannot take the tree path (one line), or None when it can.

    Checked once per model object: a two-decision pass through the tree path must give the
    log-probs of :func:`agents.logprobs.candidate_logprobs` within 1e-4 (0.1 for 16-bit weights),
    autocast off; first with the last layer computed at the predicting rows only, then, where
    that differs, in full (the mode later passes take). A model that does not route its attention through transformers' attention
    interface, does not hand its forward's keyword arguments (``tree_layout``) down to it, or takes
    no index tensor as ``logits_to_keep``, fails it.
    """
    with _CHECK_LOCK:  # a check from a second thread waits for the first one's verdict
        if model not in _CHECKED:
            _LAST_LAYER_ROWS[model] = _check(model, last_layer_rows=True) is None
            _CHECKED[model] = None if _LAST_LAYER_ROWS[model] else _check(model, last_layer_rows=False)
        return _CHECKED[model]


def _check(model: Any, last_layer_rows: bool) -> str | None:
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "_attn_implementation"):
        return f"{type(model).__name__} is not a transformers model"
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab < 8:
        return f"{type(model).__name__} has no vocabulary to check with"
    decisions = [([1, 2, 3, 4], [[5, 6], [5, 7, 3]]), ([1, 2, 6], [[4], [2, 5]])]
    param = next(model.parameters())
    try:  # in the model's own precision: autocast would round the two paths differently
        with torch.no_grad(), torch.autocast(device_type=param.device.type, enabled=False):
            tree = tree_candidate_logprobs(model, decisions, pad_token_id=0, chunk=4, last_layer_rows=last_layer_rows)
            ref = [candidate_logprobs(model, p, cs, pad_token_id=0) for p, cs in decisions]
    except Exception as exc:  # any failure means the path does not apply; say which
        return f"{type(model).__name__}: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
    gap = max(float((a - b).abs().max()) for xs, ys in zip(tree, ref) for a, b in zip(xs, ys))
    tolerance = 1e-4 if param.dtype == torch.float32 else 0.1  # a misrouted attention is off by whole nats
    if not gap <= tolerance:
        return (
            f"{type(model).__name__} does not route its attention through transformers' attention interface "
            f"(tree and per-decision log-probs differ by {gap:.2g})"
        )
    return None
