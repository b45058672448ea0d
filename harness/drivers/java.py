"""Systems driven by Java clients through the JVM worker (``jvm/``, harness/runner/jvm.py, docs/jvm.md).

Each class here is the Python driver of the same system with ``runs_in_jvm`` set: the parent process plans
and tears down as that driver does (declaring queues, creating topics, choosing endpoints), and each worker
process relays to a JVM running the Java client named by ``jvm_client`` (a class in jvm/). A variant picks
one with the option ``client: java`` (harness.drivers.CLIENTS); ``jeromq`` has no other client. Rows are
labelled with the client: ``rabbitmq (java)``, ``kafka (java)``, ``rocketmq (java)``, ``jeromq``.

The JVM worker's location and the checks of what it needs live here too, so that this layer and the runner
(harness/runner/jvm.py) share them.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from harness.drivers.base import Driver, DriverError, Guarantee, Pattern, Topology
from harness.drivers.kafka import KafkaDriver, KafkaOptions
from harness.drivers.rabbitmq import RabbitMQDriver, RabbitMQOptions
from harness.drivers.rocketmq import check_send, send_parity, wait_for_routes
from harness.drivers.zmq_driver import ZmqDriver

JVM_DIR = Path(__file__).resolve().parents[2] / "jvm"
JAR = JVM_DIR / "target" / "mqbench-jvm.jar"
LIB = JVM_DIR / "target" / "lib"
MAIN = "mqbench.jvm.Main"
PEER = "mqbench.jvm.Peer"
# Small heap for 2 cores; the opens are what the RocketMQ client's Netty needs on Java 17.
JVM_OPTIONS = (
    "-Xms64m", "-Xmx512m", "-XX:+UseSerialGC",
    "--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.nio=ALL-UNNAMED",
    "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED",
)


def unavailable_reason() -> str | None:
    """None when the JVM worker can run here; otherwise one sentence saying what to install or build."""
    if shutil.which("java") is None:
        return "no `java` on PATH: install a Java 17 runtime (e.g. apt-get install openjdk-17-jre-headless)"
    if not JAR.is_file():
        return f"the JVM worker is not built ({JAR} is missing): run `make jvm`"
    return None


def library_version(artifact: str) -> str:
    """Version of a Java library the worker was built with, from its jar's name in jvm/target/lib."""
    for jar in sorted(LIB.glob(f"{artifact}-*.jar")):
        rest = jar.name[len(artifact) + 1 : -len(".jar")]
        if rest[:1].isdigit():
            return rest
    return "not built"


@functools.cache
def java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    first = out.splitlines()[0] if out else ""
    return first.split('"')[1] if first.count('"') >= 2 else first


def command(main: str, *args: str, options: tuple[str, ...] = ()) -> list[str]:
    """The java command line running ``main`` of the worker's jar (its dependencies are on the jar's
    manifest class path); ``options`` come after ``JVM_OPTIONS``, so that they win (``-Xmx``)."""
    return ["java", *JVM_OPTIONS, *options, "-cp", str(JAR), main, *args]


def prepare_in_jvm(driver: Any, plan: Mapping[str, Any]) -> None:
    """Run the Java client's ``prepare`` (create the run's topics) once, in a JVM, before the workers start."""
    spec = {"kind": "prepare", "name": "prepare", "client": driver.jvm_client, "options": driver.options,
            "broker_url": driver.broker.url if driver.broker is not None else None, "plan": plan, "index": 0,
            "topic": 0, "size": 0, "payload": "fixed", "capacity": 0, "out": "", "request_timeout": 30.0,
            "probe_from": []}
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="mqbench-prepare-") as f:
        json.dump(spec, f)
        f.flush()
        try:
            done = subprocess.run(command(MAIN, "--prepare", f.name), capture_output=True, text=True, timeout=120,
                                  start_new_session=True)
        except subprocess.TimeoutExpired:
            raise DriverError(f"{driver.label()}: preparing the run's topics took over 120 s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise DriverError(f"{driver.label()}: could not create the run's topics: {last}")


#: What the JVM worker does not run, and why, in one sentence: network faults need no worker restart (the
#: client reconnects by itself, the JVM keeps its records), nor do node faults for a client that rides
#: through a node's failure and reports each send's outcome (``rides_node_faults``); a killed or restarted
#: process would need the mapped records the JVM worker does not keep, and a slow consumer the Python loop's
#: pacing.
JVM_LIMITS = ("the JVM worker runs neither kill/restart faults nor slow consumers (network faults only, and "
              "node faults with the Kafka client)")


class JavaClient:
    """What every JVM-driven driver adds to its Python base (put it first among the bases)."""

    runs_in_jvm: ClassVar[bool] = True
    #: The client rides through the failure of a cluster's node by itself and reports every send's outcome:
    #: its rows run node faults (``JVM_LIMITS``).
    rides_node_faults: ClassVar[bool] = False
    client: ClassVar[str] = "java"
    jvm_client: ClassVar[str]  # the client's name in jvm/.../Main.client
    jvm_artifact: ClassVar[str]  # the Java library's Maven artifact, for the manifest's versions
    name: ClassVar[str]
    broker: Any

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return super().unavailable_reason() or unavailable_reason()  # type: ignore[misc]

    @classmethod
    def ready_detail(cls) -> str:
        """What `mqbench systems` says when the client can run."""
        return f"{cls.jvm_artifact} {library_version(cls.jvm_artifact)} on Java {java_version()}"

    def versions(self) -> dict[str, str]:
        out: dict[str, str] = super().versions()  # type: ignore[misc]
        out[self.jvm_artifact] = library_version(self.jvm_artifact)
        out["java"] = java_version()
        return out

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)  # type: ignore[call-arg]
        reason = unavailable_reason()
        if reason:
            raise DriverError(f"{self.name} ({self.client}) cannot run: {reason}")


