"""`python -m trainers.progpo`: train an LLM agent with ProGPO (or GRPO / RLOO / GiGPO).

With no arguments: the CPU learning demo (see ``TrainConfig``): a tiny model behaviour-cloned
from the searching expert on the embedded ``easy-train`` ALFWorld games, evaluated on the held-out
``easy-valid`` games, improved by ProGPO(GiGPO), evaluated again. It prints the held-out success
before and after RL with a 95% bootstrap interval and writes a report (curves + summary markdown)
under ``runs/progpo``; its figures and wall time are in ``benchmarks/README.md``, "Learning on
CPU". Examples::

    python -m trainers.progpo                                  # the CPU demo
    python -m trainers.progpo --model smollm2 --lora           # the same with the bundled SmolLM2-135M
    python -m trainers.progpo --config configs/webshop_cpu_demo.yaml   # WebShop on CPU
    python -m trainers.progpo --config configs/alfworld_gpu_paper.yaml --estimator progpo-gigpo
    python -m trainers.progpo --output-dir runs/progpo --iterations 6 --resume
    torchrun --nproc-per-node 2 -m trainers.progpo --num-groups 8   # 2 processes, 4 groups each (gloo on CPU)
    accelerate launch --num-processes 2 -m trainers.progpo          # the same through accelerate

A run owns its ``--output-dir``: a second run on it is refused (naming the holder's PID), and a
fresh run refuses a directory that holds an earlier run (``--overwrite`` replaces it, ``--resume``
continues it). Bad configs, corrupt checkpoints, unloadable models and env members that cannot
reset end with a one-line ``error: ...`` (exit status 2); set ``PROGPO_DEBUG=1`` for the
traceback. Ctrl-C and SIGTERM stop the run and say how to resume it.
"""

from __future__ import annotations

import errno
import os
import sys
from pathlib import Path

from trainers import stop_request
from trainers.config import ConfigError
from trainers.config_flags import parse_args
from trainers.distributed import teardown
from trainers.forked import ShareKilled
from trainers.rollouts.eval_episodes import PanelMismatch
from trainers.runs.checkpoint import CheckpointError, latest_checkpoint
from trainers.runs.run_dir import claim_run_dir
from trainers.runs.summary import rl_gain
from trainers.stop_request import Terminated
from wrappers.errors import UserError

__all__ = ["main"]


#: ``OSError`` numbers that are the machine's state, not a bug: said in one line
_SETUP_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)


def _first_line(err: BaseException) -> str:
    text = str(err)
    return text.splitlines()[0] if text else type(err).__name__


def _is_setup_problem(err: BaseException) -> bool:
    """A missing optional extra (``ImportError``) or a full / read-only disk: the user's to fix."""
    return isinstance(err, ImportError) or (isinstance(err, OSError) and err.errno in _SETUP_ERRNOS)


def _resume_advice(output_dir: str, what: str) -> str:
    """What to run next after a stop: ``--resume`` where a checkpoint exists, else a rerun."""
    try:
        latest_checkpoint(output_dir)
    except CheckpointError:
        return (
            f"{what} before the first checkpoint; nothing to resume: start again with the same command plus --overwrite"
        )
    return f"{what}; checkpoints are in {output_dir}/checkpoints: resume with the same command plus --resume"


def main(argv: list[str] | None = None) -> int:
    """``python -m trainers.progpo``: parse, train, print the summary; returns the exit status
    (0 done, 2 a bad setting or input said in one line, 130 / 143 interrupted)."""
    try:
        cfg, ns = parse_args(argv)
    except UserError as err:
        print(f"error: {_first_line(err)}", file=sys.stderr)
        return 2
    if ns.print_config:  # the config.yaml this run would write, and nothing else
        from trainers.runs.records import config_yaml  # the run's own writer, loaded only here

        print(config_yaml(cfg.to_sections()), end="")
        return 0
    lock = None
    with stop_request.stops_recorded():  # a Ctrl-C or SIGTERM that something swallows still stops the run
        try:
            # inside the try: a missing extra met while loading the trainer is said in one line
            from trainers.build import resolve_device
            from trainers.loop.trainer import Trainer  # (as above)

            if ns.resume and ns.overwrite:
                raise ConfigError("--resume continues the run in --output-dir and --overwrite replaces it: pass one")
            resolve_device(cfg.device)  # a device that is not there: refused before the run dir is claimed
            if int(os.environ.get("RANK", "0")) == 0:  # fail before the (slow) model load on a busy or used dir
                lock = claim_run_dir(cfg.output_dir, resume=bool(ns.resume), overwrite=ns.overwrite)
            if ns.resume:  # fail before the (slow) model load when there is nothing to resume
                ckpt = latest_checkpoint(cfg.output_dir) if ns.resume == "latest" else Path(ns.resume)
                if not ckpt.is_file():
                    raise CheckpointError(f"checkpoint {ckpt} does not exist")
                ns.resume = str(ckpt)
            trainer = Trainer(cfg)
            report = trainer.train(resume=ns.resume, run_lock=lock, accept_plugin_change=ns.accept_plugin_change)
            if not trainer.dist.is_main:  # rank 0 prints the summary
                return 0
        except ShareKilled as err:
            print(f"error: {_first_line(err)}", file=sys.stderr)
            print(_resume_advice(cfg.output_dir, "stopped"), file=sys.stderr)
            return 2
        except UserError as err:
            print(f"error: {_first_line(err)}", file=sys.stderr)
            return 2
        except Terminated:
            print(_resume_advice(cfg.output_dir, "terminated (SIGTERM)"), file=sys.stderr)
            return 143
        except KeyboardInterrupt:
            print(_resume_advice(cfg.output_dir, "interrupted"), file=sys.stderr)
            return 130
        except Exception as err:  # a missing extra or a full disk is the user's, anything else a bug
            if os.environ.get("PROGPO_DEBUG") or not _is_setup_problem(err):
                raise
            print(f"error: {type(err).__name__}: {_first_line(err)}", file=sys.stderr)
            return 2
        finally:
            if lock is not None:
                lock.release()
            teardown()

    if trainer.cfg.distill_label:
        print(f"teacher: {trainer.cfg.distill_label}")
    for kind in ("eval", "eval_extra"):
        try:
            g = rl_gain(trainer.history, kind)
        except PanelMismatch as err:
            print(f"{kind}: not compared: {err}")
            continue
        if g is not None:
            ci = f", 95% CI [{g['ci'][0]:+.3f}, {g['ci'][1]:+.3f}]" if g["ci"] else ""
            print(
                f"{g['split']}: success {g['start']:.3f} -> {g['end']:.3f} ({g['diff']:+.3f}{ci}; "
                f"{g['episodes']} held-out episodes)"
            )
            sc = g.get("score")
            if sc is not None and (sc["start"] != g["start"] or sc["end"] != g["end"]):
                print(
                    f"{g['split']}: mean score {sc['start']:.3f} -> {sc['end']:.3f} ({sc['diff']:+.3f}, 95% CI "
                    f"[{sc['ci'][0]:+.3f}, {sc['ci'][1]:+.3f}])"
                )
    print(f"report: {report}  (metrics: {report.parent / 'metrics.jsonl'}, curves: {report.parent / 'curves.png'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
