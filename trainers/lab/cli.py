"""``python -m trainers.lab``: the credit-trap lab's command line (``benchmarks/progpo_effect.py`` is
an alias of it, kept for old scripts).

    python -m trainers.lab --lab alfworld        # every remedy on the pre-registered setting
    python -m trainers.lab --lab confirm         # the pre-registered confirmatory experiment
    python -m trainers.lab --lab tree            # its tree contrast's registered replication
    python -m trainers.lab --pilot               # 2 seeds x the main pair: the MDE
    python -m trainers.lab --rerun 0 progpo-gigpo --iterations 2   # check a recorded run
    python -m trainers.lab --report              # the table of the runs finished so far
    python -m trainers.lab --lab alfworld --compare-with DIR   # which runs another copy reproduces

The steps: :func:`parse` (flags and the ``--lab`` preset's defaults), :func:`collect` (run or
read every (method, seed) run, with the checks that make them pairable), :func:`write` (the table,
the JSON record and the plot).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainers.lab.analysis import (
    auc,
    completeness,
    families,
    primary_verdict,
    progpo_on_off,
    registered_primary,
    validity,
    validity_criteria,
)
from trainers.lab.children import stops_forwarded
from trainers.lab.compare import compare_blocks
from trainers.lab.methods import (
    DEFAULT_METHODS,
    EXPLORATORY,
    LAB_BASES,
    LAB_PRESETS,
    NOT_REGISTERED,
    method_axes,
    run_name,
)
from trainers.lab.plots import plot, plot_per_seed
from trainers.lab.registered import withheld
from trainers.lab.report import report
from trainers.lab.runs import (
    ROOT,
    LabError,
    config_axes_note,
    load_run,
    panel_problem,
    preregistered_commit_problem,
    provenance_of,
    provenance_problem,
    registration,
    rerun,
    run_on_ray,
    run_one,
    run_record,
)
from trainers.lab.verify import verify_at
from trainers.plugins import load_plugins
from trainers.runs.run_files import check_can_make
from wrappers.errors import UserError

__all__ = ["main", "parse"]

DESCRIPTION = "The credit-trap lab: remedies side by side in the credit trap, seed by seed, resumable, re-runnable."


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m trainers.lab", description=DESCRIPTION)
    _add_block_flags(ap)
    _add_execution_flags(ap)
    _add_report_flags(ap)
    _add_check_flags(ap)
    _add_path_flags(ap)
    return ap


def _add_block_flags(ap: argparse.ArgumentParser) -> None:
    """The block: its preset or config, methods, plug-ins, seeds, iterations and state identity."""
    ap.add_argument(
        "--lab",
        choices=list(LAB_PRESETS),
        default=None,
        help="the credit-trap lab: 'alfworld' (configs/credit_lab.yaml, every remedy, 30 iterations, "
        "-> benchmarks/results/credit_lab) or 'webshop' (the WebShop CPU demo's setting: gigpo, "
        "progpo-gigpo, planpo, 40 iterations) or 'confirm' (the pre-registered confirmatory "
        "experiment, configs/credit_lab_confirm.yaml: ProGPO's term on and off over four bases, "
        "seeds 8-23) or 'tree' (the registered replication of the confirm block's tree contrast, "
        "configs/credit_lab_tree.yaml: progpo-gigpo+tree and gigpo+tree, seeds 24-51); adds the validity verdict, every method against gigpo and progpo-gigpo, AUC and "
        "where each remedy acted; writes credit_lab.json",
    )
    ap.add_argument(
        "--config",
        type=Path,
        default=None,
        help="the trainer config every run starts from (default: the credit-trap preset, or the --lab's)",
    )
    ap.add_argument(
        "--methods",
        nargs="+",
        default=None,
        help="methods to run (default: the comparison's six: gigpo, progpo-gigpo, grpo, progpo-grpo, "
        "always, shuffled): any registered estimator (a plug-in's too) or progpo-<estimator>, with at "
        "most one suffix +tree, +tree-random, +dynamic, +hindsight, +privileged (the last two labelled: not "
        "pure RL), or a ProGPO control (always, shuffled)",
    )
    ap.add_argument(
        "--plugin",
        action="append",
        default=[],
        metavar="MODULE_OR_FILE",
        help="a module or .py file that registers estimators, imported here and by every run (repeat for several)",
    )
    ap.add_argument(
        "--seeds",
        type=int,
        nargs="+",
        default=None,
        help="seeds: each gives every method the same warm start and task schedule (default 0-7; the "
        "--lab's where it names them: confirm 8-23, tree 24-51)",
    )
    ap.add_argument("--iterations", type=int, default=None, help="RL iterations per run (default 20; the --lab's)")
    ap.add_argument(
        "--budget-episodes",
        type=int,
        default=None,
        metavar="N",
        help="end each run once it has sampled N episodes (dropped ones included), so that every arm "
        "spends the same budget within one generation batch; --iterations stays a cap (default: the "
        "--lab's, or its config's budget_episodes; none: iterations alone)",
    )
    ap.add_argument(
        "--state-key",
        default="canonical",
        choices=("canonical", "exact"),
        help="state identity of first-visit coverage (trainer's --state-key)",
    )


def _add_execution_flags(ap: argparse.ArgumentParser) -> None:
    """Where the runs run: local worker processes or Ray tasks."""
    ap.add_argument("--workers", type=int, default=2, help="runs at a time, one torch thread each")
    ap.add_argument(
        "--ray",
        nargs="?",
        const="",
        default=None,
        metavar="ADDRESS",
        help="run the runs as Ray tasks (one CPU each, resumable as local runs): on the cluster at "
        "ADDRESS (host:port), or on a local Ray instance without one; the nodes must see this "
        "checkout, --out and --work at the same paths. Without it: --workers local processes",
    )


def _add_report_flags(ap: argparse.ArgumentParser) -> None:
    """What the report computes and which runs it may pair."""
    ap.add_argument(
        "--levels",
        type=float,
        nargs="+",
        default=[0.1, 0.2, 0.3],
        help="train-success levels for the episodes-to-reach table",
    )
    ap.add_argument("--pilot", action="store_true", help="seeds 0-1, the main pair: print the MDE at 80%% power")
    ap.add_argument("--planned-seeds", type=int, default=8, help="seeds the MDE is computed for (--pilot)")
    ap.add_argument(
        "--report",
        action="store_true",
        help="write the table, plot and JSON from the finished runs alone (start nothing)",
    )
    ap.add_argument(
        "--allow-mixed",
        action="store_true",
        help="report runs made on different commits or compute paths side by side (labelled in the "
        "table); without it the lab refuses to pair them",
    )


def _add_check_flags(ap: argparse.ArgumentParser) -> None:
    """Re-running recorded runs: one run, the whole block at a commit, or against another copy."""
    ap.add_argument("--rerun", nargs=2, metavar=("SEED", "METHOD"), help="re-run a recorded run's first --iterations")
    ap.add_argument(
        "--verify-at",
        metavar="COMMIT",
        default=None,
        help="put the recorded block on one commit: re-run every recorded run's first "
        "--verify-iterations at COMMIT (a worktree of it) and record whether each is bit-exact "
        "there (verified.json beside the block's record; resumable; --workers at a time)",
    )
    ap.add_argument("--verify-iterations", type=int, default=2, help="iterations re-run by --verify-at")
    compare = (
        "compare every finished run of the block with the same run kept under DIR (another copy of the block, or its "
        "runs/): every numeric field of every record, bit-exact or the largest relative difference; prints a row per "
        "run and the count (start nothing)"
    )
    ap.add_argument("--compare-with", type=Path, default=None, metavar="DIR", help=compare)


def _add_path_flags(ap: argparse.ArgumentParser) -> None:
    """Where the results and the run dirs go."""
    ap.add_argument(
        "--out",
        type=Path,
        default=None,
        help="table.md, curves.png, progpo_effect.json (credit_lab.json) and the finished runs (runs/); "
        "default benchmarks/results/progpo_effect, or the --lab's",
    )
    ap.add_argument(
        "--work", type=Path, default=None, help="run dirs with checkpoints (default ~/.cache/progpo/progpo_effect)"
    )


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The flags, with the ``--lab`` preset's settings where they are not given; paths resolved."""
    ap = build_parser()
    args = ap.parse_args(argv)
    args.plugin = [str(Path(p).resolve()) if p.endswith(".py") else p for p in args.plugin]
    try:
        load_plugins(args.plugin)
        for method in args.methods or ():
            method_axes(method)  # an unknown one: its one line, below
    except ValueError as err:
        ap.error(str(err))
    preset = LAB_PRESETS.get(args.lab, {})
    if preset.get("preregistered") and "methods" not in preset:
        ap.error(f"--lab {args.lab}: its registration {preset['config']} is not in this checkout")
    args.config = args.config or ROOT / preset.get("config", "configs/alfworld_trap.yaml")
    args.methods = args.methods or list(preset.get("methods", DEFAULT_METHODS))
    args.seeds = args.seeds if args.seeds is not None else list(preset.get("seeds", range(8)))
    args.iterations = args.iterations or preset.get("iterations", 20)
    args.budget_episodes = args.budget_episodes or preset.get("budget_episodes")
    if args.budget_episodes is not None and args.budget_episodes < 1:
        ap.error(f"--budget-episodes must be >= 1, got {args.budget_episodes}")
    args.out = args.out or ROOT / preset.get("out", "benchmarks/results/progpo_effect")
    args.json_name = "credit_lab.json" if args.lab else "progpo_effect.json"
    args.config = args.config.resolve()
    args.out = args.out.resolve()
    args.work = (args.work or Path.home() / ".cache" / "progpo" / "progpo_effect").resolve() / args.out.name
    args.runs = args.out / "runs"  # finished runs; the pilot's are the comparison's seeds 0-1 of the main pair
    # the validity criteria: pre-registered in the block's config, or in the config it names
    args.criteria = validity_criteria(ROOT / preset["validity_config"] if "validity_config" in preset else args.config)
    if args.pilot:
        args.out = args.out.with_name(args.out.name + "_pilot")
        args.seeds = args.seeds if argv and "--seeds" in argv else [0, 1]
        args.methods = args.methods if argv and "--methods" in argv else list(LAB_BASES)
    return args


