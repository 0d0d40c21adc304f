"""benchmarks/update_paths.py: every path runs the same update (the same loss, float rounding
aside); the length order pads less than the prefix order; the table and the profile print."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_update_paths_compute_one_update_and_the_length_order_pads_less(tmp_path):
    out = tmp_path / "paths.json"
    run = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "update_paths.py"),
            *(
                "--groups 2 --group-size 3 --steps 3 --prompt-tokens 60 --response-tokens 6 --micro-batch-tokens "
                "200 --logit-chunk 4 --repeats 1 --profile --json"
            ).split(),
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    data = json.loads(out.read_text())
    rows = {r["path"]: r for r in data["rows"]}
    assert list(rows) == ["prefix", "length", "length + logit chunks", "length + checkpointing"]
    assert data["steps"] == 2 * 3 * 3 and len({r["input_tokens"] for r in rows.values()}) == 1
    losses = [r["pg_loss"] for r in rows.values()]
    assert max(losses) - min(losses) == pytest.approx(0.0, abs=1e-6) and losses[0] != 0.0
    assert rows["length"]["padding"] < rows["prefix"]["padding"]
    assert all(r["update_tflops"] > 0 and r["peak_gpu_mem_gib"] is None for r in rows.values())
    assert "| prefix |" in run.stdout and "costliest operators" in run.stdout and len(data["profile"]) == 10
    bad = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "update_paths.py"), "--paths", "turbo"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert bad.returncode != 0 and "unknown path(s) turbo" in bad.stderr
