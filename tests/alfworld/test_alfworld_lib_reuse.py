"""Regression: creating, closing and re-creating several fast-path envs in one process.

fast-downward's plugin registry is a GNU-unique static shared by every copy of libdownward.so in
a process; dlclose + dlopen of copies used to segfault on the 2nd-3rd round (as in a trainer that
rebuilds its vector env, or a test session). Run in a subprocess so a crash fails the test
instead of killing pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent(
    """
    import gymnasium as gym
    import progpo_envs  # noqa: F401  (registers the ids)
    for round_ in range(3):
        envs = [gym.make("ProGPO-ALFWorld-v0") for _ in range(3)]
        firsts = []
        for e in envs:
            obs, info = e.reset(seed=round_)
            firsts.append(obs)
            obs, r, term, trunc, info = e.step(info["admissible_commands"][0])
            assert info["valid_action"], info
        assert len(set(firsts)) == 1, "same seed must give the same first observation"
        for e in envs:
            e.close()
        print("round", round_, "ok", flush=True)
    """
)


@pytest.mark.slow
def test_envs_can_be_closed_and_recreated_in_one_process(alfworld_engine) -> None:
    proc = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-c", SCRIPT],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, f"rc={proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    assert proc.stdout.count(" ok") == 3
