"""ProGPO trainer: advantage estimators, losses, rollout + update loop."""
