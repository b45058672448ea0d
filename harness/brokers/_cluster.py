"""Clusters of local broker nodes (process backend): started together, controlled one node at a time.

A cluster is ``ClusterLaunch.nodes``: each node its own processes (each in its own process group, as every
local broker), its own directory ``workdir/<node>/`` and ports, on loopback or on its own host (a network
namespace: its commands run behind ``NodeHost.prefix``). It is ready when ``Provisioner.cluster_ready``
passes (every node a member, a leader elected where there is one).

``ClusterControl`` is what node faults act on; a node fault acts on every process of the node, as the loss
of the machine it would run on: ``kill`` (SIGKILL, nothing flushed), ``start`` (the same commands again:
same ports and data directory, so the node rejoins with what it persisted), ``pause``/``resume`` (SIGSTOP /
SIGCONT of its process groups and their descendants: a long GC pause or a frozen VM). Invariant: only the
thread running the cases calls it while the provisioning block is open; the block's end stops every node,
whatever state a fault left it in (a paused node is resumed first, so it can take its SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from harness.brokers._base import Provisioner
from harness.brokers._process import BrokerProcess, _descendants
from harness.brokers._spec import ClusterLaunch, NodeHost, NodeLaunch
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError


class ClusterControl:
    """Kill, restart, pause and resume the nodes of one local cluster, and ask it which node leads.

    ``node=None`` means every node: ``kill()`` and ``start()`` without a node are the whole cluster's crash
    and restart (``kill-broker`` / ``restart-broker`` on a clustered row)."""

    def __init__(self, prov: Provisioner, launch: ClusterLaunch, hosts: Sequence[NodeHost],
                 started: list[list[BrokerProcess]], endpoint: BrokerEndpoint | None = None) -> None:
        self.prov, self.launch, self.hosts, self.started = prov, launch, list(hosts), started
        self.endpoint = endpoint
        self.system = prov.system
        self.url = launch.url
        self.paused: set[int] = set()
        self._lock = threading.Lock()

    @property
    def nodes(self) -> int:
        return len(self.launch.nodes)

    def host(self, node: int) -> str | None:
        """The scenario host node ``node`` runs on (None: the root namespace)."""
        return self.hosts[node].host

    def _targets(self, node: int | None) -> list[int]:
        return list(range(self.nodes)) if node is None else [node]

    def node_pids(self, node: int) -> list[int]:
        out: list[int] = []
        for proc in self.started[node]:
            if proc.exited() is None:
                out.append(proc.pid)
                out.extend(_descendants(proc.pid))
        return out

    def pids(self) -> list[int]:
        """Pids of every running process of the cluster (for memory and CPU sampling)."""
        return [pid for node in range(self.nodes) for pid in self.node_pids(node)]

    def node_running(self, node: int) -> bool:
        return bool(self.started[node]) and all(p.exited() is None for p in self.started[node])

    def running(self) -> bool:
        return all(self.node_running(n) for n in range(self.nodes))

    def kill(self, node: int | None = None) -> None:
        """SIGKILL every process of ``node`` (every node when None) and their descendants."""
        with self._lock:
            for n in self._targets(node):
                self.paused.discard(n)
                live = [proc for proc in self.started[n] if proc.exited() is None]
                _freeze(live)  # the node stops serving now, not after the scan of its descendants
                for proc in live:
                    _signal_all(proc.pid, signal.SIGKILL)
                    proc.stop(0.5)  # reaps it and removes it from the live set

    def start(self, node: int | None = None) -> str:
        """Start ``node`` (every dead node when None) again with its own commands, and wait until the cluster
        is whole (``cluster_ready``); returns the version it reports."""
        with self._lock:
            for n in self._targets(node):
                if self.node_running(n):
                    continue
                for proc in self.started[n]:
                    if proc.exited() is None:
                        proc.stop(1.0)
                self.started[n] = _start_node(self.launch, n, self.hosts[n])
            try:
                return wait_cluster(self.prov, self.launch, self.launch.ready_timeout, self.started)
            except _NotReady as exc:
                raise DriverError(f"the local {self.system} cluster was not whole again after a restart: {exc}") from None

    def pause(self, node: int) -> None:
        """SIGSTOP every process of ``node``: it holds its connections and answers nothing."""
        with self._lock:
            self.paused.add(node)
            _freeze([proc for proc in self.started[node] if proc.exited() is None])
            for pid in self.node_pids(node):  # descendants that left the process group too
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGSTOP)

    def resume(self, node: int) -> None:
        with self._lock:
            self.paused.discard(node)
            for pid in self.node_pids(node):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGCONT)

    def leader(self, resource: str) -> int:
        """The node leading ``resource`` now, asked of the broker (``Provisioner.leader``)."""
        assert self.endpoint is not None
        return self.prov.leader(self.endpoint, resource)


def _freeze(procs: Sequence[BrokerProcess]) -> None:
    """SIGSTOP the process groups of ``procs`` at once. Finding every descendant reads all of /proc (70 ms
    and more on a loaded machine), during which a node to be killed or paused would go on acknowledging
    writes after the fault's stamp; stopped, its process tree stays as it is for that scan."""
    for proc in procs:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGSTOP)


