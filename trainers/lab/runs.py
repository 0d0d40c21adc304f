"""The lab's runs: each (method, seed) a ``python -m trainers.progpo`` process, resumable, kept
small once finished, read back with every check a report needs, and re-run bit for bit.

:func:`run_one` runs (or resumes, or reuses) one run; :func:`run_on_ray` runs them as Ray tasks;
:func:`load_run` reads a finished run and refuses one that is half-written or not what its method
names (:class:`LabError`); :func:`provenance_of`, :func:`provenance_problem`,
:func:`preregistered_commit_problem` and :func:`panel_problem` say when runs cannot be paired;
:func:`rerun` and :func:`strict_compare` check a recorded run against a fresh one.
"""

# Over 500 lines: a run's whole life in the lab (start, resume, read back, the checks that refuse to
# pair it, and its bit-exact re-run) shares the run dir's layout and provenance fields.
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from trainers.config import EARLIER_VALUES, ConfigError, flatten_sections, upgrade_names
from trainers.lab.children import raise_if_stopping, run_child
from trainers.lab.methods import AXES, TRAIN_KEYS, acted_keys, axes_of, method_args, run_name
from trainers.runs.metrics import TIMING_KEYS, MetricsFileError, read_metrics
from trainers.runs.provenance import read_provenance, run_times
from trainers.strict_yaml import StrictYAMLError, load_strict

__all__ = [
    "LabError",
    "ROOT",
    "axes_problem",
    "config_axes_note",
    "load_run",
    "panel_problem",
    "preregistered_commit_problem",
    "provenance_of",
    "provenance_problem",
    "registration",
    "rerun",
    "run_on_ray",
    "run_one",
    "rerun_records",
    "run_record",
    "run_trainer",
    "strict_compare",
    "trainer_args",
]

#: the checkout the runs run in (its configs, and ``python -m trainers.progpo`` from its root)
ROOT = Path(__file__).resolve().parents[2]


