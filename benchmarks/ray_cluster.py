"""A multi-node Ray cluster on one machine, on loopback only: for the tests and the scale-out
benchmark of ``GroupVectorEnv(backend="ray")`` across nodes (run from ``benchmarks/``, or with it
on ``sys.path``).

Each node is one ``ray start --block`` process started in its own process group (its own
session), with its own ``--temp-dir`` and its own ports, bound to ``127.0.0.2`` (Ray rewrites
``127.0.0.1`` / ``localhost`` to the machine's outward address; any other loopback address stays
on loopback). :meth:`LoopbackRayCluster.stop` ends each node by signalling its process group:
it never runs ``ray stop``, which would end every Ray process on the machine.

Example (a 2-node cluster, one CPU each; ``connect`` calls ``ray.init`` and waits for the nodes)::

    from ray_cluster import LoopbackRayCluster

    with LoopbackRayCluster(num_nodes=2, num_cpus=1) as cluster:
        ray = cluster.connect()
        print(cluster.address, len(ray.nodes()))   # 127.0.0.2:PORT 2
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["LoopbackRayCluster"]


def _free_port(ip: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


class LoopbackRayCluster:
    """``num_nodes`` Ray nodes on ``ip`` (a loopback address other than 127.0.0.1).

    Args:
        num_nodes: the head plus ``num_nodes - 1`` worker nodes.
        num_cpus: CPUs each node advertises.
        ip: the node IP address (127.0.0.2 by default: stays on loopback).
        env: environment of the node processes (default: this process's; set ``PYTHONPATH`` so
            their workers import the same code as this process).
        temp_root: parent of the nodes' temp dirs (default: a fresh dir under the system temp).
        object_store_bytes: object store size of each node.
    """

    def __init__(
        self,
        num_nodes: int = 2,
        num_cpus: int = 1,
        ip: str = "127.0.0.2",
        env: dict[str, str] | None = None,
        temp_root: str | Path | None = None,
        object_store_bytes: int = 100 * 1024**2,
    ) -> None:
        if num_nodes < 1 or num_cpus < 0:
            raise ValueError(f"num_nodes must be >= 1 and num_cpus >= 0, got {num_nodes}, {num_cpus}")
        self.num_nodes, self.num_cpus, self.ip = num_nodes, num_cpus, ip
        self.env = dict(os.environ if env is None else env)
        self.env.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        self.env.pop("RAY_ADDRESS", None)
        # ray start refuses long socket paths: keep the root short (AF_UNIX paths < 108 bytes)
        self.temp_root = Path(temp_root) if temp_root else Path(tempfile.mkdtemp(prefix="rayc", dir="/tmp"))
        self.object_store_bytes = object_store_bytes
        self.port = 0
        self.procs: list[subprocess.Popen] = []

    @property
    def address(self) -> str:
        """``ip:port`` of the head's GCS: what ``ray.init(address=...)`` and ``RAY_ADDRESS`` take."""
        return f"{self.ip}:{self.port}"

    def _node_command(self, k: int) -> list[str]:
        ports = {
            "--node-manager-port": _free_port(self.ip),
            "--object-manager-port": _free_port(self.ip),
            "--dashboard-agent-listen-port": _free_port(self.ip),
            "--dashboard-agent-grpc-port": _free_port(self.ip),
            "--runtime-env-agent-port": _free_port(self.ip),
            "--metrics-export-port": _free_port(self.ip),
        }
        cmd = [
            sys.executable,
            *"-m ray.scripts.scripts start --block --node-ip-address".split(),
            self.ip,
            "--num-cpus",
            str(self.num_cpus),
            "--temp-dir",
            str(self.temp_root / f"n{k}"),
            "--object-store-memory",
            str(self.object_store_bytes),
            "--disable-usage-stats",
        ]
        if k == 0:
            cmd += [
                "--head",
                "--port",
                str(self.port),
                *"--include-dashboard false --ray-client-server-port".split(),
                str(_free_port(self.ip)),
            ]
        else:
            cmd += ["--address", self.address]
        for flag, port in ports.items():
            cmd += [flag, str(port)]
        return cmd

    def _spawn(self, k: int) -> None:
        log = open(self.temp_root / f"node{k}.log", "wb")  # kept open for the node's life
        self.procs.append(
            subprocess.Popen(
                self._node_command(k),
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        )

    def _wait_port(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.procs[0].poll() is not None:
                raise RuntimeError(
                    f"the Ray head exited ({self.procs[0].returncode}); see {self.temp_root / 'node0.log'}"
                )
            with contextlib.suppress(OSError), socket.create_connection((self.ip, self.port), timeout=1.0):
                return
            time.sleep(0.2)
        raise TimeoutError(f"the Ray head did not listen on {self.address} within {timeout} s")

    def start(self, timeout: float = 120.0) -> "LoopbackRayCluster":
        """Start the head, wait for its port, then start the other nodes (they join in the background)."""
        self.temp_root.mkdir(parents=True, exist_ok=True)
        self.port = _free_port(self.ip)
        try:
            self._spawn(0)
            self._wait_port(timeout)
            for k in range(1, self.num_nodes):
                self._spawn(k)
        except BaseException:
            self.stop()
            raise
        return self

    def connect(self, timeout: float = 120.0, **init_kwargs: Any) -> Any:
        """``ray.init`` this process into the cluster and wait until every node is alive; returns ``ray``."""
        import ray

        ray.init(address=self.address, **init_kwargs)
        deadline = time.monotonic() + timeout
        while sum(bool(n.get("Alive")) for n in ray.nodes()) < self.num_nodes:
            dead = [k for k, p in enumerate(self.procs) if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Ray nodes {dead or 'some'} did not join within {timeout} s; logs in {self.temp_root}"
                )
            time.sleep(0.3)
        return ray

    def stop(self, grace: float = 10.0) -> None:
        """End every node's process group (SIGTERM, then SIGKILL after ``grace`` s)."""
        for proc in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in self.procs:
            try:
                proc.wait(timeout=max(deadline - time.monotonic(), 0.1))
            except subprocess.TimeoutExpired:
                pass
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group may outlive its leader (raylet, workers)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)
        self.procs.clear()

    def __enter__(self) -> "LoopbackRayCluster":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        with contextlib.suppress(Exception):
            import ray

            if ray.is_initialized():
                ray.shutdown()
        self.stop()
