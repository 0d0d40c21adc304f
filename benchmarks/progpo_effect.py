"""The credit-trap lab: remedies side by side in the credit trap, seed by seed, resumable, re-runnable.

    python benchmarks/progpo_effect.py --lab alfworld             # every remedy on the pre-registered setting
    python benchmarks/progpo_effect.py --lab webshop              # the WebShop block
    python benchmarks/progpo_effect.py --pilot                    # 2 seeds x the main pair: the MDE
    python benchmarks/progpo_effect.py                            # ProGPO vs its base (resumes where it stopped)
    python benchmarks/progpo_effect.py --rerun 0 progpo-gigpo --iterations 2   # check a recorded run
    python benchmarks/progpo_effect.py --report                   # the table of the runs finished so far

``--lab`` is the lab (``configs/credit_lab.yaml``: its setting, primary and secondary metrics and
validity criteria were fixed before its comparison ran). Its report opens with the validity verdict
(can it tell GiGPO from GRPO?), then every method against ``gigpo`` and ``progpo-gigpo``, paired by
seed, on the final held-out success (primary) and the area under the held-out success curve
(secondary), the labelled tracks apart from pure RL, the primary comparisons against ``gigpo``
tested as one family (paired t-tests, Holm-adjusted), ProGPO's term on and off over each base
(exploratory), and where each remedy's term acted; it writes ``credit_lab.json`` (every run, the
verdict, the family tests, the on/off contrast, and ``pilot.json``'s settings tried before the
pre-registration). Without ``--lab`` the tool runs the earlier comparison, ProGPO against its base
on the trap preset.

Setting: ``--config`` (default ``configs/alfworld_trap.yaml``: no repeat masking, no exploration
hints in the prompt, a weak warm start, so most groups fail completely). Every method of a seed
starts from the same weights (the warm start is deterministic in the seed), plays the same task
schedule and the same number of episodes per iteration. Methods (``--methods``):

* ``gigpo`` / ``progpo-gigpo``: the main pair (the CPU default's base);
* ``grpo`` / ``progpo-grpo``: the episode-level pair;
* ``always`` (the progress term in every group) and ``shuffled`` (coverage permuted within each
  all-failed group): the controls of ProGPO(GiGPO).
* the other remedies, each named by its estimator, collector and teacher: ``planpo``,
  ``progpo-planpo``, ``hgpo``, ``progpo-hgpo``, ``gigpo+tree``, ``progpo-gigpo+tree``,
  ``gigpo+tree-random`` (the tree's control), and the labelled tracks ``gigpo+hindsight`` and
  ``gigpo+privileged`` (privileged information: not pure RL, never ranked with the others).
  They run when named in ``--methods``.

Each run is ``python -m trainers.progpo`` in a subprocess (``--workers`` at a time, one torch
thread each) with ``--save-every 1``: a run stopped part-way resumes from its last iteration.
Finished runs keep their ``metrics.jsonl`` and ``config.yaml`` under ``--out``/runs/ (small; the
checkpoints live in ``--work``), so a comparison can be carried on after the checkpoints are gone:
only unfinished runs start again. ``--pilot`` writes its table elsewhere (``--out`` + ``_pilot``)
but shares the runs: its runs are the comparison's seeds 0 and 1 of the main pair.

Output (``--out``, default ``benchmarks/results/progpo_effect``): ``table.md`` (eval success at
the start, middle and end, train success, all-failed fraction, coverage, repeat rate: mean and 95%
t interval over seeds; episodes needed to reach success levels; the paired final difference of
each pair; with ``--pilot``, the minimum detectable difference at 80% power for the planned
seeds), ``curves.png`` and ``progpo_effect.json`` (every run's method, seed, state key, full config,
per-iteration train metrics and eval records, per task type).

``--rerun SEED METHOD --iterations N`` re-runs the first N iterations of that recorded run with
its recorded config (same machine: bit-for-bit), prints every compared train metric and exits 1
when any differs.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the package, when this file is imported rather than run
    sys.path.insert(0, str(ROOT))

from trainers.statistics import episodes_to_reach, holm, mean_ci, paired_t_p, t975  # noqa: E402
from trainers.config import EARLIER_VALUES, upgrade_names  # noqa: E402
from trainers.metrics import read_metrics  # noqa: E402

#: the axes that name a method: its estimator, collector (rollout, tree scorer) and teacher, and
#: the ProGPO controls. Every run sets each of them on the command line, and the report reads them
#: back from the run's own config, so a method's name always says what it ran.
AXES = {"estimator": "gigpo", "rollout": "flat", "tree_scorer": "coverage", "distill": "none",
        "progress_gate": "all_failed", "shuffle_coverage": False}
#: each method's axes where they differ from ``AXES``
METHOD_AXES: dict[str, dict[str, object]] = {
    "gigpo": {},
    "progpo-gigpo": {"estimator": "progpo-gigpo"},
    "grpo": {"estimator": "grpo"},
    "progpo-grpo": {"estimator": "progpo-grpo"},
    "always": {"estimator": "progpo-gigpo", "progress_gate": "always"},
    "shuffled": {"estimator": "progpo-gigpo", "shuffle_coverage": True},
    # the other remedies, named by their three axes (estimator+collector+teacher)
    "planpo": {"estimator": "planpo"},
    "progpo-planpo": {"estimator": "progpo-planpo"},
    "hgpo": {"estimator": "hgpo"},
    "progpo-hgpo": {"estimator": "progpo-hgpo"},
    "gigpo+tree": {"rollout": "tree"},
    "progpo-gigpo+tree": {"estimator": "progpo-gigpo", "rollout": "tree"},
    "gigpo+tree-random": {"rollout": "tree", "tree_scorer": "random"},
    "gigpo+hindsight": {"distill": "hindsight"},
    "gigpo+privileged": {"distill": "privileged"},
}


def axes_of(method: str) -> dict[str, object]:
    """Every axis of ``method`` (the defaults filled in).

    >>> axes_of("gigpo+tree-random")["tree_scorer"], axes_of("gigpo+tree-random")["distill"]
    ('random', 'none')
    """
    return {**AXES, **METHOD_AXES[method]}


def method_args(method: str) -> list[str]:
    """The trainer flags that set every axis of ``method``, defaults included: a config file's
    ``distill`` or ``rollout`` can never slip into a method that does not name it."""
    args: list[str] = []
    for key, value in axes_of(method).items():
        flag = "--" + key.replace("_", "-")
        args += ([flag] if value else ["--no-" + flag[2:]]) if isinstance(value, bool) else [flag, str(value)]
    return args


METHODS = {m: method_args(m) for m in METHOD_AXES}
#: the comparison's methods when --methods is not given (the recorded comparison's six)
DEFAULT_METHODS = ("gigpo", "progpo-gigpo", "grpo", "progpo-grpo", "always", "shuffled")
#: methods that use privileged information: labelled wherever they appear, never ranked with pure RL
LABELS = {"gigpo+privileged": "privileged (not pure RL)", "gigpo+hindsight": "hindsight (no ground truth)"}


def labelled(method: str) -> str:
    """A method's name as tables print it, with its teacher's label.

    >>> labelled("gigpo+privileged"), labelled("gigpo")
    ('gigpo+privileged [privileged (not pure RL)]', 'gigpo')
    """
    return f"{method} [{LABELS[method]}]" if method in LABELS else method
#: the lab's pure-RL methods, then its labelled tracks (ranked apart)
LAB_METHODS = ("grpo", "gigpo", "progpo-gigpo", "planpo", "progpo-planpo", "hgpo", "progpo-hgpo", "gigpo+tree",
               "progpo-gigpo+tree", "gigpo+tree-random", "gigpo+hindsight", "gigpo+privileged")
#: ``--lab NAME``: the credit-trap lab's blocks (each fills --config, --methods, --iterations and --out
#: where they are not given). ``alfworld`` is the pre-registered setting; ``webshop`` the CPU demo's.
LAB_PRESETS = {
    "alfworld": {"config": "configs/credit_lab.yaml", "iterations": 30, "methods": LAB_METHODS,
                 "out": "benchmarks/results/credit_lab", "pilot_seeds": (0, 1), "exploratory": "EXPLORATORY",
                 "provenance_note": "known: gigpo and grpo at seeds 1-7 and planpo at seed 1 ran on earlier code than "
                                    "the other arms (their warm starts differ from the others' in bc/loss's 8th "
                                    "digit), so their pairings compare across code versions"},
    "webshop": {"config": "configs/webshop_cpu_demo.yaml", "iterations": 40,
                "methods": ("gigpo", "progpo-gigpo", "planpo"), "out": "benchmarks/results/credit_lab/webshop",
                "validity": "the ALFWorld block's (this block runs no grpo)"},
    # the confirmatory experiment, pre-registered in its config (primary: the pooled on/off contrast)
    "confirm": {"config": "configs/credit_lab_confirm.yaml", "iterations": 30, "seeds": tuple(range(8, 24)),
                "methods": ("grpo", "gigpo", "progpo-gigpo", "planpo", "progpo-planpo", "hgpo", "progpo-hgpo",
                            "gigpo+tree", "progpo-gigpo+tree"), "out": "benchmarks/results/credit_lab_confirm",
                "preregistered": True},
}
#: analyses of the ALFWorld block chosen after its data were seen: labelled wherever they appear
EXPLORATORY = {
    "multiplicity": "exploratory: the Holm family was added after seeds 0-4 had been seen (not pre-registered)",
    "progpo_on_off": "exploratory: the on/off contrast was chosen after seeds 0-6 had been seen (not pre-registered); "
                     "a hypothesis for a confirmatory run, not a result",
}
#: the lab's baselines: every method's paired difference is reported against each
LAB_BASES = ("gigpo", "progpo-gigpo")
#: where each remedy acted: per-iteration train metrics, averaged over a run's iterations
ACTED_KEYS = {"ProGPO groups": "adv/progress_group_frac", "PlanPO groups": "adv/planpo_group_frac",
              "HGPO peer steps": "adv/hgpo_peer_step_frac", "HGPO deep steps": "adv/hgpo_deep_step_frac",
              "tree forks": "rollout/forks", "tree pruned": "rollout/pruned", "teacher groups": "distill/group_frac"}
#: the part of a method's name that says it has the remedy (a metric is logged for methods without it too)
ACTED_BY = {"ProGPO groups": "progpo-", "PlanPO groups": "planpo", "HGPO peer steps": "hgpo",
            "HGPO deep steps": "hgpo", "tree forks": "+tree", "tree pruned": "+tree", "teacher groups": "gigpo+"}
#: paired differences reported: each ProGPO against its base; each control against the base and
#: against ProGPO(GiGPO) (``always``: is the all-failed gate needed? ``shuffled``: does the ranking by
#: coverage matter, or only the extra variance?)
PAIRS = (("progpo-gigpo", "gigpo"), ("progpo-grpo", "grpo"), ("always", "gigpo"), ("shuffled", "gigpo"),
         ("always", "progpo-gigpo"), ("shuffled", "progpo-gigpo"),
         ("gigpo", "grpo"))  # the lab's validity pair: GiGPO must beat GRPO for the lab to discriminate


def _cell(mean: float, half: float, n: int) -> str:
    """``mean +- half`` of a 95% interval over ``n`` seeds (no interval from one seed)."""
    return f"{mean:.3f} +- {half:.3f}" if n > 1 else f"{mean:.3f} (1 seed)"


#: per-iteration train metrics recorded and compared by --rerun
TRAIN_KEYS = {"train/success": "success", "all_failed_fraction": "all_failed_frac", "coverage_rate": "coverage_rate",
              "repeat_rate": "repeated_action_rate", "score_mean": "score_mean", "adv/abs_mean": "adv/abs_mean",
              "adv/progress_groups": "adv/progress_groups"}


def run_name(method: str, seed: int, state_key: str) -> str:
    return f"{method}_{state_key}_seed{seed}"


def trainer_args(args: argparse.Namespace, method: str, seed: int, iterations: int, out_dir: Path) -> list[str]:
    return ["--config", str(args.config), "--seed", str(seed), "--iterations", str(iterations),
            "--state-key", args.state_key, "--eval-every", str(max(iterations // 2, 1)), "--save-every", "1",
            "--no-progress-bars", "--no-tensorboard", "--output-dir", str(out_dir), *METHODS[method]]


def _run(cmd: list[str], log: Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    with open(log, "a") as fh:
        proc = subprocess.run([sys.executable, "-m", "trainers.progpo", *cmd], cwd=ROOT, env=env, stdout=fh,
                              stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}); see {log}")


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
    _run(cmd + (["--resume"] if resume else ["--overwrite"]), work.parent / f"{name}.log")
    kept.mkdir(parents=True, exist_ok=True)
    for f in ("metrics.jsonl", "config.yaml", "summary.md", "provenance.jsonl"):
        if (work / f).exists():
            (kept / f).write_bytes((work / f).read_bytes())
    print(f"  {name}: {time.perf_counter() - t0:6.0f} s{' (resumed)' if resume else ''}", flush=True)
    return load_run(kept, method, seed)[0]


class LabError(Exception):
    """A lab input that cannot be used (a run half-written or not what its method names, a config
    that sets a method's axis); the message names it and says what to do."""


def config_axes_problem(config_path: Path) -> str | None:
    """What in the lab's ``--config`` would change what a method runs (``None``: nothing): an axis
    that the methods set themselves, set there to another value than its default."""
    import yaml

    try:
        data = yaml.safe_load(Path(config_path).read_text(encoding="utf-8")[: 1 << 20]) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        return f"{config_path} cannot be read ({type(err).__name__})"
    if not isinstance(data, dict):
        return f"{config_path} is not a mapping of config fields"
    data = upgrade_names(data, warn=False)
    set_here = {k: data[k] for k in AXES if k in data and data[k] != AXES[k]}
    if not set_here:
        return None
    said = ", ".join(f"{k}: {v}" for k, v in set_here.items())
    return (f"{config_path} sets {said}; the lab's methods set the estimator, rollout, tree scorer, teacher and ProGPO "
            "controls themselves (e.g. gigpo+privileged is the privileged teacher's arm, gigpo+tree the tree's): "
            "remove it from the config and pick the methods with --methods")


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
    import yaml

    from trainers.metrics import MetricsFileError

    where = f"run {method} seed {seed} ({run_dir})"
    try:
        config = yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LabError(f"{where} has no config.yaml: it is half-written; delete the folder to run it again") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as err:
        raise LabError(f"{where}: config.yaml cannot be read ({type(err).__name__}); delete the folder to run it "
                       "again") from None
    if not isinstance(config, dict):
        raise LabError(f"{where}: config.yaml is not a mapping; delete the folder to run it again")
    try:
        records = read_metrics(run_dir / "metrics.jsonl")
    except FileNotFoundError:
        raise LabError(f"{where} has no metrics.jsonl: it is half-written; delete the folder to run it again") from None
    except (OSError, MetricsFileError) as err:
        raise LabError(f"{where}: metrics.jsonl cannot be read ({err}); delete the folder to run it again") from None
    train = [r for r in records if r.get("kind") == "train" and isinstance(r.get("iteration"), int)]
    evals = [r for r in records if r.get("kind") == "eval" and isinstance(r.get("iteration"), int)]
    iterations = config.get("iterations")
    if not train or (isinstance(iterations, int) and train[-1]["iteration"] < iterations):
        raise LabError(f"{where}: metrics.jsonl ends at iteration {train[-1]['iteration'] if train else 0} of "
                       f"{iterations} (cut short); delete the folder to run it again")
    bad = [r["iteration"] for r in evals if not isinstance(r.get("eval/success"), (int, float))
           or not math.isfinite(float(r["eval/success"]))]
    if not evals or bad:
        what = "no evaluation" if not evals else f"no finite held-out success at iteration(s) {bad}"
        raise LabError(f"{where}: metrics.jsonl has {what}; delete the folder to run it again")
    problem = axes_problem(method, config)
    labels = sorted({str(r["distill"]) for r in records if r.get("distill")})
    if not problem and labels and axes_of(method)["distill"] == "none":
        problem = f"its records say it trained with a teacher ({', '.join(labels)})"
    if problem:
        raise LabError(f"{where} is not what '{method}' names: {problem}; it cannot be reported under that name "
                       "(delete it, or report it under its own method)")
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
            return (f"seed {seed}'s runs played different held-out episodes ({said}); a paired comparison needs one "
                    "panel: rerun the odd ones out")
    return None


def provenance_of(run_dir: Path) -> dict | None:
    """Where a kept run ran: its commit (``None``: not recorded) and compute path, or ``None`` for a
    run from before provenance was recorded. A run resumed on other code or another path gives the
    first difference as its commit (``"mixed: ..."``), which pairs with nothing."""
    from trainers.provenance import read_provenance

    recs = read_provenance(run_dir)
    if not recs:
        return None
    commits = {str(r.get("commit")) + ("+dirty" if r.get("dirty") else "") for r in recs}
    paths = {json.dumps(r.get("compute"), sort_keys=True) for r in recs}
    commit = commits.pop() if len(commits) == 1 else "mixed: " + ", ".join(sorted(commits))
    path = json.loads(paths.pop()) if len(paths) == 1 else {"mixed": sorted(paths)}
    return {"commit": commit, "compute": path, "cpu": recs[-1].get("cpu"), "versions": recs[-1].get("versions")}


def preregistered_commit_problem(config: Path, entries: list[dict]) -> str | None:
    """Runs of a pre-registered block made on another commit than the one that added its config."""
    out = subprocess.run(["git", "log", "--diff-filter=A", "--format=%H", "--", str(config)], cwd=ROOT,
                         capture_output=True, text=True)
    added = out.stdout.split()[-1] if out.returncode == 0 and out.stdout.split() else None
    if added is None:
        return f"{config} is not committed: a pre-registered block runs on the commit that adds its config"
    off = [f"{e['method']} seed {e['seed']}" for e in entries if (e.get("provenance") or {}).get("commit") != added]
    if off:
        return (f"{len(off)} run(s) not made on {added[:12]}, the commit that pre-registered {config.name} "
                f"({', '.join(off[:4])}{' ...' if len(off) > 4 else ''})")
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
        import ray
    except ImportError:
        raise LabError("--ray needs Ray: pip install 'progpo[ray]'") from None
    started = not ray.is_initialized()
    if started:
        ray.init(address=args.ray or None, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}})
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
    train = [{"iteration": r["iteration"], **{k: r.get(src) for k, src in TRAIN_KEYS.items()}}
             for r in records if r.get("kind") == "train"]
    evals = [{"iteration": r["iteration"], "eval/success": r.get("eval/success"), "eval/episodes": r.get("eval/episodes"),
              **({"eval/panel": r["eval/panel"]} if "eval/panel" in r else {}),
              "by_task_type": {k.split("/")[-1]: v for k, v in r.items() if k.startswith("eval/success_by_type/")}}
             for r in records if r.get("kind") == "eval"]
    core_s = sum(float(r.get("time/iteration_s", 0.0)) + float(r.get("time/init_s", 0.0)) for r in records)
    acted = [{"iteration": r["iteration"], **{k: r[src] for k, src in ACTED_KEYS.items() if src in r}}
             for r in records if r.get("kind") == "train"]
    return {"method": method, "seed": seed, "state_key": state_key, "config": config, "train": train, "eval": evals,
            "acted": acted, "train_core_s": core_s}


