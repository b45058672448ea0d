"""The provisioner interface: one subclass per system describes how to run and probe its broker.

A provisioner is mostly data: its binaries, the pinned official image, the URL of a local broker, its ports
and timeouts. Code is only what differs per broker: the commands of a local broker (``commands``), its
handshake (``probe``) and, where the binary tells it, its version (``binary_version``).

The containers backend runs the same launch inside an image: ``prepare_in_image`` builds it with a copy of the
provisioner whose ``files`` say where the broker's files are in that image (``ImageFiles``); the few lookups
a launch makes on this machine (``epmd``, a jar folder, a configuration template) go through ``path``.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit

from harness.brokers._ports import LOOPBACK, free_ports
from harness.brokers._spec import ClusterLaunch, Command, ImageFiles, Launch, NodeHost, PinnedImage
from harness.runfolder import redact

if TYPE_CHECKING:
    from harness.brokers._provision import Placement
    from harness.drivers.base import BrokerEndpoint, ClusterShape


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
    #: Names or paths of the broker executable, tried in order by the default ``find_binary``.
    binaries: ClassVar[tuple[str, ...]] = ()
    #: The pinned official image the containers backend uses when a registry serves it (None: none fits the
    #: process backend's settings; an image built here by `make images` is used instead).
    image: ClassVar[PinnedImage | None] = None
    #: Where the broker's files are when a launch is prepared for an image (None: on this machine).
    files: ImageFiles | None = None
    #: Where clients reach a local broker, formatted with ``host`` and the first of its ``ports``.
    url_template: ClassVar[str]
    #: How many free loopback ports a local broker takes (the first is the clients' port).
    ports: ClassVar[int] = 1
    #: Seconds a local broker may take to answer its probe, and to stop after SIGTERM.
    ready_timeout: ClassVar[float] = 20.0
    stop_grace: ClassVar[float] = 5.0
    #: Why ``queue_depth`` gives no probe for this broker (shown beside the queue-depth figure).
    depth_note: ClassVar[str] = "queue depth is not sampled for this broker; sent - received stands in"
    # The broker tells clients an address to connect to next (Kafka-protocol metadata, RocketMQ's NameServer),
    # which the routes between hosts (harness.network) do not rewrite: it runs across hosts only when
    # ``place`` makes that address lead through them.
    advertises_address: ClassVar[bool] = False
    #: The largest cluster ``prepare_cluster`` starts; 1 when the broker is run as one node only. ``cluster_note``
    #: says in one clause how it runs as a cluster, or why it does not ("Mosquitto has no clustering"; shown
    #: in the row's label when a scenario asked for a cluster it cannot be).
    max_nodes: ClassVar[int] = 1
    cluster_note: ClassVar[str] = "not run as a cluster by mqbench"

    def place(self, launch: Launch, placement: Placement) -> Launch:
        """``launch`` as it runs on ``placement``'s host, before its commands are moved there: a broker that
        advertises an address (Kafka, RocketMQ) makes that address lead each client host through its own
        route. Default: unchanged (clients reach the URL's ports through the routes)."""
        return launch

    def find_binary(self) -> str | None:
        """Path of the broker executable on this machine, or None."""
        return which(*self.binaries)

    def process_unavailable_reason(self) -> str | None:
        """None when a local broker can be started; otherwise one sentence saying what to install."""
        if self.find_binary() is None:
            return f"no local {self.system} broker was found; {self.install_hint}"
        return None

    def local_description(self) -> str:
        """What is installed locally, for `mqbench systems` (JVM brokers name their release)."""
        return "a local broker binary is installed"

    def prepare_process(self, workdir: Path) -> Launch:
        """Pick free ports and write configuration into ``workdir`` (private, removed after the run).
        Raises OSError saying what to install when the broker is missing."""
        binary = self.find_binary()
        if binary is None:
            raise OSError(self.process_unavailable_reason())
        return self.launch(binary, workdir)

    def prepare_in_image(self, workdir: Path, files: ImageFiles) -> Launch:
        """The launch ``prepare_process`` makes, for the broker inside an image whose files are at
        ``files.paths`` (``binary`` at least): the same ports on this machine's loopback, the same settings
        in ``workdir``, which the container sees at the same path."""
        inside = copy.copy(self)
        inside.files = files
        return inside.launch(files.paths["binary"], workdir)

    def path(self, role: str, here: Callable[[], str | None]) -> str | None:
        """Where the file playing ``role`` is: in the image the launch is prepared for, else ``here()``."""
        return self.files.paths.get(role) if self.files is not None else here()

    def launch(self, binary: str, workdir: Path) -> Launch:
        """The launch of a private broker whose executable is ``binary``, on free loopback ports."""
        ports = free_ports(self.ports)
        return Launch(
            commands=self.commands(binary, workdir, ports),
            url=self.url_template.format(host=LOOPBACK, port=ports[0]),
            workdir=workdir,
            ready_timeout=self.ready_timeout,
            stop_grace=self.stop_grace,
            version=self.binary_version(binary) if self.files is None else "",
            extra=self.launch_extra(ports),
        )

    def commands(self, binary: str, workdir: Path, ports: list[int]) -> tuple[Command, ...]:
        """The processes of a local broker listening on loopback ``ports``, started in this order (the
        broker proper last); configuration files go into ``workdir``. Every broker defines this, except
        one whose ports or checks do not fit the default ``prepare_process`` and overrides that instead."""
        raise NotImplementedError(f"{type(self).__name__} defines neither commands() nor prepare_process()")

    def launch_extra(self, ports: list[int]) -> dict[str, str]:
        """What a local broker on ``ports`` offers beyond its URL, for the endpoint's ``extra``. Default: nothing."""
        return {}

    def binary_version(self, binary: str) -> str:
        """The version the binary reports ("" when only the protocol probe tells it)."""
        return ""

    @abstractmethod
    def probe(self, url: str, timeout: float) -> str:
        """Complete a protocol handshake with the broker at ``url``; return its version ("" if it does
        not say). Raises OSError or ProbeError (or the client library's error) while it is not ready."""

    # -- clusters (brokers with max_nodes > 1) ------------------------------------------------------

    def prepare_cluster(self, workdir: Path, shape: ClusterShape, hosts: Sequence[NodeHost]) -> ClusterLaunch:
        """Configuration of ``shape.nodes`` nodes keeping ``shape.replicas`` copies, node i listening on and
        advertising ``hosts[i].address``; each node's files under ``workdir/node<i>/``, its ports from
        ``free_ports`` (distinct across nodes, which may share an address). Raises OSError saying what to
        install when the broker is missing."""
        raise NotImplementedError(f"{self.system} is not run as a cluster: {self.cluster_note}")

    def cluster_ready(self, launch: ClusterLaunch, timeout: float) -> str:
        """One check that the cluster has formed: every node answers and is a member, and a leader or
        controller is elected where the broker has one. Returns the version ("" if not told); raises OSError
        or ProbeError while not ready (the caller retries until ``launch.ready_timeout``). Default: every
        node answers ``probe``."""
        versions = [self.probe(node.url, timeout) for node in launch.nodes]
        return next((v for v in versions if v), "")

    def leader(self, endpoint: BrokerEndpoint, resource: str) -> int:
        """Index of the node that leads ``resource`` now (the leader of partition 0 of a Kafka topic, of a
        quorum queue, of a JetStream stream; the master of a RocketMQ broker group), asked of the broker's own
        admin interface at the moment of the call. Raises ProbeError when there is none (mid-election)."""
        raise ProbeError(f"{self.system} has no leader to ask for: {self.cluster_note}")

    # -- inspection and restarts (fault injection) ---------------------------------------------------

    def queue_depth(self, url: str, queues: Sequence[str]) -> Callable[[], float] | None:
        """A cheap probe of how many messages the broker at ``url`` still holds for the consumers of
        ``queues`` (the topics of a queue-pattern run), or None (``depth_note`` says why)."""
        return None

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


def command_output(*argv: str) -> str:
    """What ``argv`` prints (stdout, then stderr), or "" when it cannot be run; for version flags."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout + proc.stderr


def host_port(url: str, default_port: int) -> tuple[str, int]:
    """Host and port of ``url`` (``scheme://[user:pass@]host[:port]/...``)."""
    parts = urlsplit(url)
    if not parts.hostname:
        raise ValueError(f"URL {redact(url)!r} names no host")
    return parts.hostname, parts.port or default_port
