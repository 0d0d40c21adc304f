"""Export a saved policy as a Hugging Face model directory.

    python -m trainers.export runs/progpo exported/           # config, safetensors weights, tokenizer
    python -m trainers.export runs/lora_run adapter/          # a LoRA run: the peft adapter
    python -m trainers.export runs/lora_run merged/ --merge   # a LoRA run: the merged model

The directory loads with ``AutoModelForCausalLM.from_pretrained(OUT_DIR)`` and gives the trained
policy's logits. An adapter loads with ``peft.AutoPeftModelForCausalLM.from_pretrained(OUT_DIR)``,
offline: its config names its base (a hub name, a local dir, or, for a tiny or bundled base, the
copy written beside it in ``OUT_DIR/base``); the vLLM backend
(``--backend vllm --model OUT_DIR``) loads a full model directory as it is. ``progpo_export.json``
beside the weights says which run, checkpoint and iteration it came from and the prompt settings
the policy was trained with. Exit status: 0 done, 2 a problem said in one line.
"""

# Imports inside functions: the command's modules (torch, the envs, the policy) load when it runs, so
# that importing this module (the documentation, the shim, a test of its parser) loads none of them.
from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from trainers.runs.provenance import read_provenance
from trainers.runs.run_files import check_can_make
from wrappers.errors import UserError

__all__ = ["check_out_dir", "export_saved", "load_line", "main"]

#: what a policy needs besides its weights to act as it was trained (its prompt)
PROMPT_FIELDS = (
    "env",
    "policy_mode",
    "template",
    "history_k",
    "max_new_tokens",
    "temperature",
    "top_p",
    "avoid_repeats",
    "max_steps",
    "state_key",
)


def _loadable_by_name(model: str) -> bool:
    """Whether ``from_pretrained(model)`` finds the base model elsewhere: a local dir or a hub name."""
    from agents.models import is_hub_name

    return Path(model).expanduser().is_dir() or is_hub_name(model)


def check_out_dir(out_dir: str | Path) -> Path:
    """``out_dir`` resolved, or a one-line :class:`~wrappers.errors.UserError` before any work: it
    must be absent or an empty directory, inside a folder that exists (or can be made) and is
    writable, and not a link."""
    out = Path(out_dir)
    if out.is_symlink():
        raise UserError(
            f"{out} is a link ({'dangling' if not out.exists() else 'to ' + str(out.resolve())}); pick another OUT_DIR"
        )
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"{out} exists and is not an empty directory; pick another OUT_DIR")
    check_can_make(out.absolute().parent, f"{out} cannot be made")
    return out.absolute()


def export_saved(saved: Any, out_dir: str | Path, merge: bool = False) -> Path:
    """Write ``saved`` (a :class:`trainers.saved_policy.SavedPolicy`) to ``out_dir``; returns it.

    ``saved``'s own model is left as it is (merging or unloading works on a copy), so a script can
    export and go on using the policy. The directory is written whole into a temporary folder
    beside it and renamed into place: a failure (a full disk) leaves nothing half-written."""
    out = check_out_dir(out_dir)
    lora = bool(saved.cfg.lora)
    if merge and not lora:
        raise ValueError("--merge applies to LoRA runs; this run trained the full model")
    tokenizer = saved.policy.tokenizer
    base_name = None
    if lora and not merge:
        model_name = str(saved.cfg.model)
        local = Path(model_name).expanduser()
        base_name = (
            str(out / "base")
            if not _loadable_by_name(model_name)  # a tiny or bundled base: beside it
            else str(local.absolute())
            if local.is_dir()
            else model_name
        )
    base_beside = base_name == str(out / "base")
    # merging and unloading change a peft model in place: they work on a copy
    model = copy.deepcopy(saved.model) if lora and (merge or base_beside) else saved.model
    if lora and merge:
        model = model.merge_and_unload()
    named = {}
    if base_name is not None:  # AutoPeftModelForCausalLM then finds the base offline
        named = {k: c.base_model_name_or_path for k, c in model.peft_config.items()}
        for peft_config in model.peft_config.values():
            peft_config.base_model_name_or_path = base_name
    out.parent.mkdir(parents=True, exist_ok=True)
    clear_stale_temps(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".tmp", dir=out.parent))
    try:
        _write(saved, model, tokenizer, tmp, lora, merge, base_beside, out)
        if out.exists():
            out.rmdir()  # an empty folder the check accepted
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for key, was in named.items():  # the caller's policy keeps its own config
            if model is saved.model:
                model.peft_config[key].base_model_name_or_path = was
    return out


