"""ProGPO trainer: advantage estimators, losses, rollout + update loop.

Modules:

* :mod:`trainers.advantages` -- GRPO, RLOO, GiGPO, PlanPO, HGPO and ProGPO over each (pure
  numpy; single group, batched and step level).
* :mod:`trainers.losses` -- PPO-clip token-mean loss, low-variance KL, entropy.
* :mod:`trainers.rollout` -- one episode per member of a ``GroupVectorEnv`` -> step records.
* :mod:`trainers.tree_rollout` -- ``--rollout tree``: a task's group grown as a tree (forks by replay).
* :mod:`trainers.teachers` -- ``--distill``: the privileged (I-SDPO) and hindsight (SEED) teachers' losses.
* :mod:`trainers.trainer` -- the loop (:class:`~trainers.trainer.Trainer`), checkpoints, evals.
* :mod:`trainers.config` -- :class:`~trainers.config.TrainConfig` (YAML + CLI flags).
* :mod:`trainers.progpo` -- ``python -m trainers.progpo``.

Importing :mod:`trainers.advantages` needs numpy (and gymnasium, for the name guard of
:mod:`progpo_envs.guard`) only; the loop needs the ``train`` extra.
"""

__progpo_package__ = True  # marker read by progpo_envs.guard (generic top-level name)

from progpo_envs.guard import check_import_names  # noqa: E402

# One-line error if wrappers / trainers is another distribution's. `agents` is checked where it is
# imported (trainers.config, the verl-agent adapter): the verl plugin needs only this package and
# trainers.integrations, so a foreign `agents` in the working directory must not keep it out of verl.
check_import_names(("wrappers", "trainers"))
