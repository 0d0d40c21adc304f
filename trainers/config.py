"""Training configuration: one dataclass, loadable from YAML, every field a CLI flag.

Precedence: dataclass defaults < ``--config run.yaml`` < explicit CLI flags.

>>> cfg, extra = parse_args(["--estimator", "grpo", "--iterations", "3"])
>>> cfg.estimator, cfg.iterations, extra.resume
('grpo', 3, None)
>>> TrainConfig(estimator="ppo")
Traceback (most recent call last):
...
trainers.config.ConfigError: estimator must be one of grpo, rloo, gigpo, planpo, hgpo, progpo-grpo, progpo-rloo, progpo-gigpo, progpo-planpo, progpo-hgpo, got 'ppo' (a plug-in's is known once its module loads: --plugin)
"""

# Over 500 lines: every field of a run with its flag and help text, the YAML sections and their compatibility
# layers, and the validation (one flat class, which the stages still read whole).
from __future__ import annotations

import argparse
import dataclasses
import difflib
import importlib.util
import math
import re
import sys
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, NoReturn, get_args, get_origin, get_type_hints

from progpo_envs.guard import check_import_names
from trainers.advantages import AdvantageConfig
from trainers.advantages.options import yaml11_float
from trainers.advantages.registry import estimator as registered_estimator
from trainers.advantages.registry import estimator_names, exclusive_conflict, flat_options
from trainers.envs import ENV_TABLE, STATE_KEYS
from trainers.plugins import load_plugins, resolved
from trainers.rollouts.tree_rollout import SCORERS, TreeConfig
from trainers.strict_yaml import StrictYAMLError, load_strict
from trainers.teachers.registry import SKILL_WRITERS, is_builtin_teacher, label_of, reads_privileged, teacher_names
from trainers.teachers.registry import teacher as registered_teacher
from wrappers.errors import UserError
from wrappers.signals import TAU_P, TAU_R

try:
    from agents.backends.base import SamplingConfig
    from agents.models import tiny_spec
    from agents.parsing import FORMATS
    from agents.policy_base import PolicyOptions
finally:  # trainers itself does not check `agents` (the verl plugin loads beside any), its users do:
    check_import_names(("agents", "wrappers"))  # a shadowing package, named in one line

__all__ = [
    "ConfigError",
    "SECTIONS",
    "TrainConfig",
    "flatten_sections",
    "load_yaml",
    "lr_warning",
    "parse_args",
    "ENVS",
]

ENVS = tuple(ENV_TABLE)
ROLLOUTS = ("flat", "tree")

# Closed choices: each field below is typed with one of these, its value is checked against it
# (TrainConfig.validate) and its flag offers exactly these (build_parser). The tuples defined in
# other modules stay the source of their choices.
Env = Literal[ENVS]  # type: ignore[valid-type]  # a Literal of a tuple defined where its choices live: valid at run time, not statically
StateKey = Literal[STATE_KEYS]  # type: ignore[valid-type]  # as above
Scorer = Literal[SCORERS]  # type: ignore[valid-type]  # as above
SkillWriter = Literal[SKILL_WRITERS]  # type: ignore[valid-type]  # as above
AnswerFormat = Literal[FORMATS]  # type: ignore[valid-type]  # as above
RolloutKind = Literal[ROLLOUTS]  # type: ignore[valid-type]  # as above
Backend = Literal["transformers", "vllm"]
PolicyMode = Literal["score", "generate"]
ScoreNorm = Literal["sum", "mean"]
WarmStart = Literal["auto", "bc", "none"]
LrSchedule = Literal["constant", "cosine"]
GroupNorm = Literal["mean_std", "mean"]
Coverage = Literal["rate", "count"]
Scope = Literal["episode", "group"]
ProgressGate = Literal["all_failed", "always"]
EnvBackend = Literal["sync", "async", "ray"]
DistStrategy = Literal["ddp", "fsdp2"]
LossAgg = Literal["token-mean", "traj-mean"]
OnOff = Literal["on", "off"]
BatchDecisions = Literal["tree", "on", "off"]
Device = Literal["auto", "cpu", "cuda"]
Decode = Literal["auto", "loop", "static"]
RolloutDtype = Literal["auto", "fp32", "bf16"]

#: fields renamed for clarity: the old name -> the new one. The old names still work in YAML
#: files and as CLI flags for one release, each with a one-line deprecation notice.
RENAMED = {
    "init": "warm_start",
    "init_weights": "weights_file",
    "init_std": "tiny_init_std",
    "progress": "progress_bars",
    "extra": "notes",
    "fmt": "answer_format",
    "lam": "progress_lambda",
    "norm": "group_norm",
}


#: YAML sections, each the fields of one part of a method: section -> {its key: the TrainConfig
#: field}. A sectioned field written at the top level is read for one more release, with a
#: deprecation line; the flags stay flat (``--gamma``, ``--tree-branches``, ``--distill-tau``).
SECTIONS: dict[str, dict[str, str]] = {
    "advantage": {
        **{
            name: name
            for name in (
                "estimator",
                "gamma",
                "omega",
                "progress_lambda",
                "group_norm",
                "coverage",
                "state_key",
                "scope",
                "tau_r",
                "tau_p",
                "progress_gate",
                "shuffle_coverage",
                *(flag for flag, _, _ in flat_options()),
            )
        },
        "options": "estimator_options",
    },
    "tree": {
        name.removeprefix("tree_"): name
        for name in (
            "tree_branches",
            "tree_interval",
            "tree_children",
            "tree_top_k",
            "tree_prune_margin",
            "tree_repeat_limit",
            "tree_budget",
            "tree_scorer",
            "tree_loop_penalty",
        )
    },
    "distill": {
        "mode": "distill",
        "skill_writer": "skill_writer",
        "tau": "distill_tau",
        "lambda": "distill_lambda",
        "gate_beta": "distill_gate_beta",
        "top_k": "distill_top_k",
        "options": "teacher_options",
    },
    "ppo": {
        name: name
        for name in (
            "lr",
            "weight_decay",
            "clip_eps",
            "kl_coef",
            "entropy_coef",
            "max_grad_norm",
            "loss_agg",
            "lr_warmup_iterations",
            "ppo_epochs",
            "num_minibatches",
            "micro_batch_size",
            "micro_batch_tokens",
            "batch_decisions",
            "recompute_old_logprobs",
            "skip_zero_advantage",
            "gradient_checkpointing",
            "logit_chunk_tokens",
        )
    },
}
#: a sectioned field -> (its section, its key there)
SECTION_OF: dict[str, tuple[str, str]] = {f: (sec, key) for sec, keys in SECTIONS.items() for key, f in keys.items()}


def _is_field(name: str) -> bool:
    """Whether ``name`` is a :class:`TrainConfig` field (``distill`` is one, and a section too)."""
    return name in {f.name for f in fields(TrainConfig)}


