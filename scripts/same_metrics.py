"""Do two commits train alike? Short runs of the trainer on a set of configurations, at a given
commit and on the working tree, compared record by record (every key but the timings).

    python scripts/same_metrics.py 29cce15               # the working tree against commit 29cce15
    python scripts/same_metrics.py 29cce15 --only tree bc

For a change meant to keep behaviour (a restructuring): each configuration must print "same".
The commit is checked out in a temporary git worktree; both sides run ``python -m trainers.progpo``
with one torch thread, so the comparison is bit for bit on one machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMON = (
    "--model tiny --num-groups 2 --group-size 3 --max-steps 4 --iterations 2 --eval-every 1 "
    "--eval-episodes 6 --no-progress-bars --no-tensorboard --warm-start none --torch-threads 1 "
    "--eval-extra-split none --overwrite"
).split()
#: name -> the flags of one short run (each covers a path of the loop)
CONFIGS = {
    "rooms": ["--env", "rooms"],
    "alfworld": ["--env", "alfworld", "--estimator", "progpo-gigpo"],
    "tree": "--env alfworld --rollout tree --tree-branches 2 --tree-budget 8 --estimator progpo-gigpo".split(),
    "privileged": ["--env", "alfworld", "--distill", "privileged", "--estimator", "gigpo"],
    "hindsight": ["--env", "rooms", "--distill", "hindsight", "--estimator", "progpo-grpo"],
    "kl-generate": ("--env rooms --kl-coef 0.05 --entropy-coef 0.01 --estimator planpo --policy-mode generate").split(),
    "streams": ["--env", "rooms", "--rollout-streams", "2", "--eval-streams", "2", "--estimator", "hgpo"],
    "bc": ["--env", "alfworld", "--warm-start", "bc", "--bc-steps", "3", "--bc-episodes", "2", "--kl-coef", "0.02"],
}


def records(repo: Path, flags: list[str], out: Path) -> list[dict]:
    """The run's records without timings (``time/*``, ``*per_s``)."""
    cmd = [sys.executable, "-m", "trainers.progpo", *COMMON, *flags, "--output-dir", str(out)]
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: {' '.join(flags)} failed in {repo}: {proc.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return [{k: v for k, v in r.items() if not (k.startswith("time/") or k.endswith("per_s"))} for r in rows]


#: fields a newer trainer records that an older commit lacks; compared where both sides have them
ADDED = ("budget/", "adv/gigpo_", "adv/step_var_share")


def without_added(new: dict, old: dict) -> dict:
    """``new`` less the :data:`ADDED` fields that ``old`` lacks (the order of the rest kept).

    >>> without_added({"a": 1, "budget/episodes": 4.0}, {"a": 1})
    {'a': 1}
    """
    return {k: v for k, v in new.items() if not (k.startswith(ADDED) and k not in old)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rev", help="the commit compared with the working tree")
    ap.add_argument("--only", nargs="+", choices=list(CONFIGS), help="these configurations only")
    args = ap.parse_args(argv)
    names = args.only or list(CONFIGS)
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(other), args.rev], cwd=ROOT, check=True, capture_output=True
        )
        try:
            differ = 0
            print(f"| configuration | records | {args.rev} vs working tree |\n|---|---|---|")
            for name in names:
                a = records(other, CONFIGS[name], Path(tmp) / f"{name}_a")
                b = records(ROOT, CONFIGS[name], Path(tmp) / f"{name}_b")
                b = [without_added(rb, ra) for ra, rb in zip(a, b)] + b[len(a) :]
                same = a == b and [list(r) for r in a] == [list(r) for r in b]
                differ += not same
                print(f"| {name} | {len(b)} | {'same' if same else 'DIFFERENT'} |", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(other)], cwd=ROOT, capture_output=True)
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
