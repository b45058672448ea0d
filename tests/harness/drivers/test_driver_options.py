"""Drivers' declared variant options, the guarantees they state, and connecting (no broker needed)."""

from __future__ import annotations

import gc
import socket
from dataclasses import dataclass
from typing import Any

import pytest

from harness.drivers import broker, driver_class
from harness.drivers.base import BrokerEndpoint, DriverError, Guarantee, Pattern, Role, Topology
from harness.drivers.kafka import COMPRESSIONS, KafkaOptions, consumer_partitions
from harness.drivers.options import NoOptions, option, parse_options
from tests.harness.drivers.conformance import os_threads

BROKER = {
    "rabbitmq": "amqp://guest:guest@127.0.0.1:5672/%2F",
    "kafka": "kafka://127.0.0.1:9092",
    "tansu": "kafka://127.0.0.1:9092",
    "rocketmq": "rocketmq://127.0.0.1:9876",
    "nats": "nats://127.0.0.1:4222",
    "mqtt": "mqtt://127.0.0.1:1883",
    "redis": "redis://127.0.0.1:6379/0",
    "activemq": "stomp://127.0.0.1:61613",
}


def _driver(system: str, implementation: str = "", **options: Any) -> Any:
    endpoint = BrokerEndpoint(system, BROKER[system], "external", implementation=implementation)
    return driver_class(system)(options, endpoint)


def test_options_are_coerced_and_checked() -> None:
    opts = parse_options("kafka", KafkaOptions, {"acks": "all", "partitions": "3", "linger_ms": 5})
    assert (opts.acks, opts.partitions, opts.linger_ms) == ("all", 3, 5)
    with pytest.raises(DriverError, match="has no option 'acks_mode'"):
        parse_options("kafka", KafkaOptions, {"acks_mode": 1})
    with pytest.raises(DriverError, match="'partitions' must be a int"):
        parse_options("kafka", KafkaOptions, {"partitions": "many"})
    with pytest.raises(DriverError, match="acks"):
        parse_options("kafka", KafkaOptions, {"acks": "2"})


@pytest.mark.parametrize(
    ("system", "implementation", "options", "expected"),
    [
        ("rabbitmq", "", {}, Guarantee.AT_MOST_ONCE),
        ("rabbitmq", "", {"confirms": True}, Guarantee.AT_MOST_ONCE),
        ("rabbitmq", "", {"confirms": True, "manual_ack": "true"}, Guarantee.AT_LEAST_ONCE),
        ("rabbitmq", "", {"confirms": True, "manual_ack": True, "persistent": True}, Guarantee.DURABLE),
        ("kafka", "", {"acks": 0}, Guarantee.AT_MOST_ONCE),
        ("kafka", "", {"acks": 1}, Guarantee.AT_LEAST_ONCE),
        ("kafka", "", {"acks": "all"}, Guarantee.DURABLE),
        ("tansu", "", {"acks": "all"}, Guarantee.AT_LEAST_ONCE),  # memory storage
        ("rocketmq", "", {}, Guarantee.AT_LEAST_ONCE),  # synchronous send
        ("rocketmq", "", {"send": "oneway"}, Guarantee.AT_MOST_ONCE),
        ("rocketmq", "", {"send": "async"}, Guarantee.AT_LEAST_ONCE),  # each send's answer, later
        ("nats", "", {}, Guarantee.AT_MOST_ONCE),
        ("nats", "", {"jetstream": True}, Guarantee.DURABLE),  # file storage
        ("nats", "", {"jetstream": True, "storage": "memory"}, Guarantee.AT_LEAST_ONCE),
        ("mqtt", "", {"qos": 0}, Guarantee.AT_MOST_ONCE),
        ("mqtt", "", {"qos": 2}, Guarantee.AT_LEAST_ONCE),
        ("redis", "", {}, Guarantee.AT_LEAST_ONCE),
        ("redis", "", {"mode": "pubsub"}, Guarantee.AT_MOST_ONCE),
        ("redis", "", {"aof": True}, Guarantee.DURABLE),
        ("activemq", "", {"persistent": True}, Guarantee.AT_MOST_ONCE),
        ("activemq", "", {"client_ack": True, "receipts": True}, Guarantee.AT_LEAST_ONCE),
        ("activemq", "", {"client_ack": True, "receipts": True, "persistent": True}, Guarantee.DURABLE),
    ],
)
def test_guarantee_follows_the_variant(
    system: str, implementation: str, options: dict[str, Any], expected: Guarantee
) -> None:
    driver = _driver(system, implementation, **options)
    assert driver.guarantee() is expected
    assert set(options) <= driver.option_names()


