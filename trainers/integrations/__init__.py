"""Adapters that put ProGPO into other LLM RL stacks (one module per stack, imported lazily).

* :mod:`trainers.integrations.trl` -- ``make_rollout_func`` for TRL's ``GRPOTrainer(rollout_func=...)``
  and the ``progress_conditioned_reward`` reward function (extra ``[trl]``).
* :mod:`trainers.integrations.verl` -- ProGPO(GRPO) / ProGPO(GiGPO) advantage estimators for
  verl's ``register_adv_est`` and a verl-agent style env manager over ``GroupVectorEnv``
  (extra ``[verl]``).

The OpenEnv server is :mod:`progpo_envs.serve`. Importing this package imports no stack.
"""