def collect(args: argparse.Namespace) -> list[dict]:
    """Every (method, seed) run of ``args``, run (or resumed) unless ``--report``, as JSON entries;
    :class:`LabError` where they cannot be paired."""
    jobs = [(m, s) for s in args.seeds for m in args.methods]
    if args.report:  # the comparison so far: finished runs only
        jobs = [(m, s) for m, s in jobs if (args.runs / run_name(m, s, args.state_key) / "summary.md").exists()]
        if not jobs:
            raise LabError(f"no finished run of {', '.join(args.methods)} under {args.runs}")
    else:
        note = config_axes_note(args.config)
        if note:
            print(f"note: {note}", file=sys.stderr)
    if args.ray is not None and not args.report:
        recs = dict(zip(jobs, run_on_ray(args, jobs)))
    else:
        with ThreadPoolExecutor(max_workers=args.workers) as pool:
            recs = dict(zip(jobs, pool.map(lambda j: run_one(args, j[0], j[1]), jobs)))
    entries = []
    for (m, s), records in recs.items():
        kept = args.runs / run_name(m, s, args.state_key)
        _, config = load_run(kept, m, s)
        entries.append({**run_record(m, s, args.state_key, records, config), "provenance": provenance_of(kept)})
    problem = panel_problem(entries)
    if problem:
        raise LabError(problem)
    args.mixed = provenance_problem(entries)
    if LAB_PRESETS.get(args.lab or "", {}).get("preregistered"):
        args.registration = registration(args.config)
        if not args.mixed:
            args.mixed = preregistered_commit_problem(args.config, entries)
    if args.mixed and not args.allow_mixed:
        raise LabError(
            f"{args.mixed}: a paired difference would compare them too; rerun them on one commit, or "
            "pass --allow-mixed (the table then says so)"
        )
    return entries


