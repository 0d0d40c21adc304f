"""Where and when a run ran: the code (commit and whether it had uncommitted changes or untracked
files), the host, the machine, the library versions, the compute path and the wall-clock start,
recorded in the run's ``provenance.jsonl``: a line when a process starts the run, one more when a
process resumes it with anything of that changed, and an ``end`` line with the UTC time when the
run's last iteration is done (:func:`append_end`).

Two runs compared side by side should differ only in what is compared: a paired difference across
code versions or compute paths (a packed forward pass or one pass per decision, 1 or 2 threads)
measures those too. The credit-trap lab reads these records and refuses to pair runs whose commit
or compute path differ (``python -m trainers.lab --allow-mixed`` overrides it, labelled).

>>> rec = provenance_record(1, {"batch_decisions": "on", "torch_threads": 1, "device": "cpu"})
>>> rec["kind"], rec["iteration"], sorted(rec["compute"])[:3], rec["dirty"] in (True, False, None)
('provenance', 1, ['backend', 'batch_decisions', 'bf16'], True)
>>> rec["started"].endswith("Z"), bool(rec["host"])
(True, True)
>>> compute_path({"batch_decisions": "off", "torch_threads": 2})["torch_threads"]
2
"""

from __future__ import annotations

import datetime
import hashlib
import importlib.util
import json
import platform
import socket
import subprocess
from importlib import metadata
from pathlib import Path
from typing import Any, Mapping, Sequence

from trainers.runs.run_files import open_nofollow

__all__ = [
    "COMPUTE_FIELDS",
    "FILE_NAME",
    "append_end",
    "append_provenance",
    "append_resume",
    "compute_path",
    "git_state",
    "plugin_changes",
    "plugin_files",
    "provenance_record",
    "read_provenance",
    "run_times",
    "utc_now",
]

FILE_NAME = "provenance.jsonl"

#: config fields that choose how the numbers are computed, not what is computed
COMPUTE_FIELDS = (
    "batch_decisions",
    "torch_threads",
    "eval_streams",
    "rollout_streams",
    "device",
    "bf16",
    "backend",
    "env_backend",
    "micro_batch_size",
    "micro_batch_tokens",
)
ROOT = Path(__file__).resolve().parents[1]


