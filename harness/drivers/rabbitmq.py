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

``queue_type`` chooses the queues: classic (one node's), quorum (Raft, replicated on ``shape.replicas`` nodes:
the durable replicated variant) or stream (an append-only replicated log; pubsub only: every consumer reads
the whole stream from its own offset). A cluster's URL is its nodes' URLs joined by commas; a client tries
them in order, so it reaches another node when its own is gone (the runner makes the client again).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import (
    SINGLE_NODE,
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
from harness.drivers.broker import BrokerDriver, SendBatch, address, close_quietly, connect, guarantee, topic
from harness.drivers.options import option

REPLY_TO = "amq.rabbitmq.reply-to"  # direct reply-to: no reply queue to declare
RECEIPT_TIMEOUT = 30.0  # seconds a producer waits for the broker's confirms before giving up
QUEUE_TYPES = ("classic", "quorum", "stream")
# A cluster's client gives up on one node after this long (a paused or cut-off node) and tries the next.
NODE_CONNECT_TIMEOUT = 3.0
NODE_HANDSHAKE_TIMEOUT = 6.0


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
    # classic, quorum (durable, x-quorum-initial-group-size = the shape's replicas) or stream (pubsub only)
    queue_type: str = option("classic", choices=QUEUE_TYPES)


class RabbitMQDriver(BrokerDriver):
    name = "rabbitmq"
    patterns = frozenset({Pattern.QUEUE, Pattern.PUBSUB, Pattern.REQREP})
    client_packages = ("pika",)
    client = "pika"
    client_module = "pika"
    options_type = RabbitMQOptions
    opts: RabbitMQOptions
    capabilities = Capabilities(flush=True, keys="routing key: a direct exchange routes each message by it")

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        self.carry: list[bytes] = []  # what a lost producer left unconfirmed (see _RabbitProducer)
        self.offsets: dict[int, int] = {}  # stream consumers: the next offset each consumer index reads
        opts = self.opts
        if opts.manual_ack and opts.prefetch and opts.ack_every > opts.prefetch:
            # The broker stops delivering at prefetch unacked messages: an ack would never come.
            raise DriverError(
                f"rabbitmq option ack_every ({opts.ack_every}) must not exceed prefetch ({opts.prefetch})"
            )
        if opts.queue_type == "stream" and not opts.prefetch:
            raise DriverError("rabbitmq stream consumers need a prefetch (option prefetch must be at least 1)")
        shape = self.broker.shape if self.broker is not None else SINGLE_NODE
        self.replicas = shape.replicas
        if opts.queue_type == "classic" and shape.replicas > 1:
            raise DriverError(f"rabbitmq classic queues keep one copy, on one node, and the cluster asks for "
                              f"{shape.replicas} replicas; use queue_type quorum (or stream), or replicas 1")
        majority = shape.replicas // 2 + 1
        if opts.queue_type != "classic" and shape.replicas > 1 and shape.min_insync != majority:
            raise DriverError(f"rabbitmq {opts.queue_type} queues confirm a message once a majority of their "
                              f"{shape.replicas} replicas ({majority}) have it, and the cluster asks for "
                              f"min_insync {shape.min_insync}; use min_insync {majority}")
        # Quorum queues and streams are always durable and store every message.
        self.durable = opts.persistent or opts.queue_type != "classic"

    def guarantee(self) -> Guarantee:
        # A stream consumer resumes from its own offset, so its receipts need no acks to be at-least-once.
        received = self.opts.manual_ack or self.opts.queue_type == "stream"
        return guarantee(received and self.opts.confirms, self.durable)

    def parity(self) -> dict[str, str]:
        """What a send waits for and when RabbitMQ 3.10 forces messages to disk, per variant. Classic queues
        fsync their journal and message store in batches: before the confirms when confirms wait, else after
        200 ms idle; quorum queues fsync their Raft log (write-ahead log, in batches) on each replica and
        confirm once a majority has; streams never fsync (the OS writes them back) and confirm once a majority
        of replicas has written them."""
        opts, majority = self.opts, self.replicas // 2 + 1
        if not opts.confirms:
            acks = "none"
        elif opts.queue_type == "classic" or self.replicas == 1:
            acks = "publisher confirms"
        else:
            acks = f"publisher confirms (a majority: {majority} of {self.replicas} replicas)"
        if opts.queue_type == "quorum":
            fsync = "every write, in batches (Raft log)" + (", before the confirm" if opts.confirms else "")
        elif opts.queue_type == "stream":
            fsync = "never (OS page cache; replicated)"
        elif not opts.persistent:
            fsync = "none (memory; paged to disk only under memory pressure)"
        elif opts.confirms:
            fsync = "every write, in batches, before the confirm"
        else:
            fsync = "in batches, when the queue is idle (not awaited)"
        return {"acks": acks, "fsync": fsync}

    def leader_resource(self, plan: Mapping[str, Any]) -> str:
        topology = topology_from_plan(plan)
        if self._kind(topology) is Pattern.PUBSUB and self.durable:
            return _subscriber_queue(topology.topic_name(0), 0)  # consumer 0's own queue
        return topology.topic_name(0)

    # -- parent ----------------------------------------------------------------------------------

    def admin(self) -> Any:
        return self._connect()

    def create_topics(self, admin: Any, topology: Topology) -> dict[str, Any]:
        if self.opts.queue_type == "stream" and topology.pattern is not Pattern.PUBSUB:
            raise DriverError(f"rabbitmq streams serve the pubsub pattern only (every consumer reads the whole "
                              f"stream), not {topology.pattern.value}; use queue_type quorum for it")
        ch = admin.channel()
        for i in range(topology.topics):
            self._declare(ch, topology, i)
        arguments = self.queue_arguments()
        return {"queue_arguments": arguments} if arguments else {}  # for the Java client (it has no shape)

    def delete_topics(self, admin: Any, topology: Topology) -> None:
        for i in range(topology.topics):
            name = topology.topic_name(i)
            ch = admin.channel()
            if self._kind(topology) is Pattern.PUBSUB:
                ch.exchange_delete(name)
                for c in range(topology.consumers):
                    ch.queue_delete(_subscriber_queue(name, c))
            else:
                ch.queue_delete(name)
            ch.close()

    # -- workers ---------------------------------------------------------------------------------

    def _kind(self, topology: Topology) -> Pattern:
        """How messages are routed: PUBSUB through a fanout exchange to each consumer's queue, QUEUE to the
        topic's own queue (the queue and reqrep patterns, and a stream, which every consumer reads)."""
        if topology.pattern is Pattern.PUBSUB and self.opts.queue_type != "stream":
            return Pattern.PUBSUB
        return Pattern.QUEUE

    def queue_arguments(self) -> dict[str, Any] | None:
        """The x-arguments of the run's queues (and of each subscriber's queue)."""
        if self.opts.queue_type == "quorum":
            return {"x-queue-type": "quorum", "x-quorum-initial-group-size": self.replicas}
        if self.opts.queue_type == "stream":
            return {"x-queue-type": "stream", "x-initial-cluster-size": self.replicas}
        return None

    def _declare(self, ch: Any, topology: Topology, topic: int) -> None:
        """Declare the topic's queue (queue) or fanout exchange (pubsub); idempotent. Producers and consumers
        declare it again when they connect, as applications do, so a broker that restarted without it
        (transient variant) gets it back; only the messages it held are gone. A keyed run routes by key:
        the topic's exchange is a direct one (pubsub: each subscriber's queue bound with every key; queue:
        an exchange of the queue's name, the queue bound with every key)."""
        name = topology.topic_name(topic)
        if self._kind(topology) is Pattern.PUBSUB:
            ch.exchange_declare(name, exchange_type="direct" if topology.keys else "fanout", durable=self.durable)
        else:
            ch.queue_declare(name, durable=self.durable, arguments=self.queue_arguments())
            if topology.keys:
                ch.exchange_declare(name, exchange_type="direct", durable=self.durable)
                for key in topology.key_names():
                    ch.queue_bind(name, name, routing_key=key.decode())

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        topology = topology_from_plan(plan)
        name = topology.topic_name(role.topic)
        if self._kind(topology) is Pattern.PUBSUB or topology.keys:
            producer = _RabbitProducer(self._connect(), self.opts, self.durable, name, "", self.carry)
        else:
            producer = _RabbitProducer(self._connect(), self.opts, self.durable, "", name, self.carry)
        self._declare(producer.channel, topology, role.topic)
        return producer

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        topology = topology_from_plan(plan)
        consumer = _RabbitConsumer(self._connect(), self, topology, role)
        self._declare(consumer.channel, topology, role.topic)
        return consumer

    def create_requester(self, plan: Mapping[str, Any], role: Role) -> Requester:
        return _RabbitRequester(self._connect(), topic(plan, role))

    def create_replier(self, plan: Mapping[str, Any], role: Role) -> Replier:
        return _RabbitReplier(self._connect(), topic(plan, role), self.opts.prefetch)

    def _connect(self) -> Any:
        """A connection to the broker, or to the first node of a cluster's URL list that takes one."""
        import pika

        urls = self.url.split(",")
        params = [pika.URLParameters(url) for url in urls]
        for p in params:
            p.heartbeat = 0  # workers may wait at the start barrier longer than a heartbeat interval
            p.socket_timeout = 10 if len(params) == 1 else NODE_CONNECT_TIMEOUT
            if len(params) > 1:
                p.stack_timeout = NODE_HANDSHAKE_TIMEOUT
                p.connection_attempts = 1
        where = ", ".join(address(url) for url in urls)
        # Three attempts half a second apart, as pika's connection_attempts=3, retry_delay=0.5 would make.
        try:
            return connect("rabbitmq", urls[0], lambda: pika.BlockingConnection(params), retry_for=1.0)
        except DriverError:
            if len(urls) == 1:
                raise
            raise DriverError(f"cannot connect to any rabbitmq node ({where}); check that the cluster runs") from None


def _subscriber_queue(exchange: str, consumer: int) -> str:
    return f"{exchange}.c{consumer}"


class _RabbitProducer(Producer):
    """Publishes through the channel's asynchronous core (``channel._impl``): BlockingChannel's own
    ``basic_publish`` flushes the socket, and with confirms waits for the ack, on every message.

    At-least-once across a lost connection (with confirms): the bodies not confirmed yet are left in
    ``carry`` (the driver's), and the producer the runner creates next on this driver publishes them
    again first; a message may then arrive twice, never not at all.

    Outcomes (``watch_outcomes``, with confirms and a window): each basic.ack / basic.nack (``multiple``
    covers every earlier tag not yet settled) is reported for the sends it covers; the carried messages take
    the channel's first delivery tags, so send i is tag ``carried + i + 1``. A nack is then a refused send,
    not an error; without ``watch_outcomes`` it makes the next ``send`` or ``flush`` raise."""

    def __init__(self, conn: Any, opts: RabbitMQOptions, durable: bool, exchange: str, routing_key: str,
                 carry: list[bytes]) -> None:
        import pika

        self.conn = conn
        self.channel = conn.channel()
        self.publish = self.channel._impl.basic_publish
        self.exchange, self.routing_key = exchange, routing_key
        self.properties = pika.BasicProperties(delivery_mode=2 if durable else 1)
        self.confirms = opts.confirms
        self.window = opts.confirm_window if opts.confirms else 0
        self.batch = SendBatch(opts.write_batch if self.window != 1 else 1)
        self.published = self.confirmed = 0  # publish sequence numbers (the broker's delivery tags)
        self.singles: set[int] = set()  # confirmed one by one, above ``confirmed``
        self.unconfirmed: collections.deque[bytes] = collections.deque()  # bodies from confirmed + 1 on
        self.carry = carry
        self.carried = 0  # delivery tags 1..carried are the predecessor's messages, not sends of this one
        self.report: Callable[[int, int, bool], None] | None = None
        self.nacked: Any = None
        if opts.confirms:
            selected: list[Any] = []
            self.channel._impl.confirm_delivery(self._on_confirm, selected.append)
            self._pump(lambda: bool(selected), RECEIPT_TIMEOUT, "confirm mode")
            for body in carry:  # a predecessor's unconfirmed messages first; carry stays until confirmed
                self._publish(body)
            self.carried = self.published
            self._pump(lambda: self.confirmed >= self.published, RECEIPT_TIMEOUT, "the carried messages")
            carry.clear()
        self.acks_synchronously = self.window == 1

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        if self.window <= 1:  # no confirms, or each send waits for its own
            return False
        self.report = report
        return True

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
        accepted = not isinstance(method, pika.spec.Basic.Nack)
        if not accepted and self.nacked is None and self.report is None:
            self.nacked = method
        tag, before = method.delivery_tag, self.confirmed
        if method.multiple:
            settled = _runs(self.confirmed + 1, tag, self.singles)
            self.confirmed = max(self.confirmed, tag)
            self.singles = {t for t in self.singles if t > tag}
        else:  # a confirm of one message: count it once those before it are confirmed too
            settled = [] if tag <= self.confirmed or tag in self.singles else [(tag, tag)]
            self.singles.add(tag)
        while self.confirmed + 1 in self.singles:
            self.confirmed += 1
            self.singles.discard(self.confirmed)
        for _ in range(self.confirmed - before):
            self.unconfirmed.popleft()
        if self.report is not None:
            for first, last in settled:
                first = max(first, self.carried + 1)
                if first <= last:
                    self.report(first - self.carried - 1, last - first + 1, accepted)

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

    def send_keyed(self, payload: bytearray, key: bytes) -> None:
        self.routing_key = key.decode()  # the topic's direct exchange routes by it
        self.send(payload)

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


def _runs(first: int, last: int, skip: set[int]) -> list[tuple[int, int]]:
    """The tags ``first``..``last`` without those in ``skip``, as (first, last) runs."""
    runs, start = [], first
    for tag in sorted(t for t in skip if first <= t <= last):
        if start < tag:
            runs.append((start, tag - 1))
        start = tag + 1
    if start <= last:
        runs.append((start, last))
    return runs


class _RabbitConsumer(Consumer):
    """A consumer of the topic's queue (queue), of its own queue bound to the topic's exchange (pubsub), or
    of the topic's stream from its own offset: where its predecessor on this driver stopped, else the start."""

    def __init__(self, conn: Any, driver: RabbitMQDriver, topology: Topology, role: Role) -> None:
        self.conn, self.opts, self.driver = conn, driver.opts, driver
        self.channel = conn.channel()
        self.topology, self.role = topology, role
        self.unacked = self.pending = 0  # last delivery tag not yet acked, deliveries since the last ack

    def start(self, on_message: Callable[[bytes], None]) -> None:
        ch, name, driver = self.channel, self.topology.topic_name(self.role.topic), self.driver
        queue, arguments = name, None
        if driver._kind(self.topology) is Pattern.PUBSUB:
            if driver.durable:
                queue = _subscriber_queue(name, self.role.index)
                ch.queue_declare(queue, durable=True, arguments=driver.queue_arguments())
            else:
                queue = ch.queue_declare("", exclusive=True, auto_delete=True).method.queue
            for key in self.topology.key_names() or [b""]:  # a keyed run's exchange is direct: every key
                ch.queue_bind(queue, name, routing_key=key.decode())  # synchronous: bound when this returns
        stream = self.opts.queue_type == "stream"
        if stream:
            arguments = {"x-stream-offset": driver.offsets.get(self.role.index, "first")}
        manual = self.opts.manual_ack or stream  # a stream's consumer credit comes back with the acks
        if manual:
            ch.basic_qos(prefetch_count=self.opts.prefetch)
        every, offsets, index = self.opts.ack_every, driver.offsets, self.role.index

        def deliver(channel: Any, method: Any, props: Any, body: bytes) -> None:
            on_message(body)
            if stream:
                offsets[index] = props.headers["x-stream-offset"] + 1
            if manual:
                self.unacked = method.delivery_tag
                self.pending += 1
                if self.pending >= every:  # acks everything delivered up to this one
                    self._ack()

        ch.basic_consume(queue, deliver, auto_ack=not manual, arguments=arguments)  # waits for consume-ok

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
