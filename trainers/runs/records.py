"""The record stage: what a run writes of itself.

:class:`RunRecorder` keeps the run's files on rank 0: ``metrics.jsonl`` (with TensorBoard and W&B
where asked), ``config.yaml``, ``provenance.jsonl``, the teacher's samples, the manifest of every
file the run wrote, and at the end the report; and the iterations' progress on the console. The
iteration's record it logs is built by :func:`trainers.loop.train_record.train_record`.
"""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any, Sequence

from trainers.runs.console import bars_shown, iteration_line, progress_bar
from trainers.runs.metrics import WANDB_ID_FILE, MetricsLogger, restore_for_resume, wandb_run_id, wandb_settings
from trainers.runs.run_dir import RunManifest, RunSection
from trainers.runs.run_files import open_nofollow, write_atomic
from trainers.runs.summary import write_report
from wrappers.errors import UserError

__all__ = ["PluginChangedError", "RunRecorder", "config_yaml"]


class PluginChangedError(UserError):
    """A resume whose plug-in files differ from those the run trained with."""


class RunRecorder:
    """The files and console lines of a run (rank 0 writes; the other ranks' calls do nothing).

    Args:
        cfg: the run dir's section of the run's configuration. main: whether this process is rank 0.
    """

    def __init__(self, cfg: RunSection, main: bool) -> None:
        self.cfg, self.main = cfg, main
        self.run_dir = Path(cfg.output_dir)
        self.manifest: RunManifest | None = None
        self.logger: MetricsLogger | None = None
        self.bar: Any = None

    def start(
        self,
        manifest: RunManifest | None,
        history: Sequence[dict[str, Any]],
        resumed_at: int | None,
        accept_plugin_change: bool = False,
    ) -> None:
        """Open the run's files (``resumed_at``: the checkpoint's iteration on a resume, whose
        ``history`` rebuilds a missing ``metrics.jsonl``) and the iterations' progress bar. A
        resume whose plug-ins changed since the run's last process is refused unless
        ``accept_plugin_change`` (then recorded)."""
        cfg = self.cfg
        if self.main and resumed_at is not None:
            self._check_plugins(resumed_at, accept_plugin_change)
        if self.main:
            metrics_path = self.run_dir / "metrics.jsonl"
            assert manifest is not None
            self.manifest = manifest
            if resumed_at is not None:
                said, damaged = restore_for_resume(metrics_path, list(history), resumed_at)
                if damaged is not None:
                    manifest.record(damaged)
                if said:
                    warnings.warn(said, UserWarning, stacklevel=4)
            wandb = None
            if "wandb" in cfg.trackers:
                manifest.record(self.run_dir / WANDB_ID_FILE)
                wandb = wandb_settings(
                    dict(cfg.config), self.run_dir, wandb_run_id(self.run_dir, resumed_at is not None)
                )
            self.logger = MetricsLogger(
                self.run_dir,
                tensorboard="tensorboard" in cfg.trackers,
                wandb=wandb,
                config=dict(cfg.config),
                resume_after=resumed_at,
            )
            manifest.record(*self.logger.files, self.run_dir / "config.yaml")
            write_atomic(self.run_dir / "config.yaml", config_yaml(dict(cfg.sections)))
            self._record_provenance(resumed_at or 0)
        # no timed lines for the iterations: each prints its own line where no bar is drawn
        self.bar = progress_bar(cfg.iterations, "iterations", cfg.progress_bars and self.main, leave=True, lines=False)
        self.bar.update(resumed_at or 0)

    def log(self, record: dict[str, Any]) -> None:
        if self.logger is not None:
            self.logger.log(record)

    def iteration_done(self, rec: dict[str, Any]) -> None:
        """Advance the iterations' bar; with no terminal, one line per iteration instead."""
        self.bar.update(1)
        self.bar.set_postfix(success=f"{rec.get('success', 0):.2f}", all_failed=f"{rec.get('all_failed_frac', 0):.2f}")
        if self.cfg.progress_bars and self.main and not bars_shown(True):
            print(iteration_line(rec, self.cfg.iterations), file=sys.stderr, flush=True)

    def distill_samples(self, samples: Sequence[dict[str, Any]]) -> None:
        """Append the teacher's samples of an iteration (contexts it read, with the decision they
        re-scored) to ``distill_samples.jsonl``, so that a user can read what the teacher saw."""
        if not samples or not self.main:
            return
        path = self.run_dir / "distill_samples.jsonl"
        if self.manifest is not None:
            self.manifest.record(path)
        with open_nofollow(path, "a") as fh:
            fh.writelines(json.dumps(sample) + "\n" for sample in samples)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        if self.logger is not None:
            self.logger.close()

    def report(self, history: Sequence[dict[str, Any]]) -> Path:
        """Write the run's report (rank 0); its path."""
        if not self.main:
            return self.run_dir / "summary.md"
        assert self.manifest is not None
        from trainers.runs.provenance import append_end  # kept off the import list: records.py is at its sibling limit

        last = [r["iteration"] for r in history if isinstance(r.get("iteration"), int)]
        append_end(self.run_dir, max(last, default=0))
        self.manifest.record(self.run_dir / "summary.md", self.run_dir / "curves.png")
        return write_report(self.run_dir, list(history), dict(self.cfg.config))

    def _check_plugins(self, resumed_at: int, accept: bool) -> None:
        """Refuse (or, accepted, record) a resume that would run changed plug-in code; record the resume."""
        from trainers.runs.provenance import append_resume, plugin_changes, read_provenance  # (as below)

        changes = plugin_changes(read_provenance(self.run_dir), self.cfg.config)
        if changes and not accept:
            raise PluginChangedError(
                f"the run's plug-ins differ from its last process ({'; '.join(changes)}): resuming would "
                "train on with other code; restore them, or pass --accept-plugin-change (recorded in provenance.jsonl)"
            )
        append_resume(self.run_dir, resumed_at, changes)

    def _record_provenance(self, iteration: int) -> None:
        """Append where this process runs the run (:mod:`trainers.runs.provenance`) to
        ``provenance.jsonl``: at the start, and on a resume where anything of it changed."""
        from trainers.runs.provenance import append_provenance  # kept off the import list: sibling limit

        assert self.manifest is not None
        self.manifest.record(self.run_dir / "provenance.jsonl")
        append_provenance(self.run_dir, iteration, self.cfg.config)


def config_yaml(data: dict[str, Any]) -> str:
    """A config's sections as the ``config.yaml`` a run writes (and ``--print-config`` prints):
    block YAML, in field order, without aliases (the strict loader refuses them)."""
    import yaml  # the [train] extra

    # config.yaml is read back by a loader that refuses aliases; PyYAML has no type stubs here, so
    # its dumper is Any to the type checker
    class NoAliases(yaml.SafeDumper):  # type: ignore[misc]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return yaml.dump(data, Dumper=NoAliases, sort_keys=False)
