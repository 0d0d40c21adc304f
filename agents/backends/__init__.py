"""Generation backends behind one interface (:class:`~agents.backends.base.GenerationBackend`).

Example:
    >>> from agents.models import make_tiny_model
    >>> model, tok = make_tiny_model()
    >>> type(make_backend("transformers", model, tok)).__name__
    'TransformersBackend'
"""

from __future__ import annotations

from typing import Any

from agents.backends.base import Generation, GenerationBackend, SamplingConfig
from agents.backends.hf import ROLLOUT_DTYPES, TransformersBackend
from agents.backends.static import StaticCacheBackend

__all__ = [
    "BACKENDS",
    "DECODES",
    "Generation",
    "GenerationBackend",
    "ROLLOUT_DTYPES",
    "SamplingConfig",
    "StaticCacheBackend",
    "TransformersBackend",
    "make_backend",
]

BACKENDS = ("transformers", "hf", "vllm")
#: the transformers backend's decoding engines: the written-out loop, or the static cache in buckets
DECODES = ("loop", "static")


def make_backend(name: str, model: Any, tokenizer: Any, **kw: Any) -> GenerationBackend:
    """Build a backend by name.

    * ``"transformers"`` / ``"hf"``: ``TransformersBackend(model, tokenizer, **kw)``, or with
      ``decode="static"`` :class:`StaticCacheBackend` (the same samples, fewer per-step costs).
    * ``"vllm"``: :func:`~agents.backends.vllm_backend.make_vllm_backend`: the engine loads the
      checkpoint named by ``kw["model_path"]`` (default: ``model.config.name_or_path``, the
      checkpoint the model was loaded from), its weights are synced from ``model``, and
      :func:`~agents.backends.vllm_backend.check_engine_matches` proves the engine runs the
      same architecture and weights (``check=False`` skips the log-prob comparison). With no
      name at all it raises: a different model is never substituted.
    """
    key = str(name).strip().lower()
    if key in ("transformers", "hf"):
        decode = kw.pop("decode", "loop")
        if decode not in DECODES:
            raise ValueError(f"decode must be one of {', '.join(DECODES)}, got {decode!r}")
        return (StaticCacheBackend if decode == "static" else TransformersBackend)(model, tokenizer, **kw)
    if key == "vllm":
        # vLLM is an optional extra, and its backend's module imports this package
        from agents.backends.vllm_backend import make_vllm_backend

        return make_vllm_backend(model, tokenizer, **kw)
    raise ValueError(f"unknown backend {name!r}; expected one of {BACKENDS}")
