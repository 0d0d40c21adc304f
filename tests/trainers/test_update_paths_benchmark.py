"""benchmarks/update_paths.py: every path runs the same update (the same loss, float rounding
aside); the length order pads less than the prefix order; the table and the profile print."""

from __future__ import annotations

import json

import pytest


def test_the_update_paths_compute_one_update_and_the_length_order_pads_less(tmp_path, run_script):
    out = tmp_path / "paths.json"
    shape = "--groups 2 --group-size 3 --steps 3 --prompt-tokens 60 --response-tokens 6 --micro-batch-tokens 200"
    flags = f"{shape} --logit-chunk 4 --repeats 1 --profile --json".split()
    run = run_script("benchmarks/update_paths.py", *flags, out)
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
    bad = run_script("benchmarks/update_paths.py", "--paths", "turbo")
    assert bad.returncode != 0 and "unknown path(s) turbo" in bad.stderr
