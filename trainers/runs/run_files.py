"""Writing a run's files without following a planted symbolic link.

An output directory may sit in a folder others can write to (a shared scratch disk). A symlink
planted there under a name the run writes (``.lock``, ``metrics.jsonl``, ``checkpoints/``, a
``.tmp`` file) would make an ordinary ``open(path, "w")`` write, truncate or, through a folder,
delete a file outside the directory. Every file a run writes therefore goes through these calls:

* :func:`open_nofollow` opens a file for writing or appending with ``O_NOFOLLOW``: a symlink in
  the last place is refused (:class:`LinkedPathError`), never followed, even when it is planted
  after any check;
* :func:`create_fresh` makes a new file where a link or file may lie: that entry is removed, not
  followed, and the file is created exclusively;
* :func:`write_atomic` writes a file whole through such a fresh temp file, then renames it over
  the target: a rename replaces a link, it never writes through it;
* :func:`real_dir` makes (or accepts) a folder of the run and refuses one that is a symlink.

The output directory itself may be a symlink the user made (a run dir on another disk): only
the names inside it are checked.

>>> import os, tempfile
>>> d = tempfile.mkdtemp()
>>> write_atomic(os.path.join(d, "a.txt"), "one\\n")
>>> os.symlink(os.path.join(d, "a.txt"), os.path.join(d, "b.txt"))
>>> try:
...     open_nofollow(os.path.join(d, "b.txt"), "a")
... except LinkedPathError as err:
...     print(str(err).split(":")[0].endswith("b.txt"))
True
>>> open(os.path.join(d, "a.txt")).read()
'one\\n'
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import IO, Any

from wrappers.errors import UserError

__all__ = ["LinkedPathError", "create_fresh", "open_nofollow", "real_dir", "write_atomic"]

_FLAGS = {
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "r+": os.O_RDWR | os.O_CREAT,
}


class LinkedPathError(UserError, OSError):
    """A file or folder a run writes is a symbolic link (or not a regular file): refused, never followed."""


def _refusal(path: Path, what: str = "a symbolic link") -> LinkedPathError:
    return LinkedPathError(
        f"{path}: is {what}, which a run never writes through (it could point outside the run "
        "dir); remove it and run again"
    )


def open_nofollow(path: str | Path, mode: str = "w", encoding: str | None = "utf-8") -> IO[Any]:
    """``open(path, mode)`` for ``w``, ``a``, ``r+`` (text) or ``wb``, ``ab``, ``r+b`` (binary), refusing a
    symlink or a non-regular file (a FIFO, a device) at ``path``: :class:`LinkedPathError`."""
    path = Path(path)
    binary = "b" in mode
    flags = _FLAGS[mode.replace("b", "")] | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    if path.is_symlink():  # O_NOFOLLOW below is what holds against a race; this names the case plainly
        raise _refusal(path)
    try:
        fd = os.open(path, flags | os.O_NONBLOCK, 0o644)  # non-blocking: a planted FIFO must not hang the open
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _refusal(path) from None
        if err.errno == errno.ENXIO:  # a FIFO without a reader
            raise _refusal(path, "not a regular file") from None
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise _refusal(path, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, mode) if binary else os.fdopen(fd, mode, encoding=encoding)
    except BaseException:
        os.close(fd)
        raise


def create_fresh(path: str | Path) -> IO[bytes]:
    """A new empty file at ``path``, open for binary writing: whatever was there (a link, a file)
    is removed first, not followed, and the file is created exclusively (``O_EXCL``)."""
    path = Path(path)
    if path.is_symlink() or path.exists():
        if path.is_dir() and not path.is_symlink():
            raise _refusal(path, "a folder")
        path.unlink()
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except FileExistsError:  # planted again between the unlink and the open
        raise _refusal(path, "a file that appeared while it was being replaced") from None
    return os.fdopen(fd, "wb")


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``path`` whole: a fresh ``<name>.tmp`` beside it (:func:`create_fresh`), then a
    rename over ``path`` (which replaces a link there, never writes through it)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    try:
        with create_fresh(tmp) as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
    except BaseException:
        if not tmp.is_symlink():
            tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)


def real_dir(path: str | Path) -> Path:
    """``path`` as a folder of the run: made when absent (with its parents); a symlink there, or a
    file, is refused (:class:`LinkedPathError`)."""
    path = Path(path)
    if path.is_symlink():
        raise LinkedPathError(
            f"{path}: is a symbolic link, which a run never writes through (it could point outside "
            "the run dir); remove it and run again (to keep a run's files on another disk, give "
            "that disk's path, or a link to it, as --output-dir)"
        )
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a file there, or on the way
        raise _refusal(path, "not a folder") from None
    if path.is_symlink() or not path.is_dir():  # a link planted since the check above
        raise _refusal(path, "not a folder")
    return path


def check_output_file(path: str | Path, flag: str) -> Path:
    """``path`` as a file a command will write at its end, checked before the work that fills it:
    a one-line :class:`~wrappers.errors.UserError` when it is a folder, lies under a file or in a
    folder that does not exist, or cannot be written."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{flag} {p} is a folder; name a file")
    parent = p.absolute().parent
    if not parent.exists():
        raise UserError(f"{flag} {p}: folder {parent} does not exist")
    if not parent.is_dir():
        raise UserError(f"{flag} {p}: {parent} is a file, not a folder")
    if not os.access(p if p.exists() else parent, os.W_OK):
        raise UserError(f"{flag} {p} cannot be written (read-only)")
    return p


def check_can_make(path: str | Path, said: str) -> None:
    """That the folder ``path`` can be made (or written, where it exists): its nearest existing
    ancestor is a folder, and a writable one; else a one-line :class:`~wrappers.errors.UserError`
    that starts with ``said``."""
    above = Path(path).absolute()
    while not above.exists() and above != above.parent:
        above = above.parent
    if not above.is_dir():
        raise UserError(f"{said}: {above} is a file, not a folder")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UserError(f"{said}: {above} is not writable")
