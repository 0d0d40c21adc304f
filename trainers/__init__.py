"""ProGPO trainer: advantage estimators, losses, rollout + update loop.

Modules:

* :mod:`trainers.advantages` -- GRPO, RLOO, GiGPO and ProGPO (pure numpy; single group,
  batched and step level).
* :mod:`trainers.losses` -- PPO-clip token-mean loss, low-variance KL, entropy.
* :mod:`trainers.rollout` -- one episode per member of a ``GroupVectorEnv`` -> step records.
* :mod:`trainers.trainer` -- the loop (:class:`~trainers.trainer.Trainer`), checkpoints, evals.
* :mod:`trainers.config` -- :class:`~trainers.config.TrainConfig` (YAML + CLI flags).
* :mod:`trainers.progpo` -- ``python -m trainers.progpo``.

Importing :mod:`trainers.advantages` needs numpy only; the loop needs the ``train`` extra.
"""
