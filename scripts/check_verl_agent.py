#!/usr/bin/env python
"""Check ProGPO's verl-agent integration against a real verl-agent checkout, one line per check.

    python scripts/check_verl_agent.py PATH_TO_VERL_AGENT [--envs alfworld webshop] [--groups 2]
                                       [--group-size 4] [--max-steps 8] [--seed 0]

Drives :mod:`trainers.integrations.verl_agent` through verl-agent's own ``TrajectoryCollector``
(``multi_turn_loop``, its ``gather_rollout_data``, its ``success_evaluator`` call) with a fake
generator that answers ``<think>...</think><action>CMD</action>``, CMD a random admissible
command (``click[buy now]`` half the time it is offered, so that some WebShop groups end early
and are held), tokenized with the bundled SmolLM2 tokenizer. Then it runs the estimator branch in
verl-agent's ``ray_trainer.compute_advantage`` on that batch and compares it with
:func:`trainers.advantages.step_advantages` / ``episode_advantages`` on the trajectories the
generator and the envs played. Nothing of verl-agent is stubbed: the generator stands in for its
vLLM workers, whose output (``responses``, ``attention_mask``...) it builds in the same layout.

Needs verl-agent's Python deps beside this package's (its vendored verl 0.3 wants
transformers 4.51, tensordict, omegaconf, codetiming): ``bash scripts/setup_verl_agent.sh`` builds
them into ``~/.cache/progpo/venv-verl-agent``. Exit status: 0 when every check passes.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import random
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FAILED: list[str] = []


def check(name: str, ok: bool, detail: str = "") -> bool:
    print(f"[{'ok' if ok else 'FAIL'}] {name}{': ' + detail if detail else ''}", flush=True)
    if not ok:
        FAILED.append(name)
    return ok


def load_file(path: Path, name: str):  # a module
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class FakeGenerator:
    """Stands in for verl-agent's ``actor_rollout_wg``: ``generate_sequences`` + ``world_size``."""

    world_size = 1
    response_length = 64  # vLLM pads every response to the rollout's response_length

    def __init__(self, tokenizer, manager, seed: int) -> None:
        self.tokenizer, self.manager, self.rng = tokenizer, manager, random.Random(seed)
        self.prompts: list[str] = []

    def generate_sequences(self, batch):  # verl's DataProto in and out
        import torch
        from verl import DataProto

        from agents.prompting import fill_placeholders

        ids, mask = batch.batch["input_ids"], batch.batch["attention_mask"]
        self.prompts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
        texts = []
        for i in range(ids.shape[0]):
            cmds = [fill_placeholders(c, self.manager._infos[i]) for c in self.manager.admissible(i)] or ["look"]
            finish = [c for c in cmds if c == "click[buy now]"]  # so that some groups end early
            cmd = finish[0] if finish and self.rng.random() < 0.5 else self.rng.choice(cmds)
            texts.append(f"<think>trying something</think><action>{cmd}</action>")
        enc = [self.tokenizer.encode(t, add_special_tokens=False) + [self.tokenizer.pad_token_id] for t in texts]
        width = self.response_length
        enc = [e[:width] for e in enc]
        resp = torch.full((len(enc), width), self.tokenizer.pad_token_id, dtype=torch.long)
        resp_mask = torch.zeros_like(resp)
        for i, e in enumerate(enc):
            resp[i, : len(e)] = torch.tensor(e)
            resp_mask[i, : len(e)] = 1
        pos = batch.batch["position_ids"]
        resp_pos = pos[:, -1:] + torch.arange(1, width + 1)[None, :]
        return DataProto.from_dict(
            tensors={
                "prompts": ids,
                "responses": resp,
                "input_ids": torch.cat([ids, resp], 1),
                "attention_mask": torch.cat([mask, resp_mask], 1),
                "position_ids": torch.cat([pos, resp_pos], 1),
            }
        )


def config_for(env: str, args: argparse.Namespace, estimator: str):
    from omegaconf import OmegaConf

    return OmegaConf.create(
        {
            "env": {
                "env_name": f"progpo/{env}",
                "seed": args.seed,
                "max_steps": args.max_steps,
                "history_length": 2,
                "rollout": {"n": args.group_size},
                "progpo": {"backend": "sync"},
            },
            "data": {
                "train_batch_size": args.groups,
                "val_batch_size": 1,
                "max_prompt_length": 4096,
                "truncation": "left",
                "return_raw_chat": False,
            },
            "algorithm": {
                "adv_estimator": estimator,
                "gamma": 0.95,
                "filter_groups": {"enable": False},
                "gigpo": {"step_advantage_w": 1.0},
                "progpo": {"success_threshold": SUCCESS_THRESHOLD},
            },
        }
    )


