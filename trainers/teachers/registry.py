"""The teachers, by name: each registered once, with what it needs, its label and its report.

A teacher adds a distillation loss beside the RL loss (``--distill NAME``). Its registration
(:class:`TeacherSpec`) says how a run builds it (``make``: the update's auxiliary loss,
:class:`trainers.loop.updater.AuxiliaryLoss`), the label its runs carry wherever they appear (a
teacher that reads privileged information is never pure RL), whether it reads the env's
privileged text, which configs it cannot run with, and its paragraph of the run report. The
trainer's ``--distill`` choices, its validation, the records, the report and the lab's
``+<teacher>`` methods read the registry; none of them names a teacher.

The two built-in teachers (``privileged``, ``hindsight``; :mod:`trainers.teachers`) are
registered here, by name and the path of their factory, so that a report or a table can name a
run's teacher without importing torch (this module is standard library only). A teacher of
one's own is one file: :func:`register_teacher` with a factory, loaded by ``--plugin`` or the
``progpo.teachers`` entry point (``examples/custom_teacher.py``).

>>> distill_label("privileged"), distill_label("hindsight"), distill_label("none")
('privileged (not pure RL)', 'hindsight (no ground truth)', None)
"""

from __future__ import annotations

import importlib
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from trainers.plugins import load_entry_point_group, note_registration

__all__ = [
    "DISTILL_MODES",
    "ENTRY_POINT_GROUP",
    "PRIVILEGED_KEY",
    "SKILL_WRITERS",
    "TeacherSpec",
    "distill_label",
    "is_builtin_teacher",
    "label_of",
    "reads_privileged",
    "register_teacher",
    "teacher",
    "teacher_names",
    "unregister_teacher",
]

#: the entry point group of installed distributions that register teachers
ENTRY_POINT_GROUP = "progpo.teachers"
#: who writes the hindsight teacher's skills
SKILL_WRITERS: tuple[str, ...] = ("template", "policy")
#: the reset-info key under which an env offers its privileged text (ALFWorld, WebShop: ``privileged_info=True``)
PRIVILEGED_KEY = "privileged_text"


@dataclass(frozen=True)
class TeacherSpec:
    """A registered teacher.

    Attributes:
        name: what ``--distill`` takes (``none`` is RL alone).
        make: ``(cfg, policy, model) -> teacher``, the update's auxiliary loss; or the path
            ``"module:function"`` of one, imported when a run builds its teacher.
        label: ``(config) -> str``: the label its runs carry in records, reports and tables.
        help: one line for ``--help``.
        privileged: it reads the env's privileged text at reset (an env must offer it).
        check: ``(cfg) -> reason or None``: a config it cannot run with, said before anything starts.
        report: ``(train_records, label) -> str``: its paragraph of the run report.
        options: its options dataclass (each field an :func:`~trainers.advantages.options.option`;
            a built-in's ``flag`` is its flat config field), or the path ``"module:Class"`` of one;
            ``None``: its ``teacher_options`` are its own to check (``check``).
    """

    name: str
    make: str | Callable[[Any, Any, Any], Any]
    label: Callable[[Mapping[str, Any]], str]
    help: str = ""
    privileged: bool = False
    check: Callable[[Any], str | None] | None = None
    report: Callable[[Sequence[dict[str, Any]], str], str] | None = None
    options: type | str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name == "none" or "+" in self.name:
            raise ValueError(
                f"a teacher's name is a non-empty string without '+', other than 'none', got {self.name!r}"
            )

    def build(self, cfg: Any, policy: Any, model: Any) -> Any:
        """The run's teacher (``make`` imported first when it is a path)."""
        make = self.make
        if isinstance(make, str):
            module, _, attr = make.partition(":")
            make = getattr(importlib.import_module(module), attr)
        return make(cfg, policy, model)

    def options_class(self) -> type | None:
        """Its options dataclass (``options`` imported first when it is a path), or ``None``."""
        options = self.options
        if isinstance(options, str):
            module, _, attr = options.partition(":")
            options = getattr(importlib.import_module(module), attr)
        return options

    def option_values(self, cfg: Any) -> Any:
        """The options a run's teacher trains with: each option's flat config field where it has
        one (``distill_tau``), ``teacher_options`` over them, checked; an instance of its options
        dataclass, or ``None`` without one."""
        # the schema's checks live with the estimators' options: imported when a config is read
        from trainers.advantages.options import check_options, option_fields

        options = self.options_class()
        if options is None:
            return None
        values = {
            f.name: getattr(cfg, f.metadata["flag"])
            for f in option_fields(options)
            if f.metadata.get("flag") and hasattr(cfg, f.metadata["flag"])
        }
        values.update(check_options(self.name, options, dict(getattr(cfg, "teacher_options", None) or {})))
        return options(**values)


_TEACHERS: dict[str, TeacherSpec] = {}
_BUILTIN: set[str] = set()