def lab_record(args: argparse.Namespace, entries: list[dict]) -> dict:
    """The lab's part of the JSON record: validity, the test families, ProGPO on and off, the pilot."""
    by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in args.methods}
    done = {m: r for m, r in by.items() if r}
    post_hoc = EXPLORATORY if LAB_PRESETS[args.lab].get("exploratory") else {}
    pilot = args.out / "pilot.json"  # the settings tried before the pre-registration
    test = registered_primary(args.lab, args.config)
    on_off: dict[str, Any] = {"final": progpo_on_off(done), "auc": progpo_on_off(done, auc)}
    if test is None:  # a contrast no config registered is exploratory wherever it is read
        on_off = {"exploratory": post_hoc.get("progpo_on_off", EXPLORATORY["progpo_on_off"]), **on_off}
    else:  # withheld until every registered seed is in: no interim look at the tests
        verdict = primary_verdict(done, test)
        on_off = {
            "preregistered": f"primary of {args.config.name}: the pooled final contrast; the rest secondary",
            "verdict": verdict,
            **(on_off if verdict["complete"] else {"final": None, "auc": None}),
        }
    reg = getattr(args, "registration", None)
    return {
        **({"registration": {"commit": reg[0], "committed": reg[1]}} if reg else {}),
        "completeness": completeness(entries, args.methods, args.seeds),
        "validity": validity(done, args.criteria, LAB_PRESETS[args.lab].get("pilot_seeds", ())),
        "multiplicity": {
            "exploratory": post_hoc.get("multiplicity"),
            "families": families(done),
            **({"not_registered": NOT_REGISTERED} if test is not None else {}),
        },
        "progpo_on_off": on_off,
        "pilot": json.loads(pilot.read_text()) if pilot.exists() else None,
    }


