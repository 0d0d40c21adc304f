"""The lab's figures: ``curves.png`` (each method's curves over its seeds, mean and 95% interval,
with the forest of final differences against the reference) and ``per_seed.png`` (a registered
primary's per-seed differences, sorted)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from trainers.lab.analysis import curve, final_success, paired, primary_verdict, registered_primary
from trainers.lab.methods import LABELS, REFERENCE, labelled
from trainers.statistics import mean_ci

__all__ = ["plot", "plot_per_seed"]


def plot_per_seed(args: argparse.Namespace, entries: list[dict], path: Path) -> bool:
    """The pre-registered primary's per-seed differences, sorted, with their mean and interval
    (``per_seed.png``); False (nothing written) where there is no complete verdict."""
    test = registered_primary(args.lab, args.config)
    if test is None:
        return False
    by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in args.methods}
    verdict = primary_verdict({m: r for m, r in by.items() if r}, test)
    if not verdict["complete"]:
        return False
    import matplotlib  # the [train] extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the [train] extra

    order = np.argsort(verdict["per_seed"], kind="stable")
    values = np.array(verdict["per_seed"])[order]
    fig, ax = plt.subplots(figsize=(max(6.0, 0.3 * len(values)), 4))
    ax.bar(range(len(values)), values, color=["tab:blue" if v > 0 else "tab:red" for v in values])
    ax.set_xticks(range(len(values)), [str(verdict["seeds"][i]) for i in order], fontsize=7)
    ax.axhline(verdict["estimate"], color="k", lw=1, label=f"mean {verdict['estimate']:+.3f}")
    ax.axhspan(verdict["lo"], verdict["hi"], color="k", alpha=0.1, label="95% t interval")
    ax.axhline(0.0, color="grey", lw=0.5)
    label = " - ".join(test.contrast) if test.contrast else "on - off"
    ax.set_title(f"{Path(args.config).name}: {label}, final held-out success, per seed (sorted)")
    ax.set_xlabel("seed")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _forest(ax, by: dict[str, list[dict]]) -> None:
    """Final held-out success minus gigpo's, paired by seed, with 95% t intervals: one row a method
    (labelled tracks below a rule); the ``grpo`` row, GiGPO - GRPO, shows what the lab resolves."""
    pure = [m for m in by if m not in LABELS and m != REFERENCE]
    ranked = [*pure, *[m for m in by if m in LABELS]]
    rows = [(m, d) for m in ranked if (d := paired(by, m, REFERENCE, final_success)) is not None]
    for y, (m, d) in enumerate(rows):
        ax.errorbar(
            d["mean"],
            -y,
            xerr=d["half"],
            fmt="o",
            ms=4,
            capsize=3,
            color="tab:gray" if m in LABELS else "tab:blue" if "progpo" in m else "black",
        )
    ax.axvline(0.0, color="tab:red", lw=1)
    short = {m: f"{m} [{LABELS[m].split(' (')[0]}]" if m in LABELS else m for m, _ in rows}  # the label, kept short
    ax.set_yticks([-y for y in range(len(rows))], [f"{short[m]} ({len(d['seeds'])})" for m, d in rows], fontsize=8)
    if any(m in LABELS for m, _ in rows) and pure:
        ax.axhline(-len([m for m, _ in rows if m not in LABELS]) + 0.5, color="gray", lw=0.5, ls=":")
    ax.set_title("final held-out success - gigpo\n(paired by seed, 95% CI; seeds)", fontsize=9)
    ax.grid(alpha=0.3, axis="x")


def plot(args: argparse.Namespace, entries: list[dict], path: Path) -> None:
    import matplotlib  # the [train] extra

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # the [train] extra

    panels = (
        ("eval", "eval/success", "held-out eval success"),
        ("train", "train/success", "train success"),
        ("train", "all_failed_fraction", "all-failed fraction"),
        ("train", "coverage_rate", "coverage rate"),
        ("train", "repeat_rate", "repeated-action rate"),
    )
    methods = [m for m in args.methods if any(e["method"] == m for e in entries)]
    by = {m: sorted((e for e in entries if e["method"] == m), key=lambda e: e["seed"]) for m in methods}
    forest = bool(args.lab) and REFERENCE in by and len(by) > 1
    fig, grid = plt.subplots(2, 3, figsize=(17, 9))
    axes = [grid[0, 0], grid[0, 1], grid[1, 0], grid[1, 1], grid[1, 2]]
    # tab20's dark shades first, then its light ones: neighbouring methods never share a hue
    colors = [plt.get_cmap("tab20")(j) for j in [*range(0, 20, 2), *range(1, 20, 2)]]
    width = 0.8 * min(1.0, 3.0 / max(len(methods), 1))  # eval points of the methods side by side, not on top
    xlabel = "iteration"
    for ax, (part, key, title) in zip(axes, panels):
        for i, m in enumerate(methods):
            runs = by[m]
            xs, ys, xlabel = curve(runs, part, key)
            mean, half = mean_ci(ys)
            style = {"color": colors[i % len(colors)], "ls": "--" if m in LABELS else "-", "label": labelled(m)}
            if part == "eval":  # few points: each with its interval, dodged
                ax.errorbar(
                    xs + (i - (len(methods) - 1) / 2) * width,
                    mean,
                    yerr=half,
                    marker="o",
                    ms=3,
                    capsize=2,
                    lw=1,
                    **style,
                )
            else:
                ax.plot(xs, mean, lw=1.2, **style)
                ax.fill_between(
                    xs, mean - half, mean + half, color=style["color"], alpha=0.15 if len(methods) <= 4 else 0.05
                )
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    if forest:
        _forest(grid[0, 2], by)
    else:
        grid[0, 2].axis("off")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=min(len(labels), 4), fontsize=9, frameon=False)
    fig.suptitle(f"{Path(args.config).name}, state key {args.state_key}: mean and 95% CI over seeds {args.seeds}")
    fig.tight_layout(rect=(0, 0.03 * (1 + (len(labels) - 1) // 4), 1, 1))
    fig.savefig(path, dpi=100)
    plt.close(fig)
