"""Run metrics: per-iteration diagnostics from a rollout, JSONL + TensorBoard logging.

>>> import tempfile, json
>>> d = tempfile.mkdtemp()
>>> log = MetricsLogger(d, tensorboard=False)
>>> log.log({"iteration": 1, "success": 0.5})
>>> log.close()
>>> [json.loads(l)["success"] for l in open(d + "/metrics.jsonl")]
[0.5]
"""

from __future__ import annotations

import json
import math
import os
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterator, Mapping

import numpy as np

from trainers.rollouts.rollout import Rollout
from trainers.runs.run_files import open_nofollow, real_dir, write_atomic
from wrappers.errors import UserError
from wrappers.signals import TAU_R, all_failed, coverage_rate

__all__ = [
    "MetricsFileError",
    "MetricsLogger",
    "advantage_metrics",
    "begins_with",
    "restore_for_resume",
    "rollout_metrics",
    "read_metrics",
    "scan_metrics",
    "wandb_run_id",
    "wandb_settings",
]


class MetricsFileError(UserError, ValueError):
    """``metrics.jsonl`` holds a line that is JSON but not a record (an object); the message says where."""


#: keys that depend on wall-clock time (excluded from the bit-for-bit resume comparison)
TIMING_KEYS = (
    "time/rollout_s",
    "time/update_s",
    "time/iteration_s",
    "time/generate_s",
    "time/env_s",
    "time/reset_s",
    "time/rollout_other_s",
    "time/credit_s",
    "time/compile_s",
    "time/old_logprob_s",
    "time/init_s",
    "tokens_per_s",
    "env_steps_per_s",
)


def rollout_metrics(rollout: Rollout, tau_r: float = TAU_R, prefix: str = "") -> dict[str, float]:
    """Success (overall and by task type), all-failed group fraction, coverage, repeat / invalid rates.

    ``success`` (and ``success_by_type/*``): fraction of episodes *won* (:attr:`Trajectory.won`:
    the env's ``info["won"]``; WebShop: score == 1, ALFWorld: goal reached). A partial WebShop
    score is not a success. ``score_mean``: mean final score / outcome (WebShop's average score).

    ``all_failed_frac``: fraction of groups whose best outcome is below ``tau_r`` -- the groups
    where ProGPO replaces the outcome advantage by the progress one. It uses the outcome
    reward, not ``won``, as the estimator does (:mod:`trainers.advantages`): a group with a
    partial WebShop purchase has an outcome signal and is not "all failed".

    ``repeated_action_rate``: fraction of steps whose action was already issued earlier in the
    same episode from the same canonical state (the "look again / reopen the drawer" trap).

    >>> from trainers.rollouts.rollout import Rollout, Trajectory
    >>> rollout = Rollout(trajectories=[Trajectory(0, 0, "t", "x", outcome=0.5, length=1, won=False),
    ...                            Trajectory(0, 1, "t", "x", outcome=1.0, length=1, won=True)])
    >>> m = rollout_metrics(rollout)
    >>> m["success"], m["score_mean"], m["all_failed_frac"]
    (0.5, 0.75, 0.0)
    """
    m: dict[str, float] = {}
    trajs = rollout.trajectories
    if not trajs:
        return m
    success = np.array([bool(t.won) for t in trajs], dtype=float)
    m[prefix + "success"] = float(success.mean())
    score = float(np.mean([t.outcome for t in trajs]))
    m[prefix + "score_mean"] = score
    by_type: dict[str, list[float]] = defaultdict(list)
    for t, s in zip(trajs, success):
        by_type[t.task_type].append(s)
    for name, vals in sorted(by_type.items()):
        m[f"{prefix}success_by_type/{name}"] = float(np.mean(vals))
    groups: dict[int, list[float]] = defaultdict(list)
    for t in trajs:
        groups[t.group].append(t.outcome)
    # outcome-based on purpose (the estimator's all-failed test), see the docstring
    m[prefix + "all_failed_frac"] = float(np.mean([all_failed(v, tau_r) for v in groups.values()]))
    m[prefix + "episode_length"] = float(np.mean([t.length for t in trajs]))
    m.update(_path_metrics(rollout, prefix))
    m[prefix + "env_steps"] = float(len(rollout.steps))
    return m