def flatten_sections(data: dict[str, Any], source: str = "config", warn: bool = True) -> dict[str, Any]:
    """``data`` with its sections (:data:`SECTIONS`) spread into fields; a sectioned field at the top
    level is kept, with one deprecation line on stderr when ``warn``. A field set twice, or a key
    a section does not have, is an error (before any line is printed).

    >>> flatten_sections({"advantage": {"estimator": "gigpo"}, "tree": {"branches": 2}, "seed": 3})
    {'estimator': 'gigpo', 'tree_branches': 2, 'seed': 3}
    """

    out: dict[str, Any] = {}
    flat_sectioned: list[str] = []
    for key, value in data.items():
        if key in SECTIONS and not isinstance(value, dict) and not _is_field(key):
            raise ConfigError(
                f"{source}: {key}: is a section, a mapping of its keys (e.g. {key}: "
                f"{{{next(iter(SECTIONS[key]))}: {value!r}}}); it takes {', '.join(SECTIONS[key])}"
            )
        if key in SECTIONS and isinstance(value, dict):
            entries = []
            for sub, sub_value in value.items():
                name = SECTIONS[key].get(sub) if isinstance(sub, str) else None
                if name is None:
                    home = [f"{sec}: {{{sub}: ...}}" for sec, keys in SECTIONS.items() if sec != key and sub in keys]
                    close = difflib.get_close_matches(str(sub), list(SECTIONS[key]), n=1, cutoff=0.6)
                    raise ConfigError(
                        f"{source}: {key}: has no key {sub!r}"
                        + (
                            f"; {sub} goes under {' or '.join(home)}"
                            if home
                            else f"; did you mean {close[0]}?"
                            if close
                            else f"; it takes {', '.join(SECTIONS[key])}"
                        )
                    )
                entries.append((name, sub_value))
        else:
            entries = [(key, value)]
            if isinstance(key, str) and key in SECTION_OF:  # (an old name gets its own line)
                flat_sectioned.append(key)
        for name, v in entries:
            if name in out:
                raise ConfigError(f"{source}: {name} is set twice (in its section and at the top level); keep one")
            out[name] = v
    for key in flat_sectioned if warn else ():
        section, sub = SECTION_OF[key]
        print(
            f"deprecated: {source}: {key}: at the top level is now {section}: {{{sub}: ...}} (read there for one "
            "more release)",
            file=sys.stderr,
        )
    return out


def upgrade_names(
    data: dict[str, Any], source: str = "config", warn: bool = True, spell: Callable[[str], str] = str
) -> dict[str, Any]:
    """``data`` with every renamed field under its new name (``RENAMED``); one deprecation line on
    stderr per old name when ``warn`` (``spell`` writes a name as the user wrote it: a YAML key, a
    flag). Both names at once is an error.

    >>> upgrade_names({"init": "bc", "lr": 0.1}, warn=False)
    {'warm_start': 'bc', 'lr': 0.1}
    """
    for old in (k for k in data if k in RENAMED):
        new = RENAMED[old]
        if new in data:
            raise ConfigError(
                f"{source}: both {spell(old)} and {spell(new)} are set; {spell(old)} is the old name of "
                f"{spell(new)}: keep {spell(new)}"
            )
        if warn:
            print(
                f"deprecated: {source}: {spell(old)} is now {spell(new)} (the old name is read for one more release)",
                file=sys.stderr,
            )
    return {RENAMED.get(k, k): v for k, v in data.items()}


_POLICY = PolicyOptions()  # the policy's defaults are defined once, by agents.policy_base


class ConfigError(UserError, ValueError):
    """A configuration value or file is invalid; the message says which and why."""


def _opt(default: Any, help: str, group: str) -> Any:  # argparse's word
    """A :class:`TrainConfig` field: its default, the one line ``--help`` prints, its ``--help`` section."""
    return field(default=default, metadata={"help": help, "group": group})


#: fields added after runs were recorded, with the value a config written before them meant
#: (a checkpoint or a recorded config without ``batch_decisions`` ran one pass per decision)
EARLIER_VALUES: dict[str, Any] = {"batch_decisions": "off"}
#: the trackers ``report_to`` takes (TRL's names)
REPORT_TO = ("tensorboard", "wandb", "none")


def _with_estimator_options(cls: type) -> type:
    """``cls`` with a field for each built-in base's own options (``hgpo_depth``, ``success_threshold``),
    read from the estimator registry, after ``shuffle_coverage``: each flag, YAML key and
    ``--help`` line of a base's options comes from its options dataclass."""
    annotations: dict[str, Any] = {}
    for name, hint in cls.__annotations__.items():
        annotations[name] = hint
        if name != "shuffle_coverage":
            continue
        for flag, spec, f in flat_options():
            choices = f.metadata.get("choices")
            annotations[flag] = Literal[choices] if choices else type(f.default)  # type: ignore[valid-type]  # a Literal of the option's choices, built at run time
            setattr(
                cls,
                flag,
                field(
                    default=f.default,
                    metadata={
                        "help": f"{spec.name}: {f.metadata['help']}",
                        "group": "estimator",
                        "option_of": spec.name,
                    },
                ),
            )
    cls.__annotations__ = annotations
    return cls


# validate()'s ranges, by field: sizes (>= 1), counts (>= 0), and rates and coefficients (finite, >= 0)
POSITIVE_INTS = (
    "max_steps iterations num_groups group_size ppo_epochs num_minibatches micro_batch_size micro_batch_tokens "
    "max_new_tokens lora_r bc_steps bc_batch_size gen_batch_size tree_branches tree_interval tree_children "
    "tree_top_k tree_repeat_limit distill_top_k eval_streams rollout_streams max_gen_batches"
).split()
NONNEGATIVE_INTS = (
    "eval_every eval_episodes seed torch_threads bc_episodes bc_micro_batch_size lr_warmup_iterations "
    "eval_extra_episodes save_every min_new_tokens tree_budget budget_episodes"
).split()
NONNEGATIVE_NUMBERS = (
    "lr clip_eps kl_coef entropy_coef max_grad_norm invalid_penalty tau_r tau_p progress_lambda omega temperature "
    "weight_decay bc_lr step_timeout ray_num_cpus tiny_init_std tree_prune_margin tree_loop_penalty distill_tau "
    "distill_lambda distill_gate_beta"
).split()


