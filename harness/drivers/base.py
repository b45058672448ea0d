"""The driver interface: what every messaging system offers the runner.

Modelled on OpenMessaging Benchmark's drivers, with one rule that matters above all: drivers never take
timings. The runner owns every clock; a driver only moves bytes.

Life cycle, and which process each step runs in:

* parent process: ``driver = Cls(options, broker)``; ``plan = driver.plan(topology)`` creates queues/topics
  and chooses endpoints; the plan is a JSON-able dict handed unchanged to every worker;
  ``driver.teardown(plan)`` at the end of the run.
* each worker process (one per producer / consumer): a fresh ``Cls(options, broker)``, then
  ``create_producer(plan, role)`` / ``create_consumer(plan, role)`` (or requester / replier for reqrep).

Payload contract: ``Producer.send(payload)`` receives a writable buffer (a ``bytearray``) that the runner
reuses for the next message as soon as ``send`` returns. A driver whose library keeps a reference past the
call (asynchronous batching clients) must copy it (``bytes(payload)``).
"""

from __future__ import annotations

import enum
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar


class Pattern(enum.StrEnum):
    PUBSUB = "pubsub"  # every consumer subscribed to a topic gets every message on it
    QUEUE = "queue"  # each message goes to exactly one consumer of the topic
    REQREP = "reqrep"  # requester sends, replier echoes, requester gets the reply


class Guarantee(enum.StrEnum):
    AT_MOST_ONCE = "at-most-once"
    AT_LEAST_ONCE = "at-least-once"
    DURABLE = "durable"  # at-least-once and survives a broker restart


class DriverError(Exception):
    """A failure a user can act on (unreachable broker, bad option); the message is one clear sentence."""


@dataclass(frozen=True)
class Topology:
    """What one run needs from a system. ``run_tag`` is unique per run so names never collide."""

    pattern: Pattern
    topics: int
    producers: int
    consumers: int
    message_size: int
    run_tag: str
    keys: int = 0  # distinct message keys the producers send with (``Producer.send_keyed``); 0: no keys

    def key_names(self) -> list[bytes]:
        """The message keys of a keyed run, the same in every process: ``k0`` .. ``k<keys - 1>``."""
        return [b"k%d" % i for i in range(self.keys)]

    def topic_name(self, index: int) -> str:
        return f"mqbench-{self.run_tag}-t{index}"


@dataclass(frozen=True)
class Role:
    """One worker's place in the topology: producer/consumer number and the topic it uses."""

    index: int
    topic: int


@dataclass(frozen=True)
class ClusterShape:
    """How a broker runs: ``nodes`` broker processes keeping ``replicas`` copies of each message (Kafka's
    replication factor, a quorum queue's group size, a JetStream stream's replicas, a RocketMQ master and its
    slaves), a write being acknowledged once ``min_insync`` of them have it (Kafka's
    ``min.insync.replicas``; a majority for Raft-based queues). One node, one replica is the default."""

    nodes: int = 1
    replicas: int = 1
    min_insync: int = 1

    @property
    def clustered(self) -> bool:
        return self.nodes > 1

    def label(self) -> str:
        """``1 node`` or ``3 nodes, 3 replicas, min in-sync 2``: what a row's parity label says of its shape."""
        if not self.clustered and self.replicas == 1:
            return "1 node"
        text = f"{self.nodes} node{'s' if self.nodes != 1 else ''}, {self.replicas} replica{'s' if self.replicas != 1 else ''}"
        return text + (f", min in-sync {self.min_insync}" if self.replicas > 1 else "")

    def as_dict(self) -> dict[str, int]:
        return {"nodes": self.nodes, "replicas": self.replicas, "min_insync": self.min_insync}


SINGLE_NODE = ClusterShape()


@dataclass(frozen=True)
class BrokerEndpoint:
    """Where a provisioned (or user-supplied) broker listens. ``url`` uses the system's own scheme; for a
    cluster it is what clients are given (e.g. Kafka's bootstrap list) and ``nodes`` holds each node's own
    client URL, in node order (empty for a single node)."""

    system: str
    url: str
    backend: str  # "external" | "containers" | "process"
    implementation: str = ""  # e.g. "tansu" when the Kafka protocol is served by Tansu
    version: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    shape: ClusterShape = SINGLE_NODE
    nodes: tuple[str, ...] = ()


