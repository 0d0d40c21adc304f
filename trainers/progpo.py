"""`python -m trainers.progpo`: train an LLM agent with ProGPO (or GRPO / RLOO / GiGPO).

With no arguments: the CPU learning demo (see ``TrainConfig``): a tiny model behaviour-cloned
from the searching expert on the embedded ``easy-train`` ALFWorld games, evaluated on the held-out
``easy-valid`` games, improved by ProGPO(GiGPO), evaluated again; ~15 minutes on 2 cores. It
prints the held-out success before and after RL with a 95% bootstrap interval and writes a
report (curves + summary markdown) under ``runs/progpo``. Examples::

    python -m trainers.progpo                                  # the CPU demo
    python -m trainers.progpo --model smollm2 --lora           # the same with the bundled SmolLM2-135M
    python -m trainers.progpo --env webshop --output-dir runs/webshop
    python -m trainers.progpo --config configs/alfworld_gpu_paper.yaml --estimator progpo-gigpo
    python -m trainers.progpo --output-dir runs/progpo --iterations 6 --resume
    torchrun --nproc-per-node 2 -m trainers.progpo --num-groups 8   # 2 processes, 4 groups each (gloo on CPU)
    accelerate launch --num-processes 2 -m trainers.progpo          # the same through accelerate

Bad configs, corrupt checkpoints and unloadable models end with a one-line ``error: ...``
(exit status 2); set ``PROGPO_DEBUG=1`` for the traceback.
"""
from __future__ import annotations

import os
import sys

from pathlib import Path

from trainers.checkpoint import CheckpointError, latest_checkpoint
from trainers.config import ConfigError, parse_args
from trainers.metrics import MetricsFileError

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    try:
        cfg, ns = parse_args(argv)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        from trainers.trainer import Trainer

        if ns.resume:  # fail before the (slow) model load when there is nothing to resume
            ckpt = latest_checkpoint(cfg.output_dir) if ns.resume == "latest" else Path(ns.resume)
            if not ckpt.is_file():
                raise CheckpointError(f"checkpoint {ckpt} does not exist")
            ns.resume = str(ckpt)
        trainer = Trainer(cfg)
        report = trainer.train(resume=ns.resume)
        if not trainer.dist.is_main:  # rank 0 prints the summary
            return 0
    except (ConfigError, CheckpointError, MetricsFileError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; resume with the same command plus --resume", file=sys.stderr)
        return 130
    except Exception as err:  # noqa: BLE001 - model / env loading errors carry their own fix
        name = type(err).__name__
        if os.environ.get("PROGPO_DEBUG"):
            raise
        if name in ("ModelLoadError", "ModelMismatchError", "FileNotFoundError", "ImportError", "ModuleNotFoundError", "ValueError"):
            print(f"error: {name}: {str(err).splitlines()[0] if str(err) else ''}", file=sys.stderr)
            return 2
        raise
    finally:
        from trainers.distributed import teardown

        teardown()
    from trainers.report import rl_gain

    for kind in ("eval", "eval_extra"):
        g = rl_gain(trainer.history, kind)
        if g is not None:
            ci = f", 95% CI [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]" if g["ci"] else ""
            print(f"{g['split']}: success {g['start']:.3f} -> {g['end']:.3f} ({g['diff']:+.3f}{ci}; "
                  f"{g['episodes']} held-out episodes)")
    print(f"report: {report}  (metrics: {report.parent / 'metrics.jsonl'}, curves: {report.parent / 'curves.png'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