def git_state(root: str | Path = ROOT) -> tuple[str | None, bool | None]:
    """(commit, dirty) of the checkout at ``root``: ``dirty`` when a tracked file differs from the
    commit or a file git does not ignore is untracked (a new module imported by the run would
    otherwise pass as the commit's code); ``(None, None)`` outside a git checkout (an installed
    package)."""

    def git(*args: str) -> str | None:
        try:
            out = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None, None
    status = git("status", "--porcelain", "--untracked-files=normal")
    return commit.strip(), (None if status is None else bool(status.strip()))


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _versions() -> dict[str, str | None]:

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in ("torch", "transformers", "numpy"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def utc_now() -> str:
    """The wall-clock time in UTC, ISO 8601 to the second (``2026-12-06T16:32:26Z``)."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compute_path(config: Mapping[str, Any]) -> dict[str, Any]:
    """The config's compute-path fields (:data:`COMPUTE_FIELDS`), ``None`` where it has none."""
    return {k: config.get(k) for k in COMPUTE_FIELDS}


def provenance_record(iteration: int, config: Mapping[str, Any], root: str | Path = ROOT) -> dict[str, Any]:
    """The ``provenance`` record of a process that starts (or resumes) a run at ``iteration``; a
    run with plug-ins records each one's file and SHA-256 (:func:`plugin_files`): they are code
    outside the commit."""
    commit, dirty = git_state(root)
    rec = {
        "iteration": int(iteration),
        "kind": "provenance",
        "commit": commit,
        "dirty": dirty,
        "host": socket.gethostname(),
        "started": utc_now(),
        "cpu": _cpu_model(),
        "versions": _versions(),
        "compute": compute_path(config),
    }
    plugins = config.get("plugins") or []
    if plugins:
        rec["plugins"] = plugin_files(plugins)
    return rec


def plugin_files(specs: Sequence[str]) -> list[dict[str, Any]]:
    """Each plug-in's resolved file and the SHA-256 of its bytes (``None`` where it has no file).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "p.py"); _ = open(path, "w").write("x = 1")
    >>> [r["sha256"][:12] for r in plugin_files([path])]
    ['8ff436def145']
    """
    out = []
    for spec in specs:
        path: Path | None = Path(spec) if str(spec).endswith(".py") else None
        if path is None:
            try:
                found = importlib.util.find_spec(str(spec))
            except (ImportError, ValueError):
                found = None
            path = Path(found.origin) if found is not None and found.origin and found.has_location else None
        try:
            digest = hashlib.sha256(path.read_bytes()).hexdigest() if path is not None else None
        except OSError:
            digest = None
        out.append({"plugin": str(spec), "path": str(path.resolve()) if path is not None else None, "sha256": digest})
    return out


def plugin_changes(records: list[dict[str, Any]], config: Mapping[str, Any]) -> list[str]:
    """How the plug-ins of ``config`` differ from those the run's last process recorded (a file
    changed, added or gone), one phrase each; ``[]``: the same code.

    >>> plugin_changes([{"kind": "provenance"}], {"plugins": []})
    []
    """
    past = [r for r in records if r.get("kind") == "provenance"]
    before = {p["plugin"]: p for p in (past[-1].get("plugins") or [])} if past else {}
    now = {p["plugin"]: p for p in plugin_files(config.get("plugins") or [])}
    out = []
    for name in sorted(set(before) | set(now)):
        was, new = before.get(name), now.get(name)
        if was is None:
            out.append(f"{name} added")
        elif new is None:
            out.append(f"{name} gone")
        elif was.get("sha256") != new.get("sha256"):
            out.append(f"{name} changed (sha256 {str(was.get('sha256'))[:12]} -> {str(new.get('sha256'))[:12]})")
    return out


def append_resume(run_dir: str | Path, iteration: int, accepted: Sequence[str] = ()) -> dict[str, Any]:
    """Append the ``resume`` line of a process that continues the run after ``iteration``: when
    and where, and the plug-in changes the user accepted (``--accept-plugin-change``)."""
    rec: dict[str, Any] = {
        "iteration": int(iteration),
        "kind": "resume",
        "started": utc_now(),
        "host": socket.gethostname(),
    }
    if accepted:
        rec["plugin_changes_accepted"] = list(accepted)
    _append(run_dir, rec)
    return rec


def read_provenance(run_dir: str | Path) -> list[dict[str, Any]]:
    """The records of ``run_dir/provenance.jsonl``, ``end`` lines included (``[]`` for a run from
    before they were written)."""
    path = Path(run_dir) / FILE_NAME
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            break  # a torn last line
        if isinstance(rec, dict):
            out.append(rec)
    return out


def append_provenance(run_dir: str | Path, iteration: int, config: Mapping[str, Any]) -> dict[str, Any] | None:
    """Append this process's record to ``run_dir/provenance.jsonl`` unless it equals the last one
    but for the iteration and start time; returns what was appended.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> append_provenance(d, 0, {"torch_threads": 1})["iteration"], append_provenance(d, 3, {"torch_threads": 1})
    (0, None)
    >>> append_provenance(d, 5, {"torch_threads": 2})["compute"]["torch_threads"], len(read_provenance(d))
    (2, 2)
    """
    rec = provenance_record(iteration, config)
    past = [r for r in read_provenance(run_dir) if r.get("kind") == "provenance"]
    if past and all(past[-1].get(k) == v for k, v in rec.items() if k not in ("iteration", "started")):
        return None
    _append(run_dir, rec)
    return rec


def append_end(run_dir: str | Path, iteration: int) -> dict[str, Any]:
    """Append the ``end`` line of a run whose last iteration (``iteration``) is done: when and
    where it ended.

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> _ = append_provenance(d, 0, {}); end = append_end(d, 3)
    >>> end["kind"], end["iteration"], run_times(read_provenance(d))["ended"] == end["ended"]
    ('end', 3, True)
    """
    rec = {"iteration": int(iteration), "kind": "end", "ended": utc_now(), "host": socket.gethostname()}
    _append(run_dir, rec)
    return rec


def run_times(records: list[dict[str, Any]]) -> dict[str, Any]:
    """When and where a run ran, from its ``provenance.jsonl`` records: ``started`` (its first
    process's start), ``ended`` (its last ``end`` line) and ``hosts`` (every host, in order), each
    only where recorded (runs from before times were written have none).

    >>> run_times([{"kind": "provenance", "started": "A", "host": "h1"}, {"kind": "provenance", "started": "B",
    ...            "host": "h2"}, {"kind": "end", "ended": "C", "host": "h2"}])
    {'started': 'A', 'ended': 'C', 'hosts': ['h1', 'h2']}
    >>> run_times([{"kind": "provenance", "commit": "x"}])
    {}
    """
    starts = [r["started"] for r in records if r.get("kind") == "provenance" and r.get("started")]
    ends = [r["ended"] for r in records if r.get("kind") == "end" and r.get("ended")]
    hosts = list(dict.fromkeys(str(r["host"]) for r in records if r.get("host")))
    out: dict[str, Any] = {}
    if starts:
        out["started"] = starts[0]
    if ends:
        out["ended"] = ends[-1]
    if hosts:
        out["hosts"] = hosts
    return out


def _append(run_dir: str | Path, rec: dict[str, Any]) -> None:
    with open_nofollow(Path(run_dir) / FILE_NAME, "a") as fh:
        fh.write(json.dumps(rec) + "\n")
