"""WebShop data layer speed: catalog generation, loading, goals, reward.

Run::

    python benchmarks/webshop_data_speed.py            # ~1-2 min on 2 cores
    python benchmarks/webshop_data_speed.py --big 100000   # + load of 100k products (child process, peak RSS)

Rows (median of ``--repeats`` runs):

* generation, products/s, serial and ``workers=2``; baseline: reading the same catalog back
  from the original-format JSON files (``json.load`` of ``items_shuffle`` + ``items_ins_v2``);
* ``load_catalog`` of N products: embedded (generate + convert + prices + goals) vs the same
  catalog from files (the original's path);
* ``get_reward`` per purchase on the 1k catalog's goals, cached title nouns vs uncached
  (baseline: what the original pays, one noun parse per title per purchase).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_timing import median_time

from progpo_envs.webshop.catalog_gen import iter_catalog, write_catalog
from progpo_envs.webshop.data import load_catalog
from progpo_envs.webshop.reward import get_reward
from progpo_envs.webshop.title_nouns import TitleNouns


def bench_generation(n: int, repeats: int) -> list[tuple[str, float, float]]:
    serial = median_time(lambda: sum(1 for _ in iter_catalog(n, 0)), repeats)
    parallel = median_time(lambda: sum(1 for _ in iter_catalog(n, 0, workers=2)), repeats)
    with tempfile.TemporaryDirectory() as tmp:
        items_path, ins_path = write_catalog(tmp, n, 0)

        def read_back() -> None:
            with open(items_path, encoding="utf-8") as f:
                json.load(f)
            with open(ins_path, encoding="utf-8") as f:
                json.load(f)

        baseline = median_time(read_back, repeats)
    return [
        (f"json.load of {n:,} products from files (baseline)", n / baseline, 1.0),
        (f"iter_catalog({n:,}) serial", n / serial, baseline / serial),
        (f"iter_catalog({n:,}, workers=2)", n / parallel, baseline / parallel),
    ]


def bench_load(n: int, repeats: int) -> list[tuple[str, float, float]]:
    with tempfile.TemporaryDirectory() as tmp:
        write_catalog(tmp, n, 0)
        files = median_time(lambda: load_catalog(tmp, num_products=n), repeats)
    embedded = median_time(lambda: load_catalog(num_products=n), repeats)
    return [
        (f"load_catalog({n:,}) from original-format files (baseline)", files, 1.0),
        (f"load_catalog({n:,}) embedded (generated in memory)", embedded, files / embedded),
    ]


def bench_reward(repeats: int) -> list[tuple[str, float, float]]:
    cat = load_catalog(num_products=1000)
    goals = cat.goals[:1000]
    products = [cat.products[(7 * i) % len(cat.products)] for i in range(len(goals))]

    def run(nouns) -> None:
        for goal, product in zip(goals, products):
            get_reward(product, goal, cat.prices[product["asin"]], {"size": "large"}, nouns=nouns)

    cached = TitleNouns(backend="rules")
    run(cached)  # warm the cache, as a long training run would be
    t_cached = median_time(lambda: run(cached), repeats) / len(goals)
    t_uncached = median_time(lambda: run(TitleNouns(backend="rules", cache_size=0)), repeats) / len(goals)
    return [
        ("get_reward, title nouns parsed every call (baseline)", t_uncached * 1e6, 1.0),
        ("get_reward, title nouns cached", t_cached * 1e6, t_uncached / t_cached),
    ]


def child_load(n: int) -> None:
    import resource

    t0 = time.perf_counter()
    cat = load_catalog(num_products=n)
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"n": n, "s": elapsed, "peak_rss_mb": rss, "goals": len(cat.goals)}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--gen-n", type=int, default=20000)
    parser.add_argument("--load-n", type=int, default=5000)
    parser.add_argument("--big", type=int, default=0, help="also load this many products in a child process")
    parser.add_argument("--child-load", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_load:
        child_load(args.child_load)
        return

    print("| generation | products/s | vs baseline |\n|---|---:|---:|")
    for name, rate, ratio in bench_generation(args.gen_n, args.repeats):
        print(f"| {name} | {rate:,.0f} | {ratio:.2f}x |")
    print("\n| load | seconds | vs baseline |\n|---|---:|---:|")
    for name, sec, ratio in bench_load(args.load_n, args.repeats):
        print(f"| {name} | {sec:.2f} | {ratio:.2f}x |")
    print("\n| reward (1,000 purchases on the 1k catalog) | us/purchase | vs baseline |\n|---|---:|---:|")
    for name, us, ratio in bench_reward(args.repeats):
        print(f"| {name} | {us:,.0f} | {ratio:.1f}x |")
    if args.big:
        out = subprocess.run(
            [sys.executable, __file__, "--child-load", str(args.big)], capture_output=True, text=True, check=True
        )
        r = json.loads(out.stdout.strip().splitlines()[-1])
        print(
            f"\nload_catalog({r['n']:,}) embedded: {r['s']:.1f} s, peak RSS {r['peak_rss_mb']:,.0f} MB, "
            f"{r['goals']:,} goals"
        )


if __name__ == "__main__":
    main()