def _series(runs: list[dict], part: str, key: str) -> np.ndarray:
    return np.array([[np.nan if row.get(key) is None else float(row[key]) for row in r[part]] for r in runs])


def mde_80(diffs: np.ndarray, n_seeds: int) -> float:
    """Smallest mean paired difference a two-sided 5% t test over ``n_seeds`` seeds detects with 80%
    power, from the spread of the pilot's paired differences (normal approximation of the power)."""
    sd = float(np.std(diffs, ddof=1)) if diffs.size > 1 else float("nan")
    return (t975(n_seeds - 1) + 0.8416) * sd / math.sqrt(n_seeds)


def _provenance_line(args: argparse.Namespace, entries: list[dict]) -> str:
    mixed = getattr(args, "mixed", None)
    if mixed:
        return f"**Mixed provenance (--allow-mixed): {mixed}. Paired differences compare code and paths too.**"
    p = entries[0].get("provenance") if entries else None
    if p is None:
        note = LAB_PRESETS.get(args.lab or "", {}).get("provenance_note")
        return ("Provenance: not recorded (runs made before runs recorded their commit); pairing them assumes one "
                "code version" + (f"; {note}." if note else "."))
    return f"Provenance: every run on commit {p['commit']}, compute path {json.dumps(p['compute'], sort_keys=True)}."


