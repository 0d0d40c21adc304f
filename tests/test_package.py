"""The package installs and registers its env ids."""
import gymnasium as gym


def test_env_ids_registered():
    import progpo_envs

    assert progpo_envs.ALFWORLD_ID in gym.registry
    assert progpo_envs.WEBSHOP_ID in gym.registry
    spec = gym.spec("ProGPO-WebShop-v0")
    assert spec.entry_point == "progpo_envs.webshop.env:WebShopEnv"
