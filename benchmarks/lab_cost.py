"""What a credit-lab run costs an iteration, against a baseline commit, with the records compared.

Runs the tree block's arms (the configs its kept seed-24 runs recorded:
``benchmarks/results/credit_lab_tree/runs/<arm>_canonical_seed24/config.yaml``) for ``--iterations``
iterations without evaluation, one after the other at the baseline commit (a temporary git
worktree) and on the working tree, ``--rounds`` times in alternation. Prints, per arm and side, the
median iteration time over iterations 2..N (median over rounds), the update's median share of an
iteration, the speed-up against the baseline, and whether the train records agree in every field
but ``time/*`` (a faster run must compute exactly what the baseline computes).

    python benchmarks/lab_cost.py                                   # 74dfc38, the tree block's commit
    python benchmarks/lab_cost.py --baseline HEAD --iterations 3 --arms progpo-gigpo+tree
    python benchmarks/lab_cost.py --quick                           # a smoke run (~2 min)

Measure alone on the machine: on 2 cores shared with other runs the ratios drift
(``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))

from same_metrics import without_added  # after the path: fields a newer trainer adds, compared where both have them

TREE_RUNS = ROOT / "benchmarks" / "results" / "credit_lab_tree" / "runs"
ARMS = ("gigpo+tree", "progpo-gigpo+tree")
#: the tree block's commit: its records are what every faster lab run must reproduce
BASELINE = "74dfc38"
QUICK = ["--num-groups", "2", "--group-size", "4", "--bc-steps", "2"]


def run_arm(repo: Path, arm: str, iterations: int, out: Path, extra: list[str]) -> list[dict]:
    """One run of ``arm`` in checkout ``repo``: its train records."""
    config = TREE_RUNS / f"{arm}_canonical_seed24" / "config.yaml"
    cmd = [
        sys.executable, "-m", "trainers.progpo", "--config", str(config), "--iterations", str(iterations),
        "--eval-episodes", "0", "--no-progress-bars", "--output-dir", str(out), "--overwrite", *extra,
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=repo, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"error: {arm} failed in {repo}: {proc.stderr.strip().splitlines()[-1:]}")
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("kind") == "train"]


def untimed(records: list[dict]) -> list[dict]:
    """Records without their timings (``time/*``, ``*per_s``).

    >>> untimed([{"loss": 1.0, "time/update_s": 2.0, "tokens_per_s": 3.0}])
    [{'loss': 1.0}]
    """
    return [{k: v for k, v in r.items() if not (k.startswith("time/") or k.endswith("per_s"))} for r in records]


def costs(records: list[dict]) -> tuple[float, float]:
    """Median iteration seconds over iterations 2..N (the first carries one-off costs), and the
    update's median share of an iteration.

    >>> costs([{"time/iteration_s": 9.0, "time/update_s": 1.0}, {"time/iteration_s": 4.0, "time/update_s": 2.0},
    ...        {"time/iteration_s": 6.0, "time/update_s": 3.0}])
    (5.0, 0.5)
    """
    later = records[1:] or records
    it = [float(r["time/iteration_s"]) for r in later]
    share = [float(r["time/update_s"]) / float(r["time/iteration_s"]) for r in later]
    return statistics.median(it), statistics.median(share)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default=BASELINE, help=f"the commit compared with the working tree ({BASELINE})")
    ap.add_argument("--arms", nargs="+", choices=ARMS, default=list(ARMS), help="the tree block's arms to run")
    ap.add_argument("--iterations", type=int, default=4, help="iterations a run (default 4)")
    ap.add_argument("--rounds", type=int, default=1, help="baseline / working tree alternations (default 1)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 x 4 groups, 2 warm-start steps, 2 iterations")
    args = ap.parse_args(argv)
    extra = QUICK if args.quick else []
    iterations = 2 if args.quick else args.iterations
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(
            ["git", "worktree", "add", "--detach", str(base), args.baseline], cwd=ROOT, check=True, capture_output=True
        )
        try:
            for arm in args.arms:
                seen: dict[str, list[tuple[float, float]]] = {"baseline": [], "working tree": []}
                records: dict[str, list[dict]] = {}
                for r in range(args.rounds):
                    for side, repo in (("baseline", base), ("working tree", ROOT)):
                        got = run_arm(repo, arm, iterations, Path(tmp) / f"{arm}_{side}_{r}".replace(" ", "_"), extra)
                        seen[side].append(costs(got))
                        records.setdefault(side, untimed(got))
                old, new = records["baseline"], records["working tree"]
                new = [without_added(b, a) for a, b in zip(old, new)] + new[len(old) :]
                same = old == new
                if not same:
                    first = next(
                        (i, k) for i, (a, b) in enumerate(zip(old, new)) for k in {*a, *b} if a.get(k) != b.get(k)
                    )
                    print(f"{arm}: iteration {first[0] + 1} differs first in {first[1]}", file=sys.stderr)
                it = {side: statistics.median(c[0] for c in v) for side, v in seen.items()}
                share = {side: statistics.median(c[1] for c in v) for side, v in seen.items()}
                for side in seen:
                    rows.append((arm, side, it[side], share[side], it["baseline"] / it[side], same))
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
    print(f"| arm | side | median iteration s | update share | speed-up vs {args.baseline} | records but time/* |")
    print("|---|---|---|---|---|---|")
    for arm, side, it_s, share_s, ratio, same in rows:
        print(f"| {arm} | {side} | {it_s:.2f} | {share_s:.0%} | {ratio:.2f}x | {'same' if same else 'DIFFERENT'} |")
    return 0 if all(r[5] for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
