"""Broker containers through testcontainers, used only when a Docker engine answers.

``docker_available`` asks the engine once per process with a short timeout and caches the answer.
``BrokerContainer`` turns a :class:`ContainerSpec` into a started container and stops it (force-remove) on
``stop``; testcontainers' reaper removes it too if this process dies without stopping it.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import threading
from pathlib import Path
from typing import Any

from harness.brokers._spec import ContainerSpec

_LIVE: set[BrokerContainer] = set()
_LIVE_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1)
def docker_available(timeout: float = 2.0) -> bool:
    """True when a Docker engine (DOCKER_HOST or the default socket) answers a ping within ``timeout``."""
    try:
        import docker

        client = docker.from_env(timeout=timeout)
        try:
            return bool(client.ping())
        finally:
            client.close()
    except Exception:  # no library, no socket, refused, timeout: all mean "not available"
        return False


def docker_host() -> str:
    """The host name under which containers' published ports are reachable."""
    from testcontainers.core.docker_client import DockerClient

    return str(DockerClient().host())


class BrokerContainer:
    """One container for ``spec``; after ``start``, ``url`` is where clients reach it."""

    def __init__(self, spec: ContainerSpec) -> None:
        from testcontainers.core.container import DockerContainer

        container: Any = DockerContainer(spec.image)
        if spec.host_port is not None:
            container.with_bind_ports(spec.port, spec.host_port)
        else:
            container.with_exposed_ports(spec.port)
        for port in spec.more_ports:
            container.with_bind_ports(port, port)
        for key, value in spec.env.items():
            container.with_env(key, value)
        if spec.command:
            container.with_command(list(spec.command))
        for path, text in spec.files.items():
            container.with_copy_into_container(text.encode(), path)
        self.spec = spec
        self.url = ""
        self._container = container

    def start(self) -> str:
        """Pull (if needed) and start the container; return the clients' URL. Call ``stop`` even if this
        raises."""
        with _LIVE_LOCK:
            _LIVE.add(self)
        self._container.start()
        host = self._container.get_container_host_ip()
        spec = self.spec
        port = (
            spec.host_port if spec.host_port is not None else int(self._container.get_exposed_port(spec.port))
        )
        self.url = spec.url_template.format(host=host, port=port)
        return self.url

    def save_logs(self, directory: Path) -> None:
        """Write the container's stdout and stderr into ``directory``."""
        directory.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            out, err = self._container.get_logs()
            (directory / "container.stdout").write_bytes(out or b"")
            (directory / "container.stderr").write_bytes(err or b"")

    def stop(self) -> None:
        try:
            with contextlib.suppress(Exception):
                self._container.stop(force=True, delete_volume=True)
        finally:
            with _LIVE_LOCK:
                _LIVE.discard(self)


def stop_all() -> None:
    with _LIVE_LOCK:
        live = list(_LIVE)
    for c in live:
        c.stop()


atexit.register(stop_all)
