"""Lab runs as the lab's tests need them: a JSON entry reduced to what the analysis reads, and a
finished run folder as the lab keeps it."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from trainers.lab import methods


def run_with_evals(method: str, seed: int, evals: list[tuple[int, float]], all_failed_it1: float = 0.9) -> dict:
    """A run of ``method`` at ``seed`` with held-out success ``y`` at each ``(iteration, y)`` and
    the all-failed share ``all_failed_it1`` at iteration 1."""
    return {
        "method": method,
        "seed": seed,
        "train": [{"iteration": 1, "all_failed_fraction": all_failed_it1}],
        "eval": [{"iteration": i, "eval/success": y} for i, y in evals],
    }


def write_kept_run(
    folder: Path,
    method: str,
    seed: int,
    config: dict | None = None,
    records: list[dict] | None = None,
    success: float = 0.25,
    eval_iterations: tuple[int, ...] = (0, 2),
) -> Path:
    """A finished 2-iteration run of ``method`` at ``seed`` as the lab keeps it in ``folder``:
    ``config.yaml`` (the method's axes, then ``config``, which may override them), ``metrics.jsonl`` (``records``, or two
    train records and held-out success ``success`` at each of ``eval_iterations``) and
    ``summary.md``."""
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"iterations": 2, "seed": seed, **methods.axes_of(method), **(config or {})}
    (folder / "config.yaml").write_text(yaml.safe_dump(cfg))
    if records is None:
        train = {src: 0.5 for src in methods.TRAIN_KEYS.values()}
        records = [{"iteration": i, "kind": "train", **train} for i in (1, 2)]
        records += [
            {"iteration": i, "kind": "eval", "eval/success": success, "eval/episodes": 4} for i in eval_iterations
        ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (folder / "summary.md").write_text("# ProGPO run report\n")
    return folder
