"""ProGPO(GRPO) vs GRPO on the embedded HARD ALFWorld split: same budget, same seeds.

    python benchmarks/progpo_vs_grpo.py --seeds 0 1 2 --iterations 8 --model tiny --out runs/bench_progpo_vs_grpo

Defaults (CPU-sized): tiny random LLM, candidate scoring with length-normalized scores, 2 tasks x
4 trajectories per iteration, 10 steps, lr 2e-3, 2 mini-batches.

Each (estimator, seed) pair is one training run of :class:`trainers.trainer.Trainer` with the
identical config except ``estimator`` (so both see the same task schedule and the same initial
weights for a seed). The script prints a table (success and all-failed fraction over training,
mean +- std over seeds, and the last-third-of-training average with the per-seed difference
ProGPO - GRPO) and writes ``curves.png`` and ``table.md`` into ``--out``. Runs already finished
in ``--out`` are reused (``--fresh`` reruns them), so an interrupted benchmark can continue.
Read what it shows: on a small budget the curves are noisy and the table says so.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from trainers.config import TrainConfig  # noqa: E402
from trainers.metrics import read_metrics  # noqa: E402

ESTIMATORS = ("grpo", "progpo-grpo")


def run_one(base: TrainConfig, estimator: str, seed: int, out: Path, fresh: bool) -> list[dict]:
    run_dir = out / f"{estimator}_seed{seed}"
    done = run_dir / "summary.md"
    if done.exists() and not fresh:
        return [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"]
    from trainers.trainer import Trainer

    cfg = dataclasses.replace(base, estimator=estimator, seed=seed, output_dir=str(run_dir))
    t0 = time.perf_counter()
    Trainer(cfg).train()
    print(f"  {estimator:12s} seed {seed}: {time.perf_counter() - t0:7.1f} s", flush=True)
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("kind") == "train"]


def curve(records: list[dict], key: str, n: int) -> np.ndarray:
    vals = np.full(n, np.nan)
    for r in records:
        if 1 <= r["iteration"] <= n and key in r:
            vals[r["iteration"] - 1] = r[key]
    return vals


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--split", default="hard")
    ap.add_argument("--num-groups", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--policy-mode", default="score")
    ap.add_argument("--score-norm", default="mean", help="mean: length-normalized candidate scores (LLMPolicy score_norm)")
    ap.add_argument("--history-k", type=int, default=1)
    ap.add_argument("--num-minibatches", type=int, default=2)
    ap.add_argument("--torch-threads", type=int, default=1)
    ap.add_argument("--env-backend", default="async", help="async: a crashing engine worker is restarted, not fatal")
    ap.add_argument("--out", default="runs/bench_progpo_vs_grpo")
    ap.add_argument("--fresh", action="store_true")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    base = TrainConfig(env="alfworld", train_split=args.split, eval_split=args.split, model=args.model,
                       policy_mode=args.policy_mode, score_norm=args.score_norm, history_k=args.history_k,
                       num_minibatches=args.num_minibatches, torch_threads=args.torch_threads, env_backend=args.env_backend,
                       max_steps=args.max_steps, iterations=args.iterations,
                       num_groups=args.num_groups, group_size=args.group_size, lr=args.lr, eval_episodes=0,
                       progress=False, tensorboard=False, device="cpu", save_every=args.iterations)
    print(f"ProGPO(GRPO) vs GRPO on ALFWorld split={args.split}: model {args.model} ({args.policy_mode}), "
          f"score_norm {args.score_norm}, {args.iterations} iterations x {args.num_groups} tasks x "
          f"{args.group_size} members, max {args.max_steps} steps, lr {args.lr}, seeds {args.seeds}", flush=True)
    results: dict[str, list[list[dict]]] = {e: [] for e in ESTIMATORS}
    for seed in args.seeds:
        for est in ESTIMATORS:
            results[est].append(run_one(base, est, seed, out, args.fresh))
    n = args.iterations
    keys = (("success", "success"), ("all_failed_frac", "all-failed frac"), ("coverage_rate", "coverage rate"),
            ("repeated_action_rate", "repeated-action rate"), ("adv/nonzero_frac", "steps with non-zero advantage"),
            ("update/optimizer_steps", "optimizer steps per iteration"))
    tail = max(1, n // 3)
    lines = [f"# ProGPO(GRPO) vs GRPO, ALFWorld `{args.split}`", "",
             f"model `{args.model}` ({args.policy_mode} mode, score_norm {args.score_norm}), lr {args.lr}, {n} iterations x {args.num_groups} tasks x "
             f"{args.group_size} trajectories, max {args.max_steps} steps, seeds {args.seeds}; "
             f"mean +- std over seeds; 'last {tail}' = mean of the last {tail} iterations.", "",
             "| metric | estimator | first iteration | last iteration | last " + str(tail) + " (mean +- std) |",
             "|---|---|---:|---:|---:|"]
    for key, label in keys:
        for est in ESTIMATORS:
            c = np.stack([curve(r, key, n) for r in results[est]])
            last = np.nanmean(c[:, -tail:], axis=1)
            lines.append(f"| {label} | {est} | {np.nanmean(c[:, 0]):.3f} | {np.nanmean(c[:, -1]):.3f} | "
                         f"{last.mean():.3f} +- {last.std():.3f} |")
    diffs = []
    for key, label in keys[:2]:
        a = np.array([np.nanmean(curve(r, key, n)[-tail:]) for r in results["progpo-grpo"]])
        b = np.array([np.nanmean(curve(r, key, n)[-tail:]) for r in results["grpo"]])
        d = a - b
        diffs.append(f"- {label}, ProGPO - GRPO (last {tail}, per seed): " + ", ".join(f"{x:+.3f}" for x in d)
                     + f"; mean {d.mean():+.3f}")
    lines += ["", *diffs, ""]
    table = "\n".join(lines)
    print(table)
    (out / "table.md").write_text(table + "\n")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
        xs = np.arange(1, n + 1)
        for ax, (key, label) in zip(axes, keys[:3]):
            for est in ESTIMATORS:
                c = np.stack([curve(r, key, n) for r in results[est]])
                m, s = np.nanmean(c, 0), np.nanstd(c, 0)
                ax.plot(xs, m, marker="o", label=est)
                ax.fill_between(xs, m - s, m + s, alpha=0.2)
            ax.set_title(label)
            ax.set_xlabel("iteration")
            ax.grid(alpha=0.3)
        axes[0].legend()
        fig.suptitle(f"ALFWorld {args.split}: ProGPO(GRPO) vs GRPO, {len(args.seeds)} seeds")
        fig.tight_layout()
        fig.savefig(out / "curves.png", dpi=100)
        print(f"plot: {out / 'curves.png'}  table: {out / 'table.md'}")
    except ImportError:
        pass
    (out / "results.json").write_text(json.dumps({e: results[e] for e in ESTIMATORS}))


if __name__ == "__main__":
    main()
