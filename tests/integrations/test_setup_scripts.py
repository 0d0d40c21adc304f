"""The side-venv setup scripts work when called from a user's venv, not only from the system
interpreter: the venv they build sees the calling venv's packages."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow


def test_setup_verl_agent_from_a_venv_sees_that_venvs_packages(tmp_path):
    user = tmp_path / "user-venv"  # a user's venv over this interpreter's install
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(user)], check=True)
    user_site = Path(
        subprocess.check_output(
            [str(user / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (user_site / "progpo_only_in_the_user_venv.py").write_text("WHERE = 'user venv'\n")  # not in the base install
    assert Path(sysconfig.get_path("purelib")) != user_site
    side = Path(
        os.environ.get("PROGPO_TEST_VERL_AGENT_VENV", Path.home() / ".cache" / "progpo" / "venv-verl-agent-test")
    )
    out = subprocess.run(
        ["bash", "scripts/setup_verl_agent.sh"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, "PYTHON": str(user / "bin" / "python"), "VERL_AGENT_VENV": str(side)},
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    probe = (
        "import progpo_only_in_the_user_venv as m, transformers, ray, trainers.integrations.verl_agent; "
        "print(m.WHERE, transformers.__version__)"
    )
    got = subprocess.run(
        [str(side / "bin" / "python"), "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert got.returncode == 0, got.stderr[-2000:]
    assert got.stdout.strip().splitlines()[-1] == "user venv 4.51.1"  # its own transformers first, then the user's
