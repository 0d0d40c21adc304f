"""Trainer iteration time: packed (batched) decisions vs one forward pass per decision.

Runs the credit-trap preset (``configs/alfworld_trap.yaml``: 8 x 8 episodes of at most 20 steps,
``tiny-128x2``, score mode, its 20-step warm start) once per path, each in a fresh process, and
prints per path the median over iterations 2..N of each phase (rollout, old log-probs, update),
the median of ``--eval-repeats`` evaluations of ``--eval-episodes`` held-out episodes, decisions/s,
update tokens/s, peak memory, and the ratio against the per-decision path:

* ``per-decision``: ``--batch-decisions off`` (the reference path; recorded runs re-run with it);
* ``rows``: ``--batch-decisions on`` (packed rows of prompt tries, dense tree masks), one thread;
* ``tree``: ``--batch-decisions tree`` (one prompt trie a pass, chunked sparse tree attention);
* ``rows-2t`` / ``tree-2t``: the same with ``--torch-threads 2`` (a run that has the 2-core machine
  to itself);
* ``tree-2t-2s``: ``tree-2t`` whose evaluations play in two concurrent streams (``--eval-streams 2``:
  the second in a forked process, one torch thread each; the iterations are ``tree-2t``'s);
* ``tree-2p``: ``tree-2t-2s`` whose rollouts play in two processes too (``--rollout-streams 2``:
  half of the groups in a forked process, as a run in two processes would split them).

Peak memory: the timed process's RSS, and the proportional set size of it and its forked streams
(sampled; pages they share counted once), which the memory ratio reads.

    python benchmarks/trainer_speed.py                       # 4 iterations per path (~20 min)
    python benchmarks/trainer_speed.py --iterations 6 --paths per-decision tree-2t
    python benchmarks/trainer_speed.py --quick               # a smoke run (~1 min)
    python benchmarks/trainer_speed.py --paths per-decision tree-2p --rounds 3   # drift-robust ratios
"""

from __future__ import annotations

import argparse
import contextlib
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

PATHS = {
    "per-decision": ["--batch-decisions", "off", "--torch-threads", "1"],
    "rows": ["--batch-decisions", "on", "--torch-threads", "1"],
    "rows-2t": ["--batch-decisions", "on", "--torch-threads", "2"],
    "tree": ["--batch-decisions", "tree", "--torch-threads", "1"],
    "tree-2t": ["--batch-decisions", "tree", "--torch-threads", "2"],
    "tree-2t-2s": ["--batch-decisions", "tree", "--torch-threads", "2", "--eval-streams", "2"],
    "tree-2p": ["--batch-decisions", "tree", "--torch-threads", "2", "--eval-streams", "2", "--rollout-streams", "2"],
}
BASELINE = "per-decision"
QUICK = ["--num-groups", "2", "--group-size", "4", "--max-steps", "4", "--bc-steps", "2"]


class PeakPss:
    """The largest proportional set size of this process plus its children (forked streams: pages
    they share are counted once, split between them), sampled every ``every`` seconds from
    ``/proc/<pid>/smaps_rollup`` (Linux) in a thread of its own. 0 where ``/proc`` does not tell."""

    def __init__(self, every: float = 0.25) -> None:
        self.every, self.peak_kib, self._stop = every, 0, threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> "PeakPss":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @staticmethod
    def _pss_kib(pid: int | str) -> int:
        try:
            with open(f"/proc/{pid}/smaps_rollup") as fh:
                return next((int(line.split()[1]) for line in fh if line.startswith("Pss:")), 0)
        except OSError:  # a child that just ended, or no /proc
            return 0

    @staticmethod
    def _children() -> list[str]:
        pids: list[str] = []
        for task in Path("/proc/self/task").glob("*/children"):
            with contextlib.suppress(OSError):
                pids += task.read_text().split()
        return pids

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.peak_kib = max(self.peak_kib, self._pss_kib("self") + sum(map(self._pss_kib, self._children())))