def _path_metrics(rollout: Rollout, prefix: str) -> dict[str, float]:
    """Coverage, repeat and invalid rates of each trajectory over its steps (:meth:`Rollout.paths`:
    a tree's leaf over its whole path, the prefix it shares included)."""
    paths = rollout.paths()
    found = [sum(rollout.steps[i].first_visit for i in path) for path in paths]
    m = {
        prefix + "coverage_rate": float(
            np.mean([coverage_rate(f, t.length) for f, t in zip(found, rollout.trajectories)])
        ),
        prefix + "coverage": float(np.mean(found)),
    }
    rows = sum(len(p) for p in paths)
    if rows:
        repeats = 0
        for path in paths:
            seen: set[tuple[str, str]] = set()
            for i in path:
                key = (rollout.steps[i].state, rollout.steps[i].action)
                repeats += key in seen
                seen.add(key)
        m[prefix + "repeated_action_rate"] = repeats / rows
        m[prefix + "invalid_action_rate"] = float(np.mean([not rollout.steps[i].valid for p in paths for i in p]))
    return m


class MetricsLogger:
    """Appends one JSON line per record to ``run_dir/metrics.jsonl``; mirrors scalars to TensorBoard."""

    def __init__(
        self,
        run_dir: str | Path,
        tensorboard: bool = True,
        resume_after: int | None = None,
        wandb: dict[str, Any] | None = None,
        config: Mapping[str, Any] | None = None,
    ) -> None:
        self.path = Path(run_dir) / "metrics.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # a resume appends to the file :func:`restore_for_resume` cut at the checkpoint; a fresh run starts it anew
        if resume_after is None and self.path.exists():
            self.path.unlink()
        self.writer = None
        #: the files this logger writes (its event file found by listing: TensorBoard names it)
        self.files: list[Path] = [self.path]
        if tensorboard:
            try:
                # the [train] extra's TensorBoard writer: loaded when TensorBoard is on
                from torch.utils.tensorboard import SummaryWriter

                tb_dir = real_dir(Path(run_dir) / "tensorboard")  # never a planted link to elsewhere
                before = set(tb_dir.iterdir()) if tb_dir.is_dir() else set()
                self.writer = SummaryWriter(str(tb_dir))
                if config is not None:  # the run's config beside its scalars (TensorBoard's text tab)
                    self.writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in config.items()), 0)
                self.files += sorted(set(tb_dir.iterdir()) - before)
            except ImportError:  # tensorboard not installed: JSONL only
                self.writer = None
        self.wandb_run = None
        if wandb is not None:  # Weights & Biases (offline where WANDB_MODE=offline); resumed runs log on
            import wandb as wandb_lib  # the [wandb] extra

            self.wandb_run = wandb_lib.init(**wandb, resume="allow", reinit="finish_previous")

    def log(self, record: dict[str, Any]) -> None:
        with open_nofollow(self.path, "a") as fh:
            fh.write(json.dumps(record) + "\n")
        if self.wandb_run is not None:  # the keys metrics.jsonl and TensorBoard use
            scalars = {
                k: v
                for k, v in record.items()
                if k != "iteration" and isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            }
            self.wandb_run.log(scalars, step=int(record.get("iteration", 0)))
        if self.writer is not None:
            step = int(record.get("iteration", 0))
            for key, value in record.items():
                if key != "iteration" and isinstance(value, (int, float)) and math.isfinite(value):
                    self.writer.add_scalar(key, value, step)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None


