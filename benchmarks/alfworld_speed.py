"""ALFWorld engine speed: stock TextWorld PDDL engine vs the fast path, same run, same games.

For each (game source, engine) a fresh process plays each game: ``load`` (first time the game
is seen by the process: grammar parse + PDDL->SAS translation), ``reset`` (later resets of the
loaded game), ``step`` (a seeded random policy over admissible commands). Peak RSS is that
process's ``ru_maxrss`` (one env per process) minus the RSS after importing the engine.
Throughput: steps/s of ``GroupVectorEnv(..., backend="async")`` with 1 and 2 worker processes
(one env each, one group: both play the same task), on the generated games, fast path;
a member that finished waits for its group, and its no-op steps are not counted.

    python benchmarks/alfworld_speed.py                       # real games from ../shared/data
    python benchmarks/alfworld_speed.py --games 6 --steps 30 --repeats 3
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import random
import resource
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
REAL = ROOT.parent / "shared" / "data" / "alfworld-real"


def _pick_games(json_dir: Path, split: str, n: int) -> list[str]:
    from progpo_envs.alfworld.games import discover_games

    games = discover_games(json_dir, split)
    by_type: dict[str, list[str]] = {}
    for g in games:
        by_type.setdefault(g.task_type, []).append(str(g.path))
    out: list[str] = []
    while len(out) < min(n, len(games)):  # round-robin over task types
        for paths in by_type.values():
            if paths and len(out) < n:
                out.append(paths.pop(0))
    return out


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _lib_mapping() -> tuple[str, float]:
    """(where libdownward.so is mapped from, its resident MB) for this process (Linux)."""
    kinds, kb, current = set(), 0, False
    try:
        with open("/proc/self/smaps") as f:
            for line in f:
                head = line.split(" ", 1)[0]
                if "-" in head and ":" not in head:  # a mapping header: "start-end perms offset dev inode path"
                    current = "libdownward.so" in line
                    if current:
                        kinds.add("installed" if "site-packages" in line else "private copy")
                elif current and line.startswith("Rss:"):
                    kb += int(line.split()[1])
    except OSError:
        pass
    return " + ".join(sorted(kinds)) or "-", kb / 1024.0


def _play(args: tuple[bool, list[str], int, int, int, str]) -> dict[str, object]:
    fast, games, steps, repeats, seed, cache_dir = args
    import os

    os.environ["PROGPO_CACHE_DIR"] = cache_dir
    from progpo_envs.alfworld.env import make_engine, require_engine

    require_engine()
    base = _rss_mb()
    eng = make_engine(fast)
    rng = random.Random(seed)
    load, reset, step = [], [], []
    for g in games:
        t = time.perf_counter()
        eng.load(g)
        eng.reset()
        load.append(time.perf_counter() - t)
        for _ in range(repeats):
            t = time.perf_counter()
            eng.reset()
            reset.append(time.perf_counter() - t)
            for _ in range(steps):
                cmd = rng.choice(eng.admissible_commands)
                t = time.perf_counter()
                eng.step(cmd)
                step.append(time.perf_counter() - t)
    where, lib_mb = _lib_mapping()
    return {
        "load": load,
        "reset": reset,
        "step": step,
        "rss": _rss_mb() - base,
        "rss_total": _rss_mb(),
        "lib": f"{where} ({lib_mb:.0f} MB resident)",
    }


def _q(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def _throughput(workers: int, seconds: float) -> float:
    from wrappers.group import GroupVectorEnv

    envs = GroupVectorEnv(
        "ProGPO-ALFWorld-v0", num_groups=1, group_size=workers, backend="async", seed=0, env_kwargs={"split": "valid"}
    )
    rng = random.Random(0)
    _, infos = envs.reset()
    cmds = [list(c) for c in infos["admissible_commands"]]
    n, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        actions = [rng.choice(c) if len(c) else "look" for c in cmds]
        _, _, _, _, infos = envs.step(actions)
        cmds = [list(c) if c is not None and len(c) else ["look"] for c in infos["admissible_commands"]]
        n += int(sum(not w for w in infos["waiting"]))  # waiting members' no-op steps are not steps
    rate = n / (time.perf_counter() - t0)
    envs.close()
    return rate


def main() -> int:
    import progpo_envs  # noqa: F401  (registers the ids)
    from progpo_envs.alfworld.embedded import embedded_root
    from progpo_envs.alfworld.games import resolve_data_dir

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", type=int, default=6, help="games per source (round-robin over task types)")
    p.add_argument("--steps", type=int, default=25, help="steps per episode")
    p.add_argument("--repeats", type=int, default=2, help="episodes per game after the first load")
    p.add_argument("--seconds", type=float, default=20.0, help="duration of each throughput run")
    p.add_argument("--no-throughput", action="store_true")
    args = p.parse_args()

    sources = {"generated (valid)": _pick_games(embedded_root() / "json_2.1.1", "valid", args.games)}
    if REAL.is_dir():
        sources = {"real (valid_unseen)": _pick_games(resolve_data_dir(REAL), "valid_unseen", args.games), **sources}
    ctx = mp.get_context("spawn")
    import tempfile

    rows = []
    for name, games in sources.items():
        res = {}
        with tempfile.TemporaryDirectory() as cache:
            # stock, fast with an empty translation cache, fast again with the disk cache it left
            for key, fast in (("stock", False), ("fast (cold)", True), ("fast (disk cache)", True)):
                with ctx.Pool(1) as pool:  # a fresh process per run: cold in-memory caches, own RSS
                    res[key] = pool.apply(_play, ((fast, games, args.steps, args.repeats, 0, cache),))
        rows.append((name, len(games), res))

    print(
        f"\nALFWorld engine, {args.games} games/source, {args.steps} steps x {args.repeats} episodes per game "
        f"(+1 load), times in ms\n"
    )
    hdr = (
        "games",
        "engine",
        "load p50",
        "reset p50",
        "reset p90",
        "step p50",
        "step p90",
        "peak RSS MB",
        "libdownward.so",
    )
    print("| " + " | ".join(hdr) + " |\n|" + "---|" * len(hdr))
    med = statistics.median
    for name, n, res in rows:
        for key, r in res.items():
            print(
                f"| {name} | {key} | {1e3 * med(r['load']):.0f} | "
                f"{1e3 * med(r['reset']):.1f} | {1e3 * _q(r['reset'], 0.9):.1f} | "
                f"{1e3 * med(r['step']):.2f} | {1e3 * _q(r['step'], 0.9):.2f} | "
                f"{r['rss']:.0f} (+{r['rss_total'] - r['rss']:.0f} import) | {r['lib']} |"
            )
        s, c, w = res["stock"], res["fast (cold)"], res["fast (disk cache)"]
        print(
            f"| {name} | **speed-up** | {med(s['load']) / med(c['load']):.1f}x cold, "
            f"{med(s['load']) / med(w['load']):.0f}x disk | {med(s['reset']) / med(c['reset']):.0f}x | "
            f"{_q(s['reset'], 0.9) / _q(c['reset'], 0.9):.0f}x | {med(s['step']) / med(c['step']):.0f}x | "
            f"{_q(s['step'], 0.9) / _q(c['step'], 0.9):.0f}x | | |"
        )
    if not args.no_throughput:
        from progpo_envs.alfworld.fast import warm_translation_cache
        from progpo_envs.alfworld.games import discover_games

        warm_translation_cache([str(g.path) for g in discover_games(embedded_root() / "json_2.1.1", "valid")])
        print(
            "\nGroupVectorEnv(async), fast path, generated games (valid split, a new task every episode, "
            "translation disk cache warm), random policy over admissible commands:\n"
        )
        print("| workers | steps/s |\n|---|---:|")
        for w in (1, 2):
            print(f"| {w} | {_throughput(w, args.seconds):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
