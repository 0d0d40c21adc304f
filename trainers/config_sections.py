"""The sections of a run's configuration: one frozen dataclass per stage of a run, each field with
its default, its one line of ``--help`` and its ``--help`` section (``group``).

:class:`trainers.config.TrainConfig` is their composition (``cfg.ppo``, ``cfg.advantage``, ...),
and a field is read and set by its own name as well (``cfg.lr`` is ``cfg.ppo.lr``): every flag
(``--lr``) and YAML key (``lr``, or ``ppo: {lr: ...}``) is a field's name. :data:`SETTINGS` lists
the sections in the order of ``--help`` and of a run's ``config.yaml``.

>>> PPOSettings().lr, AdvantageSettings().estimator, [name for name, _ in SETTINGS][:3]
(0.0003, 'progpo-gigpo', ['task', 'policy', 'warm'])
"""

# Over 500 lines: every field of a run, each with its default, help line and --help section; one
# class per stage, which only make sense read together.
from __future__ import annotations

from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal, get_args, get_origin, get_type_hints

from agents.parsing import FORMATS
from agents.policy_base import PolicyOptions
from trainers.advantages.registry import flat_options
from trainers.envs import ENV_TABLE, STATE_KEYS
from trainers.rollouts.tree_rollout import SCORERS
from trainers.teachers.registry import is_builtin_teacher, teacher_names
from trainers.teachers.registry import teacher as registered_teacher
from wrappers.errors import UserError
from wrappers.signals import TAU_P, TAU_R

__all__ = [
    "ENVS",
    "ROLLOUTS",
    "SETTINGS",
    "AdvantageSettings",
    "ConfigError",
    "BudgetSettings",
    "OutputSettings",
    "PPOSettings",
    "PolicySettings",
    "RolloutSettings",
    "TaskSettings",
    "TeacherSettings",
    "WarmStartSettings",
    "closed_choices",
    "flat_fields",
    "owner_of",
]

ENVS = tuple(ENV_TABLE)
ROLLOUTS = ("flat", "tree")

# Closed choices: each field below is typed with one of these, its value is checked against it
# (TrainConfig.validate) and its flag offers exactly these (build_parser). The tuples defined in
# other modules stay the source of their choices.
Env = Literal[ENVS]  # type: ignore[valid-type]  # a Literal of a tuple defined where its choices live: valid at run time, not statically
StateKey = Literal[STATE_KEYS]  # type: ignore[valid-type]  # as above
Scorer = Literal[SCORERS]  # type: ignore[valid-type]  # as above
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

_POLICY = PolicyOptions()  # the policy's defaults are defined once, by agents.policy_base


def _opt(default: Any, help: str, group: str) -> Any:  # argparse's word
    """A section's field: its default, the one line ``--help`` prints, its ``--help`` section."""
    return field(default=default, metadata={"help": help, "group": group})


def _with_teacher_options(cls: type) -> type:
    """``cls`` with a field for each built-in teacher's own options (``distill_tau``, ``skill_writer``),
    after ``teacher_options``, read from its registration's options dataclass
    (:mod:`trainers.teachers.options`): one schema for the flag, the YAML key, ``--help`` and
    ``--teacher-option``."""
    annotations: dict[str, Any] = {}
    for name, hint in cls.__annotations__.items():
        annotations[name] = hint
        if name != "teacher_options":
            continue
        for teacher in (registered_teacher(n) for n in teacher_names()[1:] if is_builtin_teacher(n)):
            options = teacher.options_class()
            for f in fields(options) if options is not None else ():
                choices = f.metadata.get("choices")
                annotations[f.metadata["flag"]] = Literal[choices] if choices else type(f.default)  # type: ignore[valid-type]  # a Literal of the option's choices, built at run time
                help = f"{teacher.name}: {f.metadata['help']} (as a teacher option: {f.name})"
                setattr(cls, f.metadata["flag"], field(default=f.default, metadata={"help": help, "group": "teacher"}))
    cls.__annotations__ = annotations
    return cls


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


@dataclass(frozen=True)
class TaskSettings:
    """What to train: the env, its splits, the episode length and the model."""

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


@dataclass(frozen=True)
class PolicySettings:
    """The policy (agents/): prompt, answer format, sampling."""

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


@dataclass(frozen=True)
class WarmStartSettings:
    """The warm start, before iteration 0's evaluation (RL's gain is measured from there)."""

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


@dataclass(frozen=True)
@_with_estimator_options
class AdvantageSettings:
    """The estimator (trainers/advantages/); each built-in base's own options are fields here too, read from the registry (_with_estimator_options)."""

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


@dataclass(frozen=True)
class RolloutSettings:
    """The rollout (trainers/rollouts/): flat or tree, the tree collector, dynamic sampling."""

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


@dataclass(frozen=True)
@_with_teacher_options
class TeacherSettings:
    """The teacher (trainers/teachers/): a distillation loss beside the RL loss."""

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
            "help": "the teacher's own options by name, checked against its options dataclass where it has one "
            "(YAML: distill: {options: {name: value}}; flag: --teacher-option NAME=VALUE, repeated); a built-in "
            "teacher's are flags of their own too (--distill-tau is tau)",
            "group": "teacher",
        },
    )
    # (each built-in teacher's own options are fields here too, read from the registry: _with_teacher_options)


@dataclass(frozen=True)
class BudgetSettings:
    """The budget: iterations, groups, members, where the envs run, the seed and the device."""

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


@dataclass(frozen=True)
class PPOSettings:
    """The PPO update: optimizer, clip, KL and entropy terms, batching."""

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


@dataclass(frozen=True)
class OutputSettings:
    """Outputs: the run dir, evaluations, checkpoints, trackers and notes."""

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


#: the sections of a config, by attribute name, in the order of ``--help`` and ``config.yaml``
SETTINGS: tuple[tuple[str, type], ...] = (
    ("task", TaskSettings),
    ("policy", PolicySettings),
    ("warm", WarmStartSettings),
    ("advantage", AdvantageSettings),
    ("collection", RolloutSettings),
    ("teacher", TeacherSettings),
    ("budget", BudgetSettings),
    ("ppo", PPOSettings),
    ("outputs", OutputSettings),
)
_OWNER: dict[str, str] = {f.name: name for name, cls in SETTINGS for f in fields(cls)}


def owner_of(name: str) -> str | None:
    """The section that holds field ``name`` (``"ppo"`` for ``lr``), or ``None``.

    >>> owner_of("lr"), owner_of("estimator"), owner_of("nope")
    ('ppo', 'advantage', None)
    """
    return _OWNER.get(name)


def flat_fields() -> list[Field[Any]]:
    """Every section's fields, in order: the flat names of a config (its flags, its YAML keys)."""
    return [f for _, cls in SETTINGS for f in fields(cls)]


class ConfigError(UserError, ValueError):
    """A configuration value or file is invalid; the message says which and why."""


def closed_choices() -> dict[str, tuple[str, ...]]:
    """Every closed-choice field of :class:`TrainConfig` and its choices, read from its ``Literal`` type.

    >>> closed_choices()["warm_start"]
    ('auto', 'bc', 'none')
    """
    global _CHOICES
    if _CHOICES is None:
        hints = {name: hint for _, cls in SETTINGS for name, hint in get_type_hints(cls).items()}
        _CHOICES = {f.name: get_args(hints[f.name]) for f in flat_fields() if get_origin(hints[f.name]) is Literal}
    return _CHOICES


_CHOICES: dict[str, tuple[str, ...]] | None = None
