"""Does one RL update transfer? Its effect on independent train and held-out batches.

    python benchmarks/update_transfer.py                    # default warm start, 2 updates, ~15 min on 2 cores
    python benchmarks/update_transfer.py --weights-file w.pt --configs adam:3e-4,adam:1e-4,sgd:0.3 \\
        --estimators progpo-gigpo,grpo --batches 3

The CPU demo's RL gains little on held-out games (``benchmarks/README.md``). This script asks
why, one update at a time, without the noise of a success-rate evaluation. From the policy pi_0
RL starts from (the default behaviour-cloning warm start, or ``--weights-file``):

* K update batches A_k: the trainer's own rollouts of iterations 1..K (8 tasks x 8, ``easy-train``);
* two measurement batches played by pi_0: B_train (16 other ``easy-train`` tasks x 8) and
  B_held (16 ``easy-valid`` tasks x 8, the held-out floor plans).

For each (estimator, optimizer, lr), from pi_0 with a fresh optimizer, one ``Trainer.update`` (:meth:`trainers.loop.updater.Updater.update`) on
A_k with that estimator's advantages gives pi_1 (``steps``: the steps it updated, those with
A != 0); then on each B (trajectory i, T_i steps,
GRPO outcome advantage A_t of its group, N trajectories):

* ``dJ = sum_i 1/N 1/T_i sum_t A_t [log pi_1(a_t|s_t) - log pi_0(a_t|s_t)]``: the first-order
  change of the outcome objective on B (> 0: the update moved probability towards what wins there);
* ``dlogp``: the same sum without ``A_t``: the mean change of the log-probability of pi_0's own
  commands, minus a sample estimate of KL(pi_0 || pi_1) there (<= 0 in expectation for any change:
  how far the update moved the policy on those states, not in which direction).

Other options are the trainer's (``python -m trainers.progpo --help``), e.g. ``--bc-steps``,
``--num-groups``. Configs are ``optimizer:lr`` with optimizer ``adam`` (AdamW, as the trainer) or ``sgd``. Prints a
table (mean over the K update batches, and their range) and writes it to ``--out``/table.md.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trainers.advantages import step_advantages
from trainers.config_flags import parse_args
from trainers.loop.trainer import Trainer
from trainers.rollouts.rollout import Rollout, collect_rollout
from trainers.seeds import task_seeds


def measure_rollout(tr: Trainer, env_fn: Any, seeds: list[int], seed: int) -> Rollout:
    """Groups on ``seeds`` played by the current policy (no update)."""
    from wrappers import GroupVectorEnv

    cfg = tr.cfg
    envs = GroupVectorEnv(
        env_fn, num_groups=len(seeds), group_size=cfg.group_size, backend="sync", seed=cfg.seed, tau_r=cfg.tau_r
    )
    tr.model.eval()
    try:
        with torch.no_grad():
            return collect_rollout(envs, tr.policy, seeds, seed=seed, history_k=cfg.history_k)
    finally:
        envs.close()


def step_adv(tr: Trainer, rollout: Rollout, estimator: str, **overrides: Any) -> np.ndarray:
    """Step advantages of ``rollout`` under the trainer's advantage options (``--progress-lambda``, ``--group-norm``, ...)
    with ``estimator`` instead of the configured one."""
    config = dataclasses.replace(tr.credit.adv_cfg, estimator=estimator, **overrides)
    return step_advantages(**rollout.advantage_inputs(), config=config).steps


def logprobs(tr: Trainer, rollout: Rollout, batch: int = 8) -> np.ndarray:
    """log pi(a_t | s_t) of every step of ``rollout`` under the current weights."""
    tr.model.eval()
    outs = [s.output for s in rollout.steps]
    lps: list[float] = []
    with torch.no_grad():
        for i in range(0, len(outs), batch):
            lps += [float(x.float().sum()) for x in tr.policy.compute_logprobs(outs[i : i + batch])]
    return np.array(lps)


def traj_weights(rollout: Rollout) -> np.ndarray:
    """1 / (N T_i) for each step: every trajectory weighs the same."""
    length = np.bincount([s.traj for s in rollout.steps])
    return np.array([1.0 / (length[s.traj] * len(length)) for s in rollout.steps])


class AnchorKL:
    """Before each optimizer step, add the gradient of ``beta`` x the k3 estimate of KL(pi_0 || pi)
    on ``n`` anchor steps drawn at random: states of ANOTHER update batch, not the one being updated
    (``--anchor-kl``: does holding the policy still on other states keep it still on B?)."""

    def __init__(self, tr: Trainer, anchors: list[Any], ref: np.ndarray, beta: float, n: int, seed: int) -> None:
        self.tr, self.anchors, self.ref, self.beta, self.n = tr, anchors, torch.as_tensor(ref), beta, n
        self.gen = np.random.default_rng(seed)

    def wrap(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        step = optimizer.step

        def step_with_anchor(*args: Any, **kwargs: Any) -> Any:
            pick = self.gen.choice(len(self.anchors), size=min(self.n, len(self.anchors)), replace=False)
            lp = torch.cat(
                [x.float().reshape(-1) for x in self.tr.policy.compute_logprobs([self.anchors[i] for i in pick])]
            )
            log_r = lp - self.ref[pick]  # log pi / pi_0 on pi_0's own commands
            (self.beta * (torch.exp(-log_r) - 1 + log_r).mean()).backward()  # k3 of KL(pi_0 || pi)
            return step(*args, **kwargs)

        optimizer.step = step_with_anchor  # type: ignore[method-assign]  # the anchored step replaces the optimizer's own
        return optimizer


def make_optimizer(kind: str, params: list[torch.nn.Parameter], lr: float) -> torch.optim.Optimizer:
    if kind == "adam":
        return torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    if kind == "sgd":
        return torch.optim.SGD(params, lr=lr)
    raise SystemExit(f"unknown optimizer {kind!r} (adam | sgd)")


def parse(argv: list[str] | None) -> tuple[argparse.Namespace, list[str]]:
    """This benchmark's flags, and the rest (``python -m trainers.progpo`` options)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--weights-file", help="start from these weights instead of the default warm start")
    p.add_argument("--configs", default="adam:3e-4,adam:1e-4", help="optimizer:lr,... (adam | sgd)")
    p.add_argument("--estimators", default="progpo-gigpo", help="advantage estimators of the update, comma-separated")
    p.add_argument(
        "--neg-scale",
        type=float,
        default=1.0,
        help="multiply the update's negative advantages by this (1: as the trainer; 0: A > 0 only)",
    )
    p.add_argument(
        "--anchor-kl",
        type=float,
        default=0.0,
        help="beta of a KL(pi_0 || pi) penalty on states of another update batch (0: off)",
    )
    p.add_argument("--anchor-states", type=int, default=48, help="anchor steps per optimizer step")
    p.add_argument("--batches", type=int, default=3, help="update batches K")
    p.add_argument("--measure-groups", type=int, default=16, help="groups in each measurement batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "update_transfer")
    return p.parse_known_args(argv)


def _table(args: argparse.Namespace, cfg: Any, splits: list[str], rows: list[tuple[str, str, dict]]) -> str:
    """The markdown table: per estimator and optimizer, the update's steps and its effect on each split."""
    cols = ["steps", *(f"{m}/{k}" for m in ("dJ", "dlogp") for k in splits)]
    lines = [
        f"`python benchmarks/update_transfer.py` -- one update from pi_0 on each of {args.batches} batches of "
        f"{cfg.num_groups} x {cfg.group_size} `{cfg.splits[0]}` episodes, measured on {args.measure_groups} x "
        f"{cfg.group_size} episodes of pi_0 per split (seed {args.seed}, negative advantages x {args.neg_scale:g}, "
        f"anchor KL {args.anchor_kl:g}); "
        "mean over the update batches [min, max].",
        "",
        "| estimator | optimizer:lr | " + " | ".join(cols) + " |",
        "|---|---|" + "---:|" * len(cols),
    ]
    for estimator, spec, res in rows:
        cells = [f"{np.mean(res['steps']):.0f}"]
        cells += [f"{np.mean(res[c]):+.4f} [{min(res[c]):+.3f}, {max(res[c]):+.3f}]" for c in cols[1:]]
        lines.append(f"| {estimator} | {spec} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def transfer(
    tr: Trainer,
    args: argparse.Namespace,
    estimator: str,
    spec: str,
    updates: list[Any],
    theta0: dict[str, Any],
    measure: dict[str, Any],
    base: dict[str, tuple[Any, Any, Any]],
    ref: list[Any],
) -> dict[str, list[float]]:
    """One (estimator, optimizer:lr) configuration: each update batch applied to ``theta0`` alone,
    and its first-order change of the measure rollouts' objective and log-probs."""
    kind, lr_text = spec.split(":")
    lr = float(lr_text)
    res: dict[str, list[float]] = {f"{m}/{k}": [] for k in measure for m in ("dJ", "dlogp")}
    res["steps"] = []
    for k_upd, rollout in enumerate(updates):
        tr.model.load_state_dict(theta0)
        tr.updater.optimizer = make_optimizer(kind, tr.params, lr)
        if args.anchor_kl > 0:  # anchors: the next update batch's steps
            j = (k_upd + 1) % len(updates)
            tr.updater.optimizer = AnchorKL(
                tr,
                [st.output for st in updates[j].steps],
                ref[j],
                args.anchor_kl,
                args.anchor_states,
                args.seed + k_upd,
            ).wrap(tr.updater.optimizer)
        tr.cfg.lr = lr
        tr.updater.cfg = dataclasses.replace(tr.updater.cfg, lr=lr)  # the update stage reads its own section
        adv = step_adv(tr, rollout, estimator)
        adv = np.where(adv < 0, args.neg_scale * adv, adv)
        res["steps"].append(tr.update(rollout.steps, adv, 1)["update/steps"])
        for k, ro_b in measure.items():
            adv_b, w, lp0 = base[k]
            dlp = logprobs(tr, ro_b) - lp0
            res[f"dJ/{k}"].append(float(np.sum(w * adv_b * dlp)))
            res[f"dlogp/{k}"].append(float(np.sum(w * dlp)))
    return res


def main(argv: list[str] | None = None) -> int:
    args, trainer_args = parse(argv)
    extra = ["--warm-start", "none", "--weights-file", args.weights_file] if args.weights_file else []
    cfg, _ = parse_args(
        [
            "--seed",
            str(args.seed),
            "--output-dir",
            str(args.out),
            "--no-progress-bars",
            "--no-tensorboard",
            *extra,
            *trainer_args,
        ]
    )
    tr = Trainer(cfg)  # sets torch's threads from --torch-threads (default 1)
    t0 = time.perf_counter()
    if cfg.resolved_warm_start == "bc":
        tr.warm_start()
    theta0 = copy.deepcopy(tr.model.state_dict())
    updates = [tr.rollout(k) for k in range(1, args.batches + 1)]
    measure = {
        "train": measure_rollout(tr, tr.env_fn, task_seeds(args.seed + 777, 1, args.measure_groups), args.seed + 555),
        "held-out": measure_rollout(
            tr, tr.eval_env_fn, task_seeds(args.seed + 778, 1, args.measure_groups), args.seed + 556
        ),
    }
    print(
        f"warm start and rollouts: {time.perf_counter() - t0:.0f} s; success of pi_0: "
        + ", ".join(f"{k} {np.mean([t.won for t in rollout.trajectories]):.3f}" for k, rollout in measure.items()),
        flush=True,
    )
    # the measure's advantage: plain GRPO on the outcome, whatever the controls of the update
    base = {
        k: (
            step_adv(tr, rollout, "grpo", gate="all_failed", shuffle_coverage=False),
            traj_weights(rollout),
            logprobs(tr, rollout),
        )
        for k, rollout in measure.items()
    }
    ref = [logprobs(tr, rollout) for rollout in updates] if args.anchor_kl > 0 else []

    rows = []
    for estimator in args.estimators.split(","):
        for spec in args.configs.split(","):
            res = transfer(tr, args, estimator, spec, updates, theta0, measure, base, ref)
            rows.append((estimator, spec, res))
            print(f"{estimator} {spec}: " + ", ".join(f"{k} {np.mean(v):+.4f}" for k, v in res.items()), flush=True)
    tr.model.load_state_dict(theta0)

    table = _table(args, cfg, list(measure), rows)
    print("\n" + table)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "table.md").write_text(table + "\n")
    tr.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
