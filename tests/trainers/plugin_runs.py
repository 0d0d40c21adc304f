"""What the plug-in tests share: a short trainer run in a subprocess, and forgetting a plug-in's
module so that the next test loads it afresh."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: a quiet run of the tiny model on the rooms env, no warm start, no held-out evaluation
TINY_RUN = (
    "--model tiny --env rooms --warm-start none --eval-episodes 0 --no-progress-bars --no-tensorboard "
    "--torch-threads 1 --eval-extra-split none"
)


def train(tmp_path: Path, base: list[str], *flags: str) -> subprocess.CompletedProcess:
    """``python -m trainers.progpo BASE FLAGS`` into ``tmp_path/run``, from a clean process."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "trainers.progpo", *base, "--output-dir", str(tmp_path / "run"), *flags],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )


def forget_plugin_files() -> None:
    """Drop the modules :func:`trainers.plugins.load_plugin` made of ``.py`` files."""
    for name in [m for m in sys.modules if m.startswith("progpo_plugin_")]:
        del sys.modules[name]
