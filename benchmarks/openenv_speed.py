"""Steps/s of ProGPO envs over OpenEnv (loopback /ws session) vs in-process.

Usage: ``python benchmarks/openenv_speed.py [--env webshop|alfworld] [--steps 200] [--runs 5]``.
Both sides play the same command cycle on the same task (one session, sequential steps); the table
gives the median over ``--runs`` runs and the loopback / in-process ratio. The server is started
with ``python -m progpo_envs.serve`` on a free 127.0.0.1 port and stopped at the end.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "integrations"))

CYCLES = {
    "webshop": ["search[men boots]", "click[next >]", "click[< prev]", "search[gift set for women]"],
    "alfworld": ["look", "inventory", "go to countertop 1", "look"],
}


def in_process(env_name: str, steps: int, seed: int) -> float:
    from progpo_envs.serve import CommandAction, _ENV_CLASSES

    env = _ENV_CLASSES[env_name](max_episode_steps=10**6)
    env.reset(seed=seed)
    cycle = CYCLES[env_name]
    t = time.perf_counter()
    for k in range(steps):
        env.step(CommandAction(command=cycle[k % len(cycle)]))
    dt = time.perf_counter() - t
    env.close()
    return steps / dt


def loopback(url: str, env_name: str, steps: int, seed: int) -> float:
    from progpo_envs.serve import CommandAction, ProGPOEnvClient

    cycle = CYCLES[env_name]
    with ProGPOEnvClient(base_url=url).sync() as env:
        env.reset(seed=seed)
        t = time.perf_counter()
        for k in range(steps):
            env.step(CommandAction(command=cycle[k % len(cycle)]))
        return steps / (time.perf_counter() - t)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", choices=sorted(CYCLES), default="webshop")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=3)
    args = p.parse_args()
    from openenv_server import running_server

    local = [in_process(args.env, args.steps, args.seed) for _ in range(args.runs)]
    with running_server(args.env, "--env-kwarg", "max_episode_steps=1000000") as url:
        loopback(url, args.env, 10, args.seed)  # warm-up (session + env creation)
        remote = [loopback(url, args.env, args.steps, args.seed) for _ in range(args.runs)]
    m_local, m_remote = statistics.median(local), statistics.median(remote)
    print(f"{args.env}: {args.steps} steps x {args.runs} runs (median)")
    print(f"{'path':<22}{'steps/s':>10}")
    print(f"{'in-process':<22}{m_local:>10.1f}")
    print(f"{'OpenEnv /ws loopback':<22}{m_remote:>10.1f}")
    print(f"ratio loopback / in-process: {m_remote / m_local:.2f}")


if __name__ == "__main__":
    main()