class Producer(ABC):
    #: True when ``send`` returns only after the system acknowledged the message (confirms, acks=all with a
    #: synchronous wait); the runner then records ``t_ack`` when ``send`` returns. A property of the
    #: configured variant, hence of the instance.
    acks_synchronously: bool = False

    @abstractmethod
    def send(self, payload: bytearray) -> None:
        """Hand one message over. Blocks when the system applies back-pressure; raises DriverError on failure."""

    def send_keyed(self, payload: bytearray, key: bytes) -> None:
        """With ``Capabilities.keys``: ``send`` with a message key (one of ``Topology.key_names``), which the
        system routes by: Kafka's record key (the partition by its hash), RabbitMQ's routing key, a NATS
        subject or an MQTT topic below the topic's. Same contract as ``send`` otherwise."""
        raise DriverError(f"{type(self).__name__} has no message keys")

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        """Ask to be told what became of each send when the system says so later (publisher confirms,
        Kafka acks, JetStream publish acks, receipts): the producer calls ``report(first, count, accepted)``
        from any thread, once for each send, as the system's answers arrive, numbering sends from 0 in the
        order ``send`` was called on this producer (``first`` .. ``first + count - 1``; ``accepted`` False
        for a send the system refused or failed to store, which ``send`` did not raise for). Returns False
        when this producer is never told more than ``send`` returning (no acknowledgements, or they are
        synchronous: ``acks_synchronously``); then a send that returned counts as accepted. Called by the
        runner before the first send; a producer may raise for a failure later too, as before."""
        return False

    def flush(self, timeout: float) -> None:  # noqa: B027 - does nothing unless Capabilities.flush
        """With ``Capabilities.flush``: wait until everything handed over has left (or been acknowledged), at
        most ``timeout`` seconds. The runner calls it only on drivers that declare that capability."""

    @abstractmethod
    def close(self) -> None: ...


class Consumer(ABC):
    #: The pid of a process of its own that the client runs in, once started (None: it runs in the worker's
    #: process); the runner counts that process's CPU as the worker's.
    client_pid: int | None = None

    @abstractmethod
    def start(self, on_message: Callable[[bytes], None]) -> None:
        """Subscribe/attach; from now on every received payload is passed to ``on_message``.

        ``on_message`` may be called from ``poll`` (pull-style libraries) or from the library's own thread
        (callback-style libraries); it must not be called from two threads at once. Drivers that ack
        (at-least-once variants) ack after ``on_message`` returns.
        """

    @abstractmethod
    def poll(self, timeout: float) -> None:
        """Deliver what arrives, returning after at most about ``timeout`` seconds."""

    def receiver(self, timeout: float) -> tuple[Callable[[], bytes], type[BaseException]]:
        """Only with ``Capabilities.pull_receive``, after ``start``: a function that blocks for the next
        payload at most about ``timeout`` seconds, and the exception it raises when none came. The worker
        then runs the receive loop itself instead of ``poll``, which saves a callback per message."""
        raise NotImplementedError(f"{type(self).__name__} does not declare Capabilities.pull_receive")

    @abstractmethod
    def close(self) -> None: ...


class Requester(ABC):
    @abstractmethod
    def request(self, payload: bytearray, timeout: float) -> bytes | None:
        """Send one request and return its reply, or None when no reply came within ``timeout``."""

    @abstractmethod
    def close(self) -> None: ...


class Replier(ABC):
    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def poll(self, timeout: float) -> int:
        """Answer requests (echo the payload) for at most about ``timeout`` seconds; return how many."""

    @abstractmethod
    def close(self) -> None: ...


@dataclass(frozen=True)
class Capabilities:
    """What a driver offers beyond the five steps (plan, teardown, create producer / consumer, close),
    declared on the class so that the runner reads it instead of probing for methods."""

    #: ``Consumer.receiver`` works: a pull-style library that returns one message per call. Drivers that
    #: ack, or whose library delivers on its own thread, leave it off (the runner uses ``poll``).
    pull_receive: bool = False
    #: ``Producer.send`` accepts any buffer (e.g. a memoryview slice) and has copied it by the time it
    #: returns: the runner may send full-speed runs from one reused block of messages.
    batch_send: bool = False
    #: With ``batch_send``: the library converts any other buffer to ``bytes`` in Python before it sends
    #: (mqcore), so the runner hands it one ``bytes`` object per message, made in C from the stamped block, as
    #: an application would make its message, rather than a view it would convert at a Python call's cost.
    send_bytes: bool = False
    #: The producer buffers or windows sends: the runner calls ``Producer.flush`` after the last one.
    flush: bool = False
    #: Pub/sub subscriptions reach a publisher some time after the subscriber is ready, and what it sends
    #: before then is dropped (brokerless PUB/SUB: the slow joiner). The runner then starts a pub/sub case
    #: only once every consumer has heard a probe from each of its producers (needs ``pull_receive``).
    slow_joiner: bool = False
    #: ``Producer.send_keyed`` works: what a message key is in this system, in words ("record key: the
    #: partition by its hash"); empty when the system has no keys (a keyed scenario skips it, saying so).
    keys: str = ""


