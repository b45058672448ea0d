"""Core NATS through nats-py, whose asyncio loop runs in a background thread of the worker.

Threads: each producer/consumer/requester/replier owns one ``_Session`` (a client in its own event-loop
thread); only that thread touches the nats client. A producer's ``send`` only appends the message to a
queue; the publishing runs in the loop, a batch at a time (one thread hop per batch, not per message: the
hop is scheduled when the queue was idle), and the client's flusher writes what a batch published in one
go. The queue holds at most ``WINDOW`` messages (back-pressure); consumers get messages in the loop thread
(callback-style). queue:
subscribers share a queue group per topic; pubsub: plain subscriptions; reqrep: request/reply with the
client's shared reply inbox, repliers in a queue group. Core NATS keeps nothing: at-most-once.
"""

from __future__ import annotations

import asyncio
import collections
import threading
from collections.abc import Callable, Coroutine, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from harness.drivers.base import (
    Capabilities,
    Consumer,
    DriverError,
    Pattern,
    Producer,
    Replier,
    Requester,
    Role,
    topology_from_plan,
)
from harness.drivers.broker import BrokerDriver, CallbackConsumer, connect, pattern, topic

T = TypeVar("T")
WINDOW = 1000  # publishes handed to the loop thread and not yet done
QUEUE_GROUP = "mqbench"


class NatsDriver(BrokerDriver):
    name = "nats"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE, Pattern.REQREP})
    client_packages = ("nats-py",)
    client = "nats-py"
    client_module = "nats"
    capabilities = Capabilities(flush=True, keys="a subject token: <topic>.<key>, subscribed as <topic>.*")

    # Core NATS has no variants (nothing to confirm or persist, so at-most-once) and subjects need no
    # creating: no options, no admin().

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        return _NatsProducer(_Session(self.url), topic(plan, role))

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        group = QUEUE_GROUP if pattern(plan) is Pattern.QUEUE else ""
        wildcard = ".*" if topology_from_plan(plan).keys else ""
        return _NatsConsumer(_Session(self.url), topic(plan, role) + wildcard, group)

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        return _NatsRequester(_Session(self.url), topic(plan, role))

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        return _NatsReplier(_Session(self.url), topic(plan, role))


class _Session:
    """A nats client connected inside its own event-loop thread."""

    def __init__(self, url: str) -> None:
        import nats

        self.errors: list[BaseException] = []
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="nats-loop", daemon=True)
        self.thread.start()

        async def on_error(exc: Exception) -> None:
            self.errors.append(exc)

        try:
            self.nc: Any = connect(
                "nats", url, lambda: self.call(nats.connect(url, error_cb=on_error, max_reconnect_attempts=0), 15)
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
            raise DriverError(f"nats reported an error: {self.errors[0]!r}")

    def close(self) -> None:
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
        """In the loop: publish what is queued now; later messages have scheduled the next drain."""
        self.scheduled = False  # before counting: a message appended after this schedules its own drain
        queue, publish, subject = self.queue, self.session.nc.publish, self.subject
        try:
            for _ in range(len(queue)):
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
