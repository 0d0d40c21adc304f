"""Batched sampling with a transformers causal LM (CPU or GPU).

The decoding loop is written out (prefill + KV-cached steps) instead of calling
``model.generate`` so that the log-prob of every sampled token is taken from exactly the
distribution it was drawn from (:func:`agents.logprobs.processed_log_softmax`), and so that a
seed fully determines the samples.

Example:
    >>> from agents.models import make_tiny_model
    >>> model, tok = make_tiny_model()
    >>> backend = TransformersBackend(model, tok)
    >>> [g] = backend.generate([tok("hello")["input_ids"]], SamplingConfig(max_new_tokens=4), seed=0)
    >>> len(g.response_ids) == len(g.logprobs) <= 4
    True
"""

from __future__ import annotations

import copy
import inspect
from typing import Any, Optional, Sequence, Union

import torch

from agents.backends.base import Generation, SamplingConfig
from agents.logprobs import processed_log_softmax

__all__ = ["ROLLOUT_DTYPES", "TransformersBackend", "eos_token_ids"]

#: ``rollout_dtype`` names: the dtype of the weights answers are sampled from
ROLLOUT_DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
#: a device by name or as torch's, or ``None`` for the model's own
Device = Optional[Union[str, torch.device]]
#: a dtype by name (a key of :data:`ROLLOUT_DTYPES`) or as torch's, or ``None`` for the model's own
DType = Optional[Union[str, torch.dtype]]


def eos_token_ids(model: Any, tokenizer: Any) -> set[int]:
    """Token ids that end a response: the tokenizer's EOS and the generation config's EOS."""
    ids: set[int] = set()
    if getattr(tokenizer, "eos_token_id", None) is not None:
        ids.add(int(tokenizer.eos_token_id))
    gen_cfg = getattr(model, "generation_config", None)
    eos = getattr(gen_cfg, "eos_token_id", None)
    if isinstance(eos, int):
        ids.add(eos)
    elif isinstance(eos, (list, tuple)):
        ids.update(int(e) for e in eos)
    return ids


def _weights_version(model: Any) -> int:
    """A number that changes whenever a parameter of ``model`` is written in place (an optimizer
    step, ``load_state_dict``): the sum of the tensors' version counters."""
    return sum(int(p._version) for p in model.parameters())


