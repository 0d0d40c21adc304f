"""The teachers' registry as a report and a config read it: each built-in's paragraph with its
figures, labels, checks, and the entry points that bring installed teachers and estimators."""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest

from trainers import plugins
from trainers.teachers import registry as teacher_registry
from trainers.teachers.registry import TeacherSpec, label_of, register_teacher, teacher, unregister_teacher

TRAIN = [
    {"distill/group_frac": 0.25, "distill/kl": 0.01, "distill/gate": 0.5},
    {"distill/group_frac": 0.75, "distill/kl": 0.03, "distill/gate": 0.7},
    {"distill/group_frac": 0.5},  # a record without the KL or the gate counts as 0
]


def test_the_privileged_paragraph_gives_the_mean_share_and_kl_and_says_it_imitates():
    text = teacher("privileged").report(TRAIN, "privileged (not pure RL)")
    assert text == (
        "**Teacher: privileged (not pure RL).** The all-failed groups (50.0% of the groups on average) were "
        "trained by self-distillation from an EMA teacher that read the env's privileged text (the expert's plan / "
        "the target product), mean symmetric KL 0.0133: in those groups this run imitates, it does not learn from "
        "reward alone. Samples of what the teacher read: distill_samples.jsonl."
    )


def test_the_hindsight_paragraph_gives_the_mean_gate():
    text = teacher("hindsight").report(TRAIN, "hindsight (no ground truth)")
    assert text == (
        "**Teacher: hindsight (no ground truth).** Every group got SEED's gated distillation term toward the "
        "choices made with a hindsight skill of its own trajectory in context (mean gate 0.400). Samples of the "
        "skills: distill_samples.jsonl."
    )
    assert "mean gate 0.000" in teacher("hindsight").report([], "h")  # no records: 0, not an error


def test_the_hindsight_teacher_refuses_a_policy_writer_outside_generate_mode():
    check = teacher("hindsight").check
    said = check(SimpleNamespace(skill_writer="policy", policy_mode="score"))
    assert said == (
        "skill_writer policy needs --policy-mode generate (the policy writes the skills); score mode uses the "
        "template writer"
    )
    assert check(SimpleNamespace(skill_writer="policy", policy_mode="generate")) is None
    assert check(SimpleNamespace(skill_writer="template", policy_mode="score")) is None


def test_labels_name_the_teacher_or_nothing():
    assert label_of({"distill": "privileged"}) == "privileged (not pure RL)"
    assert label_of({"distill": "hindsight", "skill_writer": "policy"}).startswith("hindsight")
    assert label_of({"distill": "none"}) is None and label_of({}) is None and label_of({"distill": None}) is None
    assert label_of({"distill": "not-loaded-here"}) is None


def test_a_spec_is_built_from_its_factory_or_the_path_of_one():
    made = []
    spec = TeacherSpec("probe", make=lambda cfg, policy, model: made.append((cfg, policy, model)) or "t", label=str)
    assert spec.build(1, 2, 3) == "t" and made == [(1, 2, 3)]
    mod = types.ModuleType("probe_factory_mod")
    mod.make = lambda cfg, policy, model: ("built", cfg)
    sys.modules["probe_factory_mod"] = mod
    try:
        assert TeacherSpec("probe", make="probe_factory_mod:make", label=str).build("c", None, None) == ("built", "c")
    finally:
        del sys.modules["probe_factory_mod"]


def test_registering_unregistering_and_the_names_it_refuses():
    spec = TeacherSpec("probe-t", make=lambda *a: None, label=lambda c: "probe")
    register_teacher(spec)
    try:
        assert register_teacher(spec) is spec  # the same spec again: accepted
        other = TeacherSpec("probe-t", make=lambda *a: None, label=lambda c: "other")
        with pytest.raises(ValueError, match="'probe-t' is registered already"):
            register_teacher(other)
        assert register_teacher(other, replace=True) is other and teacher("probe-t") is other
        assert not teacher_registry.is_builtin_teacher("probe-t") and teacher_registry.is_builtin_teacher("hindsight")
    finally:
        unregister_teacher("probe-t")
    assert "probe-t" not in teacher_registry.teacher_names()
    with pytest.raises(ValueError, match="teacher 'hindsight' is built in"):
        unregister_teacher("hindsight")
    with pytest.raises(ValueError, match="distill must be one of none, privileged, hindsight"):
        teacher("probe-t")
    for bad in ("", "none", "a+b", None):
        with pytest.raises(ValueError, match="a teacher's name is a non-empty string"):
            TeacherSpec(bad, make="x:y", label=str)  # type: ignore[arg-type]


