"""Does first-visit coverage go with success? The within-group AUC, per state key and task type.

    python benchmarks/coverage_auc.py                                  # ALFWorld, the CPU demo's warm start
    python benchmarks/coverage_auc.py --config configs/webshop_cpu_demo.yaml --groups 24
    python benchmarks/coverage_auc.py --bc-steps 20                   # a weaker starting policy

ProGPO can only help if, among trajectories of the same task, the ones that reach more new states
are the ones that succeed. This measures that before any RL: the starting policy of a trainer
config (its warm start, ``--bc-steps`` to change its length) plays ``--groups`` groups of
``group_size`` trajectories on train tasks; in the groups with mixed outcomes (a WebShop partial
score counts as R > 0), the AUC of the coverage rate P_i = (D_i - 1) / T_i for R_i > 0
(:mod:`trainers.statistics`), with a 95% bootstrap interval over groups, overall and per task
type, for each state key (``canonical``: the env's canonicalizer; ``exact``: distinct raw
observation strings, the paper's D).

Both keys see the SAME episodes: the policy's choices do not depend on the key (its prompt is
built from the raw transcript) and its sampling is seeded per step, so the two rollouts are
identical but for the coverage (the script checks the outcomes match). It prints a table and
writes ``--out`` (JSON: config, per key: overall and per task type AUC, pairs, groups, CI).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from trainers.config import TrainConfig, load_yaml
from trainers.envs import STATE_KEYS, make_env_fn
from trainers.statistics import auc_with_ci


def carry_free_env(split: str, max_steps: int) -> Any:
    """ALFWorld with :func:`~progpo_envs.alfworld.canonical.canonicalize_alfworld_carry_free` as
    the state key: the candidate fix of the carried-object mismatch, measured beside the others."""
    import gymnasium as gym

    import progpo_envs  # noqa: F401  (registers the ids)
    from progpo_envs.alfworld.canonical import canonicalize_alfworld_carry_free
    from wrappers import CanonicalizeObservation, FirstVisitCoverage

    base = gym.make("ProGPO-ALFWorld-v0", split=split, max_episode_steps=max_steps)
    return FirstVisitCoverage(CanonicalizeObservation(base, canonicalize_alfworld_carry_free))


def keys_for(env: str) -> tuple[str, ...]:
    return (*STATE_KEYS, "carry-free") if env == "alfworld" else STATE_KEYS


def rollouts(cfg: TrainConfig, groups: int, iteration: int) -> dict[str, dict]:
    """Warm start once, then the same rollout under each state key: per key, trajectory arrays."""
    import torch

    from trainers.loop.trainer import Trainer

    torch.set_num_threads(max(cfg.torch_threads, 1))
    cfg = dataclasses.replace(cfg, num_groups=groups, progress_bars=False, tensorboard=False)
    trainer = Trainer(cfg)
    if cfg.resolved_warm_start == "bc":
        trainer.warm_start()
    out: dict[str, dict] = {}
    for key in keys_for(cfg.env):
        trainer.close()
        trainer.env_fn = (
            functools.partial(carry_free_env, cfg.splits[0], cfg.max_steps)
            if key == "carry-free"
            else make_env_fn(cfg.env, cfg.splits[0], cfg.max_steps, key)
        )
        rollout = trainer.rollout(iteration)
        out[key] = {
            "coverage": np.array([t.coverage_rate for t in rollout.trajectories]),
            "outcome": np.array([t.outcome for t in rollout.trajectories]),
            "group": np.array([t.group for t in rollout.trajectories]),
            "task_type": np.array([t.task_type for t in rollout.trajectories]),
            "first_visit": np.array([s.first_visit for s in rollout.steps]),
            "actions": [s.action for s in rollout.steps],
        }
    trainer.close()
    ref = out[STATE_KEYS[0]]
    for key, d in out.items():
        if not (np.array_equal(d["outcome"], ref["outcome"]) and d["actions"] == ref["actions"]):
            raise RuntimeError(
                f"the {key!r} rollout differs from the {STATE_KEYS[0]!r} one: the comparison would not be paired"
            )
    return out


def summarize(data: dict[str, dict], tau_r: float) -> dict[str, dict]:
    result: dict[str, dict] = {}
    for key, d in data.items():
        rows = {"all": auc_with_ci(d["coverage"], d["outcome"], d["group"], tau_r=tau_r)}
        for tt in sorted(set(d["task_type"].tolist())):
            m = d["task_type"] == tt
            rows[tt] = auc_with_ci(d["coverage"][m], d["outcome"][m], d["group"][m], tau_r=tau_r)
        result[key] = {k: dataclasses.asdict(v) for k, v in rows.items()}
    return result


def mismatch(data: dict[str, dict]) -> str:
    """How many of the canonical key's first visits the carry-free key does not count (revisits
    made while carrying an object)."""
    if "carry-free" not in data:
        return ""
    canon, free = data["canonical"]["first_visit"], data["carry-free"]["first_visit"]
    extra = int(np.sum(canon & ~free))
    return (
        f"Carried-object mismatch: {extra} of the canonical key's {int(canon.sum())} first visits "
        f"({extra / max(int(canon.sum()), 1):.1%}) are places already seen, revisited while carrying an object "
        f"(the carry-free key counts {int(free.sum())})."
    )


def table(result: dict[str, dict], data: dict[str, dict], tau_r: float) -> str:
    d = next(iter(data.values()))
    won = d["outcome"] >= tau_r
    groups = np.unique(d["group"])
    mixed = sum(1 for g in groups if 0 < won[d["group"] == g].sum() < (d["group"] == g).sum())
    lines = [
        f"{len(d['outcome'])} trajectories in {len(groups)} groups; R > 0 in {won.mean():.3f} of them; "
        f"{mixed} mixed groups, {sum(1 for g in groups if not won[d['group'] == g].any())} all-failed",
        "",
        "| task type | key | AUC | 95% CI | pairs | mixed groups |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for tt in result[STATE_KEYS[0]]:
        for key in data:
            r = result[key][tt]
            ci = "" if np.isnan(r["ci"][0]) else f"[{r['ci'][0]:.3f}, {r['ci'][1]:.3f}]"
            auc = "n/a" if np.isnan(r["auc"]) else f"{r['auc']:.3f}"
            lines.append(f"| {tt} | {key} | {auc} | {ci} | {r['pairs']} | {r['groups']} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="trainer YAML (default: the CPU demo, python -m trainers.progpo)")
    ap.add_argument("--groups", type=int, default=32, help="groups of group_size trajectories (one task each)")
    ap.add_argument("--bc-steps", type=int, default=None, help="override the warm start's cloning steps")
    ap.add_argument("--iteration", type=int, default=1, help="whose task schedule (the trainer's) to play")
    tau_r = "outcome that counts as R > 0 (default the config's tau_r; 1.0 on WebShop: success = score 1)"
    ap.add_argument("--tau-r", type=float, default=None, help=tau_r)
    ap.add_argument("--out", default=None, help="JSON path (default benchmarks/results/coverage_auc_<env>.json)")
    args = ap.parse_args(argv)
    data = load_yaml(args.config) if args.config else {}
    cfg = TrainConfig.from_dict(data, f"config {args.config}" if args.config else "config")
    if args.bc_steps is not None:
        cfg = dataclasses.replace(cfg, bc_steps=args.bc_steps)
    t0 = time.perf_counter()
    raw = rollouts(cfg, args.groups, args.iteration)
    tau = cfg.tau_r if args.tau_r is None else args.tau_r
    result = summarize(raw, tau)
    text = table(result, raw, tau)
    if mismatch(raw):
        text += "\n\n" + mismatch(raw)
    print(
        f"{cfg.env}: warm start {cfg.resolved_warm_start} ({cfg.bc_steps} steps), {cfg.group_size} per group, "
        f"max {cfg.max_steps} steps, R > 0 means outcome >= {tau}, {time.perf_counter() - t0:.0f} s"
    )
    print(text)
    suffix = "" if args.tau_r is None else f"_tau{args.tau_r:g}"
    out = Path(args.out) if args.out else ROOT / "benchmarks" / "results" / f"coverage_auc_{cfg.env}{suffix}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {
                "config": cfg.to_dict(),
                "groups": args.groups,
                "iteration": args.iteration,
                "tau_r": tau,
                "auc": result,
                "table": text,
            },
            indent=1,
        )
    )
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
