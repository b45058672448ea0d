"""The scenario model: frozen dataclasses a parsed scenario is made of (see ``harness.scenario``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from harness.drivers.base import SINGLE_NODE, ClusterShape, Pattern
from harness.scenario._workload import Backlog

# The header a producer writes into every message: producer id (u16) + sequence number (u32) + send stamp
# (i64); messages shorter than that carry only producer id and sequence number.
MIN_MESSAGE_SIZE = 6


class ScenarioError(ValueError):
    """A scenario that cannot be run; str() is one line naming file, field and what is allowed."""


@dataclass(frozen=True)
class Variant:
    """One configuration of one system: a name for reports, the options handed to the driver, and the shape
    of its broker (``cluster``: one node unless the variant or its scenario asks for more); ``cluster_note``
    says why a broker the scenario asked to cluster runs as one node ("Mosquitto has no clustering")."""

    system: str
    name: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)
    cluster: ClusterShape = SINGLE_NODE
    cluster_note: str = ""


WORKER_ACTIONS = (
    "kill-broker",
    "restart-broker",
    "kill-consumer",
    "restart-consumer",
    "kill-producer",
    "restart-producer",
    "restart-peer",
)
#: Network faults between hosts (``hosts:``): each lasts ``duration`` seconds, then is undone.
NETWORK_ACTIONS = ("delay", "bandwidth", "partition", "reset")
#: Faults of one node of a clustered broker, chosen by ``node``: ``leader``, ``follower`` or an index.
NODE_ACTIONS = ("kill-node", "restart-node", "pause-node", "isolate-node")
NODE_ROLES = ("leader", "follower")
FAULT_ACTIONS = WORKER_ACTIONS + NETWORK_ACTIONS + NODE_ACTIONS


@dataclass(frozen=True)
class Fault:
    """One fault the runner injects: ``action`` at ``at`` seconds after the common start.

    Kills are SIGKILL. ``restart-*`` kills, waits ``down`` seconds, and starts the same broker (same port,
    same data directory) or the same worker (same role and endpoint; it continues the records of the one it
    replaces). ``target`` is the producer/consumer index for worker actions.

    Network actions act on ``host`` (a host name of ``hosts:``) for ``duration`` seconds: ``delay`` adds
    ``delay`` seconds (± ``jitter``) each way to the host's connections, ``bandwidth`` limits its link to
    ``rate`` (tc syntax, e.g. ``10mbit``), ``partition`` cuts it off, ``reset`` resets its connections
    (and any new one) until the end.

    Node actions act on one node of a clustered broker, ``node``: ``leader`` (of what the case moves messages
    through, asked of the broker when the fault comes), ``follower`` (the first node that is not the leader)
    or a node index. ``kill-node`` SIGKILLs every process of the node; ``restart-node`` also starts it again
    after ``down`` seconds; ``pause-node`` stops it (SIGSTOP) for ``duration`` seconds, as a long GC pause;
    ``isolate-node`` cuts its host (``hosts: {nodes: [...]}``) off from the other nodes and the clients for
    ``duration`` seconds.
    """

    at: float
    action: str
    target: int = 0
    down: float = 0.0
    duration: float = 0.0
    host: str | None = None
    delay: float = 0.0
    jitter: float = 0.0
    rate: str = ""
    node: str | int = "leader"

    @property
    def network(self) -> bool:
        return self.action in NETWORK_ACTIONS

    @property
    def on_node(self) -> bool:
        return self.action in NODE_ACTIONS

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"at": self.at, "action": self.action, "target": self.target, "down": self.down}
        if self.network:
            out.update(duration=self.duration, host=self.host, delay=self.delay, jitter=self.jitter, rate=self.rate)
        if self.on_node:
            out.update(node=self.node, duration=self.duration)
        return out


@dataclass(frozen=True)
class Hosts:
    """Where each part runs (``hosts:``): a host name per role; None = the root namespace, as without hosts.
    ``nodes``: the hosts of a clustered broker's nodes, node i on ``nodes[i]`` (each its own host, so one
    node can be cut off). Every name becomes a network namespace of the run (``harness.network``)."""

    broker: str | None = None
    producers: str | None = None
    consumers: str | None = None
    nodes: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(h for h in (self.broker, self.producers, self.consumers, *self.nodes)
                                   if h is not None))

    def of(self, role: str) -> str | None:
        """The host of ``role`` (broker, producers, consumers)."""
        return {"broker": self.broker, "producers": self.producers, "consumers": self.consumers}[role]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"broker": self.broker, "producers": self.producers, "consumers": self.consumers}
        if self.nodes:
            out["nodes"] = list(self.nodes)
        return out


@dataclass(frozen=True)
class Scenario:
    name: str
    pattern: Pattern
    message_sizes: tuple[int, ...]
    messages: int | None = None
    duration: float | None = None
    rates: tuple[float | None, ...] = (None,)  # None = max
    systems: tuple[str, ...] | None = None
    producers: int = 1
    consumers: int = 1
    topics: int = 1
    warmup: int = 1000
    repetitions: int = 1
    payload: str = "random"
    timeout: float = 30.0
    description: str = ""
    variants: Mapping[str, tuple[Variant, ...]] = field(default_factory=dict)
    consumer_rate: float | None = None  # msgs/s each consumer handles at most; None = as fast as it can
    faults: tuple[Fault, ...] = ()
    hosts: Hosts = field(default_factory=Hosts)
    source: str = ""
    # ``rate: search``: ``rates`` is empty; per system a bisection over short trials (each as long as
    # ``messages``/``duration``) within ``search_range`` finds the highest rate sustained with p99 <= bound
    p99_bound: float | None = None  # seconds
    search_range: tuple[float, float] = (1000.0, 1_000_000.0)
    # ``cluster:``: the shape every broker variant without its own ``cluster`` asks for (None: one node)
    cluster: ClusterShape | None = None
    # workloads (harness.scenario._workload): payload kinds ``file`` and ``compressible`` take these
    payload_file: str = ""
    compressible: float = 0.0
    backlog: Backlog | None = None  # consumers hold back until a backlog is built, then drain it
    rate_profile: tuple[tuple[float, float], ...] = ()  # (total msgs/s, seconds) steps in turn; rates = (mean,)
    keys: str = "none"  # none | round-robin | random
    key_count: int = 64
    series: str = ""  # the topic sweep (``topics: [...]``) this scenario is one count of

    @property
    def workload(self) -> bool:
        """Whether this scenario uses a workload field (the report's workload section reads those)."""
        return bool(self.backlog or self.rate_profile or self.keys != "none" or self.series
                    or self.payload in ("file", "compressible"))

    @property
    def kills(self) -> bool:
        """Whether a fault of this scenario kills or restarts a broker or a worker process: not network
        actions, nor node faults (a node of a cluster dies, pauses or is cut off; the clients ride through
        it by themselves, no worker is restarted)."""
        return any(not f.network and not f.on_node for f in self.faults)

    @property
    def searches(self) -> bool:
        return self.p99_bound is not None and not self.rates

    def lists(self, system: str) -> bool:
        """Whether the scenario names ``system`` (no ``systems:`` names every one)."""
        return self.systems is None or system in self.systems

    def variants_for(self, system: str) -> tuple[Variant, ...]:
        """The variants of ``system`` in this scenario: its own, or one default variant (shaped by the
        scenario's ``cluster:`` where the system's broker can be clustered)."""
        if system in self.variants:
            return self.variants[system]
        from harness.scenario._cluster import default_shape

        shape, note = default_shape(system, self.cluster)
        return (Variant(system, cluster=shape, cluster_note=note),)

    def with_repetitions(self, n: int) -> Scenario:
        return replace(self, repetitions=n)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able description for the manifest."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "pattern":
                value = value.value
            elif f.name == "variants":
                value = {s: [{"name": v.name, **dict(v.options),
                              **({"cluster": v.cluster.as_dict()} if v.cluster != SINGLE_NODE else {})}
                             for v in vs] for s, vs in value.items()}
            elif f.name in ("cluster", "backlog"):
                value = None if value is None else value.as_dict()
            elif f.name == "rate_profile":
                value = [list(step) for step in value]
            elif f.name == "faults":
                value = [fault.as_dict() for fault in value]
            elif f.name == "hosts":
                value = value.as_dict()
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out
