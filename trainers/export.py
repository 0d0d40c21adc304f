"""Export a saved policy as a Hugging Face model directory.

    python -m trainers.export runs/progpo exported/           # config, safetensors weights, tokenizer
    python -m trainers.export runs/lora_run adapter/          # a LoRA run: the peft adapter
    python -m trainers.export runs/lora_run merged/ --merge   # a LoRA run: the merged model

The directory loads with ``AutoModelForCausalLM.from_pretrained(OUT_DIR)`` and gives the trained
policy's logits. An adapter loads with ``peft.AutoPeftModelForCausalLM.from_pretrained(OUT_DIR)``
when its base is a hub name or a local dir; a tiny or bundled base is written beside it
(``OUT_DIR/base``): ``PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(OUT_DIR /
"base"), OUT_DIR)``; the vLLM backend
(``--backend vllm --model OUT_DIR``) loads a full model directory as it is. ``progpo_export.json``
beside the weights says which run, checkpoint and iteration it came from and the prompt settings
the policy was trained with. Exit status: 0 done, 2 a problem said in one line.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

__all__ = ["export_saved", "main"]

#: what a policy needs besides its weights to act as it was trained (its prompt)
PROMPT_FIELDS = ("env", "policy_mode", "template", "history_k", "max_new_tokens", "temperature", "top_p",
                 "avoid_repeats", "max_steps", "state_key")


def _loadable_by_name(model: str) -> bool:
    """Whether ``from_pretrained(model)`` finds the base model elsewhere: a local dir or a hub name."""
    from agents.models import is_hub_name

    return Path(model).expanduser().is_dir() or is_hub_name(model)


def export_saved(saved: Any, out_dir: str | Path, merge: bool = False) -> Path:
    """Write ``saved`` (a :class:`trainers.saved_policy.SavedPolicy`) to ``out_dir``; returns it."""
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise FileExistsError(f"{out} exists and is not an empty directory; pick another OUT_DIR")
    model, tokenizer = saved.model, saved.policy.tokenizer
    lora = bool(saved.cfg.lora)
    if lora and merge:
        model = model.merge_and_unload()
    elif merge:
        raise ValueError("--merge applies to LoRA runs; this run trained the full model")
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    base_dir = None
    if lora and not merge and not _loadable_by_name(str(saved.cfg.model)):
        # a tiny or bundled base has no name another process can load: it goes beside the adapter
        base_dir = out / "base"
        base = model.unload()
        base.save_pretrained(base_dir, safe_serialization=True)
        tokenizer.save_pretrained(base_dir)
    generation_config = getattr(model, "generation_config", None)
    if generation_config is not None and not (out / "generation_config.json").exists():
        generation_config.save_pretrained(out)
    cfg = saved.cfg.to_dict()
    manifest = {"format": "progpo-export-v1", "checkpoint": str(saved.checkpoint), "iteration": saved.iteration,
                "model": cfg.get("model"), "weights": "peft adapter" if lora and not merge else "full model",
                "prompt": {k: cfg.get(k) for k in PROMPT_FIELDS}, "estimator": cfg.get("estimator"),
                "base": "base" if base_dir is not None else cfg.get("model")}
    (out / "progpo_export.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    from trainers.checkpoint import CheckpointError
    from trainers.saved_policy import load_saved
    from wrappers.errors import UserError

    ap = argparse.ArgumentParser(prog="python -m trainers.export", description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a run dir (its latest checkpoint) or a checkpoint file (iter_NNNNNN.pt)")
    ap.add_argument("out_dir", help="the model directory to write (absent or empty)")
    ap.add_argument("--merge", action="store_true", help="LoRA runs: merge the adapter into the base model")
    args = ap.parse_args(argv)
    try:
        out = export_saved(load_saved(args.path), args.out_dir, merge=args.merge)
    except (UserError, CheckpointError, ValueError, FileExistsError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    print(f"-> {out}: AutoModelForCausalLM.from_pretrained({str(out)!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
