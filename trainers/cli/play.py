"""Watch a saved policy play one episode, as the agent lived it.

    python -m trainers.play runs/progpo --task 3                 # episode 3 of the valid panel
    python -m trainers.play runs/progpo --task 3 --html ep3.html # the same as one self-contained page

Each step shows the observation the agent read, what it weighed (score mode: the top candidate
commands with their probabilities; generate mode: the answer it wrote), the command it sent, the
reward, and whether the state was a first visit (with the coverage so far). The episode is
episode ``--task`` of the run's evaluation panel for ``--split`` (the same task and task seed as
in ``python -m trainers.evaluate``). Exit status: 0 done, 2 a problem said in one line.
"""

# Imports inside functions: the command's modules (torch, the envs, the policy) load when it runs, so
# that importing this module (the documentation, the shim, a test of its parser) loads none of them.
from __future__ import annotations

import argparse
import html
import math
import sys
from pathlib import Path
from typing import Any

from trainers.cli.evaluate import check_episodes
from trainers.runs.run_files import check_output_file
from wrappers.errors import UserError

__all__ = ["episode_steps", "main", "render_html", "render_text"]


def episode_steps(rollout: Any, top: int = 3) -> list[dict[str, Any]]:
    """The steps of a one-episode rollout as plain records: observation, candidates (command,
    probability; the top ``top``), answer text, action, reward, first visit, coverage so far."""
    steps, found = [], 0
    for s in sorted(rollout.steps, key=lambda s: s.t):
        out = s.output
        found += bool(s.first_visit)
        cands: list[tuple[str, float]] = []
        logps = (getattr(out, "extra", None) or {}).get("candidate_logprobs")
        if getattr(out, "candidates", None) and logps is not None:
            cands = sorted(zip(out.candidates, (math.exp(x) for x in logps)), key=lambda c: -c[1])[:top]
        steps.append(
            {
                "t": s.t,
                "observation": s.obs,
                "candidates": cands,
                "answer": "" if cands else getattr(out, "text", ""),
                "action": s.action,
                "valid": s.valid,
                "reward": s.reward,
                "first_visit": bool(s.first_visit),
                "coverage": found,
                "next_observation": s.next_obs,
            }
        )
    return steps


def render_text(title: str, steps: list[dict[str, Any]], outcome: str) -> str:
    lines = [title, ""]
    for st in steps:
        lines.append(f"--- step {st['t']} ---")
        lines.append(st["observation"].strip())
        for cmd, p in st["candidates"]:
            lines.append(f"   {p:6.1%}  {cmd}")
        if st["answer"]:
            lines.append(f"   answer: {st['answer'].strip()}")
        visit = "first visit" if st["first_visit"] else "seen before"
        lines.append(
            f"> {st['action']}{'' if st['valid'] else '  (invalid)'}    reward {st['reward']:+.3f}, {visit}, "
            f"coverage {st['coverage']}"
        )
    if steps:
        lines += ["--- end ---", steps[-1]["next_observation"].strip()]
    lines += ["", outcome]
    return "\n".join(lines) + "\n"


def render_html(title: str, steps: list[dict[str, Any]], outcome: str) -> str:
    """The episode as one self-contained HTML page (no scripts, no external files)."""
    esc = html.escape
    rows = []
    for st in steps:
        cands = "".join(f"<li><b>{p:.1%}</b> {esc(c)}</li>" for c, p in st["candidates"])
        answer = f"<p class=answer>answer: {esc(st['answer'])}</p>" if st["answer"] else ""
        visit = "first visit" if st["first_visit"] else "seen before"
        rows.append(
            f"<section><h2>step {st['t']}</h2><pre>{esc(st['observation'].strip())}</pre>"
            f"{'<ol>' + cands + '</ol>' if cands else ''}{answer}"
            f"<p class=act>&gt; {esc(st['action'])} <span>reward {st['reward']:+.3f}, {visit}, "
            f"coverage {st['coverage']}</span></p></section>"
        )
    end = f"<section><h2>end</h2><pre>{esc(steps[-1]['next_observation'].strip())}</pre></section>" if steps else ""
    style = (
        "body{font-family:sans-serif;max-width:60em;margin:auto}pre{white-space:pre-wrap;background:#f4f4f4;"
        "padding:.5em}.act{font-family:monospace}.act span{color:#666}"
    )
    return (
        f"<!doctype html><html><head><meta charset=utf-8><title>{esc(title)}</title><style>{style}</style></head>"
        f"<body><h1>{esc(title)}</h1>{''.join(rows)}{end}<p><b>{esc(outcome)}</b></p></body></html>\n"
    )


def main(argv: list[str] | None = None) -> int:
    import torch  # the [train] extra

    from trainers import seeds
    from trainers.envs import check_split, make_env_fn
    from trainers.rollouts.eval_episodes import EvalPlan, play_episodes
    from trainers.runs.checkpoint import CheckpointError
    from trainers.saved_policy import load_saved

    ap = argparse.ArgumentParser(prog="python -m trainers.play", description=__doc__.splitlines()[0])
    ap.add_argument("path", help="a run dir (its latest checkpoint) or a checkpoint file")
    ap.add_argument("--task", type=int, default=0, help="which episode of the evaluation panel (0-based)")
    ap.add_argument("--split", default=None, help="the split (default: the run's eval split)")
    ap.add_argument("--episodes", type=int, default=None, help="the panel's size (default: the run's eval_episodes)")
    ap.add_argument("--top", type=int, default=3, help="candidate commands shown per step (score mode)")
    ap.add_argument("--html", type=Path, default=None, help="also write the episode as one self-contained page")
    args = ap.parse_args(argv)
    try:
        for flag, value, least in (("--episodes", args.episodes, 1), ("--top", args.top, 1), ("--task", args.task, 0)):
            if value is not None and value < least:
                raise ValueError(f"{flag} must be >= {least}, got {value}")
        check_episodes(args.episodes)
        if args.html is not None:
            check_output_file(args.html, "--html")  # before the episode plays, not after
        saved = load_saved(args.path)
        cfg = saved.cfg
        split = args.split or cfg.splits[1]
        check_split(cfg.env, split)
        env_fn = make_env_fn(cfg.env, split, cfg.max_steps, cfg.state_key)
        size = args.episodes if args.episodes is not None else max(cfg.eval_episodes, 1)
        plan = EvalPlan.for_env(env_fn, split, size, seed=seeds.eval_plan(cfg.seed))
        if not 0 <= args.task < plan.num_episodes:
            raise ValueError(f"--task must be in 0..{plan.num_episodes - 1} (the panel's episodes), got {args.task}")
        with torch.no_grad():
            rollout = play_episodes(saved.policy, env_fn, plan, [args.task])
    except (UserError, CheckpointError, ValueError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    traj = rollout.trajectories[0]
    title = (
        f"{cfg.env} {split}, episode {args.task} (task {traj.task_id or 'from its seed'}, {traj.task_type}); "
        f"{saved.checkpoint.name}, iteration {saved.iteration}"
    )
    outcome = f"{'won' if traj.won else 'lost'}: outcome {traj.outcome:.3f} after {traj.length} steps"
    steps = episode_steps(rollout, top=args.top)
    print(render_text(title, steps, outcome), end="")
    if args.html:
        args.html.write_text(render_html(title, steps, outcome), encoding="utf-8")
        print(f"-> {args.html}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
