"""A training run owns its output directory: an exclusive lock, a manifest, and no silent overwrite.

:func:`claim_run_dir` is called before a run writes anything:

* it takes an exclusive ``fcntl`` lock on ``<run_dir>/.lock`` (held until :meth:`RunDirLock.release`
  or process exit) and writes the holder's PID into it; a second run on the same directory
  gets :class:`RunDirError` naming that PID;
* a fresh run (no resume) refuses a directory that already holds a run's files (metrics,
  checkpoints, report) unless ``overwrite`` is set; ``overwrite`` then removes the files an
  earlier run of this package wrote, and only those, saying which (and which it keeps);
* a fresh run never replaces a file it did not write: a ``config.yaml`` of the user's in the
  directory is refused in one line, with or without ``overwrite``.

A run records its identity (``run_id``) and every file it writes in ``<run_dir>/.progpo-run.json``
(:class:`RunManifest`); checkpoints carry the same ``run_id``, so a checkpoint of one run is never
resumed into the directory of another. A directory written before manifests existed is read by
the run's own name patterns (``checkpoints/iter_NNNNNN.pt``, ``metrics.jsonl`` records, ...).

Example:
    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> lock = claim_run_dir(d, resume=False)
    >>> try:
    ...     claim_run_dir(d, resume=False)
    ... except RunDirError as err:
    ...     print(str(err).split(" (")[0])
    output dir ... is in use by another run
    >>> lock.release()
    >>> RunManifest.load(d).record("metrics.jsonl")
    >>> _ = open(d + "/metrics.jsonl", "w").write('{"iteration": 0}\\n')
    >>> try:
    ...     claim_run_dir(d, resume=False)
    ... except RunDirError as err:
    ...     print("--overwrite" in str(err), "--resume" in str(err))
    True True
    >>> claim_run_dir(d, resume=False, overwrite=True, say=lambda line: None).release()
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from trainers.runs.run_files import LinkedPathError, open_nofollow, write_atomic
from wrappers.errors import UserError

__all__ = [
    "MANIFEST_NAME",
    "RUN_FILES",
    "RunDirError",
    "RunDirLock",
    "RunManifest",
    "RunSection",
    "claim_run_dir",
    "earlier_run_files",
]

#: What a run writes into its output directory (top-level names).
RUN_FILES = (
    "metrics.jsonl",
    "checkpoints",
    "tensorboard",
    "summary.md",
    "curves.png",
    "config.yaml",
    "provenance.jsonl",
)
#: The top-level files a run writes whole: one of these that no run wrote is never replaced.
_REPLACED = ("metrics.jsonl", "summary.md", "curves.png", "config.yaml", "provenance.jsonl")

LOCK_NAME = ".lock"
MANIFEST_NAME = ".progpo-run.json"
MANIFEST_FORMAT = "progpo-run-v1"
#: a manifest lists a run's files (about 40 bytes each): one larger than this is not a run's
MANIFEST_MAX_BYTES = 8 << 20
#: checkpoint files by name (legacy directories without a manifest)
_CHECKPOINT_NAME = re.compile(r"^(iter_\d{6}\.pt(\.sha256)?(\.tmp)?|latest(\.tmp)?)$")


class RunDirError(UserError, RuntimeError):
    """The output directory is unusable, held by another run, or holds files a run would destroy."""


def _os_problem(run_dir: Path, err: OSError) -> RunDirError:
    reason = err.strerror or type(err).__name__
    if err.errno == errno.EROFS:
        reason = "read-only file system"
    return RunDirError(f"cannot use output dir {run_dir}: {reason}; pick another --output-dir")


class RunDirLock:
    """An exclusive advisory lock on ``<run_dir>/.lock`` (released on :meth:`release` or exit)."""

    def __init__(self, run_dir: Path) -> None:
        import fcntl  # POSIX only: imported where the lock is taken, not where the module is read

        self.path = run_dir / LOCK_NAME
        try:  # a planted link at .lock is refused, never followed (the PID would land in its target)
            self._fh = open_nofollow(self.path, "r+")
        except LinkedPathError:
            raise
        except OSError as err:
            raise _os_problem(run_dir, err) from None
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            self._fh.seek(0)
            holder = self._fh.read().strip() or "unknown"
            self._fh.close()
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunDirError(
                    f"output dir {run_dir} is in use by another run (pid {holder}); wait for it "
                    "to finish or pick another --output-dir"
                ) from None
            raise _os_problem(run_dir, err) from None
        try:
            self._fh.seek(0)
            self._fh.truncate()
            self._fh.write(f"{os.getpid()}\n")
            self._fh.flush()
        except OSError as err:
            self._fh.close()
            raise _os_problem(run_dir, err) from None

    def release(self) -> None:
        if not self._fh.closed:
            self._fh.close()  # closing the descriptor drops the flock

    def __enter__(self) -> "RunDirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True)
class RunSection:
    """What the run dir's stages (:class:`trainers.runs.records.RunRecorder`,
    :class:`trainers.runs.run_checkpoints.RunCheckpoints`) read.

    Attributes:
        output_dir: the run dir. iterations: the run's iterations (the bar, the console line).
        trackers: where the records go beside ``metrics.jsonl`` (``tensorboard``, ``wandb``).
        progress_bars: whether a bar is drawn.
        seed: the run's seed (a checkpoint's env schedule). lora: whether only the adapter is saved.
        config: the whole configuration as flat fields (what a checkpoint holds, what a resume
            compares, what the provenance and the report read); a snapshot, not to be changed.
        sections: the same in sections (``config.yaml``).
    """

    output_dir: str
    iterations: int
    trackers: tuple[str, ...]
    progress_bars: bool
    seed: int
    lora: bool
    config: Mapping[str, Any]
    sections: Mapping[str, Any]


@dataclass
class RunManifest:
    """A run's identity and the files it wrote, ``<run_dir>/.progpo-run.json``.

    >>> import tempfile
    >>> m = RunManifest.create(tempfile.mkdtemp())
    >>> m.record("metrics.jsonl", "checkpoints/iter_000000.pt")
    >>> RunManifest.load(m.run_dir).files == {"metrics.jsonl", "checkpoints/iter_000000.pt"}
    True
    """

    run_dir: Path
    run_id: str
    files: set[str] = field(default_factory=set)

    @property
    def path(self) -> Path:
        return self.run_dir / MANIFEST_NAME

    @classmethod
    def create(cls, run_dir: str | Path, run_id: str | None = None) -> "RunManifest":
        """A new manifest (a fresh ``run_id`` unless given), written at once."""
        manifest = cls(Path(run_dir), run_id or uuid.uuid4().hex)
        manifest.save()
        return manifest

    @classmethod
    def load(cls, run_dir: str | Path) -> "RunManifest | None":
        """The manifest of ``run_dir`` (``None`` when there is none); a damaged one raises :class:`RunDirError`."""
        run_dir = Path(run_dir)
        path = run_dir / MANIFEST_NAME
        if not path.is_symlink() and not path.exists():
            return None
        if path.is_symlink() or not path.is_file():  # what it lists would be deleted by --overwrite: refuse first
            kind = "a symbolic link" if path.is_symlink() else "a folder" if path.is_dir() else "not a regular file"
            raise RunDirError(f"{path} is {kind}, not a run's manifest; remove it or pick another --output-dir")
        try:
            with path.open("rb") as fh:
                raw = fh.read(MANIFEST_MAX_BYTES + 1)
            if len(raw) > MANIFEST_MAX_BYTES:
                raise RunDirError(
                    f"{path} is over {MANIFEST_MAX_BYTES >> 20} MiB, far more than a run's manifest; "
                    "remove it or pick another --output-dir"
                )
            data = json.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise RunDirError(
                f"{path} is damaged ({type(err).__name__}); remove it or pick another --output-dir"
            ) from None
        files = data.get("files") if isinstance(data, dict) else None
        if (
            not isinstance(data, dict)
            or data.get("format") != MANIFEST_FORMAT
            or not isinstance(data.get("run_id"), str)
            or not isinstance(files, list)
            or not all(isinstance(f, str) for f in files)
        ):
            raise RunDirError(f"{path} is not a {MANIFEST_FORMAT} manifest; remove it or pick another --output-dir")
        return cls(run_dir, data["run_id"], {f for f in files if _inside(f)})

    def record(self, *paths: str | Path) -> None:
        """Add files the run wrote (paths inside ``run_dir``, absolute or relative) and save."""
        before = len(self.files)
        for p in paths:
            rel = os.path.relpath(Path(p), self.run_dir) if Path(p).is_absolute() else str(p)
            if _inside(rel):
                self.files.add(Path(rel).as_posix())
        if len(self.files) != before:
            self.save()

    def save(self) -> None:
        write_atomic(
            self.path,
            json.dumps({"format": MANIFEST_FORMAT, "run_id": self.run_id, "files": sorted(self.files)}, indent=1)
            + "\n",
        )


def _no_linked_folder(run_dir: Path, rel: str) -> bool:
    """Whether no folder on the way from ``run_dir`` to ``rel`` is a symlink: a manifest entry
    ``link/f`` whose ``link`` points outside names a file outside, which is never deleted."""
    parts = Path(rel).parts[:-1]
    return not any((run_dir.joinpath(*parts[: i + 1])).is_symlink() for i in range(len(parts)))


def _inside(rel: str) -> bool:
    """Whether ``rel`` is a relative path that stays inside the run dir."""
    parts = Path(rel).parts
    return bool(parts) and not Path(rel).is_absolute() and ".." not in parts


# ----------------------------------------------------------------- what an earlier run wrote
def _head(path: Path, size: int) -> bytes:
    """The first ``size`` bytes of ``path`` (a report or a plot is recognized by its start)."""
    with path.open("rb") as fh:
        return fh.read(size)


def _first_json_record(path: Path, is_ours: Callable[[dict], bool] = lambda r: "iteration" in r) -> bool:
    """Whether the first line of ``path`` is a JSON record a run wrote (``is_ours`` of it)."""
    try:
        with path.open("rb") as fh:
            line = fh.readline(1 << 20)
        record = json.loads(line)
    except (OSError, ValueError):
        return False
    return isinstance(record, dict) and is_ours(record)


def _config_written_by_a_run(path: Path) -> bool:
    """A ``config.yaml`` a run wrote lists (nearly) every :class:`TrainConfig` field; a user's lists a few."""
    import yaml  # the [train] extra

    # the config module loads torch and the envs: only recognising an earlier run's config needs it
    from trainers.config import ConfigError, config_fields, flatten_sections

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")[: 1 << 20])
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return False
    names = {f.name for f in config_fields()}
    if not isinstance(data, dict):
        return False
    try:  # written in sections since they exist; flat before
        data = flatten_sections(data, warn=False)
    except ConfigError:
        return False
    return set(data) <= names and len(data) >= 0.9 * len(names)


