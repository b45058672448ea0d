"""Driver conformance: every system in the registry moves numbered messages correctly for each pattern it
declares (count, content, per-producer order where the variant promises it) and closes cleanly.

Broker systems run against a broker from ``harness.brokers.provision`` (a local process where the binaries
are here, else ``auto``), started once per system per session. ``test_conformance_in_containers`` runs the
default variant of the brokers in ``CONTAINER_SYSTEMS`` once more through the containers backend (the same
launch inside the broker's image). A missing broker, engine or image skips its cases, except in CI
(``CI=true``), where it fails them with the reason.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from harness._watchdog import watchdog_pid
from harness.brokers import choose_backend, provision
from harness.brokers._process import _descendants, live_pids
from harness.drivers import CLIENTS, SYSTEMS, driver_class
from harness.drivers.base import BrokerEndpoint, Driver, Guarantee, Pattern
from tests.harness.drivers.conformance import (
    check_outcomes,
    check_pubsub,
    check_queue,
    os_threads,
    parse_payload,
    run_flow,
    run_flow_jvm,
    run_reqrep,
)

COUNT = 2000
SIZE = 100

pytestmark = pytest.mark.broker


@dataclass(frozen=True)
class Variant:
    """Options to run a system with; ``unordered`` lists patterns where order is not promised."""

    name: str
    options: dict[str, Any] = field(default_factory=dict)
    unordered: frozenset[Pattern] = frozenset()
    lossy: bool = False  # a brokerless at-most-once variant may drop (never duplicate or corrupt)


#: Variants beyond the defaults, per system. Every variant runs every pattern the driver declares.
VARIANTS: dict[str, list[Variant]] = {
    "rabbitmq": [
        Variant("reliable", {"persistent": True, "confirms": True, "manual_ack": True, "prefetch": 50,
                             "ack_every": 20, "confirm_window": 200}),
        Variant("confirm-each", {"confirms": True, "manual_ack": True, "confirm_window": 1, "ack_every": 1}),
        Variant("quorum", {"queue_type": "quorum", "confirms": True, "manual_ack": True}),
    ],
    "kafka": [
        Variant(
            "acks-all-2p",
            {"acks": "all", "partitions": 2, "linger_ms": 5},
            unordered=frozenset({Pattern.PUBSUB}),
        ),
        Variant("confluent", {"client": "confluent-kafka"}),
        Variant(
            "confluent-acks-all-2p",
            {"client": "confluent-kafka", "acks": "all", "partitions": 2},
            unordered=frozenset({Pattern.PUBSUB}),
        ),
    ],
    "mqtt": [Variant("qos1", {"qos": 1}), Variant("qos2", {"qos": 2}), Variant("qos1-window", {"qos": 1, "inflight": 16})],
    "redis": [
        Variant("pubsub-mode", {"mode": "pubsub"}),
        Variant("aof", {"aof": True}),
        Variant("unpipelined", {"pipeline": 1, "batch": 7}),
    ],
    # async sends: RocketMQ keeps no async sender's order (two sends in flight may be stored either way round)
    "rocketmq": [Variant("2q", {"queues": 2}, unordered=frozenset({Pattern.PUBSUB})),
                 Variant("async", {"send": "async"}, unordered=frozenset({Pattern.PUBSUB, Pattern.QUEUE}))],
    # JetStream on one node (R1): a window of async publishes; and each publish waiting for its ack, small fetches.
    "nats": [
        Variant("jetstream", {"jetstream": True}),
        Variant("jetstream-each", {"jetstream": True, "storage": "memory", "window": 1, "fetch": 7}),
    ],
    # Brokerless defaults drop at the high-water mark under a burst (at-most-once); without HWMs they must not.
    "zmq": [Variant("no-hwm", {"sndhwm": 0, "rcvhwm": 0})],
    "mqcore": [Variant("no-hwm", {"sndhwm": 0, "rcvhwm": 0})],
    "activemq": [
        Variant("reliable", {"persistent": True, "client_ack": True, "receipts": True, "ack_every": 64}),
        Variant("receipt-each", {"client_ack": True, "receipts": True, "tx_batch": 1}),
    ],
}

#: Variants whose producers report each send's outcome (``Producer.watch_outcomes``: acknowledgements that
#: come after ``send`` returned); their outcomes are checked (every send accepted, once).
REPORTS_OUTCOMES = {("rabbitmq", "reliable"), ("rabbitmq", "quorum"), ("mqtt", "qos1"), ("mqtt", "qos2"),
                    ("mqtt", "qos1-window"), ("redis", "default"), ("redis", "pubsub-mode"), ("redis", "aof"),
                    ("activemq", "reliable"), ("rocketmq", "async")}

#: Clients that run in the JVM worker (system, client or None for the system's own): they run through the
#: real runner (test_conformance_jvm), with these variants besides their defaults.
JVM_VARIANTS: dict[tuple[str, str | None], list[Variant]] = {
    ("jeromq", None): [Variant("no-hwm", {"sndhwm": 0, "rcvhwm": 0})],
    ("rabbitmq", "java"): [Variant("reliable", {"client": "java", "persistent": True, "confirms": True,
                                                 "manual_ack": True, "prefetch": 50}),
                           Variant("quorum", {"client": "java", "queue_type": "quorum", "confirms": True,
                                              "manual_ack": True})],
    ("kafka", "java"): [Variant("acks-all-2p", {"client": "java", "acks": "all", "partitions": 2, "linger_ms": 5},
                                unordered=frozenset({Pattern.PUBSUB}))],
    ("rocketmq", "java"): [Variant("4q", {"client": "java", "queues": 4},
                                   unordered=frozenset({Pattern.PUBSUB, Pattern.QUEUE})),
                           Variant("async", {"client": "java", "send": "async"},
                                   unordered=frozenset({Pattern.PUBSUB, Pattern.QUEUE}))],
}


def _module_exists(system: str) -> bool:
    module = SYSTEMS[system].partition(":")[0]
    return importlib.util.find_spec(f"harness.drivers.{module}") is not None


def _cases() -> Iterator[Any]:
    for system in SYSTEMS:
        if not _module_exists(system):
            continue  # driver not written yet
        cls = driver_class(system)
        if getattr(cls, "runs_in_jvm", False):
            continue  # test_conformance_jvm
        default = Variant("default", lossy=not cls.needs_broker)
        for variant in [default, *VARIANTS.get(system, [])]:
            for pattern in sorted(cls.patterns, key=lambda p: p.value):
                consumers = (2,) if pattern is not Pattern.REQREP else (1,)
                for n in consumers:
                    yield pytest.param(
                        system, variant, pattern, n, id=f"{system}-{variant.name}-{pattern.value}-{n}c"
                    )


#: Brokers whose conformance also runs through the containers backend (their default variant).
CONTAINER_SYSTEMS = ("rabbitmq", "kafka", "redis", "nats", "mqtt")


class BrokerPool:
    """One broker per system and backend, started on first use; starting another stops the previous one
    (cases are grouped by system and backend, so each starts once) to spare the shared machine. ``backend``
    None: a local process where one can run, else whatever ``auto`` chooses."""

    def __init__(self) -> None:
        self.current: tuple[tuple[str, str | None], BrokerEndpoint, contextlib.ExitStack] | None = None
        self.failures: dict[tuple[str, str | None], str] = {}

    def get(self, system: str, tmp_root: Any, backend: str | None = None) -> BrokerEndpoint:
        key = (system, backend)
        if self.current is not None and self.current[0] == key:
            return self.current[1]
        self.close()
        if key in self.failures:
            pytest.fail(self.failures[key])
        if backend is None:
            backend = "process" if choose_backend(system, "process").backend else "auto"
        choice = choose_backend(system, backend)
        if choice.backend is None:
            if os.environ.get("CI") == "true":
                pytest.fail(f"{system}: {choice.reason}")
            pytest.skip(f"{system}: {choice.reason}")
        stack = contextlib.ExitStack()
        try:
            endpoint = stack.enter_context(provision(system, backend, logs_dir=tmp_root / "broker-logs"))
        except Exception as exc:
            self.failures[key] = f"{system} broker did not start: {exc}"
            raise
        self.current = (key, endpoint, stack)
        return endpoint

    def close(self) -> None:
        if self.current is not None:
            _, _, stack = self.current
            self.current = None
            stack.close()


@pytest.fixture(scope="session")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[BrokerPool, Any]]:
    pool = BrokerPool()
    try:
        yield pool, tmp_path_factory.mktemp("conformance")
    finally:
        pool.close()


def _endpoint(
    cls: type[Driver], system: str, brokers: tuple[BrokerPool, Any], backend: str | None = None
) -> BrokerEndpoint | None:
    reason = cls.unavailable_reason()
    if reason is not None:
        pytest.skip(reason)
    if not cls.needs_broker:
        return None
    pool, root = brokers
    return pool.get(system, root, backend)


#: Threads a client library starts with its first client and keeps for the life of the process, by name
#: (librocketmq's transport event loop; pyarrow's allocator): not a client left open.
PROCESS_WIDE_THREADS = {"EventLoop", "jemalloc_bg_thd"}


def _foreign_threads(before: set[threading.Thread], os_before: dict[int, str]) -> list[str]:
    """Threads started since ``before``/``os_before`` still running after 5 s: Python threads, and threads of
    a client's C library (librdkafka's, librocketmq's) that only end when the client is destroyed."""
    deadline = time.monotonic() + 5.0
    while True:
        extra = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
        python_ids = {t.native_id for t in threading.enumerate()}
        extra += [f"{name} (native)" for tid, name in os_threads().items()
                  if tid not in os_before and tid not in python_ids and name not in PROCESS_WIDE_THREADS]
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.05)


