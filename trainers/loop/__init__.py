"""The training loop and its stages.

:class:`trainers.loop.trainer.Trainer` runs an iteration as five stage calls: collection
(:mod:`~trainers.loop.collector`, over :mod:`~trainers.rollouts.rollout` or
:mod:`~trainers.rollouts.tree_rollout`), credit (:mod:`~trainers.loop.credit`), update
(:mod:`~trainers.loop.updater`, over :mod:`~trainers.loop.ppo` and :mod:`~trainers.loop.losses`),
evaluation (:mod:`~trainers.loop.evaluator`, over the held-out episodes of
:mod:`~trainers.rollouts.eval_episodes`) and records (:mod:`trainers.runs.records`). Each stage takes
its own section of the config (:mod:`~trainers.loop.sections`); the iteration's record is
:mod:`~trainers.loop.train_record`.

This package's ``__init__`` imports nothing, so that :mod:`trainers.loop.losses` stays as light as
its own imports (numpy, torch, :mod:`wrappers.signals`).
"""