def trainer_args(args: argparse.Namespace, method: str, seed: int, iterations: int, out_dir: Path) -> list[str]:
    return [
        "--config",
        str(args.config),
        "--seed",
        str(seed),
        "--iterations",
        str(iterations),
        "--state-key",
        args.state_key,
        "--eval-every",
        str(max(iterations // 2, 1)),
        *"--save-every 1 --no-progress-bars --no-tensorboard --output-dir".split(),
        str(out_dir),
        *method_args(method),
        *(["--budget-episodes", str(args.budget_episodes)] if getattr(args, "budget_episodes", None) else []),
        *(arg for plugin in getattr(args, "plugin", None) or () for arg in ("--plugin", plugin)),
    ]


def run_trainer(cmd: list[str], log: Path, root: Path = ROOT) -> None:
    """``python -m trainers.progpo CMD`` with the code of the checkout at ``root``, one thread, its
    output appended to ``log``; RuntimeError when it fails."""
    env = dict(
        os.environ,
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
        PYTHONPATH=os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    )
    raise_if_stopping()  # a queued run of a stopped lab leaves no trace
    with open(log, "a") as fh:
        rc = run_child(
            [sys.executable, "-m", "trainers.progpo", *cmd], cwd=root, env=env, stdout=fh, stderr=subprocess.STDOUT
        )
    if rc != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({rc}); see {log}")


def run_one(args: argparse.Namespace, method: str, seed: int) -> list[dict]:
    """One (method, seed) run: reused when finished, resumed from its checkpoint when started."""
    name = run_name(method, seed, args.state_key)
    kept = args.runs / name
    if (kept / "summary.md").exists():
        return load_run(kept, method, seed)[0]
    work = args.work / name
    work.mkdir(parents=True, exist_ok=True)
    cmd = trainer_args(args, method, seed, args.iterations, work)
    resume = (work / "checkpoints" / "latest").exists()
    t0 = time.perf_counter()
    run_trainer(cmd + (["--resume"] if resume else ["--overwrite"]), work.parent / f"{name}.log")
    kept.mkdir(parents=True, exist_ok=True)
    for f in ("metrics.jsonl", "config.yaml", "summary.md", "provenance.jsonl"):
        if (work / f).exists():
            (kept / f).write_bytes((work / f).read_bytes())
    print(f"  {name}: {time.perf_counter() - t0:6.0f} s{' (resumed)' if resume else ''}", flush=True)
    return load_run(kept, method, seed)[0]


class LabError(Exception):
    """A lab input that cannot be used (a run half-written or not what its method names, a config
    that sets a method's axis); the message names it and says what to do."""


def config_axes_note(config_path: Path) -> str | None:
    """What the lab's ``--config`` sets that the methods set themselves (``None``: nothing), or why
    it cannot be read. Every method passes each axis as a flag (:func:`trainers.lab.methods.method_args`),
    so such a value never reaches a run: the note says so, and a trainer preset (which names the
    estimator it trains with) serves as the lab's config as it is. A config that cannot be read
    is a :class:`LabError`."""
    import yaml  # the [train] extra

    try:
        data = load_strict(Path(config_path).read_text(encoding="utf-8")[: 1 << 20]) or {}
    except StrictYAMLError as err:
        raise LabError(f"{config_path}: {err}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise LabError(f"{config_path} cannot be read ({type(err).__name__})") from None
    if not isinstance(data, dict):
        raise LabError(f"{config_path} is not a mapping of config fields")
    try:
        data = upgrade_names(flatten_sections(data, str(config_path), warn=False), warn=False)
    except ConfigError as err:
        raise LabError(str(err)) from None
    set_here = {k: data[k] for k in AXES if k in data and data[k] != AXES[k]}
    if not set_here:
        return None
    said = ", ".join(f"{k}: {v}" for k, v in set_here.items())
    return (
        f"{config_path} sets {said}; each method sets the estimator, rollout, tree scorer, teacher and ProGPO "
        "controls itself (--methods), so the config's value is not used by any run"
    )


def axes_problem(method: str, config: dict) -> str | None:
    """How a run's own config differs from what ``method`` names (``None``: it ran what it says).
    A field missing from an old config had its default then."""
    config = upgrade_names(config, warn=False)
    want = axes_of(method)
    got = {k: config.get(k, AXES[k]) for k in AXES}
    diff = [f"{k} {got[k]!r} (the method names {want[k]!r})" for k in AXES if got[k] != want[k]]
    return "its config has " + ", ".join(diff) if diff else None


def load_run(run_dir: Path, method: str, seed: int) -> tuple[list[dict], dict]:
    """A finished run's records and config, checked: readable, whole (train records and at least
    one evaluation with a success), and what ``method`` names. :class:`LabError` otherwise."""
    import yaml  # the [train] extra

    where = f"run {method} seed {seed} ({run_dir})"
    try:
        config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LabError(f"{where} has no config.yaml: it is half-written; delete the folder to run it again") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise LabError(
            f"{where}: config.yaml cannot be read ({type(err).__name__}); delete the folder to run it again"
        ) from None
    if not isinstance(config, dict):
        raise LabError(f"{where}: config.yaml is not a mapping; delete the folder to run it again")
    try:  # written in sections since they exist; the recorded runs' are flat
        config = flatten_sections(config, str(run_dir / "config.yaml"), warn=False)
    except ConfigError as err:
        raise LabError(f"{where}: {err}; delete the folder to run it again") from None
    try:
        records = read_metrics(run_dir / "metrics.jsonl")
    except FileNotFoundError:
        raise LabError(f"{where} has no metrics.jsonl: it is half-written; delete the folder to run it again") from None
    except (OSError, MetricsFileError) as err:
        raise LabError(f"{where}: metrics.jsonl cannot be read ({err}); delete the folder to run it again") from None
    train = [r for r in records if r.get("kind") == "train" and isinstance(r.get("iteration"), int)]
    evals = [r for r in records if r.get("kind") == "eval" and isinstance(r.get("iteration"), int)]
    iterations = config.get("iterations")
    budget = config.get("budget_episodes") or 0
    spent = train[-1].get("budget/episodes", 0) if train else 0
    ended_on_budget = bool(budget) and isinstance(spent, (int, float)) and spent >= budget
    if not train or (isinstance(iterations, int) and train[-1]["iteration"] < iterations and not ended_on_budget):
        raise LabError(
            f"{where}: metrics.jsonl ends at iteration {train[-1]['iteration'] if train else 0} of "
            f"{iterations} (cut short); delete the folder to run it again"
        )
    bad = [
        r["iteration"]
        for r in evals
        if not isinstance(r.get("eval/success"), (int, float)) or not math.isfinite(float(r["eval/success"]))
    ]
    if not evals or bad:
        what = "no evaluation" if not evals else f"no finite held-out success at iteration(s) {bad}"
        raise LabError(f"{where}: metrics.jsonl has {what}; delete the folder to run it again")
    problem = axes_problem(method, config)
    labels = sorted({str(r["distill"]) for r in records if r.get("distill")})
    if not problem and labels and axes_of(method)["distill"] == "none":
        problem = f"its records say it trained with a teacher ({', '.join(labels)})"
    if problem:
        raise LabError(
            f"{where} is not what '{method}' names: {problem}; it cannot be reported under that name "
            "(delete it, or report it under its own method)"
        )
    return records, config


def panel_problem(entries: list[dict]) -> str | None:
    """Where runs that the lab pairs played different held-out episodes (``None``: nowhere). Every
    comparison pairs the methods of one seed, and a run's evaluations with each other: all of them
    must have played the same panel (runs recorded before panels were logged carry none and pass)."""
    by_seed: dict[int, dict[str, set[str]]] = {}
    for e in entries:
        for ev in e["eval"]:
            if "eval/panel" in ev:
                by_seed.setdefault(e["seed"], {}).setdefault(ev["eval/panel"], set()).add(e["method"])
    for seed, panels in sorted(by_seed.items()):
        if len(panels) > 1:
            said = "; ".join(f"{', '.join(sorted(m))}: panel {p}" for p, m in sorted(panels.items()))
            return (
                f"seed {seed}'s runs played different held-out episodes ({said}); a paired comparison needs one "
                "panel: rerun the odd ones out"
            )
    return None


def provenance_of(run_dir: Path) -> dict | None:
    """Where and when a kept run ran: its commit (``None``: not recorded), compute path, machine and,
    where recorded, its start and end (UTC) and hosts (:func:`trainers.runs.provenance.run_times`); or
    ``None`` for a run from before provenance was recorded. A run resumed on other code or another
    path gives the first difference as its commit (``"mixed: ..."``), which pairs with nothing."""
    every = read_provenance(run_dir)
    recs = [r for r in every if r.get("kind", "provenance") == "provenance"]
    if not recs:
        return None
    commits = {str(r.get("commit")) + ("+dirty" if r.get("dirty") else "") for r in recs}
    paths = {json.dumps(r.get("compute"), sort_keys=True) for r in recs}
    commit = commits.pop() if len(commits) == 1 else "mixed: " + ", ".join(sorted(commits))
    path = json.loads(paths.pop()) if len(paths) == 1 else {"mixed": sorted(paths)}
    return {
        "commit": commit,
        "compute": path,
        "cpu": recs[-1].get("cpu"),
        "versions": recs[-1].get("versions"),
        **run_times(every),
    }


def registration(config: Path) -> tuple[str, str] | None:
    """The commit that added ``config`` (a block's pre-registration) and its commit time in UTC
    (``YYYY-MM-DDTHH:MM:SSZ``), or ``None`` when it is not committed."""
    out = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H %ct", "--", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    rows = [ln.split() for ln in out.stdout.split("\n") if ln.strip()] if out.returncode == 0 else []
    if not rows:
        return None
    sha, when = rows[-1][0], int(rows[-1][1])
    return sha, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))


def preregistered_commit_problem(config: Path, entries: list[dict]) -> str | None:
    """Runs of a pre-registered block made on another commit than the one that added its config, or
    that started before that commit was made (a run that records no start time passes this check:
    the blocks run before start times were recorded)."""
    reg = registration(config)
    if reg is None:
        return f"{config} is not committed: a pre-registered block runs on the commit that adds its config"
    added, when = reg
    off = [f"{e['method']} seed {e['seed']}" for e in entries if (e.get("provenance") or {}).get("commit") != added]
    if off:
        return (
            f"{len(off)} run(s) not made on {added[:12]}, the commit that pre-registered {config.name} "
            f"({', '.join(off[:4])}{' ...' if len(off) > 4 else ''})"
        )
    early = [
        f"{e['method']} seed {e['seed']} ({e['provenance']['started']})"
        for e in entries
        if (e.get("provenance") or {}).get("started") and e["provenance"]["started"] < when
    ]
    if early:
        return (
            f"{len(early)} run(s) started before {config.name} was registered at {when} "
            f"({', '.join(early[:4])}{' ...' if len(early) > 4 else ''})"
        )
    return None


def provenance_problem(entries: list[dict]) -> str | None:
    """Runs that the lab would pair but that ran on other code or another compute path (``None``:
    all alike). Runs from before provenance was recorded are alike only with each other."""
    keys: dict[str, list[str]] = {}
    for e in entries:
        p = e.get("provenance")
        key = "not recorded" if p is None else f"commit {p['commit']}, path {json.dumps(p['compute'], sort_keys=True)}"
        keys.setdefault(key, []).append(f"{e['method']} seed {e['seed']}")
    if len(keys) < 2:
        return None
    said = "; ".join(f"{k}: {', '.join(v[:4])}{' ...' if len(v) > 4 else ''} ({len(v)} runs)" for k, v in keys.items())
    return f"the runs ran on different code or compute paths ({said})"


def run_on_ray(args: argparse.Namespace, jobs: list[tuple[str, int]]) -> list[list[dict]]:
    """The ``(method, seed)`` runs as Ray tasks, one CPU each, on the cluster at ``--ray ADDRESS``
    (``--ray`` alone: a local Ray instance); each is :func:`run_one`, so a task resumes its run dir
    and writes it as a local run would. The nodes must see this checkout and ``--out`` / ``--work``
    at the same paths (one machine, or a shared file system). Results in the order of ``jobs``."""
    try:
        import ray  # the [ray] extra
    except ImportError:
        raise LabError("--ray needs Ray: pip install 'progpo[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(
            address=args.ray or None,
            log_to_driver=False,
            runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}},
        )
    try:
        # this file is no importable module on the workers: its functions travel by value (a module
        # outside sys.modules, or __main__, already does)
        here = sys.modules.get(_run_one_task.__module__)
        if here is not None and here.__name__ != "__main__":
            ray.cloudpickle.register_pickle_by_value(here)
        task = ray.remote(num_cpus=1, max_retries=0)(_run_one_task)
        refs = [task.remote(args, m, s) for m, s in jobs]
        try:
            return ray.get(refs)
        except ray.exceptions.RayTaskError as err:
            cause = err.cause if getattr(err, "cause", None) is not None else err
            raise LabError(str(cause).splitlines()[0] if str(cause) else type(cause).__name__) from None
    finally:
        if started:
            ray.shutdown()