def _legacy_run_files(run_dir: Path) -> list[Path]:
    """Files of a run written before manifests existed, by the run's own names and formats.

    TensorBoard event files are not among them: another tool writes the same names.
    """
    found: list[Path] = []
    checks: dict[str, Callable[[Path], bool]] = {
        "metrics.jsonl": _first_json_record,
        "provenance.jsonl": lambda p: _first_json_record(p, lambda r: r.get("kind") == "provenance"),
        "config.yaml": _config_written_by_a_run,
        "summary.md": lambda p: _head(p, 64).startswith(b"# ProGPO run report"),
        "curves.png": lambda p: _head(p, 200).startswith(b"\x89PNG") and b"Matplotlib" in _head(p, 200),
    }
    for name, is_ours in checks.items():
        p = run_dir / name
        try:
            if p.is_file() and not p.is_symlink() and is_ours(p):
                found.append(p)
        except OSError:
            continue
    ckpt = run_dir / "checkpoints"
    if ckpt.is_dir() and not ckpt.is_symlink():
        found += sorted(p for p in ckpt.iterdir() if p.is_file() and _CHECKPOINT_NAME.match(p.name))
    return found


def earlier_run_files(run_dir: str | Path) -> tuple[list[Path], list[Path]]:
    """(files an earlier run of this package wrote that still exist, files of the run's top-level
    names that no run wrote). The manifest says which a run wrote; without one, the name patterns do."""
    run_dir = Path(run_dir)
    manifest = RunManifest.load(run_dir)
    if manifest is not None:
        ours = sorted(
            run_dir / f
            for f in manifest.files
            if _no_linked_folder(run_dir, f) and ((run_dir / f).is_file() or (run_dir / f).is_symlink())
        )
    else:
        ours = _legacy_run_files(run_dir)
    names = {p.relative_to(run_dir).as_posix() for p in ours}
    foreign = [
        run_dir / n for n in _REPLACED if n not in names and ((run_dir / n).exists() or (run_dir / n).is_symlink())
    ]
    return ours, foreign


