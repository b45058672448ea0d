"""``provision``: a ready broker for the duration of a ``with`` block, always torn down afterwards.

Teardown runs on normal exit, on exceptions and on KeyboardInterrupt (the CLI turns SIGTERM into one); the
process and container modules also stop leftovers at interpreter exit. A failed start copies the broker's
logs into ``logs_dir`` (or a kept temporary directory) and raises DriverError naming it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

from harness import _watchdog
from harness.brokers import _images
from harness.brokers._base import Provisioner, redact
from harness.brokers._choice import choose_backend
from harness.brokers._cluster import ClusterControl, container_cluster, process_cluster
from harness.brokers._containers import BrokerNode, ContainerError, copy_out
from harness.brokers._process import BrokerProcess, _descendants
from harness.brokers._registry import provisioner
from harness.brokers._spec import Command, Launch, NodeHost, discard_grace
from harness.drivers.base import SINGLE_NODE, BrokerEndpoint, ClusterShape, DriverError

EXTERNAL_PROBE_TIMEOUT = 5.0


@dataclass(frozen=True)
class Placement:
    """Where a local broker process runs when a scenario places it on a host (``harness.network``): its
    commands start behind ``prefix`` (``ip netns exec NS``) and listen on that host's loopback as usual;
    ``route`` turns the launch's URL into the one this process (the root namespace) reaches it by.
    For a broker that tells clients an address to use next (``Provisioner.place``): ``clients`` are the
    hosts its clients run on (None: the root namespace), ``advertise(client, shown, own)`` sends a client
    given port ``shown`` to port ``own`` and returns the address it reaches that at, ``mirror(client, shown,
    port)`` makes ``127.0.0.1:port`` on the client's host lead to the broker's ``port``
    (``harness.network.Routes``)."""

    host: str
    prefix: tuple[str, ...]
    route: Callable[[str], str]
    clients: tuple[str | None, ...] = (None,)
    advertise: Callable[[str | None, int, int], str] | None = None
    mirror: Callable[[str | None, int, int], None] | None = None

    def command(self, command: Command) -> Command:
        # ``ip netns exec`` needs root, so a command run as another user drops to it after entering
        argv = command.argv if command.user is None else ("runuser", "-u", command.user, "--", *command.argv)
        return replace(command, argv=(*self.prefix, *argv), user=None)


def advertises_address(system: str) -> bool:
    """True when ``system``'s broker tells clients an address to connect to next and its provisioner cannot
    make that address lead through the routes (``Provisioner.place``): it cannot run across hosts."""
    prov = provisioner(system)
    return prov is not None and prov.advertises_address and type(prov).place is Provisioner.place


class StartFailed(Exception):
    """The broker exited or did not answer its probe in time (message: what happened)."""


@contextlib.contextmanager
def provision(
    system: str, backend: str = "auto", url: str | None = None, logs_dir: Path | None = None,
    placement: Placement | None = None, shape: ClusterShape = SINGLE_NODE, node_hosts: list[NodeHost] | None = None,
) -> Iterator[BrokerEndpoint]:
    """Yield the endpoint of a ready ``system`` broker; stop it (if started here) when the block ends.

    Raises DriverError (one sentence) when no backend can be used, an external broker does not answer, or
    a broker fails to start; in the last case its logs are in ``logs_dir/<system>/``. ``placement`` puts a
    provisioned broker (a local process, or the processes of its containers) on a host; an external broker
    stays where it is. ``shape`` with more than one node starts a cluster, node i on ``node_hosts[i]``
    (default: every node on loopback): its nodes are local processes (what ``auto`` means for a cluster) or,
    with ``backend="containers"``, containers; an external URL is taken to be a broker of that shape.
    """
    choice = choose_backend(system, backend, url)
    prov = provisioner(system)
    if choice.backend is None or prov is None:
        raise DriverError(choice.reason)
    if choice.backend == "external":
        assert url is not None
        yield replace(_external(prov, url), shape=shape)
    elif shape.clustered:
        if choice.backend == "containers" and backend == "auto":  # auto: a cluster's nodes are local processes
            choice = choose_backend(system, "process")
            if choice.backend is None:
                raise DriverError(f"a {shape.nodes}-node {system} cluster runs on the process backend unless "
                                  f"--backend containers asks for containers: {choice.reason}")
        cluster = process_cluster if choice.backend == "process" else container_cluster
        with cluster(prov, shape, logs_dir, node_hosts, _copy_logs, _CONTROLS) as endpoint:
            yield endpoint
    elif choice.backend == "process":
        with _process_broker(prov, logs_dir, placement) as endpoint:
            yield endpoint
    else:
        with _container_broker(prov, logs_dir, placement) as endpoint:
            yield endpoint


def _external(prov: Provisioner, url: str) -> BrokerEndpoint:
    try:
        version = prov.probe(url, EXTERNAL_PROBE_TIMEOUT)
    except Exception as exc:
        raise DriverError(
            f"the {prov.system} broker at {redact(url)} does not answer ({_describe(exc)}); check the URL and that it runs"
        ) from None
    return BrokerEndpoint(system=prov.system, url=url, backend="external", version=version)


class BrokerControl:
    """Kill and restart one local broker started by ``provision`` (process backend), for fault injection.

    The broker proper is the launch's last command (earlier ones are helpers such as RabbitMQ's epmd, which
    keep running). ``start`` runs that command again with the same argv and environment: same port, same
    data directory, so what the broker persisted is there again. Used by the thread that runs the cases;
    ``stop`` of the provisioning block still stops whatever runs at its end.
    """

    def __init__(self, prov: Provisioner, launch: Launch, workdir: Path, started: list[BrokerProcess]) -> None:
        self.prov, self.launch, self.workdir, self.started = prov, launch, workdir, started
        self.system = prov.system
        self.url = launch.url
        self._restart_state: object = None
        self._lock = threading.Lock()

    def pids(self) -> list[int]:
        """Pids of the running broker processes and their descendants (for memory sampling)."""
        out: list[int] = []
        for proc in list(self.started):
            if proc.exited() is None:
                out.append(proc.pid)
                out.extend(_descendants(proc.pid))
        return out

    def running(self) -> bool:
        return bool(self.started) and self.started[-1].exited() is None

    def kill(self) -> None:
        """SIGKILL the broker process group and its descendants (no shutdown: a crash)."""
        with self._lock:
            proc = self.started[-1]
            if proc.exited() is not None:
                return
            with contextlib.suppress(Exception):
                self._restart_state = self.prov.restart_state(self.url)
            victims = [proc.pid, *_descendants(proc.pid)]
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            for pid in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            proc.stop(0.5)  # reaps it and removes it from the live set

    def start(self) -> str:
        """Start the broker again (after ``kill``) and wait until it answers; returns its version."""
        with self._lock:
            if self.running():
                return ""
            command = self.prov.restart_command(self.launch.commands[-1], self._restart_state)
            proc = BrokerProcess(command, cwd=self.workdir, log_dir=self.workdir / "logs")
            self.started[-1] = proc
            try:
                return _wait_ready(self.prov, self.url, self.launch.ready_timeout, lambda: _first_exit([proc]))
            except StartFailed as exc:
                raise DriverError(f"the local {self.system} broker did not come back after a restart: {exc}") from None


class ContainerControl:
    """Kill and restart one broker started by ``provision`` in containers, as :class:`BrokerControl` does for a
    local process: ``kill`` SIGKILLs the broker proper's container, ``start`` runs its command again in a new
    container on the same port and data directory (the workdir the containers share with this machine)."""

    def __init__(self, prov: Provisioner, launch: Launch, node: BrokerNode) -> None:
        self.prov, self.launch, self.node = prov, launch, node
        self.system = prov.system
        self.url = launch.url
        self._restart_state: object = None

    def pids(self) -> list[int]:
        """This machine's pids of the broker's processes, in every container of the node."""
        return self.node.pids()

    def running(self) -> bool:
        return self.node.running()

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self._restart_state = self.prov.restart_state(self.url)
        self.node.kill()

    def start(self) -> str:
        command = self.prov.restart_command(self.launch.commands[-1], self._restart_state)
        try:
            return self.node.restart(command, lambda: _wait_ready(self.prov, self.url, self.launch.ready_timeout,
                                                                  self.node.exited))
        except (StartFailed, ContainerError) as exc:
            raise DriverError(f"the {self.system} container did not come back after a restart: {exc}") from None


_CONTROLS: dict[str, BrokerControl | ClusterControl | ContainerControl] = {}


def broker_control(endpoint: BrokerEndpoint | None) -> BrokerControl | ClusterControl | ContainerControl | None:
    """The kill/restart handle of a broker provisioned here (a local process, its containers, or a
    ``ClusterControl`` for a cluster), else None."""
    if endpoint is None:
        return None
    return _CONTROLS.get(endpoint.url)


@contextlib.contextmanager
def _process_broker(prov: Provisioner, logs_dir: Path | None, placement: Placement | None) -> Iterator[BrokerEndpoint]:
    folder, undo = _watchdog.temporary_folder(f"mqbench-{prov.system}-")  # removed too if this process is killed
    workdir = Path(folder)
    started: list[BrokerProcess] = []
    launch = None
    try:
        try:
            launch = prov.prepare_process(workdir)
            local_url = launch.url
            if placement is not None:
                launch = prov.place(launch, placement)
                commands = tuple(placement.command(c) for c in launch.commands)
                launch = replace(launch, commands=commands, url=placement.route(launch.url))
            launched = time.monotonic()
            for command in launch.commands:
                started.append(BrokerProcess(command, cwd=workdir, log_dir=workdir / "logs"))
            version = _wait_ready(prov, launch.url, launch.ready_timeout, lambda: _first_exit(started))
            ready = time.monotonic()
        except (StartFailed, OSError) as exc:
            kept = _copy_logs(workdir, prov.system, logs_dir)
            raise DriverError(
                f"the local {prov.system} broker failed to start: {exc}; its logs are in {kept}"
            ) from None
        _CONTROLS[launch.url] = BrokerControl(prov, launch, workdir, started)
        yield BrokerEndpoint(
            system=prov.system,
            url=launch.url,
            backend="process",
            implementation=prov.process_implementation,
            version=version or launch.version,
            extra={**launch.extra, "pids": [p.pid for p in started], "workdir": str(workdir),
                   "startup_s": ready - launched,
                   **({} if placement is None else {"host": placement.host, "local_url": local_url})},
        )
    finally:
        if launch is not None:
            _CONTROLS.pop(launch.url, None)
        grace = discard_grace(launch)  # the workdir goes next
        for proc in reversed(started):
            proc.stop(grace)
        if logs_dir is not None and started:
            _copy_logs(workdir, prov.system, logs_dir)
        _watchdog.remove_folder(workdir, undo)


@contextlib.contextmanager
def _container_broker(prov: Provisioner, logs_dir: Path | None, placement: Placement | None) -> Iterator[BrokerEndpoint]:
    """The process backend's launch run in the system's image (``_images.choose``), one container per command,
    with host networking: the same loopback ports, settings and workdir as a local process. Later, a cluster's
    nodes are one :class:`BrokerNode` per ``NodeLaunch``."""
    image = _images.choose(prov.system).image
    if image is None:
        raise DriverError(f"the containers backend cannot run {prov.system}: {_images.choose(prov.system).reason}")
    folder, undo = _watchdog.temporary_folder(f"mqbench-{prov.system}-")  # removed too if this process is killed
    workdir = Path(folder)
    node: BrokerNode | None = None
    launch = None
    try:
        try:
            launch = prov.prepare_in_image(workdir, _images.files(image, copy_out(image)))
            local_url = launch.url
            if placement is not None:
                launch = prov.place(launch, placement)
                commands = tuple(placement.command(c) for c in launch.commands)
                launch = replace(launch, commands=commands, url=placement.route(launch.url))
            launched = time.monotonic()
            node = BrokerNode(image, launch.commands, workdir, host_netns=placement is not None)
            node.start()
            version = _wait_ready(prov, launch.url, launch.ready_timeout, node.exited)
            ready = time.monotonic()
        except (StartFailed, ContainerError, OSError) as exc:
            if node is not None:
                for container in node.containers:
                    container.save_logs()
            kept = _copy_logs(workdir, prov.system, logs_dir)
            raise DriverError(
                f"the {prov.system} broker in {image.name} failed to start: {exc}; its logs are in {kept}"
            ) from None
        _CONTROLS[launch.url] = ContainerControl(prov, launch, node)
        yield BrokerEndpoint(
            system=prov.system,
            url=launch.url,
            backend="containers",
            implementation=prov.process_implementation,
            version=version or image.version,
            extra={**launch.extra, "image": image.name, "image_id": image.id or _image_id(image.name),
                   "image_origin": image.origin, "containers": node.names(), "workdir": str(workdir),
                   "startup_s": ready - launched,  # a pull at first use included
                   **({} if placement is None else {"host": placement.host, "local_url": local_url})},
        )
    finally:
        if launch is not None:
            _CONTROLS.pop(launch.url, None)
        if node is not None:
            node.stop(discard_grace(launch))  # the workdir goes next
            if logs_dir is not None:
                _copy_logs(workdir, prov.system, logs_dir)
        _watchdog.remove_folder(workdir, undo)


def _image_id(name: str) -> str:
    """The id of image ``name`` now that it is here (it was pulled at first use), or ""."""
    with contextlib.suppress(Exception):
        return str(_images.client().images.get(name).id)
    return ""


def _wait_ready(prov: Provisioner, url: str, timeout: float, exited: Callable[[], str | None]) -> str:
    """Probe until the broker answers; StartFailed when it exits first or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while True:
        gone = exited()
        if gone:
            raise StartFailed(gone)
        remaining = deadline - time.monotonic()
        try:
            return prov.probe(url, max(0.2, min(2.0, remaining)))
        except Exception as exc:
            if time.monotonic() >= deadline:
                raise StartFailed(
                    f"it did not answer within {timeout:.0f} s (last probe: {_describe(exc)})"
                ) from None
        time.sleep(0.1)


def _first_exit(started: list[BrokerProcess]) -> str | None:
    for proc in started:
        status = proc.exited()
        if status is not None:
            return f"{proc.name} exited with status {status}"
    return None


def _kept_dir(system: str, logs_dir: Path | None) -> Path:
    if logs_dir is None:
        logs_dir = Path(tempfile.mkdtemp(prefix="mqbench-logs-"))
    target = logs_dir / system
    target.mkdir(parents=True, exist_ok=True)
    return target


def _copy_logs(workdir: Path, system: str, logs_dir: Path | None) -> Path:
    """Copy every log file under ``workdir`` (``*.out``, ``*.log``) into ``logs_dir/<system>/``."""
    target = _kept_dir(system, logs_dir)
    for path in workdir.rglob("*"):
        if {"kahadb", "rocksdbstore"} & set(path.parts):  # ActiveMQ's and RocketMQ's journals are *.log too
            continue
        if path.suffix == ".log" and path.stem.isdigit():  # Kafka's log segments: the messages, not a log
            continue
        if path.is_file() and (path.suffix in (".out", ".log") or ".log." in path.name):
            dest = target / path.relative_to(workdir)
            dest.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(OSError):
                shutil.copyfile(path, dest)
    return target


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
