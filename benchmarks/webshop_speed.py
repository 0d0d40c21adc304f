"""WebShop shop speed: text-mode step, search, index build (time + peak RSS), browser step.

Usage::

    python benchmarks/webshop_speed.py            # 1k step, 100k search + build, browser step
    python benchmarks/webshop_speed.py --full     # also the 1M-product index build (~3 min)
    python benchmarks/webshop_speed.py --no-browser --repeats 5

Goals: text step p50 <= 1 ms on 1k products, search p50 <= 5 ms on 100k, index
build for 1M products <= 60 s and <= 4 GB.

Baselines measured in the same run:

* step: the original text env's way of producing an observation -- render the page's HTML
  and parse it back to visible text every step (the package's templates + stdlib ``html.parser``;
  the original used Jinja + BeautifulSoup, which is slower still);
* search: ``bm25s.BM25.retrieve`` (its own numpy scorer + top-k) on the same index;
* index build: ``bm25s.BM25.index`` on the same analyzed tokens (Python loop per document).

Build figures run in a fresh subprocess each so peak RSS (``ru_maxrss``) is the build's own:
``docs RSS`` is the process after the documents are in memory, ``peak RSS`` after the build.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

QUERIES = [
    "red running shoes for women",
    "herbal tea honey roasted",
    "noise cancelling headphones",
    "wrap dress floral xx-small",
    "refillable containers rose gold",
    "long lasting lipstick",
    "usb microphone",
    "men's slim fit button down shirt white",
    "gluten free snack bars",
    "6.7 fl oz bottle",
    "organic shampoo sulfate free",
    "queen size bed frame",
]


def _pcts(samples: list[float]) -> tuple[float, float]:
    s = sorted(samples)
    return s[len(s) // 2], s[min(len(s) - 1, int(len(s) * 0.9))]


def _episode_actions(env, info) -> list[str]:
    """A typical episode: search, page, open items, pick options, sub-pages, back, buy."""
    goal = info["goal"]
    acts = [f"search[{goal['instruction_text']}]", "click[next >]", "click[< prev]"]
    obs, _, _, _, inf = env.step(acts[0])
    env.step(acts[1])
    _, _, _, _, inf = env.step(acts[2])
    asins = [c for c in inf["available_actions"]["clickables"] if c not in ("back to search", "next >", "< prev")]
    for asin in asins[:2]:
        acts.append(f"click[{asin}]")
        _, _, _, _, inf = env.step(acts[-1])
        opts = [c for c in inf["available_actions"]["clickables"][6:]][:2]
        acts += [f"click[{o}]" for o in opts] + [
            "click[description]",
            "click[< prev]",
            "click[features]",
            "click[< prev]",
            "click[< prev]",
        ]
        for a in acts[-(len(opts) + 5) :]:
            env.step(a)
    acts += ["look", f"search[{goal['query']}]", "click[back to search]"]
    return acts


def bench_step(repeats: int) -> dict:
    from progpo_envs.webshop.env import WebShopEnv
    from progpo_envs.webshop.pages import read_page, render_html

    env = WebShopEnv(num_products=1000, split="all", max_episode_steps=10_000)
    runs, base_runs = [], []
    for r in range(repeats):
        times, base = [], []
        for ep in range(30):
            _, info = env.reset(options={"goal_index": (r * 30 + ep) % len(env.shop.goals)})
            actions = _episode_actions(env, info)
            env.reset(options={"goal_index": info["task_id"]})
            env.shop.clear_search_cache()  # searches are timed uncached
            for a in actions:
                t0 = time.perf_counter()
                env.step(a)
                times.append(time.perf_counter() - t0)
                view = env._session.view()
                t0 = time.perf_counter()
                html = render_html(view, "bench")
                read_page(html)
                base.append(time.perf_counter() - t0)
        runs.append(_pcts(times))
        base_runs.append(_pcts(base))
    env.close()
    p50 = statistics.median(r[0] for r in runs) * 1e3
    p90 = statistics.median(r[1] for r in runs) * 1e3
    b50 = statistics.median(r[0] for r in base_runs) * 1e3
    return {"p50_ms": p50, "p90_ms": p90, "baseline_html_roundtrip_p50_ms": b50, "n_steps": len(times)}


def _documents(n: int):
    from progpo_envs.webshop.catalog_gen import iter_catalog
    from progpo_envs.webshop.data import convert_product
    from progpo_envs.webshop.search import product_document

    docs, asins = [], []
    for raw, attrs in iter_catalog(n, 0):
        p = convert_product(raw, attrs)
        docs.append(product_document(p))
        asins.append(p["asin"])
    return docs, asins


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_build(n: int, with_bm25s_baseline: bool) -> dict:
    """Runs in a fresh process: generate docs, build the index, report time and peak RSS."""
    from progpo_envs.webshop.search import SearchIndex

    t0 = time.perf_counter()
    docs, asins = _documents(n)
    gen_s = time.perf_counter() - t0
    docs_rss = _rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    index = SearchIndex.build(docs, asins)
    build_s, build_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    out = {
        "n": n,
        "gen_s": gen_s,
        "build_s": build_s,
        "build_cpu_s": build_cpu_s,
        "docs_rss_mb": docs_rss,
        "peak_rss_mb": _rss_mb(),
        "vocab": len(index.bm25.vocab_dict),
    }
    lat, base = [], []
    import bm25s

    for rep in range(5):
        for q in QUERIES:
            t = time.perf_counter()
            index.search(q)
            lat.append(time.perf_counter() - t)
    out["search_p50_ms"], out["search_p90_ms"] = (x * 1e3 for x in _pcts(lat))
    # baseline 1: bm25s's own retrieval on the same score matrix
    for rep in range(3):
        for q in QUERIES:
            ids = [index.bm25.vocab_dict[t] for t in index.analyzer.terms(q) if t in index.bm25.vocab_dict]
            t = time.perf_counter()
            if ids:
                index.bm25.retrieve([ids], k=50, show_progress=False, n_threads=1)
            base.append(time.perf_counter() - t)
    out["bm25s_retrieve_p50_ms"] = _pcts(base)[0] * 1e3
    if with_bm25s_baseline:
        toks = [index.analyzer.terms(d) for d in docs[: min(n, 100_000)]]
        t = time.perf_counter()
        bm25s.BM25(k1=0.9, b=0.4, method="lucene").index(toks, show_progress=False)
        out["bm25s_index_s"] = time.perf_counter() - t
        t = time.perf_counter()
        SearchIndex.build(docs[: len(toks)], asins[: len(toks)])
        out["ours_same_docs_s"] = time.perf_counter() - t
        out["baseline_docs"] = len(toks)
    return out


def bench_build(n: int, baseline: bool) -> dict:
    cmd = [sys.executable, __file__, "--child-build", str(n)] + (["--child-baseline"] if baseline else [])
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT))
    if res.returncode != 0:
        raise RuntimeError(res.stderr[-2000:])
    return json.loads(res.stdout.strip().splitlines()[-1])


def bench_browser(steps: int = 12) -> dict | None:
    from progpo_envs.webshop.browser import CHROMEDRIVER_BINARY, CHROMIUM_BINARY

    if not (os.path.exists(CHROMIUM_BINARY) and os.path.exists(CHROMEDRIVER_BINARY)):
        return None
    from progpo_envs.webshop.env import WebShopEnv

    env = WebShopEnv(num_products=1000, mode="browser", split="all", max_episode_steps=10_000)
    t0 = time.perf_counter()
    _, info = env.reset(options={"goal_index": 0})
    first_reset = time.perf_counter() - t0
    text = WebShopEnv(shop=env.shop, split="all", max_episode_steps=10_000)
    _, tinfo = text.reset(options={"goal_index": 0})
    actions = _episode_actions(text, tinfo)[:steps]
    times = []
    for a in actions:
        t0 = time.perf_counter()
        env.step(a)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    env.reset(options={"goal_index": 1})
    reset_s = time.perf_counter() - t0
    env.close()
    p50, p90 = _pcts(times)
    return {"p50_ms": p50 * 1e3, "p90_ms": p90 * 1e3, "first_reset_s": first_reset, "reset_s": reset_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--full", action="store_true", help="also build the 1M-product index")
    ap.add_argument("--no-browser", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child-build", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--child-baseline", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_build:
        print(json.dumps(child_build(args.child_build, args.child_baseline)))
        return

    rows = []
    step = bench_step(args.repeats)
    rows.append(
        (
            "text step p50, 1k products (goal <= 1 ms)",
            f"{step['p50_ms']:.3f} ms",
            f"{step['baseline_html_roundtrip_p50_ms'] / step['p50_ms']:.1f}x vs HTML round trip "
            f"({step['baseline_html_roundtrip_p50_ms']:.3f} ms)",
        )
    )
    rows.append(("text step p90, 1k products", f"{step['p90_ms']:.3f} ms", ""))
    b100k = bench_build(100_000, baseline=True)
    rows.append(
        (
            "search p50, 100k products (goal <= 5 ms)",
            f"{b100k['search_p50_ms']:.3f} ms",
            f"{b100k['bm25s_retrieve_p50_ms'] / b100k['search_p50_ms']:.1f}x vs bm25s.retrieve "
            f"({b100k['bm25s_retrieve_p50_ms']:.3f} ms)",
        )
    )
    rows.append(("search p90, 100k products", f"{b100k['search_p90_ms']:.3f} ms", ""))
    rows.append(
        (
            "index build, 100k products",
            f"{b100k['build_s']:.1f} s",
            f"CPU {b100k['build_cpu_s']:.1f} s; "
            f"{b100k['bm25s_index_s'] / b100k['ours_same_docs_s']:.1f}x vs bm25s.index on pre-tokenized docs "
            f"({b100k['bm25s_index_s']:.1f} s)",
        )
    )
    rows.append(("peak RSS, 100k build", f"{b100k['peak_rss_mb']:.0f} MB", f"docs alone {b100k['docs_rss_mb']:.0f} MB"))
    if args.full:
        b1m = bench_build(1_000_000, baseline=False)
        rows.append(
            (
                "index build, 1M products (goal <= 60 s)",
                f"{b1m['build_s']:.1f} s",
                f"CPU {b1m['build_cpu_s']:.1f} s; catalog generation {b1m['gen_s']:.0f} s, not counted",
            )
        )
        rows.append(
            (
                "peak RSS, 1M build (goal <= 4 GB)",
                f"{b1m['peak_rss_mb']:.0f} MB",
                f"docs alone {b1m['docs_rss_mb']:.0f} MB",
            )
        )
        rows.append(("search p50, 1M products", f"{b1m['search_p50_ms']:.3f} ms", ""))
    if not args.no_browser:
        br = bench_browser()
        if br is None:
            rows.append(("browser step p50", "skipped (no chromium)", ""))
        else:
            rows.append(
                (
                    "browser step p50, 1k products",
                    f"{br['p50_ms']:.0f} ms",
                    f"p90 {br['p90_ms']:.0f} ms; first reset {br['first_reset_s']:.1f} s, later reset {br['reset_s']:.2f} s",
                )
            )
    w = max(len(r[0]) for r in rows)
    print(f"{'measure'.ljust(w)} | {'value':>14} | note")
    print("-" * (w + 60))
    for name, value, note in rows:
        print(f"{name.ljust(w)} | {value:>14} | {note}")


if __name__ == "__main__":
    main()
