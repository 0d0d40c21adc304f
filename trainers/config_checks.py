"""The checks a config passes before a run starts (:func:`validate`): closed choices, ranges, sizes,
what the teacher, the warm start, the engine, the streams and the trackers need, the estimator's
options and their spellings. Each failure is one :class:`~trainers.config_sections.ConfigError`
line that names the field and what to do."""

from __future__ import annotations

import importlib.util
import math
from dataclasses import fields
from typing import Any, Mapping

from progpo_envs.guard import check_import_names
from trainers.advantages.registry import estimator as registered_estimator
from trainers.advantages.registry import exclusive_conflict, flat_options
from trainers.config_sections import ConfigError, closed_choices, flat_fields
from trainers.envs import ENV_TABLE
from trainers.plugins import load_plugins
from trainers.teachers.registry import reads_privileged, teacher_names
from trainers.teachers.registry import teacher as registered_teacher

try:
    from agents.models import tiny_spec
finally:  # trainers itself does not check `agents` (the verl plugin loads beside any), its users do:
    check_import_names(("agents", "wrappers"))  # a shadowing package, named in one line

__all__ = ["MAX_SEED", "REPORT_TO", "SIZE_LIMITS", "lr_warning", "spelling_conflict", "validate"]


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


#: the trackers ``report_to`` takes (TRL's names)
REPORT_TO = ("tensorboard", "wandb", "none")


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


def lr_warning(cfg: Any) -> str | None:
    """A warning when ``lr`` is implausible for the fine-tuning mode of a real (non-tiny) model.

    >>> from trainers.config import TrainConfig
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


def validate(cfg: Any) -> None:
    """Raise :class:`ConfigError` on the first invalid value."""
    _load_plugins(cfg)
    for name, choices in closed_choices().items():
        if getattr(cfg, name) not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {getattr(cfg, name)!r}")
    _check_teacher(cfg)
    _check_warm_start(cfg)
    _check_counts(cfg)
    _check_numbers(cfg)
    _check_streams(cfg)
    _check_sampling(cfg)
    _check_report_to(cfg)
    _check_engine(cfg)
    try:  # the estimator's and the policy's (sampling included) options are validated where they are defined
        _check_estimator_options(cfg)
        cfg.advantage_config()
        cfg.policy_options()
        cfg.tree_config()
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _check_warm_start(cfg: Any) -> None:
    """Behaviour cloning has an expert to clone, and WebShop episodes to clone it on."""
    if cfg.resolved_warm_start == "bc" and (ENV_TABLE[cfg.env].expert is None or cfg.policy_mode != "score"):
        raise ConfigError(
            "warm_start bc clones an expert in score mode (ALFWorld: the searching expert; WebShop: the "
            "instruction-following shopper): use --env alfworld or webshop with --policy-mode score, "
            "or --warm-start none"
        )
    if cfg.resolved_warm_start == "bc" and cfg.env == "webshop" and cfg.bc_episodes < 1:
        raise ConfigError(
            "warm_start bc on WebShop needs bc_episodes >= 1 (its goals come from the reset seed; "
            "e.g. --bc-episodes 300)"
        )


def _check_counts(cfg: Any) -> None:
    """The counts are integers in range: sizes >= 1, the others >= 0, none past what a run can hold."""
    for name in POSITIVE_INTS:
        if not isinstance(getattr(cfg, name), int) or getattr(cfg, name) < 1:
            raise ConfigError(f"{name} must be an integer >= 1, got {getattr(cfg, name)!r}")
    if isinstance(cfg.seed, int) and not isinstance(cfg.seed, bool) and cfg.seed > MAX_SEED:
        raise ConfigError(f"seed must be an integer in 0..{MAX_SEED} (2**32 - 1), got {cfg.seed}")
    if cfg.rollout == "tree" and isinstance(cfg.tree_branches, int) and cfg.tree_branches > cfg.group_size:
        raise ConfigError(
            f"tree_branches {cfg.tree_branches} > group_size {cfg.group_size}: each branch of a "
            "tree plays in one of its group's member slots"
        )
    if isinstance(cfg.group_size, int) and cfg.group_size == 1:
        raise ConfigError(
            f"group_size 1: {cfg.estimator} compares each trajectory with the others of its group, "
            "so a group of one gets advantage 0 everywhere and nothing trains; use --group-size 2 "
            "or more"
        )
    for name in NONNEGATIVE_INTS:
        if not isinstance(getattr(cfg, name), int) or getattr(cfg, name) < 0:
            raise ConfigError(f"{name} must be an integer >= 0, got {getattr(cfg, name)!r}")
    for name, most in SIZE_LIMITS.items():  # checked before the run dir is claimed: no MemoryError after it
        if isinstance(getattr(cfg, name), int) and getattr(cfg, name) > most:
            raise ConfigError(
                f"{name} {getattr(cfg, name)} is over {most:,}, more than any run here can hold; use at most {most:,}"
            )


def _check_numbers(cfg: Any) -> None:
    """The rates and coefficients are finite numbers in range; notes and strings have their types."""
    for name in NONNEGATIVE_NUMBERS:
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise ConfigError(f"{name} must be a finite number >= 0, got {value!r}")
    # an EMA rate: the share of the way the teacher moves toward the policy
    if isinstance(cfg.distill_tau, (int, float)) and cfg.distill_tau > 1:
        raise ConfigError(f"distill_tau must be in [0, 1] (the EMA rate of the teacher), got {cfg.distill_tau!r}")
    for name in ("gamma", "top_p"):
        value = getattr(cfg, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"{name} must be a finite number, got {value!r}")
    if not isinstance(cfg.notes, dict) or not all(isinstance(k, str) for k in cfg.notes):
        raise ConfigError(f"notes must be a mapping (name: value), got {cfg.notes!r}")
    for f in flat_fields():
        if isinstance(f.default, str) and not isinstance(getattr(cfg, f.name), str):
            raise ConfigError(f"{f.name} must be a string, got {getattr(cfg, f.name)!r}")


def _check_sampling(cfg: Any) -> None:
    """Dynamic sampling draws flat generation batches; its batch cap is used only with it."""
    if cfg.dynamic_sampling and cfg.rollout != "flat":
        raise ConfigError(
            f"dynamic_sampling draws flat generation batches; a {cfg.rollout} rollout grows each group "
            "from its own prefixes: use --rollout flat, or --no-dynamic-sampling"
        )


def _check_streams(cfg: Any) -> None:
    """The tiny models' init scale, and concurrent streams, are used only where they apply."""
    if cfg.tiny_init_std > 0:
        if tiny_spec(cfg.model) is None:
            raise ConfigError(
                f"tiny_init_std applies to the random tiny-* models only, not to {cfg.model!r} "
                "(its weights are loaded, not drawn): leave it at 0"
            )
    if cfg.eval_streams > 1 and cfg.policy_mode != "score":
        raise ConfigError(
            f"eval_streams {cfg.eval_streams}: concurrent evaluation streams share the training "
            "model, which only score mode acts with; use --eval-streams 1 in generate mode"
        )
    if cfg.rollout_streams > 1:
        _check_rollout_streams(cfg)


