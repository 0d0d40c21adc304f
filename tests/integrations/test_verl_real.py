"""ProGPO in the real verl 0.9 (its own venv: scripts/setup_verl.sh, marker ``verl``).

What a verl user relies on: the plugin reaches a process that imports verl alone; verl's own
legacy ``compute_advantage`` and its v1 ``PPOTrainer._compute_advantage`` compute ProGPO exactly
when the columns are there; without them both raise one line, never train GRPO instead.
The v1 test replaces TransferQueue's storage (a Ray service) by an in-memory store holding the
TensorDict that verl's own agent loop builds (``list_of_dict_to_tensordict``); the rest is verl's code.
"""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

pytestmark = pytest.mark.verl
torch = pytest.importorskip("torch", reason="extra [train] not installed")
pytest.importorskip("verl", reason="verl 0.9 not installed (bash scripts/setup_verl.sh)")
# Where verl is installed, its PPO trainers must import: the [verl] extra brings what they need.

from omegaconf import OmegaConf
from verl import DataProto
from verl.trainer.ppo import ray_trainer
from verl.trainer.ppo.v1 import trainer_base
from verl.trainer.ppo.v1.agent_loop_tq import list_of_dict_to_tensordict

from trainers.advantages import AdvantageConfig, episode_advantages, factorize, step_advantages

sys.path.insert(0, os.path.dirname(__file__))
from step_rows import step_rows

from trainers.integrations.verl import MissingColumnsError

PROBE = (
    "import sys, verl; from verl.trainer.ppo import core_algos, ray_trainer; "
    "names = [n for n in ('progpo_grpo', 'progpo_gigpo', 'progpo_shaped_grpo', 'planpo', 'progpo_planpo', 'hgpo', 'progpo_hgpo') if n in core_algos.ADV_ESTIMATOR_REGISTRY]; "
    "print(','.join(names), getattr(ray_trainer.compute_advantage, '_progpo', False))"
)


ALL_NAMES = "progpo_grpo,progpo_gigpo,progpo_shaped_grpo,planpo,progpo_planpo,hgpo,progpo_hgpo"


def _probe(**env: str) -> str:
    """Run PROBE in a fresh interpreter that imports verl and nothing of progpo, as verl's TaskRunner does."""
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env={**os.environ, **env}, cwd="/"
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.strip().splitlines()[-1]


def test_plugin_reaches_a_process_that_imports_only_verl() -> None:
    assert _probe() == ALL_NAMES + " True"
    # it is the entry point that loads it: with plugins off nothing is registered ...
    assert _probe(VERL_USE_EXTERNAL_PLUGINS="none") == "False"
    # ... and verl's other hook loads the same module
    assert (
        _probe(VERL_USE_EXTERNAL_PLUGINS="none", VERL_USE_EXTERNAL_MODULES="trainers.integrations.verl_plugin")
        == ALL_NAMES + " True"
    )


def test_a_failing_patch_leaves_verl_importable() -> None:
    """A patch that raises inside the import hook warns; verl's module imports and works as verl wrote it."""
    code = (
        "import trainers.integrations.verl_plugin as p\n"
        "def boom(module):\n    raise RuntimeError('boom')\n"
        "p._PATCHES[p._LEGACY] = boom\n"
        "from verl.trainer.ppo import ray_trainer\n"
        "print(callable(ray_trainer.compute_advantage), getattr(ray_trainer.compute_advantage, '_progpo', False))"
    )
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd="/", env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "True False"
    assert "could not patch verl.trainer.ppo.ray_trainer (RuntimeError: boom)" in out.stderr


def _episode_batch(n_groups: int = 3, g: int = 4, length: int = 5):
    rng = np.random.default_rng(0)
    outcome = np.zeros(n_groups * g)
    outcome[-g] = 1.0  # last group has a success, the others are all-failed
    cover = rng.uniform(size=n_groups * g).round(3)
    uid = np.repeat(np.array([f"task{k}" for k in range(n_groups)], dtype=object), g)
    lengths = rng.integers(1, length + 1, n_groups * g)
    mask = (torch.arange(length)[None, :] < torch.as_tensor(lengths)[:, None]).long()
    scores = torch.zeros(n_groups * g, length)
    scores[torch.arange(n_groups * g), torch.as_tensor(lengths) - 1] = torch.as_tensor(outcome, dtype=torch.float32)
    return outcome, cover, uid, mask, scores


