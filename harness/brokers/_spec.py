"""What a provisioner describes, as plain data: container configurations and local process launches.

These are pure values (no Docker, no processes) so they can be unit-tested on any machine.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ContainerSpec:
    """One broker container: pinned image, the client port inside it, environment, command, files.

    ``host_port`` is set when the broker must know the host-side port (Kafka advertises it), and then the
    container port is bound to exactly that host port; otherwise Docker maps ``port`` to a random one.
    ``url_template`` is formatted with the host and host-side port. Readiness is decided by the same
    protocol probe as for local processes, within ``ready_timeout`` seconds (image pull not included).
    """

    image: str
    port: int
    url_template: str
    env: Mapping[str, str] = field(default_factory=dict)
    command: tuple[str, ...] = ()
    files: Mapping[str, str] = field(default_factory=dict)  # path inside the container -> text
    host_port: int | None = None
    more_ports: tuple[int, ...] = ()  # further container ports, each bound to the same host port number
    ready_timeout: float = 60.0

    @property
    def tag(self) -> str:
        """The pinned image tag (its version), e.g. ``3.13.7`` for ``rabbitmq:3.13.7``."""
        return self.image.rpartition(":")[2]


@dataclass(frozen=True)
class Command:
    """One local process: argv, extra environment, and the user to run as (None: the current user)."""

    name: str  # short name for its log file: logs/<name>.out
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None


@dataclass(frozen=True)
class Launch:
    """How to run one private broker from its workdir. Commands start in order and stop in reverse order."""

    commands: tuple[Command, ...]
    url: str
    workdir: Path
    ready_timeout: float = 30.0
    stop_grace: float = 10.0
    version: str = ""  # when the binary (not the protocol) tells the version
    extra: Mapping[str, str] = field(default_factory=dict)  # added to the endpoint's ``extra`` (e.g. a second protocol's URL)


@dataclass(frozen=True)
class NodeHost:
    """Where one node of a cluster runs: the address it listens on and advertises to clients and to the other
    nodes (loopback, or its own host's address when the scenario puts nodes on hosts). Running the node's
    commands on that host (``ip netns exec``) is the provisioning core's job, not the provisioner's."""

    address: str = "127.0.0.1"
    host: str | None = None  # the scenario's host name (None: the root namespace)
    prefix: tuple[str, ...] = ()  # the argv prefix that runs a command on that host (``ip netns exec NS``)


@dataclass(frozen=True)
class NodeLaunch:
    """One node of a cluster: its processes (started in order; the broker proper last, helpers such as
    RabbitMQ's epmd or a RocketMQ NameServer before it) and its own client URL. A node fault acts on every
    process of the node, as the failure of the machine it would run on."""

    name: str  # node0, node1, ...: its log files go to logs/<name>/
    commands: tuple[Command, ...]
    url: str
    address: str = "127.0.0.1"


@dataclass(frozen=True)
class ClusterLaunch:
    """How to run the nodes of one private cluster from its workdir (``workdir/<node name>/`` each)."""

    nodes: tuple[NodeLaunch, ...]
    url: str  # what clients are given (a bootstrap list, a NameServer list)
    workdir: Path
    ready_timeout: float = 120.0
    stop_grace: float = 15.0
    version: str = ""
    extra: Mapping[str, str] = field(default_factory=dict)