def record_steps(manager):
    """Wrap ``manager.step`` to log, per env, what each active step did (the reference's input)."""
    log = [[] for _ in range(manager.envs.num_envs)]
    step = manager.step

    def logged(text_actions):
        before = [(o, bool(d)) for o, d in zip(manager._observations()["anchor"], manager._done)]
        obs, rewards, dones, infos = step(text_actions)
        for i, (anchor, was_done) in enumerate(before):
            if not was_done:
                log[i].append(
                    {
                        "anchor": anchor,
                        "first_visit": bool(infos[i].get("first_visit", False)),
                        "reward": float(rewards[i]),
                        "done": bool(dones[i]),
                        "task_seed": infos[i].get("task_seed"),
                        "coverage_rate": infos[i].get("coverage_rate"),
                    }
                )
        return obs, rewards, dones, infos

    manager.step = logged
    return log


#: the estimators the check runs through verl-agent's compute_advantage (every name of the branch)
BRANCH_ESTIMATORS = ("progpo_gigpo", "progpo_grpo", "planpo", "progpo_planpo", "hgpo", "progpo_hgpo")
#: PlanPO's success threshold in the check: random commands rarely win, but often score partly on WebShop
SUCCESS_THRESHOLD = 0.5


def reference(log, group_size: int, estimator: str, gamma: float, lengths: dict):
    """Per (env, t): the estimator's advantage from trainers.advantages on the logged trajectories
    (``lengths[(env, t)]``: the response tokens of that step, PlanPO's turn lengths)."""
    from trainers.advantages import AdvantageConfig, episode_advantages, factorize, step_advantages

    outcomes = np.array([max((s["reward"] for s in steps), default=0.0) for steps in log])
    groups = np.arange(len(log)) // group_size
    if estimator == "progpo_grpo":
        cover = np.array([steps[-1]["coverage_rate"] if steps else 0.0 for steps in log], dtype=float)
        adv = episode_advantages(outcomes, groups, cover, estimator="progpo-grpo")
        return {(i, t): adv[i] for i, steps in enumerate(log) for t in range(len(steps))}
    step_traj = np.array([i for i, steps in enumerate(log) for _ in steps])
    step_t = np.array([t for steps in log for t in range(len(steps))])
    anchors = [s["anchor"] for steps in log for s in steps]
    first = np.array([s["first_visit"] for steps in log for s in steps])
    resp = np.array([lengths[(int(i), int(t))] for i, t in zip(step_traj, step_t)], dtype=float)
    out = step_advantages(
        outcomes,
        groups,
        step_traj,
        step_t,
        state_ids=factorize(anchors),
        first_visit=first,
        config=AdvantageConfig(estimator=estimator.replace("_", "-"), gamma=gamma, success_threshold=SUCCESS_THRESHOLD),
        response_lengths=resp,
    )
    return {(int(i), int(t)): a for i, t, a in zip(step_traj, step_t, out.steps)}


def run_env(env: str, args: argparse.Namespace, tokenizer, verl_agent: Path) -> None:
    import torch
    from verl import DataProto

    from trainers.integrations import verl_agent as va

    t0 = time.perf_counter()
    config = config_for(env, args, "progpo_gigpo")
    envs, val_envs = va.make_envs(config)
    val_envs.close()
    import agent_system.multi_turn_rollout as rollout_pkg

    check(
        f"{env}: make_envs installs the collector subclass",
        rollout_pkg.TrajectoryCollector.__name__ == "ProGPOTrajectoryCollector"
        and issubclass(rollout_pkg.TrajectoryCollector, va.ProGPOTrajectoryCollector.__mro__[1]),
    )
    # verl-agent's own projection function, loaded from its file, has the package's manager's call signature
    proj_file = verl_agent / "agent_system/environments/env_package" / env / "projection.py"
    theirs = getattr(load_file(proj_file, f"_va_{env}_projection"), f"{env}_projection")
    ours = va.alfworld_projection if env == "alfworld" else va.webshop_projection
    check(
        f"{env}: projection signature matches verl-agent's {env}_projection",
        list(inspect.signature(theirs).parameters) == list(inspect.signature(ours).parameters),
        f"{list(inspect.signature(theirs).parameters)}",
    )
    envs.projection_f = theirs  # play the rollout through verl-agent's own projection
    log = record_steps(envs)
    gen = FakeGenerator(tokenizer, envs, args.seed)
    collector = rollout_pkg.TrajectoryCollector(config=config, tokenizer=tokenizer)
    b = args.groups
    gen_batch = DataProto.from_dict(
        tensors={"input_ids": torch.zeros(b, 1, dtype=torch.long)},
        non_tensors={
            "raw_prompt": np.array([[{"role": "user", "content": ""}]] * b, dtype=object),
            "data_source": np.array([env] * b, dtype=object),
        },
    )
    first_prompt = ""
    generate = gen.generate_sequences

    def keep_first_prompt(data):
        nonlocal first_prompt
        out = generate(data)
        first_prompt = first_prompt or gen.prompts[0]
        return out

    gen.generate_sequences = keep_first_prompt
    batch = collector.multi_turn_loop(gen_batch=gen_batch, actor_rollout_wg=gen, envs=envs, is_train=True)
    check_batch(env, batch, log, gen.prompts[0], first_prompt, time.perf_counter() - t0)
    check_branches(env, batch, log, args)
    envs.close()


