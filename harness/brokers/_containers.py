"""Broker containers: the process backend's launch run inside an image, one container per command.

Containers are made through testcontainers' ``DockerContainer`` with host networking: the broker listens on the
same private loopback ports, with the same settings, as a local process (``Provisioner.prepare_in_image``).
The launch's workdir is bind-mounted at the same path and each container runs as the invoking user, so the
broker's files (data, logs) are where, and whose, they would be; Docker's ``init`` is PID 1 (it passes SIGTERM
on and reaps what the broker spawns). A broker placed on a host (``harness.network``) enters it the way a local
process does (``ip netns exec``, which the images built here carry), from a container that sees
``/var/run/netns`` and may enter a namespace (CAP_SYS_ADMIN, no seccomp filter; not ``--privileged``, which asks
for every capability and fails where the engine itself lacks one).

Cleanup, on every way out: ``stop`` (SIGTERM, the grace, SIGKILL, remove) at the end of the provisioning block,
also on Ctrl-C; an atexit hook for what is still live; and labels naming the owner (this process's pid and
start time), so that containers of a run killed outright are removed by the next ``sweep`` (run once per
process before its first container, and by `make test`). testcontainers' reaper (Ryuk) is used only where its
image is here or can be pulled; otherwise it is turned off and the labels do its job.

Invariants: ``_LIVE`` holds every container this process started and has not removed yet; a container is
listed there before it is created, so no way out misses one.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import threading
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from harness import _watchdog
from harness.brokers._images import Image, client
from harness.brokers._process import _descendants
from harness.brokers._spec import Command

OWNER = "org.mqbench.owner"  # "<pid>:<start time in clock ticks>" of the process that started the container
SYSTEM = "org.mqbench.broker"
FOLDER = "org.mqbench.folder"  # the broker's temporary folder, bind-mounted: the sweep removes it with the container
NETNS_DIR = "/var/run/netns"

_LIVE: set[BrokerContainer] = set()
_LIVE_LOCK = threading.Lock()


class ContainerError(Exception):
    """A container could not be created or started; one sentence."""


@functools.lru_cache(maxsize=1)
def docker_available(timeout: float = 2.0) -> bool:
    """True when a Docker engine (DOCKER_HOST or the default socket) answers a ping within ``timeout``."""
    try:
        engine = client(timeout=timeout)
        try:
            return bool(engine.ping())
        finally:
            engine.close()
    except Exception:  # no library, no socket, refused, timeout: all mean "not available"
        return False


def _start_ticks(pid: int) -> str:
    """The start time of process ``pid`` (clock ticks since boot, /proc/PID/stat field 22), "" when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2:].split()[19]


def owner_labels(system: str) -> dict[str, str]:
    """The labels every container of ours carries: its owner (this process) and its broker."""
    return {OWNER: f"{os.getpid()}:{_start_ticks(os.getpid())}", SYSTEM: system}


def owner_alive(owner: str) -> bool:
    """Whether the process an ``OWNER`` label names still runs (the same pid and start time)."""
    pid, _, ticks = owner.partition(":")
    return pid.isdigit() and bool(ticks) and _start_ticks(int(pid)) == ticks


def sweep() -> list[str]:
    """Remove the containers of ours whose owner has exited (a run killed before its teardown, together with
    its watchdog), and the broker folders they had mounted; their names."""
    removed = []
    for container in client().containers.list(all=True, filters={"label": OWNER}):
        if not owner_alive(container.labels.get(OWNER, "")):
            with contextlib.suppress(Exception):
                container.remove(force=True, v=True)
                removed.append(container.name)
                _remove_folder(container.labels.get(FOLDER, ""))
    return removed


def _remove_folder(folder: str) -> None:
    """A swept container's broker folder: only one of ours, a ``mqbench-*`` folder in the temporary directory
    (a label is data from the engine, not an instruction to delete anything else)."""
    import shutil
    import tempfile

    path = Path(folder)
    if folder and path.name.startswith("mqbench-") and path.parent == Path(tempfile.gettempdir()):
        shutil.rmtree(path, ignore_errors=True)


_SWEPT = threading.Event()


def _prepare_engine() -> None:
    """Once per process: sweep what killed runs left, and turn testcontainers' reaper off where its image
    cannot be had (``TESTCONTAINERS_RYUK_DISABLED`` set by the user wins)."""
    if _SWEPT.is_set():
        return
    _SWEPT.set()
    sweep()
    from testcontainers.core.config import testcontainers_config as config

    if "TESTCONTAINERS_RYUK_DISABLED" not in os.environ and not config.ryuk_disabled:
        from harness.brokers._images import _local, _pull_problem

        if _local(config.ryuk_image) is None and _pull_problem(config.ryuk_image) is not None:
            config.ryuk_disabled = True


