"""Fast batched sampling inside transformers: a static KV cache, compiled decode steps, bf16 weights.

:class:`StaticCacheBackend` samples as :class:`~agents.backends.hf.TransformersBackend` does (each
token's log-prob from the distribution it was drawn from, a seed fixes the samples), with the
per-step costs of that loop taken out:

- **transformers' own** ``StaticCache``: the KV cache is allocated once per shape and reset,
  never grown, and the attention mask is one preallocated ``[batch, cache]`` buffer written in
  place;
- **shape buckets**: a batch is padded up to a power of two (at most ``max_batch_size``), the
  cache to a multiple of ``length_bucket`` positions, so the decode step sees a handful of shapes
  in a run. With ``compile`` the step is ``torch.compile``-d (CUDA graphs on a GPU:
  ``mode="reduce-overhead"``) once per bucket; each compilation is logged and counted in
  ``StaticCacheBackend.stats``;
- **the bookkeeping stays on the device**: tokens and log-probs go into preallocated tensors, EOS
  is tested there, and the host looks only every ``sync_every`` steps (stop strings are then
  found at their exact position: a row decoded past its stop string keeps nothing of it). The
  draws made past a batch's last answer are taken back (the generator is set to its state after
  the step that answer ended at), so a call of several batches draws what the loop engine draws
  whatever ``sync_every`` is;
- with ``rollout_dtype="bf16"`` (as for the loop backend), samples come from a bf16 copy of the
  policy refreshed after each optimizer step, not from autocast over the fp32 master weights.

Example (CPU, no compilation):
    >>> from agents.models import make_tiny_model
    >>> from agents.backends.hf import TransformersBackend
    >>> model, tok = make_tiny_model()
    >>> fast, plain = StaticCacheBackend(model, tok, compile=False), TransformersBackend(model, tok)
    >>> cfg = SamplingConfig(max_new_tokens=6, temperature=0, stop=())
    >>> prompts = [tok("hello")["input_ids"], tok("a longer prompt")["input_ids"]]
    >>> [g.response_ids for g in fast.generate(prompts, cfg)] == [g.response_ids for g in plain.generate(prompts, cfg)]
    True
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from agents.backends.base import Generation, SamplingConfig
from agents.backends.hf import TransformersBackend
from agents.logprobs import left_padded, processed_log_softmax

__all__ = ["StaticCacheBackend", "batch_bucket", "length_bucket_of"]

log = logging.getLogger(__name__)


def batch_bucket(b: int, max_batch_size: int) -> int:
    """The decode batch a batch of ``b`` is padded to: the next power of two, at most ``max_batch_size``.

    >>> [batch_bucket(b, 48) for b in (1, 3, 8, 9, 33, 48)]
    [1, 4, 8, 16, 48, 48]
    """
    if not 1 <= b <= max_batch_size:
        raise ValueError(f"batch of {b} outside 1..{max_batch_size}")
    return min(1 << (b - 1).bit_length(), max_batch_size)


def length_bucket_of(positions: int, bucket: int) -> int:
    """The cache length for ``positions`` (prompt + answer): the next multiple of ``bucket``.

    >>> length_bucket_of(300, 256), length_bucket_of(512, 256)
    (512, 512)
    """
    return -(-int(positions) // int(bucket)) * int(bucket)


def _decode_step(
    model: Any,
    cache_kw: str,
    tok: torch.Tensor,
    mask: torch.Tensor,
    pos: torch.Tensor,
    cache: Any,
    cache_position: torch.Tensor,
) -> torch.Tensor:
    """One token of every row through the model: the next-token logits ``[batch, vocab]``."""
    cached = {cache_kw: cache, "cache_position": cache_position}
    out = model(input_ids=tok, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1, **cached)
    return out.logits[:, -1, :]


class StaticCacheBackend(TransformersBackend):
    """:class:`~agents.backends.base.GenerationBackend` over transformers' ``StaticCache``.

    Args:
        model, tokenizer, device, max_batch_size, rollout_dtype: as for
            :class:`~agents.backends.hf.TransformersBackend`.
        compile: ``torch.compile`` the decode step, once per shape bucket (default: on a GPU only,
            where it also captures CUDA graphs).
        length_bucket: the cache length is a multiple of this many positions.
        sync_every: decode steps between two looks of the host (stop strings, all rows done).
        max_caches: the buckets' KV caches kept between calls, the least recently used dropped
            first (a cache of a 1.5B model at 128 x 2,304 positions holds ~8 GiB);
            :meth:`release` drops them all.

    :attr:`stats` counts ``compiles`` and ``compile_s`` (the first step of each new bucket) and
    ``decode_steps``.
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        device: str | torch.device | None = None,
        max_batch_size: int = 32,
        *,
        compile: bool | None = None,
        rollout_dtype: str | torch.dtype | None = None,
        length_bucket: int = 256,
        sync_every: int = 16,
        max_caches: int = 2,
    ) -> None:
        super().__init__(model, tokenizer, device=device, max_batch_size=max_batch_size, rollout_dtype=rollout_dtype)
        if min(length_bucket, sync_every, max_caches) < 1:
            raise ValueError(
                f"length_bucket, sync_every and max_caches must be >= 1, got {length_bucket}, "
                f"{sync_every}, {max_caches}"
            )
        self.max_caches = int(max_caches)
        self.compile = self.device.type == "cuda" if compile is None else bool(compile)
        self.length_bucket, self.sync_every = int(length_bucket), int(sync_every)
        self.stats: dict[str, float] = {"compiles": 0.0, "compile_s": 0.0, "decode_steps": 0.0}
        self._caches: dict[tuple[int, int], Any] = {}
        self._compiled: set[tuple[int, int]] = set()  # buckets whose decode step is compiled
        self._step = _decode_step
        if self.compile:
            import torch._dynamo  # the compiler (a slow import): --compile only

            limit = "recompile_limit" if hasattr(torch._dynamo.config, "recompile_limit") else "cache_size_limit"
            # one graph per (batch, cache) bucket: the default limit of 8 would fall back to eager
            setattr(torch._dynamo.config, limit, max(getattr(torch._dynamo.config, limit), 64))
            mode = "reduce-overhead" if self.device.type == "cuda" else None
            self._step = torch.compile(_decode_step, fullgraph=True, dynamic=False, mode=mode)

    # ----------------------------------------------------------------------------------------
    def release(self) -> None:
        """Free every bucket's KV cache (the next call allocates what it needs again)."""
        self._caches.clear()
        if self.device.type == "cuda":
            torch.cuda.empty_cache()

    def _cache(self, batch: int, length: int) -> Any:
        """The bucket's cache, allocated once and zeroed for each use (a CUDA graph keeps its
        addresses); at most ``max_caches`` are kept, the least recently used dropped first."""
        from transformers import StaticCache  # a slow import

        key = (batch, length)
        cache = self._caches.pop(key, None)
        if cache is None:
            while len(self._caches) >= self.max_caches:
                self._caches.pop(next(iter(self._caches)))
            cache = StaticCache(config=self.model.config, max_cache_len=length)
        else:
            cache.reset()
        self._caches[key] = cache  # now the most recently used
        return cache

    def _generate_batch(self, prompts: list[list[int]], cfg: SamplingConfig, gen: torch.Generator) -> list[Generation]:
        b = len(prompts)
        rows = batch_bucket(b, self.max_batch_size)
        padded = prompts + [prompts[-1]] * (rows - b)  # filler rows: decoded, never returned
        width = max(len(p) for p in padded)
        length = length_bucket_of(width + cfg.max_new_tokens, self.length_bucket)
        dev = self.device
        ids, prompt_mask = left_padded(padded, width, self.pad_token_id, dev)
        mask = torch.zeros((rows, length), dtype=torch.long, device=dev)  # the whole cache's, written as it fills
        mask[:, :width] = prompt_mask
        pos = (prompt_mask.cumsum(-1) - 1).clamp(min=0)
        cache = self._cache(rows, length)
        positions = torch.arange(length, device=dev)
        out = self.model(
            input_ids=ids,
            attention_mask=mask[:, :width],
            position_ids=pos,
            cache_position=positions[:width],
            use_cache=True,
            logits_to_keep=1,
            **{self._cache_kw: cache},
        )
        logits = out.logits[:, -1, :]
        return self._decode(prompts, cfg, gen, logits, mask, pos[:, -1:], cache, positions, width, (rows, length))

    def _decode(
        self,
        prompts: list[list[int]],
        cfg: SamplingConfig,
        gen: torch.Generator,
        logits: torch.Tensor,
        mask: torch.Tensor,
        pos: torch.Tensor,
        cache: Any,
        positions: torch.Tensor,
        width: int,
        bucket: tuple[int, int],
    ) -> list[Generation]:
        b, rows, dev, n_new = len(prompts), logits.shape[0], self.device, cfg.max_new_tokens
        resp = torch.full((rows, n_new), self.pad_token_id, dtype=torch.long, device=dev)
        lps = torch.zeros((rows, n_new), dtype=torch.float32, device=dev)
        end = torch.full((rows,), n_new, dtype=torch.long, device=dev)  # tokens kept per row
        done = torch.zeros(rows, dtype=torch.bool, device=dev)
        eos = torch.tensor(sorted(self.eos_ids) or [-1], device=dev)
        pad = torch.full_like(end, self.pad_token_id)
        done[b:] = True  # filler rows: never returned, so never what the batch waits for
        stopped = [False] * rows  # ended by a stop string (found by the host)
        checked = 0  # positions [0, checked) have been looked at for stop strings
        # the generator's state after each draw since the host's last look: the loop engine stops
        # drawing at the step its last row ends, so the generator is set back to the state after
        # that step's draw and the next batch draws what the loop engine's next batch draws
        states: list[torch.Tensor] = []
        first = 0  # the step of states[0]
        k = -1
        for k in range(n_new):
            logp = processed_log_softmax(
                logits, 1.0 if cfg.greedy else cfg.temperature, 1.0 if cfg.greedy else cfg.top_p
            )
            # only the real rows draw from the generator: a row's samples never depend on the bucket
            drawn = (
                logp[:b].argmax(-1) if cfg.greedy else torch.multinomial(logp[:b].exp(), 1, generator=gen).squeeze(-1)
            )
            if not cfg.greedy:
                states.append(gen.get_state())
            tok = torch.cat([drawn, pad[b:]]) if b < rows else drawn
            resp[:, k] = tok
            lps[:, k] = logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
            if k + 1 >= cfg.min_new_tokens:
                hit = torch.isin(tok, eos) & ~done
                end = torch.where(hit, k + 1, end)
                done = done | hit
            last = k + 1 == n_new
            if last or (k + 1) % self.sync_every == 0:
                checked = self._find_stops(cfg, resp, end, done, stopped, checked, k + 1)
                if last or bool(done.all()):
                    break
                states.clear()
                first = k + 1
            mask[:, width + k] = (~done).long()
            pos = pos + 1
            logits = self._timed_step(
                bucket,
                torch.where(done, pad, tok).unsqueeze(-1),
                mask,
                pos,
                cache,
                positions[width + k : width + k + 1],
            )
        self.stats["decode_steps"] += k + 1
        done_h, end_h = done.tolist(), end.tolist()  # the loop ends when every row is done or at n_new
        if states:  # the loop engine's last draw: the step its last row ended at (n_new - 1 if one ran out)
            gen.set_state(states[max(end_h[:b]) - 1 - first])
        return self._generations(prompts, resp.tolist(), lps.tolist(), end_h, done_h)

    def _generations(
        self,
        prompts: list[list[int]],
        resp_h: list[list[int]],
        lps_h: list[list[float]],
        end_h: list[int],
        done_h: list[bool],
    ) -> list[Generation]:
        """Each real row's kept tokens (``end_h[i]`` of them: n_new for a row that ran to the end)."""
        out = []
        for i, prompt in enumerate(prompts):
            n = end_h[i]
            out.append(
                Generation(
                    prompt_ids=prompt,
                    response_ids=resp_h[i][:n],
                    logprobs=lps_h[i][:n],
                    text=self.tokenizer.decode(resp_h[i][:n], skip_special_tokens=True),
                    finish_reason="stop" if done_h[i] else "length",
                )
            )
        return out

    def _find_stops(
        self,
        cfg: SamplingConfig,
        resp: torch.Tensor,
        end: torch.Tensor,
        done: torch.Tensor,
        stopped: list[bool],
        checked: int,
        upto: int,
    ) -> int:
        """Mark the rows whose answer contains a stop string in positions ``[checked, upto)``, at the
        first such position (before an EOS the device found); returns ``upto``."""
        if not cfg.stop:
            return upto
        window = max(len(s) for s in cfg.stop) + 2
        start = max(0, checked - window)
        tail, done_h, end_h = resp[:, start:upto].tolist(), done.tolist(), end.tolist()
        for i, row in enumerate(tail):
            if stopped[i]:
                continue
            limit = end_h[i] - 1 if done_h[i] else upto  # an EOS at end - 1 ends the answer itself
            for j in range(max(checked, cfg.min_new_tokens - 1), limit):
                text = self.tokenizer.decode(
                    row[max(0, j + 1 - window) - start : j + 1 - start], skip_special_tokens=True
                )
                if any(s in text for s in cfg.stop):
                    stopped[i] = True
                    end[i], done[i] = j + 1, True
                    break
        return upto

    def _timed_step(self, bucket: tuple[int, int], *args: Any) -> torch.Tensor:
        """The decode step; the first one of a new bucket is timed as its compilation."""
        if not self.compile or bucket in self._compiled:
            if self.compile and hasattr(torch.compiler, "cudagraph_mark_step_begin"):
                torch.compiler.cudagraph_mark_step_begin()
            return self._step(self.model, self._cache_kw, *args)
        t0 = time.perf_counter()
        logits = self._step(self.model, self._cache_kw, *args)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        seconds = time.perf_counter() - t0
        self._compiled.add(bucket)
        self.stats["compiles"] += 1
        self.stats["compile_s"] += seconds
        # the first call's buckets compile at start; a later new bucket compiles mid-run, which a
        # run should know about (its shapes outgrew the buckets seen so far)
        level = logging.WARNING if self.stats["decode_steps"] > 0 else logging.INFO
        log.log(
            level,
            "decode step compiled for batch %d x cache %d in %.1f s%s",
            *bucket,
            seconds,
            " (mid-run: a shape bucket not seen before)" if level == logging.WARNING else "",
        )
        return logits