def check_batch(env: str, batch: Any, log: list[list[dict]], prompt: str, first_prompt: str, seconds: float) -> None:
    """The collected batch: one row per step, the whole user turn, ProGPO's columns, held groups, anchors."""
    n_rows = len(batch.batch["responses"])
    check(
        f"{env}: TrajectoryCollector.multi_turn_loop ran",
        n_rows == sum(len(s) for s in log),
        f"{n_rows} step rows from {len(log)} envs in {seconds:.1f} s",
    )
    check(
        f"{env}: obs['text'] is the whole user turn",
        all(k in prompt for k in ("Your task is to", "admissible actions", "<action>")),
        "task, history, observation, admissible actions, format instruction",
    )
    cols = (
        "progpo_outcome",
        "progpo_first_visit",
        "progpo_coverage_rate",
        "progpo_turns",
        "progpo_step",
        "anchor_obs",
        "traj_uid",
    )
    check(
        f"{env}: ProGPO's per-step columns reach non_tensor_batch",
        all(c in batch.non_tensor_batch for c in cols),
        ", ".join(c for c in cols if c in batch.non_tensor_batch),
    )
    seeds_per_env = [{s["task_seed"] for s in steps if s["task_seed"] is not None} for steps in log]
    longest = max(len(steps) for steps in log)
    early = sum(1 for steps in log if steps and steps[-1]["done"] and len(steps) < longest)
    held = all(len(s) <= 1 for s in seeds_per_env) and all(not any(s["done"] for s in steps[:-1]) for steps in log)
    inactive = int(np.sum(~np.asarray(batch.non_tensor_batch["active_masks"], dtype=bool)))
    check(
        f"{env}: finished groups are held until the batch ends",
        held and inactive == 0,
        f"one task per env, no step after an env's last; {early} of {len(log)} envs ended before the last step",
    )
    first_anchor = str(batch.non_tensor_batch["anchor_obs"][0])
    check(
        f"{env}: anchors are the raw observation text",
        first_anchor.strip()[:200] in first_prompt,
        repr(first_anchor[:60]) + "...",
    )


def check_branches(env: str, batch: Any, log: list[list[dict]], args: argparse.Namespace) -> None:
    """verl-agent's ``compute_advantage``, each ProGPO branch, against :mod:`trainers.advantages` on
    the batch the collector made; and a missing column raises."""
    import torch
    from verl.trainer.ppo import ray_trainer

    from trainers.integrations.verl import MissingColumnsError

    batch.batch["token_level_rewards"] = torch.zeros_like(batch.batch["responses"], dtype=torch.float32)
    traj_env = {u: i for i, u in enumerate(dict.fromkeys(batch.non_tensor_batch["traj_uid"]))}
    mask = (
        batch.batch["response_mask"]
        if "response_mask" in batch.batch.keys()
        else ray_trainer.compute_response_mask(batch)
    )
    row_len = mask.sum(dim=-1).tolist()  # the response tokens of each row: PlanPO's turn lengths
    lengths = {
        (traj_env[u], int(t)): row_len[r]
        for r, (u, t) in enumerate(zip(batch.non_tensor_batch["traj_uid"], batch.non_tensor_batch["progpo_step"]))
    }
    for estimator in BRANCH_ESTIMATORS:
        out = ray_trainer.compute_advantage(batch, adv_estimator=estimator, gamma=0.95, step_advantage_w=1.0)
        want = reference(log, args.group_size, estimator, 0.95, lengths)
        got = out.batch["advantages"][:, 0].numpy()
        diffs = [
            abs(float(got[r]) - float(want[(traj_env[u], int(t))]))
            for r, (u, t) in enumerate(zip(batch.non_tensor_batch["traj_uid"], batch.non_tensor_batch["progpo_step"]))
        ]
        check(
            f"{env}: verl-agent compute_advantage branch {estimator} == trainers.advantages",
            max(diffs) < 1e-5,
            f"max |diff| {max(diffs):.2e} over {len(diffs)} rows, {int(np.sum(np.abs(got) > 1e-9))} of them non-zero",
        )
    batch.non_tensor_batch.pop("progpo_first_visit")
    try:
        ray_trainer.compute_advantage(batch, adv_estimator="progpo_gigpo", gamma=0.95)
        check(f"{env}: progpo_gigpo without its columns raises", False, "it returned")
    except MissingColumnsError as err:
        check(f"{env}: progpo_gigpo without its columns raises", True, str(err)[:90] + "...")


