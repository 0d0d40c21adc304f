"""ProGPO trainer: advantage estimators, losses, rollout + update loop.

Modules:

* :mod:`trainers.progpo` -- ``python -m trainers.progpo``; :mod:`trainers.config` -- its
  :class:`~trainers.config.TrainConfig` (YAML + CLI flags).
* :mod:`trainers.trainer` -- the loop (:class:`~trainers.trainer.Trainer`): rollout, advantages,
  update, evaluation, checkpoints.
* :mod:`trainers.envs` -- the env factories (env + canonicalizer + first-visit coverage).
* :mod:`trainers.rollout` -- one episode per member of a ``GroupVectorEnv`` -> step records;
  :mod:`trainers.tree_rollout` -- ``--rollout tree``: a task's group grown as a tree (forks by replay).
* :mod:`trainers.advantages` -- GRPO, RLOO, GiGPO, PlanPO, HGPO and ProGPO over each (pure
  numpy; single group, batched and step level).
* :mod:`trainers.ppo` -- the PPO-clip update; :mod:`trainers.losses` -- its loss, KL and entropy.
* :mod:`trainers.teachers` -- ``--distill``: the privileged (I-SDPO) and hindsight (SEED) teachers'
  losses; :mod:`trainers.teacher_registry` -- the teachers by name, their labels and reports (standard library only).
* :mod:`trainers.sft` -- the behaviour-cloning warm start.
* :mod:`trainers.evaluation` -- held-out evaluation plans; :mod:`trainers.statistics` -- t
  intervals, the paired bootstrap, the AUC of coverage for success; :mod:`trainers.report` --
  ``summary.md`` and curves; :mod:`trainers.metrics` -- JSONL and TensorBoard logging.
* :mod:`trainers.checkpoint`, :mod:`trainers.run_dir`, :mod:`trainers.stop_request` -- checkpoints,
  the run directory's lock and manifest, a stop asked for by a signal.
* :mod:`trainers.distributed`, :mod:`trainers.sharding` -- several processes (torchrun, FSDP2), and
  the group shards they play; :mod:`trainers.forked` -- shares of a rollout or an evaluation in
  processes forked from one run (``--rollout-streams``, ``--eval-streams``).
* :mod:`trainers.seeds` -- the named seed streams.
* :mod:`trainers.integrations` -- TRL, verl and verl-agent.

Importing :mod:`trainers.advantages` or :mod:`trainers.losses` loads numpy and
:mod:`wrappers.signals` (and torch, for the losses) only; the loop needs the ``train`` extra.
Another distribution's ``wrappers`` or ``agents`` earlier on ``sys.path`` is named in one line
(:mod:`progpo_envs.guard`) where the name is first used: :mod:`trainers.advantages` checks
``wrappers`` when its import fails, :mod:`trainers.config` checks ``agents`` and ``wrappers``. The verl plugin needs only
this package and :mod:`trainers.integrations`, so a foreign ``agents`` in the working directory
does not keep it out of verl.
"""

__progpo_package__ = True  # marker read by progpo_envs.guard (generic top-level name)
