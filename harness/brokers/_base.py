"""The provisioner interface: one subclass per system describes how to run and probe its broker."""

from __future__ import annotations

import shutil
from abc import ABC, abstractmethod
from pathlib import Path
from typing import ClassVar
from urllib.parse import urlsplit

from harness.brokers._spec import Command, ContainerSpec, Launch
from harness.runfolder import redact


class ProbeError(Exception):
    """The broker answered, but not (yet) the way a ready broker does."""


class Provisioner(ABC):
    """How to start, reach and recognise one system's broker.

    Subclasses are stateless: ``prepare_process`` writes everything a run needs into the given workdir and
    returns the :class:`Launch`; the caller starts, watches and stops the processes.
    """

    system: ClassVar[str]
    #: URL schemes accepted for an external broker; the first is the one provisioned brokers use.
    schemes: ClassVar[tuple[str, ...]]
    #: What to install when the local binary is missing (one clause, used in sentences).
    install_hint: ClassVar[str]
    #: Set when the protocol is served by something other than the system's reference broker.
    process_implementation: ClassVar[str] = ""

    @abstractmethod
    def find_binary(self) -> str | None:
        """Path of the broker executable on this machine, or None."""

    def process_unavailable_reason(self) -> str | None:
        """None when a local broker can be started; otherwise one sentence saying what to install."""
        if self.find_binary() is None:
            return f"no local {self.system} broker was found; {self.install_hint}"
        return None

    @abstractmethod
    def container_spec(self, host_port: int, advertised_host: str = "localhost") -> ContainerSpec:
        """The container that runs this broker (``host_port`` is used only by brokers that advertise it)."""

    @abstractmethod
    def prepare_process(self, workdir: Path) -> Launch:
        """Write configuration into ``workdir`` (private, removed after the run), pick free ports."""

    @abstractmethod
    def probe(self, url: str, timeout: float) -> str:
        """Complete a protocol handshake with the broker at ``url``; return its version ("" if it does
        not say). Raises OSError or ProbeError (or the client library's error) while it is not ready."""

    # -- restarts (fault injection) -----------------------------------------------------------------

    def restart_state(self, url: str) -> object:
        """Called just before the broker is killed: whatever ``restart_command`` needs to know about the
        running broker (e.g. settings changed at run time). Default: nothing."""
        return None

    def restart_command(self, command: Command, state: object) -> Command:
        """The command that starts the broker again on the same port and data directory. Default: the same."""
        return command


def which(*candidates: str) -> str | None:
    """The first candidate that is an executable path or a name on PATH."""
    for c in candidates:
        found = shutil.which(c)
        if found:
            return found
    return None


def host_port(url: str, default_port: int) -> tuple[str, int]:
    """Host and port of ``url`` (``scheme://[user:pass@]host[:port]/...``)."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"URL {redact(url)!r} names no host")
    return parts.hostname, parts.port or default_port
