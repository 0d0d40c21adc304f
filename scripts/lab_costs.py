"""Where a lab run's time goes: its wall time (start to end, from ``provenance.jsonl``), the warm
start, the iterations' rollouts and updates, and the rest (loading, the three evaluations),
per method, median over the runs of a block that record their times.

    python scripts/lab_costs.py benchmarks/results/credit_lab_tree
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainers.runs.provenance import read_provenance, run_times  # after the path


def _seconds(a: str, b: str) -> float:
    fmt = "%Y-%m-%dT%H:%M:%SZ"
    return (datetime.datetime.strptime(b, fmt) - datetime.datetime.strptime(a, fmt)).total_seconds()


def run_costs(run: Path) -> dict[str, float] | None:
    """One kept run's phases in seconds, or ``None`` when it records no start and end."""
    times = run_times(read_provenance(run))
    if "started" not in times or "ended" not in times:
        return None
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in recs if r.get("kind") == "train"]
    wall = _seconds(times["started"], times["ended"])
    warm = sum(float(r.get("time/init_s", 0.0)) for r in recs if r.get("kind") == "init")
    rollout = sum(float(r.get("time/rollout_s", 0.0)) for r in train)
    update = sum(float(r.get("time/update_s", 0.0)) for r in train)
    return {
        "wall": wall,
        "warm start": warm,
        "rollouts": rollout,
        "updates": update,
        "load + evaluations": max(0.0, wall - warm - rollout - update),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("block", type=Path, help="a lab block's folder (its runs/ inside)")
    args = ap.parse_args(argv)
    by: dict[str, list[dict[str, float]]] = {}
    for run in sorted((args.block / "runs").iterdir()):
        costs = run_costs(run) if (run / "summary.md").exists() else None
        if costs:
            by.setdefault(run.name.split("_canonical")[0], []).append(costs)
    if not by:
        print(f"error: no finished run under {args.block / 'runs'} records its start and end", file=sys.stderr)
        return 2
    keys = ["wall", "warm start", "rollouts", "updates", "load + evaluations"]
    print("| method | runs | " + " | ".join(f"{k} (min)" for k in keys) + " |")
    print("|---|---:|" + "---:|" * len(keys))
    for method, rows in by.items():
        cells = [f"{statistics.median(r[k] for r in rows) / 60:.1f}" for k in keys]
        print(f"| {method} | {len(rows)} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