def report(args: argparse.Namespace, entries: list[dict], wall_s: float) -> str:
    methods = [m for m in args.methods if any(e["method"] == m for e in entries)]
    by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in methods}
    first = by[methods[0]][0]
    eval_its = [e["iteration"] for e in first["eval"]]
    per_iter = first["config"].get("num_groups", 0) * first["config"].get("group_size", 0)
    title = f"The credit-trap lab, {args.lab} block" if args.lab else "ProGPO vs its base in the credit trap"
    command = f" --lab {args.lab}" if args.lab else " --pilot" if args.pilot else ""
    lines = [f"# {title} (`{Path(args.config).name}`, state key `{args.state_key}`)", "",
             f"`python benchmarks/progpo_effect.py{command}`: seeds {args.seeds}, "
             f"{args.iterations} iterations x {per_iter} episodes; eval on {first['eval'][0]['eval/episodes']} held-out "
             "episodes at fixed seeds. Mean over seeds +- the half-width of the 95% t interval.", "",
             _provenance_line(args, entries), "",
             "| method | seeds | " + " | ".join(f"eval it {i}" for i in eval_its) + " | train, last 5 | all-failed it 1 | "
             "all-failed, last 5 | coverage, last 5 | repeats, last 5 |", "|---" * (len(eval_its) + 7) + "|"]
    for m in methods:
        n = len(by[m])
        ev = _series(by[m], "eval", "eval/success")
        cells = [str(n)] + [_cell(a, h, n) for a, h in zip(*mean_ci(ev))]
        for key, cols in (("train/success", slice(-5, None)), ("all_failed_fraction", slice(0, 1)),
                          ("all_failed_fraction", slice(-5, None)), ("coverage_rate", slice(-5, None)),
                          ("repeat_rate", slice(-5, None))):
            x = np.nanmean(_series(by[m], "train", key)[:, cols], axis=1, keepdims=True)
            a, h = mean_ci(x)
            cells.append(_cell(a[0], h[0], n))
        lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    lines += ["", "## Episodes to reach a train success level", "",
              "First iteration at which the seed-mean train success (2-iteration running mean) reaches the level, "
              f"in episodes ({per_iter} per iteration); '-': not within {args.iterations} iterations.", "",
              "| method | " + " | ".join(f">= {lv:.2f}" for lv in args.levels) + " |", "|---" * (len(args.levels) + 1) + "|"]
    for m in methods:
        cells = episodes_to_reach(_series(by[m], "train", "train/success"), args.levels, per_iter)
        lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    types = sorted({t for m in methods for e in by[m] for t in e["eval"][-1]["by_task_type"]})
    if types:
        lines += ["", "## Final held-out success by task type (mean over seeds)", "",
                  "| method | " + " | ".join(types) + " |", "|---" * (len(types) + 1) + "|"]
        for m in methods:
            cells = [np.mean([e["eval"][-1]["by_task_type"].get(t, np.nan) for e in by[m]]) for t in types]
            lines.append(f"| {labelled(m)} | " + " | ".join(f"{c:.3f}" for c in cells) + " |")
    if args.lab:
        lines += lab_report(args, by, validity(by, LAB_PRESETS[args.lab].get("pilot_seeds", ())))
    else:
        lines += ["", "## Final held-out success, paired by seed", ""]
    for a, b in () if args.lab else PAIRS:
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
    hours = sum(e.get("train_core_s", 0.0) for e in entries) / 3600
    lines += ["", f"Compute: {hours:.1f} core-hours of warm start + training over {len(entries)} runs (each run one "
              "core: metrics' time/init_s + time/iteration_s); the three evaluations of a run add 10-50% to its wall "
              "time." + ("" if args.report else f" Wall time of this invocation: {wall_s / 60:.1f} min on {args.workers} "
                                                 "worker(s).")]
    return "\n".join(lines) + "\n"


