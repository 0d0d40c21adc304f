"""Overhead of the ProGPO wrappers and throughput of GroupVectorEnv's backends.

Part 1: per-step cost of CanonicalizeObservation + FirstVisitCoverage + GroupVectorEnv(sync) on
FrozenLake (a ~10 us env step), against the raw env and gymnasium's SyncVectorEnv measured in
the same run; the overhead is also shown as a share of a 20 ms env step (a fast text engine).

Part 2: env steps per second with 2 members on a 20 ms sleep-bound env: GroupVectorEnv sync vs
async (goal: async >= 1.8x sync), with gymnasium's AsyncVectorEnv as a reference.

Every figure is the median of ``--repeats`` runs. Usage::

    python benchmarks/wrappers_overhead.py            # ~1 min
    python benchmarks/wrappers_overhead.py --quick    # a few seconds (smoke run)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import gymnasium as gym
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as a script from a checkout that is not installed
    sys.path.insert(0, str(ROOT))

from progpo_envs.rooms import SleepEnv
from wrappers import CanonicalizeObservation, FirstVisitCoverage, GroupVectorEnv

STEP_20MS_US = 20_000.0


def frozenlake() -> gym.Env:
    return gym.make("FrozenLake-v1", is_slippery=True)


def wrapped_frozenlake() -> gym.Env:
    return FirstVisitCoverage(CanonicalizeObservation(frozenlake()))


def time_single(make: Callable[[], gym.Env], steps: int) -> float:
    """Microseconds per step (resets included) of one env under random actions."""
    env = make()
    actions = np.random.default_rng(0).integers(0, 4, size=steps)
    env.reset(seed=0)
    start = time.perf_counter()
    for a in actions:
        _, _, terminated, truncated, _ = env.step(int(a))
        if terminated or truncated:
            env.reset()
    elapsed = time.perf_counter() - start
    env.close()
    return elapsed / steps * 1e6


def time_vector(envs: gym.vector.VectorEnv, steps: int) -> float:
    """Microseconds per member step of a vector env (autoreset inside) under random actions."""
    rng = np.random.default_rng(0)
    envs.reset(seed=0)
    n = envs.num_envs
    batches = [rng.integers(0, envs.single_action_space.n, size=n) for _ in range(steps)]
    start = time.perf_counter()
    for actions in batches:
        envs.step(actions)
    elapsed = time.perf_counter() - start
    envs.close()
    return elapsed / (steps * n) * 1e6


def median(fn: Callable[[], float], repeats: int) -> float:
    return statistics.median(fn() for _ in range(repeats))


def part_overhead(steps: int, repeats: int) -> None:
    groups, size = 4, 4
    rows = [
        ("FrozenLake raw (baseline)", lambda: time_single(frozenlake, steps)),
        ("+ Canonicalize", lambda: time_single(lambda: CanonicalizeObservation(frozenlake()), steps)),
        ("+ Canonicalize + Coverage", lambda: time_single(wrapped_frozenlake, steps)),
        (
            f"gym SyncVectorEnv raw, {groups * size} envs",
            lambda: time_vector(gym.vector.SyncVectorEnv([frozenlake] * (groups * size)), steps // (groups * size)),
        ),
        (
            f"GroupVectorEnv sync {groups}x{size} + Canon + Cov",
            lambda: time_vector(GroupVectorEnv(wrapped_frozenlake, groups, size, seed=0), steps // (groups * size)),
        ),
    ]
    results = [(name, median(fn, repeats)) for name, fn in rows]
    base = results[0][1]
    print(f"\nPer-step cost on FrozenLake ({steps} steps, median of {repeats})")
    print(f"{'configuration':<44} {'us/step':>9} {'overhead us':>12} {'% of 20 ms step':>16}")
    for name, us in results:
        over = us - base
        print(f"{name:<44} {us:>9.1f} {over:>12.1f} {over / STEP_20MS_US * 100:>15.3f}%")


def steps_per_second(make_envs: Callable[[], gym.vector.VectorEnv], steps: int) -> float:
    envs = make_envs()
    envs.reset(seed=0)
    actions = np.ones(envs.num_envs, dtype=np.int64)
    envs.step(actions)  # warm-up
    start = time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    elapsed = time.perf_counter() - start
    envs.close()
    return steps * envs.num_envs / elapsed


def part_throughput(steps: int, repeats: int, step_time: float) -> None:
    kw = {"step_time": step_time, "episode_length": 10}
    sleep_env = lambda: SleepEnv(**kw)  # noqa: E731 - a one-line callable, read where it is passed
    rows = [
        ("GroupVectorEnv sync, 1x2 (baseline)", lambda: GroupVectorEnv(SleepEnv, 1, 2, env_kwargs=kw)),
        ("GroupVectorEnv async, 1x2", lambda: GroupVectorEnv(SleepEnv, 1, 2, backend="async", env_kwargs=kw)),
        # SAME_STEP like GroupVectorEnv: with NEXT_STEP every 10th step would be a sleep-free reset
        (
            "gym AsyncVectorEnv SAME_STEP, 2 envs (ref.)",
            lambda: gym.vector.AsyncVectorEnv([sleep_env] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP),
        ),
    ]
    results = [(name, median(lambda: steps_per_second(make, steps), repeats)) for name, make in rows]
    base = results[0][1]
    print(
        f"\nThroughput, 2 members, {step_time * 1000:.0f} ms sleep-bound step ({steps} vector steps, median of {repeats})"
    )
    print(f"{'configuration':<44} {'env steps/s':>12} {'x sync':>8}")
    for name, sps in results:
        print(f"{name:<44} {sps:>12.1f} {sps / base:>8.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny run to check that the script works")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    steps, tsteps, repeats = (800, 10, 2) if args.quick else (20_000, 100, args.repeats)
    part_overhead(steps, repeats)
    part_throughput(tsteps, repeats, step_time=0.02)


if __name__ == "__main__":
    main()
