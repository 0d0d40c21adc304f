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
from collections.abc import Iterator
from pathlib import Path

from trainers.lab.methods import run_name
from trainers.lab.runs import LabError, strict_compare
from trainers.runs.metrics import TIMING_KEYS, scan_metrics

__all__ = ["compare_blocks", "compare_runs"]


def _record_keys(records: list[dict]) -> set[tuple[str, int]]:
    return {(str(r.get("kind")), r["iteration"]) for r in records if isinstance(r.get("iteration"), int)}


def _timed(field: str) -> bool:
    return field in TIMING_KEYS or field.startswith("time/")


def _pairs(a: list[dict], b: list[dict]) -> Iterator[tuple[dict, dict]]:
    """Each record of ``a`` with the record of ``b`` of the same kind and iteration, where there is one."""
    theirs = {(r.get("kind"), r.get("iteration")): r for r in b}
    for x in a:
        y = theirs.get((x.get("kind"), x.get("iteration")))
        if y is not None:
            yield x, y


def _text_difference(a: list[dict], b: list[dict]) -> str | None:
    """The first field, outside what :func:`strict_compare` weighs, that both runs' records hold
    with other values: one that is not a number (a task id, a panel, a list of them). ``None``:
    none. Wall-clock fields are left out."""
    for x, y in _pairs(a, b):
        for field in sorted(set(x) & set(y)):
            u, v = x[field], y[field]
            values = (u if isinstance(u, list) else [u]) + (v if isinstance(v, list) else [v])
            if not _timed(field) and u != v and not all(isinstance(e, (int, float)) or e is None for e in values):
                return f"{x.get('kind')} iteration {x.get('iteration')} {field} (not a number, and not equal)"
    return None


def _fields_alone(a: list[dict], b: list[dict]) -> list[str]:
    """The fields that one run's records hold and the same record of the other run lacks (wall-clock
    fields left out), each named once with the copy that has it."""
    out: dict[str, None] = {}
    for x, y in _pairs(a, b):
        for field in sorted(set(x) ^ set(y)):
            if not _timed(field):
                out[f"{field} ({'this' if field in x else 'the other'} copy)"] = None
    return list(out)


def compare_runs(ours: Path, theirs: Path) -> tuple[int, tuple[float, str] | None, list[str]]:
    """Records compared, the largest relative difference (``None``: bit-exact) between two kept run
    folders' ``metrics.jsonl`` and the fields one copy alone holds. Every numeric field is weighed
    (:func:`strict_compare`), every other field by equality; a record kind or iteration one run has
    and the other lacks is a difference. :class:`LabError` when either cannot be read, holds a line
    that is not a record, or holds none."""
    try:
        a, bad_a = scan_metrics(ours / "metrics.jsonl")
        b, bad_b = scan_metrics(theirs / "metrics.jsonl")
    except OSError as err:
        raise LabError(f"cannot read a run's records ({err})") from None
    for folder, bad in ((ours, bad_a), (theirs, bad_b)):
        if bad:
            raise LabError(f"{folder / 'metrics.jsonl'}: {bad}")
    if not a or not b:
        raise LabError(f"{(ours if not a else theirs) / 'metrics.jsonl'} holds no record")
    keys_a, keys_b = _record_keys(a), _record_keys(b)
    if keys_a != keys_b:
        kind, iteration = min(keys_a ^ keys_b)
        return 0, (float("inf"), f"{kind} iteration {iteration} in one run only"), []
    n, worst = strict_compare(a, b, max((i for _, i in keys_a), default=0))
    if worst is None:
        text = _text_difference(a, b)
        worst = (float("inf"), text) if text else None
    return n, worst, _fields_alone(a, b)


def compare_blocks(args: argparse.Namespace, other: Path) -> int:
    """Print the comparison of ``args.runs`` with ``other`` (a block's folder, or its ``runs/``)
    over the block's methods and seeds. 0 when at least one run is shared, else 2."""
    other_runs = other / "runs" if (other / "runs").is_dir() else other
    if not other_runs.is_dir():
        print(f"error: --compare-with: {other} is not a folder", file=sys.stderr)
        return 2
    if other_runs.resolve() == args.runs.resolve():
        print(
            f"error: --compare-with: {other} is this block's own folder ({args.runs}); name another copy of it",
            file=sys.stderr,
        )
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
    differ, partial = [], []
    for name in shared:
        try:
            n, worst, alone_fields = compare_runs(args.runs / name, other_runs / name)
        except LabError as err:
            print(f"| {name} | - | {err} |")
            differ.append(name)
            continue
        if worst is not None:
            differ.append(name)
        elif alone_fields:
            partial.append(name)
        cell = (
            f"{worst[0]:.3g} relative ({worst[1]})"
            if worst is not None
            else "bit-exact in the fields both hold; in one copy only: "
            + ", ".join(alone_fields[:3])
            + (" ..." if len(alone_fields) > 3 else "")
            if alone_fields
            else "bit-exact"
        )
        print(f"| {name} | {n} | {cell} |")
    exact = len(shared) - len(differ) - len(partial)
    print(
        f"\n{exact} of {len(shared)} shared runs bit-exact"
        + (
            f"; {len(partial)} more bit-exact in every field both copies hold, with fields one copy alone has "
            f"({', '.join(partial[:4])}{' ...' if len(partial) > 4 else ''})"
            if partial
            else ""
        )
        + (f"; differ: {', '.join(differ)}" if differ else "")
        + (f"; in one copy only (not compared): {', '.join(alone)}" if alone else "")
    )
    return 0
