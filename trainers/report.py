"""End-of-run report: PNG curves (success, all-failed fraction, coverage) and a summary markdown.

>>> import tempfile
>>> d = tempfile.mkdtemp()
>>> recs = [{"iteration": i, "success": i / 4, "all_failed_frac": 1 - i / 4, "coverage_rate": 0.3} for i in (1, 2)]
>>> write_report(d, recs, {"estimator": "progpo-grpo"}).name
'summary.md'
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

__all__ = ["write_report", "plot_curves"]

CURVES = (("success", "success rate"), ("all_failed_frac", "all-failed group fraction"), ("coverage_rate", "first-visit coverage rate"))


def plot_curves(records: Sequence[dict[str, Any]], out: Path, title: str = "") -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
        if key != "coverage_rate":
            ax.set_ylim(-0.05, 1.05)
    axes[0].legend()
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out


def write_report(run_dir: str | Path, records: Sequence[dict[str, Any]], config: dict[str, Any]) -> Path:
    """Write ``curves.png`` and ``summary.md`` into ``run_dir``; returns the summary path."""
    run = Path(run_dir)
    run.mkdir(parents=True, exist_ok=True)
    png = plot_curves(records, run / "curves.png", title=f"{config.get('estimator', '')} on {config.get('env', '')}")
    train = [r for r in records if r.get("kind", "train") == "train"]
    evals = [r for r in records if r.get("kind") == "eval"]
    lines = [f"# ProGPO run report: {config.get('estimator', '?')} on {config.get('env', '?')}", ""]
    lines += [f"Model `{config.get('model')}`, {config.get('num_groups')} groups x {config.get('group_size')} members, "
              f"max {config.get('max_steps')} steps, {len(train)} iterations, policy mode `{config.get('policy_mode')}`.", ""]
    lines += ["![curves](curves.png)", "", "## Training iterations", ""]
    cols = ["iteration", "success", "all_failed_frac", "coverage_rate", "repeated_action_rate", "invalid_action_rate",
            "kl", "clip_fraction", "tokens_per_s"]
    lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in train:
        lines.append("| " + " | ".join(_fmt(r.get(c)) for c in cols) + " |")
    if evals:
        lines += ["", "## Evaluation", "", "| iteration | eval success | eval all-failed | eval coverage |", "|---|---|---|---|"]
        for r in evals:
            lines.append(f"| {r['iteration']} | {_fmt(r.get('eval/success'))} | {_fmt(r.get('eval/all_failed_frac'))} | "
                         f"{_fmt(r.get('eval/coverage_rate'))} |")
        by_type = {k: v for k, v in evals[-1].items() if k.startswith("eval/success_by_type/")}
        if by_type:
            lines += ["", "Last evaluation, success by task type:", ""]
            lines += [f"- {k.split('/')[-1]}: {_fmt(v)}" for k, v in sorted(by_type.items())]
    lines += ["", "## Config", "", "```"] + [f"{k}: {v}" for k, v in config.items()] + ["```", ""]
    out = run / "summary.md"
    out.write_text("\n".join(lines))
    return out


def _fmt(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.3f}" if abs(v) < 1e4 else f"{v:.0f}"
    return str(v)