def _legacy(estimator: str, non_tensors: dict, mask: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    data = DataProto.from_dict(tensors={"token_level_rewards": scores, "response_mask": mask}, non_tensors=non_tensors)
    from verl.trainer.config import AlgoConfig

    out = ray_trainer.compute_advantage(data, adv_estimator=estimator, config=AlgoConfig(adv_estimator=estimator))
    return out.batch["advantages"]


def test_legacy_compute_advantage_is_progpo_with_columns_and_raises_without() -> None:
    outcome, cover, uid, mask, scores = _episode_batch()
    adv = _legacy("progpo_grpo", {"uid": uid, "progpo_outcome": outcome, "progpo_coverage_rate": cover}, mask, scores)
    want = episode_advantages(outcome, uid, cover, estimator="progpo-grpo")
    assert torch.equal(adv, torch.as_tensor(want, dtype=torch.float32)[:, None] * mask)
    grpo = episode_advantages(outcome, uid, estimator="grpo")
    assert np.abs(want - grpo).max() > 0.5  # the all-failed groups: GRPO gives 0, ProGPO does not
    with pytest.raises(
        MissingColumnsError, match="progpo_grpo: non_tensor_batch lacks progpo_outcome, progpo_coverage_rate"
    ):
        _legacy("progpo_grpo", {"uid": uid}, mask, scores)
    shaped = _legacy("progpo_shaped_grpo", {"uid": uid}, mask, scores)  # the explicit reward-shaping route
    assert torch.allclose(shaped[:, :1], torch.as_tensor(grpo, dtype=torch.float32)[:, None] * mask[:, :1])


def _step_columns(outcome, traj_group, step_traj, step_t, anchors, first) -> dict:
    """verl-agent's non-tensor columns of step rows (one row per step, ``uid`` the group)."""
    uid = np.array([f"g{k}" for k in traj_group[step_traj]], dtype=object)
    traj_uid = np.array([f"t{k}" for k in step_traj], dtype=object)
    columns = {"uid": uid, "traj_uid": traj_uid, "anchor_obs": anchors, "progpo_first_visit": first}
    return {**columns, "progpo_step": step_t, "progpo_outcome": outcome[step_traj]}


def _step_want(outcome, traj_group, step_traj, step_t, anchors, first, estimator: str) -> np.ndarray:
    """The package's own step advantages of those rows."""
    config = AdvantageConfig(estimator=estimator)
    states = factorize(list(anchors))
    return step_advantages(outcome, traj_group, step_traj, step_t, states, first_visit=first, config=config).steps


def test_legacy_progpo_gigpo_on_step_rows_equals_step_advantages() -> None:
    _, step_traj, step_t, anchors, first = step_rows(np.random.default_rng(3))
    outcome = np.zeros(8)
    traj_group = np.repeat(np.arange(2), 4)
    rows = step_traj.size
    mask = torch.ones(rows, 3, dtype=torch.long)
    ntb = _step_columns(outcome, traj_group, step_traj, step_t, anchors, first)
    adv = _legacy("progpo_gigpo", ntb, mask, torch.zeros(rows, 3))
    want = _step_want(outcome, traj_group, step_traj, step_t, anchors, first, "progpo-gigpo")
    assert torch.equal(adv[:, 0], torch.as_tensor(want, dtype=torch.float32))
    ntb.pop("progpo_first_visit")
    with pytest.raises(MissingColumnsError, match="progpo_gigpo: non_tensor_batch lacks progpo_first_visit"):
        _legacy("progpo_gigpo", ntb, mask, torch.zeros(rows, 3))


def test_legacy_planpo_on_episode_rows_and_hgpo_on_step_rows() -> None:
    outcome, cover, uid, mask, scores = _episode_batch()
    turns = np.arange(outcome.size) % 5 + 2
    outcome[-3] = 1.0  # two successes of different lengths in the last group
    ntb = {"uid": uid, "progpo_outcome": outcome, "progpo_coverage_rate": cover, "progpo_turns": turns}
    for name in ("planpo", "progpo_planpo"):
        adv = _legacy(name, ntb, mask, scores)
        want = episode_advantages(outcome, uid, cover, estimator=name.replace("_", "-"), turns=turns)
        np.testing.assert_allclose(
            adv.numpy(), (torch.as_tensor(want, dtype=torch.float32)[:, None] * mask).numpy(), atol=1e-6
        )
    with pytest.raises(MissingColumnsError, match="planpo: non_tensor_batch lacks progpo_turns"):
        _legacy("planpo", {"uid": uid, "progpo_outcome": outcome}, mask, scores)
    _, step_traj, step_t, anchors, first = step_rows(np.random.default_rng(5), n_states=3)
    outcome = np.array([1.0, 0, 0, 0, 0, 0, 0, 0])
    traj_group = np.repeat(np.arange(2), 4)
    rows = step_traj.size
    ntb = _step_columns(outcome, traj_group, step_traj, step_t, anchors, first)
    for name in ("hgpo", "progpo_hgpo"):
        adv = _legacy(name, ntb, torch.ones(rows, 3, dtype=torch.long), torch.zeros(rows, 3))
        want = _step_want(outcome, traj_group, step_traj, step_t, anchors, first, name.replace("_", "-"))
        np.testing.assert_allclose(adv[:, 0].numpy(), want, atol=1e-6)


class _Store:
    """TransferQueue's kv_batch_put / kv_batch_get over a dict (the storage only)."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}

    def kv_batch_put(self, keys, partition_id, fields, tags=None):  # TQ's signature
        for i, key in enumerate(keys):
            self.rows.setdefault(key, {}).update({f: fields[f][i] for f in fields.keys()})
        return SimpleNamespace(keys=keys, partition_id=partition_id)

    def kv_batch_get(self, keys, partition_id, select_fields):
        return list_of_dict_to_tensordict(
            [{f: self.rows[k][f] for f in select_fields if f in self.rows[k]} for k in keys]
        )


def _v1(monkeypatch: pytest.MonkeyPatch, extra_fields: list[dict], estimator: str = "progpo_grpo") -> np.ndarray:
    outcome, cover, uid, mask, scores = _episode_batch()
    keys = [f"{u}_{i}_0" for i, u in enumerate(uid)]  # {uid}_{session_id}_{index}, as the agent loop writes
    rows = [
        {
            "uid": u,
            "response_mask": mask[i][mask[i] > 0],
            "rm_scores": scores[i][mask[i] > 0],
            "extra_fields": extra_fields[i],
        }
        for i, u in enumerate(uid)
    ]
    store = _Store()
    store.kv_batch_put(keys, "train", list_of_dict_to_tensordict(rows))
    monkeypatch.setattr(trainer_base, "tq", store)
    config = OmegaConf.create(
        {
            "algorithm": {
                "adv_estimator": estimator,
                "use_kl_in_reward": False,
                "gamma": 1.0,
                "lam": 1.0,
                "norm_adv_by_std_in_grpo": True,
            },
            "actor_rollout_ref": {"rollout": {"n": 4}},
        }
    )
    trainer_base.PPOTrainer._compute_advantage(SimpleNamespace(config=config), _BatchMeta(keys), {})
    return np.array([float(store.rows[k]["advantages"][0]) for k in keys])


class _BatchMeta:
    """The two fields of TransferQueue's KVBatchMeta that _compute_advantage reads, and its length."""

    def __init__(self, keys: list[str]) -> None:
        self.keys, self.partition_id = keys, "train"

    def __len__(self) -> int:
        return len(self.keys)


def test_v1_compute_advantage_reads_columns_from_extra_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    outcome, cover, uid, _, _ = _episode_batch()
    want = episode_advantages(outcome, uid, cover, estimator="progpo-grpo").astype(np.float32)
    top = [{"progpo_outcome": float(o), "progpo_coverage_rate": float(c)} for o, c in zip(outcome, cover)]
    np.testing.assert_array_equal(_v1(monkeypatch, top), want)
    nested = [{"reward_extra_info": row} for row in top]  # what a reward function's extra info gives
    np.testing.assert_array_equal(_v1(monkeypatch, nested), want)
    with pytest.raises(MissingColumnsError, match="lacks progpo_coverage_rate"):
        _v1(monkeypatch, [{"progpo_outcome": float(o)} for o in outcome])
