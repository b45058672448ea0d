"""Broker drivers' variant options and the guarantees they state (no broker needed)."""

from __future__ import annotations

from typing import Any

import pytest

from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, DriverError, Guarantee, Pattern, Role, Topology
from harness.drivers.kafka import KafkaOptions, consumer_partitions
from harness.drivers.options import parse_options

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
        ("nats", "", {}, Guarantee.AT_MOST_ONCE),
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


def test_tansu_is_its_own_system_never_labelled_kafka() -> None:
    assert _driver("tansu").label() == "tansu"
    assert _driver("kafka").label() == "kafka"


def test_acks_0_is_refused_on_tansu() -> None:
    with pytest.raises(DriverError, match="acks=0 does not work on Tansu"):
        _driver("tansu", acks="0")


def test_nats_has_no_options() -> None:
    with pytest.raises(DriverError, match="no options"):
        _driver("nats", durable=True)


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
