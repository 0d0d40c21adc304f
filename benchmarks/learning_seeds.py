"""The default learning run (`python -m trainers.progpo`) at several seeds: how much of RL's
held-out gain survives a change of seed.

    python benchmarks/learning_seeds.py                          # seeds 0-4, 2 at a time: ~25 min on 2 cores
    python benchmarks/learning_seeds.py --seeds 0 1 -- --iterations 2   # flags after -- go to the trainer

Each seed is the whole default pipeline in a subprocess (``--workers`` at a time, one torch
thread each): its own behaviour-cloning warm start, its own task schedule and sampling seeds,
then RL, with held-out ``easy-valid`` evaluations (144 episodes, fixed seeds) at iteration 0 and
at the end. The random-policy and ``valid`` evaluations of the report are left out (they do not
depend on RL). Finished runs in ``--out`` are reused (``--fresh`` reruns them).

It prints, and writes to ``table.md``, one row per seed (warm start, end, the paired difference
with its 95% bootstrap interval over episodes) and the mean difference over seeds with a 95%
t-interval over seeds: the figure to read as RL's typical effect.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the package, when this file is imported rather than run
    sys.path.insert(0, str(ROOT))

from trainers.runs.metrics import read_metrics
from trainers.runs.summary import rl_gain
from trainers.statistics import mean_ci


def run_seed(seed: int, out: Path, trainer_args: list[str], fresh: bool) -> Path:
    """One default run at ``seed`` under ``out/seed_<seed>`` (skipped when it already finished)."""
    run_dir = out / f"seed_{seed}"
    metrics = run_dir / "metrics.jsonl"
    if metrics.exists() and not fresh and rl_gain(read_metrics(metrics)) is not None:
        return run_dir
    cmd = [
        sys.executable,
        *"-m trainers.progpo --seed".split(),
        str(seed),
        "--output-dir",
        str(run_dir),
        *(
            "--no-baseline-random --eval-extra-split none --no-progress-bars --no-tensorboard --torch-threads 1 "
            "--overwrite"
        ).split(),
        *trainer_args,
    ]  # an unfinished run restarts from scratch
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "stdout.log", "w") as log:
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, check=True)
    return run_dir


def summarize(run_dirs: dict[int, Path]) -> tuple[str, dict]:
    """Markdown table (one row per seed, then the mean over seeds) and the numbers behind it."""
    rows, diffs = [], []
    for seed, run_dir in sorted(run_dirs.items()):
        g = rl_gain(read_metrics(run_dir / "metrics.jsonl"))
        if g is None:
            rows.append(f"| {seed} | (no start and end evaluation) | | | |")
            continue
        diffs.append(g["diff"])
        ci = f"[{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]" if g.get("ci") else ""
        rows.append(f"| {seed} | {g['start']:.3f} | {g['end']:.3f} | {g['diff']:+.3f} | {ci} |")
    lines = [
        "| seed | warm start (iteration 0) | end | difference | 95% CI (episodes) |",
        "|---:|---:|---:|---:|---:|",
        *rows,
    ]
    result: dict = {"seeds": sorted(run_dirs), "diffs": diffs}
    if diffs:
        m, h = mean_ci(np.array(diffs))
        mean, half = float(m), (float(h) if len(diffs) > 1 else float("nan"))  # no interval from one seed
        result.update(mean=mean, ci=(mean - half, mean + half), at_least_10=sum(d >= 0.10 for d in diffs))
        lines += [
            "",
            f"Mean difference over {len(diffs)} seeds: **{mean:+.3f}** (95% t-interval over seeds "
            f"[{mean - half:+.3f}, {mean + half:+.3f}]); seeds with a gain of 10 points or more: "
            f"{result['at_least_10']} of {len(diffs)}.",
        ]
    return "\n".join(lines), result


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    trainer_args: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, trainer_args = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4])
    p.add_argument("--workers", type=int, default=2, help="runs at a time (one core each)")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "learning_seeds")
    p.add_argument("--fresh", action="store_true", help="rerun seeds that already finished in --out")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        futures = {s: pool.submit(run_seed, s, args.out, trainer_args, args.fresh) for s in args.seeds}
        run_dirs = {s: f.result() for s, f in futures.items()}
    table, result = summarize(run_dirs)
    command = " ".join(["python -m trainers.progpo", *trainer_args])
    header = f"`{command}` at each seed; held-out easy-valid success.\n\n"
    (args.out / "table.md").write_text(header + table + "\n")
    (args.out / "results.json").write_text(json.dumps(result, indent=1))
    print(header + table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