@pytest.mark.parametrize(("system", "variant", "pattern", "consumers"), list(_cases()))
def test_conformance(
    system: str, variant: Variant, pattern: Pattern, consumers: int, brokers: tuple[BrokerPool, Any]
) -> None:
    _conformance(system, variant, pattern, consumers, _endpoint(driver_class(system), system, brokers))


@pytest.mark.parametrize(("system", "variant", "pattern", "consumers"),
                         [case for case in _cases() if case.values[0] in CONTAINER_SYSTEMS
                          and case.values[1].name == "default"])
def test_conformance_in_containers(
    system: str, variant: Variant, pattern: Pattern, consumers: int, brokers: tuple[BrokerPool, Any]
) -> None:
    """The same checks, the broker in containers: the process backend's launch inside its image."""
    endpoint = _endpoint(driver_class(system), system, brokers, "containers")
    assert endpoint is not None and endpoint.backend == "containers" and endpoint.extra["image_id"]
    _conformance(system, variant, pattern, consumers, endpoint)


def _conformance(system: str, variant: Variant, pattern: Pattern, consumers: int, endpoint: BrokerEndpoint | None) -> None:
    cls = driver_class(system)
    threads_before, os_threads_before = set(threading.enumerate()), os_threads()
    children_before = set(_descendants(os.getpid()))

    if pattern is Pattern.REQREP:
        replies = run_reqrep(cls, variant.options, endpoint, count=200, size=SIZE)
        assert all(r is not None for r in replies), f"{replies.count(None)} requests got no reply"
        assert [parse_payload(r, SIZE) for r in replies if r is not None] == [(0, s) for s in range(200)]
    else:
        delivery = run_flow(cls, variant.options, endpoint, pattern, consumers, COUNT, SIZE)
        ordered = pattern not in variant.unordered
        # A brokerless at-most-once variant drops at the HWM by design (DESIGN.md: shown as loss).
        driver = cls(variant.options, endpoint)
        lossy = not cls.needs_broker and driver.guarantee() is Guarantee.AT_MOST_ONCE and bool(variant.lossy)
        if pattern is Pattern.PUBSUB:
            check_pubsub(delivery, ordered, lossy)
        else:
            check_queue(delivery, ordered, lossy)
        if (system, variant.name) in REPORTS_OUTCOMES:
            assert delivery.outcomes is not None, "the producer reports no outcomes"
        check_outcomes(delivery)

    leftover = _foreign_threads(threads_before, os_threads_before)
    assert not leftover, f"threads left running after close: {leftover}"
    broker_pids = set(live_pids())
    new_children = {p for p in set(_descendants(os.getpid())) - children_before if p not in broker_pids} - {
        d for b in broker_pids for d in _descendants(b)
    } - {watchdog_pid()}  # the process's watchdog (harness/_watchdog.py), started by a first broker or proxy
    assert not new_children, f"processes left running after close: {sorted(new_children)}"