def child(args: argparse.Namespace) -> None:
    """One path in this process: the warm start, ``--iterations`` iterations, then the evaluations."""
    from trainers.config_flags import parse_args
    from trainers.loop.trainer import Trainer

    with tempfile.TemporaryDirectory() as tmp, PeakPss() as pss:
        argv = [
            "--config",
            args.config,
            "--output-dir",
            tmp,
            *"--no-progress-bars --no-tensorboard --save-every 0".split(),
            *(QUICK if args.quick else []),
            *PATHS[args.child],
        ]
        cfg, _ = parse_args(argv)
        trainer = Trainer(cfg)
        trainer.warm_start()
        rows = [trainer.train_iteration(i) for i in range(1, args.iterations + 1)]
        evals, played = [], 0
        for _ in range(args.eval_repeats):
            t0 = time.perf_counter()
            played = trainer.evaluate(args.iterations, episodes=args.eval_episodes)["eval/episodes"]
            evals.append(time.perf_counter() - t0)
        trainer.close()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    print(
        json.dumps(
            {
                "rows": rows,
                "eval_s": evals,
                "eval_episodes": played,
                "peak_mib": peak,
                "peak_pss_mib": pss.peak_kib / 1024,
            },
            default=float,
        )
    )


def summarize(name: str, out: dict) -> dict[str, float]:
    later = out["rows"][1:] or out["rows"]  # the first iteration also builds the envs
    med = {
        k: statistics.median(float(r.get(k, 0.0)) for r in later)
        for k in ("time/rollout_s", "time/old_logprob_s", "time/update_s", "time/iteration_s")
    }
    decisions = statistics.median(len_ for len_ in (float(r.get("update/steps", 0.0)) for r in later))
    steps = statistics.median(float(r["env_steps_per_s"]) * float(r["time/rollout_s"]) for r in later)
    tokens = statistics.median(float(r.get("update/input_tokens", 0.0)) for r in later)
    return {
        "path": name,
        "rollout_s": med["time/rollout_s"],
        "old_s": med["time/old_logprob_s"],
        "update_s": med["time/update_s"],
        "iteration_s": med["time/iteration_s"],
        "eval_s": statistics.median(out["eval_s"]),
        "eval_episodes": out.get("eval_episodes", 0),
        "decisions_per_s": steps / max(med["time/rollout_s"], 1e-9),
        "update_steps_per_s": decisions / max(med["time/update_s"], 1e-9),
        "update_tokens_per_s": tokens / max(med["time/update_s"], 1e-9),
        "peak_mib": out["peak_mib"],
        "peak_pss_mib": out.get("peak_pss_mib", 0.0),
    }


def _rounds_note(rounds: int) -> str:
    if rounds == 1:
        return ""
    return (
        f"; {rounds} rounds, the paths taken in turn in each: each figure is the median over the rounds, "
        "each ratio the median of the ratios within a round (a machine whose speed drifts over minutes "
        "moves both sides of a round's ratio alike)"
    )


def memory(row: dict[str, float]) -> float:
    """A path's peak memory for the ratio: the sampled PSS (streams included) where measured, else the RSS."""
    return row["peak_pss_mib"] or row["peak_mib"]


