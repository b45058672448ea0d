"""JetStream through nats-py: the plan's streams and queue consumers, a producer that keeps a window of
publishes awaiting their acks, and pull consumers with explicit acks.

A stream per topic (named as the topic, capturing the subject of that name), with the endpoint's
replicas and the variant's storage; the plan makes it and the queue pattern's durable consumer (one per
topic, shared by the topic's consumers), and the teardown deletes the streams (and with them every
consumer). Pub/sub consumers each make their own durable consumer (``mqbench-c<index>``) when they start;
every consumer starts at the stream's first message, so none misses the start of a flow.

Producer (as ``nats bench js pub async``, with a sliding window instead of its fixed batches): ``send``
queues the message and returns; the loop thread publishes it with ``publish_async`` and settles it when its
ack (or an error) comes: accepted, or refused. A publish nobody serves ("no responders": the stream has no
leader, mid-election) is published again every ``RETRY_WAIT`` s, as nats.go does (nothing stored it, so
this cannot duplicate it); one with no ack within ``ack_timeout`` is refused (it may still have been stored:
then it arrives, refused but delivered, never counted as loss). Invariants: ``handed`` (sends so far) is
written by the sending thread only; ``settled``, ``pending`` and ``outcomes`` by the loop thread only;
``handed - settled`` sends are in flight and ``send`` waits while ``window`` are.

Consumer: fetches of up to ``fetch`` messages (nats-server 2.9 answers a fetch as soon as any message is
there), each message handed on and acked (a fast batch's acks leave in one write, a slow one's every
``ACK_FLUSH`` s). A fetch that fails while a node is away (consumer leader election, reconnect) is simply
asked again.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.drivers.base import DriverError, Pattern, Producer, Role, Topology
from harness.drivers.broker import CallbackConsumer

if TYPE_CHECKING:
    from harness.drivers.nats import _Session

# Seconds before the stream delivers again a message its consumer did not ack: what a dead consumer had
# fetched (or what never reached it) comes again this soon, within the runner's drain and final-read waits
# (3 s and 5 s idle). A fetched batch must be handled within it: fetch x (time per message) < ACK_WAIT,
# else its tail is delivered twice.
ACK_WAIT = 5.0
ACK_FLUSH = 0.05  # seconds at most between a message's handling and its ack leaving (slow consumers)
RETRY_WAIT = 0.25  # seconds before a publish that found no stream leader is made again (nats.go's default)
FETCH_WAIT = 1.0  # seconds a pull request waits for a first message
SWEEP = 0.1  # seconds between looks for publishes past their ack deadline
CREATE_FOR = 20.0  # seconds the plan keeps trying to create a stream while JetStream is not ready
API_TIMEOUT = 10.0  # seconds for one JetStream API request (nats-py's default is 5)


def durable(pattern: Pattern, role: Role) -> str:
    """The durable consumer a worker reads through: shared by a topic's consumers for a queue, else its own."""
    return "mqbench-queue" if pattern is Pattern.QUEUE else f"mqbench-c{role.index}"


def consumer_config(name: str, max_ack_pending: int) -> Any:
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

    return ConsumerConfig(name=name, durable_name=name, ack_policy=AckPolicy.EXPLICIT,
                          deliver_policy=DeliverPolicy.ALL, ack_wait=ACK_WAIT, max_ack_pending=max_ack_pending)