class JeromqDriver(JavaClient, ZmqDriver):
    """JeroMQ in the zmq driver's topology (producers bind; consumers connect), over tcp only."""

    name: ClassVar[str] = "jeromq"
    client_packages: ClassVar[tuple[str, ...]] = ()
    client: ClassVar[str] = ""  # a library measured through itself, like mqcore
    jvm_client = "jeromq"
    jvm_artifact = "jeromq"

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        if self.opts.transport != "tcp":
            raise DriverError("jeromq: option transport must be tcp (the JVM worker's JeroMQ has no ipc here)")

    @classmethod
    def option_names(cls) -> frozenset[str]:
        return frozenset({"transport", "sndhwm", "rcvhwm", "io_threads"})

    @classmethod
    def module(cls) -> ModuleType:
        raise DriverError("jeromq runs only in the JVM worker (harness.runner.jvm), not in Python")

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return unavailable_reason()

    def versions(self) -> dict[str, str]:
        return {"jeromq": library_version("jeromq"), "java": java_version()}


def _with_client(options: type[Any]) -> type[Any]:
    """A Python driver's options plus ``client``, the option that chose the Java driver."""
    return dataclasses.make_dataclass(f"Java{options.__name__}", [("client", str, dataclasses.field(default="java"))],
                                      bases=(options,), frozen=True)


class RabbitMQJavaDriver(JavaClient, RabbitMQDriver):
    """amqp-client; with ``confirms`` it publishes with a window of unconfirmed messages (PerfTest's -c)."""

    options_type = _with_client(RabbitMQOptions)
    jvm_client = "rabbitmq"
    jvm_artifact = "amqp-client"


class KafkaJavaDriver(JavaClient, KafkaDriver):
    """kafka-clients with asynchronous sends; a failed send fails the producer, or, when the runner watches
    outcomes, is that send's refusal (acks=all: durable, as the Python clients)."""

    options_type = _with_client(KafkaOptions)
    jvm_client = "kafka"
    jvm_artifact = "kafka-clients"
    rides_node_faults = True  # kafka-clients follows a new leader itself; outcomes come through the JVM worker


class TansuJavaDriver(KafkaJavaDriver):
    """kafka-clients against Tansu, the Kafka-compatible stand-in (labelled ``tansu (java)``, never Kafka)."""

    name: ClassVar[str] = "tansu"


@dataclasses.dataclass(frozen=True)
class RocketMQJavaOptions:
    client: str = "java"
    send: str = "sync"  # as the Python driver's: sync or async (at-least-once), or oneway (at-most-once)
    queues: int = 1  # queues per topic, as the Python driver (more queues: no order across them)

    def __post_init__(self) -> None:
        check_send(self.send)
        if self.queues < 1:
            raise DriverError("rocketmq option 'queues' must be 1 or more")


class RocketMQJavaDriver(JavaClient, Driver):
    """rocketmq-client (remoting) against the NameServer at the broker URL; sends as the Python driver's. Topics are
    created by the first JVM worker that opens (the Java client's createTopic); nothing is left to tear
    down but the topics, which die with the per-run broker."""

    name: ClassVar[str] = "rocketmq"
    patterns = frozenset({Pattern.QUEUE, Pattern.PUBSUB})
    needs_broker = True
    options_type = RocketMQJavaOptions
    jvm_client = "rocketmq"
    jvm_artifact = "rocketmq-client"
    opts: RocketMQJavaOptions

    def guarantee(self) -> Guarantee:
        return Guarantee.AT_MOST_ONCE if self.opts.send == "oneway" else Guarantee.AT_LEAST_ONCE

    def parity(self) -> dict[str, str]:
        return send_parity(self.opts.send, self.broker)

    def plan(self, topology: Topology) -> dict[str, Any]:
        plan = super().plan(topology)
        plan["queues"] = self.opts.queues
        prepare_in_jvm(self, plan)  # the topics: there is no Python client to create them
        namesrv = self.broker.url.split("://", 1)[-1].rstrip("/")  # host:port, or several separated by ';'
        try:  # as the Python driver does: a thousand new topics take the NameServer seconds to route
            wait_for_routes(namesrv, [topology.topic_name(i) for i in range(topology.topics)])
        except OSError as exc:
            raise DriverError(f"{self.label()}: could not ask the NameServer at {namesrv} for the run's "
                              f"topics: {exc}") from None
        return plan
