"""Apache RocketMQ through the remoting client on PyPI (``rocketmq``, whose wheel bundles librocketmq).

The URL names the NameServer (``rocketmq://HOST:PORT``); clients learn the broker's address from it. The
client cannot create topics, so ``plan`` does, with the remoting protocol's admin requests (below), each
topic with ``queues`` queues. pubsub: every consumer is its own consumer group, so each reads every
message; queue: a topic's consumers share one group, which splits the queues among them (a queue has one
reader at a time, so with ``queues: 1`` one consumer gets every message). Consumers start from the first
offset of a queue their group has no stored offset for (``CONSUME_FROM_FIRST_OFFSET``; the client's default,
the last offset, skips a backlog): a new group on a new topic starts at its first message, so nothing sent
after ``start`` is missed, and a group whose offsets a crashed broker had not yet flushed (it writes them to
disk every 5 s) reads the queue again from its start: duplicates, never a skipped backlog. Consumers are push
consumers with one consuming thread (the client calls back on its own thread; each message is acknowledged
when the callback returns). librocketmq forgets a broker that went away and looks for it again only every
30 s, so after a broker restart its consumer stays idle that long; each consumer therefore checks once a
second (in ``poll``) whether a broker it reads from was started again since, and then raises, so that the
runner makes it again (a fresh client finds the broker at once and reads on from the group's stored offset).

Producers send synchronously by default (``send: sync``: the broker stored it when ``send`` returns:
at-least-once) or one-way (``send: oneway``: at-most-once). Each producer has its own client instance
(librocketmq shares one per process and instance name), so a producer made again after a failed send never
shares state with the one being shut down.

Bodies travel as raw bytes: the Python wrapper reads bodies as C strings (cut at the first NUL byte), so
the producer sends the length in a message property and the consumer reads exactly that many bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import re
import socket
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from harness.drivers.base import (
    Consumer,
    DriverError,
    Guarantee,
    Pattern,
    Producer,
    Role,
    Topology,
    topology_from_plan,
)
from harness.drivers.broker import BrokerDriver

SEND_MODES = ("sync", "oneway")
LENGTH_PROPERTY = b"mqbench_len"
# Remoting request codes (RocketMQ's RequestCode).
UPDATE_AND_CREATE_TOPIC = 17
GET_BROKER_RUNTIME_INFO = 28
GET_BROKER_CLUSTER_INFO = 106
DELETE_TOPIC_IN_BROKER = 215
DELETE_TOPIC_IN_NAMESRV = 216
# The C API has no setter for where a consumer starts; the push consumer handle is the C++ object, whose
# (non-virtual) setter takes the enum ConsumeFromWhere, in which CONSUME_FROM_FIRST_OFFSET is 4.
SET_CONSUME_FROM_WHERE = "_ZN8rocketmq21DefaultMQPushConsumer19setConsumeFromWhereENS_16ConsumeFromWhereE"
CONSUME_FROM_FIRST_OFFSET = 4
RESTART_CHECK_EVERY = 1.0  # seconds between a consumer's checks that its brokers were not started again
# librocketmq can abort the process when a client is shut down while another client's shutdown in the same
# process still has its background tasks running. Two CI runs died so (SIGABRT in PushConsumer.shutdown):
# - 14 ms after the other consumer of its group left (which sets off a rebalance on the network thread);
# - 83 ms after the producer's shutdown, while a route update from the NameServer was running.
# So a process shuts its clients down one at a time, this far apart.
SHUTDOWN_GAP = 1.0
_shutdowns_lock = threading.Lock()
_last_shutdown = [-SHUTDOWN_GAP]  # time.monotonic() of this process's last client shutdown


@dataclass(frozen=True)
class RocketMQOptions:
    send: str = "sync"  # sync (at-least-once) or oneway (at-most-once)
    queues: int = 1

    def __post_init__(self) -> None:
        if self.send not in SEND_MODES:
            raise DriverError(f"rocketmq option 'send' must be sync or oneway, not {self.send!r}")
        if self.queues < 1:
            raise DriverError("rocketmq option 'queues' must be positive")


class RocketMQDriver(BrokerDriver):
    """Topics are made and removed over the remoting protocol (``plan``/``teardown`` below), not through an
    admin client."""

    name = "rocketmq"
    patterns = frozenset({Pattern.PUBSUB, Pattern.QUEUE})
    client_packages = ("rocketmq",)
    client = "rocketmq-python"
    client_module = "rocketmq.client"
    options_type = RocketMQOptions
    opts: RocketMQOptions

    def __init__(self, options: Mapping[str, Any], broker: Any = None) -> None:
        super().__init__(options, broker)
        self.namesrv = self.url.split("://", 1)[-1].rstrip("/")

    def guarantee(self) -> Guarantee:
        return Guarantee.AT_LEAST_ONCE if self.opts.send == "sync" else Guarantee.AT_MOST_ONCE

    # -- parent ----------------------------------------------------------------------------------

    def plan(self, topology: Topology) -> dict[str, Any]:
        plan = super().plan(topology)
        try:
            brokers = broker_addresses(self.namesrv, timeout=10.0)
            if not brokers:
                raise DriverError(f"no rocketmq broker is registered with the NameServer at {self.namesrv}")
            for topic in (topology.topic_name(i) for i in range(topology.topics)):
                for addr in brokers:
                    create_topic(addr, topic, self.opts.queues, timeout=10.0)
        except OSError as exc:
            raise DriverError(f"rocketmq could not create the run's topics via {self.namesrv}: {exc}") from None
        plan["brokers"] = brokers
        return plan

    def teardown(self, plan: Mapping[str, Any]) -> None:
        topology = topology_from_plan(plan)
        for topic in (topology.topic_name(i) for i in range(topology.topics)):
            with contextlib.suppress(OSError, ValueError):
                for addr in plan.get("brokers", []):
                    remoting_call(addr, DELETE_TOPIC_IN_BROKER, {"topic": topic}, timeout=5.0)
                remoting_call(self.namesrv, DELETE_TOPIC_IN_NAMESRV, {"topic": topic}, timeout=5.0)

    # -- workers ---------------------------------------------------------------------------------

    def create_producer(self, plan: Mapping[str, Any], role: Role) -> Producer:
        topology = topology_from_plan(plan)
        return _RocketMQProducer(self, topology.topic_name(role.topic), f"mqbench-{topology.run_tag}-p{role.index}")

    def create_consumer(self, plan: Mapping[str, Any], role: Role) -> Consumer:
        topology = topology_from_plan(plan)
        if topology.pattern is Pattern.QUEUE:
            group = f"mqbench-{topology.run_tag}-t{role.topic}"
        else:
            group = f"mqbench-{topology.run_tag}-c{role.index}"
        return _RocketMQConsumer(self, topology.topic_name(role.topic), group, f"{group}-{role.index}",
                                 list(plan.get("brokers", [])))


@contextlib.contextmanager
def _client_home() -> Iterator[None]:
    """librocketmq opens its log under $HOME/logs/rocketmq-cpp/ when a process's first client is created;
    point HOME at a temporary folder meanwhile so runs do not fill the user's home."""
    home = os.path.join(tempfile.gettempdir(), "mqbench-rocketmq-client")
    os.makedirs(home, exist_ok=True)
    saved = os.environ.get("HOME")
    os.environ["HOME"] = home
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = saved