def _signal_all(pid: int, sig: int) -> None:
    victims = [pid, *_descendants(pid)]
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)
    for p in victims:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(p, sig)


def stop_nodes(started: Sequence[Sequence[BrokerProcess]], grace: float) -> None:
    """Stop every node at once (each node's processes in reverse order): a cluster's grace periods overlap
    instead of adding up."""
    threads = [threading.Thread(target=lambda procs=procs: [p.stop(grace) for p in reversed(procs)], daemon=True)
               for procs in started]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _start_node(launch: ClusterLaunch, index: int, host: NodeHost) -> list[BrokerProcess]:
    node: NodeLaunch = launch.nodes[index]
    home = launch.workdir / node.name
    home.mkdir(parents=True, exist_ok=True)
    started: list[BrokerProcess] = []
    try:
        for command in node.commands:
            if host.prefix:
                argv = command.argv if command.user is None else ("runuser", "-u", command.user, "--", *command.argv)
                command = replace(command, argv=(*host.prefix, *argv), user=None)
            started.append(BrokerProcess(command, cwd=home, log_dir=home / "logs"))
    except BaseException:
        for proc in reversed(started):
            proc.stop(1.0)
        raise
    return started


class _NotReady(Exception):
    pass


def wait_cluster(prov: Provisioner, launch: ClusterLaunch, timeout: float, started: list[list[BrokerProcess]]) -> str:
    """``cluster_ready`` until it passes; _NotReady when a node's process exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        for node, procs in zip(launch.nodes, started, strict=True):
            for proc in procs:
                status = proc.exited()
                if status is not None:
                    raise _NotReady(f"{node.name}'s {proc.name} exited with status {status}")
        remaining = deadline - time.monotonic()
        try:
            return prov.cluster_ready(launch, max(0.5, min(5.0, remaining)))
        except Exception as exc:  # noqa: BLE001 - any failure of the check means "not ready yet"
            if time.monotonic() >= deadline:
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise _NotReady(f"it did not form within {timeout:.0f} s (last check: {type(exc).__name__}"
                                f"{': ' + text if text else ''})") from None
        time.sleep(0.25)


@contextlib.contextmanager
def process_cluster(
    prov: Provisioner, shape: ClusterShape, logs_dir: Path | None, hosts: Sequence[NodeHost] | None,
    copy_logs: Callable[[Path, str, Path | None], Path], controls: dict[str, Any],
) -> Iterator[BrokerEndpoint]:
    """The nodes of a ``shape`` cluster of ``prov``'s broker, ready; every node stopped when the block ends.
    ``copy_logs(workdir, name, logs_dir) -> Path`` keeps the logs (``_provision._copy_logs``); ``controls``
    is the registry ``broker_control`` reads."""
    if shape.nodes > prov.max_nodes:
        raise DriverError(
            f"{prov.system} runs as {prov.max_nodes} node{'s' if prov.max_nodes != 1 else ''} at most here "
            f"({prov.cluster_note}); the scenario asks for {shape.nodes}"
        )
    node_hosts = list(hosts) if hosts else [NodeHost() for _ in range(shape.nodes)]
    if len(node_hosts) < shape.nodes:
        raise DriverError(f"a {shape.nodes}-node {prov.system} cluster needs {shape.nodes} hosts, "
                          f"and {len(node_hosts)} were given")
    node_hosts = node_hosts[: shape.nodes]
    workdir = Path(tempfile.mkdtemp(prefix=f"mqbench-{prov.system}-cluster-"))
    started: list[list[BrokerProcess]] = []
    launch: ClusterLaunch | None = None
    name = f"{prov.system}-cluster"
    try:
        try:
            launch = prov.prepare_cluster(workdir, shape, node_hosts)
            launched = time.monotonic()
            for i in range(len(launch.nodes)):
                started.append(_start_node(launch, i, node_hosts[i]))
            version = wait_cluster(prov, launch, launch.ready_timeout, started)
            ready = time.monotonic()
        except (_NotReady, OSError) as exc:
            kept = copy_logs(workdir, name, logs_dir)
            raise DriverError(f"the local {prov.system} cluster ({shape.label()}) failed to start: {exc}; "
                              f"its logs are in {kept}") from None
        endpoint = BrokerEndpoint(
            system=prov.system,
            url=launch.url,
            backend="process",
            implementation=prov.process_implementation,
            version=version or launch.version,
            extra={**launch.extra, "workdir": str(workdir), "startup_s": ready - launched,
                   "pids": [p.pid for procs in started for p in procs],
                   "hosts": [h.host for h in node_hosts]},
            shape=shape,
            nodes=tuple(n.url for n in launch.nodes),
        )
        control = ClusterControl(prov, launch, node_hosts, started, endpoint)
        controls[launch.url] = control
        yield endpoint
    finally:
        if launch is not None:
            controls.pop(launch.url, None)
        grace = launch.stop_grace if launch is not None else 5.0
        for procs in started:  # a paused node must run to take its SIGTERM
            for proc in procs:
                if proc.exited() is None:
                    _signal_all(proc.pid, signal.SIGCONT)
        stop_nodes(started, grace)
        if logs_dir is not None and started:
            copy_logs(workdir, name, logs_dir)
        shutil.rmtree(workdir, ignore_errors=True)
