"""`benchmarks/gpu_check.sh` scaled down on the CPU (DEVICE=cpu): every step of the GPU check runs
here first, so a short GPU lease is not spent on a typo."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_gpu_check_cpu_rehearsal(tmp_path, alfworld_engine_available) -> None:
    out = tmp_path / "gpu_check"
    env = {**os.environ, "DEVICE": "cpu", "OUT": str(out), "PYTHON": sys.executable, "MASTER_PORT": "29631"}
    run = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh")], capture_output=True, text=True,
                         timeout=900, cwd=ROOT, env=env)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["steps"] == {k: "ok" for k in ("preflight", "paper", "fsdp_plain", "fsdp2", "fsdp_compare", "short")}
    it = report["iteration"]
    # fixed-length answers: each of the 2 x 2 envs answered 16 tokens at each of its 2 steps (no
    # ALFWorld task is solvable in 2 steps, so no episode ends early)
    assert it["response_tokens"] == 2 * 2 * it["steps_per_episode"] * 16
    assert it["generation_tokens_per_s"] > 0 and it["update_tokens_per_s"] > 0
    assert it["paper_iteration_s_estimate"] == pytest.approx(it["iteration_s"] * 50 / it["steps_per_episode"])
    assert report["fsdp"]["same_batch"] and report["fsdp"]["ok"]
    assert report["short"]["report_says_where_progpo_acted"]
    assert "| 50-step iteration, estimated (s)" in run.stdout
