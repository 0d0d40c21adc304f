"""What a pre-registered block's report says of its tests: the verdict on its primary (or that it
waits for its seeds), its registered slope secondary, how much the verdict rests on a few seeds,
and, while the block is partial, a table that withholds every per-arm outcome."""

from __future__ import annotations

import argparse
from typing import Sequence

import numpy as np

from trainers.lab.analysis import completeness, covariate_slope, primary_verdict, registered_primary
from trainers.lab.methods import LAB_PRESETS, labelled
from trainers.lab.significance import robustness
from trainers.statistics import mean_ci

__all__ = ["verdict_lines", "withheld", "withheld_lines"]


def _sentence(text: str) -> str:
    """``text`` with its first letter capitalized (the labels are kept lower-case for the JSON)."""
    return text[:1].upper() + text[1:]


def _cell(mean: float, half: float, n: int) -> str:
    return f"{mean:.3f} +- {half:.3f}" if n > 1 else f"{mean:.3f} (1 seed)"


def verdict_lines(args: argparse.Namespace, by: dict[str, list[dict]]) -> list[str]:
    """A pre-registered block's verdict on its primary, first: or that it waits for the rest of its seeds."""
    test = registered_primary(args.lab, args.config)
    if test is None:
        return []
    verdict = primary_verdict(by, test)
    lines = [f"**Verdict on the pre-registered primary: {_sentence(verdict['text'])}.**", ""]
    lines += _secondary_slope_lines(args, by, test.seeds) if verdict["complete"] else []
    rob = robustness(verdict["per_seed"]) if verdict["complete"] else None
    if rob is not None:
        lines += [
            f"How much it rests on a few seeds (secondary, not registered): Wilcoxon signed-rank p = "
            f"{rob['wilcoxon_p']:.3f}; {rob['positive']} of {rob['nonzero']} nonzero seeds positive (sign test "
            f"p = {rob['sign_p']:.3f}); median seed {rob['median']:+.3f}; leaving out one seed moves the estimate "
            f"within [{rob['loo_lo']:+.3f}, {rob['loo_hi']:+.3f}]; every seed's difference: `per_seed.png`.",
            "",
        ]
    return lines


def _secondary_slope_lines(args: argparse.Namespace, by: dict[str, list[dict]], seeds: Sequence[int]) -> list[str]:
    """A block's registered slope secondary (``secondary_slope: [A, B]`` in its block), read once
    its primary is: does A - B grow with the all-failed share of the first collection?"""
    pair = LAB_PRESETS.get(args.lab or "", {}).get("secondary_slope")
    if not pair:
        return []
    fit = covariate_slope(by, pair[0], pair[1], seeds)
    if fit is None:
        return []
    what = f"{pair[0]} - {pair[1]} final held-out success"
    said = (
        f"{what} {'grows' if fit['slope'] > 0 else 'shrinks'} with the all-failed share of the first collection"
        if fit["p"] < 0.05
        else f"this lab cannot tell whether {what} changes with the all-failed share of the first collection"
    )
    return [
        f"**Registered secondary: {said}:** OLS slope {fit['slope']:+.3f} [{fit['lo']:+.3f}, {fit['hi']:+.3f}] "
        f"(95% t interval), two-sided p = {fit['p']:.3f}, {fit['seeds']} seeds.",
        "",
    ]


def withheld(args: argparse.Namespace, entries: list[dict]) -> bool:
    """Whether a pre-registered block is still partial: its per-arm outcomes are then withheld
    (an interim look at the arms would read the test before its seeds are in)."""
    if registered_primary(args.lab, args.config) is None:
        return False
    done = completeness(entries, args.methods, args.seeds)
    return done["finished"] < done["planned"]


def withheld_lines(methods: list[str], by: dict[str, list[dict]]) -> list[str]:
    """A partial pre-registered block: the runs in per arm and what was fixed before the arms
    diverged (the all-failed share of the first collection), no outcome."""
    lines = [
        "Per-arm outcomes (held-out and train success, curves, comparisons) are withheld until every "
        "registered run is in: an interim look would read the test before its seeds are.",
        "",
        "| method | seeds in | all-failed share of the first collection |",
        "|---|---|---|",
    ]
    for m in methods:
        first = [
            r["train"][0].get("first_collection", r["train"][0].get("all_failed_fraction")) for r in by[m] if r["train"]
        ]
        a, h = mean_ci(np.array(first, dtype=float)[:, None]) if first else (np.array([np.nan]), np.array([0.0]))
        lines.append(f"| {labelled(m)} | {len(by[m])} | {_cell(a[0], h[0], len(first))} |")
    return lines