def auc(run: dict) -> float:
    """Area under a run's held-out success curve over its evaluations, divided by their span: the
    mean success over the run (trapezoids between the evaluations)."""
    its = np.array([e["iteration"] for e in run["eval"]], dtype=float)
    ys = np.array([e["eval/success"] for e in run["eval"]], dtype=float)
    return float(np.sum((ys[1:] + ys[:-1]) / 2 * np.diff(its)) / (its[-1] - its[0])) if its.size > 1 else float(ys[0])


def _final(run: dict) -> float:
    return float(run["eval"][-1]["eval/success"])


def paired(by: dict[str, list[dict]], a: str, b: str, metric: Callable[[dict], float]) -> dict | None:
    """``metric(a) - metric(b)`` over the seeds both ran: mean, 95% t interval, per-seed values."""
    fa, fb = ({e["seed"]: metric(e) for e in by.get(m, [])} for m in (a, b))
    seeds = sorted(set(fa) & set(fb))
    if not seeds:
        return None
    d = np.array([fa[s] - fb[s] for s in seeds])
    m, h = mean_ci(d[:, None])
    return {"mean": float(m[0]), "half": float(h[0]), "lo": float(m[0] - h[0]), "hi": float(m[0] + h[0]),
            "seeds": seeds, "per_seed": [float(x) for x in d]}


def _diff_cell(p: dict | None) -> str:
    if p is None:
        return "-"
    if len(p["seeds"]) < 2:
        return f"{p['mean']:+.3f} (1 seed)"
    return f"{p['mean']:+.3f} [{p['lo']:+.3f}, {p['hi']:+.3f}]"


#: the lab's validity criteria (pre-registered in configs/credit_lab.yaml)
TRAP_MIN, ROOM_MIN, VALIDITY_SEEDS = 0.60, 0.20, 8


