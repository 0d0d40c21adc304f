"""The lab's report: the table of every method over seeds, the lab's sections and the plots."""

from __future__ import annotations

import argparse
import json
import warnings
from pathlib import Path
from typing import Sequence

import numpy as np

from trainers.lab.analysis import (
    auc,
    completeness,
    families,
    final_success,
    mde_80,
    paired,
    per_run,
    primary_verdict,
    progpo_on_off,
    registered_primary,
    series,
    validity,
)
from trainers.lab.methods import (
    EXPLORATORY,
    LAB_BASES,
    LAB_PRESETS,
    LABELS,
    NOT_REGISTERED,
    PAIRS,
    acted_by,
    acted_keys,
    labelled,
)
from trainers.lab.registered import verdict_lines, withheld, withheld_lines
from trainers.lab.significance import episodes_to_reach, holm
from trainers.statistics import mean_ci

__all__ = ["lab_report", "reach_lines", "report"]


def _cell(mean: float, half: float, n: int) -> str:
    """``mean +- half`` of a 95% interval over ``n`` seeds (no interval from one seed)."""
    return f"{mean:.3f} +- {half:.3f}" if n > 1 else f"{mean:.3f} (1 seed)"


def _provenance_line(args: argparse.Namespace, entries: list[dict]) -> str:
    mixed = getattr(args, "mixed", None)
    if mixed:
        return f"**Mixed provenance (--allow-mixed): {mixed}. Paired differences compare code and paths too.**"
    p = entries[0].get("provenance") if entries else None
    if p is None:
        note = LAB_PRESETS.get(args.lab or "", {}).get("provenance_note")
        return (
            "Provenance: not recorded (runs made before runs recorded their commit); pairing them assumes one "
            "code version" + (f"; {note}." if note else ".")
        )
    return f"Provenance: every run on commit {p['commit']}, compute path {json.dumps(p['compute'], sort_keys=True)}."


def _timing_lines(args: argparse.Namespace, entries: list[dict]) -> list[str]:
    """A pre-registered block's times: when its registration was committed, and when its first and
    last runs started (UTC, from the runs' provenance), so that runs after the registration can be
    read from the records themselves."""
    reg = getattr(args, "registration", None)
    if reg is None:
        return []
    starts = sorted(e["provenance"]["started"] for e in entries if (e.get("provenance") or {}).get("started"))
    runs = (
        f"its first run started {starts[0]} and its last {starts[-1]} ({len(starts)} of {len(entries)} runs "
        "record a start)"
        if starts
        else "its runs record no start time (run before start times were recorded)"
    )
    return [f"Registration: {Path(args.config).name} committed at {reg[0][:12]} on {reg[1]}; {runs}.", ""]


def _partial_line(args: argparse.Namespace, entries: list[dict]) -> list[str]:
    """A block still running says so first: its intervals are over the seeds in so far."""
    done = completeness(entries, args.methods, args.seeds)
    if done["finished"] >= done["planned"]:
        return []
    return [
        f"**Partial block: {done['finished']} of {done['planned']} runs finished; seeds with every method in: "
        f"{done['complete_seeds'] or 'none yet'}. Every figure below is over the runs finished so far.**",
        "",
    ]


def _sentence(text: str) -> str:
    """``text`` with its first letter capitalized (the labels are kept lower-case for the JSON)."""
    return text[:1].upper() + text[1:]


def reach_lines(
    curves: dict[str, np.ndarray],
    levels: Sequence[float],
    per_iter: int,
    iterations: int,
    spent: dict[str, np.ndarray | None] | None = None,
) -> list[str]:
    """Episodes to reach each train success level: a row per ``curves`` label (its ``[seeds, iterations]``
    curves); ``spent``: per label, the seed-mean episodes sampled by each iteration, where recorded."""
    lines = [
        "",
        "## Episodes to reach a train success level",
        "",
        "First iteration at which the seed-mean train success (2-iteration running mean) reaches the level, "
        f"in episodes ({per_iter} per iteration); '-': not within {iterations} iterations.",
        "",
        "| method | " + " | ".join(f">= {lv:.2f}" for lv in levels) + " |",
        "|---" * (len(levels) + 1) + "|",
    ]
    for label, curve in curves.items():
        lines.append(
            f"| {label} | " + " | ".join(episodes_to_reach(curve, levels, per_iter, (spent or {}).get(label))) + " |"
        )
    return lines


