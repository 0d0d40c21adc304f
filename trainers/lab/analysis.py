"""The lab's analysis: paired differences by seed, the validity verdict, the test families.

Every comparison pairs the runs of one seed (same warm start, same tasks): :func:`paired` gives the
mean difference of a metric (the final held-out success, :func:`final_success`, or the area under
the held-out curve, :func:`auc`) with its 95% t interval. :func:`validity` judges whether the lab
can tell GiGPO from GRPO under the criteria its config pre-registers (:func:`validity_criteria`:
``notes: preregistration: validity:``; no threshold is written here); :func:`families` tests the
methods against ``gigpo`` (paired t, Holm); :func:`progpo_on_off` is ProGPO's term on and off
over each base. A confirmatory block states its primary test in its config
(:func:`primary_test`), and :func:`primary_verdict` gives the verdict once every registered seed is
in, and no verdict before.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from scipy import stats

from trainers.lab.methods import LAB_PRESETS, LABELS, REFERENCE, VALIDITY_BASELINE
from trainers.lab.significance import holm, paired_t_p
from trainers.statistics import mean_ci, t975

__all__ = [
    "PrimaryTest",
    "ValidityCriteria",
    "auc",
    "completeness",
    "series",
    "families",
    "final_success",
    "mde_80",
    "multiplicity",
    "paired",
    "primary_test",
    "primary_verdict",
    "registered_primary",
    "progpo_on_off",
    "validity",
    "validity_criteria",
]


@dataclasses.dataclass(frozen=True)
class ValidityCriteria:
    """The lab's validity criteria, as a block's config pre-registers them."""

    trap_min: float  #: the share of all-failed groups at iteration 1 (the trap)
    room_min: float  #: GiGPO's held-out success rise, start to end (room to move)
    seeds: int  #: paired seeds before the GiGPO - GRPO interval decides


def validity_criteria(config: Path) -> ValidityCriteria | None:
    """The criteria ``config`` pre-registers under ``notes: preregistration: validity:``
    (``trap_min``, ``room_min``, ``seeds``), or ``None``."""
    import yaml  # the [train] extra

    data = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
    found = ((data.get("notes") or {}).get("preregistration") or {}).get("validity") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return None
    try:
        return ValidityCriteria(float(found["trap_min"]), float(found["room_min"]), int(found["seeds"]))
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"{config}: notes.preregistration.validity needs trap_min, room_min and seeds ({err})"
        ) from None


@dataclasses.dataclass(frozen=True)
class PrimaryTest:
    """A confirmatory block's primary test, as its config pre-registers it: ProGPO's term on - off
    final held-out success, per seed the mean over ``bases``, a two-sided paired t at ``alpha``."""

    seeds: tuple[int, ...]  #: every seed the verdict needs
    bases: tuple[str, ...]  #: the bases X whose ``progpo-X`` - ``X`` is pooled
    alpha: float
    #: an explicit contrast ``(A, B)``: A - B per seed, in place of the bases' on - off
    contrast: tuple[str, str] | None = None


def primary_test(config: Path) -> PrimaryTest | None:
    """The primary test ``config`` pre-registers under ``notes: preregistration:`` (``seeds``,
    ``bases``, ``alpha``, beside its ``primary`` sentence), or ``None`` for a block without one."""
    import yaml  # the [train] extra

    data = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
    found = ((data.get("notes") or {}).get("preregistration") or {}) if isinstance(data, dict) else {}
    if not isinstance(found, dict) or "primary" not in found:
        return None
    try:
        contrast = found.get("contrast")
        if contrast is not None and (not isinstance(contrast, list) or len(contrast) != 2):
            raise ValueError(f"contrast must be [A, B], got {contrast!r}")
        return PrimaryTest(
            tuple(int(s) for s in found["seeds"]),
            tuple(str(b) for b in found.get("bases", ())) if contrast else tuple(str(b) for b in found["bases"]),
            float(found["alpha"]),
            (str(contrast[0]), str(contrast[1])) if contrast else None,
        )
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(
            f"{config}: notes.preregistration needs seeds, alpha and bases (or a contrast) beside primary ({err})"
        ) from None


def registered_primary(lab: str | None, config: Path) -> PrimaryTest | None:
    """The primary test of a pre-registered lab block (its preset says so, its config states it),
    or ``None`` for an exploratory block or a run outside the lab."""
    return primary_test(config) if lab and LAB_PRESETS[lab].get("preregistered") else None


def primary_verdict(by: dict[str, list[dict]], test: PrimaryTest) -> dict:
    """The pre-registered primary over the registered bases and seeds: estimate, 95% t interval, p
    and the decision (``raises``, ``lowers`` or ``cannot tell``), once every registered seed has
    every base's pair; before that, ``complete`` is False and no estimate is given (no interim look)."""
    pooled = _primary_pooled(by, test)
    have = pooled["seeds"] if pooled else []
    base = {
        "bases": list(test.bases),
        **({"contrast": list(test.contrast)} if test.contrast else {}),
        "alpha": test.alpha,
        "registered_seeds": list(test.seeds),
        "seeds_in": len(have),
    }
    if pooled is None or have != sorted(test.seeds):
        arms = "both arms' runs" if test.contrast else "every base's on and off run"
        return {
            **base,
            "complete": False,
            "text": f"no verdict yet: {len(have)} of the {len(test.seeds)} registered seeds have {arms}; "
            "the primary is read once all are in",
        }
    est, lo, hi, p = pooled["mean"], pooled["lo"], pooled["hi"], pooled["p"]
    decision = ("raises" if est > 0 else "lowers") if p < test.alpha else "cannot tell"
    label = f"{test.contrast[0]} - {test.contrast[1]}" if test.contrast else "on - off"
    numbers = (
        f"{label} {est:+.3f} [{lo:+.3f}, {hi:+.3f}] (95% t interval), two-sided paired t p = {p:.3f} "
        f"{'<' if p < test.alpha else '>='} alpha {test.alpha:g}, {len(have)} seeds"
    )
    if test.contrast:
        a, b = test.contrast
        text = (
            f"this lab cannot tell {a} from {b} in final held-out success: {numbers}; effects from {lo:+.3f} to "
            f"{hi:+.3f} fit the data"
            if decision == "cannot tell"
            else f"{a} {decision} final held-out success against {b}: {numbers}"
        )
    elif decision == "cannot tell":
        over = f"its {len(test.bases)} bases" if len(test.bases) > 1 else test.bases[0]
        text = (
            f"this lab cannot tell whether ProGPO's term changes final held-out success over {over}: {numbers}; "
            f"effects from {lo:+.3f} to {hi:+.3f} fit the data"
        )
    else:
        over = f"its {len(test.bases)} bases" if len(test.bases) > 1 else test.bases[0]
        text = f"ProGPO's term {decision} final held-out success over {over}: {numbers}"
    return {
        **base,
        "complete": True,
        "estimate": est,
        "lo": lo,
        "hi": hi,
        "p": p,
        "decision": decision,
        "text": text,
        "seeds": have,
        "per_seed": pooled["per_seed"],
    }