class BrokerContainer:
    """One command of a launch in ``image``: ``start``, ``exit_status``, ``pids``, ``kill``, ``pause``, ``resume``,
    ``stop``. It runs in ``workdir``, which is bind-mounted at the same path (or ``mount``, a folder holding it);
    its output is appended to ``<workdir>/logs/<command name>.out`` when it stops, where a local process writes
    it. ``node`` (a cluster's node name) goes into the container's name."""

    def __init__(self, image: Image, command: Command, workdir: Path, host_netns: bool = False,
                 mount: Path | None = None, node: str = "") -> None:
        from testcontainers.core.container import DockerContainer

        self.name = f"mqbench-{image.system}-{node + '-' if node else ''}{command.name}-{uuid.uuid4().hex[:8]}"
        self.command = command
        self.log_path = workdir / "logs" / f"{command.name}.out"
        container: Any = DockerContainer(image.name)
        container.with_command(list(command.argv[1:]))
        container.with_name(self.name)
        shared = mount or workdir  # a cluster's nodes see the whole cluster's folder (shared files: code, cookie)
        container.with_volume_mapping(str(shared), str(shared), "rw")
        if host_netns:  # ip netns exec: the host namespaces' bind mounts, and the rights to enter them
            container.with_volume_mapping(NETNS_DIR, NETNS_DIR, "rw")
        for key, value in command.env.items():
            container.with_env(key, value)
        rights: dict[str, Any] = {}
        if host_netns:  # setns(2), and the mounts `ip netns exec` makes: not every right (--privileged)
            rights = {"cap_add": ["SYS_ADMIN", "NET_ADMIN"], "security_opt": ["seccomp=unconfined"]}
        container.with_kwargs(
            entrypoint=[command.argv[0]], network_mode="host", user=f"{os.getuid()}:{os.getgid()}",
            working_dir=str(workdir), init=True, labels={**owner_labels(image.system), FOLDER: str(shared)}, **rights)
        self._container = container
        self._started = False
        self._watched = 0  # the watchdog's token (harness/_watchdog.py) while started

    def start(self) -> None:
        """Create and start the container (pulling the image first if the engine lacks it). ContainerError
        saying why when it cannot; call ``stop`` either way."""
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._watched = _watchdog.watch_command(["docker", "rm", "-f", "-v", self.name])  # if this process is killed
        try:
            self._container.start()
        except Exception as exc:  # noqa: BLE001 - the engine's refusal, in one line
            raise ContainerError(f"container {self.name} did not start: {_first_line(exc)}") from None
        self._started = True

    def _wrapped(self) -> Any:
        return self._container._container  # docker-py's Container (None before create)

    def exit_status(self) -> int | None:
        """The exit status once the container has stopped, else None."""
        wrapped = self._wrapped()
        if wrapped is None:
            return None
        with contextlib.suppress(Exception):
            wrapped.reload()
            state = wrapped.attrs.get("State", {})
            if state.get("Status") in ("exited", "dead"):
                return int(state.get("ExitCode", -1))
        return None

    def pids(self) -> list[int]:
        """This machine's pids of the container's processes (its init and what runs under it)."""
        wrapped = self._wrapped()
        if wrapped is None:
            return []
        with contextlib.suppress(Exception):
            wrapped.reload()
            pid = int(wrapped.attrs.get("State", {}).get("Pid") or 0)
            if pid:
                return [pid, *_descendants(pid)]
        return []

    def kill(self) -> None:
        """SIGKILL every process of the container (no shutdown: a crash); the container stays, stopped."""
        wrapped = self._wrapped()
        if wrapped is not None:
            with contextlib.suppress(Exception):
                wrapped.kill()
                wrapped.wait(timeout=30)

    def pause(self) -> None:
        """Freeze every process of the container at once (the engine's cgroup freezer): it holds its sockets
        and answers nothing, as SIGSTOP does to a local process."""
        wrapped = self._wrapped()
        if wrapped is not None:
            with contextlib.suppress(Exception):  # already stopped, or already paused
                wrapped.pause()

    def resume(self) -> None:
        wrapped = self._wrapped()
        if wrapped is not None:
            with contextlib.suppress(Exception):  # not paused
                wrapped.unpause()

    def stop(self, grace: float) -> None:
        """SIGTERM, up to ``grace`` s, SIGKILL; keep its output in the log file; remove it. Idempotent; also
        when ``start`` was interrupted between the engine creating the container and handing it back."""
        try:
            wrapped = self._wrapped()
            if wrapped is None:
                with contextlib.suppress(Exception):  # not created, or created and not handed back yet
                    wrapped = client().containers.get(self.name)
                    self._container._container = wrapped
            if wrapped is not None:
                self.resume()  # a paused container must run to take its SIGTERM
                with contextlib.suppress(Exception):
                    wrapped.stop(timeout=max(1, round(grace)))
                self.save_logs()
                with contextlib.suppress(Exception):
                    wrapped.remove(force=True, v=True)
                self._container._container = None
        finally:
            _watchdog.forget(self._watched)
            with _LIVE_LOCK:
                _LIVE.discard(self)

    def save_logs(self) -> None:
        wrapped = self._wrapped()
        if wrapped is None:
            return
        with contextlib.suppress(Exception):
            output = wrapped.logs(stdout=True, stderr=True)
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.log_path, "ab") as log:
                log.write(output)


