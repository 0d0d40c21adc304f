"""End-of-run report: PNG curves and a summary markdown whose headline is what RL changed.

``summary.md`` starts with the held-out evaluation at iteration 0 (after any warm start, before
any RL update) against the last one: success on the eval split, the difference with a 95% paired
bootstrap interval (same episodes, same seeds), a random policy's success for scale, and the
second held-out split's start and end. Then the warm start, the per-iteration training table
(success, all-failed fraction, coverage, repeated-action rate...) and the config.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> recs = [{"iteration": i, "success": i / 4, "all_failed_frac": 1 - i / 4, "coverage_rate": 0.3} for i in (1, 2)]
>>> write_report(d, recs, {"estimator": "progpo-grpo"}).name
'summary.md'
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from trainers.advantages.registry import estimator as registered_estimator
from trainers.advantages.registry import option_fields
from trainers.rollouts.eval_episodes import PanelMismatch, check_same_panel
from trainers.runs.run_files import write_atomic
from trainers.statistics import paired_bootstrap_ci
from trainers.teachers.registry import label_of, teacher_names
from trainers.teachers.registry import teacher as registered_teacher

__all__ = ["write_report", "plot_curves", "rl_gain"]

CURVES = (
    ("success", "success rate"),
    ("all_failed_frac", "all-failed group fraction"),
    ("coverage_rate", "first-visit coverage rate"),
    ("repeated_action_rate", "repeated-action rate"),
)


def plot_curves(records: Sequence[dict[str, Any]], out: Path, title: str = "") -> Path:
    """Write ``out`` (``curves.png``): success (train and eval), all-failed group fraction, first-visit
    coverage rate and repeated-action rate per iteration; returns ``out``."""
    import matplotlib  # the [train] extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the [train] extra

    train = [r for r in records if r.get("kind", "train") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    fig, axes = plt.subplots(1, len(CURVES), figsize=(4.2 * len(CURVES), 3.4))
    for ax, (key, label) in zip(axes, CURVES):
        xs = [r["iteration"] for r in train if key in r]
        ax.plot(xs, [r[key] for r in train if key in r], marker="o", label="train")
        ev = [r for r in evals if "eval/" + key in r]
        if ev:
            ax.plot([r["iteration"] for r in ev], [r["eval/" + key] for r in ev], marker="s", label="eval")
        ax.set_xlabel("iteration")
        ax.set_title(label)
        ax.grid(alpha=0.3)
        ax.set_ylim(-0.05, 1.05)
    axes[0].legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    png = io.BytesIO()
    fig.savefig(png, dpi=100, format="png")
    write_atomic(out, png.getvalue())  # a planted link is replaced, never written through
    plt.close(fig)
    return out


def write_report(run_dir: str | Path, records: Sequence[dict[str, Any]], config: dict[str, Any]) -> Path:
    """Write ``curves.png`` and ``summary.md`` into ``run_dir``; returns the summary path."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    plot_curves(records, run / "curves.png", title=f"{config.get('estimator', '')} on {config.get('env', '')}")
    train = [r for r in records if r.get("kind", "train") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    label = label_of(config)
    lines = [
        f"# ProGPO run report: {config.get('estimator', '?')} on {config.get('env', '?')}"
        + (f", distill {label}" if label else ""),
        "",
    ]
    if label:
        lines += [_distill_paragraph(str(config.get("distill")), label, train), ""]
    lines += [
        f"Model `{config.get('model')}`, {config.get('num_groups')} groups x {config.get('group_size')} members, "
        f"max {config.get('max_steps')} steps, {len(train)} iterations, policy mode `{config.get('policy_mode')}`.",
        "",
    ]
    lines += _headline(records)
    lines += _progress_share(records, config)
    lines += _base_share(records, config)
    lines += _sampling_lines(records, config)
    lines += _warm_start_lines(records, config)
    lines += ["![curves](curves.png)", "", "## Training iterations", ""]
    shown = [r for r in records if r.get("kind") in ("eval", "eval_extra", "baseline")]
    lines += _iteration_table(train) + _evaluation_table(shown)
    lines += _example_lines(shown)
    lines += time_lines(train)
    if evals:
        by_type = {k: v for k, v in evals[-1].items() if k.startswith("eval/success_by_type/")}
        if by_type:
            lines += ["", "Last evaluation, success by task type:", ""]
            lines += [f"- {k.split('/')[-1]}: {_fmt(v)}" for k, v in sorted(by_type.items())]
    lines += ["", "## Config", "", "```"] + [f"{k}: {v}" for k, v in config.items()] + ["```", ""]
    if evals:
        lines += [
            "Success counts won episodes (WebShop: score 1). A group is all-failed when every member's outcome "
            "is below tau_R.",
            "",
        ]
    out = run / "summary.md"
    write_atomic(out, "\n".join(lines))
    return out


def _warm_start_lines(records: Sequence[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """The behaviour-cloning warm start: the expert, its demonstrations, steps and held-out accuracy."""
    init = [r for r in records if r.get("kind") == "init"]
    if not init:
        return []
    r = init[0]
    from trainers.envs import ENV_TABLE  # the envs (gymnasium) for the warm start's expert name only

    expert = ENV_TABLE[config.get("env", "alfworld")].expert_name or "the expert"
    return [
        "## Warm start",
        "",
        f"Behaviour cloning from {expert} (it reads only what the agent reads): "
        f"{_count(r.get('bc/demos'))} decisions of {_count(r.get('bc/expert_episodes'))} expert episodes "
        f"(expert success {_fmt(r.get('bc/expert_success'))}), {_count(r.get('bc/steps'))} steps, "
        f"held-out step accuracy {_fmt(r.get('bc/step_accuracy'))}, {_fmt(r.get('time/init_s'))} s. "
        "The iteration-0 evaluation above is of this policy: the gain is RL's.",
        "",
    ]


def _iteration_table(train: list[dict[str, Any]]) -> list[str]:
    """One row per training iteration: success, credit, coverage, update and speed columns."""
    cols = (
        "iteration success score_mean all_failed_frac adv/progress_group_frac coverage_rate repeated_action_rate "
        "invalid_action_rate kl clip_fraction tokens_per_s"
    ).split()
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in train:
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    return lines


def _evaluation_table(shown: list[dict[str, Any]]) -> list[str]:
    """One row per evaluation (held-out, extra splits, baselines)."""
    if not shown:
        return []
    lines = [
        "",
        "## Evaluations",
        "",
        "| iteration | kind | split | episodes | success | coverage rate | repeated-action rate |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in shown:
        lines.append(
            f"| {r['iteration']} | {r['kind']} | {r.get('eval/split', '')} | {_fmt(r.get('eval/episodes'))} | "
            f"{_fmt(r.get('eval/success'))} | {_fmt(r.get('eval/coverage_rate'))} | "
            f"{_fmt(r.get('eval/repeated_action_rate'))} |"
        )
    return lines


#: the phases of an iteration, as the train records name them (``time/<phase>_s``)
PHASES = (
    ("reset", "envs reset"),
    ("generate", "policy acting (generation / scoring)"),
    ("env", "env steps"),
    ("rollout_other", "the collector's own loop"),
    ("credit", "credit (advantages, teacher inputs)"),
    ("old_logprob", "old log-probs"),
    ("update", "PPO update"),
)


def phase_seconds(rec: dict[str, Any], compile_s: float = 0.0) -> dict[str, float]:
    """A train record's seconds by phase (:data:`PHASES`), each second in one phase:
    ``compile_s`` of one-time compilation taken out of generation, the old log-probs out of the
    update (``time/update_s`` holds both).

    >>> phase_seconds({"time/generate_s": 6.0, "time/update_s": 4.0, "time/old_logprob_s": 1.0}, compile_s=2.0)
    {'reset': 0.0, 'generate': 4.0, 'env': 0.0, 'rollout_other': 0.0, 'credit': 0.0, 'old_logprob': 1.0, 'update': 3.0}
    """
    sec = {key: float(rec.get(f"time/{key}_s", 0.0)) for key, _ in PHASES}
    sec["generate"] = max(sec["generate"] - compile_s, 0.0)
    sec["update"] = max(sec["update"] - sec["old_logprob"], 0.0)
    return sec


def time_lines(train: Sequence[dict[str, Any]]) -> list[str]:
    r""" "Where the time went": each phase's mean seconds per iteration and share (the update without
    its old log-probs; a compilation counted apart, once).

    >>> print("\n".join(time_lines([{"time/iteration_s": 10.0, "time/generate_s": 6.0, "time/update_s": 4.0,
    ...                               "time/old_logprob_s": 1.0}])))  # doctest: +NORMALIZE_WHITESPACE
    <BLANKLINE>
    ## Where the time went (mean per iteration)
    <BLANKLINE>
    | phase | s | share |
    |---|---:|---:|
    | policy acting (generation / scoring) | 6.00 | 60.0% |
    | old log-probs | 1.00 | 10.0% |
    | PPO update | 3.00 | 30.0% |
    | iteration | 10.00 | 100.0% |
    """
    timed = [r for r in train if r.get("time/iteration_s")]
    if not timed:
        return []
    total = float(np.mean([r["time/iteration_s"] for r in timed]))
    compile_s = max(float(r.get("time/compile_s", 0.0)) for r in timed)
    per_record = [phase_seconds(r, compile_s / len(timed)) for r in timed]  # the one-time compilation, spread out
    mean = {key: float(np.mean([sec[key] for sec in per_record])) for key, _ in PHASES}
    lines = ["", "## Where the time went (mean per iteration)", "", "| phase | s | share |", "|---|---:|---:|"]
    lines += [f"| {name} | {mean[key]:.2f} | {100 * mean[key] / total:.1f}% |" for key, name in PHASES if mean[key] > 0]
    if compile_s:
        lines.append(
            f"| decode-step compilation (once, {compile_s:.1f} s in all) | {compile_s / len(timed):.2f} | "
            f"{100 * compile_s / len(timed) / total:.1f}% |"
        )
    lines.append(f"| iteration | {total:.2f} | 100.0% |")
    return lines


def _example_lines(shown: Sequence[dict[str, Any]]) -> list[str]:
    """Per evaluation of the trained policy, one won and one lost held-out episode, abridged."""
    lines: list[str] = []
    for r in shown:
        examples = r.get("eval/examples")
        if r.get("kind") == "baseline" or not isinstance(examples, dict) or not examples:
            continue
        if not lines:
            lines += [
                "",
                "### What the agent did (one won and one lost held-out episode per evaluation, abridged; "
                "`python -m trainers.play RUN --task N` shows a whole episode)",
                "",
            ]
        for kind in ("won", "lost"):
            ex = examples.get(kind)
            if not ex:
                continue
            more = " > ..." if ex["steps"] > len(ex["actions"]) else ""
            lines.append(
                f"- iteration {r['iteration']}, {r.get('eval/split', '')} episode {ex['episode']} "
                f"({ex['task_type']}), **{kind}** in {ex['steps']} steps: "
                f"{' > '.join(f'`{a}`' for a in ex['actions'])}{more}; last observation: "
                f'"{ex["last_observation"]}"'
            )
    return lines


def rl_gain(records: Sequence[dict[str, Any]], kind: str = "eval") -> dict[str, Any] | None:
    """Start (iteration 0) vs last evaluation of ``kind``: success of each, and the paired difference
    with its 95% bootstrap interval (None without two comparable evaluations).

    Raises:
        trainers.rollouts.eval_episodes.PanelMismatch: the two evaluations played different episodes.
    """
    evals = [r for r in records if r.get("kind") == kind and "eval/success" in r]
    starts = [r for r in evals if r.get("iteration") == 0]
    if not starts or len(evals) < 2 or evals[-1] is starts[0]:
        return None
    a, b = starts[0], evals[-1]

    check_same_panel(a, b, f"the {kind} at iteration 0 and at iteration {b.get('iteration')}")
    out = {
        "split": a.get("eval/split"),
        "episodes": a.get("eval/episodes"),
        "start": a["eval/success"],
        "end": b["eval/success"],
        "end_iteration": b["iteration"],
        "diff": b["eval/success"] - a["eval/success"],
        "ci": None,
    }
    wa, wb = a.get("eval/won"), b.get("eval/won")
    if wa and wb and len(wa) == len(wb):
        out["diff"], lo, hi = paired_bootstrap_ci(wa, wb, seed=0)
        out["ci"] = (lo, hi)
    sa, sb = a.get("eval/score"), b.get("eval/score")
    if sa and sb and len(sa) == len(sb):  # mean final score (WebShop's average score), paired the same way
        diff, lo, hi = paired_bootstrap_ci(sa, sb, seed=0)
        out["score"] = {"start": float(np.mean(sa)), "end": float(np.mean(sb)), "diff": diff, "ci": (lo, hi)}
    return out


def _progress_share(records: Sequence[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """One paragraph: in how many groups (and what share of steps) ProGPO's progress term replaced
    the base estimator; with few of them, the run's change is the base estimator's."""
    train = [r for r in records if r.get("kind", "train") == "train" and "adv/groups" in r]
    if not train or not str(config.get("estimator", "")).startswith("progpo"):
        return []
    acted = sum(float(r.get("adv/progress_groups", 0.0)) for r in train)
    groups = sum(float(r["adv/groups"]) for r in train)
    step_share = sum(float(r.get("adv/progress_step_frac", 0.0)) for r in train) / len(train)
    per_it = ", ".join(f"{r.get('adv/progress_group_frac', 0.0):.2f}" for r in train)
    base = str(config.get("estimator", "")).split("-", 1)[-1]
    lines = [
        "## Where ProGPO acted",
        "",
        f"The progress term replaced the {base} advantage in **{acted:.0f} of {groups:.0f} groups** "
        f"({acted / max(groups, 1):.1%}; on average {step_share:.1%} of the steps of an iteration); "
        f"share of groups per iteration: {per_it}.",
    ]
    if acted / max(groups, 1) < 0.1:
        lines.append(f"With so few all-failed groups, what this run changed is essentially {base}'s doing.")
    return lines + [""]


def _distill_paragraph(name: str, label: str, train: Sequence[dict[str, Any]]) -> str:
    """What the teacher did, and what information it used (its registration's paragraph)."""
    spec = registered_teacher(name) if name in teacher_names() else None
    if spec is None or spec.report is None:
        return f"**Teacher: {label}.**"
    return spec.report(train, label)


def _sampling_lines(records: Sequence[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """Dynamic sampling's paragraph: what it drew, dropped and kept, and what the run spent.

    >>> recs = [{"kind": "train", "iteration": 1, "budget/episodes": 192.0, "budget/env_steps": 2000.0,
    ...          "dynamic/gen_batches": 3.0, "dynamic/groups_kept": 8.0, "dynamic/groups_dropped": 15.0,
    ...          "dynamic/groups_unused": 1.0, "dynamic/first_all_failed_frac": 0.75, "dynamic/sampled_success": 0.1}]
    >>> print("\\n".join(_sampling_lines(recs, {"num_groups": 8})))
    ## Dynamic sampling
    <BLANKLINE>
    Groups whose outcomes were all equal were dropped and more were drawn (verl's `filter_groups`): 3 generation batches over 1 iterations (3 to 3 an iteration), 15 of 24 groups dropped, 1 drawn past the 8 needed and unused. Every iteration kept its groups. The run sampled 192 episodes and 2,000 env steps (`budget/*`); its train success over every sampled episode was 0.100 at the last iteration, and 75.0% of the groups of its first collection were all-failed.
    <BLANKLINE>
    """
    train = [r for r in records if r.get("kind", "train") == "train" and "dynamic/gen_batches" in r]
    if not train:
        return []
    batches = [int(r["dynamic/gen_batches"]) for r in train]
    dropped = sum(float(r["dynamic/groups_dropped"]) for r in train)
    kept = [float(r["dynamic/groups_kept"]) for r in train]
    unused = sum(float(r.get("dynamic/groups_unused", 0.0)) for r in train)
    drawn = dropped + sum(kept) + unused
    need = float(config.get("num_groups") or max(kept))
    short = [r["iteration"] for r, k in zip(train, kept) if k < need]
    last = train[-1]
    return [
        "## Dynamic sampling",
        "",
        "Groups whose outcomes were all equal were dropped and more were drawn (verl's `filter_groups`): "
        f"{sum(batches)} generation batches over {len(train)} iterations ({min(batches)} to {max(batches)} an "
        f"iteration), {dropped:.0f} of {drawn:.0f} groups dropped, {unused:.0f} drawn past the {need:.0f} needed "
        "and unused. "
        + (
            f"Iteration{'s' if len(short) > 1 else ''} {', '.join(map(str, short))} ran out of generation batches "
            "and trained on fewer groups. "
            if short
            else "Every iteration kept its groups. "
        )
        + f"The run sampled {last['budget/episodes']:,.0f} episodes and {last['budget/env_steps']:,.0f} env steps "
        f"(`budget/*`); its train success over every sampled episode was {last['dynamic/sampled_success']:.3f} at "
        f"the last iteration, and {100 * float(train[0]['dynamic/first_all_failed_frac']):.1f}% of the groups of "
        "its first collection were all-failed.",
        "",
    ]


def _base_share(records: Sequence[dict[str, Any]], config: dict[str, Any]) -> list[str]:
    """The base estimator's own paragraph (:attr:`~trainers.advantages.registry.Estimator.report`):
    where its terms acted (PlanPO's ranked groups, HGPO's history peers), given the options the
    run trained with (its flat fields, ``estimator_options`` over them)."""
    train = [r for r in records if r.get("kind", "train") == "train" and "adv/groups" in r]
    try:
        spec = registered_estimator(str(config.get("estimator", "")))
    except ValueError:  # a plug-in's run read where its plug-in is not loaded: no paragraph of its own
        return []
    if not train or spec.report is None:
        return []
    values = {f.name: config[spec.flag(f)] for f in option_fields(spec.options) if spec.flag(f) in config}
    values.update(config.get("estimator_options") or {})
    try:
        options = spec.make_options(values)
    except ValueError:  # options this registration no longer takes: no paragraph rather than a wrong one
        return []
    return spec.report(train, options)


def _headline(records: Sequence[dict[str, Any]]) -> list[str]:

    try:
        g = rl_gain(records)
    except PanelMismatch as err:
        return ["## What RL changed (held-out evaluation)", "", f"Not compared: {err}.", ""]
    if g is None:
        return []
    lines = ["## What RL changed (held-out evaluation)", ""]
    ci = f" (95% paired bootstrap CI [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}])" if g["ci"] else ""
    verdict = ""
    if g["ci"]:
        verdict = (
            " The interval excludes 0: RL improved the agent."
            if g["ci"][0] > 0
            else " The interval excludes 0: RL made the agent worse."
            if g["ci"][1] < 0
            else " The interval includes 0: no significant change."
        )
    lines += [
        f"- **{g['split']}** ({g['episodes']} episodes, fixed seeds): success {g['start']:.3f} at iteration 0 "
        f"(before any RL update) -> {g['end']:.3f} at iteration {g['end_iteration']}; "
        f"difference **{g['diff']:+.3f}**{ci}.{verdict}"
    ]
    sc = g.get("score")
    if sc is not None and (sc["start"] != g["start"] or sc["end"] != g["end"]):  # partial credit exists
        lines.append(
            f"- Mean score (partial credit counts): {sc['start']:.3f} -> {sc['end']:.3f}, difference "
            f"**{sc['diff']:+.3f}** (95% paired bootstrap CI [{sc['ci'][0]:+.3f}, {sc['ci'][1]:+.3f}])."
        )
    base = [r for r in records if r.get("kind") == "baseline"]
    if base:
        lines.append(
            f"- For scale: a uniformly random admissible-command policy (look, inventory, examine left out) "
            f"wins {base[0]['eval/success']:.3f} of the same {base[0].get('eval/episodes')} episodes."
        )
    try:
        x = rl_gain(records, "eval_extra")
    except PanelMismatch as err:
        x = None
        lines.append(f"- Standard split: not compared: {err}.")
    if x is not None:
        ci = f" (95% CI [{x['ci'][0]:+.3f}, {x['ci'][1]:+.3f}])" if x["ci"] else ""
        lines.append(
            f"- Standard **{x['split']}** split ({x['episodes']} episodes): {x['start']:.3f} -> {x['end']:.3f}, "
            f"difference {x['diff']:+.3f}{ci}."
        )
    return lines + [""]


def _count(v: Any) -> str:
    """A count logged as a float (JSON metrics), printed as an integer."""
    return str(int(v)) if isinstance(v, (int, float)) and float(v).is_integer() else _fmt(v)


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)