def _check_teacher(cfg: Any) -> None:
    """The teacher is registered, and this config is one it can run with."""
    if cfg.distill not in teacher_names():
        raise ConfigError(f"distill must be one of {', '.join(teacher_names())}, got {cfg.distill!r}")
    if not isinstance(cfg.teacher_options, dict) or not all(isinstance(k, str) for k in cfg.teacher_options):
        raise ConfigError(f"teacher_options must be a mapping (name: value), got {cfg.teacher_options!r}")
    if cfg.teacher_options and cfg.distill == "none":
        raise ConfigError(
            f"teacher option(s) {', '.join(cfg.teacher_options)} given, but no teacher is set (--distill): a "
            "teacher's options are read by that teacher alone; drop them or pick it with --distill"
        )
    if cfg.distill == "none":
        return
    spec = registered_teacher(cfg.distill)
    _check_teacher_options(cfg, spec)
    reason = spec.check(cfg) if spec.check is not None else None
    if reason:
        raise ConfigError(reason)
    if spec.privileged and not ENV_TABLE[cfg.env].privileged_info:
        others = [n for n in teacher_names()[1:] if not reads_privileged(n)]
        raise ConfigError(
            f"distill {cfg.distill} reads the env's privileged text, which the {cfg.env} env does "
            f"not offer (ALFWorld and WebShop do); use --distill {' or '.join([*others, 'none'])}"
        )


def _check_teacher_options(cfg: Any, spec: Any) -> None:
    """``teacher_options`` against the teacher's options dataclass (a teacher without one checks
    its own), and no option given twice with two values: its flat flag away from its default and
    ``--teacher-option``."""
    options = spec.options_class()
    if options is None:
        return
    try:
        spec.option_values(cfg)
    except ValueError as err:
        raise ConfigError(str(err)) from None
    flat = {f.name: f.default for f in flat_fields()}
    for f in fields(options):
        flag = f.metadata.get("flag")
        if f.name in cfg.teacher_options and flag in flat and getattr(cfg, flag) != flat[flag]:
            given = cfg.teacher_options[f.name]
            if getattr(cfg, flag) != given:
                raise ConfigError(
                    f"--{flag.replace('_', '-')} {getattr(cfg, flag)} and --teacher-option {f.name}={given} set one "
                    "option twice with two values: keep one"
                )


def _load_plugins(cfg: Any) -> None:
    """Import each of :attr:`plugins` (registered once per process)."""
    if not isinstance(cfg.plugins, list) or not all(isinstance(p, str) for p in cfg.plugins):
        raise ConfigError(f"plugins must be a list of modules or .py files, got {cfg.plugins!r}")
    try:
        load_plugins(cfg.plugins)
    except ValueError as err:
        raise ConfigError(str(err)) from None


