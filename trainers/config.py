"""A run's configuration (:class:`TrainConfig`): its plug-ins and one section per stage
(:mod:`trainers.config_sections`), every field a CLI flag (:mod:`trainers.config_flags`) and a
YAML key (:mod:`trainers.config_yaml`), checked when it is made (:mod:`trainers.config_checks`).

Precedence: the sections' defaults < ``--config run.yaml`` < explicit CLI flags.

>>> cfg = TrainConfig(estimator="grpo", iterations=3)
>>> cfg.estimator, cfg.advantage.estimator, cfg.iterations
('grpo', 'grpo', 3)
>>> TrainConfig(estimator="ppo")
Traceback (most recent call last):
...
trainers.config_sections.ConfigError: estimator must be one of grpo, rloo, gigpo, planpo, hgpo, progpo-grpo, progpo-rloo, progpo-gigpo, progpo-planpo, progpo-hgpo, got 'ppo' (a plug-in's is known once its module loads: --plugin)
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

from progpo_envs.guard import check_import_names
from trainers.advantages import AdvantageConfig
from trainers.advantages.registry import estimator as registered_estimator
from trainers.advantages.registry import flat_options
from trainers.config_checks import lr_warning, spelling_conflict, validate
from trainers.config_sections import (
    ENVS,
    SETTINGS,
    AdvantageSettings,
    BudgetSettings,
    ConfigError,
    OutputSettings,
    PolicySettings,
    PPOSettings,
    RolloutSettings,
    TaskSettings,
    TeacherSettings,
    WarmStartSettings,
    closed_choices,
    flat_fields,
    owner_of,
)
from trainers.config_yaml import RENAMED, SECTION_OF, SECTIONS, coerce_value, flatten_sections, load_yaml, upgrade_names
from trainers.envs import ENV_TABLE
from trainers.rollouts.tree_rollout import TreeConfig
from trainers.teachers.registry import label_of

try:
    from agents.backends.base import SamplingConfig
    from agents.policy_base import PolicyOptions
finally:  # trainers itself does not check `agents` (the verl plugin loads beside any), its users do:
    check_import_names(("agents", "wrappers"))  # a shadowing package, named in one line

__all__ = [  # the names config users have imported from here, wherever they are defined now
    "EARLIER_VALUES",
    "ENVS",
    "RENAMED",
    "SECTIONS",
    "ConfigError",
    "TrainConfig",
    "closed_choices",
    "config_fields",
    "flatten_sections",
    "load_yaml",
    "lr_warning",
    "spelling_conflict",
    "upgrade_names",
]


_SECTION_NAMES = frozenset(name for name, _ in SETTINGS)


#: fields added after runs were recorded, with the value a config written before them meant
#: (a checkpoint or a recorded config without ``batch_decisions`` ran one pass per decision)
EARLIER_VALUES: dict[str, Any] = {"batch_decisions": "off"}


@dataclass(init=False)
class TrainConfig:
    """Everything a run needs: the plug-ins it loads, then one section per stage
    (:mod:`trainers.config_sections`: ``task``, ``policy``, ``warm``, ``advantage``, ``collection``,
    ``teacher``, ``budget``, ``ppo``, ``outputs``). Each section's field is a CLI flag
    (``--max-steps``) and a YAML key (``max_steps``), and is read and set on the config by its own
    name too: ``cfg.max_steps`` is ``cfg.task.max_steps``, ``TrainConfig(max_steps=8)`` and
    ``dataclasses.replace(cfg, max_steps=8)`` set it in its section.

    With no arguments, ``python -m trainers.progpo`` trains a tiny Qwen2-architecture model
    (``tiny-128x2``, built offline) on the embedded ``easy-train`` ALFWorld games and evaluates on
    the held-out ``easy-valid`` games: a behaviour-cloning warm start from the searching expert
    (``warm_start: bc``), an evaluation at iteration 0, ProGPO(GiGPO) iterations, the final evaluation
    and a report whose headline is the RL gain with a 95% bootstrap interval. What it measures is in
    ``benchmarks/README.md``; paper-scale runs override model / splits / steps / mode (``configs/``).
    ``python -m trainers.progpo --help`` lists the fields by section with their help.
    """

    plugins: list[str] = field(
        default_factory=list,
        metadata={
            "help": "modules or .py files imported first, each registering estimators or teachers of its own "
            "(flag: --plugin, repeated); installed plug-ins load through the progpo.estimators and "
            "progpo.teachers entry points",
            "group": "what to train",
        },
    )

    task: TaskSettings = field(default_factory=TaskSettings, metadata={"section": True})
    policy: PolicySettings = field(default_factory=PolicySettings, metadata={"section": True})
    warm: WarmStartSettings = field(default_factory=WarmStartSettings, metadata={"section": True})
    advantage: AdvantageSettings = field(default_factory=AdvantageSettings, metadata={"section": True})
    collection: RolloutSettings = field(default_factory=RolloutSettings, metadata={"section": True})
    teacher: TeacherSettings = field(default_factory=TeacherSettings, metadata={"section": True})
    budget: BudgetSettings = field(default_factory=BudgetSettings, metadata={"section": True})
    ppo: PPOSettings = field(default_factory=PPOSettings, metadata={"section": True})
    outputs: OutputSettings = field(default_factory=OutputSettings, metadata={"section": True})

    def __init__(self, **values: Any) -> None:
        """Sections by name (``ppo=PPOSettings(...)``), fields by their own names (``lr=1e-4``,
        applied over the sections given), ``plugins``; then :meth:`validate`."""
        unknown = sorted(k for k in values if k != "plugins" and k not in _SECTION_NAMES and owner_of(k) is None)
        if unknown:
            raise TypeError(f"TrainConfig got unexpected keyword argument(s) {', '.join(unknown)}")
        object.__setattr__(self, "plugins", list(values.get("plugins", [])))
        for name, cls in SETTINGS:
            given = values.get(name)
            section = given if given is not None else cls()
            own = {k: v for k, v in values.items() if owner_of(k) == name}
            object.__setattr__(self, name, dataclasses.replace(section, **own) if own else section)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        """A section's field by its own name (``cfg.lr``: ``cfg.ppo.lr``)."""
        owner = owner_of(name)
        section = self.__dict__.get(owner) if owner is not None else None
        if section is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(section, name)

    def __setattr__(self, name: str, value: Any) -> None:
        """A section's field set by its own name replaces that (frozen) section."""
        owner = owner_of(name)
        if owner is None:
            object.__setattr__(self, name, value)
        else:
            object.__setattr__(self, owner, dataclasses.replace(getattr(self, owner), **{name: value}))

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` on the first invalid value (:func:`trainers.config_checks.validate`)."""
        validate(self)

    @property
    def trackers(self) -> tuple[str, ...]:
        """The trackers ``report_to`` names (``tensorboard`` left out with ``tensorboard: false``)."""
        items = [x.strip() for x in str(self.report_to).split(",") if x.strip() and x.strip() != "none"]
        return tuple(x for x in dict.fromkeys(items) if x != "tensorboard" or self.tensorboard)

    def base_option_values(self, base: str | None = None) -> dict[str, Any]:
        """The options of ``base`` (default: the configured one) by name: its flat fields
        (``hgpo_depth``), then, for the configured base, :attr:`estimator_options` over them."""
        spec = registered_estimator(base or self.estimator)
        values = {f.name: getattr(self, flag) for flag, _, f in flat_options((spec.name,)) if hasattr(self, flag)}
        if base is None or spec.name == registered_estimator(self.estimator).name:
            values.update(self.estimator_options)
        return values

    def advantage_config(self) -> AdvantageConfig:
        """The estimator's options (:class:`trainers.advantages.AdvantageConfig`) from this config."""
        return AdvantageConfig(
            estimator=self.estimator,
            gamma=self.gamma,
            omega=self.omega,
            lam=self.progress_lambda,
            norm=self.group_norm,
            coverage=self.coverage,
            scope=self.scope,  # type: ignore[arg-type]  # str fields checked against their Literal choices in validate()
            tau_r=self.tau_r,
            tau_p=self.tau_p,
            gate=self.progress_gate,  # type: ignore[arg-type]  # as above
            shuffle_coverage=self.shuffle_coverage,
            options=self.base_option_values(),
        )

    def tree_config(self, seed: int = 0) -> TreeConfig:
        """The tree rollout's options (:class:`trainers.rollouts.tree_rollout.TreeConfig`); ``seed`` seeds the random scorer."""
        # each TreeConfig field is this config's tree_<field>
        options = {f.name: getattr(self, f"tree_{f.name}") for f in fields(TreeConfig) if f.name != "seed"}
        return TreeConfig(**options, seed=seed)

    def policy_options(self) -> PolicyOptions:
        """The policy's options (:class:`agents.policy_base.PolicyOptions`) from this config."""
        sampling = SamplingConfig(
            temperature=self.temperature,
            top_p=self.top_p,
            max_new_tokens=self.max_new_tokens,
            min_new_tokens=self.min_new_tokens,
        )
        return PolicyOptions(
            fmt=self.answer_format,
            history_k=self.history_k,
            sampling=sampling,
            invalid_penalty=self.invalid_penalty,
            score_norm=self.score_norm,
            avoid_repeats=self.avoid_repeats,
            batch_decisions=self.batch_decisions != "off",
            packing="tree" if self.batch_decisions == "tree" else "rows",
            batch_tokens=self.micro_batch_tokens,
            logit_chunk=self.logit_chunk_tokens,
        )

    @property
    def distill_label(self) -> str | None:
        """The teacher's label (``"privileged (not pure RL)"``, ``"hindsight (no ground truth)"``), None without one."""
        return label_of(self.to_dict())

    @property
    def resolved_bc_micro_batch(self) -> int:
        """Decisions per warm-start pass: ``bc_micro_batch_size``, or with 0 the whole step for a tiny
        model (whose CPU figures were recorded that way) and ``micro_batch_size`` for any other."""
        if self.bc_micro_batch_size:
            return int(self.bc_micro_batch_size)
        return 0 if str(self.model).startswith("tiny") else int(self.micro_batch_size)

    @property
    def resolved_step_timeout(self) -> float | str:
        """``step_timeout`` for :class:`~wrappers.GroupVectorEnv`: ``"auto"`` (the env's own) when 0."""
        return float(self.step_timeout) if self.step_timeout > 0 else "auto"

    @property
    def resolved_warm_start(self) -> str:
        """``warm_start`` with ``auto`` resolved: bc for ALFWorld in score mode, else none."""
        if self.warm_start != "auto":
            return self.warm_start
        return "bc" if (ENV_TABLE[self.env].auto_warm_start and self.policy_mode == "score") else "none"

    @property
    def resolved_template(self) -> str:
        """``template`` with ``auto`` resolved (alfworld-notes for ALFWorld in score mode, else the env's own)."""
        if self.template != "auto":
            return self.template
        info = ENV_TABLE[self.env]
        return info.score_template if self.policy_mode == "score" else info.generate_template

    @property
    def resolved_eval_extra_split(self) -> str | None:
        """``eval_extra_split`` with ``auto`` resolved: the second held-out split (None when there is none)."""
        if self.eval_extra_split == "auto":
            extra = ENV_TABLE[self.env].extra_eval_split
            return extra if extra is not None and self.splits[1] != extra else None
        return None if self.eval_extra_split in ("", "none") else self.eval_extra_split

    @property
    def splits(self) -> tuple[str, str]:
        """(train split, eval split) with ``auto`` resolved for the env."""
        info = ENV_TABLE[self.env]
        return (
            info.train_split if self.train_split == "auto" else self.train_split,
            info.eval_split if self.eval_split == "auto" else self.eval_split,
        )

    def to_dict(self) -> dict[str, Any]:
        """Every field, flat (a checkpoint's config, the comparisons between configs)."""
        return {f.name: copy.deepcopy(getattr(self, f.name)) for f in config_fields()}

    def to_sections(self) -> dict[str, Any]:
        """Every field, the sectioned ones in their sections (:data:`SECTIONS`): the form of the
        ``config.yaml`` a run writes, which ``--config`` reads back as it is.

        >>> TrainConfig(estimator="grpo").to_sections()["advantage"]["estimator"]
        'grpo'
        """
        flat = self.to_dict()
        out: dict[str, Any] = {k: v for k, v in flat.items() if k not in SECTION_OF}
        for section, keys in SECTIONS.items():
            out[section] = {key: flat[name] for key, name in keys.items()}
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "config", flat: bool = False) -> "TrainConfig":
        """A config from a YAML mapping, in sections (:data:`SECTIONS`) or, with ``flat`` (a run's
        own ``config.yaml``, a checkpoint's), in fields alone; a renamed field's old name, and a
        sectioned field at the top level of a sectioned file, are read with a deprecation line."""
        known = {f.name: f for f in config_fields()}
        bad = [k for k in data if not isinstance(k, str)]
        if bad:
            raise ConfigError(f"{source}: keys must be field names, got {', '.join(repr(k) for k in bad)}")
        data = upgrade_names(flatten_sections(data, source, warn=not flat), source)
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}; run with --help for the list")
        clean: dict[str, Any] = {}
        for name, value in data.items():
            clean[name] = coerce_value(
                name, value, known[name].default if known[name].default is not dataclasses.MISSING else None, source
            )
        return cls(**clean)


def config_fields() -> list[dataclasses.Field[Any]]:
    """Every field of a config by its own name, in order: ``plugins``, then each section's
    (:func:`trainers.config_sections.flat_fields`): its flags, YAML keys and ``config.yaml`` lines."""
    return [next(f for f in fields(TrainConfig) if f.name == "plugins"), *flat_fields()]
