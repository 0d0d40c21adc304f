"""The base class of every error that is the user's to fix (a bad input, file, flag or setup).

Every layer of the package raises its own subclasses (``ConfigError``, ``CheckpointError``,
``MemberError``, ``BadTaskError``...); a command-line entry point prints any :class:`UserError`
as one ``error:`` line and keeps the traceback for everything else, which is a bug.

>>> class GameFileError(UserError, ValueError):
...     pass
>>> isinstance(GameFileError("game 3 is truncated"), UserError)
True
"""

from __future__ import annotations

__all__ = ["UserError"]


class UserError(Exception):
    """A problem the message explains and the user fixes; never a bug of the package."""
