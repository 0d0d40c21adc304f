"""A lab run's JSON entry reduced to what the analysis reads, for the lab's tests."""
from __future__ import annotations


def run_with_evals(method: str, seed: int, evals: list[tuple[int, float]], all_failed_it1: float = 0.9) -> dict:
    """A run of ``method`` at ``seed`` with held-out success ``y`` at each ``(iteration, y)`` and
    the all-failed share ``all_failed_it1`` at iteration 1."""
    return {"method": method, "seed": seed, "train": [{"iteration": 1, "all_failed_fraction": all_failed_it1}],
            "eval": [{"iteration": i, "eval/success": y} for i, y in evals]}
