"""A training run owns its output directory: an exclusive lock, and no silent overwrite.

:func:`claim_run_dir` is called before a run writes anything:

* it takes an exclusive ``fcntl`` lock on ``<run_dir>/.lock`` (held until :meth:`RunDirLock.release`
  or process exit) and writes the holder's PID into it; a second run on the same directory
  gets :class:`RunDirError` naming that PID;
* a fresh run (no resume) refuses a directory that already holds a run's files (metrics,
  checkpoints, report) unless ``overwrite`` is set; ``overwrite`` then removes those files, and
  only those, before the run starts.

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
    >>> _ = open(d + "/metrics.jsonl", "w").write("{}\\n")
    >>> try:
    ...     claim_run_dir(d, resume=False)
    ... except RunDirError as err:
    ...     print("--overwrite" in str(err), "--resume" in str(err))
    True True
    >>> claim_run_dir(d, resume=False, overwrite=True).release()
"""
from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

__all__ = ["RUN_FILES", "RunDirError", "RunDirLock", "claim_run_dir"]

#: What a run writes into its output directory; ``overwrite`` removes exactly these.
RUN_FILES = ("metrics.jsonl", "checkpoints", "tensorboard", "summary.md", "curves.png", "config.yaml")

LOCK_NAME = ".lock"


class RunDirError(RuntimeError):
    """The output directory is held by another run, or holds a run a fresh start would destroy."""


class RunDirLock:
    """An exclusive advisory lock on ``<run_dir>/.lock`` (released on :meth:`release` or exit)."""

    def __init__(self, run_dir: Path) -> None:
        import fcntl

        self.path = run_dir / LOCK_NAME
        self._fh = open(self.path, "a+")  # noqa: SIM115 - held open for the lifetime of the run
        try:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            self._fh.seek(0)
            holder = self._fh.read().strip() or "unknown"
            self._fh.close()
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise RunDirError(f"output dir {run_dir} is in use by another run (pid {holder}); wait for it "
                                  "to finish or pick another --output-dir") from None
            raise
        self._fh.seek(0)
        self._fh.truncate()
        self._fh.write(f"{os.getpid()}\n")
        self._fh.flush()

    def release(self) -> None:
        if not self._fh.closed:
            self._fh.close()  # closing the descriptor drops the flock

    def __enter__(self) -> "RunDirLock":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def existing_run_files(run_dir: Path) -> list[str]:
    """The names of :data:`RUN_FILES` present in ``run_dir`` (empty ones ignored)."""
    found = []
    for name in RUN_FILES:
        p = run_dir / name
        if p.is_dir() and any(p.iterdir()):
            found.append(name + "/")
        elif p.is_file() and p.stat().st_size > 0:
            found.append(name)
    return found


def claim_run_dir(run_dir: str | Path, resume: bool, overwrite: bool = False) -> RunDirLock:
    """Lock ``run_dir`` for this run; refuse (or with ``overwrite`` clear) an earlier run's files.

    Raises:
        RunDirError: another process holds the directory, or a fresh run without ``overwrite``
            finds an earlier run's files; the message says which flag to pass.
    """
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise RunDirError(f"output dir {run_dir} exists and is not a directory")
    run_dir.mkdir(parents=True, exist_ok=True)
    lock = RunDirLock(run_dir)
    try:
        if not resume:
            found = existing_run_files(run_dir)
            if found and not overwrite:
                raise RunDirError(f"output dir {run_dir} already holds a run ({', '.join(found)}); pass --overwrite "
                                  "to replace it, --resume to continue it, or pick another --output-dir")
            for name in RUN_FILES if overwrite else ():
                p = run_dir / name
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p)
                elif p.exists() or p.is_symlink():
                    p.unlink()
    except BaseException:
        lock.release()
        raise
    return lock