@dataclass
@_with_estimator_options
class TrainConfig:
    """Everything a run needs; each field is a CLI flag (``--max-steps``) and a YAML key (``max_steps``).

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
    # what to train
    env: Env = _opt("alfworld", "alfworld | webshop | rooms (a toy text env for tests)", "what to train")
    train_split: str = _opt("auto", "auto: alfworld easy-train, webshop train", "what to train")
    eval_split: str = _opt("auto", "auto: alfworld easy-valid, webshop test", "what to train")
    max_steps: int = _opt(20, "per episode (the benchmarks use 50 for ALFWorld, 15 for WebShop)", "what to train")
    model: str = _opt("tiny-128x2", "tiny-<H>x<L> | tiny | smollm2 | local path | hub name", "what to train")
    tiny_init_std: float = _opt(
        0.0,
        "tiny-* models only: std of their random weights (0: transformers' 0.02; "
        "~1/sqrt(hidden) clones faster, benchmarks/README.md)",
        "what to train",
    )
    # policy (agents/: prompt, answer format, sampling)
    backend: Backend = _opt("transformers", "transformers | vllm", "policy")
    policy_mode: PolicyMode = _opt("score", "score: rank admissible actions; generate: free text", "policy")
    answer_format: AnswerFormat = _opt(
        _POLICY.fmt, "generate mode's answer format: action | think_action | raw", "policy"
    )
    template: str = _opt(
        "auto",
        "prompt template: auto (alfworld-notes for ALFWorld in score mode, else the env's), a name, or a YAML path",
        "policy",
    )
    score_norm: ScoreNorm = _opt(
        _POLICY.score_norm,
        "score mode: rank commands by the sum or the mean of their token log probabilities",
        "policy",
    )
    avoid_repeats: bool = _opt(
        _POLICY.avoid_repeats,
        "score mode: drop commands already taken from the same observation (agents.policy_base.PolicyOptions)",
        "policy",
    )
    history_k: int = _opt(_POLICY.history_k, "(observation, action) pairs in the prompt (paper: 2)", "policy")
    temperature: float = _opt(
        1.0, "sampling temperature of generate mode and of score mode's softmax over commands", "policy"
    )
    top_p: float = _opt(1.0, "nucleus sampling mass in (0, 1] (1: off)", "policy")
    max_new_tokens: int = _opt(48, "generate mode: tokens per answer at most", "policy")
    gen_batch_size: int = _opt(
        32,
        "generate mode, transformers backend: answers decoded together (a GPU takes a whole iteration's 128+)",
        "policy",
    )
    decode: Decode = _opt(
        "auto",
        "generate mode, transformers backend: auto (static on a GPU, loop on CPU) | loop: the "
        "written-out decoding loop over a growing cache | static: transformers' StaticCache "
        "in batch and length buckets, the decode step compiled once per bucket on a GPU (CUDA "
        "graphs); both draw the same samples",
        "policy",
    )
    rollout_dtype: RolloutDtype = _opt(
        "auto",
        "generate mode, transformers backend: the weights answers are sampled "
        "from: auto (bf16 on a GPU with --bf16, else fp32) | fp32: the trained "
        "weights | bf16: a bf16 copy synced after each optimizer step (the "
        "old log-probs are then recomputed by the trainer)",
        "policy",
    )
    min_new_tokens: int = _opt(
        0,
        "generate mode: EOS / stop strings end an answer only from this length on (= "
        "max_new_tokens: fixed-length answers, for speed measurements)",
        "policy",
    )
    invalid_penalty: float = _opt(
        _POLICY.invalid_penalty,
        "subtracted from the advantage of a step whose answer did not parse into a command",
        "policy",
    )
    # warm start (before iteration 0's evaluation; RL's gain is measured from there)
    warm_start: WarmStart = _opt(
        "auto", "auto: bc for ALFWorld in score mode, else none | bc (clone the env's expert) | none", "warm start"
    )
    bc_steps: int = _opt(
        60,
        "AdamW steps of behaviour cloning from the searching expert (short on purpose: 250 leave"
        " RL little to add on easy, benchmarks/README.md)",
        "warm start",
    )
    bc_batch_size: int = _opt(16, "decisions per behaviour-cloning step", "warm start")
    bc_micro_batch_size: int = _opt(
        0,
        "decisions per forward and backward pass of a behaviour cloning step, their "
        "gradients summed (bounds the warm start's memory); 0: the whole step in one "
        "pass for the tiny models, micro_batch_size for any other",
        "warm start",
    )
    bc_lr: float = _opt(2e-3, "AdamW learning rate of behaviour cloning", "warm start")
    bc_lr_schedule: LrSchedule = _opt("constant", "constant | cosine (decays to 0 over bc_steps)", "warm start")
    bc_episodes: int = _opt(0, "expert episodes on train_split to clone (0: each task once)", "warm start")
    weights_file: str = _opt(
        "", "a torch state_dict file (e.g. a saved warm start) loaded into the model before anything else", "warm start"
    )
    # estimator (trainers/advantages/)
    estimator: str = _opt(
        "progpo-gigpo",
        "advantage estimator: a registered base (--help lists them; --plugin adds "
        "more) or progpo-<base> (all-failed groups: ProGPO's progress term)",
        "estimator",
    )
    gamma: float = _opt(
        0.95, "discount of the step returns of GiGPO and HGPO (and of ProGPO's first-visit returns)", "estimator"
    )
    omega: float = _opt(
        1.0,
        "weight of the step-level term (GiGPO's anchor term, HGPO's history term): A = A^E + omega * A^S",
        "estimator",
    )
    progress_lambda: float = _opt(
        1.0, "ProGPO's lambda: scale of the progress advantage in all-failed groups", "estimator"
    )
    group_norm: GroupNorm = _opt(
        "mean_std", "group normalisation: mean_std ((x - mean) / (std + eps)) | mean (x - mean)", "estimator"
    )
    coverage: Coverage = _opt("rate", "ProGPO's progress P: rate ((D - 1) / T) | count (D - 1)", "estimator")
    state_key: StateKey = _opt(
        "canonical",
        "state identity of first-visit coverage: canonical (the env's canonicalizer) |"
        " exact (distinct raw observation strings, the paper's D)",
        "estimator",
    )
    scope: Scope = _opt(
        "episode", "first visit counted per episode | per group (a state counts once in the whole group)", "estimator"
    )
    tau_r: float = _opt(TAU_R, "success threshold: a group is all-failed when every outcome < tau_r", "estimator")
    tau_p: float = _opt(
        TAU_P, "ProGPO's gate: the progress term is 0 when std of coverage in the group < tau_p", "estimator"
    )
    progress_gate: ProgressGate = _opt(
        "all_failed", "all_failed (ProGPO) | always (control: progress term added in every group)", "estimator"
    )
    shuffle_coverage: bool = _opt(False, "control: permute coverage within each all-failed group", "estimator")
    estimator_options: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "the estimator's own options by name, e.g. a plug-in's (YAML: advantage: {options: {name: value}}; "
            "flag: --estimator-option NAME=VALUE, repeated); a built-in base's options are flags of their own "
            "(--hgpo-depth)",
            "group": "estimator",
        },
    )
    # (each built-in base's own options are fields here too, read from the registry: _with_estimator_options)
    # rollout (trainers/rollouts/rollout.py, trainers/rollouts/tree_rollout.py)
    rollout: RolloutKind = _opt(
        "flat",
        "flat: G independent episodes per task | tree: grow each task's group as a tree, "
        "branching from the partial trajectories the tree scorer ranks highest (forks by "
        "replay; the leaves are the group)",
        "rollout",
    )
    tree_branches: int = _opt(4, "tree: branches started per task (B0 <= group_size)", "rollout")
    tree_interval: int = _opt(4, "tree: decisions of every branch between scoring rounds (K)", "rollout")
    tree_children: int = _opt(2, "tree: children that replace an expanded branch (M)", "rollout")
    tree_top_k: int = _opt(2, "tree: best-scored branches expanded per round", "rollout")
    tree_prune_margin: float = _opt(
        0.5, "tree: a branch scoring below the round's median minus this is pruned (kept as a failed leaf)", "rollout"
    )
    tree_repeat_limit: int = _opt(6, "tree: a branch that took one action this many times is pruned", "rollout")
    tree_budget: int = _opt(
        0, "tree: policy decisions per tree at most (0: group_size x max_steps, the flat rollout's cap)", "rollout"
    )
    tree_scorer: Scorer = _opt(
        "coverage",
        "tree: coverage (the partial first-visit coverage rate minus a loop penalty) | random (the control)",
        "rollout",
    )
    tree_loop_penalty: float = _opt(0.5, "tree, coverage scorer: weight of the repeated-action rate", "rollout")
    dynamic_sampling: bool = _opt(
        False,
        "drop the groups whose outcomes are all equal and sample more generation batches of "
        "num_groups x group_size until num_groups groups are kept (DAPO's dynamic sampling, verl's "
        "algorithm.filter_groups); flat rollouts",
        "rollout",
    )
    max_gen_batches: int = _opt(
        10,
        "dynamic sampling: generation batches an iteration draws at most; short of num_groups kept "
        "groups it trains on those it kept (the record says so: dynamic/groups_kept)",
        "rollout",
    )
    budget_episodes: int = _opt(
        0,
        "end the run once it has sampled this many episodes (budget/episodes, dropped ones included; "
        "0: no budget, iterations alone): no generation batch starts past it, and that iteration is "
        "the last, evaluated as such",
        "rollout",
    )
    # teacher (trainers/teachers/): a distillation loss beside the RL loss
    distill: str = _opt(
        "none",
        " | ".join(
            [
                "none (RL alone)",
                *(f"{name} ({registered_teacher(name).help})" for name in teacher_names()[1:]),
                "a plug-in's (--plugin)",
            ]
        ),
        "teacher",
    )
    teacher_options: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "help": "a plug-in teacher's own options by name, read by its factory (YAML: distill: {options: {name: "
            "value}}; flag: --teacher-option NAME=VALUE, repeated)",
            "group": "teacher",
        },
    )
    skill_writer: SkillWriter = _opt(
        "template",
        "hindsight: who writes the skills: template (sentences from the trajectory "
        "alone, no ground truth) | policy (generate mode: the policy writes them)",
        "teacher",
    )
    distill_tau: float = _opt(0.05, "privileged: EMA rate of the teacher after each optimizer step", "teacher")
    distill_lambda: float = _opt(0.01, "hindsight: weight of the gated distillation term beside the RL loss", "teacher")
    distill_gate_beta: float = _opt(5.0, "hindsight: gate g = sigmoid(beta * (l_skill - l_theta))", "teacher")
    distill_top_k: int = _opt(
        20, "privileged, generate mode: the teacher's top-k tokens compared per position", "teacher"
    )
    # budget
    iterations: int = _opt(12, "RL iterations (rollout + advantages + update)", "budget")
    num_groups: int = _opt(8, "B tasks per iteration", "budget")
    group_size: int = _opt(8, "G trajectories per task", "budget")
    env_backend: EnvBackend = _opt(
        "sync",
        "sync: members stepped in this process | async: one process per member, a crashed"
        " engine is restarted | ray: members as Ray actors on a Ray cluster (RAY_ADDRESS)",
        "budget",
    )
    ray_num_cpus: float = _opt(1.0, "env_backend ray: CPUs each member's actor reserves (fractions allowed)", "budget")
    dist_strategy: DistStrategy = _opt(
        "ddp",
        "under torchrun / accelerate launch: ddp (replicated weights, gradients all-"
        "reduced) | fsdp2 (GPU: weights sharded)",
        "budget",
    )
    step_timeout: float = _opt(
        0.0,
        "seconds one env step may take before it counts as a crash (episode truncated, "
        "worker restarted); 0: the env's own (ALFWorld 120, WebShop 60, else 600)",
        "budget",
    )
    seed: int = _opt(0, "seed of the model draw, the warm start, the task schedule and the sampling", "budget")
    # PPO update
    lr: float = _opt(
        3e-4, "tiny models from the warm start; pretrained LLMs: ~1e-6 (full) or ~1e-5..1e-4 (LoRA)", "PPO update"
    )
    weight_decay: float = _opt(0.0, "AdamW weight decay", "PPO update")
    clip_eps: float = _opt(0.2, "PPO clip range", "PPO update")
    kl_coef: float = _opt(0.0, "low-variance (k3) KL to the frozen initial policy; paper: 0.01", "PPO update")
    entropy_coef: float = _opt(0.0, "entropy bonus weight (0: off)", "PPO update")
    max_grad_norm: float = _opt(1.0, "gradient clipping norm", "PPO update")
    loss_agg: LossAgg = _opt(
        "traj-mean", "traj-mean (each trajectory weighs the same, whatever its length) | token-mean", "PPO update"
    )
    lr_warmup_iterations: int = _opt(
        0, "iteration i < W+1 updates at lr * i / (W + 1) (AdamW's first steps are ~lr * sign(g))", "PPO update"
    )
    ppo_epochs: int = _opt(1, "passes over an iteration's steps", "PPO update")
    num_minibatches: int = _opt(4, "optimizer steps per epoch", "PPO update")
    micro_batch_size: int = _opt(
        4, "batch_decisions off: steps per forward/backward pass (score mode: x candidates sequences)", "PPO update"
    )
    batch_decisions: BatchDecisions = _opt(
        "tree",
        "tree: one forward pass scores the decisions of a vector step, or "
        "of an update micro-batch, as one prompt trie (a prefix any two "
        "share is encoded once) with chunked sparse tree attention "
        "(transformers models of the Qwen2 / Llama kind) | on: the same "
        "in rows of ~512 positions with dense tree masks | off: one pass "
        "per decision, micro_batch_size decisions per update pass (the "
        "reference path)",
        "PPO update",
    )
    micro_batch_tokens: int = _opt(
        8192,
        "batch_decisions tree / on: token positions per forward/backward pass "
        "(acting, evaluation, old / reference log-probs, update)",
        "PPO update",
    )
    recompute_old_logprobs: bool = _opt(
        False,
        "True: old log-probs from a training-side forward, not the sampler (always with backend vllm)",
        "PPO update",
    )
    skip_zero_advantage: bool = _opt(
        True, "drop steps with A == 0 from the update (no gradient) when kl/entropy are off", "PPO update"
    )
    lora: bool = _opt(False, "LoRA adapters (peft): faster update, MB-sized checkpoints", "PPO update")
    lora_r: int = _opt(16, "LoRA rank", "PPO update")
    lora_alpha: int = _opt(32, "LoRA alpha", "PPO update")
    bf16: bool = _opt(True, "GPU only: bf16 autocast compute, fp32 master weights and optimizer state", "PPO update")
    gradient_checkpointing: bool = _opt(
        False,
        "recompute each layer's activations in the backward pass: less memory "
        "per token (longer micro_batch_tokens fit) for ~1/3 more update "
        "compute",
        "PPO update",
    )
    logit_chunk_tokens: int = _opt(
        0,
        "generate mode: compute log-probs over the vocabulary this many response "
        "positions at a time, each chunk recomputed in the backward pass, so that a "
        "pass never holds its whole [tokens x vocab] logits (0: all at once)",
        "PPO update",
    )
    device: Device = _opt("auto", "auto | cpu | cuda", "PPO update")
    torch_threads: int = _opt(1, "0: torch's default; 1 is fastest for tiny models on a 2-core CPU", "PPO update")
    rollout_streams: int = _opt(
        1,
        "score mode, CPU, sync envs: play each training rollout in this many processes "
        "forked from the trainer, each a block of the groups (as the ranks of a run in "
        "that many processes: the same rollout), at torch_threads / rollout_streams threads "
        "(2 with torch_threads 2 on a 2-core machine); num_groups must divide evenly",
        "PPO update",
    )
    # outputs
    output_dir: str = _opt(
        "runs/progpo", "run directory: metrics.jsonl, summary.md, curves.png, checkpoints, TensorBoard logs", "outputs"
    )
    eval_every: int = _opt(
        0, "iterations between evals on eval_split (0: only at iteration 0 and at the end)", "outputs"
    )
    eval_episodes: int = _opt(
        144, "per evaluation, spread evenly over the split's tasks (0 disables evaluation)", "outputs"
    )
    eval_streams: int = _opt(
        1,
        "score mode: play each evaluation in this many concurrent streams, each a share of "
        "the envs and torch_threads / eval_streams threads for its forward passes (2 with "
        "torch_threads 2 on a 2-core machine). On the CPU each stream past the first is a "
        "forked process; on a GPU, a thread whose passes overlap the env steps. Same "
        "episodes, other sampled actions than 1 stream",
        "outputs",
    )
    eval_extra_split: str = _opt(
        "auto", 'a second held-out split evaluated at the start and the end (auto: alfworld valid; "none")', "outputs"
    )
    eval_extra_episodes: int = _opt(36, "episodes of the second held-out evaluation", "outputs")
    baseline_random: bool = _opt(True, "evaluate a uniformly random policy on eval_split once, for scale", "outputs")
    save_every: int = _opt(
        1,
        "iterations between checkpoints (the last one always saved); 0: no checkpoint at all (speed measurements)",
        "outputs",
    )
    tensorboard: bool = _opt(
        True, "write TensorBoard logs (--no-tensorboard: drop tensorboard from report_to)", "outputs"
    )
    report_to: str = _opt(
        "tensorboard",
        "where the metrics go beside metrics.jsonl, as TRL's report_to: tensorboard, "
        "wandb (the [wandb] extra; offline where WANDB_MODE says so) or none; "
        "several separated by commas",
        "outputs",
    )
    progress_bars: bool = _opt(True, "show progress bars", "outputs")
    notes: dict[str, Any] = field(
        default_factory=dict, metadata={"help": "free-form notes saved with the run (YAML only)", "group": "outputs"}
    )

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`ConfigError` on the first invalid value."""
        self._load_plugins()
        for name, choices in closed_choices().items():
            if getattr(self, name) not in choices:
                raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")
        self._check_teacher()
        self._check_warm_start()
        self._check_counts()
        self._check_numbers()
        self._check_streams()
        self._check_sampling()
        self._check_report_to()
        self._check_engine()
        try:  # the estimator's and the policy's (sampling included) options are validated where they are defined
            self._check_estimator_options()
            self.advantage_config()
            self.policy_options()
            self.tree_config()
        except ValueError as err:
            raise ConfigError(str(err)) from None

    def _check_warm_start(self) -> None:
        """Behaviour cloning has an expert to clone, and WebShop episodes to clone it on."""
        if self.resolved_warm_start == "bc" and (ENV_TABLE[self.env].expert is None or self.policy_mode != "score"):
            raise ConfigError(
                "warm_start bc clones an expert in score mode (ALFWorld: the searching expert; WebShop: the "
                "instruction-following shopper): use --env alfworld or webshop with --policy-mode score, "
                "or --warm-start none"
            )
        if self.resolved_warm_start == "bc" and self.env == "webshop" and self.bc_episodes < 1:
            raise ConfigError(
                "warm_start bc on WebShop needs bc_episodes >= 1 (its goals come from the reset seed; "
                "e.g. --bc-episodes 300)"
            )

    def _check_counts(self) -> None:
        """The counts are integers in range: sizes >= 1, the others >= 0, none past what a run can hold."""
        for name in POSITIVE_INTS:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ConfigError(f"{name} must be an integer >= 1, got {getattr(self, name)!r}")
        if isinstance(self.seed, int) and not isinstance(self.seed, bool) and self.seed > MAX_SEED:
            raise ConfigError(f"seed must be an integer in 0..{MAX_SEED} (2**32 - 1), got {self.seed}")
        if self.rollout == "tree" and isinstance(self.tree_branches, int) and self.tree_branches > self.group_size:
            raise ConfigError(
                f"tree_branches {self.tree_branches} > group_size {self.group_size}: each branch of a "
                "tree plays in one of its group's member slots"
            )
        if isinstance(self.group_size, int) and self.group_size == 1:
            raise ConfigError(
                f"group_size 1: {self.estimator} compares each trajectory with the others of its group, "
                "so a group of one gets advantage 0 everywhere and nothing trains; use --group-size 2 "
                "or more"
            )
        for name in NONNEGATIVE_INTS:
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 0:
                raise ConfigError(f"{name} must be an integer >= 0, got {getattr(self, name)!r}")
        for name, most in SIZE_LIMITS.items():  # checked before the run dir is claimed: no MemoryError after it
            if isinstance(getattr(self, name), int) and getattr(self, name) > most:
                raise ConfigError(
                    f"{name} {getattr(self, name)} is over {most:,}, more than any run here can hold; "
                    f"use at most {most:,}"
                )

    def _check_numbers(self) -> None:
        """The rates and coefficients are finite numbers in range; notes and strings have their types."""
        for name in NONNEGATIVE_NUMBERS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
        # an EMA rate: the share of the way the teacher moves toward the policy
        if isinstance(self.distill_tau, (int, float)) and self.distill_tau > 1:
            raise ConfigError(f"distill_tau must be in [0, 1] (the EMA rate of the teacher), got {self.distill_tau!r}")
        for name in ("gamma", "top_p"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if not isinstance(self.notes, dict) or not all(isinstance(k, str) for k in self.notes):
            raise ConfigError(f"notes must be a mapping (name: value), got {self.notes!r}")
        for f in fields(self):
            if isinstance(f.default, str) and not isinstance(getattr(self, f.name), str):
                raise ConfigError(f"{f.name} must be a string, got {getattr(self, f.name)!r}")

    def _check_sampling(self) -> None:
        """Dynamic sampling draws flat generation batches; its batch cap is used only with it."""
        if self.dynamic_sampling and self.rollout != "flat":
            raise ConfigError(
                f"dynamic_sampling draws flat generation batches; a {self.rollout} rollout grows each group "
                "from its own prefixes: use --rollout flat, or --no-dynamic-sampling"
            )

    def _check_streams(self) -> None:
        """The tiny models' init scale, and concurrent streams, are used only where they apply."""
        if self.tiny_init_std > 0:
            if tiny_spec(self.model) is None:
                raise ConfigError(
                    f"tiny_init_std applies to the random tiny-* models only, not to {self.model!r} "
                    "(its weights are loaded, not drawn): leave it at 0"
                )
        if self.eval_streams > 1 and self.policy_mode != "score":
            raise ConfigError(
                f"eval_streams {self.eval_streams}: concurrent evaluation streams share the training "
                "model, which only score mode acts with; use --eval-streams 1 in generate mode"
            )
        if self.rollout_streams > 1:
            self._check_rollout_streams()

    def _check_teacher(self) -> None:
        """The teacher is registered, and this config is one it can run with."""
        if self.distill not in teacher_names():
            raise ConfigError(f"distill must be one of {', '.join(teacher_names())}, got {self.distill!r}")
        if not isinstance(self.teacher_options, dict) or not all(isinstance(k, str) for k in self.teacher_options):
            raise ConfigError(f"teacher_options must be a mapping (name: value), got {self.teacher_options!r}")
        if self.teacher_options and (self.distill == "none" or is_builtin_teacher(self.distill)):
            taker = "no teacher is set (--distill)" if self.distill == "none" else f"{self.distill} takes none"
            raise ConfigError(
                f"teacher option(s) {', '.join(self.teacher_options)} given, but {taker}: a plug-in teacher's "
                "options are read by that teacher alone; drop them or pick it with --distill"
            )
        if self.distill == "none":
            return
        spec = registered_teacher(self.distill)
        reason = spec.check(self) if spec.check is not None else None
        if reason:
            raise ConfigError(reason)
        if spec.privileged and not ENV_TABLE[self.env].privileged_info:
            others = [n for n in teacher_names()[1:] if not reads_privileged(n)]
            raise ConfigError(
                f"distill {self.distill} reads the env's privileged text, which the {self.env} env does "
                f"not offer (ALFWorld and WebShop do); use --distill {' or '.join([*others, 'none'])}"
            )

    def _load_plugins(self) -> None:
        """Import each of :attr:`plugins` (registered once per process)."""
        if not isinstance(self.plugins, list) or not all(isinstance(p, str) for p in self.plugins):
            raise ConfigError(f"plugins must be a list of modules or .py files, got {self.plugins!r}")
        try:
            load_plugins(self.plugins)
        except ValueError as err:
            raise ConfigError(str(err)) from None

    @property
    def trackers(self) -> tuple[str, ...]:
        """The trackers ``report_to`` names (``tensorboard`` left out with ``tensorboard: false``)."""
        items = [x.strip() for x in str(self.report_to).split(",") if x.strip() and x.strip() != "none"]
        return tuple(x for x in dict.fromkeys(items) if x != "tensorboard" or self.tensorboard)

    def _check_engine(self) -> None:
        """The generation engine and the update's options fit together."""
        if self.gradient_checkpointing and self.policy_mode == "score" and self.batch_decisions == "tree":
            raise ConfigError(
                "gradient_checkpointing cannot recompute the prompt trie's chunked tree attention: use it "
                "with --batch-decisions on or off in score mode, or in generate mode"
            )
        if self.logit_chunk_tokens and (self.policy_mode != "generate" or self.dist_strategy == "fsdp2"):
            raise ConfigError(
                "logit_chunk_tokens chunks the output head of generate mode's log-prob passes (score "
                "mode keeps only its candidates' logits); FSDP2 shards that head: leave it at 0 there"
            )
        if self.dist_strategy == "fsdp2" and (self.decode == "static" or self.rollout_dtype == "bf16"):
            raise ConfigError(
                "dist_strategy fsdp2 samples with the loop over the sharded weights: leave decode and "
                "rollout_dtype at auto (or loop / fp32)"
            )
        if self.backend == "vllm" and (self.decode != "auto" or self.rollout_dtype != "auto"):
            raise ConfigError(
                "decode and rollout_dtype choose the transformers backend's engine; vLLM has its own "
                "(leave them at auto with --backend vllm)"
            )
        if self.policy_mode == "score" and (self.decode != "auto" or self.rollout_dtype != "auto"):
            raise ConfigError(
                f"decode {self.decode} / rollout_dtype {self.rollout_dtype}: they choose how generate mode "
                "samples answers; score mode samples no text (it scores the candidate commands): use "
                "--policy-mode generate, or leave them at auto"
            )
        if self.backend == "vllm" and self.policy_mode != "generate":
            raise ConfigError(
                "backend vllm samples free-text answers: use it with --policy-mode generate (score mode "
                "ranks the commands with the training model itself)"
            )

    def _check_report_to(self) -> None:
        items = [x.strip() for x in str(self.report_to).split(",") if x.strip()]
        unknown = [x for x in items if x not in REPORT_TO]
        if not items or unknown:
            raise ConfigError(f"report_to takes {', '.join(REPORT_TO)} (comma-separated), got {self.report_to!r}")
        if "none" in items and len(items) > 1:
            raise ConfigError(f"report_to none reports to nothing else; got {self.report_to!r}")
        if "wandb" in items:
            if importlib.util.find_spec("wandb") is None:
                raise ConfigError(
                    "report_to wandb needs Weights & Biases: pip install 'progpo[wandb]' (or drop wandb "
                    "from --report-to)"
                )

    def _check_rollout_streams(self) -> None:
        """What rollout streams (forked processes, one block of groups each) need."""
        n = self.rollout_streams
        if self.policy_mode != "score":
            raise ConfigError(
                f"rollout_streams {n}: forked rollout streams act with the training model, which only "
                "score mode does; use --rollout-streams 1 in generate mode"
            )
        if self.device == "cuda":
            raise ConfigError(f"rollout_streams {n}: a forked process cannot use CUDA; use it with --device cpu")
        if self.env_backend != "sync":
            raise ConfigError(
                f"rollout_streams {n}: each stream builds its own envs in its process; use it with "
                f"--env-backend sync, not {self.env_backend}"
            )
        if self.rollout == "tree":
            raise ConfigError(
                f"rollout_streams {n}: a tree rollout's paths are not split into streams; use "
                "--rollout-streams 1 with --rollout tree"
            )
        if self.num_groups % n:
            raise ConfigError(
                f"rollout_streams {n}: num_groups ({self.num_groups}) must be a multiple of it (each "
                "stream plays a block of whole groups)"
            )

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

    def _check_estimator_options(self) -> None:
        """Every registered base's options are valid, used or not; an ``exclusive`` one set while
        another base trains is an error."""
        if not isinstance(self.estimator_options, dict) or not all(isinstance(k, str) for k in self.estimator_options):
            raise ConfigError(f"estimator_options must be a mapping (name: value), got {self.estimator_options!r}")
        conflict = exclusive_conflict(self.estimator, lambda flag: getattr(self, flag, None)) or self._two_spellings()
        if conflict:
            raise ConfigError(conflict)
        for base in dict.fromkeys(spec.name for flag, spec, _ in flat_options() if hasattr(self, flag)):
            registered_estimator(base).make_options(self.base_option_values(base))

    def _two_spellings(self) -> str | None:
        """Why an option of the configured base is given twice with two values: its flat field
        away from its default, and ``estimator_options`` (:func:`spelling_conflict`)."""
        known = self.__dataclass_fields__
        away = {
            flag: getattr(self, flag)
            for flag, _, _ in flat_options()
            if flag in known and getattr(self, flag) != known[flag].default
        }
        return spelling_conflict(self.estimator, away, self.estimator_options)

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
        return label_of(vars(self))

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
        return dataclasses.asdict(self)

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
        known = {f.name: f for f in fields(cls)}
        bad = [k for k in data if not isinstance(k, str)]
        if bad:
            raise ConfigError(f"{source}: keys must be field names, got {', '.join(repr(k) for k in bad)}")
        data = upgrade_names(flatten_sections(data, source, warn=not flat), source)
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ConfigError(f"{source}: unknown field(s) {', '.join(unknown)}; run with --help for the list")
        clean: dict[str, Any] = {}
        for name, value in data.items():
            clean[name] = _coerce(
                name, value, known[name].default if known[name].default is not dataclasses.MISSING else None, source
            )
        return cls(**clean)


def closed_choices() -> dict[str, tuple[str, ...]]:
    """Every closed-choice field of :class:`TrainConfig` and its choices, read from its ``Literal`` type.

    >>> closed_choices()["warm_start"]
    ('auto', 'bc', 'none')
    """
    global _CHOICES
    if _CHOICES is None:
        hints = get_type_hints(TrainConfig, vars(sys.modules[__name__]))
        _CHOICES = {
            f.name: get_args(hints[f.name]) for f in fields(TrainConfig) if get_origin(hints[f.name]) is Literal
        }
    return _CHOICES


_CHOICES: dict[str, tuple[str, ...]] | None = None


def lr_warning(cfg: TrainConfig) -> str | None:
    """A warning when ``lr`` is implausible for the fine-tuning mode of a real (non-tiny) model.

    >>> lr_warning(TrainConfig(model="Qwen/Qwen2.5-1.5B-Instruct", lora=True, lr=1e-6, warm_start="none")) is not None
    True
    >>> lr_warning(TrainConfig(model="Qwen/Qwen2.5-1.5B-Instruct", lora=False, lr=1e-6, warm_start="none")) is None
    True
    """
    if str(cfg.model).lower().startswith("tiny"):
        return None  # tiny random models train from scratch at 1e-4..1e-2
    if cfg.lora and cfg.lr < 1e-5:
        return (
            f"lr {cfg.lr:g} with LoRA: adapters barely move at full fine-tuning's rates; LoRA RL runs use "
            "~1e-5 to 1e-4 (10-100x the full fine-tuning lr)"
        )
    if not cfg.lora and cfg.lr > 1e-4:
        return (
            f"lr {cfg.lr:g} for a full fine-tune of {cfg.model}: RL fine-tuning of pretrained LLMs uses "
            "~1e-6 to 1e-5; this will likely destroy the model"
        )
    return None


def _coerce(name: str, value: Any, default: Any, source: str) -> Any:
    """Check a YAML value against the field's default type (ints are accepted for floats)."""
    if default is None:
        return value
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"{source}: {name} must be true or false, got {value!r}")
        return value
    if isinstance(default, int):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{source}: {name} must be an integer, got {value!r}")
        return value
    if isinstance(default, float):
        value = yaml11_float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{source}: {name} must be a number, got {value!r}")
        return float(value)
    if isinstance(default, str):
        if not isinstance(value, str):
            raise ConfigError(f"{source}: {name} must be a string, got {value!r}")
    return value


