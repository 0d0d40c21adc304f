"""Generation speed of the transformers backend's engines at one shape: tokens/s, median of runs.

    python benchmarks/decode_engines.py                                   # CPU: tiny-128x2, 16 x 32 tokens
    python benchmarks/decode_engines.py --device cuda --model random-qwen2.5-1.5b --batch 128 --tokens 256

Every engine samples the same fixed-length answers (``min_new_tokens = max_new_tokens``) from
the same prompts (left-padded, of several lengths, as a rollout's are):

* ``loop``: :class:`agents.backends.TransformersBackend`, the written-out loop (the baseline);
* ``static``: :class:`agents.backends.StaticCacheBackend` without compilation;
* ``static+compile``: the same with its decode step compiled (CUDA graphs on a GPU); its first
  call, which compiles, is timed apart as the one-time cost;
* ``... bf16``: the engine sampling from a bf16 copy of the fp32 weights (``rollout_dtype``).

Prints one table (tokens/s, ratio to ``loop``) and writes it as JSON with ``--json``.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_timing import model_parser

from agents.backends import SamplingConfig, StaticCacheBackend, TransformersBackend
from agents.models import load_model


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_engine(
    backend: Any, prompts: list[list[int]], cfg: SamplingConfig, repeats: int, device: torch.device, autocast: bool
) -> dict[str, float]:
    """The first call's seconds (compilation included) and the median of ``repeats`` more calls."""

    def call(seed: int) -> float:
        _sync(device)
        t0 = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
            gens = backend.generate(prompts, cfg, seed=seed)
        _sync(device)
        assert all(len(g.response_ids) == cfg.max_new_tokens for g in gens)
        return time.perf_counter() - t0

    first = call(0)
    median = statistics.median(call(1 + i) for i in range(repeats))
    tokens = len(prompts) * cfg.max_new_tokens
    return {"first_s": first, "median_s": median, "tokens_per_s": tokens / median}


def main(argv: list[str] | None = None) -> int:
    ap = model_parser(__doc__)
    ap.add_argument("--batch", type=int, default=16, help="prompts decoded together")
    ap.add_argument("--tokens", type=int, default=32, help="tokens per answer (fixed)")
    ap.add_argument("--prompt-tokens", type=int, default=200, help="the longest prompt; the others are shorter")
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per engine (after the first)")
    ap.add_argument(
        "--engines",
        default="loop,static,static+compile,static+compile bf16",
        help="comma-separated: loop, static, static+compile, each optionally followed by ' bf16'",
    )
    ap.add_argument("--threads", type=int, default=1, help="torch threads on the CPU")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(args.threads)
    model, tok = load_model(args.model, device=device)
    model.eval()
    gen = torch.Generator().manual_seed(0)
    vocab = min(int(model.config.vocab_size), len(tok))
    prompts = [
        torch.randint(3, vocab, (args.prompt_tokens - 7 * (i % 16),), generator=gen).tolist() for i in range(args.batch)
    ]
    cfg = SamplingConfig(max_new_tokens=args.tokens, min_new_tokens=args.tokens, stop=(), temperature=1.0)
    autocast = device.type == "cuda"  # the loop engine's bf16: autocast over the fp32 weights, as the trainer runs it
    rows = []
    for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
        engine, _, dtype = name.partition(" ")
        kw: dict[str, Any] = {"max_batch_size": args.batch, "rollout_dtype": dtype or None}
        if engine == "loop":
            backend: Any = TransformersBackend(model, tok, **kw)
        elif engine in ("static", "static+compile"):
            backend = StaticCacheBackend(model, tok, compile=engine == "static+compile", **kw)
        else:
            raise SystemExit(f"unknown engine {engine!r}")
        res = time_engine(backend, prompts, cfg, args.repeats, device, autocast and not dtype)
        rows.append({"engine": name, **res, "compiles": getattr(backend, "stats", {}).get("compiles", 0.0)})
        del backend
    base = next((r["tokens_per_s"] for r in rows if r["engine"] == "loop"), None)
    print(
        f"{args.model} on {device.type}, {args.batch} prompts (<= {args.prompt_tokens} tokens) x {args.tokens} "
        f"new tokens, median of {args.repeats}"
    )
    print("| engine | tokens/s | x loop | first call (s) | compiled graphs |\n|---|---|---|---|---|")
    for r in rows:
        ratio = f"{r['tokens_per_s'] / base:.2f}" if base else "-"
        print(f"| {r['engine']} | {r['tokens_per_s']:,.0f} | {ratio} | {r['first_s']:.1f} | {r['compiles']:.0f} |")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(
            json.dumps(
                {"model": args.model, "device": device.type, "batch": args.batch, "tokens": args.tokens, "rows": rows},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