def _primary_pooled(by: dict[str, list[dict]], test: PrimaryTest) -> dict | None:
    """The primary's per-seed contrast over the registered seeds (mean, interval, p, per seed)."""
    if test.contrast:
        a, b = test.contrast
        arms = {m: [r for r in by.get(m, []) if r["seed"] in test.seeds] for m in (a, b)}
        d = paired(arms, a, b, final_success)
        return {**d, "p": paired_t_p(d["per_seed"])} if d else None
    arms = {m: [r for r in by[m] if r["seed"] in test.seeds] for b in test.bases for m in (b, f"progpo-{b}") if m in by}
    res = progpo_on_off({m: rs for m, rs in arms.items() if rs})
    pooled = res["pooled"] if res and len(res["pairs"]) == len(test.bases) else None
    if res and len(test.bases) == 1 and len(res["pairs"]) == 1:  # one base: its own pair is the primary
        pooled = {**res["pairs"][0]["diff"], "p": res["pairs"][0]["p"]}
    return pooled


def covariate_slope(by: dict[str, list[dict]], a: str, b: str, seeds: Sequence[int]) -> dict | None:
    """A registered secondary: does ``a`` - ``b`` (final held-out success, per seed) grow with the
    all-failed share of the first collection, a covariate fixed before the arms diverge (``b``'s
    first iteration; the same in every arm at a seed)? The OLS slope with its 95% t interval and
    two-sided p (``scipy.stats.linregress``) over ``seeds``; ``None`` before every seed has both
    arms, or with fewer than 3 seeds.

    >>> run = lambda m, s, first, final: {"method": m, "seed": s, "train": [{"first_collection": first}],
    ...                                   "eval": [{"eval/success": 0.1}, {"eval/success": final}]}
    >>> by = {"on": [run("on", s, f, 0.2 + f) for s, f in enumerate([0.5, 0.7, 0.9, 0.8])],
    ...       "off": [run("off", s, f, 0.2) for s, f in enumerate([0.5, 0.7, 0.9, 0.8])]}
    >>> out = covariate_slope(by, "on", "off", [0, 1, 2, 3])
    >>> round(out["slope"], 6), out["seeds"], out["p"] < 1e-6
    (1.0, 4, True)
    """
    fa = {r["seed"]: final_success(r) for r in by.get(a, []) if r["seed"] in seeds}
    rb = {r["seed"]: r for r in by.get(b, []) if r["seed"] in seeds}
    common = sorted(set(fa) & set(rb))
    if common != sorted(seeds) or len(common) < 3:
        return None
    x = np.array(
        [float(rb[s]["train"][0].get("first_collection", rb[s]["train"][0].get("all_failed_fraction"))) for s in common]
    )
    y = np.array([fa[s] - final_success(rb[s]) for s in common])
    if float(np.ptp(x)) == 0.0:
        return None  # one covariate value: no slope to read
    fit = stats.linregress(x, y)
    half = float(stats.t.ppf(0.975, len(common) - 2)) * float(fit.stderr)
    return {
        "slope": float(fit.slope),
        "lo": float(fit.slope) - half,
        "hi": float(fit.slope) + half,
        "p": float(fit.pvalue),
        "seeds": len(common),
    }