class BrokerNode:
    """The containers of one broker node: one per command (helpers first, the broker proper last), started in
    order and stopped in reverse. A single broker's faults act on the broker proper (``kill``, ``restart``); a
    cluster node's on every container of the node (``kill_all``, ``pause``, ``resume``: the loss or freeze of
    the machine it would run on). ``mount`` and ``node``: as for :class:`BrokerContainer`."""

    def __init__(self, image: Image, commands: Sequence[Command], workdir: Path, host_netns: bool = False,
                 mount: Path | None = None, node: str = "") -> None:
        self.image, self.workdir, self.host_netns = image, workdir, host_netns
        self.mount, self.node = mount, node
        self.containers: list[BrokerContainer] = []
        self._commands = list(commands)
        self._lock = threading.Lock()

    def start(self) -> None:
        _prepare_engine()
        for command in self._commands:
            self._start(command)

    def _start(self, command: Command) -> BrokerContainer:
        container = BrokerContainer(self.image, command, self.workdir, self.host_netns, self.mount, self.node)
        self.containers.append(container)
        container.start()
        return container

    def exited(self) -> str | None:
        """Which container has exited, with its status (for the readiness wait), else None."""
        for container in self.containers:
            status = container.exit_status()
            if status is not None:
                return f"{container.command.name} (container {container.name}) exited with status {status}"
        return None

    def names(self) -> list[str]:
        return [c.name for c in self.containers]

    def pids(self) -> list[int]:
        return [pid for c in self.containers for pid in c.pids()]

    def running(self) -> bool:
        return bool(self.containers) and self.containers[-1].exit_status() is None

    def kill(self) -> None:
        """SIGKILL the broker proper's container (the helpers, e.g. epmd, keep running)."""
        with self._lock:
            if self.containers:
                self.containers[-1].kill()

    def kill_all(self) -> None:
        """SIGKILL every container of the node, the broker proper first (it stops serving first)."""
        with self._lock:
            for container in reversed(self.containers):
                container.kill()

    def pause(self) -> None:
        with self._lock:
            for container in reversed(self.containers):
                container.pause()

    def resume(self) -> None:
        with self._lock:
            for container in self.containers:
                container.resume()

    def restart(self, command: Command, wait: Callable[[], str]) -> str:
        """Start the broker proper again with ``command`` (same port and data directory) in a new container, the
        killed one removed (its output kept); ``wait()`` waits until it answers and returns its version."""
        with self._lock:
            if self.running():
                return ""
            self.containers.pop().stop(0)
            self._start(command)
        return wait()

    def stop(self, grace: float) -> None:
        for container in reversed(self.containers):
            container.stop(grace)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def copy_out(image: Image) -> Callable[[str, Path], None]:
    """``copy_out(path, dest)``: the folder ``path`` of ``image`` copied to ``dest`` (a container is created for
    it, never started, and removed)."""

    def copy(path: str, dest: Path) -> None:
        import io
        import tarfile

        engine = client()
        created = engine.containers.create(image.name, entrypoint=["/bin/true"], network_mode="none",
                                           labels=owner_labels(image.system))
        try:
            stream, _ = created.get_archive(path.rstrip("/"))  # entries under the folder's own name
            data = io.BytesIO(b"".join(stream))
        finally:
            created.remove(force=True)
        dest.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=data) as archive:
            for member in archive.getmembers():
                member.name = member.name.split("/", 1)[1] if "/" in member.name else ""
                if member.name and not member.issym() and ".." not in Path(member.name).parts:
                    member.uid = member.gid = -1
                    archive.extract(member, dest, set_attrs=False)

    return copy


def stop_all() -> None:
    """Stop every container still live (the atexit fallback)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for c in live:
        c.stop(2.0)


def live_names() -> list[str]:
    """Names of the containers started here and not removed yet (for tests and diagnostics)."""
    with _LIVE_LOCK:
        return [c.name for c in _LIVE]


atexit.register(stop_all)
