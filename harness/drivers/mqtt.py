"""MQTT 3.1.1 through paho-mqtt (v2 callback API), written against Mosquitto 2.

Each producer/consumer is one client with paho's network thread (``loop_start``); consumers receive in that
thread (callback-style). pubsub: every consumer subscribes to the topic; queue: consumers share the
subscription ``$share/mqbench/<topic>`` (MQTT 5 shared subscriptions, which Mosquitto 2 also offers to 3.1.1
clients). QoS 1/2 consumers ack after ``on_message`` returns (paho's manual ack). Producers keep a window
of unfinished publishes: QoS 0 counts as finished when written to the socket, QoS 1/2 when acknowledged.
"""

from __future__ import annotations

import collections
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness.drivers.base import Consumer, DriverError, Guarantee, Pattern, Producer, Role
from harness.drivers.broker import BrokerDriver, CallbackConsumer, address, connect, guarantee, pattern, topic
from harness.drivers.options import option

WINDOW = 1000  # unfinished publishes per producer
SHARE_GROUP = "mqbench"
CONNECT_TIMEOUT = 15.0


@dataclass(frozen=True)
class MqttOptions:
    qos: int = option(0, choices=(0, 1, 2))  # for publishing and subscribing
    inflight: int = option(100, minimum=1)  # paho's window of unacknowledged QoS 1/2 publishes


class MqttDriver(BrokerDriver):
    name = "mqtt"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE})
    client_packages = ("paho-mqtt",)
    client = "paho-mqtt"
    client_module = "paho.mqtt.client"
    options_type = MqttOptions
    opts: MqttOptions

    def guarantee(self) -> Guarantee:
        # Clean sessions on a broker without persistence: nothing survives a restart.
        return guarantee(self.opts.qos > 0, durable=False)

    # Topics exist as soon as someone publishes or subscribes: no admin().

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        conn = _Connection(self, f"p{role.index}", manual_ack=False)
        return _MqttProducer(conn, topic(plan, role), self.opts.qos)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        name = topic(plan, role)
        if pattern(plan) is Pattern.QUEUE:
            name = f"$share/{SHARE_GROUP}/{name}"
        conn = _Connection(self, f"c{role.index}", manual_ack=self.opts.qos > 0)
        return _MqttConsumer(conn, name, self.opts.qos)


class _Connection:
    """A connected paho client with its network thread running."""

    def __init__(self, driver: MqttDriver, label: str, manual_ack: bool) -> None:
        import paho.mqtt.client as mqtt

        url = urlsplit(driver.url)
        self.client = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=f"mqbench-{label}-{uuid.uuid4().hex[:8]}",
            clean_session=True,
            manual_ack=manual_ack,
        )
        self.client.max_inflight_messages_set(driver.opts.inflight)
        self.client.max_queued_messages_set(0)
        if url.username is not None:
            self.client.username_pw_set(url.username, url.password)
        self.connected = threading.Event()
        self.refused: str | None = None
        self.lost: str | None = None
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        host, port = url.hostname or "localhost", url.port or 1883
        connect("mqtt", driver.url, lambda: self.client.connect(host, port, keepalive=60))
        self.client.loop_start()
        if not self.connected.wait(CONNECT_TIMEOUT) or self.refused:
            self.close()
            raise DriverError(
                f"the mqtt broker at {address(driver.url)} refused the connection: {self.refused or 'no CONNACK'}"
            )

    def _on_connect(self, _client: Any, _userdata: Any, _flags: Any, reason: Any, _props: Any) -> None:
        if reason.is_failure:
            self.refused = str(reason)
        self.connected.set()

    def _on_disconnect(self, _client: Any, _userdata: Any, _flags: Any, reason: Any, _props: Any) -> None:
        if reason.is_failure:
            self.lost = str(reason)

    def check(self) -> None:
        if self.lost:
            raise DriverError(f"the mqtt connection was lost: {self.lost}")

    def close(self) -> None:
        try:
            self.client.disconnect()
        finally:
            self.client.loop_stop()


class _MqttProducer(Producer):
    def __init__(self, conn: _Connection, topic: str, qos: int) -> None:
        self.conn, self.topic, self.qos = conn, topic, qos
        self.unfinished: collections.deque[Any] = collections.deque()

    def _finish_oldest(self, timeout: float) -> None:
        info = self.unfinished.popleft()
        info.wait_for_publish(timeout)
        if not info.is_published():
            raise DriverError(f"mqtt publish {info.mid} did not complete within {timeout:.0f} s")

    def send(self, payload: bytearray) -> None:
        import paho.mqtt.client as mqtt

        self.conn.check()
        info = self.conn.client.publish(self.topic, bytes(payload), qos=self.qos)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise DriverError(f"mqtt publish failed: {mqtt.error_string(info.rc)}")
        self.unfinished.append(info)
        if len(self.unfinished) >= WINDOW:
            self._finish_oldest(60.0)

    def flush(self, timeout: float) -> None:
        while self.unfinished:
            self._finish_oldest(timeout)

    def close(self) -> None:
        self.conn.close()


class _MqttConsumer(CallbackConsumer):
    def __init__(self, conn: _Connection, topic: str, qos: int) -> None:
        super().__init__(conn)  # messages arrive in paho's network thread
        self.client, self.topic, self.qos = conn.client, topic, qos

    def start(self, on_message: Callable[[bytes], None]) -> None:
        client = self.client
        subscribed = threading.Event()
        granted: list[Any] = []

        def deliver(_client: Any, _userdata: Any, msg: Any) -> None:
            on_message(msg.payload)
            if msg.qos > 0:
                client.ack(msg.mid, msg.qos)

        def on_subscribe(_client: Any, _userdata: Any, _mid: int, reasons: list[Any], _props: Any) -> None:
            granted.extend(reasons)
            subscribed.set()

        client.on_message = deliver
        client.on_subscribe = on_subscribe
        result, _mid = client.subscribe(self.topic, qos=self.qos)
        if result != 0 or not subscribed.wait(CONNECT_TIMEOUT):
            raise DriverError(f"the mqtt broker did not confirm the subscription to {self.topic}")
        if any(r.is_failure for r in granted):
            raise DriverError(f"the mqtt broker refused the subscription to {self.topic}: {granted[0]}")
