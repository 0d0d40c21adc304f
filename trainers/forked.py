"""Shares of one piece of work run side by side: the first here, each other one in a process forked from this one.

A forked process starts as a copy of this one (the model, the policy, the config as they are),
so a share needs nothing sent to it; no two shares then contend for one interpreter lock, which
is what keeps threads apart on a small CPU model, where the env steps, prompts and tries are
Python. Only the results travel back (pickled). The model must be on the CPU: a forked process
cannot use CUDA. Python 3.12+ warns that forking a process with threads may deadlock the child
(a lock another thread held at the fork stays held there); the threads of a run are torch's
intra-op pool, whose size the share sets again, and whatever the caller started (a progress bar's
monitor): a share that took one of their locks would hang, which the tests, on 3.11 and 3.13,
have not seen.

    >>> import os
    >>> def share(k):
    ...     def job(step):
    ...         step(k + 1)
    ...         return k * 10, os.getpid()
    ...     return job
    >>> counted = []
    >>> out = run_forked([share(k) for k in range(3)], on_step=counted.append, threads=1)
    >>> [r for r, _ in out], out[0][1] == os.getpid(), len({pid for _, pid in out}), sorted(counted)
    ([0, 10, 20], True, 3, [1, 2, 3])
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing
import pickle
import signal
import sys
from typing import Any, Callable, Sequence

from trainers import stop_request
from wrappers.errors import UserError

__all__ = ["ShareKilled", "can_fork", "run_forked"]

#: a share: called with ``step(n)`` (n env steps done, for a progress bar), returns its result
Job = Callable[[Callable[[int], None]], Any]


def can_fork() -> bool:
    """Whether this platform starts processes by ``fork`` (Linux, macOS; not Windows)."""

    return "fork" in multiprocessing.get_all_start_methods()


def run_forked(
    jobs: Sequence[Job],
    on_step: Callable[[int], None] | None = None,
    threads: int | None = None,
    name: str = "forked share",
) -> list[Any]:
    """Run ``jobs[0]`` here and each other job in a process forked from this one, each at
    ``threads`` torch threads (default: this process's threads shared out); their results, in order.

    The step counts of every job reach ``on_step`` here (the other processes' as job 0 reports
    its own, the rest once it is done). An exception raised in a forked job is raised here (as
    a ``RuntimeError`` with its text where it does not pickle); a process that dies is reported
    with its exit code (as ``name`` k); an error or interrupt here stops the processes still running. A forked
    process leaves the signal handlers of this one behind (a signal ends it) and, on Linux,
    ends when this process dies.
    """
    import torch  # the [train] extra

    if not can_fork():
        raise RuntimeError("shares in forked processes need the fork start method, which this platform lacks")
    context = multiprocessing.get_context("fork")
    threads = threads or max(1, torch.get_num_threads() // len(jobs))
    children: list[tuple[Any, Any]] = []  # (process, the end of its pipe)
    results: dict[int, Any] = {}

    def step_here(n: int) -> None:  # job 0's steps, then those the others sent meanwhile
        if on_step is not None:
            on_step(n)
        for k, child in enumerate(children, 1):
            while k not in results and child[1].poll():  # (a pipe whose writer is done polls ready for good)
                _receive(k, child, on_step, results, name)

    # the objects this process holds now stay out of every collection until the shares are done:
    # a forked process's collector then leaves the pages it shares with this one unwritten (not
    # copied), and neither process spends time walking them (Python's gc.freeze, made for fork);
    # no collection runs meanwhile, here or in a share (forked with the collector off)
    gc.freeze()
    try:
        with _collector_off():
            for k in range(1, len(jobs)):
                receive, send = context.Pipe(duplex=False)
                proc = context.Process(
                    target=_forked_body, args=(jobs[k], threads, send, name), daemon=True, name=f"{name} {k}"
                )
                # a signal mid-fork would run its handler inside an at-fork hook, which drops it:
                # held, and delivered once the process is among those stopped on one
                with stop_request.signals_held():
                    proc.start()
                    children.append((proc, receive))
                send.close()
            before = torch.get_num_threads()
            torch.set_num_threads(threads)
            try:
                results[0] = jobs[0](step_here)
            finally:
                torch.set_num_threads(before)
            for k, child in enumerate(children, 1):
                while k not in results:
                    _receive(k, child, on_step, results, name)
    finally:
        gc.unfreeze()
        for proc, conn in children:
            if proc.is_alive():  # an error or interrupt here: the others stop too
                proc.terminate()
            _join_or_kill(proc)
            conn.close()
    return [results[k] for k in range(len(jobs))]


#: seconds a share has to end after SIGTERM before it is killed
TERMINATE_GRACE_S = 10.0


def _join_or_kill(proc: Any) -> None:
    """Wait for a share to end; one that outlives SIGTERM by :data:`TERMINATE_GRACE_S` is killed.

    Python runs a signal's handler only between bytecodes, and clears signals still pending
    when a forked child starts: a share that SIGTERM reaches in its first instants of life, or
    one stuck in a lock it inherited from another thread of this process, never acts on it, and
    an unbounded join would keep a stopped run from ending.
    """
    proc.join(timeout=TERMINATE_GRACE_S if proc.is_alive() else None)
    if proc.is_alive():
        proc.kill()
        proc.join()


def _receive(
    k: int, child: tuple[Any, Any], on_step: Callable[[int], None] | None, results: dict[int, Any], name: str
) -> None:
    """Handle the next message of share ``k``: ``("step", n)``, ``("done", result)`` or ``("error", exception)``."""
    proc, conn = child
    try:
        kind, body = conn.recv()
    except EOFError:
        proc.join(timeout=5)
        raise _ended_early(f"{name} {k}", proc.exitcode) from None
    if kind == "error":
        raise body
    if kind == "done":
        results[k] = body
    elif on_step is not None:
        on_step(body)


class ShareKilled(UserError, RuntimeError):
    """A forked share was killed from outside (SIGKILL: most often the out-of-memory killer)."""


def _ended_early(who: str, exitcode: int | None) -> BaseException:
    """What a share that died before sending its result means here. A Ctrl-C or SIGTERM sent to
    the process group reaches the shares too, and may end one before this process acts on its
    own copy: the stop is then this process's stop (the run's exit 130 / 143 and resume line),
    not an error of the share.

    >>> type(_ended_early("stream 1", -2)).__name__, type(_ended_early("stream 1", -15)).__name__
    ('KeyboardInterrupt', 'Terminated')
    >>> print(_ended_early("stream 1", -9))
    stream 1 was killed (SIGKILL; the out-of-memory killer sends it when memory runs out): use fewer streams (--eval-streams, --rollout-streams) or free memory
    """

    if exitcode == -signal.SIGINT:
        return KeyboardInterrupt()
    if exitcode == -signal.SIGTERM:
        return stop_request.Terminated()
    if exitcode == -signal.SIGKILL:
        return ShareKilled(
            f"{who} was killed (SIGKILL; the out-of-memory killer sends it when memory runs out): use "
            "fewer streams (--eval-streams, --rollout-streams) or free memory"
        )
    return RuntimeError(f"{who} ended (exit code {exitcode}) before it sent its result")


def _forked_body(job: Job, threads: int, conn: Any, name: str) -> None:
    """What a forked process runs: ``job``, its step counts and then its result or error sent down ``conn``."""
    import torch  # the [train] extra

    for sig in (signal.SIGINT, signal.SIGTERM):  # not the parent's handlers (a training run's stop-and-save)
        signal.signal(sig, signal.SIG_DFL)
    for number in stop_request.held_signals():  # one that came during the fork ends this process now, as it would have
        signal.raise_signal(number)
    _end_with_parent()
    torch.set_num_threads(threads)
    try:
        message: tuple[str, Any] = ("done", job(lambda n: conn.send(("step", n))))
    except Exception as exc:  # raised again in the parent
        message = ("error", exc)
    try:
        payload = pickle.dumps(message)
        if message[0] == "error":
            pickle.loads(payload)  # an exception the parent could not rebuild goes as its text
    except Exception as exc:  # any failure of a child is sent to the parent, never lost
        what = f"{type(message[1]).__name__}: {message[1]}" if message[0] == "error" else "its result"
        payload = pickle.dumps(("error", RuntimeError(f"{name}: {what} (could not be sent: {exc})")))
    conn.send_bytes(payload)
    conn.close()


@contextlib.contextmanager
def _collector_off() -> Any:
    """The cyclic garbage collector off while shares play and their results come back, then as
    it was (its next collection gathers whatever cycles they left). A share is one rollout's or
    one evaluation's worth of episodes: its garbage is freed by reference counts as it goes, and
    the young-object collections it would otherwise trigger every few hundred allocations took
    ~4% of an evaluation stream's time (``gc.callbacks``, the credit-trap preset)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _end_with_parent() -> None:
    """Ask Linux to kill this process when its parent dies (``prctl(PR_SET_PDEATHSIG)``); elsewhere
    a share whose parent died ends at its next message (a broken pipe)."""

    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1: PR_SET_PDEATHSIG
