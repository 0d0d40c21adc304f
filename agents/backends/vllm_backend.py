"""Sampling with vLLM on a GPU (extra ``[vllm]``; vLLM 0.33 pins ``torch==2.14.0`` and
``transformers<5.21``, so install it in its own environment: ``pip install 'progpo[vllm]'``).

* The engine is created with ``logprobs_mode="processed_logprobs"`` so that the reported
  log-probs are those of the distribution actually sampled from (after temperature/top-p);
  vLLM's default is the raw distribution, which would make PPO ratios start off 1.
* ``sync_weights(model)`` pushes the trainer's **full** ``state_dict()`` through
  ``llm.collective_rpc("reload_weights", kwargs={"weights_iterator": ...})``: with tied
  embeddings ``named_parameters()`` misses ``lm_head.weight`` and corrupts the log-probs.
* ``sleep()`` / ``wake_up()`` free and restore the engine's GPU memory so training can use
  the same GPU between rollouts (``enable_sleep_mode=True``).

vLLM is imported lazily: constructing the backend without it raises an ``ImportError`` that
says how to install it; the configuration is validated before that.

Example (GPU only):
    >>> backend = VLLMBackend("smollm2", gpu_memory_utilization=0.3)      # doctest: +SKIP
    >>> gens = backend.generate([[1, 2, 3]], SamplingConfig(n=4), seed=0)  # doctest: +SKIP
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from agents.backends.base import Generation, SamplingConfig

__all__ = ["VLLM_INSTALL_HINT", "VLLMBackend", "VLLMConfig"]

VLLM_INSTALL_HINT = (
    "the vLLM backend needs vLLM on a CUDA GPU: pip install 'progpo[vllm]' "
    "(vLLM 0.33 pins torch==2.14.0 and transformers<5.21 -- use a separate environment); "
    "or use backend='transformers'"
)
_DTYPES = ("auto", "float32", "float16", "bfloat16")


@dataclass(frozen=True)
class VLLMConfig:
    """Engine settings, validated without importing vLLM.

    Attributes:
        model: ``"smollm2"``, ``"tiny"``, a local directory or a hub name (see
            :func:`agents.models.materialize`).
        dtype: engine dtype (``"auto"``, ``"float32"``, ``"float16"``, ``"bfloat16"``).
        gpu_memory_utilization: fraction of GPU memory vLLM may take, in (0, 1].
        max_model_len: context length.
        enable_sleep_mode: allow ``sleep()`` / ``wake_up()``.
        seed: engine seed.
        llm_kwargs: passed through to ``vllm.LLM``.
    """

    model: str = "smollm2"
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.4
    max_model_len: int = 4096
    enable_sleep_mode: bool = True
    seed: int = 0
    llm_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if not (0.0 < float(self.gpu_memory_utilization) <= 1.0):
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")
        if int(self.max_model_len) < 16:
            raise ValueError(f"max_model_len must be >= 16, got {self.max_model_len!r}")
        if "logprobs_mode" in self.llm_kwargs and self.llm_kwargs["logprobs_mode"] != "processed_logprobs":
            raise ValueError("logprobs_mode must stay 'processed_logprobs' (PPO needs the sampled "
                             "distribution's log-probs)")


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as exc:
        raise ImportError(VLLM_INSTALL_HINT) from exc
    return vllm


class VLLMBackend:
    """:class:`~agents.backends.base.GenerationBackend` over ``vllm.LLM``.

    Args:
        model: model name/path (``"smollm2"`` is materialized to a local checkpoint first),
            or a :class:`VLLMConfig`.
        tokenizer: optional tokenizer used to decode text (vLLM's own is used otherwise).
        **kw: :class:`VLLMConfig` fields (``dtype``, ``gpu_memory_utilization`` ...).
    """

    def __init__(self, model: str | VLLMConfig = "smollm2", tokenizer: Any = None, **kw: Any) -> None:
        known = set(VLLMConfig.__dataclass_fields__)
        extra = {k: kw.pop(k) for k in list(kw) if k not in known}
        if isinstance(model, VLLMConfig):
            cfg = model
        else:
            llm_kwargs = {**kw.pop("llm_kwargs", {}), **extra}
            cfg = VLLMConfig(model=str(model), llm_kwargs=llm_kwargs, **kw)
        self.config = cfg
        vllm = _import_vllm()
        from agents.models import materialize

        path = str(materialize(cfg.model)) if not cfg.model.startswith(("/", ".")) else cfg.model
        llm_kwargs = dict(cfg.llm_kwargs)
        llm_kwargs["logprobs_mode"] = "processed_logprobs"
        self.llm = vllm.LLM(
            model=path, dtype=cfg.dtype, gpu_memory_utilization=cfg.gpu_memory_utilization,
            max_model_len=cfg.max_model_len, enable_sleep_mode=cfg.enable_sleep_mode, seed=cfg.seed,
            **llm_kwargs,
        )
        self.tokenizer = tokenizer
        self._vllm = vllm
        self._asleep = False

    @staticmethod
    def sampling_params(vllm: Any, cfg: SamplingConfig, seed: int | None) -> Any:
        """``vllm.SamplingParams`` equivalent to ``cfg`` (``logprobs=0``: the sampled token's)."""
        return vllm.SamplingParams(
            n=cfg.n, temperature=float(cfg.temperature), top_p=float(cfg.top_p),
            max_tokens=int(cfg.max_new_tokens), stop=list(cfg.stop), include_stop_str_in_output=True,
            logprobs=0, seed=seed,
        )

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], cfg: SamplingConfig, *, seed: int | None = None
    ) -> list[Generation]:
        """Sample ``cfg.n`` responses per prompt (prompt-major order)."""
        if self._asleep:
            self.wake_up()
        prompts = [{"prompt_token_ids": list(map(int, p))} for p in prompt_ids]
        params = [self.sampling_params(self._vllm, cfg, None if seed is None else int(seed) + i)
                  for i in range(len(prompts))]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        results: list[Generation] = []
        for prompt, out in zip(prompt_ids, outputs):
            for comp in out.outputs:
                ids = list(comp.token_ids)
                lps = [float(step[tok].logprob) for tok, step in zip(ids, comp.logprobs or [])]
                text = (self.tokenizer.decode(ids, skip_special_tokens=True)
                        if self.tokenizer is not None else comp.text)
                results.append(Generation(
                    prompt_ids=list(prompt), response_ids=ids, logprobs=lps, text=text,
                    finish_reason="length" if comp.finish_reason == "length" else "stop",
                ))
        return results

    @staticmethod
    def weights_of(model: Any) -> Iterator[tuple[str, Any]]:
        """``(name, tensor)`` pairs of the FULL state dict (tied ``lm_head.weight`` included).

        A peft model is merged on the fly (``base_layer`` weights + LoRA delta) so vLLM receives
        plain checkpoint names.
        """
        if hasattr(model, "merge_and_unload") and hasattr(model, "get_base_model"):
            import copy

            model = copy.deepcopy(model).merge_and_unload()
        for name, tensor in model.state_dict().items():
            yield name, tensor.detach()

    def sync_weights(self, model: Any) -> None:
        """Push ``model``'s full ``state_dict()`` into the engine and drop stale prefix caches."""
        if self._asleep:
            self.wake_up()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(self.weights_of(model))})
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if reset is not None:
            reset()

    def sleep(self, level: int = 1) -> None:
        """Free the engine's GPU memory (weights offloaded at level 1) until :meth:`wake_up`."""
        if not self.config.enable_sleep_mode:
            raise RuntimeError("this engine was built with enable_sleep_mode=False")
        if not self._asleep:
            self.llm.sleep(level=level)
            self._asleep = True

    def wake_up(self) -> None:
        """Restore the engine after :meth:`sleep`."""
        if self._asleep:
            self.llm.wake_up()
            self._asleep = False