#: the largest ``--config`` file read
MAX_CONFIG_BYTES = 2**20
#: sizes past which a run only ends in a MemoryError (an episode panel, a LoRA rank), refused up front
SIZE_LIMITS = {
    "eval_episodes": 100_000,
    "eval_extra_episodes": 100_000,
    "bc_episodes": 1_000_000,
    "lora_r": 8_192,
    "num_groups": 100_000,
    "group_size": 100_000,
}
#: seeds numpy, torch and the env schedule all take (numpy's legacy seeding stops at 2**32)
MAX_SEED = 2**32 - 1


def load_yaml(path: str | Path) -> dict[str, Any]:
    """Read a YAML mapping; any problem becomes a one-line :class:`ConfigError`."""
    import yaml  # the [train] extra

    p = Path(path)
    try:
        if not p.is_file():  # a FIFO would block the read forever, /dev/zero fill memory
            what = "does not exist" if not p.exists() else "is not a regular file"
            raise ConfigError(f"config {p} {what}; pass a YAML file")
        if p.stat().st_size > MAX_CONFIG_BYTES:
            raise ConfigError(f"config {p} is over {MAX_CONFIG_BYTES // 2**20} MiB; a config is a short YAML mapping")
        with p.open("rb") as fh:
            text = fh.read(MAX_CONFIG_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(f"cannot read config {p}: {err.__class__.__name__}: {err}") from err
    try:
        data = load_strict(text)
    except StrictYAMLError as err:
        raise ConfigError(f"config {p} {err}") from None
    except yaml.YAMLError as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConfigError(f"config {p} is not valid YAML ({first})") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {p} must be a YAML mapping of field: value, got {type(data).__name__}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise ConfigError(
            f"config {p}: keys must be field names, got {', '.join(repr(k) for k in bad)}; run with --help for the list"
        )
    return data


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


#: what an unknown estimator or teacher most likely lacks
PLUGIN_HINT = "; a plug-in's is known once its module loads: pass --plugin MODULE_OR_FILE (or plugins: in --config)"


class _Parser(argparse.ArgumentParser):
    """argparse with a short error: one usage line and the error, with the closest flag or choice
    suggested (``--estimater`` -> ``--estimator``), instead of the whole usage of 100 flags."""

    def error(self, message: str) -> NoReturn:

        hint = ""
        unknown = re.match(r"unrecognized arguments: (\S+)", message)
        choice = re.match(r"argument (\S+?)(?:/\S+)?: invalid choice: '([^']*)' \(choose from (.*)\)", message)
        if unknown:
            flags = [o for a in self._actions for o in a.option_strings if a.help != argparse.SUPPRESS]
            close = difflib.get_close_matches(unknown.group(1).split("=")[0], flags, n=1, cutoff=0.6)
            hint = f"; did you mean {close[0]}?" if close else ""
        elif choice:
            options = [c.strip().strip("'") for c in choice.group(3).split(",")]
            close = difflib.get_close_matches(choice.group(2), options, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]}?" if close else ""
            if not close and choice.group(1) in ("--estimator", "--distill"):
                hint = PLUGIN_HINT
        self.exit(2, f"usage: {self.prog} [options] (--help lists them)\nerror: {message}{hint}\n")


