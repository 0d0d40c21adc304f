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
from agents.backends.hf import TransformersBackend

__all__ = ["BACKENDS", "Generation", "GenerationBackend", "SamplingConfig", "TransformersBackend", "make_backend"]

BACKENDS = ("transformers", "hf", "vllm")


def make_backend(name: str, model: Any, tokenizer: Any, **kw: Any) -> GenerationBackend:
    """Build a backend by name.

    * ``"transformers"`` / ``"hf"``: :class:`TransformersBackend(model, tokenizer, **kw)`.
    * ``"vllm"``: :class:`~agents.backends.vllm_backend.VLLMBackend`; the engine loads the
      checkpoint named by ``kw["model_path"]`` (default: ``model.config.name_or_path``) and its
      weights are then synced from ``model``, so a trained in-memory model is what samples.
    """
    key = str(name).strip().lower()
    if key in ("transformers", "hf"):
        return TransformersBackend(model, tokenizer, **kw)
    if key == "vllm":
        from agents.backends.vllm_backend import VLLMBackend

        path = kw.pop("model_path", None) or getattr(getattr(model, "config", None), "name_or_path", None)
        if not path or path == "HuggingFaceTB/SmolLM2-135M-Instruct":
            path = "smollm2"
        backend = VLLMBackend(str(path), tokenizer=tokenizer, **kw)
        backend.sync_weights(model)
        return backend
    raise ValueError(f"unknown backend {name!r}; expected one of {BACKENDS}")
