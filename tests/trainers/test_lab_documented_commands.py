"""The lab's documented commands, run as a user runs them (shortened by ``--seeds`` and
``--iterations``), and a SIGTERM to the lab, which must leave no trainer behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def _lab(tmp_path: Path, *flags: str) -> list[str]:
    return [
        sys.executable, "-m", "trainers.lab", *flags,
        "--seeds", "0", "--iterations", "1", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
    ]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(
    "flags, methods",
    [
        # the README's command on its default config (which names the estimator it trains with)
        (["--methods", "gigpo"], ["gigpo"]),
        # docs/plugins.md's and the examples' lines: a plug-in estimator and a plug-in teacher
        (
            "--plugin examples/custom_estimator.py --plugin examples/custom_teacher.py "
            "--methods novelty gigpo+self-imitation".split(),
            ["novelty", "gigpo+self-imitation"],
        ),
    ],
    ids=["readme", "plugins"],
)
def test_the_documented_lab_commands_run_on_the_default_config(tmp_path, flags, methods):
    proc = subprocess.run(_lab(tmp_path, *flags), capture_output=True, text=True, cwd=ROOT, env=ENV, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "alfworld_trap.yaml sets estimator: progpo-gigpo" in proc.stderr  # said, not refused
    table = (tmp_path / "out" / "table.md").read_text()
    for method in methods:  # a teacher's arm carries its label
        assert re.search(rf"^\| {re.escape(method)}( \[[^]]+\])? \| 1 \|", table, re.M), method


def _trainers_of(work: Path) -> list[int]:
    """The live ``trainers.progpo`` processes writing under ``work``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"trainers.progpo" in cmd and any(str(work).encode() in part for part in cmd):
            pids.append(int(entry.name))
    return pids


@pytest.mark.slow
def test_sigterm_to_the_lab_stops_its_trainers_and_starts_no_other(tmp_path):
    cmd = _lab(tmp_path, "--methods", "gigpo", "grpo", "progpo-gigpo", "--workers", "1")
    cmd[cmd.index("--iterations") + 1] = "40"
    lab = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=ENV)
    work = tmp_path / "work"
    deadline = time.monotonic() + 300
    while not _trainers_of(work) and time.monotonic() < deadline:
        time.sleep(0.5)
    started = _trainers_of(work)
    assert started, "the lab started no trainer"
    lab.send_signal(signal.SIGTERM)
    _, err = lab.communicate(timeout=180)
    assert lab.returncode == 143, err[-3000:]
    time.sleep(1)
    assert _trainers_of(work) == []  # the running trainer stopped, and no queued run started
    assert len([p for p in work.rglob("*.log")]) == 1
