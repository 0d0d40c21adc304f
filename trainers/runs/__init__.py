"""A run's directory: what a run writes of itself and reads back.

* :mod:`~trainers.runs.run_dir`: the lock, the manifest, and the run dir's section of the config;
* :mod:`~trainers.runs.run_files`: writes that never follow a link and never leave half a file;
* :mod:`~trainers.runs.checkpoint` and :mod:`~trainers.runs.run_checkpoints`: checkpoints, and a
  run's saving, resuming and ownership of them;
* :mod:`~trainers.runs.records`: the run's files and console lines through the iterations (the
  loop's record stage);
* :mod:`~trainers.runs.metrics`: ``metrics.jsonl`` (with TensorBoard and W&B) and the diagnostics
  computed into it;
* :mod:`~trainers.runs.provenance`: where and when the run ran;
* :mod:`~trainers.runs.summary`: the report, ``summary.md`` and ``curves.png``;
* :mod:`~trainers.runs.console`: progress bars and per-iteration lines.
"""
