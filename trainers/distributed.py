"""Multi-process training plumbing: ranks, group sharding, gradient all-reduce, gathers, FSDP2.

Launch ``python -m trainers.progpo`` under ``torchrun --nproc-per-node N`` or ``accelerate
launch --num-processes N``: both set ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK`` /
``MASTER_ADDR`` / ``MASTER_PORT``, and :func:`setup` joins the process group from them (gloo on
CPU, NCCL on GPU, one GPU per local rank). Without them it is a no-op (world size 1).

How a run is split (see :class:`~trainers.loop.trainer.Trainer`):

* **Groups.** Rank r plays groups ``shard_groups(B, W, r)`` of the B groups of an iteration, a
  contiguous block; a group never straddles ranks, so per-group advantages are computed
  locally and equal the single-process ones. ``B`` must be a multiple of ``W``.
* **Sampling.** Rank r samples with :func:`shard_seed` ``(seed, r)``; shard 0's seed is the
  single-process seed, so a 1-process run is unchanged.
* **Gradients.** Each rank back-propagates its steps of a mini-batch with the loss weighted by
  the *global* token count of that mini-batch, then :func:`all_reduce_grads` sums the gradients
  (one flat buffer, like DDP's buckets): the result is the gradient of the global token-mean
  loss, identical on every rank, so clipping and AdamW stay in step without more traffic.
  DDP's wrapper itself is not used: its reducer wants one forward per backward on every rank,
  while here ranks hold different numbers of steps (episodes end at different lengths) and
  score mode runs a data-dependent number of forwards per step.
* **FSDP2** (``--dist-strategy fsdp2``; GPU, or CPU over gloo for rehearsals): :func:`apply_fsdp2` shards every decoder layer and
  the root with ``torch.distributed.fsdp.fully_shard``; FSDP2 reduce-scatters the gradients.
  Rollouts and evaluations run on gathered (unsharded) weights (:func:`full_weights`), so ranks
  may run different numbers of forwards there; the update pads every rank to the same number
  of micro-batches (zero-weight ones) so the sharded forwards stay in lockstep.
* **I/O.** Metrics are gathered on rank 0 (:func:`gather_objects`), which alone writes logs,
  checkpoints, the report and runs evaluations; the others wait at a barrier.

Example (single process: everything degrades to local calls)::

    >>> info = DistInfo()
    >>> info.world_size, info.is_main, list(shard_groups(8, 2, 1))
    (1, True, [4, 5, 6, 7])
    >>> shard_seed(123, 0)
    123
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "DistInfo",
    "STRATEGIES",
    "all_reduce_grads",
    "full_state_dicts",
    "all_reduce_max",
    "all_reduce_sum",
    "apply_fsdp2",
    "barrier",
    "broadcast_parameters",
    "full_weights",
    "gather_objects",
    "setup",
    "shard_groups",
    "shard_seed",
    "teardown",
]

STRATEGIES = ("ddp", "fsdp2")


@dataclass(frozen=True)
class DistInfo:
    """Where this process sits: ``rank`` of ``world_size``, its ``local_rank`` on the node."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    strategy: str = "ddp"
    #: a launcher (torchrun) started this process, so a process group exists even for one rank
    launched: bool = False

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1 or self.launched


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value) if value.strip() else default


def setup(device: str = "cpu", strategy: str = "ddp", timeout_s: float = 1800.0) -> DistInfo:
    """Join the process group a launcher describes in the environment (no-op for one process).

    ``device``: ``"cpu"`` (gloo) or ``"cuda"`` (NCCL; the process takes GPU ``LOCAL_RANK``).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"dist_strategy must be one of {STRATEGIES}, got {strategy!r}")
    world = _env_int("WORLD_SIZE", 1)
    # torchrun --nproc-per-node 1 with fsdp2: a real process group of one (FSDP2 at world size 1);
    # plain one-process runs (and ddp over one rank) stay local calls
    launched = world == 1 and strategy == "fsdp2" and bool(os.environ.get("MASTER_ADDR"))
    info = DistInfo(
        rank=_env_int("RANK", 0),
        world_size=world,
        local_rank=_env_int("LOCAL_RANK", 0),
        strategy=strategy,
        launched=launched,
    )
    if world <= 1 and not launched:
        return info
    if device == "cuda":
        torch.cuda.set_device(info.local_rank)
    if not dist.is_initialized():
        dist.init_process_group(
            backend="nccl" if device == "cuda" else "gloo", timeout=datetime.timedelta(seconds=timeout_s)
        )
    return info


def teardown() -> None:
    """Leave the process group, if this process joined one (safe to call in any case)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def shard_groups(num_groups: int, world_size: int, rank: int) -> range:
    """The contiguous block of groups rank ``rank`` plays; ``num_groups`` must divide evenly.

    >>> [list(shard_groups(6, 3, r)) for r in range(3)]
    [[0, 1], [2, 3], [4, 5]]
    """
    if num_groups % world_size:
        from trainers.config import ConfigError  # a flag of the user's, said in one line

        raise ConfigError(
            f"num_groups ({num_groups}) must be a multiple of the number of processes ({world_size}): "
            "groups never straddle ranks"
        )
    per = num_groups // world_size
    return range(rank * per, (rank + 1) * per)