def trainer_accepts(verl_agent: Path, estimator: str) -> str:
    """Build verl-agent's ``RayPPOTrainer`` from its own default config with ``estimator``: what stops it."""
    from omegaconf import OmegaConf, open_dict
    from verl.trainer.ppo import ray_trainer

    cfg = OmegaConf.load(verl_agent / "verl/trainer/config/ppo_trainer.yaml")
    with open_dict(cfg):
        cfg.algorithm.adv_estimator = estimator
    try:
        ray_trainer.RayPPOTrainer(
            config=cfg,
            tokenizer=None,
            role_worker_mapping={ray_trainer.Role.ActorRollout: object},
            resource_pool_manager=None,
        )
    except NotImplementedError:
        return "rejected (NotImplementedError: its estimator check)"
    except Exception as err:  # any later stop means the estimator check passed
        return f"accepted (then stops at {type(err).__name__}: {str(err)[:60]}...: no workers here)"
    return "accepted"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("verl_agent", type=Path, help="a verl-agent checkout (its agent_system/ and verl/ folders)")
    ap.add_argument("--envs", nargs="+", default=["alfworld", "webshop"], choices=["alfworld", "webshop"])
    ap.add_argument("--groups", type=int, default=2)
    ap.add_argument("--group-size", type=int, default=4)
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    path = args.verl_agent.resolve()
    if not (path / "agent_system" / "multi_turn_rollout" / "rollout_loop.py").is_file():
        print(
            f"error: {path} is not a verl-agent checkout (no agent_system/multi_turn_rollout/rollout_loop.py)",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(path))
    import agent_system.environments.base as base
    from verl.trainer.ppo import ray_trainer  # noqa: F401 - verl-agent's vendored verl, before ours is used

    from trainers.integrations.verl_agent import ProGPOEnvironmentManager

    wanted = [m for m, _ in inspect.getmembers(base.EnvironmentManagerBase, inspect.isfunction)]
    missing = [m for m in wanted if not hasattr(ProGPOEnvironmentManager, m)]
    check(
        "EnvironmentManagerBase contract: every method implemented",
        not missing,
        ", ".join(wanted) if not missing else f"missing {missing}",
    )
    before = trainer_accepts(path, "progpo_gigpo")
    from trainers.integrations.verl_agent import install

    install(None)
    after = trainer_accepts(path, "progpo_gigpo")
    check(
        "RayPPOTrainer takes algorithm.adv_estimator=progpo_gigpo after install()",
        before.startswith("rejected") and after.startswith("accepted"),
        f"before: {before}; after: {after}",
    )
    others = {name: trainer_accepts(path, name) for name in BRANCH_ESTIMATORS if name != "progpo_gigpo"}
    check(
        "RayPPOTrainer takes the other branch estimators after install()",
        all(v.startswith("accepted") for v in others.values()),
        "; ".join(f"{k}: {v}" for k, v in others.items()),
    )
    print("stubs: none (the fake generator replaces verl-agent's vLLM actor workers, which need a GPU)")
    from transformers import AutoTokenizer

    from agents.models import smollm2_gguf_path

    gguf = smollm2_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    tokenizer.pad_token = "<|im_end|>"
    for env in args.envs:
        run_env(env, args, tokenizer, path)
    print(f"{'all checks passed' if not FAILED else f'{len(FAILED)} check(s) failed: ' + '; '.join(FAILED)}")
    return 1 if FAILED else 0


if __name__ == "__main__":
    raise SystemExit(main())
