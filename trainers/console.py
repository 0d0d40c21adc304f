"""What a run shows while it runs: progress bars on a terminal, one line an iteration elsewhere.

A bar written into a log file (nohup, CI, ``> run.log``) leaves hundreds of carriage-return
fragments; there the run prints :func:`iteration_line` once an iteration instead.
"""
from __future__ import annotations

import sys
from typing import Any

__all__ = ["bars_shown", "iteration_line", "progress_bar"]


def bars_shown(enabled: bool) -> bool:
    """Whether progress bars are drawn: asked for, and stderr is a terminal."""
    return bool(enabled) and sys.stderr.isatty()


def progress_bar(total: int | None, desc: str, enabled: bool, leave: bool = False) -> Any:
    """A tqdm bar on stderr, drawn only where :func:`bars_shown` says so (a no-op bar elsewhere)."""
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not bars_shown(enabled), leave=leave, dynamic_ncols=True,
                file=sys.stderr)


def iteration_line(rec: dict[str, Any], iterations: int) -> str:
    """The one line a run prints per iteration where no bar is shown.

    >>> iteration_line({"iteration": 3, "success": 0.25, "all_failed_frac": 0.5, "coverage_rate": 0.4125,
    ...                 "time/iteration_s": 12.34}, 12)
    'iteration 3/12: success 0.250, all-failed 0.500, coverage rate 0.412, 12.3 s'
    """
    return (f"iteration {rec['iteration']}/{iterations}: success {rec.get('success', 0.0):.3f}, all-failed "
            f"{rec.get('all_failed_frac', 0.0):.3f}, coverage rate {rec.get('coverage_rate', 0.0):.3f}, "
            f"{rec.get('time/iteration_s', 0.0):.1f} s")