def report(args: argparse.Namespace, entries: list[dict], wall_s: float) -> str:
    methods = [m for m in args.methods if any(e["method"] == m for e in entries)]
    by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in methods}
    first = by[methods[0]][0]
    eval_its = [e["iteration"] for e in first["eval"]]
    shared = len({tuple(e["iteration"] for e in r["eval"]) for rs in by.values() for r in rs}) == 1
    eval_cols = [f"eval it {i}" for i in eval_its] if shared else ["eval at start", "final eval"]
    per_iter = first["config"].get("num_groups", 0) * first["config"].get("group_size", 0)
    title = f"The credit-trap lab, {args.lab} block" if args.lab else "ProGPO vs its base in the credit trap"
    command = f" --lab {args.lab}" if args.lab else " --pilot" if args.pilot else ""
    lines = [
        f"# {title} (`{Path(args.config).name}`, state key `{args.state_key}`)",
        "",
        f"`python -m trainers.lab{command}`: seeds {args.seeds}, "
        f"{args.iterations} iterations x {per_iter} episodes; eval on {first['eval'][0]['eval/episodes']} held-out "
        "episodes at fixed seeds. Mean over seeds +- the half-width of the 95% t interval.",
        "",
        _provenance_line(args, entries),
        "",
        *_timing_lines(args, entries),
        *_partial_line(args, entries),
        *verdict_lines(args, by),
    ]
    if withheld(args, entries):
        return "\n".join(lines + withheld_lines(methods, by) + _compute_lines(args, entries, wall_s)) + "\n"
    lines += [
        "| method | seeds | " + " | ".join(eval_cols) + " | train, last 5 | all-failed it 1 | "
        "all-failed, last 5 | coverage, last 5 | repeats, last 5 |",
        "|---" * (len(eval_cols) + 7) + "|",
    ]
    for m in methods:
        n = len(by[m])
        ev = series(by[m], "eval", "eval/success")
        if not shared:  # runs ended by a budget at different iterations: their first and last evaluations
            ev = np.hstack(
                [
                    per_run(by[m], "eval", "eval/success", slice(0, 1)),
                    per_run(by[m], "eval", "eval/success", slice(-1, None)),
                ]
            )
        cells = [str(n)] + [_cell(a, h, n) for a, h in zip(*mean_ci(ev))]
        for key, cols in (
            ("train/success", slice(-5, None)),
            (_first_collection_key(by[m]), slice(0, 1)),
            ("all_failed_fraction", slice(-5, None)),
            ("coverage_rate", slice(-5, None)),
            ("repeat_rate", slice(-5, None)),
        ):
            a, h = mean_ci(per_run(by[m], "train", key, cols))
            cells.append(_cell(a[0], h[0], n))
        lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    curves = {labelled(m): series(by[m], "train", "train/success") for m in methods}
    lines += reach_lines(curves, args.levels, per_iter, args.iterations, {labelled(m): _spent(by[m]) for m in methods})
    lines += _task_type_lines(methods, by)
    if args.lab:
        lines += lab_report(args, by, validity(by, args.criteria, LAB_PRESETS[args.lab].get("pilot_seeds", ())))
    else:
        lines += ["", "## Final held-out success, paired by seed", ""]
    lines += [] if args.lab else _paired_lines(args, by)
    return "\n".join(lines + _compute_lines(args, entries, wall_s)) + "\n"


def _first_collection_key(runs: list[dict]) -> str:
    """The field of an iteration's first collection's all-failed share (a dynamic run's kept groups
    are never all-failed), or the iteration's own where the entries do not carry it."""
    have = all(r["train"] and r["train"][0].get("first_collection") is not None for r in runs)
    return "first_collection" if have else "all_failed_fraction"