@pytest.mark.parametrize(("send", "expected"), [("sync", Guarantee.AT_LEAST_ONCE), ("async", Guarantee.AT_LEAST_ONCE),
                                              ("oneway", Guarantee.AT_MOST_ONCE)])
def test_rocketmq_java_client_sends_as_the_python_driver(send: str, expected: Guarantee) -> None:
    """The Java client takes the same ``send`` modes, with the same guarantee and parity."""
    endpoint = BrokerEndpoint("rocketmq", BROKER["rocketmq"], "external")
    java = driver_class("rocketmq", "java")({"client": "java", "send": send}, endpoint)
    python = _driver("rocketmq", send=send)
    assert java.guarantee() is python.guarantee() is expected
    assert java.parity() == python.parity()
    with pytest.raises(DriverError, match="'send' must be sync, async or oneway"):
        driver_class("rocketmq", "java")({"client": "java", "send": "batch"}, endpoint)


def test_tansu_is_its_own_system_never_labelled_kafka() -> None:
    assert _driver("tansu").label() == "tansu (kafka-python)"
    assert _driver("kafka").label() == "kafka (kafka-python)"


def test_every_row_names_its_client() -> None:
    """A row is a system driven by a client: the label names both (mqcore is measured through itself)."""
    from harness.drivers import SYSTEMS, driver_class

    for system in SYSTEMS:
        cls = driver_class(system)
        if system in ("mqcore", "jeromq"):
            assert cls.client == ""
        else:
            assert cls.client, system


def test_report_label_names_the_confluent_client() -> None:
    assert _driver("kafka", client="confluent-kafka").label() == "kafka (confluent-kafka)"
    assert _driver("kafka", "tansu", client="confluent-kafka").label() == "kafka (tansu, confluent-kafka)"
    with pytest.raises(DriverError, match="'client' must be one of kafka-python, confluent-kafka"):
        _driver("kafka", client="librdkafka")


def test_throughput_options_have_the_clients_recommended_defaults() -> None:
    assert _driver("kafka").opts.linger_ms == 5  # the Java client's default since Kafka 4.0
    assert _driver("rabbitmq").opts.confirm_window == 1000  # PerfTest's -c
    assert _driver("mqtt").opts.inflight == 1000
    assert _driver("redis").opts.pipeline == 100
    assert _driver("activemq").opts.ack_every <= _driver("activemq").opts.prefetch // 2


@pytest.mark.parametrize("system", ["rabbitmq", "activemq"])
def test_acking_less_often_than_the_prefetch_allows_is_refused(system: str) -> None:
    with pytest.raises(DriverError, match=r"ack_every \(200\) must not exceed prefetch \(100\)"):
        ack = "manual_ack" if system == "rabbitmq" else "client_ack"
        driver_class(system)({"prefetch": 100, "ack_every": 200, ack: True}, BrokerEndpoint(system, BROKER[system], "external"))


class _FakeWire:
    def __init__(self) -> None:
        self.log: list[str] = []

    def pack(self, *args: Any) -> bytes:
        return b"CMD" + b"$%d\r\n%b\r\n" % (len(args[-1]), args[-1])

    def write(self, data: bytes) -> None:
        self.log.append("write " + data.replace(b"CMD$1\r\n", b"").replace(b"\r\n", b"").hex())

    def read(self) -> None:
        self.log.append("read")


ONE_BY_ONE = ["write 00", "read", "write 01", "read", "write 02", "read", "write 03", "read", "write 04", "read"]


