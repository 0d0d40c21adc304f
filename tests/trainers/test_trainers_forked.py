"""Shares of a piece of work in forked processes (trainers.forked): results, steps, errors, signals."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time

import pytest

from trainers.forked import ShareKilled, run_forked
from trainers.stop_request import Terminated


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

        with pytest.raises(Terminated):  # the stop the run's own SIGTERM gives: exit 143 and the resume line
            run_forked([lambda step: None, terminated], threads=1, name="rollout stream")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not marker.exists()


@pytest.mark.parametrize(
    "sig,raised", [(signal.SIGINT, KeyboardInterrupt), (signal.SIGKILL, ShareKilled), (signal.SIGUSR1, RuntimeError)]
)
def test_a_share_ended_by_a_signal_says_what_ended_it(sig, raised):
    """Ctrl-C on the process group reaches the shares too: a share ended by SIGINT is this run's
    interrupt; SIGKILL (the out-of-memory killer) is one line with advice; a crash stays an error."""

    def killed(step):
        os.kill(os.getpid(), sig)
        time.sleep(5)

    with pytest.raises(raised) as info:
        run_forked([lambda step: None, killed], threads=1, name="evaluation stream")
    if raised is ShareKilled:
        assert "evaluation stream 1 was killed (SIGKILL" in str(info.value) and "--eval-streams" in str(info.value)
    if raised is RuntimeError:
        assert f"exit code -{int(sig)}" in str(info.value)


def _children(pid: int) -> list[int]:
    path = f"/proc/{pid}/task/{pid}/children"
    try:
        with open(path) as fh:
            return [int(x) for x in fh.read().split()]
    except OSError:
        return []


def _signal_during_forked_evaluation(tmp_path, send) -> tuple[int, str]:
    """Run the trainer with two forked evaluation streams in its own process group; once a stream
    is alive, ``send(trainer_pid, stream_pid)``; returns the exit code and stderr."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    args = [
        *(
            "--env rooms --model tiny --num-groups 1 --group-size 2 --max-steps 3 --iterations 50 --eval-every 1 "
            "--eval-episodes 400 --eval-streams 2 --no-progress-bars --no-tensorboard --warm-start none "
            "--torch-threads 2 --no-baseline-random --eval-extra-split none --output-dir"
        ).split(),
        str(tmp_path / "run"),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainers.progpo", *args],
        cwd=root,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=dict(os.environ, PYTHONWARNINGS="ignore"),
    )
    try:
        deadline = time.monotonic() + 180
        while not _children(proc.pid) or not (tmp_path / "run" / "checkpoints" / "latest").exists():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        send(proc.pid, _children(proc.pid)[0])
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    return proc.returncode, err


@pytest.mark.slow
def test_ctrl_c_during_forked_evaluation_streams_exits_130_with_the_resume_line(tmp_path):
    code, err = _signal_during_forked_evaluation(tmp_path, lambda pid, _: os.killpg(pid, signal.SIGINT))
    assert code == 130, err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err


@pytest.mark.slow
def test_a_stream_killed_by_sigkill_is_one_line_with_advice(tmp_path):
    code, err = _signal_during_forked_evaluation(tmp_path, lambda _, stream: os.kill(stream, signal.SIGKILL))
    assert code == 2, err
    errors = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "SIGKILL" in errors[0] and "Traceback" not in err and "--resume" in err


def test_an_error_here_stops_the_forked_shares():
    def here(step):
        time.sleep(0.2)
        raise KeyboardInterrupt

    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run_forked([here, lambda step: time.sleep(60)], threads=1)
    assert time.perf_counter() - started < 30 and multiprocessing.active_children() == []


def test_a_share_that_outlives_sigterm_is_killed_so_the_stop_ends(monkeypatch):
    """A share that does not act on SIGTERM (stuck in C, or reached before Python set its
    handlers) must not keep a stopped run waiting: it is killed after the grace period."""
    import trainers.forked as forked

    monkeypatch.setattr(forked, "TERMINATE_GRACE_S", 0.5)

    def deaf(step):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        step(1)  # tells the parent the handler is set
        time.sleep(60)

    def here(step):
        while 1 not in seen:  # step(0) also takes in the messages the share sent meanwhile
            step(0)
            time.sleep(0.05)
        raise KeyboardInterrupt

    seen: list[int] = []
    started = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        run_forked([here, deaf], on_step=seen.append, threads=1)
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


_SIGNAL_AT_FORK: list[str] = []  # "parent" / "child": where the next fork's hook sends itself a Ctrl-C


def _ctrl_c_at_fork(where: str) -> None:
    if _SIGNAL_AT_FORK == [where]:
        _SIGNAL_AT_FORK.clear()
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(1000):  # bytecode for the handler to run in, as in logging's or filelock's hooks
            pass


os.register_at_fork(after_in_parent=lambda: _ctrl_c_at_fork("parent"), after_in_child=lambda: _ctrl_c_at_fork("child"))


@pytest.mark.parametrize("where", ["parent", "child"])
def test_a_ctrl_c_that_lands_in_a_fork_hook_still_interrupts_and_prints_no_traceback(where, capfd):
    """A Ctrl-C to the process group can reach either process while the fork runs its at-fork
    hooks; raised there, Python would print it as "Exception ignored" and drop it."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own, whatever ran before
    _SIGNAL_AT_FORK[:] = [where]
    try:
        with pytest.raises(KeyboardInterrupt):
            run_forked([lambda step: time.sleep(2), lambda step: time.sleep(2)], threads=1)
    finally:
        _SIGNAL_AT_FORK.clear()
        signal.signal(signal.SIGINT, before if before is not None else signal.default_int_handler)
    err = capfd.readouterr().err
    assert "Exception ignored" not in err and "Traceback" not in err, err
    assert multiprocessing.active_children() == []