def _run_one_task(args: argparse.Namespace, method: str, seed: int) -> list[dict]:
    """A Ray task's body: :func:`run_one` on the node it landed on."""
    return run_one(args, method, seed)


def run_record(method: str, seed: int, state_key: str, records: list[dict], config: dict) -> dict:
    """The JSON entry of one run."""
    train = [
        {"iteration": r["iteration"], **{k: r.get(src) for k, src in TRAIN_KEYS.items()}, **_sampled(r)}
        for r in records
        if r.get("kind") == "train"
    ]
    # the episodes sampled by each iteration's end (runs that record their budget): the x of the
    # curves and the AUC, so that arms spending differently are drawn on one axis
    spent = {0: 0.0, **{r["iteration"]: r["sampled_episodes"] for r in train if r.get("sampled_episodes") is not None}}
    evals = [
        {
            "iteration": r["iteration"],
            **({"sampled_episodes": spent[r["iteration"]]} if len(spent) > 1 and r["iteration"] in spent else {}),
            "eval/success": r.get("eval/success"),
            "eval/episodes": r.get("eval/episodes"),
            **({"eval/panel": r["eval/panel"]} if "eval/panel" in r else {}),
            "by_task_type": {k.split("/")[-1]: v for k, v in r.items() if k.startswith("eval/success_by_type/")},
        }
        for r in records
        if r.get("kind") == "eval"
    ]
    core_s = sum(float(r.get("time/iteration_s", 0.0)) + float(r.get("time/init_s", 0.0)) for r in records)
    keys = acted_keys()  # the registries now: a plug-in loaded after import has its entry
    acted = [
        {"iteration": r["iteration"], **{k: r[src] for k, src in keys.items() if src in r}}
        for r in records
        if r.get("kind") == "train"
    ]
    return {
        "method": method,
        "seed": seed,
        "state_key": state_key,
        "config": config,
        "train": train,
        "eval": evals,
        "acted": acted,
        "train_core_s": core_s,
    }


