"""ALFWorld memory over many distinct games: RSS of one process that plays each embedded game once.

Each embedded split in turn (train, valid, hard, easy-train, easy-valid: 396 games), one reset
and one step per game, RSS every 50 games. Two modes, each in a fresh process: ``bounded`` (the
default: textworld's global memo cache emptied between games past
``progpo_envs.alfworld.fast.memo.MEMENTO_LIMIT`` entries) and ``unbounded`` (the limit lifted,
as textworld alone behaves). The per-game LRUs (64 translations, 64 grammars) fill in both.

    python benchmarks/alfworld_memory.py
    python benchmarks/alfworld_memory.py --games 200
"""

from __future__ import annotations

import argparse
import gc
import multiprocessing as mp
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SPLITS = ("train", "valid", "hard", "easy-train", "easy-valid")


def _play(mode: str, games: int, every: int, out: "mp.Queue") -> None:
    import gymnasium as gym
    import psutil

    import progpo_envs  # noqa: F401  (registers the ids)
    from progpo_envs.alfworld.fast import memo

    if mode == "unbounded":
        memo.MEMENTO_LIMIT = 10**12
    proc = psutil.Process()
    rows, n = [(0, proc.memory_info().rss / 2**20)], 0
    for split in SPLITS:
        env = gym.make("ProGPO-ALFWorld-v0", split=split)
        for tid in env.unwrapped.task_ids:
            if n == games:
                break
            _, info = env.reset(options={"task_id": tid})
            env.step(info["admissible_commands"][0])
            n += 1
            if n % every == 0:
                gc.collect()
                rows.append((n, proc.memory_info().rss / 2**20))
        env.close()
    out.put(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--games", type=int, default=396, help="distinct games to play (default: all 396 embedded)")
    ap.add_argument("--every", type=int, default=50, help="games between RSS readings")
    args = ap.parse_args(argv)
    ctx = mp.get_context("spawn")
    table = {}
    for mode in ("unbounded", "bounded"):
        q = ctx.Queue()
        p = ctx.Process(target=_play, args=(mode, args.games, args.every, q))
        p.start()
        table[mode] = dict(q.get())
        p.join()
    print("| games played | RSS unbounded (MiB) | RSS bounded (MiB) | bounded / unbounded |")
    print("|---:|---:|---:|---:|")
    for n in sorted(table["bounded"]):
        a, b = table["unbounded"].get(n), table["bounded"][n]
        print(f"| {n} | {a:.0f} | {b:.0f} | {b / a:.2f} |" if a else f"| {n} | - | {b:.0f} | - |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
