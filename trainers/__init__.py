"""ProGPO's trainer: its loop, run dir, commands, estimators, credit lab and adapters to other stacks.

Rooms:

* :mod:`trainers.loop` -- the loop and its stages: :class:`~trainers.loop.trainer.Trainer` runs an
  iteration as collection, credit, update, evaluation and records, each stage on its own section
  of the config; the rollouts (flat and tree), PPO-clip and its losses, the held-out episodes.
* :mod:`trainers.runs` -- the run dir: its lock and manifest, checkpoints, provenance, records,
  report (``summary.md``, curves) and console lines.
* :mod:`trainers.cli` -- the commands' code: ``python -m trainers.progpo`` (train),
  ``trainers.evaluate``, ``trainers.play``, ``trainers.export`` (those names call these).
* :mod:`trainers.advantages` -- the estimators (GRPO, RLOO, GiGPO, PlanPO, HGPO and ProGPO over
  each; pure numpy), registered in :mod:`trainers.advantages.registry`.
* :mod:`trainers.lab` -- the credit-trap lab, ``python -m trainers.lab``.
* :mod:`trainers.integrations` -- TRL, verl and verl-agent.

* :mod:`trainers.teachers` -- the teachers (``--distill``): their registry, protocol, options and
  the two built-ins.

Beside them: :mod:`trainers.config` (:class:`~trainers.config.TrainConfig`: its sections in
:mod:`trainers.config_sections`, YAML in :mod:`trainers.config_yaml`, checks in
:mod:`trainers.config_checks`, flags in :mod:`trainers.config_flags`), :mod:`trainers.build` (the
model, policy and envs of a config), :mod:`trainers.envs` (env factories), :mod:`trainers.finite`
(the non-finite checks),
:mod:`trainers.plugins` (loading plug-ins), :mod:`trainers.sft` (the behaviour-cloning warm start),
:mod:`trainers.runs.metrics` (JSONL, TensorBoard, W&B), :mod:`trainers.statistics`,
:mod:`trainers.seeds` (the named seed streams), :mod:`trainers.distributed` and
:mod:`trainers.sharding` (several processes), :mod:`trainers.forked` (streams in forked
processes), :mod:`trainers.stop_request`, :mod:`trainers.saved_policy` and
:mod:`trainers.model_card` (a trained run, read back and exported), :mod:`trainers.strict_yaml`.

Importing :mod:`trainers.advantages` or :mod:`trainers.loop.losses` loads numpy and
:mod:`wrappers.signals` (and torch, for the losses) only; the loop needs the ``train`` extra.
Another distribution's ``wrappers`` or ``agents`` earlier on ``sys.path`` is named in one line
(:mod:`progpo_envs.guard`) where the name is first used: :mod:`trainers.advantages` checks
``wrappers`` when its import fails, :mod:`trainers.config` and :mod:`trainers.config_checks` check ``agents`` and ``wrappers``. The verl plugin needs only
this package and :mod:`trainers.integrations`, so a foreign ``agents`` in the working directory
does not keep it out of verl.
"""

__progpo_package__ = True  # marker read by progpo_envs.guard (generic top-level name)