class _RocketMQProducer(Producer):
    acks_synchronously = True  # overridden for one-way sends below

    def __init__(self, driver: RocketMQDriver, topic: str, group: str) -> None:
        from rocketmq.client import Producer as ClientProducer
        from rocketmq.ffi import dll

        self.dll, self.topic = dll, topic.encode()
        self.oneway = driver.opts.send == "oneway"
        self.acks_synchronously = not self.oneway
        try:
            with _client_home():
                self.producer = ClientProducer(group)
                dll.SetProducerInstanceName(self.producer._handle, f"{group}-{os.getpid()}-{id(self):x}".encode())
                self.producer.set_namesrv_addr(driver.namesrv)
                self.producer.start()
        except Exception as exc:
            raise DriverError(f"cannot start a rocketmq producer against {driver.namesrv}: {exc}") from None

    def send(self, payload: bytearray) -> None:
        from rocketmq.client import Message, SendStatus

        body = bytes(payload)
        msg = Message(self.topic)
        self.dll.SetByteMessageBody(msg._handle, body, len(body))
        self.dll.SetMessageProperty(msg._handle, LENGTH_PROPERTY, str(len(body)).encode())
        try:
            if self.oneway:
                self.producer.send_oneway(msg)
                return
            result = self.producer.send_sync(msg)
        except Exception as exc:
            raise DriverError(f"rocketmq failed to send a message: {exc}") from None
        if result.status != SendStatus.OK:
            raise DriverError(f"rocketmq stored a message with status {result.status.name}")

    def close(self) -> None:
        _shut_down(self.producer)


