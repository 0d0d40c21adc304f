"""Playing episodes: a training rollout and the held-out evaluation.

:mod:`~trainers.rollouts.rollout` holds a rollout's records (:class:`~trainers.rollouts.rollout.Rollout`,
its steps and trajectories) and plays one episode per member of a group vector env;
:mod:`~trainers.rollouts.tree_rollout` grows a task's group as a tree (``--rollout tree``, forks by
replay); :mod:`~trainers.rollouts.eval_episodes` plays a run's fixed held-out episodes (the
evaluation plan, in streams or forked processes). They read no config: the loop's stages call
them with what they need.
"""