def clear_stale_temps(out: Path) -> list[Path]:
    """Remove the temporary folders of earlier exports of ``out`` that were killed mid-write (their
    process, named in the folder, is gone); one of a live export is left, and one whose writer
    is unknown is named on stderr. Returns what was removed."""
    removed = []
    for tmp in sorted(out.parent.glob(f".{glob.escape(out.name)}.*.tmp")):
        if not tmp.is_dir() or tmp.is_symlink():
            continue
        pid_text = tmp.name[len(out.name) + 2 :].split(".", 1)[0]
        if pid_text.isdigit() and not _alive(int(pid_text)):
            shutil.rmtree(tmp, ignore_errors=True)
            removed.append(tmp)
        elif not pid_text.isdigit():
            print(f"note: {tmp} is left from an interrupted export of {out.name}; remove it", file=sys.stderr)
    return removed


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts as alive)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _write(
    saved: Any, model: Any, tokenizer: Any, out: Path, lora: bool, merge: bool, base_beside: bool, final: Path
) -> None:
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    if base_beside:
        base = model.unload()  # the copy's: the adapter above is written already
        base.save_pretrained(out / "base", safe_serialization=True)
        tokenizer.save_pretrained(out / "base")
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None and not (out / "generation_config.json").exists():
        generation_config.save_pretrained(out)
    cfg = {**saved.cfg.to_dict(), **getattr(saved, "recorded", {})}
    manifest = {
        "format": "progpo-export-v1",
        "checkpoint": str(saved.checkpoint),
        "iteration": saved.iteration,
        "model": cfg.get("model"),
        "weights": "peft adapter" if lora and not merge else "full model",
        "prompt": {k: cfg.get(k) for k in PROMPT_FIELDS},
        "estimator": cfg.get("estimator"),
        "base": "base" if base_beside else cfg.get("model"),
    }
    (out / "progpo_export.json").write_text(json.dumps(manifest, indent=1) + "\n")
    _write_card(saved, out, manifest["weights"], final, base_beside)


def _write_card(saved: Any, out: Path, weights: str, final: Path, base_beside: bool) -> None:
    """The Hugging Face model card (``README.md``), from the checkpoint's own history (the records
    up to its iteration; a copied checkpoint never reads another run's ``metrics.jsonl``) and its
    run dir's provenance where that run is the checkpoint's; ``final``: where the export will lie
    once renamed into place."""
    from trainers.model_card import last_evaluation, model_card

    run_dir = Path(saved.checkpoint).resolve().parent.parent  # RUN/checkpoints/iter_NNNNNN.pt
    records = [
        r for r in saved.history or [] if not isinstance(r.get("iteration"), int) or r["iteration"] <= saved.iteration
    ]
    mine = saved.history is not None and _run_dir_is_its_own(run_dir, saved.history)
    commits = [r.get("commit") for r in read_provenance(run_dir) if r.get("kind") == "provenance" and r.get("commit")]
    commits = commits if mine else []
    cfg = {
        **saved.cfg.to_dict(),
        **getattr(saved, "recorded", {}),
        "train_split": saved.cfg.splits[0],
        "eval_split": saved.cfg.splits[1],
    }
    (out / "README.md").write_text(
        model_card(
            cfg,
            weights,
            last_evaluation(records),
            str(final),
            commits[-1] if commits else None,
            base=str(final / "base") if base_beside else None,
        )
    )


def _run_dir_is_its_own(run_dir: Path, history: list[dict[str, Any]]) -> bool:
    """Whether ``run_dir``'s ``metrics.jsonl`` begins with the checkpoint's history (the dir is the
    run that wrote it, not one it was copied into); a damaged file is read up to its damage."""
    from trainers.runs.metrics import begins_with, scan_metrics

    path = run_dir / "metrics.jsonl"
    return path.is_file() and begins_with(scan_metrics(path)[0], history)


def load_line(out: Path) -> str:
    """The Python line that loads an export at ``out``."""
    manifest = json.loads((out / "progpo_export.json").read_text())
    if manifest["weights"] == "peft adapter":
        return f"peft.AutoPeftModelForCausalLM.from_pretrained({str(out)!r})"
    return f"transformers.AutoModelForCausalLM.from_pretrained({str(out)!r})"


def main(argv: list[str] | None = None) -> int:
    from trainers.runs.checkpoint import CheckpointError
    from trainers.saved_policy import load_saved

    ap = argparse.ArgumentParser(prog="python -m trainers.export", description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a run dir (its latest checkpoint) or a checkpoint file (iter_NNNNNN.pt)")
    ap.add_argument("out_dir", help="the model directory to write (absent or empty)")
    ap.add_argument("--merge", action="store_true", help="LoRA runs: merge the adapter into the base model")
    args = ap.parse_args(argv)
    try:
        check_out_dir(args.out_dir)  # before the checkpoint is read
        out = export_saved(load_saved(args.path), args.out_dir, merge=args.merge)
    except (UserError, CheckpointError, ValueError, OSError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    print(f"-> {out}: {load_line(out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
