"""Redis through redis-py: Streams for queues (and, by default, for pubsub), or Redis Pub/Sub.

queue: one stream per topic with the consumer group ``mqbench`` created in ``plan``; consumers read with
XREADGROUP and XACK each batch after ``on_message`` returned (at-least-once). pubsub, ``mode: stream``:
every consumer XREADs the whole stream from the last entry id it saw at ``start()``. pubsub,
``mode: pubsub``: PUBLISH/SUBSCRIBE (fire and forget). Pull-style: ``on_message`` runs inside ``poll``.
``aof``: append-only file with fsync on every write; turned on by CONFIG SET on a provisioned broker, and
required to be on already for an external one.

Throughput as redis-py (with hiredis) allows it: producers pipeline, writing XADD / PUBLISH commands in
batches and reading the replies behind, at most ``pipeline`` unanswered (redis-benchmark's ``-P``); group consumers read
``batch`` entries per XREADGROUP and send the XACK of a batch in the same round trip as the next read.
Workers speak through one connection of the client's pool (``_Wire``) and take replies as the hiredis
parser gives them, without redis-py's per-entry conversion to dicts.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import Consumer, DriverError, Guarantee, Pattern, Producer, Role, Topology
from harness.drivers.broker import BrokerDriver, SendBatch, connect, guarantee, pattern, topic
from harness.drivers.options import option

GROUP = "mqbench"
FIELD = b"d"
SOCKET_TIMEOUT = 30.0
AOF_ON_TIMEOUT = 60.0  # seconds the first rewrite of an AOF turned on at run time may take


@dataclass(frozen=True)
class RedisOptions:
    # pubsub pattern through a stream ("stream") or Redis Pub/Sub ("pubsub")
    mode: str = option("stream", choices=("stream", "pubsub"))
    aof: bool = False  # appendonly yes + appendfsync always
    maxlen: int = option(0, minimum=0)  # approximate stream length cap (XADD MAXLEN ~); 0 keeps everything
    batch: int = option(100, minimum=1)  # entries per XREAD/XREADGROUP
    pipeline: int = option(100, minimum=1)  # unanswered XADD/PUBLISH per producer; 1: each waits for its reply


class RedisDriver(BrokerDriver):
    name = "redis"
    patterns = frozenset({Pattern.QUEUE, Pattern.PUBSUB})
    client_packages = ("redis",)
    client = "redis-py"
    client_module = "redis"
    options_type = RedisOptions
    opts: RedisOptions

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        self.carry: list[bytes] = []  # commands a lost producer left unanswered (see _RedisProducer)

    def guarantee(self) -> Guarantee:
        # Stated for the pubsub pattern when mode is pubsub (queues always use streams).
        return guarantee(self.opts.mode != "pubsub", self.opts.aof)

    def parity(self) -> dict[str, str]:
        command = "PUBLISH" if self.opts.mode == "pubsub" else "XADD"
        acks = f"the {command} reply" + (f" ({self.opts.pipeline} pipelined)" if self.opts.pipeline > 1 else "")
        fsync = ("every write (appendonly, appendfsync always)" if self.opts.aof
                 else "none (no AOF, no snapshots: memory only)")
        return {"acks": acks, "fsync": fsync}

    # -- parent ----------------------------------------------------------------------------------

    def admin(self) -> Any:
        return self._client()

    def create_topics(self, admin: Any, topology: Topology) -> dict[str, Any]:
        if self.opts.aof:
            self._ensure_aof(admin)
        if topology.pattern is Pattern.QUEUE:
            for i in range(topology.topics):
                admin.xgroup_create(topology.topic_name(i), GROUP, id="$", mkstream=True)
        return {}

    def delete_topics(self, admin: Any, topology: Topology) -> None:
        admin.delete(*[topology.topic_name(i) for i in range(topology.topics)])

    def _ensure_aof(self, client: Any) -> None:
        config = client.config_get("append*")
        if config.get("appendonly") == "yes" and config.get("appendfsync") == "always":
            return
        assert self.broker is not None
        if self.broker.backend == "external":
            raise DriverError(
                "redis option aof needs 'appendonly yes' and 'appendfsync always' on the external broker; "
                "set them there or drop the option"
            )
        turn_aof_on(client)

    # -- workers ---------------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        key = topic(plan, role)
        if self._channels(plan):
            head: tuple[Any, ...] = ("PUBLISH", key)
        else:
            cap = ("MAXLEN", "~", self.opts.maxlen) if self.opts.maxlen else ()
            head = ("XADD", key, *cap, "*", FIELD)
        return _RedisProducer(_Wire(self._client()), head, self.opts.pipeline, self.carry)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        key = topic(plan, role)
        if pattern(plan) is Pattern.QUEUE:
            return _GroupConsumer(_Wire(self._client()), key, f"c{role.index}", self.opts.batch)
        if self._channels(plan):
            return _ChannelConsumer(self._client(), key)
        return _StreamConsumer(_Wire(self._client()), key, self.opts.batch)

    def _channels(self, plan: Mapping[str, Any]) -> bool:
        """Whether this run goes through Redis Pub/Sub channels instead of streams."""
        return pattern(plan) is Pattern.PUBSUB and self.opts.mode == "pubsub"

    def _client(self) -> Any:
        import redis

        def ping() -> Any:
            client = redis.Redis.from_url(
                self.url, socket_timeout=SOCKET_TIMEOUT, socket_connect_timeout=10, decode_responses=False
            )
            client.ping()
            return client

        return connect("redis", self.url, ping)


class _Wire:
    """One connection taken from a client's pool, for commands written and answered in order: ``send``
    writes, ``read`` takes the oldest unread reply (raw, as hiredis parses it). Errors become DriverError."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.conn = client.connection_pool.get_connection()

    def pack(self, *args: Any) -> bytes:
        """One command in the protocol (hiredis packs it when installed)."""
        return b"".join(self.conn.pack_command(*args))

    def write(self, data: bytes) -> None:
        """Commands already packed, in one write."""
        import redis

        try:
            self.conn.send_packed_command([data], check_health=False)
        except redis.RedisError as exc:
            raise DriverError(f"redis refused a command: {exc}") from None

    def send(self, *args: Any) -> None:
        self.write(self.pack(*args))

    def read(self) -> Any:
        import redis

        try:
            return self.conn.read_response()
        except redis.RedisError as exc:
            raise DriverError(f"redis refused a command: {exc}") from None

    def ready(self) -> bool:
        """Whether a reply (or part of one) has arrived and can be read now, without waiting."""
        try:
            return bool(self.conn.can_read(timeout=0))
        except Exception:  # the connection failed: the next read says how
            return True

    def call(self, *args: Any) -> Any:
        self.send(*args)
        return self.read()

    def close(self) -> None:
        self.client.connection_pool.release(self.conn)
        self.client.close()