def _cache_kwarg(model: Any) -> str:
    """``"cache"`` (transformers >= 5.2x) or ``"past_key_values"`` (older), per the model."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    try:
        params = inspect.signature(type(base).forward).parameters
    except (TypeError, ValueError):
        return "past_key_values"
    return "cache" if "cache" in params else "past_key_values"


def _cache_of(out: Any) -> Any:
    cache = getattr(out, "cache", None)
    return cache if cache is not None else getattr(out, "past_key_values", None)


class TransformersBackend:
    """:class:`~agents.backends.base.GenerationBackend` over a transformers model.

    Args:
        model: a causal LM (``PreTrainedModel`` or a peft wrapper of one).
        tokenizer: its tokenizer (a pad token is taken from EOS when missing).
        device: where to run; defaults to the model's device. The model is not moved.
        max_batch_size: prompts (times ``n``) decoded together; larger batches are split.
        rollout_dtype: sample from a copy of ``model`` in this dtype (``"bf16"``, a
            ``torch.dtype``), refreshed by :meth:`sync_weights` after each optimizer step, instead
            of autocast over fp32 master weights (which casts every weight at every decode step);
            ``None``: sample from ``model`` itself.

    Samples are a deterministic function of (seed, prompts, config, ``max_batch_size``).
    """

    def __init__(
        self, model: Any, tokenizer: Any, device: Device = None, max_batch_size: int = 32, rollout_dtype: DType = None
    ) -> None:
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
        if isinstance(rollout_dtype, str) and rollout_dtype not in ROLLOUT_DTYPES:
            raise ValueError(f"rollout_dtype must be one of {', '.join(ROLLOUT_DTYPES)}, got {rollout_dtype!r}")
        dtype = ROLLOUT_DTYPES[rollout_dtype] if isinstance(rollout_dtype, str) else rollout_dtype
        #: the trained model; ``self.model`` is a copy of it when samples come from other weights
        self.source = model
        if dtype is not None and dtype != next(model.parameters()).dtype:
            model = copy.deepcopy(model).to(dtype).eval().requires_grad_(False)
        self.model = model
        self._synced = _weights_version(self.source)
        self.tokenizer = tokenizer
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.max_batch_size = int(max_batch_size)
        pad = getattr(tokenizer, "pad_token_id", None)
        if pad is None:
            pad = getattr(tokenizer, "eos_token_id", None)
        if pad is None:
            raise ValueError("the tokenizer has neither a pad nor an EOS token")
        self.pad_token_id = int(pad)
        self.eos_ids = eos_token_ids(model, tokenizer)
        self._cache_kw = _cache_kwarg(model)

    # ----------------------------------------------------------------------------------------
    def sync_weights(self, model: Any) -> None:
        """Sample from ``model``'s current weights from now on: copied (and cast) into the
        backend's own copy in place (same object: nothing to do). A copy also follows its source
        by itself: :meth:`generate` syncs it first when the source's weights were written since
        (loaded weights, a warm start, a resume)."""
        if model is not self.model:
            self.model.load_state_dict(model.state_dict())
            if model is self.source:
                self._synced = _weights_version(model)

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], cfg: SamplingConfig, *, seed: int | None = None
    ) -> list[Generation]:
        """Sample ``cfg.n`` responses for each prompt (prompt-major order)."""
        if self.model is not self.source and _weights_version(self.source) != self._synced:
            self.sync_weights(self.source)
        prompts = [list(map(int, p)) for p in prompt_ids]
        for i, p in enumerate(prompts):
            if not p:
                raise ValueError(f"prompt {i} is empty")
        expanded = [p for p in prompts for _ in range(cfg.n)]
        gen = torch.Generator(device=self.device)
        if seed is None:
            gen.seed()
        else:
            gen.manual_seed(int(seed) % (2**63 - 1))  # any int seed (manual_seed takes < 2**64)
        results: list[Generation] = []
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                for start in range(0, len(expanded), self.max_batch_size):
                    results += self._generate_batch(expanded[start : start + self.max_batch_size], cfg, gen)
        finally:
            if was_training:
                self.model.train()
        return results

    # ----------------------------------------------------------------------------------------
    def _generate_batch(self, prompts: list[list[int]], cfg: SamplingConfig, gen: torch.Generator) -> list[Generation]:
        b = len(prompts)
        width = max(len(p) for p in prompts)
        ids = torch.full((b, width), self.pad_token_id, dtype=torch.long)
        mask = torch.zeros((b, width), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p) :] = 1
        ids, mask = ids.to(self.device), mask.to(self.device)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        past, logits = self._prefill(prompts, ids, mask, pos)
        responses: list[list[int]] = [[] for _ in range(b)]
        logprobs: list[list[float]] = [[] for _ in range(b)]
        finish = ["length"] * b
        done = torch.zeros(b, dtype=torch.bool, device=self.device)
        stop_window = max((len(s) for s in cfg.stop), default=0) + 2
        for _ in range(cfg.max_new_tokens):
            if cfg.greedy:
                logp = processed_log_softmax(logits, 1.0, 1.0)
                tok = logp.argmax(-1)
            else:
                logp = processed_log_softmax(logits, cfg.temperature, cfg.top_p)
                tok = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(-1)
            tok_lp = logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
            tok_list, lp_list = tok.tolist(), tok_lp.tolist()
            for i in range(b):
                if done[i]:
                    continue
                responses[i].append(tok_list[i])
                logprobs[i].append(lp_list[i])
                if len(responses[i]) < cfg.min_new_tokens:
                    continue
                if tok_list[i] in self.eos_ids:
                    done[i], finish[i] = True, "stop"
                elif cfg.stop:
                    tail = self.tokenizer.decode(responses[i][-stop_window:], skip_special_tokens=True)
                    if any(s in tail for s in cfg.stop):
                        done[i], finish[i] = True, "stop"
            if bool(done.all()):
                break
            tok = torch.where(done, torch.full_like(tok, self.pad_token_id), tok)
            mask = torch.cat([mask, (~done).long().unsqueeze(-1)], dim=-1)
            pos = pos[:, -1:] + 1
            out = self._forward(tok.unsqueeze(-1), mask, pos, past)
            past = _cache_of(out)
            logits = out.logits[:, -1, :]
        return [
            Generation(
                prompt_ids=prompts[i],
                response_ids=responses[i],
                logprobs=logprobs[i],
                text=self.tokenizer.decode(responses[i], skip_special_tokens=True),
                finish_reason=finish[i],
            )
            for i in range(b)
        ]

    def _prefill(
        self, prompts: list[list[int]], ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor
    ) -> tuple[Any, torch.Tensor]:
        """Encode the prompts; identical prompts (``n > 1``, the G members of a group) are
        encoded once and their KV cache rows repeated."""
        first: dict[tuple[int, ...], int] = {}
        rows = [first.setdefault(tuple(p), i) for i, p in enumerate(prompts)]
        uniq = sorted(set(rows))
        if len(uniq) < len(prompts):
            sel = torch.tensor(uniq, device=ids.device)
            out = self._forward(ids[sel], mask[sel], pos[sel], None)
            cache = _cache_of(out)
            if cache is not None and hasattr(cache, "batch_select_indices"):
                where = {r: j for j, r in enumerate(uniq)}
                expand = torch.tensor([where[r] for r in rows], device=ids.device)
                cache.batch_select_indices(expand)
                return cache, out.logits[:, -1, :][expand]
        out = self._forward(ids, mask, pos, None)
        return _cache_of(out), out.logits[:, -1, :]

    def _forward(self, ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, past: Any) -> Any:
        kwargs: dict[str, Any] = dict(input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True)
        if past is not None:
            kwargs[self._cache_kw] = past
        try:
            return self.model(**kwargs, logits_to_keep=1)
        except TypeError:
            return self.model(**kwargs)
