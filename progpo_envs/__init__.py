"""ProGPO environments: ALFWorld and WebShop as Gymnasium environments.

Importing this package registers the environment ids::

    import gymnasium as gym
    import progpo_envs  # noqa: F401  (registers the ids)
    env = gym.make("ProGPO-ALFWorld-v0")
    env = gym.make("ProGPO-WebShop-v0")

``gym.make("progpo_envs:ProGPO-WebShop-v0")`` imports and registers in one call.
"""
from __future__ import annotations

from gymnasium.envs.registration import register, registry

from progpo_envs.guard import check_import_names

check_import_names()  # one-line error if agents / wrappers / trainers is another distribution's

ALFWORLD_ID = "ProGPO-ALFWorld-v0"
WEBSHOP_ID = "ProGPO-WebShop-v0"


def register_envs() -> None:
    """Register the ProGPO env ids with Gymnasium (idempotent)."""
    if ALFWORLD_ID not in registry:
        register(
            id=ALFWORLD_ID,
            entry_point="progpo_envs.alfworld.env:ALFWorldEnv",
            max_episode_steps=50,  # ALFWorld's standard limit; gym.make(..., max_episode_steps=N) overrides it
            disable_env_checker=False,
        )
    if WEBSHOP_ID not in registry:
        register(
            id=WEBSHOP_ID,
            entry_point="progpo_envs.webshop.env:WebShopEnv",
            max_episode_steps=15,  # GRPO/GiGPO's limit; gym.make(..., max_episode_steps=N) overrides it
            disable_env_checker=False,
        )


register_envs()

__all__ = ["ALFWORLD_ID", "WEBSHOP_ID", "register_envs"]
