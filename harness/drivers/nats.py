"""NATS through nats-py, whose asyncio loop runs in a background thread of the worker: core NATS (the
default, at-most-once), or JetStream (``jetstream: true``: a stream per topic, acknowledged publishes, pull
consumers with explicit acks; ``harness.drivers._nats_jetstream``).

Threads: each producer/consumer/requester/replier owns one ``_Session`` (a client in its own event-loop
thread); only that thread touches the nats client. A core producer's ``send`` only appends the message to a
queue; the publishing runs in the loop, a batch at a time (one thread hop per batch, not per message: the
hop is scheduled when the queue was idle), and the client's flusher writes what a batch published in one
go. The queue holds at most ``WINDOW`` messages (back-pressure); consumers get messages in the loop thread
(callback-style). queue:
subscribers share a queue group per topic; pubsub: plain subscriptions; reqrep: request/reply with the
client's shared reply inbox, repliers in a queue group. Core NATS keeps nothing: at-most-once.

A cluster's endpoint URL lists every node, comma-separated: clients are given them all. A JetStream
session reconnects to another node when its node dies or stops answering PINGs, and fails (``check``) only
once no node took it back within its reconnect attempts; a core session fails at its first error.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, TypeVar

from harness.drivers.base import (
    Capabilities,
    Consumer,
    DriverError,
    Guarantee,
    Pattern,
    Producer,
    Replier,
    Requester,
    Role,
    Topology,
    topology_from_plan,
)
from harness.drivers.broker import BrokerDriver, CallbackConsumer, connect, guarantee, pattern, topic
from harness.drivers.options import option

T = TypeVar("T")
WINDOW = 1000  # publishes handed to the loop thread and not yet done
QUEUE_GROUP = "mqbench"
# A JetStream session rides through a node's death: it reconnects to another node (each node tried this
# many times, this many seconds apart) and notices a node that stopped answering (a paused process) after
# PING_INTERVAL * (MAX_PINGS + 1) seconds at most, instead of nats-py's default of four minutes.
RECONNECTS, RECONNECT_WAIT, PING_INTERVAL, MAX_PINGS = 20, 0.5, 3, 2
JETSTREAM_ONLY = ("storage", "window", "fetch", "ack_timeout_ms")
MAX_REPLICAS = 5  # JetStream's limit on a stream's replicas


@dataclass(frozen=True)
class NatsOptions:
    jetstream: bool = option(False)  # JetStream streams and acks; without it core NATS (at-most-once)
    storage: str = option("file", choices=("file", "memory"))  # the streams' storage
    window: int = option(1000, minimum=1)  # publishes awaiting their ack per producer; 1: each send waits
    fetch: int = option(500, minimum=1)  # messages per pull request (nats bench's --batch)
    ack_timeout_ms: int = option(5000, minimum=100)  # a publish not acknowledged by then is refused


def servers(url: str) -> list[str]:
    """Every node's URL of a NATS endpoint (a cluster's URL lists them, comma-separated)."""
    return [u.strip() for u in url.split(",") if u.strip()]


class NatsDriver(BrokerDriver):
    name = "nats"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE, Pattern.REQREP})
    client_packages = ("nats-py",)
    client = "nats-py"
    client_module = "nats"
    capabilities = Capabilities(flush=True, keys="a subject token: <topic>.<key>, subscribed as <topic>.* "
                                             "(JetStream: the topic's stream captures <topic>.*)")
    options_type = NatsOptions

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        if not self.opts.jetstream:
            given = [name for name in JETSTREAM_ONLY if name in self.options]
            if given:
                raise DriverError(f"nats option {given[0]!r} applies to JetStream only; add jetstream: true")
        elif broker is not None:
            replicas, min_insync = broker.shape.replicas, broker.shape.min_insync
            if replicas > MAX_REPLICAS:
                raise DriverError(f"a nats JetStream stream keeps at most {MAX_REPLICAS} replicas; "
                                  f"the cluster shape asks for {replicas}")
            if min_insync != replicas // 2 + 1:
                raise DriverError(f"nats JetStream acknowledges a publish once a majority of the stream's {replicas} "
                                  f"replicas stored it ({replicas // 2 + 1}); min_insync {min_insync} cannot be chosen")

    def guarantee(self) -> Guarantee:
        # JetStream acks a publish once the stream stored it; consumers ack after delivery. File storage
        # survives a broker restart (written to the OS before the ack; see parity for fsync).
        return guarantee(acknowledged=self.opts.jetstream, durable=self.opts.storage == "file")

    def parity(self) -> dict[str, str]:
        if not self.opts.jetstream:
            return {"acks": "none (core NATS publish)", "fsync": "none (core NATS keeps nothing)"}
        replicas = self.broker.shape.replicas if self.broker is not None else 1
        acks = "JetStream publish ack (stored by the stream leader" + (
            f" and a majority of its {replicas} replicas)" if replicas > 1 else ")")
        if self.opts.storage == "memory":
            return {"acks": acks, "fsync": "none (memory storage)"}
        return {"acks": acks, "fsync": "periodic: every 2 min (JetStream's default sync_interval), each message "
                                       "written to the OS page cache before its ack"}

    # -- parent process: streams (JetStream only; core subjects need no creating) ------------------

    def admin(self) -> Any:
        if not self.opts.jetstream:
            return None
        return _Session(self.url, reconnect=True)

    def create_topics(self, admin: Any, topology: Topology) -> dict[str, Any]:
        from harness.drivers._nats_jetstream import create_streams

        assert self.broker is not None
        if topology.pattern is Pattern.REQREP:  # request/reply is core NATS in every variant: no stream
            return {}
        create_streams(admin, topology, self.opts.storage, self.broker.shape.replicas, self.opts.fetch)
        return {}

    def delete_topics(self, admin: Any, topology: Topology) -> None:
        from harness.drivers._nats_jetstream import delete_streams

        if topology.pattern is not Pattern.REQREP:
            delete_streams(admin, topology)

    # -- workers -------------------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        if self.opts.jetstream:
            from harness.drivers._nats_jetstream import JetStreamProducer

            return JetStreamProducer(_Session(self.url, reconnect=True), topic(plan, role), self.opts.window,
                                     self.opts.ack_timeout_ms / 1000)
        return _NatsProducer(_Session(self.url), topic(plan, role))

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        keyed = bool(topology_from_plan(plan).keys)
        if self.opts.jetstream:
            from harness.drivers._nats_jetstream import JetStreamConsumer

            return JetStreamConsumer(_Session(self.url, reconnect=True), topic(plan, role), pattern(plan), role,
                                     self.opts.fetch, keyed)
        group = QUEUE_GROUP if pattern(plan) is Pattern.QUEUE else ""
        wildcard = ".*" if keyed else ""
        return _NatsConsumer(_Session(self.url), topic(plan, role) + wildcard, group)

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        return _NatsRequester(_Session(self.url), topic(plan, role))

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        return _NatsReplier(_Session(self.url), topic(plan, role))


class _Session:
    """A nats client connected inside its own event-loop thread. With ``reconnect`` it is given every node
    and moves to another when its node goes away; it fails only when the client gave up (closed)."""

    def __init__(self, url: str, reconnect: bool = False) -> None:
        import nats

        self.errors: list[BaseException] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats-loop", daemon=True)
        self.thread.start()

        async def on_error(exc: Exception) -> None:
            if not reconnect:
                self.errors.append(exc)

        async def on_closed() -> None:
            if reconnect and not self.closing:
                self.errors.append(DriverError("nats gave up reconnecting: no node took the connection back"))

        self.closing = False
        settings: dict[str, Any] = (
            {"max_reconnect_attempts": RECONNECTS, "reconnect_time_wait": RECONNECT_WAIT,
             "ping_interval": PING_INTERVAL, "max_outstanding_pings": MAX_PINGS, "closed_cb": on_closed}
            if reconnect else {"max_reconnect_attempts": 0})
        try:
            self.nc: Any = connect(
                "nats", url,
                lambda: self.call(nats.connect(servers(url), error_cb=on_error, **settings), 15),
            )
        except DriverError:
            self.stop()
            raise

    def submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def call(self, coro: Coroutine[Any, Any, T], timeout: float) -> T:
        return self.submit(coro).result(timeout)

    def check(self) -> None:
        if self.errors:
            error = self.errors[0]
            raise error if isinstance(error, DriverError) else DriverError(f"nats reported an error: {error!r}")

    def close(self) -> None:
        self.closing = True
        try:
            self.call(self.nc.close(), 10)
        except Exception:
            pass
        self.stop()

    def stop(self) -> None:
        async def cancel_rest() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self.loop.is_running():
            try:
                self.call(cancel_rest(), 5)
            except Exception:
                pass
            self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if not self.thread.is_alive():
            self.loop.close()


class _NatsProducer(Producer):
    def __init__(self, session: _Session, subject: str) -> None:
        self.session, self.subject = session, subject
        self.queue: collections.deque[bytes | tuple[str, bytes]] = collections.deque()
        self.scheduled = False  # a drain is due in the loop and has not begun
        self.room = threading.Condition()

    async def _drain(self) -> None:
        """In the loop: publish what is queued now; later messages have scheduled the next drain.

        A publish that finds the client's buffer full awaits its flush, and a drain scheduled meanwhile runs
        then and takes messages this one counted: the count is an upper bound. Order holds all the same, as a
        publish puts its message in the client's buffer before it awaits anything."""
        self.scheduled = False  # before counting: a message appended after this schedules its own drain
        queue, publish, subject = self.queue, self.session.nc.publish, self.subject
        try:
            for _ in range(len(queue)):
                if not queue:  # a drain that ran while this one awaited took the rest
                    break
                item = queue.popleft()
                if isinstance(item, tuple):  # a keyed message: (its subject, its body)
                    await publish(*item)
                else:
                    await publish(subject, item)
        except Exception as exc:  # noqa: BLE001 - reported by the next send or flush
            self.session.errors.append(exc)
            queue.clear()
        with self.room:
            self.room.notify_all()

    def send_keyed(self, payload: bytearray, key: bytes) -> None:
        self.send(payload, f"{self.subject}.{key.decode()}")

    def send(self, payload: bytearray, subject: str = "") -> None:
        self.session.check()
        queue = self.queue
        queue.append((subject, bytes(payload)) if subject else bytes(payload))
        if not self.scheduled:
            self.scheduled = True
            self.session.submit(self._drain())
        if len(queue) >= WINDOW:
            self._wait_room(lambda: len(queue) < WINDOW, 60.0)

    def _wait_room(self, ready: Callable[[], bool], timeout: float) -> None:
        with self.room:
            if not self.room.wait_for(lambda: ready() or bool(self.session.errors), timeout):
                raise DriverError(f"nats did not take {len(self.queue)} queued publishes within {timeout:.0f} s")
        self.session.check()

    def flush(self, timeout: float) -> None:
        self._wait_room(lambda: not self.queue, timeout)
        # Publishes are in the client's buffer in order; once this round trip (PING/PONG) is done, so are they.
        try:
            self.session.call(self.session.nc.flush(timeout=max(1, int(timeout))), timeout + 1)
        except Exception as exc:
            raise DriverError(f"nats did not confirm the flush: {exc!r}") from None
        self.session.check()

    def close(self) -> None:
        self.session.close()


