"""Clusters of broker nodes, started together and controlled one node at a time, on either backend.

One plan for both backends: the provisioner's ``prepare_cluster`` (``prepare_cluster_in_image`` for nodes in an
image: the same ports, addresses and per-node settings, the image's files) gives ``ClusterLaunch.nodes``, each
node its own commands, directory ``workdir/<node>/`` and ports, on loopback or on its own host (a network
namespace: its commands run behind ``NodeHost.prefix``). Only how a node's processes are started, killed,
paused and stopped differs: :class:`ProcessNode` (local processes, each in its own process group) or
:class:`ContainerNode` (one container per command, host networking, ``harness.brokers._containers``). The
cluster is ready when ``Provisioner.cluster_ready`` passes (every node a member, a leader elected where there
is one).

``ClusterControl`` is what node faults act on; a node fault acts on every process of the node, as the loss
of the machine it would run on: ``kill`` (SIGKILL, nothing flushed), ``start`` (the same commands again:
same ports and data directory, so the node rejoins with what it persisted), ``pause``/``resume`` (SIGSTOP /
SIGCONT of its process groups and their descendants, or the engine's freezer for a container: a long GC pause
or a frozen VM). Invariant: only the thread running the cases calls it while the provisioning block is open;
the block's end stops every node, whatever state a fault left it in (a paused node is resumed first, so it
can take its SIGTERM).
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from harness import _watchdog
from harness.brokers._base import Provisioner
from harness.brokers._process import BrokerProcess, _descendants
from harness.brokers._spec import ClusterLaunch, NodeHost, NodeLaunch, discard_grace
from harness.drivers.base import BrokerEndpoint, ClusterShape, DriverError


class Node(Protocol):
    """The running processes of one node, however they are run."""

    def exited(self) -> str | None:
        """Which of its processes has ended and with what status (one clause), else None."""

    def running(self) -> bool: ...

    def pids(self) -> list[int]:
        """This machine's pids of every running process of the node (for CPU and memory sampling)."""

    def kill(self) -> None:
        """SIGKILL every process of the node at once (nothing flushed); it stays dead."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...

    def stop(self, grace: float) -> None:
        """SIGTERM (a paused node resumed first), up to ``grace`` s, SIGKILL; idempotent."""


StartNode = Callable[[ClusterLaunch, int, NodeHost], Node]


class ClusterControl:
    """Kill, restart, pause and resume the nodes of one cluster, and ask it which node leads.

    ``node=None`` means every node: ``kill()`` and ``start()`` without a node are the whole cluster's crash
    and restart (``kill-broker`` / ``restart-broker`` on a clustered row). ``start_node`` starts a node's
    commands again (the backend's)."""

    def __init__(self, prov: Provisioner, launch: ClusterLaunch, hosts: Sequence[NodeHost], started: list[Node],
                 start_node: StartNode, endpoint: BrokerEndpoint | None = None) -> None:
        self.prov, self.launch, self.hosts, self.started = prov, launch, list(hosts), started
        self.start_node, self.endpoint = start_node, endpoint
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
        return self.started[node].pids()

    def pids(self) -> list[int]:
        """Pids of every running process of the cluster (for memory and CPU sampling)."""
        return [pid for node in range(self.nodes) for pid in self.node_pids(node)]

    def node_running(self, node: int) -> bool:
        return self.started[node].running()

    def running(self) -> bool:
        return all(self.node_running(n) for n in range(self.nodes))

    def kill(self, node: int | None = None) -> None:
        """SIGKILL every process of ``node`` (every node when None)."""
        with self._lock:
            for n in self._targets(node):
                self.paused.discard(n)
                self.started[n].kill()

    def start(self, node: int | None = None) -> str:
        """Start ``node`` (every dead node when None) again with its own commands, and wait until the cluster
        is whole (``cluster_ready``); returns the version it reports."""
        with self._lock:
            for n in self._targets(node):
                if self.node_running(n):
                    continue
                self.started[n].stop(1.0)  # what is left of it (helpers, a removed container's output kept)
                self.started[n] = self.start_node(self.launch, n, self.hosts[n])
            try:
                return wait_cluster(self.prov, self.launch, self.launch.ready_timeout, self.started)
            except _NotReady as exc:
                raise DriverError(f"the {self.system} cluster was not whole again after a restart: {exc}") from None

    def pause(self, node: int) -> None:
        """Freeze every process of ``node``: it holds its connections and answers nothing."""
        with self._lock:
            self.paused.add(node)
            self.started[node].pause()

    def resume(self, node: int) -> None:
        with self._lock:
            self.paused.discard(node)
            self.started[node].resume()

    def leader(self, resource: str) -> int:
        """The node leading ``resource`` now, asked of the broker (``Provisioner.leader``)."""
        assert self.endpoint is not None
        return self.prov.leader(self.endpoint, resource)


class ProcessNode:
    """A node as local processes (the process backend): its commands started in order, each in its own process
    group, in the node's directory, behind its host's prefix."""

    def __init__(self, launch: ClusterLaunch, index: int, host: NodeHost) -> None:
        node: NodeLaunch = launch.nodes[index]
        self.name = node.name
        home = launch.workdir / node.name
        home.mkdir(parents=True, exist_ok=True)
        self.procs: list[BrokerProcess] = []
        try:
            for command in node.commands:
                if host.prefix:
                    argv = command.argv if command.user is None else ("runuser", "-u", command.user, "--", *command.argv)
                    command = replace(command, argv=(*host.prefix, *argv), user=None)
                self.procs.append(BrokerProcess(command, cwd=home, log_dir=home / "logs"))
        except BaseException:
            for proc in reversed(self.procs):
                proc.stop(1.0)
            raise

    def exited(self) -> str | None:
        for proc in self.procs:
            status = proc.exited()
            if status is not None:
                return f"{self.name}'s {proc.name} exited with status {status}"
        return None

    def running(self) -> bool:
        return bool(self.procs) and all(p.exited() is None for p in self.procs)

    def _live(self) -> list[BrokerProcess]:
        return [proc for proc in self.procs if proc.exited() is None]

    def pids(self) -> list[int]:
        out: list[int] = []
        for proc in self._live():
            out.append(proc.pid)
            out.extend(_descendants(proc.pid))
        return out

    def kill(self) -> None:
        live = self._live()
        _freeze(live)  # the node stops serving now, not after the scan of its descendants
        for proc in live:
            _signal_all(proc.pid, signal.SIGKILL)
            proc.stop(0.5)  # reaps it and removes it from the live set

    def pause(self) -> None:
        _freeze(self._live())
        for pid in self.pids():  # descendants that left the process group too
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGSTOP)

    def resume(self) -> None:
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGCONT)

    def stop(self, grace: float) -> None:
        for proc in self._live():  # a paused node must run to take its SIGTERM
            _signal_all(proc.pid, signal.SIGCONT)
        for proc in reversed(self.procs):
            proc.stop(grace)


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