def _jvm_cases() -> Iterator[Any]:
    for (system, client), variants in JVM_VARIANTS.items():
        if system not in SYSTEMS or (client is not None and client not in CLIENTS.get(system, {})):
            continue  # the system is not registered in this checkout
        cls = driver_class(system, client)
        options = {"client": client} if client else {}
        default = Variant("default", options, lossy=not cls.needs_broker)
        for variant in [default, *variants]:
            for pattern in sorted(cls.patterns, key=lambda p: p.value):
                n = 2 if pattern is not Pattern.REQREP else 1
                yield pytest.param(system, client, variant, pattern, n,
                                   id=f"{system}-{client or 'own'}-{variant.name}-{pattern.value}-{n}c")


@pytest.mark.parametrize(("system", "client", "variant", "pattern", "consumers"), list(_jvm_cases()))
def test_conformance_jvm(
    system: str, client: str | None, variant: Variant, pattern: Pattern, consumers: int,
    brokers: tuple[BrokerPool, Any], tmp_path: Any,
) -> None:
    """The JVM-driven clients, through the runner: count, no duplicates, order; no process left behind."""
    cls = driver_class(system, client)
    reason = cls.unavailable_reason()
    if reason is not None and os.environ.get("CI") == "true":
        pytest.fail(f"{system} ({client or 'own client'}): {reason}")
    endpoint = _endpoint(cls, system, brokers)
    try:
        delivery = run_flow_jvm(cls, variant.options, endpoint, pattern, consumers, COUNT, SIZE, tmp_path)
    finally:  # the JVMs' command lines name their spec files, under tmp_path
        left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
        assert not left, f"JVM workers left running after the run: {left}"
    ordered = pattern not in variant.unordered
    lossy = not cls.needs_broker and bool(variant.lossy) and pattern is Pattern.PUBSUB
    if pattern is Pattern.PUBSUB:
        check_pubsub(delivery, ordered, lossy)
    else:
        check_queue(delivery, ordered, lossy)


def test_guarantee_and_options_are_declared() -> None:
    """Every driver describes itself: options, a guarantee for its defaults, and no surprise options."""
    for system in SYSTEMS:
        if not _module_exists(system):
            continue
        cls = driver_class(system)
        assert isinstance(cls.option_names(), frozenset)
        assert cls.patterns, f"{system} declares no pattern"
        for variant in VARIANTS.get(system, []):
            assert set(variant.options) <= cls.option_names(), (
                f"{system}: {variant.name} uses unknown options"
            )
