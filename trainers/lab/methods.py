"""The lab's methods: each a triple of axes (estimator, collector, teacher) and the ProGPO controls.

A method's name says what it runs: :data:`METHOD_AXES` gives its axes where they differ from
:data:`AXES`, and :func:`method_args` sets every axis on the trainer's command line, so that a
config file can never slip another collector or teacher into it. :data:`LAB_PRESETS` are the lab's
blocks (``--lab``); methods that use privileged information carry a :data:`LABELS` label wherever
they appear.

>>> axes_of("progpo-gigpo+tree")["estimator"], axes_of("progpo-gigpo+tree")["rollout"]
('progpo-gigpo', 'tree')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainers.advantages.registry import base_names, estimator, estimator_names
from trainers.strict_yaml import load_strict
from trainers.teachers.registry import label_of as teacher_label
from trainers.teachers.registry import teacher_names

__all__ = [
    "acted_by",
    "acted_keys",
    "AXES",
    "CONTROLS",
    "COLLECTOR_SUFFIXES",
    "label_of",
    "suffixes",
    "DEFAULT_METHODS",
    "is_method",
    "method_axes",
    "EXPLORATORY",
    "LABELS",
    "LAB_BASES",
    "LAB_METHODS",
    "LAB_PRESETS",
    "METHODS",
    "METHOD_AXES",
    "NOT_REGISTERED",
    "PAIRS",
    "REFERENCE",
    "VALIDITY_BASELINE",
    "TRAIN_KEYS",
    "axes_of",
    "labelled",
    "method_args",
    "run_name",
]


#: the axes that name a method: its estimator, collector (rollout, tree scorer) and teacher, and
#: the ProGPO controls. Every run sets each of them on the command line, and the report reads them
#: back from the run's own config, so a method's name always says what it ran.
AXES = {
    "estimator": "gigpo",
    "rollout": "flat",
    "tree_scorer": "coverage",
    "distill": "none",
    "progress_gate": "all_failed",
    "shuffle_coverage": False,
    "dynamic_sampling": False,
}


#: the ProGPO controls, on the lab's base estimator (``AXES["estimator"]``)
CONTROLS: dict[str, dict[str, object]] = {
    "always": {"estimator": "progpo-" + str(AXES["estimator"]), "progress_gate": "always"},
    "shuffled": {"estimator": "progpo-" + str(AXES["estimator"]), "shuffle_coverage": True},
}
#: what ``<estimator>+<suffix>`` adds to an estimator, for the collectors; a registered teacher's
#: name adds that teacher (:func:`suffixes`)
COLLECTOR_SUFFIXES: dict[str, dict[str, object]] = {
    "tree": {"rollout": "tree"},
    "tree-random": {"rollout": "tree", "tree_scorer": "random"},
    # dynamic sampling: drop the groups whose outcomes are all equal, draw more (any estimator)
    "dynamic": {"dynamic_sampling": True},
}


def suffixes() -> dict[str, dict[str, object]]:
    """Every ``+suffix`` a method may carry: the collectors', then each registered teacher's (a
    plug-in's too, once loaded)."""
    return {**COLLECTOR_SUFFIXES, **{name: {"distill": name} for name in teacher_names()[1:]}}


def method_axes(method: str) -> dict[str, object]:
    """``method``'s axes where they differ from :data:`AXES`: a control, or a registered
    estimator (:func:`~trainers.advantages.registry.estimator_names`, plug-ins included) with at
    most one ``+suffix`` of :func:`suffixes`. An unknown name is a ``ValueError`` of one line.

    >>> method_axes("progpo-hgpo+tree")
    {'estimator': 'progpo-hgpo', 'rollout': 'tree'}
    """
    if method in CONTROLS:
        return dict(CONTROLS[method])
    name, _, suffix = method.partition("+")
    known = suffixes()
    if name not in estimator_names() or (suffix and suffix not in known):
        raise ValueError(
            f"unknown method {method!r}: a control ({', '.join(CONTROLS)}) or an estimator "
            f"({', '.join(estimator_names())}) with at most one of "
            f"{', '.join('+' + s for s in known)}"
        )
    axes: dict[str, object] = {} if name == AXES["estimator"] else {"estimator": name}
    return {**axes, **known.get(suffix, {})}


def is_method(method: str) -> bool:
    """Whether :func:`method_axes` knows ``method``."""
    try:
        method_axes(method)
    except ValueError:
        return False
    return True


def axes_of(method: str) -> dict[str, object]:
    """Every axis of ``method`` (the defaults filled in).

    >>> axes_of("gigpo+tree-random")["tree_scorer"], axes_of("gigpo+tree-random")["distill"]
    ('random', 'none')
    """
    return {**AXES, **method_axes(method)}


def method_args(method: str) -> list[str]:
    """The trainer flags that set every axis of ``method``, defaults included: a config file's
    ``distill`` or ``rollout`` can never slip into a method that does not name it."""
    args: list[str] = []
    for key, value in axes_of(method).items():
        flag = "--" + key.replace("_", "-")
        args += ([flag] if value else ["--no-" + flag[2:]]) if isinstance(value, bool) else [flag, str(value)]
    return args


#: the methods of the package's own estimators: each base and its ``progpo-`` variant, the
#: controls, and each with a collector or teacher suffix on the lab's base estimator
METHOD_AXES: dict[str, dict[str, object]] = {
    m: method_axes(m)
    for m in (
        *estimator_names(),
        *CONTROLS,
        *(f"{pre}{AXES['estimator']}+{suffix}" for pre in ("", "progpo-") for suffix in suffixes()),
    )
}
METHODS = {m: method_args(m) for m in METHOD_AXES}


#: the lab's reference arm, its base estimator (the default of :data:`AXES`): every method is
#: compared with it and with its ``progpo-`` variant
REFERENCE = str(AXES["estimator"])
#: the validity test's baseline (a default): the lab can tell remedies apart only where the
#: reference beats it
VALIDITY_BASELINE = "grpo"

#: the comparison's methods when --methods is not given (the recorded comparison's six)
DEFAULT_METHODS = (
    REFERENCE,
    f"progpo-{REFERENCE}",
    VALIDITY_BASELINE,
    f"progpo-{VALIDITY_BASELINE}",
    "always",
    "shuffled",
)


def label_of(method: str) -> str | None:
    """The label of ``method``'s teacher, ``None`` for pure RL: a method with a teacher uses more
    than the reward (privileged information, or hindsight), is labelled wherever it appears and
    is never ranked with pure RL."""
    suffix = method.partition("+")[2]
    return teacher_label({"distill": suffix}) if suffix in teacher_names()[1:] else None


#: the labelled methods among :data:`METHOD_AXES`
LABELS = {m: label for m in METHOD_AXES if (label := label_of(m)) is not None}


def labelled(method: str) -> str:
    """A method's name as tables print it, with its teacher's label.

    >>> labelled("gigpo+privileged"), labelled("gigpo")
    ('gigpo+privileged [privileged (not pure RL)]', 'gigpo')
    """
    label = label_of(method)
    return f"{method} [{label}]" if label else method


def _read_blocks() -> dict[str, dict[str, Any]]:
    """The lab's blocks (``blocks.yaml`` beside this module): lists as tuples, ``{first, last}`` as
    the seeds from first to last."""
    data = load_strict((Path(__file__).with_name("blocks.yaml")).read_text())

    def value(v: Any) -> Any:
        if isinstance(v, dict) and set(v) == {"first", "last"}:
            return tuple(range(v["first"], v["last"] + 1))
        return tuple(v) if isinstance(v, list) else v

    blocks = {name: {key: value(v) for key, v in block.items()} for name, block in data.items()}
    return {name: {**_registered_arms(b["config"]), **b} if b.get("preregistered") else b for name, b in blocks.items()}


def _registered_arms(config: str) -> dict[str, tuple[Any, ...]]:
    """A pre-registered block's ``methods`` and ``seeds``: the arms and seeds its config registers
    (``notes: preregistration:``), so that the design is written in one place; none where the
    config is not in this checkout."""
    path = Path(__file__).resolve().parents[2] / config
    if not path.is_file():
        return {}
    registered = ((load_strict(path.read_text()) or {}).get("notes") or {}).get("preregistration") or {}
    return {"methods": tuple(registered["arms"]), "seeds": tuple(registered["seeds"])}


#: ``--lab NAME``: the credit-trap lab's blocks (each fills --config, --methods, --iterations and --out
#: where they are not given). ``alfworld`` is the pre-registered setting; ``webshop`` the CPU demo's.
LAB_PRESETS: dict[str, dict[str, Any]] = _read_blocks()

#: the lab's pure-RL methods, then its labelled tracks (ranked apart): the ALFWorld block's arms
LAB_METHODS: tuple[str, ...] = LAB_PRESETS["alfworld"]["methods"]


#: analyses of the ALFWorld block chosen after its data were seen: labelled wherever they appear
EXPLORATORY = {
    "multiplicity": "exploratory: the Holm family was added after seeds 0-4 had been seen (not pre-registered)",
    "progpo_on_off": "exploratory: the on/off contrast was chosen after seeds 0-6 had been seen (not pre-registered); "
    "a hypothesis for a confirmatory run, not a result",
}


#: a pre-registered block's comparisons against gigpo: reported, not among the tests it registered
NOT_REGISTERED = "descriptive: these comparisons against gigpo are not among the tests this block pre-registered"


#: the lab's baselines: every method's paired difference is reported against each
LAB_BASES = (REFERENCE, f"progpo-{REFERENCE}")


def _acted() -> tuple[dict[str, str], dict[str, str]]:
    """Where each remedy acted: ``label -> per-iteration train metric`` and ``label -> the part of a
    method's name that says it has the remedy`` (ProGPO's term, each registered base's own terms
    (:attr:`~trainers.advantages.registry.Estimator.acted`), the tree, the teachers)."""
    keys, by = {"ProGPO groups": "adv/progress_group_frac"}, {"ProGPO groups": "progpo-"}
    for name in base_names():
        for label, key in estimator(name).acted.items():
            keys[label], by[label] = key, name
    for label, key, part in (
        ("tree forks", "rollout/forks", "+tree"),
        ("tree pruned", "rollout/pruned", "+tree"),
        ("teacher groups", "distill/group_frac", f"{AXES['estimator']}+"),
    ):
        keys[label], by[label] = key, part
    return keys, by


def acted_keys() -> dict[str, str]:
    """Where each remedy acted, read from the registries now (a plug-in loaded after this module
    was imported is in it): ``label -> per-iteration train metric``, averaged over a run's
    iterations (a metric is logged for methods without the remedy too)."""
    return _acted()[0]


def acted_by() -> dict[str, str]:
    """``label -> the part of a method's name that says it has the remedy`` (as :func:`acted_keys`)."""
    return _acted()[1]


#: paired differences reported: each ProGPO against its base; each control against the base and
#: against ProGPO(GiGPO) (``always``: is the all-failed gate needed? ``shuffled``: does the ranking by
#: coverage matter, or only the extra variance?)
PAIRS = (
    (f"progpo-{REFERENCE}", REFERENCE),
    (f"progpo-{VALIDITY_BASELINE}", VALIDITY_BASELINE),
    ("always", REFERENCE),
    ("shuffled", REFERENCE),
    ("always", f"progpo-{REFERENCE}"),
    ("shuffled", f"progpo-{REFERENCE}"),
    (REFERENCE, VALIDITY_BASELINE),  # the lab's validity pair: the reference must beat the baseline
)


#: per-iteration train metrics recorded and compared by --rerun
TRAIN_KEYS = {
    "train/success": "success",
    "all_failed_fraction": "all_failed_frac",
    "coverage_rate": "coverage_rate",
    "repeat_rate": "repeated_action_rate",
    "score_mean": "score_mean",
    "adv/abs_mean": "adv/abs_mean",
    "adv/progress_groups": "adv/progress_groups",
    "sampled_episodes": "budget/episodes",
    "sampled_first_all_failed": "dynamic/first_all_failed_frac",
    "gen_batches": "dynamic/gen_batches",
}


def run_name(method: str, seed: int, state_key: str) -> str:
    return f"{method}_{state_key}_seed{seed}"


def __getattr__(name: str) -> object:
    """``ACTED_KEYS`` and ``ACTED_BY``: the registries as they are now (:func:`acted_keys`)."""
    if name == "ACTED_KEYS":
        return acted_keys()
    if name == "ACTED_BY":
        return acted_by()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