class _NatsConsumer(CallbackConsumer):
    def __init__(self, session: _Session, subject: str, group: str) -> None:
        super().__init__(session)  # messages arrive in the loop thread
        self.session, self.subject, self.group = session, subject, group

    def start(self, on_message: Callable[[bytes], None]) -> None:
        async def deliver(msg: Any) -> None:
            on_message(msg.data)

        async def subscribe() -> None:
            await self.session.nc.subscribe(self.subject, queue=self.group, cb=deliver)
            await self.session.nc.flush()  # the server has processed SUB once PONG is back

        self.session.call(subscribe(), 15)


class _NatsRequester(Requester):
    def __init__(self, session: _Session, subject: str) -> None:
        self.session, self.subject = session, subject

    def request(self, payload: bytearray, timeout: float) -> bytes | None:
        import nats.errors

        try:
            msg = self.session.call(
                self.session.nc.request(self.subject, bytes(payload), timeout=timeout), timeout + 5
            )
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError, TimeoutError):
            return None
        data: bytes = msg.data
        return data

    def close(self) -> None:
        self.session.close()


class _NatsReplier(Replier):
    def __init__(self, session: _Session, subject: str) -> None:
        self.session, self.subject = session, subject
        self.answered = 0
        self.stopped = threading.Event()

    def start(self) -> None:
        async def answer(msg: Any) -> None:
            await msg.respond(msg.data)
            self.answered += 1  # only the loop thread writes it

        async def subscribe() -> None:
            await self.session.nc.subscribe(self.subject, queue=QUEUE_GROUP, cb=answer)
            await self.session.nc.flush()

        self.session.call(subscribe(), 15)

    def poll(self, timeout: float) -> int:
        before = self.answered
        self.session.check()
        self.stopped.wait(timeout)
        return self.answered - before

    def close(self) -> None:
        self.stopped.set()
        self.session.close()
