"""Evaluate a saved policy on a split of its run's env, at fixed episode seeds.

    python -m trainers.evaluate runs/progpo --split valid --episodes 36
    python -m trainers.evaluate runs/progpo --against runs/grpo         # the same episodes, paired
    python -m trainers.evaluate runs/progpo/checkpoints/iter_000012.pt --json eval.json

The policy plays as its run trained it (the run's own config: model, prompt, template, policy
mode). The episodes are the run's evaluation panel for that split and count (the plan seeded by
the run's seed): evaluating the split and size the run evaluated gives the same episodes as its
``eval`` records. It prints success (and WebShop's mean score) with its 95% bootstrap interval
over episodes, success per task type, and a JSON record (``--json FILE`` writes it too).

``--against OTHER`` plays a second saved policy on the same episodes and prints the paired
difference (this - other) with its 95% paired bootstrap interval; panels that differ are refused.
Exit status: 0 done, 2 a problem said in one line.
"""

# Imports inside functions: the command's modules (torch, the envs, the policy) load when it runs, so
# that importing this module (the documentation, the shim, a test of its parser) loads none of them.
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from trainers.runs.run_files import check_output_file
from wrappers.errors import UserError

#: the largest panel ``--episodes`` takes (the trainer's ``eval_episodes`` cap): past it, the plan
#: alone would end in a MemoryError
MAX_EPISODES = 100_000


def check_episodes(episodes: int | None) -> None:
    """``--episodes`` within :data:`MAX_EPISODES` (``None``: the run's own), else a ``ValueError`` of one line."""
    if episodes is not None and episodes > MAX_EPISODES:
        raise ValueError(f"--episodes {episodes} is over {MAX_EPISODES:,}, more than any panel here can hold")


__all__ = ["MAX_EPISODES", "check_episodes", "evaluate_saved", "main"]


def evaluate_saved(
    saved: Any, split: str | None = None, episodes: int | None = None, streams: int | None = None
) -> dict[str, Any]:
    """Play ``saved`` (a :class:`trainers.saved_policy.SavedPolicy`) on ``split`` (default: the run's
    eval split) for ``episodes`` (default: the run's ``eval_episodes``) in ``streams`` concurrent
    streams (default: the run's ``eval_streams``, so that the figure is the run's own); the eval
    record."""
    import numpy as np
    import torch  # the [train] extra

    from trainers import seeds
    from trainers.envs import check_split, make_env_fn
    from trainers.rollouts.eval_episodes import EvalPlan, episode_records, run_eval
    from trainers.runs.metrics import rollout_metrics
    from trainers.statistics import paired_bootstrap_ci

    cfg = saved.cfg
    split = split or cfg.splits[1]
    check_split(cfg.env, split)
    n = int(episodes if episodes is not None else cfg.eval_episodes)
    if n < 1:
        raise ValueError(f"--episodes must be >= 1, got {n}")
    env_fn = make_env_fn(cfg.env, split, cfg.max_steps, cfg.state_key)
    plan = EvalPlan.for_env(env_fn, split, n, seed=seeds.eval_plan(cfg.seed))
    with torch.no_grad():
        rollout = run_eval(saved.policy, env_fn, plan, streams=int(streams or cfg.eval_streams))
    rec: dict[str, Any] = {
        "checkpoint": str(saved.checkpoint),
        "iteration": saved.iteration,
        "env": cfg.env,
        "eval/split": split,
        "eval/episodes": len(rollout.trajectories),
        "eval/panel": plan.panel(),
    }
    rec.update(rollout_metrics(rollout, cfg.tau_r, prefix="eval/"))
    columns = episode_records(rollout)
    rec["eval/won"], rec["eval/score"], rec["eval/task_id"] = columns["won"], columns["score"], columns["task_id"]
    _, lo, hi = paired_bootstrap_ci(np.zeros(len(columns["won"])), columns["won"], seed=0)
    rec["eval/success_ci"] = [lo, hi]
    _, lo, hi = paired_bootstrap_ci(np.zeros(len(columns["score"])), columns["score"], seed=0)
    rec["eval/score_ci"] = [lo, hi]
    return rec