def test_an_entry_point_group_is_loaded_once_and_a_broken_plugin_is_named_and_skipped(monkeypatch, capsys):
    loaded = []

    class EP:
        def __init__(self, name, fail):
            self.name, self.value, self.fail = name, f"pkg.{name}", fail

        def load(self):
            loaded.append(self.name)
            if self.fail:
                raise ImportError("no such thing")

    monkeypatch.setattr(plugins.importlib.metadata, "entry_points", lambda group: [EP("good", False), EP("bad", True)])
    monkeypatch.setattr(plugins, "_LOADED_GROUPS", set())
    plugins.load_entry_point_group("progpo.probe", "teacher")
    plugins.load_entry_point_group("progpo.probe", "teacher")  # once per process
    assert loaded == ["good", "bad"]
    err = capsys.readouterr().err
    assert err == "warning: teacher plug-in bad (pkg.bad) did not load: ImportError: no such thing\n"


def test_distill_modes_is_the_registry_now_and_an_unknown_name_is_an_attribute_error():
    assert teacher_registry.DISTILL_MODES == teacher_registry.teacher_names()
    with pytest.raises(AttributeError, match="module 'trainers.teachers.registry' has no attribute 'NOPE'"):
        teacher_registry.NOPE


def test_a_built_in_teachers_options_have_one_schema_for_the_flag_the_yaml_key_and_teacher_option():
    """``--distill-tau 0.1`` and ``--teacher-option tau=0.1`` spell one option of the privileged
    teacher's options dataclass; its factory trains with it; two values for it, an option it does
    not take, or a value out of its bounds are one line each."""
    from trainers.config import ConfigError, TrainConfig
    from trainers.teachers.options import HindsightOptions, PrivilegedOptions

    spec = teacher("privileged")
    assert spec.options_class() is PrivilegedOptions and teacher("hindsight").options_class() is HindsightOptions
    by_option = TrainConfig(distill="privileged", teacher_options={"tau": 0.1})
    by_flag = TrainConfig(distill="privileged", distill_tau=0.1)
    assert spec.option_values(by_option) == spec.option_values(by_flag) == PrivilegedOptions(tau=0.1, top_k=20)
    assert by_option.distill_tau == 0.05  # the flat field keeps its default; the option is read over it
    assert (
        spec.option_values(TrainConfig(distill="privileged", distill_tau=0.1, teacher_options={"tau": 0.1})).tau == 0.1
    )
    said = {
        "twice": dict(distill="privileged", distill_tau=0.2, teacher_options={"tau": 0.1}),
        "unknown": dict(distill="privileged", teacher_options={"tua": 1}),
        "bounds": dict(distill="privileged", teacher_options={"tau": 2.0}),
        "none": dict(teacher_options={"coef": 1}),
    }
    messages = {}
    for case, kwargs in said.items():
        with pytest.raises(ConfigError) as err:
            TrainConfig(**kwargs)
        messages[case] = str(err.value)
    assert (
        messages["twice"]
        == "--distill-tau 0.2 and --teacher-option tau=0.1 set one option twice with two values: keep one"
    )
    assert messages["unknown"] == "privileged has no option 'tua'; it takes tau, top_k"
    assert messages["bounds"] == "distill_tau must be <= 1.0, got 2.0"
    assert messages["none"].startswith("teacher option(s) coef given, but no teacher is set (--distill)")


def test_the_hindsight_teachers_options_reach_its_check_and_its_label():
    from trainers.config import ConfigError, TrainConfig
    from trainers.teachers import label_of

    cfg = TrainConfig(distill="hindsight", teacher_options={"coef": 0.5, "gate_beta": 2.0})
    assert teacher("hindsight").option_values(cfg).coef == 0.5 and cfg.distill_lambda == 0.01
    with pytest.raises(ConfigError, match="skill_writer policy needs --policy-mode generate"):
        TrainConfig(distill="hindsight", teacher_options={"skill_writer": "policy"})
    gen = TrainConfig(distill="hindsight", policy_mode="generate", teacher_options={"skill_writer": "policy"})
    assert label_of(gen.to_dict()) == "hindsight (policy-written skills, no ground truth)"
    assert label_of(TrainConfig(distill="hindsight").to_dict()) == "hindsight (no ground truth)"


def test_the_factories_train_with_the_options_given_either_way(monkeypatch):
    import trainers.teachers.hindsight as hindsight
    import trainers.teachers.privileged as privileged
    from trainers.config import TrainConfig

    seen = {}
    monkeypatch.setattr(privileged, "PrivilegedTeacher", lambda policy, model, **kw: seen.update(privileged=kw))
    monkeypatch.setattr(hindsight, "HindsightTeacher", lambda policy, model, writer, **kw: seen.update(hindsight=kw))
    privileged.make_privileged(TrainConfig(distill="privileged", teacher_options={"tau": 0.2, "top_k": 5}), None, None)
    hindsight.make_hindsight(
        TrainConfig(distill="hindsight", distill_gate_beta=3.0, teacher_options={"coef": 0.1}), None, None
    )
    assert seen == {"privileged": {"tau": 0.2, "top_k": 5}, "hindsight": {"coef": 0.1, "beta": 3.0}}