def _check_engine(cfg: Any) -> None:
    """The generation engine and the update's options fit together."""
    if cfg.gradient_checkpointing and cfg.policy_mode == "score" and cfg.batch_decisions == "tree":
        raise ConfigError(
            "gradient_checkpointing cannot recompute the prompt trie's chunked tree attention: use it "
            "with --batch-decisions on or off in score mode, or in generate mode"
        )
    if cfg.logit_chunk_tokens and (cfg.policy_mode != "generate" or cfg.dist_strategy == "fsdp2"):
        raise ConfigError(
            "logit_chunk_tokens chunks the output head of generate mode's log-prob passes (score "
            "mode keeps only its candidates' logits); FSDP2 shards that head: leave it at 0 there"
        )
    if cfg.dist_strategy == "fsdp2" and (cfg.decode == "static" or cfg.rollout_dtype == "bf16"):
        raise ConfigError(
            "dist_strategy fsdp2 samples with the loop over the sharded weights: leave decode and "
            "rollout_dtype at auto (or loop / fp32)"
        )
    if cfg.backend == "vllm" and (cfg.decode != "auto" or cfg.rollout_dtype != "auto"):
        raise ConfigError(
            "decode and rollout_dtype choose the transformers backend's engine; vLLM has its own "
            "(leave them at auto with --backend vllm)"
        )
    if cfg.policy_mode == "score" and (cfg.decode != "auto" or cfg.rollout_dtype != "auto"):
        raise ConfigError(
            f"decode {cfg.decode} / rollout_dtype {cfg.rollout_dtype}: they choose how generate mode "
            "samples answers; score mode samples no text (it scores the candidate commands): use "
            "--policy-mode generate, or leave them at auto"
        )
    if cfg.backend == "vllm" and cfg.policy_mode != "generate":
        raise ConfigError(
            "backend vllm samples free-text answers: use it with --policy-mode generate (score mode "
            "ranks the commands with the training model itself)"
        )


def _check_report_to(cfg: Any) -> None:
    items = [x.strip() for x in str(cfg.report_to).split(",") if x.strip()]
    unknown = [x for x in items if x not in REPORT_TO]
    if not items or unknown:
        raise ConfigError(f"report_to takes {', '.join(REPORT_TO)} (comma-separated), got {cfg.report_to!r}")
    if "none" in items and len(items) > 1:
        raise ConfigError(f"report_to none reports to nothing else; got {cfg.report_to!r}")
    if "wandb" in items:
        if importlib.util.find_spec("wandb") is None:
            raise ConfigError(
                "report_to wandb needs Weights & Biases: pip install 'progpo[wandb]' (or drop wandb from --report-to)"
            )


def _check_rollout_streams(cfg: Any) -> None:
    """What rollout streams (forked processes, one block of groups each) need."""
    n = cfg.rollout_streams
    if cfg.policy_mode != "score":
        raise ConfigError(
            f"rollout_streams {n}: forked rollout streams act with the training model, which only "
            "score mode does; use --rollout-streams 1 in generate mode"
        )
    if cfg.device == "cuda":
        raise ConfigError(f"rollout_streams {n}: a forked process cannot use CUDA; use it with --device cpu")
    if cfg.env_backend != "sync":
        raise ConfigError(
            f"rollout_streams {n}: each stream builds its own envs in its process; use it with "
            f"--env-backend sync, not {cfg.env_backend}"
        )
    if cfg.rollout == "tree":
        raise ConfigError(
            f"rollout_streams {n}: a tree rollout's paths are not split into streams; use "
            "--rollout-streams 1 with --rollout tree"
        )
    if cfg.num_groups % n:
        raise ConfigError(
            f"rollout_streams {n}: num_groups ({cfg.num_groups}) must be a multiple of it (each "
            "stream plays a block of whole groups)"
        )


def _check_estimator_options(cfg: Any) -> None:
    """Every registered base's options are valid, used or not; an ``exclusive`` one set while
    another base trains is an error."""
    if not isinstance(cfg.estimator_options, dict) or not all(isinstance(k, str) for k in cfg.estimator_options):
        raise ConfigError(f"estimator_options must be a mapping (name: value), got {cfg.estimator_options!r}")
    conflict = exclusive_conflict(cfg.estimator, lambda flag: getattr(cfg, flag, None)) or _two_spellings(cfg)
    if conflict:
        raise ConfigError(conflict)
    for base in dict.fromkeys(spec.name for flag, spec, _ in flat_options() if hasattr(cfg, flag)):
        registered_estimator(base).make_options(cfg.base_option_values(base))


def _two_spellings(cfg: Any) -> str | None:
    """Why an option of the configured base is given twice with two values: its flat field
    away from its default, and ``estimator_options`` (:func:`spelling_conflict`)."""
    known = {f.name: f for f in flat_fields()}
    away = {
        flag: getattr(cfg, flag)
        for flag, _, _ in flat_options()
        if flag in known and getattr(cfg, flag) != known[flag].default
    }
    return spelling_conflict(cfg.estimator, away, cfg.estimator_options)