class _RocketMQConsumer(Consumer):
    def __init__(self, driver: RocketMQDriver, topic: str, group: str, instance: str, brokers: list[str]) -> None:
        from rocketmq.client import PushConsumer
        from rocketmq.ffi import dll

        # Our own view of the library so that the body getter returns the address, not a C string.
        self.raw = ctypes.CDLL(dll._name)
        self.raw.GetMessageBody.restype = ctypes.c_void_p
        self.raw.GetMessageBody.argtypes = [ctypes.c_void_p]
        self.raw.GetMessageProperty.restype = ctypes.c_char_p
        self.raw.GetMessageProperty.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        self.driver, self.topic, self.group = driver, topic, group
        self.booted: dict[str, str] = {}  # broker address -> its boot time when this consumer started
        self.next_check = 0.0
        try:
            with _client_home():
                self.consumer = PushConsumer(group)
            self.consumer.set_namesrv_addr(driver.namesrv)
            self.consumer.set_thread_count(1)  # on_message is never called from two threads at once
            # The client allows one consumer per group and instance name in a process (tests run several, and
            # the runner makes a consumer again while the previous one may still be shutting down).
            self.consumer.set_instance_name(f"{instance}-{os.getpid()}-{id(self):x}")
            consume_from_first_offset(self.raw, self.consumer._handle)
        except DriverError:
            raise
        except Exception as exc:
            raise DriverError(f"cannot create a rocketmq consumer against {driver.namesrv}: {exc}") from None
        self.started = False
        self.brokers = brokers

    def start(self, on_message: Callable[[bytes], None]) -> None:
        raw = self.raw

        def deliver(message: Any) -> None:
            handle = message._handle
            length = raw.GetMessageProperty(handle, LENGTH_PROPERTY)
            address = raw.GetMessageBody(handle)
            on_message(ctypes.string_at(address, int(length)) if length and address else b"")

        try:
            self.consumer.subscribe(self.topic, deliver)
            with _client_home():
                self.consumer.start()
        except Exception as exc:
            raise DriverError(f"cannot start a rocketmq consumer against {self.driver.namesrv}: {exc}") from None
        self.started = True
        for addr in self.brokers:
            with contextlib.suppress(OSError, ValueError):
                self.booted[addr] = broker_boot_time(addr, timeout=5.0)
        self.next_check = time.monotonic() + RESTART_CHECK_EVERY

    def poll(self, timeout: float) -> None:
        time.sleep(timeout)  # the client delivers on its own thread
        if time.monotonic() >= self.next_check:
            self.check_brokers()
            self.next_check = time.monotonic() + RESTART_CHECK_EVERY

    def check_brokers(self) -> None:
        """Raise DriverError when a broker answers with another boot time than at ``start`` (it was started
        again); a broker that does not answer is left to the client, which waits for it."""
        for addr, booted in self.booted.items():
            try:
                now = broker_boot_time(addr, timeout=1.0)
            except (OSError, ValueError):
                continue
            if now != booted:
                raise DriverError(f"the rocketmq broker at {addr} was started again; the consumer is made again")

    def close(self) -> None:
        if self.started:
            _shut_down(self.consumer)
            self.started = False


def _shut_down(client: Any) -> None:
    """``client.shutdown()``, at least ``SHUTDOWN_GAP`` after the process's previous client shutdown."""
    with _shutdowns_lock:
        pause = _last_shutdown[0] + SHUTDOWN_GAP - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        with contextlib.suppress(Exception):
            client.shutdown()
        _last_shutdown[0] = time.monotonic()


