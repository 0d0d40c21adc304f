"""Helpers shared by the benchmark scripts (run them as ``python benchmarks/<name>.py``): the
median timing, and the model benchmarks' two common flags."""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any, Callable


def median_time(fn: Callable[[], Any], repeats: int, *, warmup: bool = False) -> float:
    """Median wall time in seconds of ``repeats`` calls of ``fn`` (one untimed call first if ``warmup``)."""
    if warmup:
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def model_parser(doc: str) -> argparse.ArgumentParser:
    """A model benchmark's parser (described by ``doc``'s first paragraph) with ``--model`` (a tiny
    spec or a Hub id, default ``tiny-128x2``) and ``--device`` (the GPU when there is one)."""
    import torch  # the model benchmarks only: the others run without torch

    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--model", default="tiny-128x2")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    return ap
