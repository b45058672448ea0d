"""Redis through redis-py: Streams for queues (and, by default, for pubsub), or Redis Pub/Sub.

queue: one stream per topic with the consumer group ``mqbench`` created in ``plan``; consumers read with
XREADGROUP and XACK each batch after ``on_message`` returned (at-least-once). pubsub, ``mode: stream``:
every consumer XREADs the whole stream from the last entry id it saw at ``start()``. pubsub,
``mode: pubsub``: PUBLISH/SUBSCRIBE (fire and forget). Pull-style: ``on_message`` runs inside ``poll``.
``aof``: append-only file with fsync on every write; turned on by CONFIG SET on a provisioned broker, and
required to be on already for an external one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import Consumer, DriverError, Guarantee, Pattern, Producer, Role, Topology
from harness.drivers.broker import BrokerDriver, connect, guarantee, pattern, topic
from harness.drivers.options import option

GROUP = "mqbench"
FIELD = b"d"
SOCKET_TIMEOUT = 30.0


@dataclass(frozen=True)
class RedisOptions:
    # pubsub pattern through a stream ("stream") or Redis Pub/Sub ("pubsub")
    mode: str = option("stream", choices=("stream", "pubsub"))
    aof: bool = False  # appendonly yes + appendfsync always
    maxlen: int = option(0, minimum=0)  # approximate stream length cap (XADD MAXLEN ~); 0 keeps everything
    batch: int = option(100, minimum=1)  # entries per XREAD/XREADGROUP


class RedisDriver(BrokerDriver):
    name = "redis"
    patterns = frozenset({Pattern.QUEUE, Pattern.PUBSUB})
    client_packages = ("redis",)
    client = "redis-py"
    client_module = "redis"
    options_type = RedisOptions
    opts: RedisOptions

    def guarantee(self) -> Guarantee:
        # Stated for the pubsub pattern when mode is pubsub (queues always use streams).
        return guarantee(self.opts.mode != "pubsub", self.opts.aof)

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
        client.config_set("appendfsync", "always")
        client.config_set("appendonly", "yes")

    # -- workers ---------------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        use_pubsub = self._channels(plan)
        return _RedisProducer(self._client(), topic(plan, role), use_pubsub, self.opts.maxlen)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        key = topic(plan, role)
        if pattern(plan) is Pattern.QUEUE:
            return _GroupConsumer(self._client(), key, f"c{role.index}", self.opts.batch)
        if self._channels(plan):
            return _ChannelConsumer(self._client(), key)
        return _StreamConsumer(self._client(), key, self.opts.batch)

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


class _RedisProducer(Producer):
    acks_synchronously = True  # XADD / PUBLISH return after the server took the message

    def __init__(self, client: Any, key: str, use_pubsub: bool, maxlen: int) -> None:
        self.client, self.key, self.use_pubsub = client, key, use_pubsub
        self.maxlen = maxlen or None

    def send(self, payload: bytearray) -> None:
        import redis

        try:
            if self.use_pubsub:
                self.client.publish(self.key, bytes(payload))
            else:
                self.client.xadd(self.key, {FIELD: bytes(payload)}, maxlen=self.maxlen, approximate=True)
        except redis.RedisError as exc:
            raise DriverError(f"redis refused a message: {exc}") from None

    def close(self) -> None:
        self.client.close()


def _block_ms(timeout: float) -> int:
    return max(1, int(timeout * 1000))  # BLOCK 0 would wait forever


class _GroupConsumer(Consumer):
    def __init__(self, client: Any, key: str, name: str, batch: int) -> None:
        self.client, self.key, self.name, self.batch = client, key, name, batch
        self.on_message: Callable[[bytes], None] | None = None
        # A consumer (re)starting first reads its own pending entries: delivered to it earlier but never
        # acknowledged (e.g. the connection died before the reply arrived). At-least-once: maybe twice.
        self.cursor = "0"

    def start(self, on_message: Callable[[bytes], None]) -> None:
        import redis

        self.on_message = on_message  # the group's cursor lives in the server since plan()
        try:  # as applications do: make sure the group exists (a restarted broker without AOF lost it)
            self.client.xgroup_create(self.key, GROUP, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def poll(self, timeout: float) -> None:
        assert self.on_message is not None, "start() first"
        answer = self.client.xreadgroup(
            GROUP, self.name, {self.key: self.cursor}, count=self.batch,
            block=None if self.cursor != ">" else _block_ms(timeout),
        )
        if self.cursor != ">" and not any(entries for _key, entries in answer or []):
            self.cursor = ">"  # own pending entries done: new ones from now on
            return
        for _key, entries in answer or []:
            ids = []
            for entry_id, fields in entries:
                self.on_message(fields[FIELD])
                ids.append(entry_id)
            if ids:
                self.client.xack(self.key, GROUP, *ids)

    def close(self) -> None:
        self.client.close()


class _StreamConsumer(Consumer):
    def __init__(self, client: Any, key: str, batch: int) -> None:
        self.client, self.key, self.batch = client, key, batch
        self.cursor: bytes | str = "0-0"
        self.on_message: Callable[[bytes], None] | None = None

    def start(self, on_message: Callable[[bytes], None]) -> None:
        self.on_message = on_message
        last = self.client.xrevrange(self.key, count=1)
        self.cursor = last[0][0] if last else "0-0"  # everything added after start() will be read

    def poll(self, timeout: float) -> None:
        assert self.on_message is not None, "start() first"
        answer = self.client.xread({self.key: self.cursor}, count=self.batch, block=_block_ms(timeout))
        for _key, entries in answer or []:
            for entry_id, fields in entries:
                self.on_message(fields[FIELD])
                self.cursor = entry_id

    def close(self) -> None:
        self.client.close()


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