def validity(by: dict[str, list[dict]], pilot_seeds: tuple[int, ...] = ()) -> dict | None:
    """Whether the lab can tell GiGPO from GRPO: the trap at iteration 1, GiGPO's room to move and
    the paired final difference (interval over >= 8 seeds excluding 0), as pre-registered; and the
    same difference on the seeds that did not choose the setting (``pilot_seeds`` left out), which
    is the test that does not reuse the data that chose it. ``None`` without both."""
    if "gigpo" not in by or "grpo" not in by:
        return None
    runs = by["gigpo"]
    trap = float(np.mean([r["train"][0]["all_failed_fraction"] for r in runs]))
    rise = np.array([[_final(r) - float(r["eval"][0]["eval/success"])] for r in runs])
    rm, rh = mean_ci(rise)
    diff = paired(by, "gigpo", "grpo", _final)
    n = len(diff["seeds"]) if diff else 0
    checks = {"trap": trap >= TRAP_MIN, "room": float(rm[0]) >= ROOM_MIN,
              "discrimination": bool(diff and n >= VALIDITY_SEEDS and diff["lo"] > 0)}
    fresh = {m: [r for r in rs if r["seed"] not in pilot_seeds] for m, rs in by.items()}
    fresh_diff = paired(fresh, "gigpo", "grpo", _final)
    return {"all_failed_it1": trap, "gigpo_rise": float(rm[0]), "gigpo_rise_half": float(rh[0]),
            "gigpo_minus_grpo": diff, "seeds": n, "checks": checks,
            "pilot_seeds": sorted(pilot_seeds), "gigpo_minus_grpo_fresh": fresh_diff,
            "verdict": ("not decided: fewer than 8 paired seeds" if n < VALIDITY_SEEDS else
                        "discriminates" if all(checks.values()) else "cannot discriminate")}


def multiplicity(by: dict[str, list[dict]], methods: list[str]) -> list[dict]:
    """The primary comparison of each of ``methods`` against ``gigpo`` as one family: the paired
    t-test's p-value (the test behind the table's intervals) and its Holm adjustment over the
    family, so that a single interval excluding 0 among many is not read as a finding."""
    rows = [(m, paired(by, m, "gigpo", _final)) for m in methods if m != "gigpo"]
    rows = [(m, d) for m, d in rows if d is not None and len(d["seeds"]) >= 2]
    ps = [paired_t_p(d["per_seed"]) for _, d in rows]
    return [{"method": m, "seeds": len(d["seeds"]), "diff": d, "p": p, "p_holm": a}
            for (m, d), p, a in zip(rows, ps, holm(ps))]


def families(by: dict[str, list[dict]]) -> dict[str, list[dict]] | None:
    """The two families tested against ``gigpo``: the pure-RL remedies (GiGPO - GRPO is the validity
    test, judged alone) and the labelled tracks. ``None`` without ``gigpo``."""
    if "gigpo" not in by:
        return None
    return {"pure": multiplicity(by, [m for m in by if m not in LABELS and m != "grpo"]),
            "labelled": multiplicity(by, [m for m in by if m in LABELS])}


def progpo_on_off(by: dict[str, list[dict]], metric: Callable[[dict], float] = _final) -> dict | None:
    """ProGPO's term switched on over each base it was run on (``progpo-X`` - ``X``, ``metric``
    paired by seed; the final held-out success by default), and pooled: per seed, the mean over the bases of that seed's
    differences (seeds where every pair ran), so the seeds stay the independent unit. Exploratory:
    the lab's pre-registered comparisons are against ``gigpo``; this contrast was chosen after them.
    ``None`` without a single pair."""
    pairs = [(m, m[len("progpo-"):]) for m in by if m.startswith("progpo-") and m[len("progpo-"):] in by]
    rows = [(on, off, paired(by, on, off, metric)) for on, off in pairs]
    rows = [(on, off, d) for on, off, d in rows if d is not None]
    if not rows:
        return None
    common = sorted(set.intersection(*(set(d["seeds"]) for _, _, d in rows)))
    per_seed = [float(np.mean([d["per_seed"][d["seeds"].index(s)] for _, _, d in rows])) for s in common]
    pooled = None
    if len(rows) > 1 and len(common) >= 2:
        m, h = mean_ci(np.array(per_seed)[:, None])
        pooled = {"mean": float(m[0]), "half": float(h[0]), "lo": float(m[0] - h[0]), "hi": float(m[0] + h[0]),
                  "seeds": common, "per_seed": per_seed, "p": paired_t_p(per_seed)}
    return {"pairs": [{"on": on, "off": off, "diff": d, "p": paired_t_p(d["per_seed"])} for on, off, d in rows],
            "pooled": pooled}


def _on_off_lines(res: dict, res_auc: dict, preregistered: bool = False) -> list[str]:
    if preregistered:
        head = ["", "## Primary (pre-registered): ProGPO's term on and off, over its bases", "",
                "Final held-out success and AUC, `progpo-X` - `X` paired by seed. **Primary metric:** per seed, the "
                "mean of that seed's final-success differences over the bases; two-sided paired t, alpha 0.05, with "
                "its 95% t interval (the pooled row). The per-base rows and AUC are secondary."]
    else:
        head = ["", "## ProGPO's term on and off, over its bases (exploratory: not pre-registered)", "",
                "Final held-out success and AUC, `progpo-X` - `X` paired by seed. Pooled: per seed, the mean of that "
                "seed's differences over the bases, then the 95% t interval over seeds. This contrast was chosen after "
                "the pre-registered comparisons against gigpo; read it as a hypothesis for a confirmatory run, and "
                "with the lab's label."]
    lines = [*head, "", "| on | off | seeds | final: on - off | paired t p | AUC: on - off | paired t p |",
             "|---|---|---|---|---|---|---|"]
    adjusted = holm([r["p"] for r in res["pairs"]])  # the per-base contrasts as one family of secondaries
    for r, ra, h in zip(res["pairs"], res_auc["pairs"], adjusted):
        holm_cell = f" (Holm {h:.3f})" if preregistered else ""
        lines.append(f"| {r['on']} | {r['off']} | {len(r['diff']['seeds'])} | {_diff_cell(r['diff'])} | {r['p']:.3f}"
                     f"{holm_cell} | {_diff_cell(ra['diff'])} | {ra['p']:.3f} |")
    if res["pooled"]:
        pl, pa = res["pooled"], res_auc["pooled"]
        lines.append(f"| **pooled over the {len(res['pairs'])} bases** | | {len(pl['seeds'])} | "
                     f"{_diff_cell(pl)} | {pl['p']:.3f} | {_diff_cell(pa)} | {pa['p']:.3f} |")
    return lines


def _multiplicity_lines(family: list[dict], title: str) -> list[str]:
    lines = ["", f"### {title}: {len(family)} comparisons against gigpo (final held-out success)", "",
             "| method | seeds | final - gigpo | paired t p | Holm-adjusted p |", "|---|---|---|---|---|"]
    for r in family:
        lines.append(f"| {labelled(r['method'])} | {r['seeds']} | {_diff_cell(r['diff'])} | {r['p']:.3f} | "
                     f"{'**' if r['p_holm'] < 0.05 else ''}{r['p_holm']:.3f}{'**' if r['p_holm'] < 0.05 else ''} |")
    return lines


