"""The Hugging Face model card (``README.md``) an export writes beside the weights.

Its YAML header is what the Hub and ``huggingface_hub.ModelCard`` read (``base_model``,
``library_name``, ``tags``); its text says how the policy was trained (estimator, collector,
teacher, with "privileged" where the teacher read privileged information), on which env and
splits, its last evaluation with the interval, the commit, and how to load it.

>>> card = model_card({"model": "tiny", "estimator": "progpo-gigpo", "rollout": "flat", "distill": "none",
...                    "env": "rooms", "train_split": "train", "eval_split": "valid"}, "peft adapter", None,
...                    "/tmp/out", "abc1234", base="/tmp/out/base")
>>> card.splitlines()[:2], "progpo-gigpo" in card, "PeftModel" in card or "AutoPeftModel" in card
(['---', 'base_model: /tmp/out/base'], True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np
import yaml

from trainers.statistics import paired_bootstrap_ci
from trainers.teachers.registry import label_of, reads_privileged

__all__ = ["last_evaluation", "model_card"]


def last_evaluation(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The run's last held-out evaluation (``kind: eval``) with a 95% bootstrap interval over its
    episodes, or ``None`` when the run recorded none."""
    evals = [r for r in records if r.get("kind") == "eval" and isinstance(r.get("eval/success"), (int, float))]
    if not evals:
        return None
    last = evals[-1]
    won = [float(w) for w in last.get("eval/won", [])]
    lo, hi = paired_bootstrap_ci(np.zeros(len(won)), won, seed=0)[1:] if won else (None, None)
    return {
        "iteration": last.get("iteration"),
        "split": last.get("eval/split"),
        "episodes": last.get("eval/episodes"),
        "success": float(last["eval/success"]),
        "lo": lo,
        "hi": hi,
    }


def model_card(
    cfg: dict[str, Any],
    weights: str,
    evaluation: dict[str, Any] | None,
    out: str,
    commit: str | None,
    base: str | None = None,
) -> str:
    """The card's text: a YAML header, then the training method, the evaluation and the loading line."""
    adapter = weights == "peft adapter"
    teacher = cfg.get("distill") or "none"
    privileged = reads_privileged(teacher)
    header: dict[str, Any] = {
        "base_model": base or str(cfg.get("model")),
        "library_name": "peft" if adapter else "transformers",
        "tags": ["progpo", "reinforcement-learning", "llm-agent", str(cfg.get("env"))]
        + (["privileged-teacher"] if privileged else []),
        "pipeline_tag": "text-generation",
    }
    teacher_text = (
        "none"
        if teacher == "none"
        else f"{teacher} (**privileged**: the teacher read information the agent never sees; not pure RL)"
        if privileged
        else label_of(cfg) or f"{teacher} (a plug-in teacher, not loaded here)"
    )
    if evaluation is None:
        eval_text = "not recorded (the checkpoint's history holds no held-out evaluation)"
    else:
        interval = (
            f" (95% bootstrap interval [{evaluation['lo']:.3f}, {evaluation['hi']:.3f}] over its episodes)"
            if evaluation["lo"] is not None
            else ""
        )
        eval_text = (
            f"held-out success {evaluation['success']:.3f}{interval} on {evaluation['episodes']} episodes of "
            f"`{evaluation['split']}` at iteration {evaluation['iteration']}"
        )
    load = (
        f"from peft import AutoPeftModelForCausalLM\nmodel = AutoPeftModelForCausalLM.from_pretrained({out!r})"
        if adapter
        else f"from transformers import AutoModelForCausalLM\nmodel = AutoModelForCausalLM.from_pretrained({out!r})"
    )
    lines = [
        "---",
        yaml.safe_dump(header, sort_keys=False).strip(),
        "---",
        "",
        f"# A ProGPO policy for {cfg.get('env')}",
        "",
        f"Trained with ProGPO's trainer (`python -m trainers.progpo`) from `{cfg.get('model')}`; weights: {weights}.",
        "",
        "## Training",
        "",
        f"- estimator: `{cfg.get('estimator')}`",
        f"- collector: `{cfg.get('rollout', 'flat')}` rollouts",
        f"- teacher: {teacher_text}",
        f"- env: `{cfg.get('env')}`, trained on `{cfg.get('train_split')}`, evaluated on `{cfg.get('eval_split')}`",
        f"- code: commit `{commit or 'not recorded'}`",
        "",
        "## Evaluation",
        "",
        f"Last evaluation: {eval_text}.",
        "",
        "## Loading",
        "",
        "```python",
        load,
        "```",
        "",
        "The prompt the policy was trained with is in `progpo_export.json` (`prompt`).",
        "",
    ]
    return "\n".join(lines)