class _RedisProducer(Producer):
    """Commands are packed at ``send`` and written in batches (``SendBatch``: half the pipeline; or at once,
    reading every reply, when the producer is paced); before a batch is written, replies are read until at
    most ``pipeline`` commands will be unanswered.

    At-least-once across a lost connection: commands whose reply never came are left in ``carry`` (the
    driver's, so that the producer the runner creates next on this driver writes them again first); a
    message may then arrive twice, never not at all.

    Outcomes (``watch_outcomes``, pipelined): each reply is reported as it is read, for the send it answers
    (replies come in command order; the carried commands come first and are not this producer's sends).
    While watched, the replies that have already arrived are read after every batch, without waiting, so
    that an acknowledgement is stamped when it came rather than when the window next filled."""

    def __init__(self, wire: _Wire, head: tuple[Any, ...], pipeline: int, carry: list[bytes]) -> None:
        self.wire, self.window, self.carry = wire, pipeline, carry
        # The command without its last argument, packed by the client once; the payload goes after it as
        # one bulk string ("$<length>\r\n<bytes>\r\n"), the only part that changes per message.
        self.prefix = wire.pack(*head, b"")[: -len(b"$0\r\n\r\n")]
        self.batch = SendBatch(max(1, pipeline // 2))
        self.packed: list[bytes] = []  # commands not written yet
        self.unanswered: collections.deque[bytes] = collections.deque()  # written, reply not read yet
        # XADD / PUBLISH are answered once the server took the message; with a pipeline, later.
        self.acks_synchronously = pipeline == 1
        self.report: Callable[[int, int, bool], None] | None = None
        self.answered = 0  # replies read so far, the carried commands' included
        self.carried = len(carry)
        if carry:  # a predecessor's unanswered commands first
            self.packed.extend(carry)
            self._write(answered=True)
            carry.clear()

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        if self.window == 1:  # each send waits for its own reply: synchronous
            return False
        self.report = report
        return True

    def _read_reply(self) -> None:
        """Read the oldest unanswered command's reply (an error reply raises DriverError)."""
        self.wire.read()
        self.unanswered.popleft()
        self.answered += 1
        if self.report is not None and self.answered > self.carried:
            self.report(self.answered - self.carried - 1, 1, True)

    def send(self, payload: bytearray) -> None:
        self.batch.begin()
        self.packed.append(b"".join((self.prefix, b"$%d\r\n" % len(payload), payload, b"\r\n")))  # copies payload
        if self.batch.due():
            self._write(answered=self.window == 1 or self.batch.paced)  # paced: each send waits for its reply
            self.batch.done()

    def _write(self, answered: bool) -> None:
        """Write the packed commands, after reading replies down to the window; ``answered``: and read
        every reply before returning."""
        wire, packed, unanswered = self.wire, self.packed, self.unanswered
        try:
            while unanswered and len(unanswered) + len(packed) > self.window:
                self._read_reply()
            if packed:
                wire.write(b"".join(packed))
                unanswered.extend(packed)
                packed.clear()
            while unanswered and (answered or (self.report is not None and wire.ready())):
                self._read_reply()
        except DriverError:
            self.carry[:] = [*unanswered, *packed]
            unanswered.clear()
            packed.clear()
            raise

    def flush(self, timeout: float) -> None:
        self._write(answered=True)  # the socket timeout bounds each read

    def close(self) -> None:
        self.wire.close()


def _block_ms(timeout: float) -> int:
    return max(1, int(timeout * 1000))  # BLOCK 0 would wait forever


def _streams(answer: Any) -> Any:
    """The (key, entries) pairs of an XREAD/XREADGROUP reply: a list of pairs in RESP2, a map in RESP3."""
    return answer.items() if isinstance(answer, dict) else answer or ()


def _deliver(answer: Any, on_message: Callable[[bytes], None]) -> Any:
    """Pass on the payloads of an XREAD/XREADGROUP reply (entries ``[id, [field, value]]``); return the
    id of the last entry (None for an empty reply)."""
    last = None
    for _key, entries in _streams(answer):
        for entry_id, fields in entries:
            on_message(fields[1])  # one field, FIELD, per entry
            last = entry_id
    return last


def _entry_ids(answer: Any) -> list[Any]:
    return [entry[0] for _key, entries in _streams(answer) for entry in entries]


class _GroupConsumer(Consumer):
    def __init__(self, wire: _Wire, key: str, name: str, batch: int) -> None:
        self.wire, self.key, self.name, self.batch = wire, key, name, batch
        self.on_message: Callable[[bytes], None] | None = None
        # A consumer (re)starting first reads its own pending entries: delivered to it earlier but never
        # acknowledged (e.g. the connection died before the reply arrived). At-least-once: maybe twice.
        self.cursor = "0"
        self.unacked: list[Any] = []  # ids handed to on_message, acked with the next read

    def start(self, on_message: Callable[[bytes], None]) -> None:
        self.on_message = on_message  # the group's cursor lives in the server since plan()
        try:  # as applications do: make sure the group exists (a restarted broker without AOF lost it)
            self.wire.call("XGROUP", "CREATE", self.key, GROUP, "0", "MKSTREAM")
        except DriverError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def poll(self, timeout: float) -> None:
        assert self.on_message is not None, "start() first"
        wire, acks = self.wire, self.unacked
        if acks:  # written ahead of the read: one round trip for both
            wire.send("XACK", self.key, GROUP, *acks)
        block = ("BLOCK", _block_ms(timeout)) if self.cursor == ">" else ()
        wire.send("XREADGROUP", "GROUP", GROUP, self.name, "COUNT", self.batch, *block,
                  "STREAMS", self.key, self.cursor)
        if acks:
            wire.read()
            acks.clear()
        answer = wire.read()
        if self.cursor != ">" and not any(entries for _key, entries in _streams(answer)):
            self.cursor = ">"  # own pending entries done: new ones from now on
            return
        _deliver(answer, self.on_message)
        acks.extend(_entry_ids(answer))  # after on_message returned for each

    def close(self) -> None:
        if self.unacked:
            try:
                self.wire.call("XACK", self.key, GROUP, *self.unacked)
            except DriverError:  # the broker is gone: the entries stay pending, at-least-once
                pass
        self.wire.close()


class _StreamConsumer(Consumer):
    def __init__(self, wire: _Wire, key: str, batch: int) -> None:
        self.wire, self.key, self.batch = wire, key, batch
        self.cursor: bytes | str = "0-0"
        self.on_message: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        self.on_message = on_message
        last = self.wire.call("XREVRANGE", self.key, "+", "-", "COUNT", 1)
        self.cursor = last[0][0] if last else "0-0"  # everything added after start() will be read

    def poll(self, timeout: float) -> None:
        assert self.on_message is not None, "start() first"
        answer = self.wire.call("XREAD", "COUNT", self.batch, "BLOCK", _block_ms(timeout),
                                "STREAMS", self.key, self.cursor)
        last = _deliver(answer, self.on_message)
        if last is not None:
            self.cursor = last

    def close(self) -> None:
        self.wire.close()


class _ChannelConsumer(Consumer):
    def __init__(self, client: Any, channel: str) -> None:
        self.client, self.channel = client, channel
        self.pubsub = client.pubsub()
        self.on_message: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        self.on_message = on_message
        self.pubsub.subscribe(self.channel)
        deadline = time.monotonic() + 10.0  # wait for the server's subscribe confirmation
        while time.monotonic() < deadline:
            msg = self.pubsub.get_message(timeout=0.1)
            if msg is not None and msg["type"] == "subscribe":
                return
        raise DriverError(f"redis did not confirm the subscription to {self.channel}")

    def poll(self, timeout: float) -> None:
        assert self.on_message is not None, "start() first"
        deadline = time.monotonic() + timeout  # bounds the wait only
        while True:
            remaining = deadline - time.monotonic()
            msg = self.pubsub.get_message(timeout=max(0.0, remaining))
            if msg is not None and msg["type"] == "message":
                self.on_message(msg["data"])
            elif msg is None and remaining <= 0:
                return

    def close(self) -> None:
        self.pubsub.close()
        self.client.close()


def turn_aof_on(client: Any, timeout: float = AOF_ON_TIMEOUT) -> None:
    """``appendonly yes`` with ``appendfsync always`` on a running server, returning once the AOF holds every
    write: Redis turns it on by rewriting the data set in a child first, and until that rewrite is done what
    is written is kept in memory only (a crash meanwhile loses it). DriverError when the rewrite fails or
    takes longer than ``timeout`` seconds."""
    client.config_set("appendfsync", "always")
    client.config_set("appendonly", "yes")
    deadline = time.monotonic() + timeout
    while True:
        info = client.info("persistence")
        if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
            if info.get("aof_last_bgrewrite_status", "ok") != "ok":
                raise DriverError("redis could not turn its AOF on: the first rewrite failed (see its log)")
            return
        if time.monotonic() > deadline:
            raise DriverError(f"redis's AOF was not on within {timeout:.0f} s (its first rewrite still runs)")
        time.sleep(0.02)
