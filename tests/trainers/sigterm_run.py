"""Start ``python -m trainers.progpo`` in a subprocess and SIGTERM it once a file shows up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sigterm_when(args: list[str], ready: Path, poll: float) -> tuple[int, str]:
    """Run the trainer with ``args``, wait (120 s at most, the process alive) until ``ready``
    exists, send SIGTERM; returns the exit code and stderr."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainers.progpo", *args],
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(poll)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, err
