"""Put recorded runs on one commit: re-run each one's first iterations at that commit, compare every
field, and record the verdict as the run's verified commit.

A lab block whose runs were made before runs recorded their commit (or on several commits) can be
paired only when every arm ran the same code. A recorded run counts as made on commit ``C`` when
its first iterations, re-run by ``C``'s trainer from the run's own recorded config, reproduce its
records bit for bit in every numeric field (:func:`~trainers.lab.runs.strict_compare`: ``bc/*``
and ``update/*`` included, wall-clock fields left out). Runs that do not are the ones to re-run in
full at ``C``.

    python -m trainers.lab --lab alfworld --verify-at 5c4db74 --verify-iterations 2 --workers 2

``C`` is checked out once in a git worktree under ``~/.cache/progpo/worktrees``; the verdicts go to
``verified.json`` beside the block's record, one entry per run, written as each finishes (a
stopped verification resumes where it was).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from trainers.lab.methods import run_name
from trainers.lab.runs import ROOT, LabError, load_run, rerun_records, strict_compare
from trainers.runs.metrics import read_metrics

__all__ = ["VERIFIED_NAME", "resolve_commit", "verified_commits", "verify_at", "worktree_at"]

#: the verdicts' file, beside the block's JSON record
VERIFIED_NAME = "verified.json"


def resolve_commit(rev: str, repo: Path = ROOT) -> str:
    """The full hash of ``rev`` in ``repo``; :class:`LabError` when it names no commit."""
    proc = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0 or not proc.stdout.strip():
        raise LabError(f"--verify-at {rev!r}: no such commit in {repo}")
    return proc.stdout.strip()


def worktree_at(commit: str, repo: Path = ROOT, under: Path | None = None) -> Path:
    """A checkout of ``commit`` (made once, detached, reused): the code the runs are verified on."""
    under = under or Path.home() / ".cache" / "progpo" / "worktrees"
    path = under / commit[:12]
    if (path / ".git").exists():
        head = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        if head == commit:
            return path
        raise LabError(f"{path} holds {head[:12]}, not {commit[:12]}: remove it (git worktree remove {path})")
    under.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["git", "-C", str(repo), "worktree", "add", "--detach", str(path), commit], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise LabError(f"could not check out {commit[:12]} at {path}: {proc.stderr.strip()[:200]}")
    return path


def verified_commits(out: Path) -> dict[str, dict[str, Any]]:
    """``run name -> verdict`` of ``out``'s ``verified.json`` (empty when there is none)."""
    path = out / VERIFIED_NAME
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return dict(data.get("runs", {})) if isinstance(data, dict) else {}


def _verify_one(entry: dict, runs: Path, code: Path, commit: str, iterations: int, work: Path) -> dict[str, Any]:
    """Re-run one recorded run's first ``iterations`` at ``code`` and compare it with its kept records."""
    name = run_name(entry["method"], entry["seed"], entry["state_key"])
    kept = runs / name / "metrics.jsonl"
    if not kept.exists():
        return {"commit": commit, "iterations": iterations, "bit_exact": None, "problem": f"no {kept}"}
    log = work / f"verify_{commit[:12]}_{name}.log"
    try:
        fresh = rerun_records(entry["config"], iterations, log, root=code)
    except RuntimeError:
        return {"commit": commit, "iterations": iterations, "bit_exact": None, "problem": f"the re-run failed: {log}"}
    n, worst = strict_compare(read_metrics(kept), fresh, iterations)
    return {
        "commit": commit,
        "iterations": iterations,
        "records": n,
        "bit_exact": worst is None and n > 0,
        "worst": None if worst is None else {"relative": worst[0], "field": worst[1]},
    }


def verify_at(args: argparse.Namespace, rev: str, iterations: int) -> int:
    """Verify the finished runs of the block in ``args.runs`` (those of ``args.methods`` and
    ``args.seeds``, each with the config it recorded) at commit ``rev``; prints one line per
    run and a summary, writes ``verified.json``. 0 when every run is bit-exact there, 1 otherwise."""
    commit = resolve_commit(rev)
    entries = []  # the finished runs of the block, each with the config it recorded
    for method in args.methods:
        for seed in args.seeds:
            kept = args.runs / run_name(method, seed, args.state_key)
            if (kept / "summary.md").exists():
                entries.append(
                    {
                        "method": method,
                        "seed": seed,
                        "state_key": args.state_key,
                        "config": load_run(kept, method, seed)[1],
                    }
                )
    if not entries:
        raise LabError(f"no finished run of {', '.join(args.methods)} under {args.runs}")
    code = worktree_at(commit)
    args.work.mkdir(parents=True, exist_ok=True)
    verdicts = verified_commits(args.out)
    lock = threading.Lock()
    todo = [
        e
        for e in entries
        if not _done(verdicts.get(run_name(e["method"], e["seed"], e["state_key"])), commit, iterations)
    ]
    print(f"verifying {len(todo)} of {len(entries)} runs at {commit[:12]} ({iterations} iterations each)", flush=True)

    def one(entry: dict) -> None:
        name = run_name(entry["method"], entry["seed"], entry["state_key"])
        verdict = _verify_one(entry, args.runs, code, commit, iterations, args.work)
        with lock:
            verdicts[name] = verdict
            (args.out / VERIFIED_NAME).write_text(json.dumps({"runs": dict(sorted(verdicts.items()))}, indent=1))
        print(f"  {name}: {_describe(verdict)}", flush=True)

    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        list(pool.map(one, todo))
    mine = {
        run_name(e["method"], e["seed"], e["state_key"]): verdicts.get(run_name(e["method"], e["seed"], e["state_key"]))
        for e in entries
    }
    exact = sorted(k for k, v in mine.items() if v and v.get("bit_exact"))
    other = sorted(k for k in mine if k not in exact)
    print(
        f"{len(exact)} of {len(mine)} runs bit-exact at {commit[:12]}; to re-run in full there: "
        f"{', '.join(other) if other else 'none'}"
    )
    return 0 if not other else 1


def _done(verdict: dict | None, commit: str, iterations: int) -> bool:
    """Whether ``verdict`` already says what this verification would (same commit and length)."""
    if not verdict:
        return False
    return (
        verdict.get("commit") == commit
        and verdict.get("iterations") == iterations
        and verdict.get("bit_exact") is not None
    )


def _describe(verdict: dict[str, Any]) -> str:
    if verdict.get("bit_exact") is None:
        return f"not verified ({verdict.get('problem')})"
    if verdict["bit_exact"]:
        return f"bit-exact ({verdict['records']} records)"
    worst = verdict.get("worst") or {}
    return (
        f"NOT bit-exact: largest relative difference {worst.get('relative', float('nan')):.3g} in {worst.get('field')}"
    )