def create_streams(session: _Session, topology: Topology, storage: str, replicas: int, fetch: int) -> None:
    """A stream per topic, and for the queue pattern its shared durable consumer. Retries for CREATE_FOR s
    while JetStream is not ready (a cluster that has just formed may not place a stream at once)."""
    from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig

    js = session.nc.jetstream(timeout=API_TIMEOUT)
    per_topic = -(-topology.consumers // topology.topics)
    for t in range(topology.topics):
        name = topology.topic_name(t)
        config = StreamConfig(name=name, subjects=[name], storage=StorageType(storage), num_replicas=replicas,
                              retention=RetentionPolicy.LIMITS, discard=DiscardPolicy.OLD)
        _retrying(session, functools.partial(js.add_stream, config), f"create the JetStream stream {name}")
        if topology.pattern is Pattern.QUEUE:
            queue = consumer_config(durable(Pattern.QUEUE, Role(0, t)), fetch * per_topic)
            _retrying(session, functools.partial(js.add_consumer, name, queue), f"create the consumer of stream {name}")


def delete_streams(session: _Session, topology: Topology) -> None:
    js = session.nc.jetstream(timeout=API_TIMEOUT)
    for t in range(topology.topics):
        try:
            session.call(js.delete_stream(topology.topic_name(t)), API_TIMEOUT + 5)
        except Exception:  # noqa: BLE001 - already gone, or the broker is away: nothing to remove
            pass


def _retrying(session: _Session, request: Callable[[], Coroutine[Any, Any, Any]], what: str) -> None:
    deadline = time.monotonic() + CREATE_FOR
    while True:
        try:
            session.call(request(), API_TIMEOUT + 5)
            return
        except Exception as exc:  # noqa: BLE001 - JetStream not ready yet, or a refusal: said below
            if time.monotonic() > deadline:
                raise DriverError(f"nats could not {what}: {exc!r}") from None
        time.sleep(0.5)


@dataclass
class _Publish:
    """A publish awaiting its outcome (loop thread only)."""

    data: bytes
    deadline: float  # time.monotonic() after which it is refused
    future: Any = None  # nats-py's future of its ack; None while it waits to be published again


class JetStreamProducer(Producer):
    def __init__(self, session: _Session, subject: str, window: int, ack_timeout: float) -> None:
        self.session, self.subject, self.window, self.ack_timeout = session, subject, window, ack_timeout
        # Our window bounds what is in flight; nats-py's own bound must never be what blocks.
        self.js = session.nc.jetstream(publish_async_max_pending=1 << 30)
        self.low = window // 2  # a full window waits until this many are in flight
        self.acks_synchronously = window == 1
        self.queue: collections.deque[tuple[int, bytes]] = collections.deque()
        self.scheduled = False  # a drain is due in the loop and has not begun
        self.handed = 0
        self.settled = 0
        self.pending: dict[int, _Publish] = {}  # by send number, in publishing order
        self.outcomes: list[tuple[int, bool]] = []
        self.reporting = False  # a report of ``outcomes`` is due in the loop
        self.report: Callable[[int, int, bool], None] | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.room = threading.Condition()
        self.wake_at = -1  # the sender waits until at most this many are in flight (-1: not waiting)
        self.sweeper = session.submit(self._sweep())

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        if self.acks_synchronously:
            return False  # each send waits for its ack and raises when refused
        self.report = report
        return True

    # -- the sending thread --------------------------------------------------------------------------

    def send(self, payload: bytearray) -> None:
        self.session.check()
        self.queue.append((self.handed, bytes(payload)))
        self.handed += 1
        if not self.scheduled:
            self.scheduled = True
            self.session.submit(self._drain())
        if self.handed - self.settled >= self.window:
            self._wait(self.low, self.ack_timeout + 30)

    def flush(self, timeout: float) -> None:
        self._wait(0, timeout)

    def _wait(self, in_flight: int, timeout: float) -> None:
        """Until at most ``in_flight`` sends await their outcome (or the session failed)."""
        deadline = time.monotonic() + timeout
        with self.room:
            self.wake_at = in_flight
            try:
                while self.handed - self.settled > in_flight and not self.session.errors:
                    if time.monotonic() > deadline:
                        raise DriverError(f"nats JetStream left {self.handed - self.settled} publishes without "
                                          f"an outcome for {timeout:.0f} s")
                    self.room.wait(0.1)  # woken at once by the loop; the timeout is only a safety net
            finally:
                self.wake_at = -1
        self.session.check()

    def close(self) -> None:
        self.sweeper.cancel()
        self.session.close()

    # -- the loop thread -----------------------------------------------------------------------------

    async def _drain(self) -> None:
        self.scheduled = False  # before counting: a message appended after this schedules its own drain
        queue, pending, publish, subject = self.queue, self.pending, self.js.publish_async, self.subject
        deadline = time.monotonic() + self.ack_timeout  # one clock read per batch: they go out together
        for _ in range(len(queue)):
            n, data = queue.popleft()
            entry = pending[n] = _Publish(data, deadline)
            try:
                future = await publish(subject, data)
            except Exception as exc:  # noqa: BLE001 - the connection is gone: refused (closed_cb says why)
                self._settle(n, False, exc)
                continue
            entry.future = future
            future.add_done_callback(functools.partial(self._answered, n, entry))

    async def _publish(self, n: int, entry: _Publish) -> None:
        """Publish ``entry`` again (after "no responders")."""
        try:
            future = await self.js.publish_async(self.subject, entry.data)
        except Exception as exc:  # noqa: BLE001 - the connection is gone: refused (closed_cb says why)
            self._settle(n, False, exc)
            return
        entry.future = future
        future.add_done_callback(functools.partial(self._answered, n, entry))

    def _answered(self, n: int, entry: _Publish, future: Any) -> None:
        if self.pending.get(n) is not entry or entry.future is not future or future.cancelled():
            return  # settled already (the sweep refused it and cancelled the future)
        exc = future.exception()
        if exc is None:
            self._settle(n, True)
            return
        from nats.js.errors import NoStreamResponseError

        if isinstance(exc, NoStreamResponseError) and time.monotonic() + RETRY_WAIT < entry.deadline:
            entry.future = None
            self.session.loop.call_later(RETRY_WAIT, self._again, n, entry)
            return
        self._settle(n, False, exc)

    def _again(self, n: int, entry: _Publish) -> None:
        if self.pending.get(n) is entry:
            task = self.session.loop.create_task(self._publish(n, entry))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    def _settle(self, n: int, accepted: bool, exc: BaseException | None = None) -> None:
        self.pending.pop(n, None)
        self.settled += 1
        if not accepted and self.report is None:  # the producer is not watched: a later send raises it
            self.session.errors.append(DriverError(f"nats JetStream did not acknowledge a publish to "
                                                   f"{self.subject}: {exc!r}"))
        self.outcomes.append((n, accepted))
        if not self.reporting:
            self.reporting = True
            self.session.loop.call_soon(self._report)

    def _report(self) -> None:
        """The outcomes settled since the last report, as runs of consecutive sends with one outcome."""
        self.reporting = False
        outcomes, self.outcomes = self.outcomes, []
        report = self.report
        if report is not None and outcomes:
            first, count, accepted = outcomes[0][0], 1, outcomes[0][1]
            for n, ok in outcomes[1:]:
                if ok == accepted and n == first + count:
                    count += 1
                    continue
                report(first, count, accepted)
                first, count, accepted = n, 1, ok
            report(first, count, accepted)
        wake_at = self.wake_at
        if wake_at >= 0 and (self.handed - self.settled <= wake_at or self.session.errors):
            with self.room:
                self.room.notify_all()

    async def _sweep(self) -> None:
        """Refuse publishes past their deadline (nats-py's futures of acks never time out by themselves)."""
        while True:
            await asyncio.sleep(SWEEP)
            now = time.monotonic()
            while self.pending:
                n, entry = next(iter(self.pending.items()))
                if entry.deadline > now:
                    break  # published in order, so every later deadline is later still
                if entry.future is not None:
                    entry.future.cancel()
                self._settle(n, False, TimeoutError(f"no ack within {self.ack_timeout:g} s"))


class JetStreamConsumer(CallbackConsumer):
    def __init__(self, session: _Session, stream: str, pattern: Pattern, role: Role, fetch: int) -> None:
        super().__init__(session)  # messages arrive in the loop thread
        self.session, self.stream, self.batch = session, stream, fetch
        self.durable = durable(pattern, role)
        self.task: asyncio.Task[None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        async def subscribe() -> None:
            js = self.session.nc.jetstream(timeout=API_TIMEOUT)
            # Binds to the durable consumer, or makes it (pub/sub) with the settings the plan would use.
            pull = await js.pull_subscribe(self.stream, durable=self.durable, stream=self.stream,
                                           config=consumer_config(self.durable, self.batch))
            task = asyncio.get_running_loop().create_task(self._pull(pull, on_message))
            self.task = task  # referenced, so that it is not collected while it runs

        self.session.call(subscribe(), API_TIMEOUT * 2 + 5)

    async def _pull(self, pull: Any, on_message: Callable[[bytes], None]) -> None:
        try:
            await self._fetch_loop(pull, on_message)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - never a silent stall: poll raises it, the runner makes it again
            if not self.session.nc.is_closed:
                self.session.errors.append(exc)

    async def _fetch_loop(self, pull: Any, on_message: Callable[[bytes], None]) -> None:
        nc = self.session.nc
        while not nc.is_closed:
            try:
                msgs = await pull.fetch(self.batch, timeout=FETCH_WAIT)
            except asyncio.CancelledError:
                raise
            except TimeoutError:  # nats-py's timeouts derive from it: nothing came, ask again
                continue
            except Exception:  # noqa: BLE001 - a node away (leader election, reconnect): ask again
                await asyncio.sleep(RETRY_WAIT)
                continue
            if not msgs:
                await asyncio.sleep(RETRY_WAIT)
                continue
            flushed = time.monotonic()
            for msg in msgs:
                on_message(msg.data)
                await msg.ack()  # buffered: the flusher writes the acks gathered since it last ran
                if time.monotonic() - flushed > ACK_FLUSH:  # a slow consumer: let the flusher run now
                    await asyncio.sleep(0)
                    flushed = time.monotonic()
