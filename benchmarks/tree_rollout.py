"""Flat vs tree rollouts in the credit trap, at iteration 1 from the same warm start, at equal decisions.

    python benchmarks/tree_rollout.py                      # 8 seeds, the trap preset (~25 min on one core)
    python benchmarks/tree_rollout.py --seeds 0 1 --out /tmp/tree.json

For each seed: the warm start of ``configs/alfworld_trap.yaml`` (deterministic in the seed), then
three rollouts of iteration 1's tasks with those same weights (no update in between):

* ``flat``: G independent episodes per task (the trainer's default);
* ``tree (coverage)``: ``--rollout tree`` with the coverage scorer (ProGPO's own signal);
* ``tree (random)``: the same tree with random scores (the control: branching, but not where
  progress is).

Equal decisions: each tree may take at most the flat rollout's measured decisions of that seed
divided by the number of tasks (``tree_budget``), so a tree iteration never takes more policy
decisions than the flat one. Printed per variant, mean over seeds with the 95% t interval: the
all-failed fraction of the groups (trees), the number of groups with at least one success, the
success rate of the episodes (leaves), the decisions and the replay steps. The per-seed rows go
to ``--out`` (JSON). Whether trees help *learning* is the lab's question, not this one's.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from trainers.statistics import mean_ci

VARIANTS = {
    "flat": {"rollout": "flat"},
    "tree (coverage)": {"rollout": "tree", "tree_scorer": "coverage"},
    "tree (random)": {"rollout": "tree", "tree_scorer": "random"},
}


def measure(seed: int, config: Path, work: Path) -> list[dict]:
    """The three rollouts of one seed."""
    import torch

    from trainers.config import TrainConfig, load_yaml
    from trainers.loop.collector import make_collector
    from trainers.loop.sections import rollout_section
    from trainers.loop.trainer import Trainer
    from trainers.runs.metrics import rollout_metrics

    torch.set_num_threads(1)
    base = TrainConfig.from_dict(
        {
            **load_yaml(config),
            "seed": seed,
            "eval_episodes": 0,
            "progress": False,
            "tensorboard": False,
            "output_dir": str(work / f"seed{seed}"),
        }
    )
    tr = Trainer(base)
    for _ in tr.start_records():  # the warm start only (no evaluation)
        pass
    rows, budget = [], 0
    for name, change in VARIANTS.items():
        tr.cfg = dataclasses.replace(base, **change, tree_budget=budget)
        tr.rollouts.cfg = rollout_section(tr.cfg)  # the collection stage reads its own section
        tr.rollouts.collector = make_collector(tr.rollouts.cfg)
        t0 = time.perf_counter()
        rollout = tr.rollout(1)
        seconds = time.perf_counter() - t0
        m = rollout_metrics(rollout, base.tau_r)
        groups: dict[int, bool] = {}
        for t in rollout.trajectories:
            groups[t.group] = groups.get(t.group, False) or t.won
        row = {
            "seed": seed,
            "variant": name,
            "all_failed_frac": m["all_failed_frac"],
            "groups_with_success": int(sum(groups.values())),
            "groups": len(groups),
            "success": m["success"],
            "decisions": len(rollout.steps),
            "replay_steps": int(rollout.tree_stats.get("rollout/replay_steps", 0)),
            "leaves": len(rollout.trajectories),
            "coverage_rate": m["coverage_rate"],
            "seconds": seconds,
        }
        rows.append(row)
        if name == "flat":
            budget = len(rollout.steps) // base.num_groups  # each tree: at most the flat run's decisions per task
        print(json.dumps(row), flush=True)
    if tr.envs is not None:
        tr.envs.close()
    return rows


def table(rows: list[dict]) -> str:
    seeds = sorted({r["seed"] for r in rows})
    lines = [
        f"Trap preset, iteration 1 from the warm start, seeds {seeds}; mean over seeds +- the half-width of the "
        "95% t interval.",
        "",
        "| rollout | all-failed fraction | groups with a success (of 8) | episode success | decisions | "
        "replay steps | leaves |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in VARIANTS:
        sel = [r for r in rows if r["variant"] == name]
        if not sel:
            continue

        def cell(key: str, fmt: str = ".3f") -> str:
            mean, half = mean_ci(np.array([float(r[key]) for r in sel]))
            return f"{mean:{fmt}} +- {half:{fmt}}"

        lines.append(
            f"| {name} | {cell('all_failed_frac')} | {cell('groups_with_success', '.2f')} | {cell('success')} "
            f"| {cell('decisions', '.0f')} | {cell('replay_steps', '.0f')} | {cell('leaves', '.1f')} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", type=Path, default=ROOT / "configs" / "alfworld_trap.yaml")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(8)))
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "benchmarks" / "results" / "tree_rollout.json",
        help="per-seed rows (JSON); seeds already there are not measured again",
    )
    args = ap.parse_args(argv)
    rows = json.loads(args.out.read_text())["rows"] if args.out.is_file() else []
    done = {r["seed"] for r in rows}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in args.seeds:
            if seed in done:
                continue
            rows += measure(seed, args.config, Path(tmp))
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(
                json.dumps(
                    {
                        "config": str(args.config.relative_to(ROOT))
                        if args.config.is_relative_to(ROOT)
                        else str(args.config),
                        "rows": rows,
                    },
                    indent=1,
                )
            )
    print(table([r for r in rows if r["seed"] in set(args.seeds)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
