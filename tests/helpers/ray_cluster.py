"""A real two-node Ray cluster on this machine for the `--executor ray` tests and bench/eval.

Each node is a `ray start --block` process in a session of its own, so stopping a node (or
killing it, raylet and workers with it) is one signal to its process group; nothing here runs
`ray stop`, which would stop every Ray process on the machine. Every node has 1 CPU, usage
stats off and the `ooda_sandbox` resource (`sandboxes` each, default 1); all of them listen on
a loopback address. The nodes share the cluster's Ray temp dir; each has a scratch dir of its
own ($TMPDIR of its workers), so a test can see that a task is running on a given node
(`running_on`). Ray rewrites "127.0.0.1" to the machine's routable address, so the head uses
127.0.0.2 and worker i 127.0.0.(2+i) (all loopback). Distinct addresses matter: a driver
attaches to the node whose address it reaches the head from, which must be the head's (a
driver on a killed worker's raylet would die with it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

NODE_IP = "127.0.0.2"
SANDBOX_RESOURCE = "ooda_sandbox"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((NODE_IP, 0))
        port: int = sock.getsockname()[1]
        return port


def _ray_cli() -> list[str]:
    return [sys.executable, "-c", "from ray.scripts.scripts import main; main()"]


@dataclass
class Cluster:
    address: str
    temp_dir: Path
    env: dict[str, str]
    nodes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    def start_node(self, name: str, ip: str, *, head: bool = False, sandboxes: int = 1) -> None:
        where = ["--head", "--port", self.address.rsplit(":", 1)[1],
                 "--include-dashboard=false"] if head else ["--address", self.address]
        log = open(self.temp_dir / f"{name}.log", "wb")  # noqa: SIM115 - the node keeps it
        self.scratch(name).mkdir(exist_ok=True)
        self.nodes[name] = subprocess.Popen(
            [*_ray_cli(), "start", *where, "--node-ip-address", ip, "--num-cpus", "1",
             "--resources", json.dumps({SANDBOX_RESOURCE: sandboxes}), "--disable-usage-stats",
             "--temp-dir", str(self.temp_dir), "--block"],
            stdout=log, stderr=subprocess.STDOUT,
            env={**self.env, "TMPDIR": str(self.scratch(name))}, start_new_session=True)

    def scratch(self, name: str) -> Path:
        """The node's scratch dir: its workers' $TMPDIR."""
        return self.temp_dir / f"tmp-{name}"

    def running_on(self, name: str) -> list[Path]:
        """The scratch dirs of the ooda tasks running on the node now (run_on_node's
        `ooda-ray-*` temp dirs; a killed task's stays)."""
        return sorted(self.scratch(name).glob("ooda-ray-*"))

    def wait_for(self, nodes: int, timeout: float = 60.0) -> None:
        """Until `nodes` nodes are alive (asked through `ray status`)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.nodes.items():
                if proc.poll() is not None:
                    raise RuntimeError(f"ray node {name} exited: "
                                       + (self.temp_dir / f"{name}.log").read_text()[-2000:])
            status = subprocess.run([*_ray_cli(), "status", "--address", self.address],
                                    capture_output=True, text=True, env=self.env, timeout=30)
            active = status.stdout.split("Active:", 1)[-1].split("Pending:", 1)[0]
            if status.returncode == 0 and active.count("node_") >= nodes:
                return
            time.sleep(0.5)
        raise RuntimeError(f"the Ray cluster did not reach {nodes} nodes in {timeout:.0f}s")

    def kill_node(self, name: str) -> None:
        """The node dies at once: SIGKILL to its raylet, workers and `ray start`."""
        proc = self.nodes[name]
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self) -> None:
        for name in reversed(list(self.nodes)):  # workers first, the head last
            proc = self.nodes[name]
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(timeout=10)
            with contextlib.suppress(ProcessLookupError):  # stragglers of the session
                os.killpg(proc.pid, signal.SIGKILL)


@contextlib.contextmanager
def local_cluster(workers: int = 1, *, head_sandboxes: int = 1,
                  sandboxes: int = 1) -> Iterator[Cluster]:
    """A head and `workers` worker nodes, stopped on the way out whatever happened; the head
    offers `head_sandboxes` task slots (0: it only drives), each worker `sandboxes`."""
    temp_dir = Path(tempfile.mkdtemp(prefix="ooda-ray-"))
    (temp_dir / "tmp").mkdir()
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
           # the nodes' scratch (a killed task's too) goes with the cluster
           "TMPDIR": str(temp_dir / "tmp"),
           # a killed node is declared dead in seconds, not the default half minute (5 missed
           # checks: a loaded machine's live node must not be declared dead)
           "RAY_health_check_period_ms": "1000", "RAY_health_check_failure_threshold": "5",
           "RAY_health_check_timeout_ms": "1000",
           # a loaded machine registers a node in more than the default 10 s
           "RAY_raylet_start_wait_time_s": "120"}
    cluster = Cluster(f"{NODE_IP}:{_free_port()}", temp_dir, env)
    try:
        cluster.start_node("head", NODE_IP, head=True, sandboxes=head_sandboxes)
        cluster.wait_for(1)
        for i in range(workers):  # one at a time: a loaded machine times out several
            cluster.start_node(f"worker{i + 1}", f"127.0.0.{3 + i}", sandboxes=sandboxes)
            cluster.wait_for(2 + i, timeout=180)
        yield cluster
    finally:
        cluster.stop()
        subprocess.run(["rm", "-rf", str(temp_dir)], check=False)