def _sampled(record: dict) -> dict:
    """The all-failed share of an iteration's first collection, and a dynamic-sampling run's train
    success and all-failed share over every episode it sampled (what the policy did), not over the
    groups it kept (which have a success by construction)."""
    # the first collection of an iteration: the same in every arm at a seed's first iteration
    first = {"first_collection": record.get("dynamic/first_all_failed_frac", record.get("all_failed_frac"))}
    if "dynamic/sampled_success" not in record:
        return first
    return {
        **first,
        "train/success": record["dynamic/sampled_success"],
        "all_failed_fraction": record.get("dynamic/sampled_all_failed_frac"),
    }


def _record_problem(recorded: dict) -> str | None:
    """What makes a recorded run unusable for --rerun (``None``: nothing)."""
    if not isinstance(recorded.get("config"), dict):
        return "its 'config' is not a mapping"
    train = recorded.get("train")
    if not isinstance(train, list) or not train:
        return "its 'train' is not a non-empty list of iterations"
    for row in train:
        if not isinstance(row, dict) or not isinstance(row.get("iteration"), int):
            return f"a 'train' row is not an iteration record: {str(row)[:80]}"
        missing = [k for k in TRAIN_KEYS if k not in row]
        if missing:
            return f"iteration {row['iteration']} lacks {', '.join(missing)}"
    return None


