"""ProGPO environments: ALFWorld and WebShop as Gymnasium environments.

Importing this package registers the environment ids::

    import gymnasium as gym
    import progpo_envs  # noqa: F401  (registers the ids)
    env = gym.make("ProGPO-ALFWorld-v0")
    env = gym.make("ProGPO-WebShop-v0")

``gym.make("progpo_envs:ProGPO-WebShop-v0")`` imports and registers in one call.
"""

from __future__ import annotations

from gymnasium.envs.registration import WrapperSpec, register, registry

from progpo_envs.guard import check_import_names

check_import_names(("wrappers",))  # one-line error if wrappers (which the envs use) is another distribution's

ALFWORLD_ID = "ProGPO-ALFWorld-v0"
WEBSHOP_ID = "ProGPO-WebShop-v0"


def register_envs() -> None:
    """Register the ProGPO env ids with Gymnasium (idempotent).

    Without Gymnasium's passive env checker: after a first ``reset`` that raises (a bad
    ``task_id``), the checker keeps a half-set state and fails every later ``step`` with
    ``cannot unpack non-iterable NoneType object``, so a good reset would never give a working
    episode. Both envs pass ``gymnasium.utils.env_checker.check_env`` in the tests instead.
    """
    if ALFWORLD_ID not in registry:
        register(
            id=ALFWORLD_ID,
            entry_point="progpo_envs.alfworld.env:ALFWorldEnv",
            max_episode_steps=50,  # ALFWorld's standard limit; gym.make(..., max_episode_steps=N) overrides it
            disable_env_checker=True,
        )
    if WEBSHOP_ID not in registry:
        register(
            id=WEBSHOP_ID,
            entry_point="progpo_envs.webshop.env:WebShopEnv",
            max_episode_steps=15,  # GRPO/GiGPO's limit; gym.make(..., max_episode_steps=N) overrides it
            disable_env_checker=True,
            # outside the TimeLimit: a truncated episode stays over until reset
            additional_wrappers=(WrapperSpec("EpisodeOver", "progpo_envs.webshop.env:EpisodeOver", {}),),
        )


register_envs()

__all__ = ["ALFWORLD_ID", "WEBSHOP_ID", "register_envs"]
