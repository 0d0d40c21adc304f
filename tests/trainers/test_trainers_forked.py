"""Shares of a piece of work in forked processes (trainers.forked): results, steps, errors, signals."""
from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from trainers.forked import run_forked


def test_a_share_that_ends_first_leaves_the_others_steps_counted():
    """The forked share is done before the first one reports a step: its result is kept, and
    polling its finished pipe raises nothing."""
    def quick(step):
        step(1)
        return "quick"

    def slow(step):
        time.sleep(0.5)
        for _ in range(3):
            step(2)
        return "slow"

    counted: list[int] = []
    assert run_forked([slow, quick], on_step=counted.append, threads=1) == ["slow", "quick"]
    assert sorted(counted) == [1, 2, 2, 2]


def test_a_forked_share_leaves_the_parents_signal_handlers_behind(tmp_path):
    """A training run's SIGTERM handler (stop and save) is not run by a share: the signal ends it,
    and the parent says so."""
    marker = tmp_path / "handled"
    previous = signal.signal(signal.SIGTERM, lambda *a: marker.write_text(str(os.getpid())))
    try:
        def terminated(step):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(5)

        with pytest.raises(RuntimeError, match=r"rollout stream 1 ended \(exit code -15\)"):
            run_forked([lambda step: None, terminated], threads=1, name="rollout stream")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not marker.exists()


def test_an_error_here_stops_the_forked_shares():
    def here(step):
        time.sleep(0.2)
        raise KeyboardInterrupt

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run_forked([here, lambda step: time.sleep(60)], threads=1)
    assert time.perf_counter() - started < 30 and multiprocessing.active_children() == []


@pytest.mark.parametrize("fails", [False, True])
def test_shares_play_without_the_cyclic_collector_which_comes_back_after(fails):
    """No collection runs while shares play (here or forked); the collector is as it was after,
    also when a share raises; a caller that had it off keeps it off."""
    import gc

    def share(step):
        if fails:
            raise ValueError("a share failed")
        return gc.isenabled()

    assert gc.isenabled()
    if fails:
        with pytest.raises(ValueError, match="a share failed"):
            run_forked([share, share], threads=1)
    else:
        assert run_forked([share, share], threads=1) == [False, False]
    assert gc.isenabled()
    gc.disable()
    try:
        run_forked([lambda step: None, lambda step: None], threads=1)
        assert not gc.isenabled()
    finally:
        gc.enable()
