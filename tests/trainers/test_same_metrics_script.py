"""scripts/same_metrics.py: the check that a restructuring kept the training bit for bit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_head_against_the_working_tree_is_same_bit_for_bit():
    """Two runs of one code give the same records: what the script's verdict rests on (a run that
    is not deterministic would read DIFFERENT here)."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    if (
        subprocess.run(
            ["git", "diff", "--quiet", "HEAD", "--", "trainers", "agents", "wrappers", "progpo_envs"], cwd=ROOT
        ).returncode
        != 0
    ):
        pytest.skip("the package has uncommitted changes: HEAD is not the working tree")
    out = subprocess.run(
        [sys.executable, "scripts/same_metrics.py", head.stdout.strip(), "--only", "rooms"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, out.stderr
    assert "| rooms | " in out.stdout and "same" in out.stdout