@pytest.mark.parametrize(
    ("pipeline", "gap", "synchronous", "log"),
    [
        # Flat out: batches of half the pipeline; replies read so that at most 4 commands are unanswered.
        (4, 0, False, ["write 0001", "write 0203", "read", "write 04", "read", "read", "read", "read"]),
        (1, 0, True, ONE_BY_ONE),
        (4, broker.IDLE_NS + 1, False, ONE_BY_ONE),  # paced: each send written and answered at once
    ],
)
def test_redis_producer_reads_replies_behind_its_writes(
    monkeypatch: pytest.MonkeyPatch, pipeline: int, gap: int, synchronous: bool, log: list[str]
) -> None:
    from harness.drivers.redis_streams import _RedisProducer

    clock = iter(range(10**12, 10**13, gap or 1))
    monkeypatch.setattr(broker.time, "monotonic_ns", lambda: next(clock) if gap else 10**12)
    wire = _FakeWire()
    producer = _RedisProducer(wire, ("XADD", "k", "*", b"d"), pipeline, [])  # type: ignore[arg-type]
    producer.batch.done()
    for i in range(5):
        producer.send(bytearray([i]))
    producer.flush(1.0)
    # The runner stamps acks per message only when send returns after the server's reply.
    assert producer.acks_synchronously is synchronous
    assert wire.log == log


def test_redis_producer_leaves_unanswered_commands_to_its_successor() -> None:
    from harness.drivers.redis_streams import _RedisProducer

    class _Lost(_FakeWire):
        def read(self) -> None:
            raise DriverError("redis refused a command: connection lost")

    carry: list[bytes] = []
    producer = _RedisProducer(_Lost(), ("XADD", "k", "*", b"d"), 4, carry)  # type: ignore[arg-type]
    with pytest.raises(DriverError, match="connection lost"):
        producer.send(bytearray([7]))  # the first send comes after a pause: written, then its reply read
    assert carry and carry[-1].endswith(b"\x07\r\n")
    wire = _FakeWire()
    _RedisProducer(wire, ("XADD", "k", "*", b"d"), 4, carry)  # type: ignore[arg-type]
    assert wire.log == ["write 07", "read"] and carry == []


def test_send_batch_ends_on_size_or_after_a_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [10**12]
    monkeypatch.setattr(broker.time, "monotonic_ns", lambda: now[0])
    batch = broker.SendBatch(3)
    batch.done()
    ends = []
    # (pause before the send, time the send itself takes): flat out, one slow send, then one paced send
    for pause, busy in [(1000, 0), (1000, 0), (1000, 0), (1000, 0), (0, broker.IDLE_NS * 5), (broker.IDLE_NS + 1, 0)]:
        now[0] += pause
        batch.begin()
        now[0] += busy
        ends.append(batch.due())
        if ends[-1]:
            batch.done()
    assert ends == [False, False, True, False, False, True]
    assert batch.paced


@pytest.mark.parametrize("codec", [c for c in COMPRESSIONS if c != "none"])
def test_every_kafka_compression_the_driver_offers_can_run_here(codec: str) -> None:
    """kafka-python needs a package per codec (python-snappy, lz4, zstandard): the install provides each one
    the driver offers, so a compression variant does not fail at its producer's start."""
    import kafka.codec

    assert getattr(kafka.codec, f"has_{codec}")(), f"kafka-python has no {codec} codec here: install its package"
    encode, decode = getattr(kafka.codec, f"{codec}_encode"), getattr(kafka.codec, f"{codec}_decode")
    body = b"mqbench " * 512
    assert decode(encode(body)) == body


def test_acks_0_is_refused_on_tansu() -> None:
    with pytest.raises(DriverError, match="acks=0 does not work on Tansu"):
        _driver("tansu", acks="0")


def test_nats_options_beyond_jetstream_need_jetstream() -> None:
    with pytest.raises(DriverError, match="has no option 'durable'"):
        _driver("nats", durable=True)
    with pytest.raises(DriverError, match="'window' applies to JetStream only; add jetstream: true"):
        _driver("nats", window=10)
    assert _driver("nats", jetstream="true", window="10").opts.window == 10


def test_every_broker_driver_needs_a_broker() -> None:
    for system in BROKER:
        with pytest.raises(DriverError, match="needs a broker"):
            driver_class(system)({}, None)