def _describe(run_dir: Path, paths: list[Path]) -> str:
    """``metrics.jsonl, checkpoints/ (3 files)``: top-level files by name, folders by count."""
    tops: dict[str, int] = {}
    for p in paths:
        parts = p.relative_to(run_dir).parts
        key = parts[0] + ("/" if len(parts) > 1 else "")
        tops[key] = tops.get(key, 0) + 1
    return ", ".join(k if not k.endswith("/") else f"{k} ({n} file{'s' * (n != 1)})" for k, n in tops.items())


def _foreign_in_run_folders(run_dir: Path, ours: list[Path]) -> list[Path]:
    mine = set(ours)
    left: list[Path] = []
    for folder in ("checkpoints", "tensorboard"):
        d = run_dir / folder
        if d.is_dir() and not d.is_symlink():
            left += sorted(p for p in d.rglob("*") if (p.is_file() or p.is_symlink()) and p not in mine)
    return left


def _remove(run_dir: Path, ours: list[Path]) -> None:
    for p in ours:
        p.unlink(missing_ok=True)
    for folder in ("checkpoints", "tensorboard"):  # emptied folders go too; a folder with others' files stays
        d = run_dir / folder
        if d.is_dir() and not d.is_symlink():
            for sub in sorted((q for q in d.rglob("*") if q.is_dir()), key=lambda q: len(q.parts), reverse=True):
                with contextlib.suppress(OSError):  # a folder that still holds others' files stays
                    sub.rmdir()
            with contextlib.suppress(OSError):
                d.rmdir()
    (run_dir / MANIFEST_NAME).unlink(missing_ok=True)


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def claim_run_dir(
    run_dir: str | Path, resume: bool, overwrite: bool = False, say: Callable[[str], None] = _say
) -> RunDirLock:
    """Lock ``run_dir`` for this run; refuse (or with ``overwrite`` clear) an earlier run's files.

    A fresh run then starts a new :class:`RunManifest`. ``say``: where ``overwrite`` says what it
    removes and keeps (stderr).

    Raises:
        RunDirError: the path cannot be a run directory (a file, a dangling link, read-only, ...),
            another process holds it, a fresh run without ``overwrite`` finds an earlier run's
            files, or it holds a ``config.yaml`` / ``summary.md`` / ... that no run wrote; the
            message says what to do.
    """
    run_dir = Path(run_dir)
    if run_dir.is_symlink() and not run_dir.exists():
        raise RunDirError(
            f"output dir {run_dir} is a symlink to {os.readlink(run_dir)}, which does not exist; "
            "create its target or pick another --output-dir"
        )
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"output dir {run_dir} exists and is not a directory")
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise _os_problem(run_dir, err) from None
    lock = RunDirLock(run_dir)
    try:
        if not resume:
            _clear_for_fresh_run(run_dir, overwrite, say)
            try:
                RunManifest.create(run_dir)
            except OSError as err:
                raise _os_problem(run_dir, err) from None
    except BaseException:
        lock.release()
        raise
    return lock


def _clear_for_fresh_run(run_dir: Path, overwrite: bool, say: Callable[[str], None]) -> None:
    ours, foreign = earlier_run_files(run_dir)
    if foreign:
        names = ", ".join(p.name for p in foreign)
        raise RunDirError(
            f"output dir {run_dir} holds {names}, which no run of this trainer wrote and a run would "
            "replace; move it or pick another --output-dir"
        )
    if ours and not overwrite:
        raise RunDirError(
            f"output dir {run_dir} already holds a run ({_describe(run_dir, ours)}); pass --overwrite "
            "to replace it, --resume to continue it, or pick another --output-dir"
        )
    if ours:
        kept = _foreign_in_run_folders(run_dir, ours)
        line = f"--overwrite: removing the earlier run's files in {run_dir}: {_describe(run_dir, ours)}"
        if kept:
            line += f"; keeping files no run wrote: {_describe(run_dir, kept)}"
        say(line)
        try:
            _remove(run_dir, ours)
        except OSError as err:
            raise _os_problem(run_dir, err) from None
