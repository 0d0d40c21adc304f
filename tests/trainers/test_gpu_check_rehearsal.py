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
    env = {
        **os.environ,
        "DEVICE": "cpu",
        "OUT": str(out),
        "PYTHON": sys.executable,
        "MASTER_PORT": "29631",
        "DECODE": "static",
    }  # the GPU's engine, uncompiled on the CPU
    run = subprocess.run(
        ["bash", str(ROOT / "benchmarks" / "gpu_check.sh")],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
        env=env,
    )
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    report = json.loads((out / "gpu_check.json").read_text())
    assert report["steps"] == {
        k: "ok"
        for k in ("preflight", "paper", "engines", "update_paths", "fsdp_plain", "fsdp2", "fsdp_compare", "short")
    }
    assert [r["engine"] for r in report["engines"]["rows"]] == ["loop", "static bf16"]
    paths = report["update_paths"]
    assert [r["path"] for r in paths["rows"]] == ["prefix", "length", "length + logit chunks"]
    assert paths["steps"] == 2 * 2 * 2 and len(paths["profile"]) == 10
    assert "| update path length + logit chunks (8 steps): TFLOP/s" in run.stdout
    assert "| engine static bf16 (32 x 16): tokens/s, x loop, first call s" in run.stdout
    it = report["iteration"]
    # fixed-length answers: each of the 2 x 2 envs answered 16 tokens at each of its 2 steps (no
    # ALFWorld task is solvable in 2 steps, so no episode ends early)
    assert it["response_tokens"] == 2 * 2 * it["steps_per_episode"] * 16
    assert it["generation_tokens_per_s"] > 0 and it["update_tokens_per_s"] > 0
    # the update's rate counts every position it computes: prompts as well as the answers' 16 tokens
    assert it["update_tokens"] > it["update_loss_tokens"] == it["response_tokens"]
    assert it["decode"] == "static" and it["params"] == 1049984  # tiny-128x2
    # every second in a named phase; the estimate: one-time + per-iteration + 50 x per-step
    assert abs(it["unattributed_s"]) <= 0.05 * it["iteration_s"]
    assert it["paper_iteration_s_estimate"] == pytest.approx(
        it["compile_s"] + it["per_iteration_s"] + 50 * it["per_step_s"]
    )
    assert report["fsdp"]["same_batch"] and report["fsdp"]["ok"]
    assert report["short"]["report_says_where_progpo_acted"]
    assert "| 50-step iteration, estimated (s; target 400)" in run.stdout


def test_the_fsdp_comparison_fails_on_different_updates_and_never_reports_a_cosine_above_one():
    """float64, tensor by tensor: equal updates agree; a flipped, a scaled-down or a zero update
    does not; updates of 1e-5 over many weights give a cosine within [-1, 1] (float32 with a
    clamped denominator gave 3.8)."""
    import importlib.util

    import torch

    spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "benchmarks" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    gen = torch.Generator().manual_seed(0)
    w0 = {f"layer{i}": torch.randn(4096, generator=gen) for i in range(8)}
    step = {k: 1e-5 * torch.randn(4096, generator=gen) for k in w0}
    plain = {k: w0[k] + step[k] for k in w0}
    same = gpu_check.update_agreement(w0, plain, {k: v.clone() for k, v in plain.items()})
    assert same["updates_agree"] and abs(same["weight_update_cosine"] - 1.0) < 1e-12
    assert same["weight_update_max_abs_diff"] == 0.0 and same["params_compared"] == 8
    flipped = gpu_check.update_agreement(w0, plain, {k: w0[k] - step[k] for k in w0})
    assert not flipped["updates_agree"] and flipped["weight_update_cosine"] == pytest.approx(-1.0)
    other = {k: w0[k] + 1e-5 * torch.randn(4096, generator=gen) for k in w0}
    different = gpu_check.update_agreement(w0, plain, other)
    assert not different["updates_agree"] and -1.0 <= different["weight_update_cosine"] <= 1.0
    one_tensor = dict(plain, layer3=w0["layer3"] - step["layer3"])
    res = gpu_check.update_agreement(w0, plain, one_tensor)
    assert res["worst_tensor"] == "layer3" and not res["updates_agree"]
    assert not gpu_check.update_agreement(w0, plain, dict(w0))["updates_agree"]  # no update at all: no cosine
