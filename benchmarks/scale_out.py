"""Scale-out figures: Ray env workers vs local processes, and 1 vs 2 gloo training ranks.

Prints three tables (median of ``--repeats`` runs each):

1. env steps/s of an ALFWorld ``GroupVectorEnv`` (2 groups x 2 members, one action per step)
   with ``backend="async"`` (4 local processes), ``"ray"`` on a 1-node loopback cluster (2 CPUs)
   and ``"ray"`` on a 2-node loopback cluster (1 CPU each);
2. the cost of one member step through Ray vs through a pipe (a no-op env, one member);
3. seconds per training iteration of the tiny-model trainer (toy rooms env) with 1 process vs
   2 gloo ranks under ``torchrun`` (same global batch of groups).

The loopback clusters are :class:`ray_cluster.LoopbackRayCluster` (benchmarks/ray_cluster.py) (127.0.0.2, each node
in its own process group, ended by group id). Run::

    PYTHONPATH=. python benchmarks/scale_out.py            # ~4 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ray_cluster import LoopbackRayCluster

from progpo_envs.rooms import SleepEnv
from wrappers import GroupVectorEnv

NODE_ENV = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")


def alfworld_steps_per_s(backend: str, steps: int, repeats: int, **kw) -> float:
    import progpo_envs  # noqa: F401  (registers the ids)

    envs = GroupVectorEnv(
        "ProGPO-ALFWorld-v0",
        num_groups=2,
        group_size=2,
        backend=backend,
        seed=0,
        env_kwargs={"split": "easy-train", "max_episode_steps": 50},
        **kw,
    )
    rates = []
    try:
        for r in range(repeats):
            _, infos = envs.reset(seed=r)
            t0 = time.perf_counter()
            for k in range(steps):
                cmds = [c[k % len(c)] for c in infos["admissible_commands"]]
                _, _, _, _, infos = envs.step(cmds)
            rates.append(4 * steps / (time.perf_counter() - t0))
    finally:
        envs.close()
    return statistics.median(rates)


def step_cost_us(backend: str, steps: int, repeats: int, **kw) -> float:
    envs = GroupVectorEnv(
        SleepEnv,
        num_groups=1,
        group_size=1,
        backend=backend,
        seed=0,
        env_kwargs={"step_time": 0.0, "episode_length": 10**9},
        **kw,
    )
    costs = []
    try:
        envs.reset()
        action = np.zeros(1, dtype=np.int64)
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                envs.step(action)
            costs.append((time.perf_counter() - t0) / steps * 1e6)
    finally:
        envs.close()
    return statistics.median(costs)


def ray_figures(steps: int, repeats: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for nodes, cpus in ((1, 2), (2, 1)):
        with LoopbackRayCluster(num_nodes=nodes, num_cpus=cpus, env=NODE_ENV) as cluster:
            cluster.connect(log_to_driver=False)
            out[f"alfworld_ray_{nodes}node"] = alfworld_steps_per_s("ray", steps, repeats, num_cpus=0.5)
            if nodes == 1:
                out["step_cost_ray_us"] = step_cost_us("ray", 200, repeats, num_cpus=0.5)
    return out


def trainer_seconds(world: int, iterations: int) -> float:
    run = Path(tempfile.mkdtemp(prefix="scale_out_"))
    args = [
        *"--env rooms --model tiny --iterations".split(),
        str(iterations),
        *(
            "--num-groups 4 --group-size 4 --max-steps 6 --eval-episodes 0 --no-progress-bars --no-tensorboard "
            "--device cpu --no-lora --warm-start none --no-baseline-random --score-norm mean --output-dir"
        ).split(),
        str(run),
    ]
    env = dict(NODE_ENV, GLOO_SOCKET_IFNAME="lo")
    launcher = (
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(world)]
        if world > 1
        else [sys.executable]
    )
    subprocess.run([*launcher, "-m", "trainers.progpo", *args], cwd=ROOT, env=env, check=True, capture_output=True)
    recs = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    times = [r["time/iteration_s"] for r in recs if r.get("kind") == "train"][1:]  # the first one warms up
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=15, help="ALFWorld vector steps per run")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=4, help="trainer iterations per launch (the first is dropped)")
    a = ap.parse_args()
    fig = {
        "alfworld_async": alfworld_steps_per_s("async", a.steps, a.repeats),
        "step_cost_pipe_us": step_cost_us("async", 200, a.repeats),
    }
    fig.update(ray_figures(a.steps, a.repeats))
    fig["trainer_1proc_s"] = trainer_seconds(1, a.iterations)
    fig["trainer_2rank_s"] = trainer_seconds(2, a.iterations)
    base = fig["alfworld_async"]
    print(f"cores: {os.cpu_count()}  load average: {os.getloadavg()[0]:.1f}\n")
    print("| ALFWorld GroupVectorEnv 2x2 | env steps/s | vs async |")
    print("|---|---|---|")
    for key, name in (
        ("alfworld_async", "async (4 local processes)"),
        ("alfworld_ray_1node", "ray, 1 node x 2 CPUs"),
        ("alfworld_ray_2node", "ray, 2 nodes x 1 CPU"),
    ):
        print(f"| {name} | {fig[key]:.1f} | {fig[key] / base:.2f}x |")
    print("\n| one member step of a no-op env | us/step |\n|---|---|")
    print(f"| pipe (async) | {fig['step_cost_pipe_us']:.0f} |\n| Ray actor call | {fig['step_cost_ray_us']:.0f} |")
    print(f"| ratio Ray / pipe | {fig['step_cost_ray_us'] / fig['step_cost_pipe_us']:.1f}x |")
    print("\n| tiny-model trainer, 4 groups x 4, rooms | s/iteration | speed-up |\n|---|---|---|")
    print(f"| 1 process | {fig['trainer_1proc_s']:.2f} | 1.00x |")
    print(
        f"| 2 gloo ranks (torchrun) | {fig['trainer_2rank_s']:.2f} | {fig['trainer_1proc_s'] / fig['trainer_2rank_s']:.2f}x |"
    )
    print("\n" + json.dumps(fig))


if __name__ == "__main__":
    main()
