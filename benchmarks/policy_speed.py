"""Policy throughput: generation (batch 1/8/32) and candidate scoring, tiny model and SmolLM2.

Each workload is timed ``--repeats`` times and the median is reported, next to a baseline
measured in the same run:

* generation: :class:`agents.backends.TransformersBackend` (explicit KV-cached loop that
  records the sampling log-probs) vs transformers' own ``model.generate`` (sampling, same
  batch, same number of new tokens, no log-probs); tokens/s counts generated tokens.
* scoring: :func:`agents.logprobs.candidate_logprobs` (prompt + all candidates packed in one
  sequence with a tree attention mask) vs :func:`agents.logprobs.sequence_logprobs` on K
  separate prompt+candidate sequences; tokens/s counts candidate tokens scored; "step/s" is
  decisions per second (one ALFWorld-like prompt, 20 admissible commands).

Prompts are real ALFWorld-template prompts (~350 tokens with SmolLM2's tokenizer).

    python benchmarks/policy_speed.py                       # tiny + smollm2, 1 thread
    python benchmarks/policy_speed.py --models tiny --threads 2 --repeats 5
    python benchmarks/policy_speed.py --vllm                # adds vLLM rows on a CUDA GPU
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_timing import median_time

from agents.backends import SamplingConfig, TransformersBackend
from agents.logprobs import candidate_logprobs, sequence_logprobs
from agents.models import load_model
from agents.prompting import build_messages, render_prompt

COMMANDS = [
    "go to bed 1",
    "go to desk 1",
    "go to desk 2",
    "go to drawer 1",
    "go to drawer 2",
    "go to drawer 3",
    "go to drawer 4",
    "go to drawer 5",
    "go to drawer 6",
    "go to garbagecan 1",
    "go to laundryhamper 1",
    "go to safe 1",
    "go to shelf 1",
    "go to shelf 2",
    "go to shelf 3",
    "go to shelf 4",
    "go to shelf 5",
    "go to shelf 6",
    "inventory",
    "look",
]
OBS = (
    "You are in the middle of a room. Looking quickly around you, you see a bed 1, a desk 2, a desk 1, "
    "a drawer 6, a drawer 5, a drawer 4, a drawer 3, a drawer 2, a drawer 1, a garbagecan 1, a laundryhamper 1, "
    "a safe 1, a shelf 6, a shelf 5, a shelf 4, a shelf 3, a shelf 2, and a shelf 1."
)


def prompt_ids(tok: Any, i: int) -> list[int]:
    msgs = build_messages(
        "alfworld",
        goal="put two cd in safe.",
        observation=f"{OBS} (variant {i})",
        admissible=COMMANDS,
        history=[],
        step=0,
        fmt="think_action",
    )
    return render_prompt(tok, msgs)


def bench_model(name: str, batches: list[int], new_tokens: int, repeats: int, rows: list[tuple]) -> None:
    model, tok = load_model(name)
    be = TransformersBackend(model, tok, max_batch_size=max(batches))
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=new_tokens, stop=())
    for b in batches:
        prompts = [prompt_ids(tok, i) for i in range(b)]
        ours = median_time(lambda: be.generate(prompts, cfg, seed=0), repeats, warmup=True)
        width = max(map(len, prompts))
        ids = torch.full((b, width), tok.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, width - len(p) :] = torch.tensor(p)
            mask[i, width - len(p) :] = 1

        def hf_generate() -> None:
            with torch.no_grad():
                model.generate(
                    input_ids=ids,
                    attention_mask=mask,
                    do_sample=True,
                    max_new_tokens=new_tokens,
                    min_new_tokens=new_tokens,
                    pad_token_id=tok.pad_token_id,
                    top_k=0,
                )

        base = median_time(hf_generate, repeats, warmup=True)
        n = b * new_tokens
        rows.append((name, f"generate {new_tokens} tok", b, n / ours, n / base, base / ours))
    prompt = prompt_ids(tok, 0)
    cands = [tok(f"<action>{c}</action>", add_special_tokens=False)["input_ids"] for c in COMMANDS]
    n = sum(map(len, cands))
    with torch.no_grad():
        packed = median_time(
            lambda: candidate_logprobs(model, prompt, cands, pad_token_id=tok.pad_token_id), repeats, warmup=True
        )
        naive = median_time(
            lambda: sequence_logprobs(
                model, [prompt] * len(cands), cands, pad_token_id=tok.pad_token_id, batch_size=32
            ),
            repeats,
            warmup=True,
        )
    rows.append((name, f"score {len(cands)} cmds (prompt {len(prompt)})", 1, n / packed, n / naive, naive / packed))
    rows.append((name, "  = decisions/s", 1, 1 / packed, 1 / naive, naive / packed))


def bench_vllm(new_tokens: int, batches: list[int], repeats: int, rows: list[tuple]) -> None:
    from agents.backends.vllm_backend import VLLMBackend

    _, tok = load_model("smollm2")
    be = VLLMBackend("smollm2", tokenizer=tok, gpu_memory_utilization=0.3)
    cfg = SamplingConfig(temperature=1.0, max_new_tokens=new_tokens, stop=())
    for b in batches:
        prompts = [prompt_ids(tok, i) for i in range(b)]
        t = median_time(lambda: be.generate(prompts, cfg, seed=0), repeats, warmup=True)
        rows.append(
            ("smollm2 (vLLM, GPU)", f"generate {new_tokens} tok", b, b * new_tokens / t, float("nan"), float("nan"))
        )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="tiny,smollm2")
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    ap.add_argument("--vllm", action="store_true", help="also time the vLLM backend (CUDA GPU + extra [vllm])")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    batches = [int(b) for b in args.batches.split(",")]
    rows: list[tuple] = []
    for name in args.models.split(","):
        bench_model(name.strip(), batches, args.new_tokens, args.repeats, rows)
    if args.vllm:
        bench_vllm(args.new_tokens, batches, args.repeats, rows)
    print(f"\npolicy speed, CPU, {args.threads} thread(s), median of {args.repeats} runs (tokens/s)\n")
    header = f"{'model':<20} {'workload':<34} {'batch':>5} {'progpo':>10} {'baseline':>10} {'ratio':>7}"
    print(header)
    print("-" * len(header))
    for name, work, b, ours, base, ratio in rows:
        fmt = ".3f" if max(ours, base if base == base else 0) < 10 else ".1f"
        print(f"{name:<20} {work:<34} {b:>5} {ours:>10{fmt}} {base:>10{fmt}} {ratio:>6.2f}x")
    print("\nbaseline: HF model.generate (generation) / one full sequence per candidate (scoring)")


if __name__ == "__main__":
    main()
