"""What a run shows while it runs: progress bars on a terminal, lines elsewhere.

A bar written into a log file (nohup, CI, ``> run.log``) leaves hundreds of carriage-return
fragments; there the run prints :func:`iteration_line` once an iteration instead, and a phase
that runs long (a real model's warm start, a slow rollout) a :class:`LineProgress` line every 30 s,
so that a log never goes silent for minutes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

__all__ = ["LineProgress", "bars_shown", "iteration_line", "progress_bar"]


class LineProgress:
    """A bar's stand-in where none is drawn: ``desc: done/total (pct%), elapsed`` on stderr each time
    ``every_s`` seconds have passed since the last line (a phase shorter than that prints nothing).

    >>> ticks = iter([0.0, 10.0, 31.0, 40.0, 62.0])
    >>> bar = LineProgress(4, "warm start (bc)", clock=lambda: next(ticks), file=sys.stdout)
    >>> for _ in range(4):
    ...     bar.update(1)
    warm start (bc): 2/4 (50%), 31 s
    warm start (bc): 4/4 (100%), 62 s

    With ``estimated``, the total is a guess the count may pass (an update's micro-batches): the
    line gives the count and the guess, never a percentage over 100.

    >>> ticks = iter([0.0, 31.0])
    >>> bar = LineProgress(14, "update 1", clock=lambda: next(ticks), file=sys.stdout, estimated=True)
    >>> bar.n = 16; bar.update(1)
    update 1: 17 (about 14 expected), 31 s
    """

    def __init__(
        self,
        total: int | None,
        desc: str,
        every_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
        file: Any = None,
        estimated: bool = False,
    ) -> None:
        self.estimated = estimated
        self.total, self.desc, self.every_s, self.clock = total, desc, float(every_s), clock
        self.file = file if file is not None else sys.stderr
        self.n = 0
        self.start = self.last = clock()

    def update(self, n: int = 1) -> None:
        self.n += n
        now = self.clock()
        if now - self.last >= self.every_s:
            self.last = now
            if self.total and self.estimated:
                done = f"{self.n} (about {self.total} expected)"
            else:
                done = f"{self.n}/{self.total} ({100 * self.n / self.total:.0f}%)" if self.total else f"{self.n}"
            print(f"{self.desc}: {done}, {now - self.start:.0f} s", file=self.file, flush=True)

    def set_postfix(self, **kwargs: Any) -> None:
        """What a tqdm bar shows beside its count: nothing here (the iteration line says it)."""

    def close(self) -> None:
        """Nothing to clear: every line is complete."""


def bars_shown(enabled: bool) -> bool:
    """Whether progress bars are drawn: asked for, and stderr is a terminal."""
    return bool(enabled) and sys.stderr.isatty()


def progress_bar(
    total: int | None, desc: str, enabled: bool, leave: bool = False, lines: bool = True, estimated: bool = False
) -> Any:
    """A tqdm bar on stderr, drawn only where :func:`bars_shown` says so; where a bar is asked for
    but stderr is no terminal, a :class:`LineProgress` (unless ``lines`` is False); a no-op bar
    elsewhere. ``estimated``: ``total`` is a guess the count may pass."""
    from tqdm.auto import tqdm  # the [train] extra

    if enabled and lines and not bars_shown(enabled):
        return LineProgress(total, desc, estimated=estimated)
    return tqdm(
        total=total, desc=desc, disable=not bars_shown(enabled), leave=leave, dynamic_ncols=True, file=sys.stderr
    )


def iteration_line(rec: dict[str, Any], iterations: int) -> str:
    """The one line a run prints per iteration where no bar is shown.

    >>> iteration_line({"iteration": 3, "success": 0.25, "all_failed_frac": 0.5, "coverage_rate": 0.4125,
    ...                 "time/iteration_s": 12.34}, 12)
    'iteration 3/12: success 0.250, all-failed 0.500, coverage rate 0.412, 12.3 s'
    """
    return (
        f"iteration {rec['iteration']}/{iterations}: success {rec.get('success', 0.0):.3f}, all-failed "
        f"{rec.get('all_failed_frac', 0.0):.3f}, coverage rate {rec.get('coverage_rate', 0.0):.3f}, "
        f"{rec.get('time/iteration_s', 0.0):.1f} s"
    )
