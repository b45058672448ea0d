"""What a provisioner describes, as plain data: the launches of local processes, and the images they run in
with the containers backend.

These are pure values (no Docker, no processes) so they can be unit-tested on any machine.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class PinnedImage:
    """A broker's official image at a pinned tag, and where the broker's files are inside it (``paths`` by
    role, as :class:`ImageFiles`). The containers backend runs the very launch of the process backend in it."""

    name: str
    paths: Mapping[str, str]

    @property
    def tag(self) -> str:
        """The pinned tag (its version), e.g. ``3.13.7`` for ``rabbitmq:3.13.7``."""
        return self.name.rpartition(":")[2]


@dataclass(frozen=True)
class ImageFiles:
    """Where a broker's files are inside an image, for a launch that runs there (the containers backend):
    ``paths`` by role: ``binary`` (the broker's executable, ``java`` for a JVM broker) and, as a broker needs
    them, ``lib`` (its jar folder), ``home``, ``conf`` (a configuration template folder), ``epmd``; a bare
    name is looked up on the image's PATH. ``copy_out(path, dest)`` copies a folder of the image to ``dest``
    on this machine (a template the launch edits before the broker starts)."""

    paths: Mapping[str, str]
    copy_out: Callable[[str, Path], None] | None = None


@dataclass(frozen=True)
class Command:
    """One local process: argv, extra environment, and the user to run as (None: the current user)."""

    name: str  # short name for its log file: logs/<name>.out
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None


#: At the end of a run a broker's workdir (its data) is deleted right after it stops, so SIGTERM gets at most
#: this long before SIGKILL, whatever the system's ``stop_grace``: a graceful shutdown would flush data nobody
#: reads (RocketMQ's takes about 18 s here, which every run and test would wait for).
DISCARD_GRACE_S = 2.0


def discard_grace(launch: Launch | ClusterLaunch | None) -> float:
    """The grace a broker gets on SIGTERM when its data is deleted after it stops (see DISCARD_GRACE_S);
    ``launch`` None: it was never launched whole."""
    return DISCARD_GRACE_S if launch is None else min(launch.stop_grace, DISCARD_GRACE_S)


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
