"""What a run starts from, as its :class:`~trainers.config.TrainConfig` names it: the device, the
LLM policy, the env factories, the model shared over processes, the teacher, the behaviour-cloning
warm start."""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np
import torch

from agents.backends import make_backend
from agents.contract import TrainablePolicy
from agents.models import load_model
from agents.policy import make_policy
from trainers import distributed
from trainers.config import ConfigError, TrainConfig
from trainers.envs import ENV_TABLE, check_split, make_env_fn
from trainers.runs.console import progress_bar
from trainers.sft import behaviour_clone, collect_demos
from trainers.teachers.registry import reads_privileged
from trainers.teachers.registry import teacher as registered_teacher

__all__ = [
    "build_policy",
    "env_fns",
    "generation_engine",
    "make_teacher",
    "resolve_device",
    "shared_model",
    "warm_start",
]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when a GPU is visible, else the CPU; ``cuda`` without one is refused."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device cuda requested but no CUDA GPU is visible; use --device cpu")
    return torch.device(name)


def build_policy(cfg: TrainConfig, device: torch.device) -> TrainablePolicy:
    """The LLM policy of ``cfg``: load the model (+ LoRA), make the backend (generate mode) and the policy."""
    model, tokenizer = load_model(cfg.model, init_std=cfg.tiny_init_std or None, device=device)
    model.to(device)  # fp32 master weights; bf16 is autocast compute (Updater.autocast), never a cast of the weights
    if cfg.lora:
        from peft import LoraConfig, get_peft_model  # peft loads for a LoRA run only

        model = get_peft_model(
            model,
            LoraConfig(
                r=cfg.lora_r,
                lora_alpha=cfg.lora_alpha,
                target_modules="all-linear",
                lora_dropout=0.0,
                task_type="CAUSAL_LM",
            ),
        )
    backend = None
    if cfg.policy_mode == "generate":  # score mode ranks commands with the model itself
        backend_kw: dict[str, Any] = {}
        if cfg.backend == "transformers":
            backend_kw.update(max_batch_size=cfg.gen_batch_size, **generation_engine(cfg, device))
        if cfg.backend == "vllm" and device.type == "cuda" and cfg.bf16:
            backend_kw["dtype"] = "bfloat16"  # match the trainer's bf16 autocast compute
        backend = make_backend(cfg.backend, model, tokenizer, **backend_kw)
    return make_policy(cfg.policy_mode, model, tokenizer, backend, cfg.resolved_template, cfg.policy_options())


def generation_engine(cfg: TrainConfig, device: torch.device) -> dict[str, Any]:
    """The transformers backend's engine for ``cfg`` on ``device``: ``decode`` and ``rollout_dtype``
    with ``auto`` resolved (a GPU: the static cache, compiled, sampling from bf16 weights when the
    run computes in bf16; CPU, or weights sharded by FSDP2: the loop over the trained weights)."""
    gpu = device.type == "cuda" and cfg.dist_strategy != "fsdp2"  # FSDP2's sharded layers: the loop over them
    decode = cfg.decode if cfg.decode != "auto" else ("static" if gpu else "loop")
    dtype = cfg.rollout_dtype if cfg.rollout_dtype != "auto" else ("bf16" if gpu and cfg.bf16 else "fp32")
    return {"decode": decode, "rollout_dtype": None if dtype == "fp32" else dtype}


def env_fns(
    cfg: TrainConfig, env_fn: Callable[[], Any] | None = None, eval_env_fn: Callable[[], Any] | None = None
) -> tuple[Callable[[], Any], Callable[[], Any]]:
    """The member env factories of the train and eval splits (those given kept). A missing split
    fails here, before anything is written. A privileged teacher reads the train envs'
    privileged text (the agent never does: it is in no prompt)."""
    if env_fn is None or eval_env_fn is None:
        for split in {*cfg.splits, *([cfg.resolved_eval_extra_split] if cfg.resolved_eval_extra_split else [])}:
            check_split(cfg.env, split)
    train_split, eval_split = cfg.splits
    reads = reads_privileged(cfg.distill) and ENV_TABLE[cfg.env].privileged_info
    privileged = {"privileged_info": True} if reads else {}
    return (
        env_fn or make_env_fn(cfg.env, train_split, cfg.max_steps, cfg.state_key, **privileged),
        eval_env_fn or make_env_fn(cfg.env, eval_split, cfg.max_steps, cfg.state_key),
    )


def shared_model(cfg: TrainConfig, model: torch.nn.Module, dist: distributed.DistInfo) -> None:
    """Several processes: every rank starts from rank 0's weights; FSDP2 shards them."""
    if not dist.enabled:
        return
    distributed.broadcast_parameters(model)
    if dist.strategy == "fsdp2":
        if cfg.kl_coef > 0 and not cfg.lora:
            raise ConfigError(
                "dist_strategy fsdp2 does not support kl_coef > 0 with full fine-tuning yet "
                "(the frozen reference copy is not sharded); use --lora or --dist-strategy ddp"
            )
        distributed.apply_fsdp2(model)


def make_teacher(cfg: TrainConfig, policy: TrainablePolicy, dist: distributed.DistInfo) -> Any:
    """The teacher of ``cfg.distill``, built by its registration
    (:class:`trainers.teachers.registry.TeacherSpec`), or ``None``."""
    if cfg.distill == "none":
        return None
    if dist.enabled:
        raise ConfigError(
            f"distill {cfg.distill} runs in one process (its teacher is not sharded); drop "
            "torchrun / accelerate launch or use --distill none"
        )
    return registered_teacher(cfg.distill).build(cfg, policy, policy.model)


def warm_start(cfg: Any, policy: Any, env_fn: Callable[[], Any]) -> dict[str, Any]:
    """Behaviour cloning (``warm_start: bc``) of ``cfg`` from an expert that reads only what the agent
    reads (ALFWorld: the searching expert; WebShop: the instruction-following shopper); returns
    the ``init`` record."""
    t0 = time.perf_counter()
    agent = ENV_TABLE[cfg.env].make_expert()
    demos, wins = collect_demos(env_fn, n_episodes=cfg.bc_episodes or None, seed=cfg.seed, agent=agent)
    bar = progress_bar(cfg.bc_steps, "warm start (bc)", cfg.progress_bars)
    try:
        schedule = dict(steps=cfg.bc_steps, batch_size=cfg.bc_batch_size, lr=cfg.bc_lr, lr_schedule=cfg.bc_lr_schedule)
        stats = behaviour_clone(
            policy, demos, seed=cfg.seed, on_step=bar.update, micro_batch=cfg.resolved_bc_micro_batch, **schedule
        )
    finally:
        bar.close()
    rec: dict[str, Any] = {
        "iteration": 0,
        "kind": "init",
        "init": "bc",
        "bc/expert_success": float(np.mean(wins)),
        "bc/expert_episodes": float(len(wins)),
        "time/init_s": time.perf_counter() - t0,
    }
    rec.update(stats)
    return rec