def _parse(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--config", default=str(ROOT / "configs" / "alfworld_trap.yaml"), help="the preset timed")
    ap.add_argument("--iterations", type=int, default=4, help="iterations per path (the median skips the first)")
    episodes = (
        "held-out episodes per timed evaluation (at least: rounded up so that every task of the split plays alike)"
    )
    ap.add_argument("--eval-episodes", type=int, default=48, help=episodes)
    ap.add_argument("--eval-repeats", type=int, default=3, help="timed evaluations per path (median)")
    rounds = "times every path is timed, the paths in turn each round; the table gives medians over the rounds and the median of each round's ratio"
    ap.add_argument("--rounds", type=int, default=1, help=rounds)
    ap.add_argument("--paths", nargs="+", default=list(PATHS), choices=list(PATHS), help="paths timed")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 x 4 episodes of 4 steps, 2 iterations")
    ap.add_argument("--child", choices=list(PATHS), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.quick:
        args.iterations, args.eval_episodes, args.eval_repeats = min(args.iterations, 2), 4, 1
    if not args.child and args.iterations < 2:
        ap.error("--iterations must be >= 2 (the first one is not timed)")
    if not args.child and args.rounds < 1:
        ap.error("--rounds must be >= 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    if args.child:
        child(args)
        return 0
    rounds: list[list[dict[str, float]]] = []  # per round, one summary a path
    for k in range(args.rounds):
        rounds.append([])
        for name in args.paths:
            cmd = [
                sys.executable,
                __file__,
                "--child",
                name,
                "--config",
                args.config,
                "--iterations",
                str(args.iterations),
                "--eval-episodes",
                str(args.eval_episodes),
                "--eval-repeats",
                str(args.eval_repeats),
                *(["--quick"] if args.quick else []),
            ]
            print(f"timing {name} (round {k + 1} of {args.rounds}) ...", file=sys.stderr, flush=True)
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
            if proc.returncode != 0:
                print(
                    f"error: path {name} failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}",
                    file=sys.stderr,
                )
                return 1
            rounds[-1].append(summarize(name, json.loads(proc.stdout.strip().splitlines()[-1])))
    base_index = args.paths.index(BASELINE) if BASELINE in args.paths else 0
    base_name = args.paths[base_index]
    print(
        f"\n{Path(args.config).name}{' (quick)' if args.quick else ''}: median of iterations 2..{args.iterations}, "
        f"eval: median of {args.eval_repeats} evaluations of {rounds[0][base_index]['eval_episodes']} episodes "
        f"(--eval-episodes {args.eval_episodes}, rounded up to every task of the split alike); ratio = {base_name} / "
        f"path{_rounds_note(args.rounds)}\n"
    )
    print(
        "| path | rollout s | old log-prob s | update s | iteration s | eval s | decisions/s | update tokens/s "
        "| peak RSS MiB | peak PSS MiB | iteration ratio | update ratio | eval ratio | memory ratio |"
    )
    print("|---|" + "---:|" * 13)
    for i, name in enumerate(args.paths):
        r = {key: statistics.median(rnd[i][key] for rnd in rounds) for key in rounds[0][i] if key != "path"}
        ratio = {
            key: statistics.median(rnd[base_index][key] / max(rnd[i][key], 1e-9) for rnd in rounds)
            for key in ("iteration_s", "update_s", "eval_s")
        }
        mem = statistics.median(memory(rnd[i]) / max(memory(rnd[base_index]), 1e-9) for rnd in rounds)
        print(
            f"| {name} | {r['rollout_s']:.1f} | {r['old_s']:.2f} | {r['update_s']:.1f} | {r['iteration_s']:.1f} "
            f"| {r['eval_s']:.1f} | {r['decisions_per_s']:.0f} | {r['update_tokens_per_s']:.0f} | {r['peak_mib']:.0f} "
            f"| {r['peak_pss_mib']:.0f} | {ratio['iteration_s']:.2f}x | {ratio['update_s']:.2f}x "
            f"| {ratio['eval_s']:.2f}x | {mem:.2f}x |"
        )
    if args.rounds > 1:
        print("\nratio in each round (iteration / eval):")
        for i, name in enumerate(args.paths):
            each = [
                f"{rnd[base_index]['iteration_s'] / rnd[i]['iteration_s']:.2f}x / "
                f"{rnd[base_index]['eval_s'] / rnd[i]['eval_s']:.2f}x"
                for rnd in rounds
            ]
            print(f"  {name}: {', '.join(each)}")
    print(
        "\npeak RSS: the timed process alone (getrusage); peak PSS: it and its forked streams, pages they share "
        "counted once (sampled every 0.25 s); memory ratio: of the PSS where /proc gives it, else of the RSS"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
