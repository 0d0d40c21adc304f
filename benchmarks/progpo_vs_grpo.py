"""ProGPO(GRPO) vs GRPO where GRPO's credit trap exists, with the paper's two controls.

    python benchmarks/progpo_vs_grpo.py                       # 4 methods x 5 seeds, ~40 min on 2 cores
    python benchmarks/progpo_vs_grpo.py --methods gigpo progpo-gigpo --num-groups 8   # GiGPO, 8 x 8 (~30 min)
    python benchmarks/progpo_vs_grpo.py --seeds 0 --iterations 2 --out /tmp/b   # a quick look

Setting: the embedded ``easy`` ALFWorld games (``--template``: the demo's ``alfworld-notes``
prompt) starting from a WEAK warm start (a short behaviour cloning of the searching expert,
``--bc-steps``): it still wins sometimes, but most groups of 8 fail completely, so GRPO sees zero
advantage in most groups. One warm start is made once and shared by every run (same initial
weights); runs of one seed share the task schedule and the sampling seeds; every method gets the
same samples per iteration.

Methods (``--methods``):

* ``grpo``: the base estimator;
* ``progpo-grpo``: ProGPO: coverage-rate advantage in all-failed groups only;
* ``always``: control, the progress term added in EVERY group (``progress_gate=always``);
* ``shuffled``: control, coverage values permuted within each all-failed group before the
  advantage (``shuffle_coverage``): same distribution of advantages, no link to what was explored;
* ``gigpo`` / ``progpo-gigpo`` when asked for.

Each run is ``python -m trainers.progpo`` in a subprocess (``--workers`` at a time, one torch
thread each); finished runs in ``--out`` are reused (``--fresh`` reruns). The script prints and
writes ``table.md`` (eval success on held-out ``easy-valid``, train success, all-failed fraction;
mean and 95% CI over seeds; the samples each method needs to reach a success level) and
``curves.png``, and ``results.json`` with every run's records.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from trainers.lab.report import reach_lines
from trainers.runs.metrics import read_metrics
from trainers.statistics import mean_ci

METHODS = {
    "grpo": ["--estimator", "grpo"],
    "progpo-grpo": ["--estimator", "progpo-grpo"],
    "always": ["--estimator", "progpo-grpo", "--progress-gate", "always"],
    "shuffled": ["--estimator", "progpo-grpo", "--shuffle-coverage"],
    "gigpo": ["--estimator", "gigpo"],
    "progpo-gigpo": ["--estimator", "progpo-gigpo"],
}


def base_config(args: argparse.Namespace) -> dict:
    return dict(
        env="alfworld",
        train_split="easy-train",
        eval_split="easy-valid",
        model=args.model,
        policy_mode="score",
        template=args.template,
        history_k=1,
        max_steps=args.max_steps,
        iterations=args.iterations,
        num_groups=args.num_groups,
        group_size=args.group_size,
        lr=args.lr,
        num_minibatches=4,
        warm_start="none",
        eval_every=args.eval_every,
        eval_episodes=args.eval_episodes,
        eval_extra_split="none",
        baseline_random=False,
        torch_threads=1,
        env_backend="sync",
        progress_bars=False,
        tensorboard=False,
        device="cpu",
        save_every=args.iterations,
    )


def make_warm_start(args: argparse.Namespace, out: Path) -> Path:
    """The shared initial weights: a short behaviour cloning of the searching expert."""
    path = out / "init_model.pt"
    if path.exists() and not args.fresh:
        return path
    import dataclasses

    import torch

    from trainers.config import TrainConfig
    from trainers.loop.trainer import Trainer

    torch.set_num_threads(1)
    cfg = dataclasses.replace(
        TrainConfig(**base_config(args)), warm_start="bc", bc_steps=args.bc_steps, output_dir=str(out / "warm_start")
    )
    t0 = time.perf_counter()
    trainer = Trainer(cfg)
    rec = trainer.warm_start()
    trainer.save_weights(path)
    (out / "warm_start.json").write_text(json.dumps(rec))
    print(
        f"warm start: {args.bc_steps} bc steps, held-out step accuracy {rec['bc/step_accuracy']:.3f}, "
        f"{time.perf_counter() - t0:.0f} s -> {path}",
        flush=True,
    )
    return path


def run_one(method: str, seed: int, args: argparse.Namespace, out: Path, config: Path) -> list[dict]:
    run_dir = out / f"{method}_seed{seed}"
    if (run_dir / "summary.md").exists() and not args.fresh:
        return read_metrics(run_dir / "metrics.jsonl")
    cmd = [
        sys.executable,
        *"-m trainers.progpo --config".split(),
        str(config),
        "--seed",
        str(seed),
        "--output-dir",
        str(run_dir),
        "--overwrite",
        *METHODS[method],
    ]  # an unfinished run restarts
    t0 = time.perf_counter()
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{method} seed {seed} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    print(f"  {method:13s} seed {seed}: {time.perf_counter() - t0:6.0f} s", flush=True)
    return read_metrics(run_dir / "metrics.jsonl")


def curve(records: list[dict], key: str, kind: str, iterations: list[int]) -> np.ndarray:
    by_it = {r["iteration"]: r.get(key) for r in records if r.get("kind") == kind}
    return np.array([np.nan if by_it.get(i) is None else float(by_it[i]) for i in iterations])


def parse_args() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--methods", nargs="+", default=["grpo", "progpo-grpo", "always", "shuffled"], choices=list(METHODS)
    )
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    ap.add_argument("--iterations", type=int, default=6)
    ap.add_argument("--num-groups", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--max-steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--bc-steps", type=int, default=20, help="length of the (weak) shared warm start")
    ap.add_argument(
        "--template",
        default="alfworld-notes",
        help="prompt template (the figures measured before the notes template: alfworld-memory, --bc-steps 60)",
    )
    ap.add_argument("--eval-every", type=int, default=3)
    ap.add_argument("--eval-episodes", type=int, default=36)
    ap.add_argument("--model", default="tiny-128x2")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--levels", type=float, nargs="+", default=[0.1, 0.2, 0.3])
    ap.add_argument("--out", default="runs/bench_progpo_vs_grpo")
    ap.add_argument("--fresh", action="store_true")
    return ap.parse_args()


def main() -> None:
    args = parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t_start = time.perf_counter()
    init = make_warm_start(args, out)
    import yaml

    config = out / "run.yaml"
    config.write_text(yaml.safe_dump({**base_config(args), "weights_file": str(init)}, sort_keys=False))
    print(
        f"ProGPO vs GRPO on ALFWorld easy-train (eval easy-valid): {args.methods} x seeds {args.seeds}, "
        f"{args.iterations} iterations x {args.num_groups} tasks x {args.group_size} members, max {args.max_steps} "
        f"steps, lr {args.lr}, warm start {args.bc_steps} bc steps, {args.workers} workers",
        flush=True,
    )
    jobs = [(m, s) for s in args.seeds for m in args.methods]
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        recs = dict(zip(jobs, pool.map(lambda j: run_one(j[0], j[1], args, out, config), jobs)))
    n = args.iterations
    its = list(range(1, n + 1))
    eval_its = sorted({r["iteration"] for r in recs[jobs[0]] if r.get("kind") == "eval"})
    per_iter = args.num_groups * args.group_size
    lines = [
        "# ProGPO vs GRPO where GRPO stalls: ALFWorld easy-train, eval easy-valid",
        "",
        f"`python benchmarks/progpo_vs_grpo.py` -- model `{args.model}` (score mode, `{args.template}` prompt), shared weak "
        f"warm start ({args.bc_steps} bc steps), {n} iterations x {args.num_groups} tasks x {args.group_size} "
        f"trajectories ({per_iter} episodes, same schedule for every method of a seed), max {args.max_steps} steps, "
        f"lr {args.lr}, seeds {args.seeds}. Mean over seeds, +- the half-width of the 95% t interval.",
        "",
    ]
    head = (
        "| method | "
        + " | ".join(f"eval it {i}" for i in eval_its)
        + " | train it 1 | train last 3 | all-failed it 1 | all-failed last 3 | coverage last 3 |"
    )
    lines += ["## Success and all-failed fraction", "", head, "|---" * (head.count("|") - 1) + "|"]
    summary: dict[str, dict] = {}
    for m in args.methods:
        runs = [recs[(m, s)] for s in args.seeds]
        ev = np.stack([curve(r, "eval/success", "eval", eval_its) for r in runs])
        tr = np.stack([curve(r, "success", "train", its) for r in runs])
        af = np.stack([curve(r, "all_failed_frac", "train", its) for r in runs])
        cov = np.stack([curve(r, "coverage_rate", "train", its) for r in runs])
        ev_m, ev_h = mean_ci(ev)
        t1, t1h = mean_ci(tr[:, :1])
        tl, tlh = mean_ci(np.nanmean(tr[:, -3:], axis=1, keepdims=True))
        a1, a1h = mean_ci(af[:, :1])
        al, alh = mean_ci(np.nanmean(af[:, -3:], axis=1, keepdims=True))
        cl, clh = mean_ci(np.nanmean(cov[:, -3:], axis=1, keepdims=True))
        cells = [f"{a:.3f} +- {h:.3f}" for a, h in zip(ev_m, ev_h)]
        cells += [
            f"{t1[0]:.3f} +- {t1h[0]:.3f}",
            f"{tl[0]:.3f} +- {tlh[0]:.3f}",
            f"{a1[0]:.3f} +- {a1h[0]:.3f}",
            f"{al[0]:.3f} +- {alh[0]:.3f}",
            f"{cl[0]:.3f} +- {clh[0]:.3f}",
        ]
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
        summary[m] = {"eval": ev.tolist(), "train": tr.tolist(), "all_failed": af.tolist(), "coverage": cov.tolist()}
    lines += later_sections(args, summary, per_iter)
    lines += ["", f"Total wall time: {(time.perf_counter() - t_start) / 60:.1f} min.", ""]
    table = "\n".join(lines)
    print(table)
    (out / "table.md").write_text(table + "\n")
    (out / "results.json").write_text(json.dumps({"args": vars(args), "eval_iterations": eval_its, "methods": summary}))
    plot(summary, args, its, eval_its, out / "curves.png")
    print(f"plot: {out / 'curves.png'}  table: {out / 'table.md'}")


def later_sections(args: argparse.Namespace, summary: dict[str, dict], per_iter: int) -> list[str]:
    """Episodes to reach each train success level, and the final eval paired against GRPO's."""
    # samples to reach a train success level (mean over seeds of the running mean of 2 iterations)
    curves = {m: np.array(summary[m]["train"]) for m in args.methods}
    lines = reach_lines(curves, args.levels, per_iter, args.iterations)
    # paired (by seed) differences against grpo on the final eval
    if "grpo" in summary:
        lines += ["", "## Final held-out eval success minus GRPO's, paired by seed", ""]
        base = np.array(summary["grpo"]["eval"])[:, -1]
        for m in args.methods:
            if m == "grpo":
                continue
            d = np.array(summary[m]["eval"])[:, -1] - base
            mm, hh = mean_ci(d[:, None])
            lines.append(
                f"- {m} - grpo: {mm[0]:+.3f} +- {hh[0]:.3f} (per seed: " + ", ".join(f"{x:+.3f}" for x in d) + ")"
            )
    return lines


def plot(summary: dict, args: argparse.Namespace, its: list[int], eval_its: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8))
    panels = (
        ("eval", "held-out eval success (easy-valid)", eval_its),
        ("train", "train success", its),
        ("all_failed", "all-failed group fraction", its),
    )
    for ax, (key, title, xs) in zip(axes, panels):
        for m, data in summary.items():
            mean, half = mean_ci(np.array(data[key]))
            ax.plot(xs, mean, marker="o", label=m)
            ax.fill_between(xs, mean - half, mean + half, alpha=0.15)
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(f"ALFWorld easy, weak warm start: mean and 95% CI over {len(args.seeds)} seeds")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


if __name__ == "__main__":
    main()