def _lines(rec: dict[str, Any]) -> list[str]:
    lo, hi = rec["eval/success_ci"]
    out = [
        f"{rec['checkpoint']} (iteration {rec['iteration']}) on {rec['env']} {rec['eval/split']}, "
        f"{rec['eval/episodes']} episodes: success {rec['eval/success']:.3f} (95% CI [{lo:.3f}, {hi:.3f}])"
    ]
    if rec["eval/score_mean"] != rec["eval/success"]:  # partial credit (WebShop's score)
        lo, hi = rec["eval/score_ci"]
        out.append(f"  mean score {rec['eval/score_mean']:.3f} (95% CI [{lo:.3f}, {hi:.3f}])")
    for key in sorted(k for k in rec if k.startswith("eval/success_by_type/")):
        out.append(f"  {key.rsplit('/', 1)[-1]}: {rec[key]:.3f}")
    return out


def _paired(this: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    from trainers.rollouts.eval_episodes import check_same_panel
    from trainers.statistics import paired_bootstrap_ci

    check_same_panel(this, other, "the two checkpoints' evaluations")
    diff, lo, hi = paired_bootstrap_ci(other["eval/won"], this["eval/won"], seed=0)
    out = {"diff": diff, "ci": [lo, hi], "episodes": len(this["eval/won"])}
    if this["eval/score"] != this["eval/won"] or other["eval/score"] != other["eval/won"]:
        sd, slo, shi = paired_bootstrap_ci(other["eval/score"], this["eval/score"], seed=0)
        out["score"] = {"diff": sd, "ci": [slo, shi]}
    return out


def main(argv: list[str] | None = None) -> int:
    from trainers.runs.checkpoint import CheckpointError
    from trainers.saved_policy import load_saved

    ap = argparse.ArgumentParser(prog="python -m trainers.evaluate", description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a run dir (its latest checkpoint) or a checkpoint file (iter_NNNNNN.pt)")
    ap.add_argument("--split", default=None, help="the env's split to play (default: the run's eval split)")
    ap.add_argument("--episodes", type=int, default=None, help="episodes (default: the run's eval_episodes)")
    ap.add_argument(
        "--against",
        default=None,
        help="a second run dir or checkpoint, played on the same episodes: prints the paired difference (this - other)",
    )
    ap.add_argument(
        "--streams",
        type=int,
        default=None,
        help="concurrent evaluation streams (CPU: processes); default: the run's eval_streams, whose "
        "figures it then reproduces",
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the JSON record to this file")
    args = ap.parse_args(argv)
    try:
        for flag, value in (("--episodes", args.episodes), ("--streams", args.streams)):
            if value is not None and value < 1:
                raise ValueError(f"{flag} must be >= 1, got {value}")
        check_episodes(args.episodes)
        if args.json is not None:
            check_output_file(args.json, "--json")  # before the evaluation plays, not after
        rec = evaluate_saved(load_saved(args.path), args.split, args.episodes, args.streams)
        out: dict[str, Any] = {"evaluation": rec}
        lines = _lines(rec)
        if args.against:
            other = evaluate_saved(load_saved(args.against), rec["eval/split"], rec["eval/episodes"], args.streams)
            out["against"] = other
            out["paired"] = _paired(rec, other)
            p = out["paired"]
            lines += _lines(other)
            lines.append(
                f"paired difference (this - other) over the same {p['episodes']} episodes: "
                f"{p['diff']:+.3f} (95% paired bootstrap CI [{p['ci'][0]:+.3f}, {p['ci'][1]:+.3f}])"
            )
    except (UserError, CheckpointError, ValueError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    print("\n".join(lines))
    text = json.dumps(out, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
        print(f"-> {args.json}")
    else:
        print(json.dumps({k: v for k, v in rec.items() if not isinstance(v, list)}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