def _yaml_section(group: str) -> str:
    """Where a ``--help`` group's fields go in a YAML config, when in a section."""
    names = [f.name for f in fields(TrainConfig) if f.metadata["group"] == group]
    found = sorted({SECTION_OF[n][0] for n in names if n in SECTION_OF})
    return f" (in a YAML config: under {', '.join(s + ':' for s in found)})" if found else ""


def _field_help(name: str) -> str:
    return next(f.metadata["help"] for f in fields(TrainConfig) if f.name == name)


def _name_value(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of ``--estimator-option``, the value read as a YAML scalar (``0.5``, ``true``, ``power``)."""
    import yaml  # the [train] extra

    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE, got {text!r}")
    try:
        parsed = yaml.safe_load(value) if value.strip() else value
    except yaml.YAMLError:
        parsed = value
    parsed = yaml11_float(parsed)
    return name.strip(), parsed if isinstance(parsed, (bool, int, float, str)) else value


def build_parser() -> argparse.ArgumentParser:
    ap = _Parser(
        prog="python -m trainers.progpo",
        description="Train an LLM agent with ProGPO (or GRPO / RLOO / GiGPO) on ALFWorld or WebShop. "
        "With no arguments: the CPU learning demo (tiny-128x2 cloned from the searching expert on the "
        "embedded easy-train ALFWorld games, then ProGPO(GiGPO); eval on the held-out easy-valid games).",
    )
    _add_command_flags(ap)
    choices = {**closed_choices(), "estimator": estimator_names(), "distill": teacher_names()}
    _add_field_flags(ap, choices)
    _add_renamed_flags(ap, choices)
    return ap


def _add_command_flags(ap: argparse.ArgumentParser) -> None:
    """The flags that are not fields: the config file, resume and overwrite, plug-ins and named options."""
    ap.add_argument(
        "--config",
        help="YAML file of field: value, a method's fields in the sections advantage:, tree:, "
        "distill: and ppo: (CLI flags override it)",
    )
    ap.add_argument(
        "--resume",
        nargs="?",
        const="latest",
        default=None,
        help="continue from the latest checkpoint of --output-dir (or from the given checkpoint file)",
    )
    ap.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an earlier run's files in --output-dir (a fresh run refuses a used directory)",
    )
    ap.add_argument(
        "--print-config",
        action="store_true",
        help="print the resolved config as the YAML a run would write (config.yaml) and exit; "
        "--config takes it back as it is",
    )
    ap.add_argument(
        "--accept-plugin-change",
        action="store_true",
        help="with --resume: train on although a plug-in's file changed since the run's last process "
        "(recorded in provenance.jsonl; without it such a resume is refused)",
    )
    ap.add_argument(
        "--plugin", dest="plugins", action="append", default=None, metavar="MODULE_OR_FILE", help=_field_help("plugins")
    )
    ap.add_argument(
        "--estimator-option",
        dest="estimator_options",
        action="append",
        default=None,
        type=_name_value,
        metavar="NAME=VALUE",
        help=_field_help("estimator_options"),
    )
    ap.add_argument(
        "--teacher-option",
        dest="teacher_options",
        action="append",
        default=None,
        type=_name_value,
        metavar="NAME=VALUE",
        help=_field_help("teacher_options"),
    )


def _add_field_flags(ap: argparse.ArgumentParser, choices: dict[str, Any]) -> None:
    """One flag per config field, in its section's group, with its help text and default."""
    sections: dict[str, argparse._ArgumentGroup] = {}
    for f in fields(TrainConfig):
        if f.name in ("notes", "plugins", "estimator_options", "teacher_options"):
            continue
        group = f.metadata["group"]
        if group not in sections:
            sections[group] = ap.add_argument_group(group + _yaml_section(group))
        default = f.default
        text = f"{f.metadata['help']} (default: {default!r})"
        if isinstance(default, bool):
            sections[group].add_argument(
                _flag(f.name), dest=f.name, action=argparse.BooleanOptionalAction, default=None, help=text
            )
        else:
            sections[group].add_argument(
                _flag(f.name), dest=f.name, type=type(default), default=None, choices=choices.get(f.name), help=text
            )


def _add_renamed_flags(ap: argparse.ArgumentParser, choices: dict[str, Any]) -> None:
    """The earlier names of renamed fields: not listed in --help, read with a deprecation line."""
    for old, new in RENAMED.items():
        if new == "notes":
            continue
        default = next(f.default for f in fields(TrainConfig) if f.name == new)
        if isinstance(default, bool):
            ap.add_argument(
                _flag(old),
                dest=f"renamed_{old}",
                action=argparse.BooleanOptionalAction,
                default=None,
                help=argparse.SUPPRESS,
            )
        else:
            ap.add_argument(
                _flag(old),
                dest=f"renamed_{old}",
                type=type(default),
                default=None,
                choices=choices.get(new),
                help=argparse.SUPPRESS,
            )


def _early_plugins(argv: list[str] | None) -> None:
    """Load the plug-ins that ``--plugin`` and the ``--config`` file's ``plugins:`` name before the
    flags are built, so that ``--estimator`` offers their estimators."""
    early = argparse.ArgumentParser(add_help=False)
    early.add_argument("--config")
    early.add_argument("--plugin", action="append", default=[])
    ns, _ = early.parse_known_args(argv)
    names = list(ns.plugin)
    if ns.config:
        try:
            listed = load_yaml(ns.config).get("plugins", [])
        except ConfigError:
            listed = []  # the file's own error is said once, by the full parse
        here = Path(ns.config).resolve().parent
        names += [resolved(p, here) for p in listed if isinstance(p, str)] if isinstance(listed, list) else []
    try:
        load_plugins([resolved(p) for p in names])
    except ValueError as err:
        raise ConfigError(str(err)) from None


def spelling_conflict(name: str, flat: Mapping[str, Any], options: Mapping[str, Any]) -> str | None:
    """Why the base of estimator ``name`` is given one option twice with two values: a flat flag
    that was set (``flat``: ``hgpo_depth -> 2``) and the same option in ``options``
    (``estimator_options``), or ``None``. The run would train with one and a reader of the other
    would be misled. An unknown estimator has no conflict here (its own check says it).

    >>> spelling_conflict("hgpo", {"hgpo_depth": 2}, {"depth": 3})
    '--hgpo-depth 2 and --estimator-option depth=3 set one option twice with two values: keep one'
    >>> spelling_conflict("hgpo", {"hgpo_depth": 3}, {"depth": 3}), spelling_conflict("grpo", {"hgpo_depth": 2}, {})
    (None, None)
    """
    try:
        spec = registered_estimator(name)
    except ValueError:
        return None
    for flag, _, f in flat_options((spec.name,)):
        if flag in flat and f.name in options and flat[flag] != options[f.name]:
            return (
                f"--{flag.replace('_', '-')} {flat[flag]!r} and --estimator-option {f.name}={options[f.name]!r} "
                "set one option twice with two values: keep one"
            )
    return None


def parse_args(argv: list[str] | None = None) -> tuple[TrainConfig, argparse.Namespace]:
    """CLI -> (config, namespace with ``config`` and ``resume``)."""
    _early_plugins(sys.argv[1:] if argv is None else argv)
    ns = build_parser().parse_args(argv)
    data: dict[str, Any] = load_yaml(ns.config) if ns.config else {}
    if isinstance(data.get("plugins"), list):  # a relative file is the YAML's neighbour, stored absolute
        here = Path(ns.config).resolve().parent
        data["plugins"] = [resolved(p, here) if isinstance(p, str) else p for p in data["plugins"]]
    source = f"config {ns.config}" if ns.config else "config"
    if ns.config and not data:  # an empty file, or one of comments only: said, not silently the defaults
        print(f"note: {source} sets nothing: every field not given as a flag is at its default", file=sys.stderr)
    cfg = TrainConfig.from_dict(data, source)
    skip = ("notes", "plugins", "estimator_options", "teacher_options")
    overrides = {
        f.name: getattr(ns, f.name)
        for f in fields(TrainConfig)
        if f.name not in skip and getattr(ns, f.name) is not None
    }
    renamed = {old: getattr(ns, f"renamed_{old}") for old in RENAMED if getattr(ns, f"renamed_{old}", None) is not None}
    overrides = upgrade_names({**overrides, **renamed}, source="command line", spell=_flag)
    if ns.plugins:
        overrides["plugins"] = list(dict.fromkeys([*cfg.plugins, *(resolved(p) for p in ns.plugins)]))
    if ns.estimator_options:
        overrides["estimator_options"] = {**cfg.estimator_options, **dict(ns.estimator_options)}
        # given on one command line, even at the flag's default value
        conflict = spelling_conflict(
            overrides.get("estimator", cfg.estimator), overrides, overrides["estimator_options"]
        )
        if conflict:
            raise ConfigError(conflict)
    if ns.teacher_options:
        overrides["teacher_options"] = {**cfg.teacher_options, **dict(ns.teacher_options)}
    if overrides:
        cfg = dataclasses.replace(cfg, **overrides)
    return cfg, ns
