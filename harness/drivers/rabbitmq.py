"""RabbitMQ through pika's BlockingConnection (one connection per worker, used by one thread).

Throughput as pika allows it: producers queue publishes on the channel without a socket flush each and
flush in batches (``write_batch``, and at once when the producer is not sending flat out); with
``confirms`` they keep a window of ``confirm_window`` unconfirmed publishes, as PerfTest's ``-c``, the
broker confirming with ``multiple``. Manual-ack consumers ack every ``ack_every`` deliveries with
``multiple=True`` (and what is left whenever a poll returns), within a prefetch of ``prefetch``.

queue: one queue per topic, producers publish to it through the default exchange, consumers compete.
pubsub: one fanout exchange per topic; each consumer binds its own queue (exclusive, or durable and named
per consumer when ``persistent``). reqrep: requests on a queue per topic, replies through direct reply-to.
Consumers are pull-style: ``on_message`` runs inside ``poll`` (pika dispatches in process_data_events).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import (
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
from harness.drivers.broker import BrokerDriver, SendBatch, close_quietly, connect, guarantee, topic
from harness.drivers.options import option

REPLY_TO = "amq.rabbitmq.reply-to"  # direct reply-to: no reply queue to declare
RECEIPT_TIMEOUT = 30.0  # seconds a producer waits for the broker's confirms before giving up


@dataclass(frozen=True)
class RabbitMQOptions:
    persistent: bool = False  # durable queues/exchanges + delivery_mode 2
    confirms: bool = False  # publisher confirms, kept in a window of confirm_window unconfirmed publishes
    prefetch: int = option(100, minimum=0)  # basic.qos prefetch count (manual ack only); 0: unlimited
    manual_ack: bool = False  # consumers ack after on_message; otherwise auto-ack
    # Unconfirmed publishes in flight (PerfTest's -c); 1: each send waits for its own confirm.
    confirm_window: int = option(1000, minimum=1)
    ack_every: int = option(50, minimum=1)  # manual acks: one basic.ack (multiple) per this many deliveries
    write_batch: int = option(100, minimum=1)  # publishes queued in pika before one socket flush


class RabbitMQDriver(BrokerDriver):
    name = "rabbitmq"
    patterns = frozenset({Pattern.QUEUE, Pattern.PUBSUB, Pattern.REQREP})
    client_packages = ("pika",)
    client = "pika"
    client_module = "pika"
    options_type = RabbitMQOptions
    opts: RabbitMQOptions

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        self.carry: list[bytes] = []  # what a lost producer left unconfirmed (see _RabbitProducer)
        opts = self.opts
        if opts.manual_ack and opts.prefetch and opts.ack_every > opts.prefetch:
            # The broker stops delivering at prefetch unacked messages: an ack would never come.
            raise DriverError(
                f"rabbitmq option ack_every ({opts.ack_every}) must not exceed prefetch ({opts.prefetch})"
            )

    def guarantee(self) -> Guarantee:
        return guarantee(self.opts.manual_ack and self.opts.confirms, self.opts.persistent)

    # -- parent ----------------------------------------------------------------------------------

    def admin(self) -> Any:
        return self._connect()

    def create_topics(self, admin: Any, topology: Topology) -> dict[str, Any]:
        ch = admin.channel()
        for i in range(topology.topics):
            self._declare(ch, topology, i)
        return {}

    def delete_topics(self, admin: Any, topology: Topology) -> None:
        for i in range(topology.topics):
            name = topology.topic_name(i)
            ch = admin.channel()
            if topology.pattern is Pattern.PUBSUB:
                ch.exchange_delete(name)
                for c in range(topology.consumers):
                    ch.queue_delete(_subscriber_queue(name, c))
            else:
                ch.queue_delete(name)
            ch.close()

    # -- workers ---------------------------------------------------------------------------------

    def _declare(self, ch: Any, topology: Topology, topic: int) -> None:
        """Declare the topic's queue (queue) or fanout exchange (pubsub); idempotent. Producers and consumers
        declare it again when they connect, as applications do, so a broker that restarted without it
        (transient variant) gets it back; only the messages it held are gone."""
        name = topology.topic_name(topic)
        if topology.pattern is Pattern.PUBSUB:
            ch.exchange_declare(name, exchange_type="fanout", durable=self.opts.persistent)
        else:
            ch.queue_declare(name, durable=self.opts.persistent)

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        topology = topology_from_plan(plan)
        name = topology.topic_name(role.topic)
        if topology.pattern is Pattern.PUBSUB:
            producer = _RabbitProducer(self._connect(), self.opts, name, "", self.carry)
        else:
            producer = _RabbitProducer(self._connect(), self.opts, "", name, self.carry)
        self._declare(producer.channel, topology, role.topic)
        return producer

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        topology = topology_from_plan(plan)
        consumer = _RabbitConsumer(self._connect(), self.opts, topology, role)
        self._declare(consumer.channel, topology, role.topic)
        return consumer

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        return _RabbitRequester(self._connect(), topic(plan, role))

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        return _RabbitReplier(self._connect(), topic(plan, role), self.opts.prefetch)

    def _connect(self) -> Any:
        import pika

        params = pika.URLParameters(self.url)
        params.heartbeat = 0  # workers may wait at the start barrier longer than a heartbeat interval
        params.socket_timeout = 10
        # Three attempts half a second apart, as pika's connection_attempts=3, retry_delay=0.5 would make.
        return connect("rabbitmq", self.url, lambda: pika.BlockingConnection(params), retry_for=1.0)


def _subscriber_queue(exchange: str, consumer: int) -> str:
    return f"{exchange}.c{consumer}"


class _RabbitProducer(Producer):
    """Publishes through the channel's asynchronous core (``channel._impl``): BlockingChannel's own
    ``basic_publish`` flushes the socket, and with confirms waits for the ack, on every message.

    At-least-once across a lost connection (with confirms): the bodies not confirmed yet are left in
    ``carry`` (the driver's), and the producer the runner creates next on this driver publishes them
    again first; a message may then arrive twice, never not at all."""

    def __init__(self, conn: Any, opts: RabbitMQOptions, exchange: str, routing_key: str,
                 carry: list[bytes]) -> None:
        import pika

        self.conn = conn
        self.channel = conn.channel()
        self.publish = self.channel._impl.basic_publish
        self.exchange, self.routing_key = exchange, routing_key
        self.properties = pika.BasicProperties(delivery_mode=2 if opts.persistent else 1)
        self.confirms = opts.confirms
        self.window = opts.confirm_window if opts.confirms else 0
        self.batch = SendBatch(opts.write_batch if self.window != 1 else 1)
        self.published = self.confirmed = 0  # publish sequence numbers (the broker's delivery tags)
        self.singles: set[int] = set()  # confirmed one by one, above ``confirmed``
        self.unconfirmed: collections.deque[bytes] = collections.deque()  # bodies from confirmed + 1 on
        self.carry = carry
        self.nacked: Any = None
        if opts.confirms:
            selected: list[Any] = []
            self.channel._impl.confirm_delivery(self._on_confirm, selected.append)
            self._pump(lambda: bool(selected), RECEIPT_TIMEOUT, "confirm mode")
            for body in carry:  # a predecessor's unconfirmed messages first; carry stays until confirmed
                self._publish(body)
            self._pump(lambda: self.confirmed >= self.published, RECEIPT_TIMEOUT, "the carried messages")
            carry.clear()
        self.acks_synchronously = self.window == 1

    def _publish(self, body: bytes) -> None:
        import pika

        try:
            self.publish(self.exchange, self.routing_key, body, self.properties)
        except pika.exceptions.AMQPError as exc:
            raise DriverError(f"rabbitmq refused a message: {exc!r}") from None
        self.published += 1
        if self.window:
            self.unconfirmed.append(body)

    def _on_confirm(self, frame: Any) -> None:
        import pika

        method = frame.method
        if isinstance(method, pika.spec.Basic.Nack) and self.nacked is None:
            self.nacked = method
        tag, before = method.delivery_tag, self.confirmed
        if method.multiple:
            self.confirmed = max(self.confirmed, tag)
            self.singles = {t for t in self.singles if t > tag}
        else:  # a confirm of one message: count it once those before it are confirmed too
            self.singles.add(tag)
        while self.confirmed + 1 in self.singles:
            self.confirmed += 1
            self.singles.discard(self.confirmed)
        for _ in range(self.confirmed - before):
            self.unconfirmed.popleft()

    def _pump(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Flush and process the connection's events until ``done()`` or ``timeout`` s have passed."""
        import pika

        deadline = time.monotonic() + timeout  # bounds the wait only
        try:
            self.conn.process_data_events(time_limit=0)
            while not done():
                if time.monotonic() > deadline:
                    raise DriverError(f"rabbitmq did not confirm {what} within {timeout:.0f} s")
                self.conn.process_data_events(time_limit=0.01)
        except pika.exceptions.AMQPError as exc:
            raise DriverError(f"rabbitmq refused a message: {exc!r}") from None
        if self.nacked is not None:
            raise DriverError(f"rabbitmq refused a message (basic.nack up to {self.nacked.delivery_tag})")

    def send(self, payload: bytearray) -> None:
        self.batch.begin()
        try:
            self._publish(bytes(payload))
            if self.batch.due():
                # Never more than the window unconfirmed (0 when not confirming: only the socket flush); a
                # paced producer waits for every confirm.
                if not self.window:
                    target = 0
                else:
                    target = self.published if self.batch.paced else self.published - self.window + 1
                self._pump(lambda: self.confirmed >= target, RECEIPT_TIMEOUT, "a publish")
                self.batch.done()
        except DriverError:
            self._leave_unconfirmed()
            raise

    def _leave_unconfirmed(self) -> None:
        self.carry[:] = self.unconfirmed
        self.unconfirmed.clear()

    def flush(self, timeout: float) -> None:
        self.batch.done()
        target = self.published if self.confirms else 0
        try:
            self._pump(lambda: self.confirmed >= target, timeout, f"{self.published - self.confirmed} publishes")
        except DriverError:
            self._leave_unconfirmed()
            raise

    def close(self) -> None:
        close_quietly(self.conn)


class _RabbitConsumer(Consumer):
    def __init__(self, conn: Any, opts: RabbitMQOptions, topology: Topology, role: Role) -> None:
        self.conn, self.opts = conn, opts
        self.channel = conn.channel()
        self.topology, self.role = topology, role
        self.unacked = self.pending = 0  # last delivery tag not yet acked, deliveries since the last ack

    def start(self, on_message: Callable[[bytes], None]) -> None:
        ch, name = self.channel, self.topology.topic_name(self.role.topic)
        queue = name
        if self.topology.pattern is Pattern.PUBSUB:
            if self.opts.persistent:
                queue = _subscriber_queue(name, self.role.index)
                ch.queue_declare(queue, durable=True)
            else:
                queue = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
            ch.queue_bind(queue, name)  # synchronous: bound when this returns
        manual = self.opts.manual_ack
        if manual:
            ch.basic_qos(prefetch_count=self.opts.prefetch)
        every = self.opts.ack_every

        def deliver(channel: Any, method: Any, _props: Any, body: bytes) -> None:
            on_message(body)
            if manual:
                self.unacked = method.delivery_tag
                self.pending += 1
                if self.pending >= every:  # acks everything delivered up to this one
                    self._ack()

        ch.basic_consume(queue, deliver, auto_ack=not manual)  # waits for basic.consume-ok

    def _ack(self) -> None:
        self.channel.basic_ack(self.unacked, multiple=True)
        self.pending = 0

    def poll(self, timeout: float) -> None:
        import pika

        try:
            self.conn.process_data_events(time_limit=timeout)
            if self.pending:  # nothing more came for now: ack the rest
                self._ack()
        except pika.exceptions.AMQPError as exc:
            raise DriverError(f"rabbitmq consumer lost its connection: {exc!r}") from None

    def close(self) -> None:
        close_quietly(self.conn)


class _RabbitRequester(Requester):
    def __init__(self, conn: Any, queue: str) -> None:
        import pika

        self.conn, self.queue = conn, queue
        self.channel = conn.channel()
        self.reply: bytes | None = None
        self.correlation = 0
        self.channel.basic_consume(REPLY_TO, self._on_reply, auto_ack=True)
        self.pika = pika

    def _on_reply(self, _ch: Any, _method: Any, props: Any, body: bytes) -> None:
        if props.correlation_id == str(self.correlation):
            self.reply = body

    def request(self, payload: bytearray, timeout: float) -> bytes | None:
        self.correlation += 1
        self.reply = None
        props = self.pika.BasicProperties(reply_to=REPLY_TO, correlation_id=str(self.correlation))
        self.channel.basic_publish("", self.queue, bytes(payload), props)
        deadline = time.monotonic() + timeout  # bounds the wait only; the runner takes the timings
        while self.reply is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            self.conn.process_data_events(time_limit=min(remaining, 0.05))
        return self.reply

    def close(self) -> None:
        close_quietly(self.conn)


class _RabbitReplier(Replier):
    def __init__(self, conn: Any, queue: str, prefetch: int) -> None:
        import pika

        self.conn, self.queue, self.prefetch = conn, queue, prefetch
        self.channel = conn.channel()
        self.answered = 0
        self.pika = pika

    def start(self) -> None:
        def answer(ch: Any, method: Any, props: Any, body: bytes) -> None:
            reply = self.pika.BasicProperties(correlation_id=props.correlation_id)
            ch.basic_publish("", props.reply_to, body, reply)
            self.answered += 1

        self.channel.basic_qos(prefetch_count=self.prefetch)
        self.channel.basic_consume(self.queue, answer, auto_ack=True)

    def poll(self, timeout: float) -> int:
        before = self.answered
        self.conn.process_data_events(time_limit=timeout)
        return self.answered - before

    def close(self) -> None:
        close_quietly(self.conn)