def rerun_records(config: dict, iterations: int, log: Path, root: Path = ROOT) -> list[dict]:
    """The records of a fresh run of a recorded ``config``'s first ``iterations``, made by the
    trainer of the checkout at ``root`` in a temporary dir (its output to ``log``, started anew);
    RuntimeError when it fails."""
    import yaml  # the [train] extra

    log.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "recorded.yaml"
        # a record from before a config field existed re-runs with that field's earlier meaning
        path.write_text(
            yaml.safe_dump(
                {**EARLIER_VALUES, **upgrade_names(config, warn=False), "output_dir": str(Path(tmp) / "run")}
            )
        )
        run_trainer(
            [
                "--config",
                str(path),
                "--iterations",
                str(iterations),
                *"--no-progress-bars --no-tensorboard --output-dir".split(),
                str(Path(tmp) / "run"),
                "--overwrite",
            ],
            log,
            root=root,
        )
        return read_metrics(Path(tmp) / "run" / "metrics.jsonl")


def rerun(args: argparse.Namespace, seed: int, method: str) -> int:
    """Re-run the first ``--iterations`` iterations of a recorded run; 1 when a train metric differs."""
    runs = []  # the comparison's records, then the pilot's
    for folder in (args.out, args.out.with_name(args.out.name + "_pilot")):
        path = folder / args.json_name
        if path.exists():
            try:
                data = json.loads(path.read_text())
                if not isinstance(data, dict) or not isinstance(data.get("runs"), list):
                    raise TypeError("no list of 'runs'")
                runs += [dict(r, _source=str(path)) for r in data["runs"] if isinstance(r, dict)]
            except (ValueError, TypeError) as err:
                print(f"error: {path} is not a progpo_effect record ({type(err).__name__}: {err})", file=sys.stderr)
                return 2
    recorded = next(
        (
            r
            for r in runs
            if r.get("seed") == seed and r.get("method") == method and r.get("state_key") == args.state_key
        ),
        None,
    )
    if recorded is None:
        print(
            f"error: no recorded run {method} seed {seed} (state key {args.state_key}) in {args.out}", file=sys.stderr
        )
        return 2
    problem = _record_problem(recorded)
    if problem:
        print(
            f"error: the recorded run {method} seed {seed} in {recorded['_source']} is malformed: {problem}",
            file=sys.stderr,
        )
        return 2
    log = args.work / f"rerun_{run_name(method, seed, args.state_key)}.log"  # outlives the run's temp dir
    log.parent.mkdir(parents=True, exist_ok=True)
    try:
        records = rerun_records(recorded["config"], args.iterations, log)
    except RuntimeError:
        last = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["(no output)"]
        print(f"error: the rerun of {method} seed {seed} failed: {last[0][:200]}; its log: {log}", file=sys.stderr)
        return 2
    kept = args.runs / run_name(method, seed, args.state_key) / "metrics.jsonl"
    strict = strict_compare(read_metrics(kept), records, args.iterations) if kept.exists() else None
    fresh = {r["iteration"]: r for r in records if r.get("kind") == "train"}
    differ = 0
    for row in recorded["train"][: args.iterations]:
        it = row["iteration"]
        for key, src in TRAIN_KEYS.items():
            now = fresh.get(it, {}).get(src)
            same = now == row[key]
            differ += not same
            print(
                f"iteration {it} {key:22s} recorded {row[key]!r:>22}  rerun {now!r:>22}  {'same' if same else 'DIFFERS'}"
            )
    print(f"{method} seed {seed}: {'every metric reproduced' if not differ else f'{differ} metric(s) differ'}")
    if strict is not None:
        n, worst = strict
        if worst is None:
            print(f"{method} seed {seed}: bit-exact (every numeric field of {n} records, bc/* and update/* included)")
        else:
            rel, where = worst
            print(
                f"{method} seed {seed}: NOT bit-exact: largest relative difference {rel:.3g} in {where} "
                f"({n} records compared)"
            )
            differ += 1
    return 1 if differ else 0