def shard_seed(seed: int, shard: int) -> int:
    """Sampling seed of shard ``shard``: ``seed`` itself for shard 0, an independent stream otherwise.

    >>> shard_seed(5, 0), shard_seed(5, 1) != shard_seed(5, 2)
    (5, True)
    """
    if shard == 0:
        return int(seed)
    return int(np.random.SeedSequence([int(seed), int(shard)]).generate_state(1, np.uint64)[0] >> 2)


def all_reduce_sum(values: Sequence[float], device: torch.device | None = None) -> list[float]:
    """Sum of ``values`` over ranks (float64; unchanged for one process)."""
    if not dist.is_initialized():
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device or _comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.cpu().tolist()


def all_reduce_max(values: Sequence[float]) -> list[float]:
    """Element-wise max of ``values`` over ranks."""
    if not dist.is_initialized():
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=_comm_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return t.cpu().tolist()


def _comm_device() -> torch.device:
    return torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else torch.device("cpu")


def all_reduce_grads(params: Iterable[torch.nn.Parameter]) -> None:
    """Sum every parameter's ``.grad`` over ranks in one flat buffer (missing grads count as 0)."""
    if not dist.is_initialized():
        return
    params = list(params)
    grads = []
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        grads.append(p.grad)
    flat = torch.cat([g.reshape(-1) for g in grads])
    dist.all_reduce(flat, op=dist.ReduceOp.SUM)
    offset = 0
    for g in grads:
        n = g.numel()
        g.copy_(flat[offset : offset + n].view_as(g))
        offset += n


def broadcast_parameters(module: torch.nn.Module, src: int = 0) -> None:
    """Make every rank hold rank ``src``'s parameters and buffers."""
    if not dist.is_initialized():
        return
    with torch.no_grad():
        for t in list(module.parameters()) + list(module.buffers()):
            dist.broadcast(t.data, src=src)


def gather_objects(obj: Any, world_size: int) -> list[Any] | None:
    """Every rank's ``obj`` on rank 0 (in rank order), ``None`` elsewhere; ``[obj]`` for one process."""
    if not dist.is_initialized():
        return [obj]
    out: list[Any] | None = [None] * world_size if dist.get_rank() == 0 else None
    dist.gather_object(obj, out, dst=0)
    return out


def barrier() -> None:
    """Wait for every rank (nothing with one process)."""
    if dist.is_initialized():
        dist.barrier()


def apply_fsdp2(model: torch.nn.Module) -> torch.nn.Module:
    """Shard ``model`` in place with FSDP2: each decoder layer, then the root (GPU ranks)."""
    from torch.distributed.fsdp import fully_shard  # FSDP2's module: sharded runs only

    layers = None
    for path in ("model.layers", "base_model.model.model.layers", "transformer.h"):
        obj: Any = model
        for part in path.split("."):
            obj = getattr(obj, part, None)
            if obj is None:
                break
        if obj is not None:
            layers = obj
            break
    for layer in layers or []:
        fully_shard(layer)
    fully_shard(model)
    return model


@contextlib.contextmanager
def full_weights(model: torch.nn.Module, info: DistInfo) -> Iterator[None]:
    """FSDP2: gather the whole weights for the block (forwards then need no collective, so ranks
    may generate different numbers of tokens); a no-op for replicated (ddp) models."""
    if info.strategy != "fsdp2" or not info.enabled:
        yield
        return
    # FSDP2's methods, looked up by name: a plain module has none of them
    modules: list[Any] = [
        m for m in model.modules() if hasattr(m, "unshard") and hasattr(m, "set_reshard_after_forward")
    ]
    for m in modules:
        m.set_reshard_after_forward(False)
    for m in modules:
        m.unshard()
    try:
        yield
    finally:
        for m in modules:
            m.reshard()
            m.set_reshard_after_forward(True)


def full_state_dicts(model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> tuple[dict[str, Any], dict[str, Any]]:
    """FSDP2: the whole (unsharded, CPU) model and optimizer state dicts; a collective call."""
    # the sharded state-dict API: sharded runs only
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict, get_optimizer_state_dict

    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_model_state_dict(model, options=opts), get_optimizer_state_dict(model, optimizer, options=opts)