def completeness(entries: list[dict], methods: list[str], seeds: list[int]) -> dict:
    """How much of a planned block (``methods`` x ``seeds``) has finished: the runs in, the runs
    planned, and the seeds with every method in (the only seeds a full table could pair)."""
    done = {(e["method"], e["seed"]) for e in entries}
    planned = {(m, s) for m in methods for s in seeds}
    return {
        "finished": len(done & planned),
        "planned": len(planned),
        "complete_seeds": [s for s in seeds if all((m, s) in done for m in methods)],
    }


def series(runs: list[dict], part: str, key: str) -> np.ndarray:
    """``key`` of each row of ``part``, one row per seed; seeds with fewer rows (a budget ended
    them earlier) padded with NaN at the end."""
    rows = series_rows(runs, part, key)
    width = max((r.size for r in rows), default=0)
    return np.array([np.concatenate([r, np.full(width - r.size, np.nan)]) for r in rows]).reshape(len(rows), width)


def per_run(runs: list[dict], part: str, key: str, cols: slice) -> np.ndarray:
    """Each seed's mean of ``key`` over its own rows ``cols`` (its last five, its first), as a
    column: seeds of different lengths each read their own end."""
    return np.array([[np.nanmean(r[cols]) if r[cols].size else np.nan] for r in series_rows(runs, part, key)])


