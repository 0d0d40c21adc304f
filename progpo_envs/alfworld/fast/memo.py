"""Per-process memo tables of the fast path: bounded LRUs keyed by content hashes.

Every table registers itself, so :func:`clear_caches` empties them all (tests, long runs).

>>> t = LRU(2); t.get_or_make("a", lambda: 1), t.get_or_make("a", lambda: 2)
(1, 1)
>>> len(sha("domain", "problem"))
64
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import Any, Callable

__all__ = ["LRU", "MEMENTO_LIMIT", "bound_memento_cache", "clear_caches", "sha"]

#: entries textworld's global ``mementos`` cache may hold before it is emptied at the next game
#: load (~1 KiB each; a game adds ~450): it memoizes every Proposition / Variable / Signature ever
#: built and is never emptied, so a process cycling thousands of games would grow without end
MEMENTO_LIMIT = 50_000

_TABLES: list["LRU"] = []


class LRU:
    """A thread-safe, size-bounded ``key -> value`` memo (the value is made outside the lock)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.data: OrderedDict[Any, Any] = OrderedDict()
        self.lock = threading.Lock()
        _TABLES.append(self)

    def get_or_make(self, key: Any, make: Callable[[], Any]) -> Any:
        with self.lock:
            if key in self.data:
                self.data.move_to_end(key)
                return self.data[key]
        value = make()
        with self.lock:
            self.data[key] = value
            while len(self.data) > self.size:
                self.data.popitem(last=False)
        return value

    def clear(self) -> None:
        with self.lock:
            self.data.clear()


def clear_caches() -> None:
    """Drop every cached parse and translation of this process."""
    for table in _TABLES:
        table.clear()


def bound_memento_cache(limit: int | None = None) -> bool:
    """Empty textworld's ``mementos`` cache when it holds more than ``limit`` (default
    :data:`MEMENTO_LIMIT`) entries; True when it did. Called between games: the memoized
    objects compare and hash by value, so the next game builds equal ones afresh."""
    try:
        from mementos import core  # the [alfworld] extra
    except ImportError:  # no textworld here: nothing to bound
        return False
    if len(core._memento_cache) <= (MEMENTO_LIMIT if limit is None else limit):
        return False
    core._memento_cache.clear()
    return True


def sha(*parts: str) -> str:
    """sha256 of ``parts`` (NUL-separated): the key of everything these texts determine."""
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()
