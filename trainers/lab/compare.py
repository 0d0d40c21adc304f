"""Two kept copies of a block, run by run: which runs one reproduces from the other bit for bit.

A block re-run at another commit (or on another machine) is read against the first: every run
the two share (same method, seed and state key) is compared in every numeric field of every
record (:func:`~trainers.lab.runs.strict_compare`: ``bc/*`` and ``update/*`` included,
wall-clock fields left out).

    python -m trainers.lab --lab alfworld --compare-with benchmarks/results/credit_lab_mixed

prints one row per shared run (records compared, ``bit-exact`` or the largest relative difference
and its field) and a last line with the count; runs in one copy only are named, not compared.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainers.lab.methods import run_name
from trainers.lab.runs import LabError, strict_compare
from trainers.metrics import MetricsFileError, read_metrics

__all__ = ["compare_blocks", "compare_runs"]


def _record_keys(records: list[dict]) -> set[tuple[str, int]]:
    return {(str(r.get("kind")), r["iteration"]) for r in records if isinstance(r.get("iteration"), int)}


def compare_runs(ours: Path, theirs: Path) -> tuple[int, tuple[float, str] | None]:
    """Records compared and the largest relative difference (``None``: bit-exact) between two kept
    run folders' ``metrics.jsonl``; a record kind or iteration one run has and the other lacks is a
    difference too. :class:`LabError` when either cannot be read."""
    try:
        a, b = read_metrics(ours / "metrics.jsonl"), read_metrics(theirs / "metrics.jsonl")
    except (OSError, MetricsFileError) as err:
        raise LabError(f"cannot read a run's records ({err})") from None
    keys_a, keys_b = _record_keys(a), _record_keys(b)
    if keys_a != keys_b:
        kind, iteration = min(keys_a ^ keys_b)
        return 0, (float("inf"), f"{kind} iteration {iteration} in one run only")
    return strict_compare(a, b, max((i for _, i in keys_a), default=0))


def compare_blocks(args: argparse.Namespace, other: Path) -> int:
    """Print the comparison of ``args.runs`` with ``other`` (a block's folder, or its ``runs/``)
    over the block's methods and seeds. 0 when at least one run is shared, else 2."""
    other_runs = other / "runs" if (other / "runs").is_dir() else other
    if not other_runs.is_dir():
        print(f"error: --compare-with: {other} is not a folder", file=sys.stderr)
        return 2
    shared, alone = [], []
    for seed in args.seeds:
        for method in args.methods:
            name = run_name(method, seed, args.state_key)
            mine, theirs = (args.runs / name / "summary.md").exists(), (other_runs / name / "summary.md").exists()
            if mine and theirs:
                shared.append(name)
            elif mine or theirs:
                alone.append(name)
    if not shared:
        print(f"error: --compare-with: no finished run in both {args.runs} and {other_runs}", file=sys.stderr)
        return 2
    print(f"{args.runs} against {other_runs}:\n")
    print("| run | records compared | difference |")
    print("|---|---:|---|")
    differ = []
    for name in shared:
        try:
            n, worst = compare_runs(args.runs / name, other_runs / name)
        except LabError as err:
            print(f"| {name} | - | {err} |")
            differ.append(name)
            continue
        if worst is not None:
            differ.append(name)
        print(f"| {name} | {n} | " + ("bit-exact" if worst is None else f"{worst[0]:.3g} relative ({worst[1]})") + " |")
    print(f"\n{len(shared) - len(differ)} of {len(shared)} shared runs bit-exact" + (f"; differ: {', '.join(differ)}" if differ else "")
          + (f"; in one copy only (not compared): {', '.join(alone)}" if alone else ""))
    return 0
