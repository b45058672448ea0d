"""A Spark standalone master and workers started from the installed PySpark, stopped by their pids; with a
``harness.network.Network``, each worker runs inside its host's namespace and binds that host's address."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

import pyspark

from harness.cluster import HOST_VARIABLE
from harness.network import Network


@dataclass
class Cluster:
    master: str
    pids: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)  # those that SIGTERM did not stop (filled at the end)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive_workers(host: str, ui_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://{host}:{ui_port}/json/", timeout=2) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def _stop(proc: subprocess.Popen[bytes]) -> bool:
    """Stop ``proc``'s process group; False when SIGTERM was not enough."""
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)  # the JVM and what it started (executors, Python workers)
    try:
        proc.wait(timeout=20)
        return True
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        return False


@contextmanager
def standalone(
    tmp: Path, hosts: Sequence[str] = ("host-a", "host-b"), timeout: float = 240, net: Network | None = None
) -> Iterator[Cluster]:
    """A master and one worker (1 core) per name in ``hosts``, each with ``MQBENCH_HOST`` set to that name;
    every process is stopped when the block ends, also on failure. On 127.0.0.1, or with ``net``: the
    master on the root namespace's address, each worker in its host's namespace on that host's address."""
    home = Path(pyspark.__file__).parent
    env = {**os.environ, "SPARK_HOME": str(home), "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(tmp),
           "SPARK_WORKER_DIR": str(tmp / "work"), "SPARK_LOCAL_DIRS": str(tmp / "local")}
    port, ui = _free_port(), _free_port()
    cls = [str(home / "bin" / "spark-class")]
    procs: list[subprocess.Popen[bytes]] = []
    cluster: Cluster | None = None

    def start(prefix: tuple[str, ...], args: list[str], extra: dict[str, str], log: str) -> None:
        # `ip netns exec` execs the JVM, so the pid (and process group) stays the JVM's
        with open(tmp / log, "wb") as out:
            procs.append(subprocess.Popen([*prefix, *cls, *args], env={**env, **extra}, stdout=out,
                                          stderr=subprocess.STDOUT, start_new_session=True))

    def address(host: str | None) -> str:
        return "127.0.0.1" if net is None else net.address(host)

    try:
        start((), ["org.apache.spark.deploy.master.Master", "--host", address(None), "--port", str(port),
                   "--webui-port", str(ui)], {"SPARK_LOCAL_IP": address(None)}, "master.log")
        url = f"spark://{address(None)}:{port}"
        for name in hosts:
            start(() if net is None else net.prefix_for(name),
                  ["org.apache.spark.deploy.worker.Worker", "--host", address(name), "--cores", "1", "--memory", "1g",
                   "--webui-port", str(_free_port()), url], {HOST_VARIABLE: name, "SPARK_LOCAL_IP": address(name)},
                  f"worker-{name}.log")
        deadline = time.monotonic() + timeout
        while _alive_workers(address(None), ui) < len(hosts):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"standalone cluster did not come up; logs in {tmp}")
            time.sleep(1)
        cluster = Cluster(url, [p.pid for p in procs])
        yield cluster
    finally:
        for proc in reversed(procs):
            if not _stop(proc) and cluster is not None:
                cluster.killed.append(proc.pid)
