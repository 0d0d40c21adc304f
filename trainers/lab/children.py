"""The lab's trainer processes, stopped with the lab.

A lab runs each (method, seed) as a ``python -m trainers.progpo`` child. A SIGTERM (or Ctrl-C)
to the lab is forwarded to every live child, which checkpoints and exits as a trainer does on
its own stop, and no queued run starts after it: a stopped lab leaves no trainer behind, and
the next ``python -m trainers.lab`` resumes each run from its checkpoint.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import threading
from typing import Any, Iterator, Sequence

__all__ = ["LabStopped", "raise_if_stopping", "run_child", "stops_forwarded"]

_LIVE: set[subprocess.Popen[bytes]] = set()
_LOCK = threading.Lock()
_STOPPING = threading.Event()


class LabStopped(RuntimeError):
    """The lab was stopped (SIGTERM or Ctrl-C) before or while this run ran."""


def raise_if_stopping() -> None:
    """:class:`LabStopped` once the lab is stopping (a run about to start checks it first)."""
    if _STOPPING.is_set():
        raise LabStopped("the lab was stopped before this run started")


def run_child(cmd: Sequence[str], **popen: Any) -> int:
    """Run ``cmd`` to its end (``popen``: :class:`subprocess.Popen`'s options); its exit status.
    :class:`LabStopped` when the lab is stopping, before it starts or once it has stopped."""
    with _LOCK:
        if _STOPPING.is_set():
            raise LabStopped("the lab was stopped before this run started")
        proc = subprocess.Popen(list(cmd), **popen)
        _LIVE.add(proc)
    try:
        rc = proc.wait()
    finally:
        with _LOCK:
            _LIVE.discard(proc)
    if _STOPPING.is_set():
        raise LabStopped(f"the lab was stopped; this run exited with {rc} after its checkpoint")
    return rc


def _forward(signum: int) -> None:
    """Send ``signum`` to every live child and wait for each (a minute, then SIGKILL)."""
    with _LOCK:
        _STOPPING.set()
        live = list(_LIVE)
    for proc in live:
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(signum)
    for proc in live:
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def stops_forwarded() -> Iterator[None]:
    """Within: a SIGTERM to the lab stops its children first, then the lab (exit status 143);
    a Ctrl-C likewise (``KeyboardInterrupt``). Only the main thread installs handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_term(signum: int, frame: Any) -> None:
        _forward(signum)
        raise SystemExit(128 + signum)

    old_term = signal.signal(signal.SIGTERM, on_term)
    try:
        yield
    except KeyboardInterrupt:
        _forward(signal.SIGINT)
        raise
    finally:
        signal.signal(signal.SIGTERM, old_term)
        _STOPPING.clear()
