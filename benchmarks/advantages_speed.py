"""Throughput of the batched advantage estimators (steps per second), vs a per-group loop.

    python benchmarks/advantages_speed.py [--groups 4096 --group-size 8 --steps 32 --repeats 5]

Synthetic batch: B groups x G trajectories x T steps, ~half the groups all-failed, canonical
states drawn from a small per-group pool (so anchor groups are non-trivial). Prints the median
of ``--repeats`` runs. Baseline: the same ProGPO-GiGPO computed group by group with the
single-group function and Python dicts for the anchor groups (measured on a subset of groups
and scaled), i.e. what a straightforward implementation does.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

from bench_timing import median_time

from trainers.advantages import (
    AdvantageConfig,
    progpo_episode_advantages,
    progpo_episode_advantages_batched,
    step_advantages,
)


def make_batch(b: int, g: int, t: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = b * g
    outcomes = (rng.random(n) < 0.1).astype(np.float64) * (rng.random(b).repeat(g) < 0.5)
    traj_group = np.arange(b).repeat(g)
    step_traj = np.arange(n).repeat(t)
    step_index = np.tile(np.arange(t), n)
    pool = 20  # states per task
    state_ids = traj_group[step_traj] * pool + rng.integers(0, pool, n * t)
    next_ids = np.roll(state_ids, -1)
    first_visit = rng.random(n * t) < 0.4
    return dict(
        outcomes=outcomes,
        traj_group=traj_group,
        step_traj=step_traj,
        step_index=step_index,
        state_ids=state_ids,
        next_ids=next_ids,
        first_visit=first_visit,
    )


def loop_baseline(batch: dict[str, np.ndarray], n_groups: int, g: int, t: int, gamma: float = 0.95) -> None:
    """ProGPO-GiGPO group by group, Python dict anchor groups (the reference a user would write)."""
    for grp in range(n_groups):
        sl = slice(grp * g * t, (grp + 1) * g * t)
        r = batch["outcomes"][grp * g : (grp + 1) * g]
        fv = batch["first_visit"][sl].reshape(g, t)
        ep = progpo_episode_advantages(r, fv.mean(axis=1), base="gigpo")
        failed = r.max() < 1e-3
        states = batch["state_ids"][sl].reshape(g, t)
        anchors: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
        for i in range(g):
            ret = 0.0
            for k in range(t - 1, -1, -1):
                rew = float(fv[i, k]) if failed else (r[i] if k == t - 1 else 0.0)
                ret = rew + gamma * ret
                anchors[int(states[i, k])].append((i, k, ret))
        adv = np.repeat(ep[:, None], t, axis=1)
        for members in anchors.values():
            if len(members) > 1:
                rets = np.array([m[2] for m in members])
                norm = (rets - rets.mean()) / (rets.std() + 1e-6)
                for (i, k, _), a in zip(members, norm):
                    adv[i, k] += a


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=4096)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--baseline-groups", type=int, default=256)
    args = ap.parse_args()
    b, g, t = args.groups, args.group_size, args.steps
    batch = make_batch(b, g, t)
    n_steps = b * g * t
    fv_rate = batch["first_visit"].reshape(b, g, t).mean(axis=2)
    rows: list[tuple[str, float]] = []
    sub = min(args.baseline_groups, b)
    base_s = median_time(lambda: loop_baseline(batch, sub, g, t), max(1, args.repeats // 2)) * b / sub
    rows.append(("per-group loop, progpo-gigpo (baseline)", base_s))
    rows.append(
        (
            "progpo_episode_advantages_batched (B,G)",
            median_time(
                lambda: progpo_episode_advantages_batched(batch["outcomes"].reshape(b, g), fv_rate), args.repeats
            ),
        )
    )
    for est in ("grpo", "rloo", "progpo-grpo", "gigpo", "progpo-gigpo"):
        cfg = AdvantageConfig(estimator=est)
        rows.append((f"step_advantages {est}", median_time(lambda: step_advantages(**batch, config=cfg), args.repeats)))
    cfg = AdvantageConfig(estimator="progpo-gigpo", scope="group")
    rows.append(
        (
            "step_advantages progpo-gigpo scope=group",
            median_time(lambda: step_advantages(**batch, config=cfg), args.repeats),
        )
    )
    print(f"batch: {b} groups x {g} trajectories x {t} steps = {n_steps:,} steps; median of {args.repeats} runs")
    print(f"{'estimator':44s} {'time (s)':>10s} {'steps/s':>14s} {'vs baseline':>12s}")
    for name, sec in rows:
        print(f"{name:44s} {sec:10.4f} {n_steps / sec:14,.0f} {base_s / sec:11.1f}x")


if __name__ == "__main__":
    main()
