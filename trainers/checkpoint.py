"""Checkpoints: trainable weights (full model or LoRA adapter), optimizer, RNG states, schedule.

One file per checkpoint, ``<run>/checkpoints/iter_000N.pt``, written atomically (temp file +
rename) with a ``latest`` pointer next to it. Loading anything broken (truncated, not a
checkpoint, wrong format) raises :class:`CheckpointError` with a one-line message.

>>> import tempfile, torch
>>> d = tempfile.mkdtemp()
>>> path = save_checkpoint(d, 3, {"model": {"w": torch.ones(2)}})
>>> load_checkpoint(latest_checkpoint(d))["iteration"]
3
"""
from __future__ import annotations

import os
import pickle
import random
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["CheckpointError", "FORMAT", "capture_rng", "latest_checkpoint", "load_checkpoint", "restore_rng", "save_checkpoint"]

FORMAT = "progpo-checkpoint-v1"


class CheckpointError(RuntimeError):
    """A checkpoint is missing, corrupt or incompatible; the message says which file and what to do."""


def capture_rng() -> dict[str, Any]:
    """Python, numpy and torch (CPU + CUDA) RNG states, as tensors / ints (``weights_only`` loadable)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                  "has_gauss": int(has_gauss), "cached": float(cached)},
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    py, npy = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(x) for x in py["internal"].tolist()), py["gauss"]))
    np.random.set_state((npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["cached"]))
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(run_dir: str | Path, iteration: int, payload: dict[str, Any], keep_last: int = 1) -> Path:
    """Write ``payload`` (+ format tag, iteration) and point ``latest`` at it; prune old ones."""
    ckpt_dir = Path(run_dir) / "checkpoints"
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    path = ckpt_dir / f"iter_{iteration:06d}.pt"
    tmp = path.with_suffix(".pt.tmp")
    torch.save({"format": FORMAT, "iteration": iteration, **payload}, tmp)
    os.replace(tmp, path)
    pointer_tmp = ckpt_dir / "latest.tmp"
    pointer_tmp.write_text(path.name + "\n")
    os.replace(pointer_tmp, ckpt_dir / "latest")
    for old in sorted(ckpt_dir.glob("iter_*.pt"))[:-keep_last] if keep_last > 0 else []:
        old.unlink(missing_ok=True)
    return path


def latest_checkpoint(run_dir: str | Path) -> Path:
    """The file the ``latest`` pointer of ``run_dir/checkpoints`` names."""
    ckpt_dir = Path(run_dir) / "checkpoints"
    pointer = ckpt_dir / "latest"
    if not pointer.is_file():
        raise CheckpointError(f"no checkpoint to resume in {ckpt_dir} (no 'latest' file); start without --resume")
    name = pointer.read_text(errors="replace").strip()
    path = ckpt_dir / name
    if not name or "/" in name or not path.is_file():
        raise CheckpointError(f"{pointer} names {name!r}, which is not a checkpoint file in {ckpt_dir}")
    return path


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (CPU tensors)."""
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {p} does not exist")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)  # no pickled code
    except (RuntimeError, EOFError, OSError, pickle.UnpicklingError, pickle.PickleError, zipfile.BadZipFile, ValueError, AttributeError,
            ImportError, IndexError, KeyError, TypeError) as err:
        detail = type(err).__name__
        if str(err) and not isinstance(err, pickle.UnpicklingError):  # torch's unpickling text is advice, not cause
            detail += ": " + str(err).splitlines()[0][:120]
        raise CheckpointError(f"checkpoint {p} is corrupt or unreadable ({detail}); "
                              "delete it or resume from another run") from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{p} is not a {FORMAT} file")
    return data