def _spent(runs: list[dict]) -> np.ndarray | None:
    """The seed-mean episodes sampled by each iteration, where the runs record them and some
    iteration spent other than its groups (dynamic sampling); else ``None``."""
    spent = series(runs, "train", "sampled_episodes")
    if spent.size == 0 or np.isnan(spent).all() or not any(r["train"][0].get("gen_batches") for r in runs):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(spent, axis=0)


def _compute_lines(args: argparse.Namespace, entries: list[dict], wall_s: float) -> list[str]:
    hours = sum(e.get("train_core_s", 0.0) for e in entries) / 3600
    return [
        "",
        f"Compute: {hours:.1f} core-hours of warm start + training over {len(entries)} runs (each run one "
        "core: metrics' time/init_s + time/iteration_s); the three evaluations of a run add 10-50% to its wall "
        "time."
        + ("" if args.report else f" Wall time of this invocation: {wall_s / 60:.1f} min on {args.workers} worker(s)."),
    ]


def _task_type_lines(methods: list[str], by: dict[str, list[dict]]) -> list[str]:
    """The final held-out success by task type, per method (none where the env has no task types)."""
    types = sorted({t for m in methods for e in by[m] for t in e["eval"][-1]["by_task_type"]})
    if not types:
        return []
    lines = [
        "",
        "## Final held-out success by task type (mean over seeds)",
        "",
        "| method | " + " | ".join(types) + " |",
        "|---" * (len(types) + 1) + "|",
    ]
    for m in methods:
        cells = [np.mean([e["eval"][-1]["by_task_type"].get(t, np.nan) for e in by[m]]) for t in types]
        lines.append(f"| {labelled(m)} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    return lines


def _paired_lines(args: argparse.Namespace, by: dict[str, list[dict]]) -> list[str]:
    """Each comparison pair's final held-out difference, paired by seed (and the MDE for a pilot)."""
    lines: list[str] = []
    for a, b in PAIRS:
        if a in by and b in by:
            seeds = sorted({e["seed"] for e in by[a]} & {e["seed"] for e in by[b]})
            if not seeds:
                continue
            fa = {e["seed"]: e["eval"][-1]["eval/success"] for e in by[a]}
            fb = {e["seed"]: e["eval"][-1]["eval/success"] for e in by[b]}
            d = np.array([fa[s] - fb[s] for s in seeds])
            mm, hh = mean_ci(d[:, None])
            spread = f"+- {hh[0]:.3f} over {len(seeds)} seeds" if len(seeds) > 1 else "over 1 seed (no interval)"
            line = f"- {a} - {b}: {mm[0]:+.3f} {spread} (" + ", ".join(f"{x:+.3f}" for x in d) + ")"
            if args.pilot and d.size > 1:
                line += f"; minimum detectable difference at 80% power with {args.planned_seeds} seeds: {mde_80(d, args.planned_seeds):.3f}"
            lines.append(line)
    return lines


def _diff_cell(p: dict | None) -> str:
    if p is None:
        return "-"
    if len(p["seeds"]) < 2:
        return f"{p['mean']:+.3f} (1 seed)"
    return f"{p['mean']:+.3f} [{p['lo']:+.3f}, {p['hi']:+.3f}]"


def _on_off_lines(res: dict, res_auc: dict, preregistered: bool = False) -> list[str]:
    if preregistered:
        head = [
            "",
            "## Primary (pre-registered): ProGPO's term on and off, over its bases",
            "",
            "Final held-out success and AUC, `progpo-X` - `X` paired by seed. **Primary metric:** per seed, the "
            "mean of that seed's final-success differences over the bases; two-sided paired t, alpha 0.05, with "
            "its 95% t interval (the pooled row). The per-base rows and AUC are secondary.",
        ]
    else:
        head = [
            "",
            "## ProGPO's term on and off, over its bases (exploratory: not pre-registered)",
            "",
            "Final held-out success and AUC, `progpo-X` - `X` paired by seed. Pooled: per seed, the mean of that "
            "seed's differences over the bases, then the 95% t interval over seeds. This contrast was chosen after "
            "the pre-registered comparisons against gigpo; read it as a hypothesis for a confirmatory run, and "
            "with the lab's label.",
        ]
    lines = [
        *head,
        "",
        "| on | off | seeds | final: on - off | paired t p | AUC: on - off | paired t p |",
        "|---|---|---|---|---|---|---|",
    ]
    adjusted = holm([r["p"] for r in res["pairs"]])  # the per-base contrasts as one family of secondaries
    for r, ra, h in zip(res["pairs"], res_auc["pairs"], adjusted):
        holm_cell = f" (Holm {h:.3f})" if preregistered else ""
        lines.append(
            f"| {r['on']} | {r['off']} | {len(r['diff']['seeds'])} | {_diff_cell(r['diff'])} | {r['p']:.3f}"
            f"{holm_cell} | {_diff_cell(ra['diff'])} | {ra['p']:.3f} |"
        )
    if res["pooled"]:
        pl, pa = res["pooled"], res_auc["pooled"]
        lines.append(
            f"| **pooled over the {len(res['pairs'])} bases** | | {len(pl['seeds'])} | "
            f"{_diff_cell(pl)} | {pl['p']:.3f} | {_diff_cell(pa)} | {pa['p']:.3f} |"
        )
    return lines


def _multiplicity_lines(family: list[dict], title: str) -> list[str]:
    lines = [
        "",
        f"### {title}: {len(family)} comparisons against gigpo (final held-out success)",
        "",
        "| method | seeds | final - gigpo | paired t p | Holm-adjusted p |",
        "|---|---|---|---|---|",
    ]
    for r in family:
        lines.append(
            f"| {labelled(r['method'])} | {r['seeds']} | {_diff_cell(r['diff'])} | {r['p']:.3f} | "
            f"{'**' if r['p_holm'] < 0.05 else ''}{r['p_holm']:.3f}{'**' if r['p_holm'] < 0.05 else ''} |"
        )
    return lines


def _acted_lines(by: dict[str, list[dict]]) -> list[str]:
    """Where each remedy's term acted: the mean over iterations and seeds of its per-iteration share."""
    lines: list[str] = []
    part = acted_by()  # the registries now: a plug-in loaded after import has its column
    keys = [
        k
        for k in acted_keys()
        if any(part[k] in m and k in row for m in by for e in by[m] for row in e.get("acted", []))
    ]
    if keys:
        lines += [
            "",
            "## Where each remedy acted (mean over iterations and seeds)",
            "",
            "Shares of groups or steps a remedy's term changed, and the tree's forks and pruned branches per "
            "iteration; blank: the method has no such term.",
            "",
            "| method | " + " | ".join(keys) + " |",
            "|---" * (len(keys) + 1) + "|",
        ]
        for m in by:
            cells = []
            for k in keys:
                if part[k] not in m:
                    cells.append("")
                    continue
                vals = [
                    np.mean([row[k] for row in e.get("acted", []) if k in row])
                    for e in by[m]
                    if any(k in row for row in e.get("acted", []))
                ]
                cells.append(f"{np.mean(vals):.3f}" if vals else "")
            lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    return lines


def _validity_lines(args: argparse.Namespace, valid: dict | None) -> list[str]:
    """The validity section: the trap, room to move, GiGPO - GRPO discrimination, and the verdict."""
    lines = ["", "## Validity: can this lab tell GiGPO from GRPO?", ""]
    if "validity" in LAB_PRESETS[args.lab]:
        lines.append(f"Read from {LAB_PRESETS[args.lab]['validity']}.")
    elif valid is None:
        lines.append("Not measured: the lab needs gigpo and grpo runs.")
    else:
        d, crit = valid["gigpo_minus_grpo"], valid["criteria"]
        lines += [
            f"- the trap: all-failed fraction at iteration 1 {valid['all_failed_it1']:.3f} "
            f"(needs >= {crit['trap_min']:.2f}): {'met' if valid['checks']['trap'] else 'NOT met'}",
            f"- room to move: GiGPO's held-out success {valid['gigpo_rise']:+.3f} +- {valid['gigpo_rise_half']:.3f} "
            f"from start to end (needs >= {crit['room_min']:+.2f}): {'met' if valid['checks']['room'] else 'NOT met'}",
            f"- discrimination: GiGPO - GRPO final {_diff_cell(d)} over {valid['seeds']} seeds (needs the 95% "
            f"interval above 0 at >= {crit['seeds']} seeds): {'met' if valid['checks']['discrimination'] else 'NOT met'}"
            + (
                f"; these seeds include the pilot seeds {valid['pilot_seeds']}, which chose the setting. On the "
                f"fresh seeds alone: {_diff_cell(valid['gigpo_minus_grpo_fresh'])} over "
                f"{len((valid['gigpo_minus_grpo_fresh'] or {}).get('seeds', []))} seeds"
                if valid.get("pilot_seeds")
                else ""
            ),
            "",
            f"**Verdict: {valid['verdict']}.**"
            + (
                " Every comparison below is read as: this lab cannot discriminate."
                if valid["verdict"] == "cannot discriminate"
                else ""
            ),
        ]
    return lines


def _pure_and_tracks_lines(by: dict[str, list[dict]]) -> list[str]:
    """Final success and AUC per method against each base, pure RL and the labelled tracks apart."""
    lines: list[str] = []
    pure = [m for m in by if m not in LABELS]
    tracks = [m for m in by if m in LABELS]
    head = "| method | seeds | final | AUC | " + " | ".join(f"final - {b} | AUC - {b}" for b in LAB_BASES) + " |"
    for title, methods in (("Pure RL", pure), ("Labelled tracks (not ranked with pure RL)", tracks)):
        if not methods:
            continue
        lines += [
            "",
            f"## {title}: final held-out success and AUC, paired by seed (95% t intervals)",
            "",
            head,
            "|---" * (4 + 2 * len(LAB_BASES)) + "|",
        ]
        for m in methods:
            fin, fh = mean_ci(np.array([[final_success(e)] for e in by[m]]))
            au, ah = mean_ci(np.array([[auc(e)] for e in by[m]]))
            n = len(by[m])
            cells = [str(n), _cell(fin[0], fh[0], n), _cell(au[0], ah[0], n)]
            for b in LAB_BASES:
                cells += [
                    "" if m == b else _diff_cell(paired(by, m, b, final_success)),
                    "" if m == b else _diff_cell(paired(by, m, b, auc)),
                ]
            lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    return lines


def lab_report(args: argparse.Namespace, by: dict[str, list[dict]], valid: dict | None) -> list[str]:
    """The lab's sections: validity, every method against the baselines (final success and AUC,
    pure RL and labelled tracks apart), and where each remedy acted."""
    lines = _validity_lines(args, valid)
    missing = [labelled(m) for m in dict.fromkeys([*LAB_PRESETS[args.lab]["methods"], *args.methods]) if m not in by]
    if missing:
        lines += ["", f"Not run yet (no finished seed): {', '.join(missing)}."]
    lines += _pure_and_tracks_lines(by)
    fams = families(by)
    if fams and any(fams.values()):
        lines += [
            "",
            "## Many comparisons at once (primary metric)",
            "",
            "The intervals above hold one comparison at a time. Each family below is tested together: "
            "two-sided paired t-tests against gigpo, Holm-adjusted; bold: adjusted p < 0.05. GiGPO - GRPO "
            "is the validity test, judged alone above."
            + (f" **{_sentence(EXPLORATORY['multiplicity'])}.**" if LAB_PRESETS[args.lab].get("exploratory") else "")
            + (f" **{_sentence(NOT_REGISTERED)}.**" if LAB_PRESETS[args.lab].get("preregistered") else ""),
        ]
        for title, fam in (("Pure RL remedies", fams["pure"]), ("Labelled tracks", fams["labelled"])):
            lines += _multiplicity_lines(fam, title) if fam else []
    on_off = progpo_on_off(by)
    test = registered_primary(args.lab, args.config)
    if on_off and test is not None and not primary_verdict(by, test)["complete"]:
        lines += [
            "",
            "## Primary (pre-registered): ProGPO's term on and off, over its bases",
            "",
            "Withheld until every registered seed is in: the on - off contrasts are the pre-registered tests, "
            "and an interim look at them would spend the test's alpha.",
        ]
    elif on_off and (on_off_auc := progpo_on_off(by, auc)) is not None:  # the same pairs as on_off's
        lines += _on_off_lines(on_off, on_off_auc, test is not None)
    return lines + _acted_lines(by)