def advantage_metrics(
    step_adv: np.ndarray, all_failed: np.ndarray, step_failed: np.ndarray, progpo: bool, gate: str
) -> dict[str, float]:
    """How the advantages of an iteration came out, and where ProGPO's progress term replaced the
    base estimator's: in the all-failed groups (in every group with ``gate="always"``; nowhere for
    a base estimator), as a count, a share of groups and a share of steps.

    >>> m = advantage_metrics(np.array([0.5, 0.0, -0.5, 1.0]), np.array([True, False]),
    ...                       np.array([True, True, False, False]), progpo=True, gate="all_failed")
    >>> m["adv/nonzero_frac"], m["adv/progress_groups"], m["adv/progress_step_frac"]
    (0.75, 1.0, 0.5)
    """

    def acting(failed: np.ndarray) -> np.ndarray:
        if not progpo:
            return np.zeros_like(failed)
        return np.ones_like(failed) if gate == "always" else failed

    acted, acted_steps = acting(all_failed), acting(step_failed)
    return {
        "adv/nonzero_frac": float(np.mean(step_adv != 0)) if step_adv.size else 0.0,
        "adv/abs_mean": float(np.mean(np.abs(step_adv))) if step_adv.size else 0.0,
        "adv/groups": float(acted.size),
        "adv/progress_groups": float(np.sum(acted)),
        "adv/progress_group_frac": float(np.mean(acted)) if acted.size else 0.0,
        "adv/progress_step_frac": float(np.mean(acted_steps)) if acted_steps.size else 0.0,
    }


