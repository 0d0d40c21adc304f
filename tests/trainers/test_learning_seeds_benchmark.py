"""benchmarks/learning_seeds.py: per-seed rows and the mean gain over seeds with its t-interval."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("learning_seeds", ROOT / "benchmarks" / "learning_seeds.py")
learning_seeds = importlib.util.module_from_spec(spec)
spec.loader.exec_module(learning_seeds)


def _run(tmp: Path, seed: int, start_wins: int, end_wins: int, n: int = 20, finished: bool = True) -> Path:
    """A run folder whose metrics.jsonl has the start eval and (when finished) the end eval."""
    d = tmp / f"seed_{seed}"
    d.mkdir()
    recs = [
        {"iteration": 0, "kind": "init"},
        {
            "iteration": 0,
            "kind": "eval",
            "eval/split": "easy-valid",
            "eval/episodes": n,
            "eval/success": start_wins / n,
            "eval/won": [1] * start_wins + [0] * (n - start_wins),
        },
    ]
    if finished:
        recs.append(
            {
                "iteration": 12,
                "kind": "eval",
                "eval/split": "easy-valid",
                "eval/episodes": n,
                "eval/success": end_wins / n,
                "eval/won": [1] * end_wins + [0] * (n - end_wins),
            }
        )
    (d / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    return d


def test_summary_rows_mean_and_t_interval(tmp_path):
    runs = {0: _run(tmp_path, 0, 4, 7), 1: _run(tmp_path, 1, 5, 5), 2: _run(tmp_path, 2, 3, 6)}
    table, res = learning_seeds.summarize(runs)
    assert res["diffs"] == pytest.approx([0.15, 0.0, 0.15])
    diffs = np.array([0.15, 0.0, 0.15])
    half = 4.302653 * diffs.std(ddof=1) / np.sqrt(3)  # t(0.975, 2)
    assert res["mean"] == pytest.approx(0.1) and res["ci"] == pytest.approx((0.1 - half, 0.1 + half))
    assert res["at_least_10"] == 2
    assert "| 0 | 0.200 | 0.350 | +0.150 |" in table and "Mean difference over 3 seeds: **+0.100**" in table


def test_unfinished_run_is_a_row_not_a_crash_and_is_rerun(tmp_path, monkeypatch):
    runs = {0: _run(tmp_path, 0, 4, 7), 1: _run(tmp_path, 1, 5, 0, finished=False)}
    table, res = learning_seeds.summarize(runs)
    assert res["diffs"] == pytest.approx([0.15]) and "| 1 | (no start and end evaluation)" in table
    calls = []
    monkeypatch.setattr(learning_seeds.subprocess, "run", lambda cmd, **kw: calls.append(cmd))
    assert learning_seeds.run_seed(0, tmp_path, [], fresh=False) == tmp_path / "seed_0"  # finished: reused
    learning_seeds.run_seed(1, tmp_path, ["--iterations", "2"], fresh=False)  # unfinished: run again
    assert len(calls) == 1 and calls[0][-2:] == ["--iterations", "2"] and "--seed" in calls[0]