class Driver(ABC):
    """One messaging system. Subclasses set the class attributes and implement the factory methods."""

    name: ClassVar[str]
    patterns: ClassVar[frozenset[Pattern]]
    needs_broker: ClassVar[bool] = False
    #: Python distributions whose versions go into the manifest; the first is the client library.
    client_packages: ClassVar[tuple[str, ...]] = ()
    #: The client library's import name: when it does not import, the system is unavailable.
    client_module: ClassVar[str | None] = None
    #: The client that drives the system, named in every row (``rabbitmq (pika)``); "" for a library
    #: measured through its own API (mqcore, jeromq).
    client: ClassVar[str] = ""
    #: A frozen dataclass of the variant options (see harness.drivers.options); parsed into ``self.opts``.
    options_type: ClassVar[type[Any] | None] = None
    capabilities: ClassVar[Capabilities] = Capabilities()
    #: True for a client that runs in the JVM worker (harness.runner.jvm), not in the Python worker.
    runs_in_jvm: ClassVar[bool] = False

    def __init__(self, options: Mapping[str, Any], broker: BrokerEndpoint | None = None) -> None:
        self.options = dict(options)
        self.broker = broker
        if self.needs_broker and broker is None:
            raise DriverError(f"{self.name} needs a broker, and none was provisioned")
        if self.options_type is not None:
            from harness.drivers.options import parse_options

            self.opts: Any = parse_options(self.name, self.options_type, self.options, self.option_names())

    # -- description -------------------------------------------------------------------------------

    @classmethod
    def option_names(cls) -> frozenset[str]:
        """Variant options this driver understands; anything else in a scenario is rejected."""
        if cls.options_type is None:
            return frozenset()
        from harness.drivers.options import option_names

        return option_names(cls.options_type)

    def guarantee(self) -> Guarantee:
        """Delivery guarantee of the configured variant."""
        return Guarantee.AT_MOST_ONCE

    def parity(self) -> dict[str, str]:
        """What a reader needs to see to know whether two rows are like for like, beside the broker's shape:
        ``acks``, what a send waits for before it counts as accepted (``acks=all``, ``publisher confirms``,
        ``none``), and ``fsync``, when the messages are forced to disk (``every write``, ``never (OS page
        cache)``, ``none (memory only)``). Default: a library's, nothing to wait for and nothing on disk; a
        driver with a broker that does not state its own says so rather than pass for a library."""
        if self.needs_broker:
            return {"acks": "not stated by the driver", "fsync": "not stated by the driver"}
        return {"acks": "none (brokerless)", "fsync": "none (in memory)"}

    def leader_resource(self, plan: Mapping[str, Any]) -> str:
        """The name the broker's ``Provisioner.leader`` takes for what this plan moves messages through
        (topic 0's partition, queue or stream): a node fault aimed at ``leader`` asks for its leader."""
        return topology_from_plan(plan).topic_name(0)

    def label(self) -> str:
        """Name shown in reports: the system and the client that drove it (``rabbitmq (pika)``,
        ``kafka (java)``), and the broker implementation when it is not the system's reference broker."""
        parts = [self.broker.implementation] if self.broker is not None and self.broker.implementation else []
        if self.client_name():
            parts.append(self.client_name())
        return f"{self.name} ({', '.join(parts)})" if parts else self.name

    def client_name(self) -> str:
        """The client of this variant: ``client``, unless the driver's options choose among clients."""
        return self.client

    @classmethod
    def ready_detail(cls) -> str:
        """What `mqbench systems` says of a brokerless system that can run here."""
        return "no broker needed"

    def versions(self) -> dict[str, str]:
        from importlib import metadata

        out: dict[str, str] = {}
        for pkg in self.client_packages:
            try:
                out[pkg] = metadata.version(pkg)
            except metadata.PackageNotFoundError:
                out[pkg] = "not installed"
        if self.broker is not None and self.broker.version:
            out[f"{self.broker.implementation or self.name} broker"] = self.broker.version
        return out

    @classmethod
    def unavailable_reason(cls) -> str | None:
        """None when the client library imports; otherwise one sentence saying what is missing."""
        if cls.client_module is None:
            return None
        try:
            importlib.import_module(cls.client_module)
        except ImportError:
            package = cls.client_packages[0] if cls.client_packages else cls.client_module
            return f"the Python package {package} is not installed (pip install {package})"
        return None

    # -- parent process ----------------------------------------------------------------------------

    def plan(self, topology: Topology) -> dict[str, Any]:
        """Create topics/queues and choose endpoints; the result is JSON-able and shared with every worker."""
        return {"topology": _topology_dict(topology)}

    def teardown(self, plan: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        """Remove what ``plan`` created. Must not raise for things already gone."""

    # -- worker processes --------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        raise DriverError(f"{self.name} has no producer for this pattern")

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        raise DriverError(f"{self.name} has no consumer for this pattern")

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        raise DriverError(f"{self.name} does not support request/reply")

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        raise DriverError(f"{self.name} does not support request/reply")


def _topology_dict(t: Topology) -> dict[str, Any]:
    return {
        "pattern": t.pattern.value,
        "topics": t.topics,
        "producers": t.producers,
        "consumers": t.consumers,
        "message_size": t.message_size,
        "run_tag": t.run_tag,
        "keys": t.keys,
    }


def topology_from_plan(plan: Mapping[str, Any]) -> Topology:
    d = plan["topology"]
    return Topology(
        pattern=Pattern(d["pattern"]),
        topics=int(d["topics"]),
        producers=int(d["producers"]),
        consumers=int(d["consumers"]),
        message_size=int(d["message_size"]),
        run_tag=str(d["run_tag"]),
        keys=int(d.get("keys", 0)),
    )
