"""What the drivers of broker systems share: the plan/teardown frame around one admin connection,
connecting with a one-sentence error, the guarantee rule, and the consumer of callback-style clients.

A broker driver then reads in OpenMessaging Benchmark's order: its options (a dataclass, see
``harness.drivers.options``), ``admin`` + ``create_topics`` / ``delete_topics`` (parent process),
``create_producer`` / ``create_consumer`` (workers), each client's ``close``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeVar
from urllib.parse import urlsplit

from harness.drivers.base import (
    Capabilities,
    Consumer,
    Driver,
    DriverError,
    Guarantee,
    Pattern,
    Role,
    Topology,
    topology_from_plan,
)
from harness.drivers.options import NoOptions

T = TypeVar("T")
RETRY_PAUSE = 0.5  # seconds between connection attempts
# A gap this long (ns) before a send means the producer is paced, not flat out (see SendBatch).
IDLE_NS = 50_000


def address(url: str) -> str:
    """``host:port`` of a broker URL (no scheme, no credentials): how messages name a broker."""
    return urlsplit(url).netloc.rpartition("@")[2] or url


def connect(system: str, url: str, attempt: Callable[[], T], retry_for: float = 0.0, what: str = "") -> T:
    """The result of ``attempt()`` (a connected client). When it raises, it is tried again every
    RETRY_PAUSE s until ``retry_for`` s have passed, and then a DriverError names the broker's address,
    the last error and what to check. A DriverError from ``attempt`` (a refusal it already explained)
    passes unchanged. ``what`` names the client in the message (``"a producer "``)."""
    deadline = time.monotonic() + retry_for
    while True:
        try:
            return attempt()
        except DriverError:
            raise
        except Exception as exc:
            if time.monotonic() + RETRY_PAUSE > deadline:
                raise DriverError(
                    f"cannot connect {what}to {system} at {address(url)} ({exc!r}); check that the broker runs"
                ) from None
        time.sleep(RETRY_PAUSE)


def close_quietly(client: Any) -> None:
    """Close a client whose connection may already be gone (teardown must not raise)."""
    with contextlib.suppress(Exception):
        client.close()


def guarantee(acknowledged: bool, durable: bool) -> Guarantee:
    """The guarantee of a variant: at-most-once unless sends are confirmed and receipts acknowledged; then
    durable when the messages also survive a broker restart."""
    if not acknowledged:
        return Guarantee.AT_MOST_ONCE
    return Guarantee.DURABLE if durable else Guarantee.AT_LEAST_ONCE


def topic(plan: Mapping[str, Any], role: Role) -> str:
    """The name of the topic (queue, subject, stream) a worker uses."""
    return topology_from_plan(plan).topic_name(role.topic)


def pattern(plan: Mapping[str, Any]) -> Pattern:
    return topology_from_plan(plan).pattern


class BrokerDriver(Driver):
    """A system with a broker, whose options are declared (none unless ``options_type`` says otherwise).
    ``plan`` opens ``admin()`` (None: nothing to create, e.g. brokers that make destinations on first
    use), runs ``create_topics`` and closes it; ``teardown`` does the same with ``delete_topics`` and never
    raises (the broker may be gone already)."""

    needs_broker = True
    capabilities: ClassVar[Capabilities] = Capabilities(flush=True)  # producers batch or window their sends
    options_type: ClassVar[type[Any] | None] = NoOptions

    @property
    def url(self) -> str:
        assert self.broker is not None  # Driver.__init__ refused a missing broker
        return self.broker.url

    def admin(self) -> Any:
        return None

    def create_topics(self, admin: Any, topology: Topology) -> dict[str, Any]:
        """Create the run's topics; the result is added to the plan."""
        return {}

    def delete_topics(self, admin: Any, topology: Topology) -> None:  # noqa: B027 - optional hook
        """Remove what ``create_topics`` made."""

    def plan(self, topology: Topology) -> dict[str, Any]:
        plan = super().plan(topology)
        admin = self.admin()
        if admin is not None:
            try:
                plan.update(self.create_topics(admin, topology))
            finally:
                close_quietly(admin)
        return plan

    def teardown(self, plan: Mapping[str, Any]) -> None:
        try:
            admin = self.admin()
        except DriverError:  # broker gone: nothing left to remove
            return
        if admin is None:
            return
        try:
            self.delete_topics(admin, topology_from_plan(plan))
        except Exception:  # already gone, or the broker is stopping
            pass
        finally:
            close_quietly(admin)


class SendBatch:
    """When a producer that batches its writes (or commits) should end a batch: after ``size`` sends, or at
    once when the send came after a gap (the producer is ``paced``, not flat out), so that batching never
    holds a message back to wait for the next send. A paced producer has time to spare: it then also waits
    for the broker's answer to what it sent, so that each of its sends is confirmed when it returns, as
    without a window (a broker crash cannot take messages the run counts as sent). The clock here decides,
    it never measures."""

    def __init__(self, size: int) -> None:
        self.size, self.count, self.last = size, 0, 0
        self.paced = False

    def begin(self) -> None:
        """At the start of ``send``: whether the producer paused since its previous send returned (the
        time a send itself takes is no pause: a slow client is not a paced producer)."""
        self.paced = time.monotonic_ns() - self.last > IDLE_NS

    def due(self) -> bool:
        """Count this send; True when the batch ends with it (the caller then flushes and calls ``done``)."""
        self.count += 1
        if self.count >= self.size or self.paced:
            return True
        self.last = time.monotonic_ns()
        return False

    def done(self) -> None:
        self.count = 0
        self.last = time.monotonic_ns()


class Connection(Protocol):
    """One client connection of a callback-style library."""

    def check(self) -> None:
        """Raise DriverError when the connection failed (the library noticed it on its own thread)."""

    def close(self) -> None: ...


class CallbackConsumer(Consumer):
    """A consumer whose library delivers on its own thread: ``poll`` only checks the connection and waits.
    Subclasses implement ``start``."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.stopped = threading.Event()

    def poll(self, timeout: float) -> None:
        self.conn.check()
        self.stopped.wait(timeout)

    def close(self) -> None:
        self.stopped.set()
        self.conn.close()