def curve(runs: list[dict], part: str, key: str) -> tuple[np.ndarray, np.ndarray, str]:
    """A method's curve over its seeds: the x (episodes sampled where every row records them, else
    iterations), one row per seed, and the x's name. Seeds whose rows share one x are stacked as
    they are; otherwise (a budget ended them at different iterations, dynamic sampling spent
    differently) each is interpolated onto the points up to the shortest seed's end.

    >>> runs = [{"train": [{"iteration": 1, "sampled_episodes": 64, "s": 0.0}, {"iteration": 2, "sampled_episodes": 128, "s": 1.0}]},
    ...         {"train": [{"iteration": 1, "sampled_episodes": 96, "s": 0.5}, {"iteration": 2, "sampled_episodes": 192, "s": 0.5}]}]
    >>> xs, ys, name = curve(runs, "train", "s")
    >>> name, xs.tolist(), ys.round(3).tolist()
    ('episodes sampled', [96.0, 128.0], [[0.5, 1.0], [0.5, 0.5]])
    """
    rows = [r[part] for r in runs]
    by_episode = all(row.get("sampled_episodes") is not None for rs in rows for row in rs)
    xkey, name = ("sampled_episodes", "episodes sampled") if by_episode else ("iteration", "iteration")
    xs = [[float(row[xkey]) for row in rs] for rs in rows]
    if all(x == xs[0] for x in xs):
        return np.array(xs[0]), series(runs, part, key), name
    lo, hi = max(x[0] for x in xs if x), min(x[-1] for x in xs if x)
    grid = np.array(sorted({v for x in xs for v in x if lo <= v <= hi}))
    ys = series_rows(runs, part, key)
    return grid, np.array([np.interp(grid, x, y) for x, y in zip(xs, ys)]), name


def series_rows(runs: list[dict], part: str, key: str) -> list[np.ndarray]:
    """:func:`series` for seeds whose rows differ in number: one array per seed."""
    return [np.array([np.nan if row.get(key) is None else float(row[key]) for row in r[part]]) for r in runs]


def mde_80(diffs: np.ndarray, n_seeds: int) -> float:
    """Smallest mean paired difference a two-sided 5% t test over ``n_seeds`` seeds detects with 80%
    power, from the spread of the pilot's paired differences (normal approximation of the power)."""
    sd = float(np.std(diffs, ddof=1)) if diffs.size > 1 else float("nan")
    return (t975(n_seeds - 1) + 0.8416) * sd / math.sqrt(n_seeds)


def auc(run: dict) -> float:
    """Area under a run's held-out success curve over its evaluations, divided by their span: the
    mean success over the run (trapezoids between the evaluations). The x is the episodes sampled
    where the run recorded them (arms that spend differently per iteration are compared per
    episode), else the iteration."""
    by_episode = all("sampled_episodes" in e for e in run["eval"])
    its = np.array([e["sampled_episodes" if by_episode else "iteration"] for e in run["eval"]], dtype=float)
    ys = np.array([e["eval/success"] for e in run["eval"]], dtype=float)
    return float(np.sum((ys[1:] + ys[:-1]) / 2 * np.diff(its)) / (its[-1] - its[0])) if its.size > 1 else float(ys[0])


def final_success(run: dict) -> float:
    return float(run["eval"][-1]["eval/success"])


def paired(by: dict[str, list[dict]], a: str, b: str, metric: Callable[[dict], float]) -> dict | None:
    """``metric(a) - metric(b)`` over the seeds both ran: mean, 95% t interval, per-seed values."""
    fa, fb = ({e["seed"]: metric(e) for e in by.get(m, [])} for m in (a, b))
    seeds = sorted(set(fa) & set(fb))
    if not seeds:
        return None
    d = np.array([fa[s] - fb[s] for s in seeds])
    m, h = mean_ci(d[:, None])
    return {
        "mean": float(m[0]),
        "half": float(h[0]),
        "lo": float(m[0] - h[0]),
        "hi": float(m[0] + h[0]),
        "seeds": seeds,
        "per_seed": [float(x) for x in d],
    }


