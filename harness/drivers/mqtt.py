"""MQTT 3.1.1 through paho-mqtt (v2 callback API), written against Mosquitto 2.

A consumer is one client with paho's network thread (``loop_start``) and receives in that thread
(callback-style). A producer's client has no network thread: paho then writes each publish to the socket
inside ``publish`` (with a thread, every publish would wake it through a socket pair), and the producer
reads the broker's acknowledgements itself whenever its window is full (``_Connection.pump``). A producer
connects with keepalive 0 (no PINGREQs to send): it does not service the connection while it waits for the
start, which could take longer than a keepalive interval. pubsub: every consumer subscribes to the topic; queue: consumers share the
subscription ``$share/mqbench/<topic>`` (MQTT 5 shared subscriptions, which Mosquitto 2 also offers to 3.1.1
clients). QoS 1/2 consumers ack after ``on_message`` returns (paho's manual ack). Producers keep a window
of unfinished publishes: QoS 0 counts as finished when written to the socket, QoS 1/2 when acknowledged.
"""

from __future__ import annotations

import collections
import select
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from harness.drivers.base import (
    Capabilities,
    Consumer,
    DriverError,
    Guarantee,
    Pattern,
    Producer,
    Role,
    topology_from_plan,
)
from harness.drivers.broker import (
    IDLE_NS,
    BrokerDriver,
    CallbackConsumer,
    address,
    connect,
    guarantee,
    pattern,
    topic,
)
from harness.drivers.options import option

SHARE_GROUP = "mqbench"
CONNECT_TIMEOUT = 15.0


@dataclass(frozen=True)
class MqttOptions:
    qos: int = option(0, choices=(0, 1, 2))  # for publishing and subscribing
    # Unfinished publishes per producer (paho's max_inflight for QoS 1/2; unwritten ones for QoS 0); the
    # provisioned Mosquitto takes 1000 in flight (max_inflight_messages).
    inflight: int = option(1000, minimum=1)


class MqttDriver(BrokerDriver):
    name = "mqtt"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE})
    client_packages = ("paho-mqtt",)
    client = "paho-mqtt"
    client_module = "paho.mqtt.client"
    options_type = MqttOptions
    opts: MqttOptions
    capabilities = Capabilities(flush=True, keys="a topic level: <topic>/<key>, subscribed as <topic>/+")

    def guarantee(self) -> Guarantee:
        # Clean sessions on a broker without persistence: nothing survives a restart.
        return guarantee(self.opts.qos > 0, durable=False)

    def parity(self) -> dict[str, str]:
        acks = {0: "none (QoS 0)", 1: "PUBACK (QoS 1)", 2: "PUBCOMP (QoS 2)"}[self.opts.qos]
        return {"acks": acks, "fsync": "none (Mosquitto without persistence: memory only)"}

    # Topics exist as soon as someone publishes or subscribes: no admin().

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        conn = _Connection(self, f"p{role.index}", manual_ack=False, threaded=False)
        return _MqttProducer(conn, topic(plan, role), self.opts.qos, self.opts.inflight)

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        name = topic(plan, role) + ("/+" if topology_from_plan(plan).keys else "")
        if pattern(plan) is Pattern.QUEUE:
            name = f"$share/{SHARE_GROUP}/{name}"
        conn = _Connection(self, f"c{role.index}", manual_ack=self.opts.qos > 0, threaded=True)
        return _MqttConsumer(conn, name, self.opts.qos)