def _parsed_lines(path: str | Path) -> Iterator[tuple[int, Any]]:
    """Each non-blank line of a ``metrics.jsonl`` with its number: the JSON value it holds, or
    :data:`_NOT_JSON` (a torn or garbled line)."""
    for number, line in enumerate(Path(path).read_text(errors="replace").splitlines(), start=1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError:
                yield number, _NOT_JSON


_NOT_JSON = object()


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``; reading stops at a torn (unparseable) line.

    Raises:
        MetricsFileError: a line parses as JSON but is not an object.
    """
    out = []
    for number, record in _parsed_lines(path):
        if record is _NOT_JSON:
            break  # a torn last line
        if not isinstance(record, dict):
            raise MetricsFileError(
                f"{path} line {number} is JSON but not a record ({type(record).__name__}); "
                "delete that line or start a new --output-dir"
            )
        out.append(record)
    return out


def scan_metrics(path: str | Path) -> tuple[list[dict[str, Any]], str | None]:
    """Every record of a ``metrics.jsonl`` that reads as one, and what is wrong with the first line
    that does not (``None``: every line is a record). Unlike :func:`read_metrics`, reading goes on
    past a bad line, so that a caller can tell a torn last line from a garbled one in the middle."""
    out: list[dict[str, Any]] = []
    bad: str | None = None
    for number, record in _parsed_lines(path):
        if record is _NOT_JSON:
            bad = bad or f"line {number} is not JSON"
        elif not isinstance(record, dict):
            bad = bad or f"line {number} is JSON but not a record ({type(record).__name__})"
        else:
            out.append(record)
    return out, bad


def restore_for_resume(
    path: str | Path, history: list[dict[str, Any]], resumed_at: int
) -> tuple[str | None, Path | None]:
    """Make ``metrics.jsonl`` hold exactly the checkpoint's ``history`` before a resume appends to it.

    Lines after the checkpoint (a crash after it) are dropped, as always. The checkpoint's history
    is every record up to the checkpoint, so a file that lost or garbled lines is rebuilt from it
    rather than cut at the first bad line; the file as found is kept beside it as
    ``metrics.jsonl.damaged`` (``.damaged.1``, ``.damaged.2``, ... when that name is taken, by a
    file or anything else: an earlier copy is never overwritten). Returns the warning to give (``None``: nothing to say) and the
    damaged copy written (``None``: none).

    Raises:
        MetricsFileError: the path is not a regular file, or the file is damaged and the
            checkpoint holds no history to rebuild it from.
    """
    path = Path(path)
    lines = "".join(json.dumps(r) + "\n" for r in history)
    if path.is_symlink():  # never read or written through: replaced by the run's own file
        write_atomic(path, lines)
        return f"{path} was a link; replaced it by the run's own file, rebuilt from the checkpoint's history", None
    if path.exists() and not path.is_file():
        raise MetricsFileError(
            f"{path} is not a regular file; move it away, and --resume rebuilds metrics.jsonl from the checkpoint"
        )
    if not path.exists():
        write_atomic(path, lines)
        return f"{path} was missing; rebuilt it from the checkpoint's history ({len(history)} records)", None
    records, bad = scan_metrics(path)
    upto = [r for r in records if not isinstance(r.get("iteration"), int) or r["iteration"] <= resumed_at]
    if bad is None and [json.dumps(r) for r in upto] == [json.dumps(r) for r in history]:
        if len(upto) < len(records):
            write_atomic(path, lines)
        return None, None
    if not history:
        raise MetricsFileError(
            f"{path} {bad or 'does not match the checkpoint'}, and the checkpoint holds no history to "
            "rebuild it from; repair that line or start a new --output-dir"
        )
    damaged = free_name(path.with_name(path.name + ".damaged"))
    write_atomic(damaged, path.read_bytes())
    write_atomic(path, lines)
    why = bad or f"does not match the checkpoint's records up to iteration {resumed_at}"
    return (
        f"{path} {why}; rebuilt its {len(history)} records up to iteration {resumed_at} from the checkpoint's "
        f"history (the file as found: {damaged.name})"
    ), damaged


def begins_with(records: list[dict[str, Any]], history: list[dict[str, Any]]) -> bool:
    """Whether ``records`` (a run dir's ``metrics.jsonl``) begin with ``history`` (a checkpoint's):
    the dir is the run that wrote the checkpoint. Records compare as JSON, key order aside.

    >>> begins_with([{"a": 1, "b": 2}, {"c": 3}], [{"b": 2, "a": 1}]), begins_with([], [{"a": 1}])
    (True, False)
    """
    there = [json.dumps(r, sort_keys=True) for r in records[: len(history)]]
    return there == [json.dumps(r, sort_keys=True) for r in history]


def free_name(path: Path) -> Path:
    """``path``, or the first of ``path.1``, ``path.2``, ... that nothing occupies (a file, a folder, a link).

    >>> import tempfile
    >>> d = Path(tempfile.mkdtemp()); (d / "m.damaged").mkdir(); _ = (d / "m.damaged.1").write_text("")
    >>> free_name(d / "m.damaged").name
    'm.damaged.2'
    """
    candidate, n = path, 0
    while candidate.exists() or candidate.is_symlink():
        n += 1
        candidate = path.with_name(f"{path.name}.{n}")
    return candidate


#: the run dir's file that keeps its W&B run id, so that ``--resume`` logs on into the same W&B run
WANDB_ID_FILE = "wandb_id"


def wandb_run_id(run_dir: str | Path, resume: bool) -> str:
    """The run's W&B id: the one kept in ``run_dir/wandb_id`` on a resume, else a new one (kept).

    >>> import tempfile
    >>> d = tempfile.mkdtemp()
    >>> first = wandb_run_id(d, resume=False)
    >>> wandb_run_id(d, resume=True) == first, wandb_run_id(d, resume=False) == first
    (True, False)
    """
    path = Path(run_dir) / WANDB_ID_FILE
    if resume and path.is_file() and not path.is_symlink():
        kept = path.read_text(errors="replace").strip()
        if kept.isalnum() and len(kept) <= 64:
            return kept
    run_id = uuid.uuid4().hex[:16]
    write_atomic(path, run_id + "\n")
    return run_id


def wandb_settings(config: Mapping[str, Any], run_dir: str | Path, run_id: str | None = None) -> dict[str, Any]:
    """What ``wandb.init`` gets for a run: the project (``WANDB_PROJECT``, else ``progpo``), the run's
    id (:func:`wandb_run_id`: a resume continues the same W&B run), the run dir's full path as its
    name (two dirs both called ``run`` stay apart), the config, and the run dir for its files
    (offline runs: ``wandb sync`` them later).

    >>> wandb_settings({"lr": 0.1}, "/tmp/runs/demo", "abc")["name"], wandb_settings({}, "/tmp/runs/demo", "abc")["id"]
    ('/tmp/runs/demo', 'abc')
    """

    out = {
        "project": os.environ.get("WANDB_PROJECT", "progpo"),
        "name": str(Path(run_dir).absolute()),
        "config": dict(config),
        "dir": str(run_dir),
    }
    return {**out, "id": run_id} if run_id else out
