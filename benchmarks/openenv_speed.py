"""Steps/s of ProGPO envs over OpenEnv (loopback /ws session) vs in-process, and a load test.

Usage: ``python benchmarks/openenv_speed.py [--env webshop|alfworld] [--steps 200] [--runs 5]``.
Both sides play the same command cycle on the same task (one session, sequential steps); the table
gives the median over ``--runs`` runs and the loopback / in-process ratio. The server is started
with ``python -m progpo_envs.serve`` on a free 127.0.0.1 port and stopped at the end.

``--load`` (WebShop) runs the load test instead, on a server with ``--max-sessions`` slots and
``--idle-timeout`` seconds: it fills every slot with idle sessions (silent, pings answered) and
times how long a new client waits for a slot (idle sessions reaped: it must be within the
timeout plus one reaper pass), then plays ``--resets`` resets, each in a new /ws session, and
prints the server's RSS every quarter (it must stay bounded: sessions are closed, not kept).
Everything runs on loopback, under ``--deadline`` seconds.
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
    from progpo_envs.serve import ENVIRONMENT_CLASSES, CommandAction

    env = ENVIRONMENT_CLASSES[env_name](max_episode_steps=10**6)
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


def load_test(args: argparse.Namespace) -> None:
    import asyncio
    import json

    import psutil
    import websockets
    from openenv_server import idle_and_reconnect, running_server, server_pid

    t_start = time.monotonic()
    with running_server(
        "webshop", "--max-sessions", str(args.max_sessions), "--idle-timeout", str(args.idle_timeout)
    ) as url:
        proc = psutil.Process(server_pid(url))
        waited = idle_and_reconnect(url, sessions=args.max_sessions, deadline=args.deadline / 2)
        ws_url = url.replace("http://", "ws://") + "/ws"

        async def resets() -> list[tuple[int, float]]:
            marks = []
            for k in range(1, args.resets + 1):
                async with websockets.connect(ws_url) as ws:
                    await ws.send(json.dumps({"type": "reset", "data": {"seed": k}}))
                    assert json.loads(await ws.recv()).get("type") == "observation"
                if k % max(args.resets // 4, 1) == 0:
                    marks.append((k, proc.memory_info().rss / 2**20))
                if time.monotonic() - t_start > args.deadline:
                    raise TimeoutError(f"load test past its {args.deadline} s deadline after {k} resets")
            return marks

        rss0 = proc.memory_info().rss / 2**20
        marks = asyncio.run(resets())
    print(f"webshop server: {args.max_sessions} idle sessions, idle timeout {args.idle_timeout} s")
    print(
        f"new client got a slot after {waited:.1f} s (bound: timeout + one reaper pass = "
        f"{args.idle_timeout + max(args.idle_timeout / 4, 5.0):.1f} s)"
    )
    print(f"{'resets':>8}{'server RSS MiB':>16}")
    print(f"{0:>8}{rss0:>16.0f}")
    for k, rss in marks:
        print(f"{k:>8}{rss:>16.0f}")
    print(
        f"RSS growth over {args.resets} resets: {marks[-1][1] - rss0:+.0f} MiB; wall {time.monotonic() - t_start:.0f} s"
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", choices=sorted(CYCLES), default="webshop")
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--seed", type=int, default=3)
    p.add_argument("--load", action="store_true", help="run the load test (WebShop) instead of the speed table")
    p.add_argument("--max-sessions", type=int, default=64)
    p.add_argument("--idle-timeout", type=float, default=5.0)
    p.add_argument("--resets", type=int, default=2000)
    p.add_argument("--deadline", type=float, default=600.0, help="seconds the load test may take in all")
    args = p.parse_args()
    if args.load:
        load_test(args)
        return
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
