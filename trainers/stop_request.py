"""A stop asked for by a signal, kept where a swallowed exception cannot lose it.

A signal handler that raises does so inside whatever Python code runs at that moment. When that
is a ``__del__`` method or a weakref callback, the interpreter prints "Exception ignored" and the
run goes on as if nothing happened. :func:`request` therefore records the stop before raising, and
the long loops (rollout steps, update mini-batches, warm-start steps, iterations) call
:func:`raise_if_requested`, which raises it again at a point where nothing swallows it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["Terminated", "request", "raise_if_requested", "clear", "stops_recorded", "signals_held", "held_signals"]


class Terminated(KeyboardInterrupt):
    """SIGTERM, turned into an exception so that the run closes its envs and files on the way out."""


_pending: type[KeyboardInterrupt] | None = None


def request(kind: type[KeyboardInterrupt] = Terminated) -> None:
    """Record a stop of ``kind`` and raise it here (a signal handler's body)."""
    global _pending
    _pending = kind
    raise kind()


def raise_if_requested() -> None:
    """Raise the recorded stop, if any: a handler's exception may have been swallowed on its way out."""
    if _pending is not None:
        raise _pending()


def clear() -> None:
    """Forget a recorded stop (the run that caught it has ended)."""
    global _pending
    _pending = None


def _on_sigint(signum: int, frame: object) -> None:
    request(KeyboardInterrupt)


def _on_sigterm(signum: int, frame: object) -> None:
    request(Terminated)


@contextlib.contextmanager
def stops_recorded() -> Iterator[None]:
    """Ctrl-C (SIGINT) and SIGTERM recorded by :func:`request` for the block, then the handlers
    as they were and no stop left recorded.

    Python's own Ctrl-C handler raises without a record: one that lands in a ``__del__`` or a
    weakref callback (multiprocessing's finalizers run many) is printed and dropped, and the run
    goes on as if the key had not been pressed. Outside the main thread the block runs as it is.

    >>> import signal
    >>> with stops_recorded():
    ...     try:
    ...         signal.raise_signal(signal.SIGINT)
    ...     except KeyboardInterrupt:
    ...         pass
    ...     try:
    ...         raise_if_requested()  # the stop is still there for the next loop step
    ...     except KeyboardInterrupt:
    ...         print("still stopping")
    still stopping
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {
        signal.SIGINT: signal.signal(signal.SIGINT, _on_sigint),
        signal.SIGTERM: signal.signal(signal.SIGTERM, _on_sigterm),
    }
    try:
        yield
    finally:
        for sig, handler in before.items():
            if handler is not None:  # (None: set outside Python, and cannot be put back)
                signal.signal(sig, handler)
        clear()


#: SIGINT / SIGTERM that came while :func:`signals_held` held them, delivered once it is done
_held: list[int] = []


def held_signals() -> list[int]:
    """The signals held now (a process forked inside :func:`signals_held` delivers them itself)."""
    return list(_held)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """SIGINT and SIGTERM held for the block, then delivered to the handlers as they were.

    For work that a stop must not cut in half: a handler that raises inside ``torch.save``'s
    writer is turned by the C++ side into a write error ("unexpected pos"), so a SIGTERM during a
    checkpoint would lose that checkpoint and read as a full disk; and a signal mid-fork runs its
    handler inside an at-fork hook, where Python prints the exception and drops it. Outside the
    main thread (where handlers cannot be set) the block runs as it is. A handler set outside
    Python reads as None and cannot be put back: that signal is not held.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = [sig for sig in (signal.SIGINT, signal.SIGTERM) if signal.getsignal(sig) is not None]
    before = {sig: signal.signal(sig, lambda sig, _frame: _held.append(sig)) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        held = sorted(set(_held))
        _held.clear()
        for number in held:
            signal.raise_signal(number)
