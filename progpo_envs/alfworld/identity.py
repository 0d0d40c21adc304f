"""Check that the fast path and the stock engine give identical transcripts.

For each game: the same seeded random policy over admissible commands (with a few unknown
commands mixed in) is played for ``steps`` steps on both engines; observations, admissible
command lists (same order), won flags and command validity must be equal at every step.

Usage::

    python -m progpo_envs.alfworld.identity                      # embedded games, all splits
    python -m progpo_envs.alfworld.identity --data-dir ../shared/data/alfworld-real --split valid_unseen
"""

from __future__ import annotations

import argparse
import random
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from progpo_envs.alfworld.embedded import embedded_root
from progpo_envs.alfworld.engine import StockEngine
from progpo_envs.alfworld.games import discover_games, resolve_data_dir


@dataclass
class Mismatch:
    game: str
    step: int
    what: str
    stock: Any
    fast: Any


def compare_game(stock: Any, fast: Any, game_file: str, steps: int = 50, seed: int = 0) -> Mismatch | None:
    """Play ``game_file`` on both engines under one seeded random policy; first difference or None."""
    stock.load(game_file)
    fast.load(game_file)
    a, b = stock.reset(), fast.reset()
    if a != b:
        return Mismatch(game_file, 0, "reset observation", a, b)
    rng = random.Random(seed)
    for t in range(1, steps + 1):
        for what, x, y in (
            ("admissible_commands", stock.admissible_commands, fast.admissible_commands),
            ("won", stock.won, fast.won),
        ):
            if x != y:
                return Mismatch(game_file, t - 1, what, x, y)
        cmds = stock.admissible_commands
        cmd = rng.choice(cmds) if (cmds and rng.random() > 0.1) else rng.choice(["jump", "", "take the moon"])
        x, y = stock.step(cmd), fast.step(cmd)
        if x != y:
            return Mismatch(game_file, t, f"step({cmd!r})", x, y)
    if stock.won != fast.won or stock.admissible_commands != fast.admissible_commands:
        return Mismatch(game_file, steps, "final state", stock.won, fast.won)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    from progpo_envs.alfworld.fast import FastEngine  # the [alfworld] extra's engine: one clear error without it

    p = argparse.ArgumentParser(prog="python -m progpo_envs.alfworld.identity", description=__doc__.split("\n\n")[0])
    p.add_argument("--data-dir", default=None, help="folder with json_2.1.1 (default: embedded games)")
    p.add_argument("--split", nargs="*", default=None, help="splits (default: every split found)")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--offset", type=int, default=0, help="skip this many games of each split (to shard the check)")
    p.add_argument("--limit", type=int, default=0, help="check at most this many games per split")
    args = p.parse_args(argv)
    json_dir = resolve_data_dir(args.data_dir)
    if json_dir is None:
        json_dir = embedded_root() / "json_2.1.1"
    splits = args.split or sorted(d.name for d in Path(json_dir).iterdir() if d.is_dir())
    stock, fast = StockEngine(), FastEngine()
    checked, bad = 0, 0
    for split in splits:
        games = discover_games(json_dir, split)[args.offset :]
        if args.limit:
            games = games[: args.limit]
        for i, g in enumerate(games):
            m = compare_game(stock, fast, str(g.path), args.steps, args.seed + i)
            checked += 1
            if m is not None:
                bad += 1
                print(
                    f"MISMATCH {split}/{g.task_id} at step {m.step} ({m.what}):\n  stock={m.stock!r}\n  fast ={m.fast!r}"
                )
            else:
                print(f"ok {split}/{g.task_id}", flush=True)
    print(f"{checked - bad} identical, {bad} different (of {checked} games, {args.steps} steps each)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