def validity(
    by: dict[str, list[dict]], criteria: ValidityCriteria | None, pilot_seeds: tuple[int, ...] = ()
) -> dict | None:
    """Whether the lab can tell GiGPO from GRPO under the pre-registered ``criteria``: the trap at
    iteration 1, GiGPO's room to move and the paired final difference (its interval excluding 0
    over enough seeds); and the same difference on the seeds that did not choose the setting
    (``pilot_seeds`` left out), which is the test that does not reuse the data that chose it.
    ``None`` without both methods or without criteria."""
    if REFERENCE not in by or VALIDITY_BASELINE not in by or criteria is None:
        return None
    runs = by[REFERENCE]
    trap = float(np.mean([r["train"][0]["all_failed_fraction"] for r in runs]))
    rise = np.array([[final_success(r) - float(r["eval"][0]["eval/success"])] for r in runs])
    rm, rh = mean_ci(rise)
    diff = paired(by, REFERENCE, VALIDITY_BASELINE, final_success)
    n = len(diff["seeds"]) if diff else 0
    checks = {
        "trap": trap >= criteria.trap_min,
        "room": float(rm[0]) >= criteria.room_min,
        "discrimination": bool(diff and n >= criteria.seeds and diff["lo"] > 0),
    }
    fresh = {m: [r for r in rs if r["seed"] not in pilot_seeds] for m, rs in by.items()}
    fresh_diff = paired(fresh, REFERENCE, VALIDITY_BASELINE, final_success)
    return {
        "all_failed_it1": trap,
        "gigpo_rise": float(rm[0]),
        "gigpo_rise_half": float(rh[0]),
        "gigpo_minus_grpo": diff,
        "seeds": n,
        "checks": checks,
        "pilot_seeds": sorted(pilot_seeds),
        "gigpo_minus_grpo_fresh": fresh_diff,
        "criteria": dataclasses.asdict(criteria),
        "verdict": (
            f"not decided: fewer than {criteria.seeds} paired seeds"
            if n < criteria.seeds
            else "discriminates"
            if all(checks.values())
            else "cannot discriminate"
        ),
    }


def multiplicity(by: dict[str, list[dict]], methods: list[str]) -> list[dict]:
    """The primary comparison of each of ``methods`` against ``gigpo`` as one family: the paired
    t-test's p-value (the test behind the table's intervals) and its Holm adjustment over the
    family, so that a single interval excluding 0 among many is not read as a finding."""
    rows = [
        (m, d)
        for m in methods
        if m != REFERENCE and (d := paired(by, m, REFERENCE, final_success)) is not None and len(d["seeds"]) >= 2
    ]
    ps = [paired_t_p(d["per_seed"]) for _, d in rows]
    return [
        {"method": m, "seeds": len(d["seeds"]), "diff": d, "p": p, "p_holm": a}
        for (m, d), p, a in zip(rows, ps, holm(ps))
    ]


def families(by: dict[str, list[dict]]) -> dict[str, list[dict]] | None:
    """The two families tested against ``gigpo``: the pure-RL remedies (GiGPO - GRPO is the validity
    test, judged alone) and the labelled tracks. ``None`` without ``gigpo``."""
    if REFERENCE not in by:
        return None
    return {
        "pure": multiplicity(by, [m for m in by if m not in LABELS and m != VALIDITY_BASELINE]),
        "labelled": multiplicity(by, [m for m in by if m in LABELS]),
    }


def progpo_on_off(by: dict[str, list[dict]], metric: Callable[[dict], float] = final_success) -> dict | None:
    """ProGPO's term switched on over each base it was run on (``progpo-X`` - ``X``, ``metric``
    paired by seed; the final held-out success by default), and pooled: per seed, the mean over the bases of that seed's
    differences (seeds where every pair ran), so the seeds stay the independent unit. In the
    exploratory block this contrast was chosen after its comparisons against ``gigpo``; the confirm
    block pre-registers it (:func:`primary_verdict`). ``None`` without a single pair."""
    pairs = [(m, m[len("progpo-") :]) for m in by if m.startswith("progpo-") and m[len("progpo-") :] in by]
    rows = [(on, off, d) for on, off in pairs if (d := paired(by, on, off, metric)) is not None]
    if not rows:
        return None
    common = sorted(set.intersection(*(set(d["seeds"]) for _, _, d in rows)))
    per_seed = [float(np.mean([d["per_seed"][d["seeds"].index(s)] for _, _, d in rows])) for s in common]
    pooled = None
    if len(rows) > 1 and len(common) >= 2:
        m, h = mean_ci(np.array(per_seed)[:, None])
        pooled = {
            "mean": float(m[0]),
            "half": float(h[0]),
            "lo": float(m[0] - h[0]),
            "hi": float(m[0] + h[0]),
            "seeds": common,
            "per_seed": per_seed,
            "p": paired_t_p(per_seed),
        }
    return {
        "pairs": [{"on": on, "off": off, "diff": d, "p": paired_t_p(d["per_seed"])} for on, off, d in rows],
        "pooled": pooled,
    }