class _Connection:
    """A connected paho client, with its network thread running when ``threaded``; otherwise whoever uses
    it drives the network with ``pump``."""

    def __init__(self, driver: MqttDriver, label: str, manual_ack: bool, threaded: bool) -> None:
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
        keepalive = 60 if threaded else 0
        connect("mqtt", driver.url, lambda: self.client.connect(host, port, keepalive=keepalive))
        self.threaded = threaded
        if threaded:
            self.client.loop_start()
        else:
            deadline = time.monotonic() + CONNECT_TIMEOUT  # bounds the wait only
            while not self.connected.is_set() and time.monotonic() < deadline and not self.lost:
                self.pump(0.05)
        if not self.connected.wait(CONNECT_TIMEOUT if threaded else 0) or self.refused:
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

    def pump(self, timeout: float) -> None:
        """Without a network thread: wait up to ``timeout`` s for the socket, then read what came (paho calls
        the callbacks here), write what paho still holds and run its housekeeping."""
        import paho.mqtt.client as mqtt

        client = self.client
        sock = client.socket()
        if sock is None:
            self.lost = self.lost or "the socket is closed"
            return
        readable, writable, _ = select.select([sock], [sock] if client.want_write() else [], [], timeout)
        rc = client.loop_read() if readable else mqtt.MQTT_ERR_SUCCESS
        if writable and rc == mqtt.MQTT_ERR_SUCCESS:
            rc = client.loop_write()
        if rc == mqtt.MQTT_ERR_SUCCESS:
            rc = client.loop_misc()
        if rc != mqtt.MQTT_ERR_SUCCESS:
            self.lost = self.lost or mqtt.error_string(rc)

    def close(self) -> None:
        try:
            self.client.disconnect()
        finally:
            if self.threaded:
                self.client.loop_stop()


class _MqttProducer(Producer):
    """Outcomes (``watch_outcomes``, QoS 1/2): the broker's PUBACK (QoS 1) or PUBCOMP (QoS 2) of each
    publish, reported from paho's ``on_publish`` as the producer reads it. While watched, the producer also
    reads what has arrived, without waiting, every ``READ_EVERY`` sends and after any pause between sends,
    so that an acknowledgement is stamped when it came rather than when the window next filled."""

    READ_EVERY = 16

    def __init__(self, conn: _Connection, topic: str, qos: int, window: int) -> None:
        self.conn, self.topic, self.qos, self.window = conn, topic, qos, window
        self.unfinished: collections.deque[Any] = collections.deque()  # oldest first
        self.report: Callable[[int, int, bool], None] | None = None
        self.sends: dict[int, int] = {}  # message id -> send number, until its acknowledgement
        self.count = 0
        self.last = 0

    def watch_outcomes(self, report: Callable[[int, int, bool], None]) -> bool:
        if not self.qos:
            return False
        self.report = report
        sends = self.sends

        def on_publish(_client: Any, _userdata: Any, mid: int, _reason: Any, _props: Any) -> None:
            index = sends.pop(mid, None)
            if index is not None:
                report(index, 1, True)

        self.conn.client.on_publish = on_publish
        return True

    def _finish(self, count: int, timeout: float) -> None:
        """Drive the network until the oldest ``count`` unfinished publishes are done."""
        unfinished, conn = self.unfinished, self.conn
        deadline = time.monotonic() + timeout  # bounds the wait only
        done = 0
        while done < count:
            while unfinished and unfinished[0].is_published():
                unfinished.popleft()
                done += 1
            if done >= count or not unfinished:
                return
            conn.check()
            if time.monotonic() > deadline:
                raise DriverError(f"mqtt publish {unfinished[0].mid} did not complete within {timeout:.0f} s")
            conn.pump(0.05)

    def send_keyed(self, payload: bytearray, key: bytes) -> None:
        self.send(payload, f"{self.topic}/{key.decode()}")

    def send(self, payload: bytearray, where: str = "") -> None:
        import paho.mqtt.client as mqtt

        self.conn.check()
        info = self.conn.client.publish(where or self.topic, bytes(payload), qos=self.qos)
        if info.rc != mqtt.MQTT_ERR_SUCCESS:
            raise DriverError(f"mqtt publish failed: {mqtt.error_string(info.rc)}")
        if self.report is not None:
            self.sends[info.mid] = self.count
            self.count += 1
            now = time.monotonic_ns()
            if not self.count % self.READ_EVERY or now - self.last > IDLE_NS:
                self.conn.pump(0)  # acknowledgements that came meanwhile: reported now
            self.last = now
        if self.qos or not info.is_published():  # QoS 0 written in publish: nothing left to wait for
            self.unfinished.append(info)
            if len(self.unfinished) >= self.window:
                self._finish(max(1, self.window // 2), 60.0)

    def flush(self, timeout: float) -> None:
        self._finish(len(self.unfinished), timeout)

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
