"""A stop asked for by a signal, kept where a swallowed exception cannot lose it.

A signal handler that raises does so inside whatever Python code runs at that moment. When that
is a ``__del__`` method or a weakref callback, the interpreter prints "Exception ignored" and the
run goes on as if nothing happened. :func:`request` therefore records the stop before raising, and
the long loops (rollout steps, update mini-batches, warm-start steps, iterations) call
:func:`raise_if_requested`, which raises it again at a point where nothing swallows it.
"""
from __future__ import annotations

__all__ = ["Terminated", "request", "raise_if_requested", "clear"]


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