@pytest.mark.parametrize(
    ("pattern", "consumers", "topics", "partitions", "expected"),
    [
        (Pattern.PUBSUB, 2, 1, 3, {0: [0, 1, 2], 1: [0, 1, 2]}),
        (Pattern.QUEUE, 2, 1, 4, {0: [0, 2], 1: [1, 3]}),
        (Pattern.QUEUE, 3, 1, 2, {0: [0], 1: [1], 2: []}),
        (Pattern.QUEUE, 4, 2, 2, {0: [0], 1: [0], 2: [1], 3: [1]}),  # consumer i is on topic i % topics
    ],
)
def test_kafka_partition_assignment(
    pattern: Pattern, consumers: int, topics: int, partitions: int, expected: dict[int, list[int]]
) -> None:
    topology = Topology(pattern, topics, 1, consumers, 100, "t")
    got = {c: consumer_partitions(topology, Role(c, c % topics), partitions) for c in range(consumers)}
    assert got == expected


# -- declared options ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Declared:
    size: int = option(10, minimum=1)
    mode: str = option("a", choices=("a", "b"), note="why not c")
    limit: int | None = option(None, minimum=0)
    strict: bool = option(False, exact=True)


def test_declared_limits_are_checked_with_one_sentence() -> None:
    assert parse_options("x", _Declared, {"size": "3", "limit": 0}) == _Declared(size=3, limit=0)
    assert parse_options("x", _Declared, {"limit": None}).limit is None
    with pytest.raises(DriverError, match=r"^x option 'size' must be at least 1, not 0$"):
        parse_options("x", _Declared, {"size": 0})
    with pytest.raises(DriverError, match=r"must be one of a, b \(why not c\), not 'c'"):
        parse_options("x", _Declared, {"mode": "c"})
    with pytest.raises(DriverError, match="'strict' must be a bool, not 'true'"):
        parse_options("x", _Declared, {"strict": "true"})  # exact: taken as YAML typed it


def test_extra_names_a_subclass_declares_are_accepted_but_not_parsed() -> None:
    assert parse_options("x", _Declared, {"size": 2, "extra": 1}, allowed={"extra"}) == _Declared(size=2)
    with pytest.raises(DriverError, match="x has no options; got extra"):
        parse_options("x", NoOptions, {"extra": 1})


def test_zmq_options_keep_their_rules() -> None:
    cls = driver_class("zmq")
    assert cls.option_names() == {"transport", "sndhwm", "rcvhwm", "io_threads", "curve"}
    with pytest.raises(DriverError, match="'transport' must be one of tcp, ipc .*inproc"):
        cls({"transport": "inproc"})
    with pytest.raises(DriverError, match="'sndhwm' must be at least 0"):
        cls({"sndhwm": -1})
    with pytest.raises(DriverError, match="'rcvhwm' must be a int"):
        cls({"rcvhwm": "100"})


