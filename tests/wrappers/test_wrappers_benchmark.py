"""The wrappers benchmark script runs and prints both of its tables."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_wrappers_overhead_benchmark_quick_run():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "wrappers_overhead.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    assert "FrozenLake raw (baseline)" in text and "GroupVectorEnv sync 4x4 + Canon + Cov" in text
    rows = [line for line in text.splitlines() if line.startswith("GroupVectorEnv async, 1x2")]
    assert len(rows) == 1 and float(rows[0].split()[-1]) > 1.0  # async beats sync on a sleep-bound env