#: metric names the trainer no longer writes -> the field that carries the same value now (a
#: recorded run's retired alias is compared with it)
RETIRED_ALIASES = {"outcome_mean": "score_mean", "eval/outcome_mean": "eval/score_mean"}


def strict_compare(recorded: list[dict], fresh: list[dict], iterations: int) -> tuple[int, tuple[float, str] | None]:
    """Every numeric field of every record the two runs share (same kind and iteration, up to
    ``iterations``; wall-clock fields left out): the number of records compared, and the largest
    relative difference with the field it is in (``None``: bit-exact). A recorded field the trainer
    has retired (:data:`RETIRED_ALIASES`) is compared with the field that replaced it.

    >>> strict_compare([{"kind": "init", "iteration": 0, "bc/loss": 1.0}], [{"kind": "init", "iteration": 0, "bc/loss": 1.0}], 2)
    (1, None)
    >>> strict_compare([{"kind": "train", "iteration": 1, "kl": 2.0, "time/iteration_s": 3.0}],
    ...                [{"kind": "train", "iteration": 1, "kl": 2.5, "time/iteration_s": 9.0}], 2)
    (1, (0.2, 'train iteration 1 kl'))
    >>> strict_compare([{"kind": "eval", "iteration": 0, "eval/outcome_mean": 0.5}],
    ...                [{"kind": "eval", "iteration": 0, "eval/score_mean": 0.5}], 2)
    (1, None)
    """

    def key(r: dict) -> tuple:
        return r.get("kind"), r.get("iteration")

    theirs = {key(r): r for r in fresh if isinstance(r.get("iteration"), int) and r["iteration"] <= iterations}
    shared = [(r, theirs[key(r)]) for r in recorded if key(r) in theirs]
    worst: tuple[float, str] | None = None
    for a, b in shared:
        for field, x in a.items():
            if field in TIMING_KEYS or field.startswith("time/") or isinstance(x, bool):
                continue
            y: Any = b.get(field, b.get(RETIRED_ALIASES.get(field, field)))
            where = f"{a.get('kind')} iteration {a.get('iteration')} {field}"
            if isinstance(x, (int, float)) and not isinstance(y, (int, float)):
                return len(shared), (float("inf"), f"{where} (missing)")
            if isinstance(x, list) and not (isinstance(y, list) and len(x) == len(y)):  # e.g. fewer episodes
                return len(shared), (
                    float("inf"),
                    f"{where} ({len(x)} entries vs {len(y)})" if isinstance(y, list) else f"{where} (missing)",
                )
            scalar = isinstance(x, (int, float)) or x is None
            values = list(zip(x, y)) if isinstance(x, list) else [(x, y)] if scalar else []
            for u, v in values:
                num_u, num_v = isinstance(u, (int, float)), isinstance(v, (int, float))
                if num_u != num_v:  # a number in one record, None (no value) in the other
                    rel = float("inf")
                elif not num_u or u == v:
                    continue
                elif math.isnan(u) and math.isnan(v):  # NaN in both records is the same value
                    continue
                else:  # NaN in one only is an infinite difference
                    rel = float("inf") if math.isnan(u) or math.isnan(v) else abs(u - v) / max(abs(u), abs(v), 1e-300)
                if worst is None or rel > worst[0]:
                    worst = (round(rel, 12), where)
    return len(shared), worst