@pytest.mark.parametrize(("system", "pattern", "binders"), [("zmq", Pattern.QUEUE, 12), ("mqcore", Pattern.REQREP, 5)])
def test_brokerless_binders_get_distinct_free_ports_in_one_call(system: str, pattern: Pattern, binders: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import harness.brokers

    calls: list[int] = []
    real = harness.brokers.free_ports

    def counting(count: int) -> list[int]:
        calls.append(count)
        return real(count)

    monkeypatch.setattr(harness.brokers, "free_ports", counting)
    producers, consumers = (binders, 1) if pattern is Pattern.QUEUE else (1, binders)
    plan = driver_class(system)({}).plan(Topology(pattern, 1, producers, consumers, 100, "ports"))
    ports = [int(endpoint.rsplit(":", 1)[1]) for endpoint in plan["endpoints"]]
    assert calls == [binders] and len(set(ports)) == binders
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        ephemeral = int(f.read().split()[0])
    assert all(port < ephemeral for port in ports) or ephemeral <= 11000  # below where clients' ports come from


def test_mqcore_alone_takes_busy_poll_sets_it_on_its_sockets_and_records_it() -> None:
    assert "busy_poll" not in driver_class("zmq").option_names()
    with pytest.raises(DriverError, match="unknown|busy_poll"):
        driver_class("zmq")({"busy_poll": 0})
    cls = driver_class("mqcore")
    with pytest.raises(DriverError, match="'busy_poll' must be at least 0"):
        cls({"busy_poll": -1})
    for options, expected in (({}, 100), ({"busy_poll": 0}, 0), ({"busy_poll": 250}, 250)):
        driver = cls(options)
        assert driver.versions()["BUSY_POLL"] == f"{expected} us"
        sock = driver._socket(3)  # REQ
        try:
            assert sock.busy_poll == expected
        finally:
            sock.close(0)
        driver._context().term()


# -- connecting ------------------------------------------------------------------------------------


def test_connect_retries_until_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(broker, "RETRY_PAUSE", 0.01)
    tries: list[int] = []

    def flaky() -> str:
        tries.append(1)
        if len(tries) < 3:
            raise ConnectionRefusedError("not yet")
        return "client"

    assert broker.connect("x", "amqp://u:secret@h:1/", flaky, retry_for=5.0) == "client"
    assert len(tries) == 3


def test_connect_failure_names_the_address_not_the_password() -> None:
    def refused() -> None:
        raise ConnectionRefusedError("refused")

    with pytest.raises(DriverError) as err:
        broker.connect("rabbitmq", "amqp://u:secret@h:1/%2F", refused, what="a producer ")
    assert str(err.value).startswith("cannot connect a producer to rabbitmq at h:1 (")
    assert "secret" not in str(err.value)
    with pytest.raises(DriverError, match="^explained$"):
        broker.connect("x", "x://h:1", lambda: (_ for _ in ()).throw(DriverError("explained")))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # bound, never listening: connections are refused


@pytest.mark.parametrize(("system", "module"), [("redis", "redis"), ("mqtt", "paho"), ("activemq", "stomp")])
def test_an_unreachable_broker_is_one_sentence_and_teardown_stays_quiet(system: str, module: str) -> None:
    pytest.importorskip(module)
    port = _closed_port()
    scheme = BROKER[system].split("://")[0]
    endpoint = BrokerEndpoint(system, f"{scheme}://127.0.0.1:{port}", "external")
    driver = driver_class(system)({}, endpoint)
    topo = Topology(Pattern.QUEUE, 1, 1, 1, 100, "t")
    with pytest.raises(DriverError, match=f"cannot connect to {system} at 127.0.0.1:{port}"):
        driver.create_producer(driver.plan(topo), Role(0, 0))
    driver.teardown({"topology": {"pattern": "queue", "topics": 1, "producers": 1, "consumers": 1,
                                  "message_size": 100, "run_tag": "t"}})


def _librdkafka_threads() -> set[int]:
    return {tid for tid, name in os_threads().items() if name.startswith("rdk:")}


def test_a_confluent_producer_that_cannot_connect_destroys_its_handle(monkeypatch: pytest.MonkeyPatch) -> None:
    """The refused producer's librdkafka handle ends with the error; it is not left retrying the connection
    (reference cycle through its callbacks) until a garbage collection happens to find it."""
    pytest.importorskip("confluent_kafka")
    from harness.drivers import kafka_confluent

    monkeypatch.setattr(kafka_confluent, "TIMEOUT", 1.0)
    endpoint = BrokerEndpoint("kafka", f"kafka://127.0.0.1:{_closed_port()}", "external")
    driver = driver_class("kafka")({"client": "confluent-kafka"}, endpoint)
    before = _librdkafka_threads()
    gc.disable()  # a collection must not do the producer's work for it
    try:
        with pytest.raises(DriverError, match="cannot connect a producer to kafka at"):
            kafka_confluent.ConfluentProducer(driver, "t", 1, 0)  # type: ignore[arg-type]
        assert not _librdkafka_threads() - before
    finally:
        gc.enable()


def test_every_broker_row_states_what_its_sends_wait_for() -> None:
    """Each system with a broker, through each of its clients, says what a send waits for and when the
    messages reach disk, for its default variant; none passes for a library (the Java RocketMQ client once
    read "acks: none (brokerless)")."""
    from harness.drivers import CLIENTS, SYSTEMS

    for system in SYSTEMS:
        for client in [None, *CLIENTS.get(system, {})]:
            cls = driver_class(system, client)
            if not cls.needs_broker:
                assert cls({}).parity()["acks"] == "none (brokerless)", system
                continue
            endpoint = BrokerEndpoint(system, BROKER[system], "external")
            parity = cls({"client": client} if client else {}, endpoint).parity()
            for field in ("acks", "fsync"):
                assert "brokerless" not in parity[field] and "not stated" not in parity[field], (system, client, parity)