def write(args: argparse.Namespace, entries: list[dict], wall_s: float) -> None:
    """The table (printed and ``table.md``), the JSON record and ``curves.png`` under ``--out``."""
    text = report(args, entries, wall_s)
    print(text)
    (args.out / "table.md").write_text(text)
    record = {
        "config": str(args.config.relative_to(ROOT)) if args.config.is_relative_to(ROOT) else str(args.config),
        "runs": entries,
    }
    if args.lab:
        record.update(lab_record(args, entries))
    if withheld(args, entries):  # a partial registered block: no outcome, in the JSON or a plot
        record["runs"] = [{k: v for k, v in e.items() if k not in ("train", "eval", "acted")} for e in entries]
        record.pop("progpo_on_off", None)
        record.pop("validity", None)
        record.pop("multiplicity", None)
    (args.out / args.json_name).write_text(json.dumps(record, indent=1))
    written = [args.out / "table.md", args.out / args.json_name]
    if not withheld(args, entries):
        plot(args, entries, args.out / "curves.png")
        written.append(args.out / "curves.png")
        if plot_per_seed(args, entries, args.out / "per_seed.png"):
            written.append(args.out / "per_seed.png")
    print(f"-> {', '.join(str(p) for p in written)}")


def check_out_folder(out: Path) -> None:
    """``--out`` as a folder the table, plot and JSON can be written to (it may not exist yet):
    :class:`LabError` for a file, a path under a file or a folder that is not writable."""
    try:
        check_can_make(out, f"--out {out}")
    except UserError as err:
        raise LabError(str(err)) from None


def main(argv: list[str] | None = None) -> int:
    """``python -m trainers.lab``; a SIGTERM stops the runs it started, then the lab (143)."""
    with stops_forwarded():
        return _main(argv)


def _main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.rerun:
        seed_text, method = args.rerun
        try:
            if not seed_text.isdigit():
                raise ValueError(f"SEED must be a whole number, got {seed_text!r}")
            method_axes(method)
        except ValueError as err:
            print(f"error: --rerun SEED METHOD: {err}", file=sys.stderr)
            return 2
        return rerun(args, int(seed_text), method)
    if args.compare_with is not None:
        return compare_blocks(args, args.compare_with.resolve())
    if args.verify_at:
        try:
            return verify_at(args, args.verify_at, args.verify_iterations)
        except LabError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
    t0 = time.perf_counter()
    try:
        if args.report:  # nothing runs: the folder must take the table before anything is read
            check_out_folder(args.out)
        else:
            args.out.mkdir(parents=True, exist_ok=True)
        entries = collect(args)
        check_out_folder(args.out)
        args.out.mkdir(parents=True, exist_ok=True)  # made once there is something to write
    except (LabError, RuntimeError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    write(args, entries, time.perf_counter() - t0)
    return 0
