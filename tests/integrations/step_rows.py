"""Random step rows in verl-agent's layout (one row per step) that the verl tests share."""

from __future__ import annotations

import numpy as np


def step_rows(
    rng: np.random.Generator, n_states: int = 4, n_traj: int = 8
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(lengths, step_traj, step_t, anchors, first_visit)`` of ``n_traj`` trajectories of 2-5
    steps over ``n_states`` anchor states, first visits drawn at random."""
    lengths = rng.integers(2, 6, n_traj)
    step_traj = np.repeat(np.arange(n_traj), lengths)
    step_t = np.concatenate([np.arange(k) for k in lengths])
    anchors = np.array([f"room {v}" for v in rng.integers(0, n_states, step_traj.size)], dtype=object)
    first = rng.uniform(size=step_traj.size) < 0.5
    return lengths, step_traj, step_t, anchors, first