def stop_nodes(started: Sequence[Node], grace: float) -> None:
    """Stop every node at once (each node's processes in reverse order): a cluster's grace periods overlap
    instead of adding up."""
    threads = [threading.Thread(target=node.stop, args=(grace,), daemon=True) for node in started]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


class _NotReady(Exception):
    pass


def wait_cluster(prov: Provisioner, launch: ClusterLaunch, timeout: float, started: Sequence[Node]) -> str:
    """``cluster_ready`` until it passes; _NotReady when a node's process exits first or ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while True:
        for node in started:
            gone = node.exited()
            if gone:
                raise _NotReady(gone)
        remaining = deadline - time.monotonic()
        try:
            return prov.cluster_ready(launch, max(0.5, min(5.0, remaining)))
        except Exception as exc:  # noqa: BLE001 - any failure of the check means "not ready yet"
            if time.monotonic() >= deadline:
                text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                raise _NotReady(f"it did not form within {timeout:.0f} s (last check: {type(exc).__name__}"
                                f"{': ' + text if text else ''})") from None
        time.sleep(0.25)


@dataclass(frozen=True)
class NodeBackend:
    """What differs between the backends of a cluster: the plan for them (``prepare``: ``prepare_cluster`` or
    ``prepare_cluster_in_image``), how a node is started (``start_node``), what the endpoint says about it
    (``name``: the endpoint's backend, ``what``: the cluster in a sentence, ``extra(started)``, ``version``)
    and the failures of a start it turns into a sentence (``errors``, beside OSError)."""

    name: str
    what: str
    prepare: Callable[[Path, ClusterShape, Sequence[NodeHost]], ClusterLaunch]
    start_node: StartNode
    extra: Callable[[Sequence[Node]], dict[str, Any]]
    version: str = ""
    errors: tuple[type[Exception], ...] = ()


def process_nodes(prov: Provisioner) -> NodeBackend:
    """Nodes as local processes."""
    return NodeBackend(
        name="process", what=f"the local {prov.system} cluster", prepare=prov.prepare_cluster, start_node=ProcessNode,
        extra=lambda started: {"pids": [p.pid for node in started for p in getattr(node, "procs", [])]})


class ContainerNode:
    """A node as containers (the containers backend): one container per command (``BrokerNode``), host
    networking, in the node's directory; the cluster's folder is mounted at its own path (the nodes' files
    and what they share). Killed with SIGKILL to every container, paused with the engine's freezer."""

    def __init__(self, image: Any, launch: ClusterLaunch, index: int, host: NodeHost) -> None:
        from harness.brokers._containers import BrokerNode

        node = launch.nodes[index]
        self.name = node.name
        home = launch.workdir / node.name
        home.mkdir(parents=True, exist_ok=True)
        commands = [replace(c, argv=(*host.prefix, *c.argv)) if host.prefix else c for c in node.commands]
        self.node = BrokerNode(image, commands, home, host_netns=bool(host.prefix), mount=launch.workdir,
                               node=node.name)
        try:
            self.node.start()
        except BaseException:
            self.node.stop(1.0)
            raise

    def exited(self) -> str | None:
        gone = self.node.exited()
        return f"{self.name}'s {gone}" if gone else None

    def running(self) -> bool:
        return bool(self.node.containers) and all(c.exit_status() is None for c in self.node.containers)

    def pids(self) -> list[int]:
        return self.node.pids()

    def kill(self) -> None:
        self.node.kill_all()

    def pause(self) -> None:
        self.node.pause()

    def resume(self) -> None:
        self.node.resume()

    def stop(self, grace: float) -> None:
        self.node.stop(grace)

    def names(self) -> list[str]:
        return self.node.names()


def container_nodes(prov: Provisioner) -> NodeBackend:
    """Nodes in ``prov``'s image (``_images.choose``); DriverError saying why when there is none."""
    from harness.brokers import _images
    from harness.brokers._containers import ContainerError, copy_out

    choice = _images.choose(prov.system)
    image = choice.image
    if image is None:
        raise DriverError(f"the containers backend cannot run {prov.system}: {choice.reason}")
    files = _images.files(image, copy_out(image))

    def extra(started: Sequence[Node]) -> dict[str, Any]:
        image_id = image.id
        if not image_id:
            with contextlib.suppress(Exception):
                image_id = str(_images.client().images.get(image.name).id)
        return {"image": image.name, "image_id": image_id, "image_origin": image.origin,
                "containers": [name for node in started for name in getattr(node, "names", list)()]}

    return NodeBackend(
        name="containers", what=f"the {prov.system} cluster in {image.name}",
        prepare=lambda workdir, shape, hosts: prov.prepare_cluster_in_image(workdir, shape, hosts, files),
        start_node=lambda launch, index, host: ContainerNode(image, launch, index, host),
        extra=extra, version=image.version, errors=(ContainerError,))


@contextlib.contextmanager
def run_cluster(
    prov: Provisioner, shape: ClusterShape, logs_dir: Path | None, hosts: Sequence[NodeHost] | None,
    copy_logs: Callable[[Path, str, Path | None], Path], controls: dict[str, Any], backend: NodeBackend,
) -> Iterator[BrokerEndpoint]:
    """The nodes of a ``shape`` cluster of ``prov``'s broker on ``backend``, ready; every node stopped when the
    block ends. ``copy_logs(workdir, name, logs_dir) -> Path`` keeps the logs (``_provision._copy_logs``);
    ``controls`` is the registry ``broker_control`` reads."""
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
    folder, undo = _watchdog.temporary_folder(f"mqbench-{prov.system}-cluster-")  # removed too if this process is killed
    workdir = Path(folder)
    started: list[Node] = []
    launch: ClusterLaunch | None = None
    name = f"{prov.system}-cluster"
    failures: tuple[type[Exception], ...] = (_NotReady, OSError, *backend.errors)
    try:
        try:
            launch = backend.prepare(workdir, shape, node_hosts)
            launched = time.monotonic()
            for i in range(len(launch.nodes)):
                started.append(backend.start_node(launch, i, node_hosts[i]))
            version = wait_cluster(prov, launch, launch.ready_timeout, started)
            ready = time.monotonic()
        except failures as exc:
            stop_nodes(started, 0)  # a container's output is kept in the node's logs as it is removed
            kept = copy_logs(workdir, name, logs_dir)
            raise DriverError(f"{backend.what} ({shape.label()}) failed to start: {exc}; "
                              f"its logs are in {kept}") from None
        endpoint = BrokerEndpoint(
            system=prov.system,
            url=launch.url,
            backend=backend.name,
            implementation=prov.process_implementation,
            version=version or launch.version or backend.version,
            extra={**launch.extra, **backend.extra(started), "workdir": str(workdir), "startup_s": ready - launched,
                   "hosts": [h.host for h in node_hosts]},
            shape=shape,
            nodes=tuple(n.url for n in launch.nodes),
        )
        control = ClusterControl(prov, launch, node_hosts, started, backend.start_node, endpoint)
        controls[launch.url] = control
        yield endpoint
    finally:
        if launch is not None:
            controls.pop(launch.url, None)
        stop_nodes(started, discard_grace(launch))  # the workdir goes next
        if logs_dir is not None and started:
            copy_logs(workdir, name, logs_dir)
        _watchdog.remove_folder(workdir, undo)


def process_cluster(
    prov: Provisioner, shape: ClusterShape, logs_dir: Path | None, hosts: Sequence[NodeHost] | None,
    copy_logs: Callable[[Path, str, Path | None], Path], controls: dict[str, Any],
) -> contextlib.AbstractContextManager[BrokerEndpoint]:
    """``run_cluster`` with every node as local processes."""
    return run_cluster(prov, shape, logs_dir, hosts, copy_logs, controls, process_nodes(prov))


def container_cluster(
    prov: Provisioner, shape: ClusterShape, logs_dir: Path | None, hosts: Sequence[NodeHost] | None,
    copy_logs: Callable[[Path, str, Path | None], Path], controls: dict[str, Any],
) -> contextlib.AbstractContextManager[BrokerEndpoint]:
    """``run_cluster`` with every node in containers of ``prov``'s image."""
    return run_cluster(prov, shape, logs_dir, hosts, copy_logs, controls, container_nodes(prov))