def lab_report(args: argparse.Namespace, by: dict[str, list[dict]], valid: dict | None) -> list[str]:
    """The lab's sections: validity, every method against the baselines (final success and AUC,
    pure RL and labelled tracks apart), and where each remedy acted."""
    lines = ["", "## Validity: can this lab tell GiGPO from GRPO?", ""]
    if "validity" in LAB_PRESETS[args.lab]:
        lines.append(f"Read from {LAB_PRESETS[args.lab]['validity']}.")
    elif valid is None:
        lines.append("Not measured: the lab needs gigpo and grpo runs.")
    else:
        d = valid["gigpo_minus_grpo"]
        lines += [f"- the trap: all-failed fraction at iteration 1 {valid['all_failed_it1']:.3f} "
                  f"(needs >= {TRAP_MIN:.2f}): {'met' if valid['checks']['trap'] else 'NOT met'}",
                  f"- room to move: GiGPO's held-out success {valid['gigpo_rise']:+.3f} +- {valid['gigpo_rise_half']:.3f} "
                  f"from start to end (needs >= {ROOM_MIN:+.2f}): {'met' if valid['checks']['room'] else 'NOT met'}",
                  f"- discrimination: GiGPO - GRPO final {_diff_cell(d)} over {valid['seeds']} seeds (needs the 95% "
                  f"interval above 0 at >= {VALIDITY_SEEDS} seeds): {'met' if valid['checks']['discrimination'] else 'NOT met'}"
                  + (f"; these seeds include the pilot seeds {valid['pilot_seeds']}, which chose the setting. On the "
                     f"fresh seeds alone: {_diff_cell(valid['gigpo_minus_grpo_fresh'])} over "
                     f"{len((valid['gigpo_minus_grpo_fresh'] or {}).get('seeds', []))} seeds"
                     if valid.get("pilot_seeds") else ""),
                  "", f"**Verdict: {valid['verdict']}.**"
                  + (" Every comparison below is read as: this lab cannot discriminate." if valid["verdict"] ==
                     "cannot discriminate" else "")]
    missing = [labelled(m) for m in dict.fromkeys([*LAB_PRESETS[args.lab]["methods"], *args.methods]) if m not in by]
    if missing:
        lines += ["", f"Not run yet (no finished seed): {', '.join(missing)}."]
    pure = [m for m in by if m not in LABELS]
    tracks = [m for m in by if m in LABELS]
    head = ("| method | seeds | final | AUC | " + " | ".join(f"final - {b} | AUC - {b}" for b in LAB_BASES) + " |")
    for title, methods in (("Pure RL", pure), ("Labelled tracks (not ranked with pure RL)", tracks)):
        if not methods:
            continue
        lines += ["", f"## {title}: final held-out success and AUC, paired by seed (95% t intervals)", "", head,
                  "|---" * (4 + 2 * len(LAB_BASES)) + "|"]
        for m in methods:
            fin, fh = mean_ci(np.array([[_final(e)] for e in by[m]]))
            au, ah = mean_ci(np.array([[auc(e)] for e in by[m]]))
            n = len(by[m])
            cells = [str(n), _cell(fin[0], fh[0], n), _cell(au[0], ah[0], n)]
            for b in LAB_BASES:
                cells += ["" if m == b else _diff_cell(paired(by, m, b, _final)),
                          "" if m == b else _diff_cell(paired(by, m, b, auc))]
            lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    fams = families(by)
    if fams and any(fams.values()):
        lines += ["", "## Many comparisons at once (primary metric)", "",
                  "The intervals above hold one comparison at a time. Each family below is tested together: "
                  "two-sided paired t-tests against gigpo, Holm-adjusted; bold: adjusted p < 0.05. GiGPO - GRPO "
                  "is the validity test, judged alone above."
                  + (f" **{EXPLORATORY['multiplicity'][0].upper()}{EXPLORATORY['multiplicity'][1:]}.**"
                     if LAB_PRESETS[args.lab].get("exploratory") else "")]
        for title, fam in (("Pure RL remedies", fams["pure"]), ("Labelled tracks", fams["labelled"])):
            lines += _multiplicity_lines(fam, title) if fam else []
    on_off = progpo_on_off(by)
    if on_off:
        lines += _on_off_lines(on_off, progpo_on_off(by, auc), bool(LAB_PRESETS[args.lab].get("preregistered")))
    keys = [k for k in ACTED_KEYS if any(ACTED_BY[k] in m and k in row for m in by for e in by[m]
                                         for row in e.get("acted", []))]
    if keys:
        lines += ["", "## Where each remedy acted (mean over iterations and seeds)", "",
                  "Shares of groups or steps a remedy's term changed, and the tree's forks and pruned branches per "
                  "iteration; blank: the method has no such term.", "",
                  "| method | " + " | ".join(keys) + " |", "|---" * (len(keys) + 1) + "|"]
        for m in by:
            cells = []
            for k in keys:
                if ACTED_BY[k] not in m:
                    cells.append("")
                    continue
                vals = [np.mean([row[k] for row in e.get("acted", []) if k in row]) for e in by[m]
                        if any(k in row for row in e.get("acted", []))]
                cells.append(f"{np.mean(vals):.3f}" if vals else "")
            lines.append(f"| {labelled(m)} | " + " | ".join(cells) + " |")
    return lines


def _forest(ax, by: dict[str, list[dict]]) -> None:
    """Final held-out success minus gigpo's, paired by seed, with 95% t intervals: one row a method
    (labelled tracks below a rule); the ``grpo`` row, GiGPO - GRPO, shows what the lab resolves."""
    pure = [m for m in by if m not in LABELS and m != "gigpo"]
    rows = [(m, paired(by, m, "gigpo", _final)) for m in [*pure, *[m for m in by if m in LABELS]]]
    rows = [(m, d) for m, d in rows if d is not None]
    for y, (m, d) in enumerate(rows):
        ax.errorbar(d["mean"], -y, xerr=d["half"], fmt="o", ms=4, capsize=3,
                    color="tab:gray" if m in LABELS else "tab:blue" if "progpo" in m else "black")
    ax.axvline(0.0, color="tab:red", lw=1)
    short = {m: f"{m} [{LABELS[m].split(' (')[0]}]" if m in LABELS else m for m, _ in rows}  # the label, kept short
    ax.set_yticks([-y for y in range(len(rows))], [f"{short[m]} ({len(d['seeds'])})" for m, d in rows], fontsize=8)
    if any(m in LABELS for m, _ in rows) and pure:
        ax.axhline(-len([m for m, _ in rows if m not in LABELS]) + 0.5, color="gray", lw=0.5, ls=":")
    ax.set_title("final held-out success - gigpo\n(paired by seed, 95% CI; seeds)", fontsize=9)
    ax.grid(alpha=0.3, axis="x")