def consume_from_first_offset(lib: Any, handle: int) -> None:
    """Make the push consumer ``handle`` start from a queue's first offset when its group has none stored."""
    try:
        setter = getattr(lib, SET_CONSUME_FROM_WHERE)
    except AttributeError:
        raise DriverError(
            "this librocketmq has no DefaultMQPushConsumer::setConsumeFromWhere, so its consumers would skip a "
            "backlog after a broker crash; install the rocketmq wheel 0.4.4 (pip install rocketmq==0.4.4)"
        ) from None
    setter.restype = None
    setter.argtypes = [ctypes.c_void_p, ctypes.c_int]
    setter(handle, CONSUME_FROM_FIRST_OFFSET)


# -- the remoting protocol's admin requests (what mqadmin does), for topics and readiness ---------------
# A frame is: total length (4 bytes), header length with the serialisation type in its high byte (4 bytes,
# 0 = JSON), the JSON header, the body.


def remoting_call(
    addr: str, code: int, fields: Mapping[str, str] | None = None, timeout: float = 5.0
) -> tuple[dict[str, Any], bytes]:
    """Send one request to ``addr`` (``host:port``) and return the answer's header and body.
    Raises OSError when the connection fails or the answer says the request failed."""
    host, _, port = addr.rpartition(":")
    header = json.dumps(
        {"code": code, "language": "PYTHON", "version": 0, "opaque": 1, "flag": 0, "extFields": dict(fields or {})}
    ).encode()
    frame = struct.pack(">I", len(header)) + header
    with socket.create_connection((host, int(port)), timeout=timeout) as sock, sock.makefile("rb") as answer_in:
        sock.settimeout(timeout)
        sock.sendall(struct.pack(">I", len(frame)) + frame)
        (size,) = struct.unpack(">I", answer_in.read(4).rjust(4, b"\0"))
        data = answer_in.read(size)
    if len(data) < max(size, 4):
        raise OSError("the connection closed mid-answer")
    header_len = struct.unpack(">I", data[:4])[0] & 0xFFFFFF
    answer = json.loads(data[4 : 4 + header_len])
    if answer.get("code", -1) != 0:
        raise OSError(f"request {code} answered code {answer.get('code')}: {answer.get('remark', '')}")
    return answer, data[4 + header_len :]


def broker_addresses(namesrv: str, timeout: float) -> list[str]:
    """``host:port`` of every broker registered with the NameServer."""
    _, body = remoting_call(namesrv, GET_BROKER_CLUSTER_INFO, timeout=timeout)
    # The body is fastjson with integer map keys ({0:"127.0.0.1:10911"}), not JSON: take the addresses.
    return sorted(set(re.findall(r'\{\d+:"([^"]+:\d+)"', body.decode(errors="replace"))))


def broker_version(addr: str, timeout: float) -> str:
    """The broker's release, e.g. ``5.5.0`` (from its runtime info's ``V5_5_0``); "" if it does not say."""
    _, body = remoting_call(addr, GET_BROKER_RUNTIME_INFO, timeout=timeout)
    match = re.search(r'"brokerVersionDesc":"V(\d+)_(\d+)_(\d+)', body.decode(errors="replace"))
    return ".".join(match.groups()) if match else ""


def broker_boot_time(addr: str, timeout: float) -> str:
    """When the broker at ``addr`` started (its runtime info's ``bootTimestamp``, ms since the epoch)."""
    _, body = remoting_call(addr, GET_BROKER_RUNTIME_INFO, timeout=timeout)
    match = re.search(r'"bootTimestamp":"(\d+)"', body.decode(errors="replace"))
    if match is None:
        raise ValueError(f"the rocketmq broker at {addr} does not say when it started")
    return match.group(1)


def create_topic(addr: str, topic: str, queues: int, timeout: float) -> None:
    fields = {
        "topic": topic,
        "defaultTopic": "TBW102",
        "readQueueNums": str(queues),
        "writeQueueNums": str(queues),
        "perm": "6",  # read and write
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": "0",
        "order": "false",
    }
    remoting_call(addr, UPDATE_AND_CREATE_TOPIC, fields, timeout=timeout)
