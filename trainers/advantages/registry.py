"""The base estimators, by name: each one registered once, with its terms, its needs and its options.

A base estimator (:class:`Estimator`) gives each trajectory its episode term ``A^E_i``
(:attr:`~Estimator.episode`) and may add a step term to each step (:attr:`~Estimator.step`, from
a :class:`StepContext`). The built-in bases register themselves in their family's module:

================  ===============================  =============================================
base              episode term                     step term
================  ===============================  =============================================
grpo              z-score of R in the group        none
rloo              R_i - mean of the others' R      none
gigpo             GRPO's                           ``omega`` x anchor-state term (same ``o_t``)
planpo            z(R / T) among the successes     ``alpha`` x turn term (shorter answers first)
hgpo              GRPO's                           ``omega`` x history-depth term (+ potential credit)
================  ===============================  =============================================

Each base also runs as ``progpo-<base>`` (:func:`estimator_names`): ProGPO's progress term in its
all-failed groups (:func:`trainers.advantages.progpo.with_progress`).

A new base is one registered function, in the package or outside it: the decorator
:func:`register_estimator` on its step term (its episode term defaults to GRPO's), with a frozen
dataclass of its options, each field an :func:`option` with its help text, default and bounds.
Everything else reads the registry: the trainer's ``--estimator`` and the ``advantage:`` section
(a plug-in's options go under ``advantage: {options: ...}`` or ``--estimator-option``), the
records' "where it acted" metrics (:attr:`Estimator.metrics`), the run report
(:attr:`Estimator.report`), the lab's methods and the verl estimators. A module that registers
estimators is loaded by ``--plugin MODULE_OR_FILE`` or, once installed, through the entry point
group ``progpo.estimators`` (:func:`load_entry_points`).

>>> @register_estimator("doc-demo", help="GRPO plus one constant", replace=True)
... def _demo(ctx):
...     return np.full(ctx.traj.size, 0.5)
>>> "doc-demo" in base_names(), "progpo-doc-demo" in estimator_names()
(True, True)
>>> unregister("doc-demo")
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from trainers.advantages.grpo import grpo_flat, rloo_flat
from trainers.advantages.options import check_options, option, option_fields
from trainers.advantages.segments import as_float, discounted_returns
from trainers.plugins import load_entry_point_group, load_plugin, note_registration

__all__ = [
    "BASES",
    "BASE_ESTIMATORS",
    "ENTRY_POINT_GROUP",
    "ESTIMATORS",
    "STEP_BASES",
    "BaseEstimator",
    "Estimator",
    "StepContext",
    "TermError",
    "base_names",
    "check_options",
    "estimator",
    "estimator_names",
    "exclusive_conflict",
    "flat_options",
    "grpo_episode",
    "load_entry_points",
    "load_plugin",
    "option",
    "option_fields",
    "register",
    "register_builtin",
    "register_episode_estimator",
    "register_estimator",
    "unregister",
]

#: the entry point group of installed distributions that register estimators
ENTRY_POINT_GROUP = "progpo.estimators"


@dataclass
class StepContext:
    """What a step term reads: the config (``cfg``: the shared options; ``options``: the base's
    own frozen config, :attr:`Estimator.options`), the trajectories (``r`` R_i, ``gid`` dense group,
    ``length`` T_i) and the steps (``traj``, ``t``, ``fv`` first visits as floats, ``failed`` each
    group's all-failed flag, ``state_ids``, ``step_rewards``, ``response_lengths``); ``acted``
    takes the counts of where the term acted."""

    cfg: Any
    options: Any
    r: np.ndarray
    gid: np.ndarray
    n_groups: int
    length: np.ndarray
    traj: np.ndarray
    t: np.ndarray
    fv: np.ndarray
    failed: np.ndarray
    state_ids: np.ndarray | None
    step_rewards: np.ndarray | None
    response_lengths: np.ndarray | None
    acted: dict[str, float]

    def returns(self) -> tuple[np.ndarray, np.ndarray]:
        """Each step's reward ``r_t`` and discounted return ``ret_t`` (ProGPO: first visits in the
        all-failed groups, where no tau_P gate applies)."""
        cfg, traj, t = self.cfg, self.traj, self.t
        if self.step_rewards is None:
            last = np.zeros(self.r.size, dtype=np.int64)
            np.maximum.at(last, traj, t)
            rew = np.where(t == last[traj], self.r[traj], 0.0)  # r_t: sparse outcome R_i on the final step
        else:
            rew = as_float(self.step_rewards, "step_rewards").reshape(-1)
        ret = discounted_returns(rew, traj, t, cfg.gamma)  # ret_t = sum_k gamma^k r_{t+k}
        if cfg.progpo:  # all-failed groups: the step reward is first_visit_t
            step_failed = self.failed[self.gid[traj]]
            ret = np.where(step_failed, discounted_returns(self.fv, traj, t, cfg.gamma), ret)
            rew = np.where(step_failed, self.fv, rew)
        return rew, ret

    def states(self) -> np.ndarray:
        """The anchor state id ``o_t`` of each step."""
        s = np.asarray(self.state_ids, dtype=np.int64).reshape(-1)
        if s.size != self.traj.size:
            raise ValueError(f"state_ids has {s.size} entries, step_traj {self.traj.size}")
        return s


#: ``episode(r, gid, n, *, eps, norm, turns, options)``: the episode term of each trajectory
EpisodeTerm = Callable[..., np.ndarray]
#: ``step(ctx)``: what the base adds to each step's advantage, or ``None``
StepTerm = Callable[[StepContext], "np.ndarray | None"]
#: what an estimator may need beside outcomes and groups
NEEDS = ("states", "turns", "response_lengths")


@dataclass(frozen=True)
class Estimator:
    """A base estimator.

    Attributes:
        name: what ``--estimator`` takes (``progpo-<name>`` adds ProGPO's progress term).
        episode: the episode term (default: GRPO's z-score, :func:`grpo_episode`).
        step: the step term, or ``None``.
        needs: what it reads beside outcomes and groups: ``states`` (the canonical ``o_t`` of each
            step), ``turns`` (each trajectory's number of turns), ``response_lengths``.
        options: its frozen options dataclass (each field an :func:`option`), or ``None``.
        help: one line for ``--help`` and the lab.
        metrics: ``(acted, n_groups, n_steps) -> {"adv/...": value}``: where its own terms acted,
            from the counts its step term wrote into ``ctx.acted``.
        report: ``(train_records, options) -> lines``: a paragraph of the run's report, given the
            options the run trained with (an instance of :attr:`options`, or ``None`` without them).
        schedule: ``(options, iteration, iterations, generate) -> options``: its options at one
            iteration of training (PlanPO's decaying turn weight).
        acted: ``{label: metric}``: the shares of :attr:`metrics` the lab tabulates as where the
            remedy acted (``{"HGPO peer steps": "adv/hgpo_peer_step_frac"}``).
    """

    name: str
    episode: EpisodeTerm | None = None
    step: StepTerm | None = None
    needs: frozenset[str] = frozenset()
    options: type | None = None
    help: str = ""
    metrics: Callable[[Mapping[str, float], int, int], dict[str, float]] | None = None
    report: Callable[[Sequence[dict[str, Any]], Any], list[str]] | None = None
    schedule: Callable[[Any, int, int, bool], Any] | None = None
    acted: Mapping[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name.startswith("progpo-") or "+" in self.name:
            raise ValueError(
                f"an estimator's name is a non-empty string without '+' that does not start with "
                f"'progpo-' (that prefix adds ProGPO's term), got {self.name!r}"
            )
        unknown = set(self.needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"estimator {self.name}: needs takes {', '.join(NEEDS)}, got {', '.join(sorted(unknown))}")
        # __dataclass_params__ is set by @dataclass; typeshed's type does not declare it
        frozen = dataclasses.is_dataclass(self.options) and self.options.__dataclass_params__.frozen  # type: ignore[attr-defined]
        if self.options is not None and not frozen:
            raise ValueError(f"estimator {self.name}: options must be a frozen dataclass")

    @property
    def needs_states(self) -> bool:
        return "states" in self.needs

    def flag(self, f: dataclasses.Field[Any]) -> str:
        """The flat name of one of its options (``hgpo_depth``)."""
        return f.metadata.get("flag") or f"{self.name.replace('-', '_')}_{f.name}"

    def make_options(self, values: Mapping[str, Any] | None = None, shared: Any = None) -> Any:
        """Its options dataclass from ``values`` (checked, defaults for the rest); a field named
        like a shared option of ``shared`` (``omega``) takes that value unless given."""
        if self.options is None:
            if values:
                raise ValueError(f"{self.name} takes no options, got {', '.join(values)}")
            return None
        given = check_options(self.name, self.options, values or {})
        for f in option_fields(self.options):
            if f.name not in given and shared is not None and hasattr(shared, f.name) and f.metadata.get("shared"):
                given[f.name] = getattr(shared, f.name)
        return self.options(**given)

    def run_episode(
        self, r: np.ndarray, gid: np.ndarray, n: int, *, eps: float, norm: str, turns: np.ndarray | None, options: Any
    ) -> np.ndarray:
        """The episode term of each trajectory, checked (:meth:`checked`)."""
        term = self.episode or grpo_episode
        return self.checked("episode", term(r, gid, n, eps=eps, norm=norm, turns=turns, options=options), r.size)

    def run_step(self, ctx: StepContext) -> np.ndarray | None:
        """The step term of each step (``None``: none), checked (:meth:`checked`)."""
        if self.step is None:
            return None
        out = self.step(ctx)
        return None if out is None else self.checked("step", out, ctx.traj.size)

    def checked(self, which: str, values: Any, n: int) -> np.ndarray:
        """A term's values as floats, or a :class:`TermError` of one line naming this estimator: a
        term is numeric, finite and of shape ``(n,)`` (a scalar or a column would be broadcast
        silently into wrong advantages)."""
        where = f"estimator {self.name}: its {which} term"
        try:
            arr = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise TermError(f"{where} must return numbers, got {type(values).__name__}") from None
        if arr.shape != (n,):
            raise TermError(f"{where} must return shape ({n},) (one value per {which_unit(which)}), got {arr.shape}")
        if not np.isfinite(arr).all():
            bad = int(arr.size - np.isfinite(arr).sum())
            raise TermError(f"{where} returned {bad} non-finite value(s) of {n}")
        return arr


class TermError(ValueError):
    """An estimator's term returned what no advantage can be made of (wrong shape, not numbers,
    NaN or infinite); the message names the estimator (the trainer says it in one line)."""


def which_unit(which: str) -> str:
    """What one value of a term stands for: a trajectory (episode term), a step (step term)."""
    return "trajectory" if which == "episode" else "step"


#: kept for code written against the first registry
BaseEstimator = Estimator

_REGISTRY: dict[str, Estimator] = {}
_BUILTIN: dict[str, int] = {}  # a built-in base -> its rank in base_names()


def register(spec: Estimator, *, replace: bool = False) -> Estimator:
    """Register ``spec`` under its name; a name taken by another estimator is an error unless ``replace``."""
    if spec.name in _REGISTRY and not replace and _REGISTRY[spec.name] != spec:
        raise ValueError(f"estimator {spec.name!r} is registered already; pick another name (or replace=True)")
    if spec.name in _BUILTIN and replace:
        raise ValueError(f"estimator {spec.name!r} is built in; register yours under another name")
    _REGISTRY[spec.name] = spec
    note_registration()
    return spec


def register_estimator(
    name: str,
    *,
    episode: EpisodeTerm | None = None,
    needs: Sequence[str] = (),
    options: type | None = None,
    help: str = "",  # argparse's word
    metrics: Callable[..., dict[str, float]] | None = None,
    report: Callable[..., list[str]] | None = None,
    schedule: Callable[..., Any] | None = None,
    acted: Mapping[str, str] | None = None,
    replace: bool = False,
) -> Callable[[StepTerm], StepTerm]:
    """Register the decorated function as the step term of the estimator ``name`` (the other
    fields as :class:`Estimator`'s); returns the function unchanged."""

    def decorate(step: StepTerm) -> StepTerm:
        fields = dict(needs=needs, options=options, help=help, metrics=metrics, report=report, acted=acted)
        _register_terms(name, episode, step, fields, schedule=schedule, replace=replace)
        return step

    return decorate


def _register_terms(
    name: str,
    episode: EpisodeTerm | None,
    step: StepTerm | None,
    fields: dict[str, Any],
    schedule: Callable[..., Any] | None = None,
    replace: bool = False,
) -> None:
    """Register the estimator ``name`` of these terms (``fields``: needs, options, help, metrics,
    report, acted, as the decorators take them)."""
    register(
        Estimator(
            name,
            episode=episode,
            step=step,
            needs=frozenset(fields["needs"]),
            options=fields["options"],
            help=fields["help"],
            metrics=fields["metrics"],
            report=fields["report"],
            schedule=schedule,
            acted=dict(fields["acted"] or {}),
        ),
        replace=replace,
    )


def register_episode_estimator(
    name: str,
    *,
    needs: Sequence[str] = (),
    options: type | None = None,
    help: str = "",  # argparse's word
    metrics: Callable[..., dict[str, float]] | None = None,
    report: Callable[..., list[str]] | None = None,
    acted: Mapping[str, str] | None = None,
    replace: bool = False,
) -> Callable[[EpisodeTerm], EpisodeTerm]:
    """Register the decorated function as the episode term of the estimator ``name``, which adds
    no step term (the other fields as :class:`Estimator`'s); returns the function unchanged. The
    term is ``episode(r, gid, n, *, eps, norm, turns, options) -> (N,) array``: each trajectory's
    outcome ``r``, its dense group ``gid`` of ``n`` groups, the shared ``eps`` and ``norm``, its
    number of turns and the estimator's options.

    >>> @register_episode_estimator("doc-max", help="the outcome minus its group's best", replace=True)
    ... def _group_max(r, gid, n, *, eps, norm, turns, options):
    ...     best = np.full(n, -np.inf)
    ...     np.maximum.at(best, gid, r)
    ...     return r - best[gid]
    >>> estimator("doc-max").step is None, "progpo-doc-max" in estimator_names()
    (True, True)
    >>> unregister("doc-max")
    """

    def decorate(episode: EpisodeTerm) -> EpisodeTerm:
        fields = dict(needs=needs, options=options, help=help, metrics=metrics, report=report, acted=acted)
        _register_terms(name, episode, None, fields, replace=replace)
        return episode

    return decorate


def unregister(name: str) -> None:
    """Remove a registered estimator (tests; a built-in cannot be removed)."""
    if name in _BUILTIN:
        raise ValueError(f"estimator {name!r} is built in")
    _REGISTRY.pop(name, None)


def register_builtin(spec: Estimator, rank: int) -> Estimator:
    """Register one of the package's own bases, listed at ``rank`` among them (whatever order
    their modules are imported in)."""
    register(spec)
    _BUILTIN[spec.name] = rank
    return spec


def load_entry_points() -> None:
    """Import every module of the ``progpo.estimators`` entry point group once (each registers
    its estimators); a plug-in that fails to load is named in one line."""
    load_entry_point_group(ENTRY_POINT_GROUP, "estimator")


def flat_options(bases: Sequence[str] | None = None) -> list[tuple[str, Estimator, dataclasses.Field[Any]]]:
    """``(flag, base, field)`` of every option a base spells as a flat flag of its own (``hgpo_depth``):
    not a shared one (``omega``), not one the trainer sets (``train=False``)."""
    out = []
    for name in base_names() if bases is None else bases:
        spec = _REGISTRY[name]
        for f in option_fields(spec.options):
            if f.metadata.get("train", True) and not f.metadata.get("shared"):
                out.append((spec.flag(f), spec, f))
    return out


def exclusive_conflict(name: str, value_of: Callable[[str], Any]) -> str | None:
    """Why a config of the estimator ``name`` sets another base's ``exclusive`` option (one it
    would silently ignore) away from its default, or ``None``; ``value_of(flag)`` reads a flat
    option's value, ``None`` where the config has no such field.

    >>> exclusive_conflict("gigpo", {"potential_credit": True}.get)
    'potential_credit belongs to hgpo and progpo-hgpo, not gigpo'
    """
    chosen = estimator(name).name
    for flag, spec, f in flat_options():
        value = value_of(flag)
        if spec.name != chosen and f.metadata.get("exclusive") and value is not None and value != f.default:
            return f"{flag} belongs to {spec.name} and progpo-{spec.name}, not {name}"
    return None


def estimator(name: str) -> Estimator:
    """The registered base ``name`` (``progpo-`` stripped); an unknown name is one line with the known ones."""
    base = name.removeprefix("progpo-")
    if base not in _REGISTRY:
        load_entry_points()
    if base not in _REGISTRY:
        raise ValueError(
            f"estimator must be one of {', '.join(estimator_names())}, got {name!r} (a plug-in's is known "
            "once its module loads: --plugin)"
        )
    return _REGISTRY[base]


def base_names() -> tuple[str, ...]:
    """The registered bases: the built-ins by rank, then the others in their registration order."""
    load_entry_points()
    return tuple(sorted(_REGISTRY, key=lambda n: (n not in _BUILTIN, _BUILTIN.get(n, 0))))


def estimator_names() -> tuple[str, ...]:
    """Every estimator ``--estimator`` takes: each base, then each ``progpo-<base>``."""
    bases = base_names()
    return bases + tuple(f"progpo-{b}" for b in bases)


def grpo_episode(r: np.ndarray, gid: np.ndarray, n: int, *, eps: float, norm: str, **_: Any) -> np.ndarray:
    """GRPO's episode term: the outcome's z-score in its group (the default of a registered base)."""
    return grpo_flat(r, gid, n, eps, norm)


def _rloo_episode(r: np.ndarray, gid: np.ndarray, n: int, **_: Any) -> np.ndarray:
    return rloo_flat(r, gid, n)


register_builtin(Estimator("grpo", grpo_episode, help="the outcome's z-score in its group"), rank=0)
register_builtin(Estimator("rloo", _rloo_episode, help="the outcome minus the mean of the group's others"), rank=1)


def __getattr__(name: str) -> Any:
    """``BASE_ESTIMATORS``, ``BASES``, ``ESTIMATORS``, ``STEP_BASES``: the registry now (a plug-in
    registered later is in the next read)."""
    if name == "BASE_ESTIMATORS":
        base_names()
        return dict(_REGISTRY)
    if name == "BASES":
        return base_names()
    if name == "ESTIMATORS":
        return estimator_names()
    if name == "STEP_BASES":
        return tuple(n for n in base_names() if _REGISTRY[n].needs_states)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
