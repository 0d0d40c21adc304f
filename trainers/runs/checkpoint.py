"""Checkpoints: trainable weights (full model or LoRA adapter), optimizer, RNG states, schedule.

One file per checkpoint, ``<run>/checkpoints/iter_000N.pt``, written atomically (temp file +
rename) with a ``latest`` pointer next to it and its SHA-256 in ``iter_000N.pt.sha256``.
Loading verifies the file before unpickling it: against the checksum file when there is one,
else against the CRC-32 of every record of the zip (``torch.load`` checks neither, so flipped
bytes inside tensor data would load silently). Loading anything broken (truncated, damaged,
not a checkpoint, wrong format, a required entry missing or of the wrong type) raises
:class:`CheckpointError` with a one-line message.

>>> import tempfile, torch
>>> d = tempfile.mkdtemp()
>>> path = save_checkpoint(d, 3, {"model": {"w": torch.ones(2)}})
>>> load_checkpoint(latest_checkpoint(d))["iteration"]
3
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import re
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from trainers import stop_request
from trainers.runs.run_files import LinkedPathError, create_fresh, real_dir
from wrappers.errors import UserError

__all__ = [
    "CheckpointError",
    "FORMAT",
    "TRAINING_ENTRIES",
    "capture_rng",
    "checkpoint_files",
    "checksum_path",
    "latest_checkpoint",
    "load_checkpoint",
    "load_trainable_state",
    "load_weights",
    "restore_rng",
    "save_checkpoint",
    "save_weights",
    "trainable_state",
    "verify_file",
]

FORMAT = "progpo-checkpoint-v1"

#: entries (and their types) a checkpoint needs to resume training
TRAINING_ENTRIES: Mapping[str, type] = {"model": dict, "optimizer": dict, "rng": dict, "history": list}


class CheckpointError(UserError, RuntimeError):
    """A checkpoint is missing, corrupt or incompatible; the message says which file and what to do."""


def capture_rng() -> dict[str, Any]:
    """Python, numpy and torch (CPU + CUDA) RNG states, as tensors / ints (``weights_only`` loadable)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state()
    state: dict[str, Any] = {
        "python": {"version": version, "internal": torch.tensor(internal, dtype=torch.int64), "gauss": gauss},
        "numpy": {
            "kind": kind,
            # numpy's stub types the legacy state tuple loosely: keys is an array
            "keys": torch.from_numpy(keys.astype(np.int64)),  # type: ignore[attr-defined]
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    """Put back the Python, numpy and torch RNG states :func:`capture_rng` took."""
    py, npy = state["python"], state["numpy"]
    random.setstate((py["version"], tuple(int(x) for x in py["internal"].tolist()), py["gauss"]))
    np.random.set_state(
        (npy["kind"], npy["keys"].numpy().astype(np.uint32), npy["pos"], npy["has_gauss"], npy["cached"])
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checksum_path(path: str | Path) -> Path:
    """The SHA-256 file next to checkpoint ``path``."""
    p = Path(path)
    return p.with_name(p.name + ".sha256")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_file(path: str | Path) -> None:
    """Raise :class:`CheckpointError` unless ``path`` matches its checksum file (or, without one,
    the CRC-32 of every zip record)."""
    p = Path(path)
    hint = "delete it (and its .sha256) or resume from another run"
    sums = checksum_path(p)
    if sums.is_file():
        expected = sums.read_text(errors="replace").split()[:1]
        if not expected or len(expected[0]) != 64:
            raise CheckpointError(f"checksum file {sums} is unreadable; {hint}")
        if _sha256(p) != expected[0].lower():
            raise CheckpointError(f"checkpoint {p} is corrupt (SHA-256 differs from {sums.name}); {hint}")
        return
    try:
        with zipfile.ZipFile(p) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as err:
        raise CheckpointError(f"checkpoint {p} is corrupt or unreadable (not a valid zip: {err}); {hint}") from err
    if bad is not None:
        raise CheckpointError(f"checkpoint {p} is corrupt (CRC check failed for record {bad}); {hint}")


def checkpoint_files(run_dir: str | Path, iteration: int) -> tuple[Path, Path, Path]:
    """The files :func:`save_checkpoint` writes for ``iteration``: the checkpoint, its checksum, ``latest``."""
    path = Path(run_dir) / "checkpoints" / f"iter_{iteration:06d}.pt"
    return path, checksum_path(path), path.parent / "latest"


def save_checkpoint(run_dir: str | Path, iteration: int, payload: dict[str, Any], keep_last: int = 1) -> Path:
    """Write ``payload`` (+ format tag, iteration) and its checksum, point ``latest`` at it; prune old ones.

    A write that fails (a full disk) leaves no partial file behind and the previous checkpoint in
    place, and raises :class:`CheckpointError` in one line. A Ctrl-C or SIGTERM that comes while it
    writes is delivered once the checkpoint is complete: the stop then resumes from it.
    """
    with stop_request.signals_held():
        return _save_checkpoint(run_dir, iteration, payload, keep_last)


def _save_checkpoint(run_dir: str | Path, iteration: int, payload: dict[str, Any], keep_last: int) -> Path:
    path = checkpoint_files(run_dir, iteration)[0]
    ckpt_dir = real_dir(path.parent)  # a planted link there would put the files (and the pruning) elsewhere
    tmp = path.with_suffix(".pt.tmp")
    sums = checksum_path(path)
    sums_tmp, pointer_tmp = sums.with_name(sums.name + ".tmp"), ckpt_dir / "latest.tmp"
    try:  # each temp file made afresh: a link planted at its (predictable) name is removed, not followed
        with create_fresh(tmp) as fh:
            torch.save({"format": FORMAT, "iteration": iteration, **payload}, fh)
        digest = _sha256(tmp)
        with create_fresh(sums_tmp) as fh:
            fh.write(f"{digest}  {path.name}\n".encode())  # written before anything is replaced
        with create_fresh(pointer_tmp) as fh:
            fh.write((path.name + "\n").encode())
    except LinkedPathError:
        raise
    except (OSError, RuntimeError) as err:  # torch's zip writer reports a full disk as a RuntimeError
        for partial in (tmp, sums_tmp, pointer_tmp):
            if not partial.is_symlink():
                partial.unlink(missing_ok=True)
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err).splitlines()[0][:120]
        raise CheckpointError(
            f"cannot write checkpoint {path} ({reason}; is the disk full?); the partial file "
            "was removed and the previous checkpoint is kept"
        ) from None
    sums.unlink(missing_ok=True)  # a crash before the new one lands leaves the zip CRCs to check
    os.replace(tmp, path)
    os.replace(sums_tmp, sums)
    os.replace(pointer_tmp, ckpt_dir / "latest")
    # Keep the file just written and the newest others (by iteration number) up to keep_last;
    # the one just written is never pruned, even when an older run left a higher number behind.
    others = sorted(p for p in ckpt_dir.glob("iter_*.pt") if p != path and re.fullmatch(r"iter_\d{6}\.pt", p.name))
    for old in others[: max(len(others) - (keep_last - 1), 0)] if keep_last > 0 else []:
        old.unlink(missing_ok=True)
        checksum_path(old).unlink(missing_ok=True)
    return path


def latest_checkpoint(run_dir: str | Path) -> Path:
    """The file the ``latest`` pointer of ``run_dir/checkpoints`` names."""
    ckpt_dir = Path(run_dir) / "checkpoints"
    pointer = ckpt_dir / "latest"
    if not pointer.is_file():
        raise CheckpointError(
            f"no checkpoint to resume in {ckpt_dir} (no 'latest' file); start without --resume "
            "(plus --overwrite where the dir holds an earlier run's files)"
        )
    name = pointer.read_text(errors="replace").strip()
    path = ckpt_dir / name
    if not name or "/" in name or not path.is_file():
        raise CheckpointError(f"{pointer} names {name!r}, which is not a checkpoint file in {ckpt_dir}")
    return path


def load_checkpoint(path: str | Path, require: Sequence[str] = ()) -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint` (CPU tensors), verified first.

    ``require``: entries that must be present with the type :data:`TRAINING_ENTRIES` gives
    (``iteration``, a non-negative int, always is).
    """
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"checkpoint {p} does not exist")
    verify_file(p)
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)  # no pickled code
    except (
        RuntimeError,
        EOFError,
        OSError,
        pickle.UnpicklingError,
        pickle.PickleError,
        zipfile.BadZipFile,
        ValueError,
        AttributeError,
        ImportError,
        IndexError,
        KeyError,
        TypeError,
    ) as err:
        detail = type(err).__name__
        if str(err) and not isinstance(err, pickle.UnpicklingError):  # torch's unpickling text is advice, not cause
            detail += ": " + str(err).splitlines()[0][:120]
        raise CheckpointError(
            f"checkpoint {p} is corrupt or unreadable ({detail}); delete it or resume from another run"
        ) from err
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{p} is not a {FORMAT} file")
    iteration = data.get("iteration")
    if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
        raise CheckpointError(
            f"checkpoint {p} has no valid 'iteration' (got {iteration!r}); it is damaged or was "
            "not written by this trainer"
        )
    for key in require:
        kind = TRAINING_ENTRIES.get(key, object)
        if not isinstance(data.get(key), kind):
            got = "nothing" if key not in data else type(data[key]).__name__
            raise CheckpointError(
                f"checkpoint {p} has no valid '{key}' (a {kind.__name__} is needed, got {got}); "
                "it is damaged or was not written by this trainer"
            )
    if "history" in require and not all(isinstance(r, dict) for r in data["history"]):
        raise CheckpointError(f"checkpoint {p}: 'history' must be a list of records (dicts)")
    return data


# ---------------------------------------------------------------------------- weights
def trainable_state(model: torch.nn.Module, lora: bool) -> dict[str, torch.Tensor]:
    """What a checkpoint keeps of ``model``: its LoRA adapter (``lora``) or its whole ``state_dict``, on CPU."""
    if lora:
        from peft import get_peft_model_state_dict  # peft loads for a LoRA run only

        return {k: v.detach().cpu() for k, v in get_peft_model_state_dict(model).items()}
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def load_trainable_state(model: torch.nn.Module, state: Mapping[str, Any], lora: bool) -> None:
    """Load :func:`trainable_state`'s output strictly: a missing or unexpected key, or a shape that
    differs, raises ``ValueError``.

    >>> m = torch.nn.Linear(2, 1)
    >>> load_trainable_state(m, {"weight": torch.zeros(1, 3), "bias": torch.zeros(1)}, lora=False)
    Traceback (most recent call last):
    ...
    ValueError: weight: expected shape (1, 2), got (1, 3)
    """
    expected = trainable_state(model, lora)
    missing, unexpected = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or unexpected:
        raise ValueError(
            f"{len(missing)} missing key(s) {missing[:3]}, {len(unexpected)} unexpected key(s) {unexpected[:3]}"
        )
    for key, value in state.items():
        if not isinstance(value, torch.Tensor) or value.shape != expected[key].shape:
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"{key}: expected shape {tuple(expected[key].shape)}, got {got}")
    if lora:
        from peft import set_peft_model_state_dict  # (as above)

        set_peft_model_state_dict(model, dict(state))
    else:
        model.load_state_dict(state, strict=True)


def save_weights(model: torch.nn.Module, path: str | Path) -> Path:
    """Write ``model``'s ``state_dict`` to ``path`` (e.g. a warm start shared by several runs)."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    torch.save(trainable_state(model, lora=False), p)
    return p


def load_weights(model: torch.nn.Module, path: str | Path, model_name: str = "") -> None:
    """Load a :func:`save_weights` file into ``model``; a missing, corrupt or mismatched file raises
    :class:`CheckpointError` in one line."""
    p = Path(path)
    if not p.is_file():
        raise CheckpointError(f"weights_file {p} does not exist")
    try:
        state = torch.load(p, map_location="cpu", weights_only=True)
        model.load_state_dict(state)
    except Exception as err:  # a corrupt or mismatched file: one line, not a traceback
        raise CheckpointError(
            f"weights_file {p} cannot be loaded into model {model_name!r} "
            f"({type(err).__name__}: {str(err).splitlines()[0][:150] if str(err) else ''})"
        ) from err
