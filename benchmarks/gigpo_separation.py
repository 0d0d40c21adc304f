"""Why the credit lab cannot separate GiGPO from GRPO: where GiGPO's step term can act at all.

GiGPO adds a step term over anchor groups: the steps of one group that act from the same state.
A step alone in its anchor group gets 0, so the term can only move the policy where steps share
states. Per lab setting this prints, from short GiGPO runs of that setting (the warm start, then
``--iterations`` iterations, no evaluation), the share of steps in an anchor group of two or more
(``adv/gigpo_peer_step_frac``), the share whose step term is not 0 (returns that differ in the
anchor group: ``adv/gigpo_active_step_frac``) and the share of the advantage's variance the step
term carries (``adv/step_var_share``): medians over the iterations and seeds, with their range. A setting
where both are small cannot tell GiGPO from GRPO whatever its seeds; this is what would choose a
setting for a block that tests the lab's validity.

    python benchmarks/gigpo_separation.py                     # the lab's ALFWorld settings, seeds 0-1
    python benchmarks/gigpo_separation.py --settings trap --seeds 0 1 2 --iterations 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
#: setting -> (config, extra flags): the lab's ALFWorld settings
SETTINGS = {
    "trap": ("configs/alfworld_trap.yaml", []),
    "lab": ("configs/credit_lab.yaml", []),
    "tree": ("configs/credit_lab_tree.yaml", ["--rollout", "tree"]),
}
KEYS = ("adv/gigpo_peer_step_frac", "adv/gigpo_active_step_frac", "adv/step_var_share", "all_failed_frac")


def run(config: str, extra: list[str], seed: int, iterations: int, out: Path) -> list[dict]:
    """The train records of a short GiGPO run of ``config`` at ``seed``."""
    cmd = [
        sys.executable, "-m", "trainers.progpo", "--config", config, "--estimator", "gigpo", *extra,
        "--seed", str(seed), "--iterations", str(iterations), "--eval-episodes", "0", "--save-every", "0",
        "--no-progress-bars", "--no-tensorboard", "--torch-threads", "1", "--output-dir", str(out), "--overwrite",
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)}: {proc.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [r for r in rows if r.get("kind") == "train"]


def cell(values: list[float]) -> str:
    """Median [min, max]."""
    if not values:
        return "-"
    return f"{np.median(values):.3f} [{min(values):.3f}, {max(values):.3f}]"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="+", choices=list(SETTINGS), default=["trap", "tree"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--iterations", type=int, default=3)
    args = ap.parse_args(argv)
    print(
        f"GiGPO runs: seeds {args.seeds}, {args.iterations} iterations each after the warm start; median over "
        "their iterations [min, max]\n"
    )
    print(
        "| setting | config | steps in an anchor group of 2+ | steps whose step term is not 0 | "
        "step term's share of the variance | all-failed groups |"
    )
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.settings:
            config, extra = SETTINGS[name]
            recs = [
                r
                for seed in args.seeds
                for r in run(config, extra, seed, args.iterations, Path(tmp) / f"{name}_{seed}")
            ]
            cells = [cell([float(r[k]) for r in recs if k in r]) for k in KEYS]
            print(f"| {name} | `{config}` | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