def plot(args: argparse.Namespace, entries: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (("eval", "eval/success", "held-out eval success"), ("train", "train/success", "train success"),
              ("train", "all_failed_fraction", "all-failed fraction"), ("train", "coverage_rate", "coverage rate"),
              ("train", "repeat_rate", "repeated-action rate"))
    methods = [m for m in args.methods if any(e["method"] == m for e in entries)]
    by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in methods}
    forest = bool(args.lab) and "gigpo" in by and len(by) > 1
    fig, grid = plt.subplots(2, 3, figsize=(17, 9))
    axes = [grid[0, 0], grid[0, 1], grid[1, 0], grid[1, 1], grid[1, 2]]
    # tab20's dark shades first, then its light ones: neighbouring methods never share a hue
    colors = [plt.get_cmap("tab20")(j) for j in [*range(0, 20, 2), *range(1, 20, 2)]]
    width = 0.8 * min(1.0, 3.0 / max(len(methods), 1))  # eval points of the methods side by side, not on top
    for ax, (part, key, title) in zip(axes, panels):
        for i, m in enumerate(methods):
            runs = by[m]
            xs = np.array([row["iteration"] for row in runs[0][part]], dtype=float)
            mean, half = mean_ci(_series(runs, part, key))
            style = {"color": colors[i % len(colors)], "ls": "--" if m in LABELS else "-", "label": labelled(m)}
            if part == "eval":  # few points: each with its interval, dodged
                ax.errorbar(xs + (i - (len(methods) - 1) / 2) * width, mean, yerr=half, marker="o", ms=3,
                            capsize=2, lw=1, **style)
            else:
                ax.plot(xs, mean, lw=1.2, **style)
                ax.fill_between(xs, mean - half, mean + half, color=style["color"],
                                alpha=0.15 if len(methods) <= 4 else 0.05)
        ax.set_title(title)
        ax.set_xlabel("iteration")
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    if forest:
        _forest(grid[0, 2], by)
    else:
        grid[0, 2].axis("off")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=9, frameon=False)
    fig.suptitle(f"{Path(args.config).name}, state key {args.state_key}: mean and 95% CI over seeds {args.seeds}")
    fig.tight_layout(rect=(0, 0.03 * (1 + (len(labels) - 1) // 4), 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)


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
    recorded = next((r for r in runs if r.get("seed") == seed and r.get("method") == method
                     and r.get("state_key") == args.state_key), None)
    if recorded is None:
        print(f"error: no recorded run {method} seed {seed} (state key {args.state_key}) in {args.out}", file=sys.stderr)
        return 2
    problem = _record_problem(recorded)
    if problem:
        print(f"error: the recorded run {method} seed {seed} in {recorded['_source']} is malformed: {problem}",
              file=sys.stderr)
        return 2
    import yaml

    log = args.work / f"rerun_{run_name(method, seed, args.state_key)}.log"  # outlives the run's temp dir
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "recorded.yaml"
        # a record from before a config field existed re-runs with that field's earlier meaning
        config.write_text(yaml.safe_dump({**EARLIER_VALUES, **upgrade_names(recorded["config"], warn=False),
                                          "output_dir": str(Path(tmp) / "run")}))
        cmd = ["--config", str(config), "--iterations", str(args.iterations), "--no-progress-bars", "--no-tensorboard",
               "--output-dir", str(Path(tmp) / "run"), "--overwrite"]
        try:
            _run(cmd, log)
        except RuntimeError:
            last = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()][-1:] or ["(no output)"]
            print(f"error: the rerun of {method} seed {seed} failed: {last[0][:200]}; its log: {log}", file=sys.stderr)
            return 2
        records = read_metrics(Path(tmp) / "run" / "metrics.jsonl")
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
            print(f"iteration {it} {key:22s} recorded {row[key]!r:>22}  rerun {now!r:>22}  {'same' if same else 'DIFFERS'}")
    print(f"{method} seed {seed}: {'every metric reproduced' if not differ else f'{differ} metric(s) differ'}")
    if strict is not None:
        n, worst = strict
        if worst is None:
            print(f"{method} seed {seed}: bit-exact (every numeric field of {n} records, bc/* and update/* included)")
        else:
            rel, where = worst
            print(f"{method} seed {seed}: NOT bit-exact: largest relative difference {rel:.3g} in {where} "
                  f"({n} records compared)")
            differ += 1
    return 1 if differ else 0


def strict_compare(recorded: list[dict], fresh: list[dict], iterations: int) -> tuple[int, tuple[float, str] | None]:
    """Every numeric field of every record the two runs share (same kind and iteration, up to
    ``iterations``; wall-clock fields left out): the number of records compared, and the largest
    relative difference with the field it is in (``None``: bit-exact).

    >>> strict_compare([{"kind": "init", "iteration": 0, "bc/loss": 1.0}], [{"kind": "init", "iteration": 0, "bc/loss": 1.0}], 2)
    (1, None)
    >>> strict_compare([{"kind": "train", "iteration": 1, "kl": 2.0, "time/iteration_s": 3.0}],
    ...                [{"kind": "train", "iteration": 1, "kl": 2.5, "time/iteration_s": 9.0}], 2)
    (1, (0.2, 'train iteration 1 kl'))
    """
    from trainers.metrics import TIMING_KEYS

    def key(r: dict) -> tuple:
        return r.get("kind"), r.get("iteration")

    theirs = {key(r): r for r in fresh if isinstance(r.get("iteration"), int) and r["iteration"] <= iterations}
    shared = [(r, theirs[key(r)]) for r in recorded if key(r) in theirs]
    worst: tuple[float, str] | None = None
    for a, b in shared:
        for field, x in a.items():
            if field in TIMING_KEYS or field.startswith("time/") or isinstance(x, bool):
                continue
            y = b.get(field)
            values = [(x, y)] if isinstance(x, (int, float)) else list(zip(x, y)) if (
                isinstance(x, list) and isinstance(y, list) and len(x) == len(y)) else []
            if isinstance(x, (int, float)) and not isinstance(y, (int, float)):
                return len(shared), (float("inf"), f"{a.get('kind')} iteration {a.get('iteration')} {field} (missing)")
            for u, v in values:
                if not isinstance(u, (int, float)) or not isinstance(v, (int, float)) or u == v:
                    continue
                rel = abs(u - v) / max(abs(u), abs(v), 1e-300)
                if worst is None or rel > worst[0]:
                    worst = (round(rel, 12), f"{a.get('kind')} iteration {a.get('iteration')} {field}")
    return len(shared), worst


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lab", choices=list(LAB_PRESETS), default=None,
                    help="the credit-trap lab: 'alfworld' (configs/credit_lab.yaml, every remedy, 30 iterations, "
                         "-> benchmarks/results/credit_lab) or 'webshop' (the WebShop CPU demo's setting: gigpo, "
                         "progpo-gigpo, planpo, 40 iterations) or 'confirm' (the pre-registered confirmatory "
                         "experiment, configs/credit_lab_confirm.yaml: ProGPO's term on and off over four bases, "
                         "seeds 8-23); adds the validity verdict, every method against gigpo and progpo-gigpo, AUC and "
                         "where each remedy acted; writes credit_lab.json")
    ap.add_argument("--config", type=Path, default=None,
                    help="the trainer config every run starts from (default: the credit-trap preset, or the --lab's)")
    ap.add_argument("--methods", nargs="+", default=None, choices=list(METHODS),
                    help="methods to run (default: the comparison's six: gigpo, progpo-gigpo, grpo, progpo-grpo, "
                         "always, shuffled); the other remedies: planpo, progpo-planpo, hgpo, progpo-hgpo, gigpo+tree, "
                         "progpo-gigpo+tree, gigpo+tree-random, gigpo+hindsight, gigpo+privileged (labelled: not pure RL)")
    ap.add_argument("--seeds", type=int, nargs="+", default=None,
                    help="seeds: each gives every method the same warm start and task schedule (default 0-7; the "
                         "--lab's where it names them: confirm 8-23)")
    ap.add_argument("--iterations", type=int, default=None, help="RL iterations per run (default 20; the --lab's)")
    ap.add_argument("--state-key", default="canonical", choices=("canonical", "exact"),
                    help="state identity of first-visit coverage (trainer's --state-key)")
    ap.add_argument("--workers", type=int, default=2, help="runs at a time, one torch thread each")
    ap.add_argument("--ray", nargs="?", const="", default=None, metavar="ADDRESS",
                    help="run the runs as Ray tasks (one CPU each, resumable as local runs): on the cluster at "
                         "ADDRESS (host:port), or on a local Ray instance without one; the nodes must see this "
                         "checkout, --out and --work at the same paths. Without it: --workers local processes")
    ap.add_argument("--levels", type=float, nargs="+", default=[0.1, 0.2, 0.3],
                    help="train-success levels for the episodes-to-reach table")
    ap.add_argument("--pilot", action="store_true", help="seeds 0-1, the main pair: print the MDE at 80%% power")
    ap.add_argument("--planned-seeds", type=int, default=8, help="seeds the MDE is computed for (--pilot)")
    ap.add_argument("--report", action="store_true",
                    help="write the table, plot and JSON from the finished runs alone (start nothing)")
    ap.add_argument("--allow-mixed", action="store_true",
                    help="report runs made on different commits or compute paths side by side (labelled in the "
                         "table); without it the lab refuses to pair them")
    ap.add_argument("--rerun", nargs=2, metavar=("SEED", "METHOD"), help="re-run a recorded run's first --iterations")
    ap.add_argument("--out", type=Path, default=None,
                    help="table.md, curves.png, progpo_effect.json (credit_lab.json) and the finished runs (runs/); "
                         "default benchmarks/results/progpo_effect, or the --lab's")
    ap.add_argument("--work", type=Path, default=None, help="run dirs with checkpoints (default ~/.cache/progpo/progpo_effect)")
    args = ap.parse_args(argv)
    preset = LAB_PRESETS.get(args.lab, {})
    args.config = args.config or ROOT / preset.get("config", "configs/alfworld_trap.yaml")
    args.methods = args.methods or list(preset.get("methods", DEFAULT_METHODS))
    args.seeds = args.seeds if args.seeds is not None else list(preset.get("seeds", range(8)))
    args.iterations = args.iterations or preset.get("iterations", 20)
    args.out = args.out or ROOT / preset.get("out", "benchmarks/results/progpo_effect")
    args.json_name = "credit_lab.json" if args.lab else "progpo_effect.json"
    args.config = args.config.resolve()
    args.out = args.out.resolve()
    args.work = (args.work or Path.home() / ".cache" / "progpo" / "progpo_effect").resolve() / args.out.name
    args.runs = args.out / "runs"  # finished runs; the pilot's are the comparison's seeds 0-1 of the main pair
    if args.rerun:
        seed_text, method = args.rerun
        if not seed_text.isdigit() or method not in METHODS:
            what = (f"SEED must be a whole number, got {seed_text!r}" if not seed_text.isdigit()
                    else f"unknown METHOD {method!r} (one of {', '.join(METHODS)})")
            print(f"error: --rerun SEED METHOD: {what}", file=sys.stderr)
            return 2
        return rerun(args, int(seed_text), method)
    if args.pilot:
        args.out = args.out.with_name(args.out.name + "_pilot")
        args.seeds = args.seeds if argv and "--seeds" in argv else [0, 1]
        args.methods = args.methods if argv and "--methods" in argv else ["gigpo", "progpo-gigpo"]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    jobs = [(m, s) for s in args.seeds for m in args.methods]
    if args.report:  # the comparison so far: finished runs only
        jobs = [(m, s) for m, s in jobs if (args.runs / run_name(m, s, args.state_key) / "summary.md").exists()]
        if not jobs:
            raise SystemExit(f"error: no finished run of {', '.join(args.methods)} under {args.runs}")
    try:
        if not args.report:
            problem = config_axes_problem(args.config)
            if problem:
                raise LabError(problem)
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
        if not args.mixed and LAB_PRESETS.get(args.lab or "", {}).get("preregistered"):
            args.mixed = preregistered_commit_problem(args.config, entries)
        if args.mixed and not args.allow_mixed:
            raise LabError(f"{args.mixed}: a paired difference would compare them too; rerun them on one commit, or "
                           "pass --allow-mixed (the table then says so)")
    except (LabError, RuntimeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    text = report(args, entries, time.perf_counter() - t0)
    print(text)
    (args.out / "table.md").write_text(text)
    record = {"config": str(args.config.relative_to(ROOT)) if args.config.is_relative_to(ROOT) else str(args.config),
              "runs": entries}
    if args.lab:
        by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in args.methods}
        record["validity"] = validity({m: r for m, r in by.items() if r}, LAB_PRESETS[args.lab].get("pilot_seeds", ()))
        done = {m: r for m, r in by.items() if r}
        post_hoc = EXPLORATORY if LAB_PRESETS[args.lab].get("exploratory") else {}
        record["multiplicity"] = {"exploratory": post_hoc.get("multiplicity"), "families": families(done)}
        record["progpo_on_off"] = {"exploratory": post_hoc.get("progpo_on_off", EXPLORATORY["progpo_on_off"]),
                                   "final": progpo_on_off(done), "auc": progpo_on_off(done, auc)}
        pilot = args.out / "pilot.json"  # the settings tried before the pre-registration
        record["pilot"] = json.loads(pilot.read_text()) if pilot.exists() else None
    (args.out / args.json_name).write_text(json.dumps(record, indent=1))
    plot(args, entries, args.out / "curves.png")
    print(f"-> {args.out / 'table.md'}, {args.out / 'curves.png'}, {args.out / args.json_name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