def register_teacher(spec: TeacherSpec, *, replace: bool = False, builtin: bool = False) -> TeacherSpec:
    """Register ``spec``; a taken name is an error unless ``replace`` (never a built-in's)."""
    if spec.name in _BUILTIN or (spec.name in _TEACHERS and not replace and _TEACHERS[spec.name] != spec):
        raise ValueError(f"teacher {spec.name!r} is registered already; pick another name")
    _TEACHERS[spec.name] = spec
    note_registration()
    if builtin:
        _BUILTIN.add(spec.name)
    return spec


def is_builtin_teacher(name: str) -> bool:
    """Whether ``name`` is one of the package's own teachers (their options are config fields,
    not ``teacher_options``)."""
    return name in _BUILTIN


def unregister_teacher(name: str) -> None:
    """Remove a registered teacher (tests; a built-in cannot be removed)."""
    if name in _BUILTIN:
        raise ValueError(f"teacher {name!r} is built in")
    _TEACHERS.pop(name, None)


def _load_entry_points() -> None:
    load_entry_point_group(ENTRY_POINT_GROUP, "teacher")


def teacher_names() -> tuple[str, ...]:
    """What ``--distill`` takes: ``none``, then every registered teacher."""
    _load_entry_points()
    return ("none", *_TEACHERS)


def teacher(name: str) -> TeacherSpec:
    """The registered teacher ``name``; an unknown one is a ``ValueError`` listing the known ones."""
    if name not in _TEACHERS:
        _load_entry_points()
    if name not in _TEACHERS:
        raise ValueError(f"distill must be one of {', '.join(teacher_names())}, got {name!r}")
    return _TEACHERS[name]


def reads_privileged(name: str) -> bool:
    """Whether ``name`` is a registered teacher that reads the env's privileged text (``none``,
    and a teacher whose plug-in is not loaded here, do not)."""
    return name != "none" and name in teacher_names() and _TEACHERS[name].privileged


def label_of(config: Mapping[str, Any]) -> str | None:
    """The label of a run's teacher from its config (``distill``, ``skill_writer``, ...); ``None``
    for RL alone, and for a teacher whose plug-in is not loaded here."""
    name = str(config.get("distill", "none") or "none")
    if name == "none" or name not in teacher_names():
        return None
    return _TEACHERS[name].label(config)


def distill_label(mode: str, writer: str = "template") -> str | None:
    """The label a run with this teacher carries in its report, summary, records and tables; a
    privileged teacher's run is never pure RL."""
    return label_of({"distill": mode, "skill_writer": writer})


def __getattr__(name: str) -> Any:
    """``DISTILL_MODES``: the registered names now (a plug-in registered later is in the next read)."""
    if name == "DISTILL_MODES":
        return teacher_names()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mean(train: Sequence[dict[str, Any]], key: str) -> float:
    return statistics.fmean(float(r.get(key, 0.0)) for r in train) if train else 0.0


def _privileged_report(train: Sequence[dict[str, Any]], label: str) -> str:
    return (
        f"**Teacher: {label}.** The all-failed groups ({_mean(train, 'distill/group_frac'):.1%} of the groups on "
        "average) were trained by self-distillation from an EMA teacher that read the env's privileged text (the "
        f"expert's plan / the target product), mean symmetric KL {_mean(train, 'distill/kl'):.4f}: in those groups "
        "this run imitates, it does not learn from reward alone. Samples of what the teacher read: "
        "distill_samples.jsonl."
    )


def _hindsight_report(train: Sequence[dict[str, Any]], label: str) -> str:
    return (
        f"**Teacher: {label}.** Every group got SEED's gated distillation term toward the choices made with a "
        f"hindsight skill of its own trajectory in context (mean gate {_mean(train, 'distill/gate'):.3f}). Samples "
        "of the skills: distill_samples.jsonl."
    )


def _hindsight_check(cfg: Any) -> str | None:
    if teacher("hindsight").option_values(cfg).skill_writer == "policy" and cfg.policy_mode != "generate":
        return (
            "skill_writer policy needs --policy-mode generate (the policy writes the skills); score mode uses the "
            "template writer"
        )
    return None


register_teacher(
    TeacherSpec(
        "privileged",
        "trainers.teachers.privileged:make_privileged",
        lambda c: "privileged (not pure RL)",
        help="I-SDPO: all-failed groups are distilled from an EMA teacher that reads the env's privileged text -- the "
        "expert plan / the target product: NOT pure RL",
        privileged=True,
        report=_privileged_report,
        options="trainers.teachers.options:PrivilegedOptions",
    ),
    builtin=True,
)
register_teacher(
    TeacherSpec(
        "hindsight",
        "trainers.teachers.hindsight:make_hindsight",
        lambda c: (
            "hindsight (no ground truth)"
            if {**c, **(c.get("teacher_options") or {})}.get("skill_writer", "template") == "template"
            else "hindsight (policy-written skills, no ground truth)"
        ),
        help="SEED: a gated pull toward the choices the policy makes with a hindsight skill of its own trajectory in "
        "context, every group",
        check=_hindsight_check,
        report=_hindsight_report,
        options="trainers.teachers.options:HindsightOptions",
    ),
    builtin=True,
)
