"""Driver registry: system name -> driver class, imported lazily so a missing client library only
affects its own system."""

from __future__ import annotations

import importlib

from harness.drivers.base import Driver, DriverError

#: Every system mqbench knows, in report order. Value: "module:Class" below harness.drivers.
SYSTEMS: dict[str, str] = {
    "mqcore": "mqcore_driver:MqcoreDriver",
    "zmq": "zmq_driver:ZmqDriver",
    "jeromq": "java:JeromqDriver",
    "rabbitmq": "rabbitmq:RabbitMQDriver",
    "kafka": "kafka:KafkaDriver",
    "tansu": "kafka:TansuDriver",
    "rocketmq": "rocketmq:RocketMQDriver",
    "nats": "nats:NatsDriver",
    "mqtt": "mqtt:MqttDriver",
    "redis": "redis_streams:RedisDriver",
    "activemq": "activemq:ActiveMQDriver",
}

#: Further clients of a system, chosen by a variant's option ``client`` (without it: the Python client).
CLIENTS: dict[str, dict[str, str]] = {
    "rabbitmq": {"java": "java:RabbitMQJavaDriver"},
    # kafka-python and confluent-kafka share one driver (its option ``client`` picks the library)
    "kafka": {"java": "java:KafkaJavaDriver", "kafka-python": "kafka:KafkaDriver", "confluent-kafka": "kafka:KafkaDriver"},
    "tansu": {"java": "java:TansuJavaDriver", "kafka-python": "kafka:TansuDriver", "confluent-kafka": "kafka:TansuDriver"},
    "rocketmq": {"java": "java:RocketMQJavaDriver"},
}

#: Systems that need no broker: the embedded default of `make compare`.
BROKERLESS = ("mqcore", "zmq")


def register(system: str, target: str) -> None:
    """Add a system (e.g. a test-only driver): ``target`` is "package.module:Class"."""
    SYSTEMS[system] = target


def load_class(target: str) -> type[Driver]:
    """Import a driver class from "module:Class"; a bare module name is looked up below harness.drivers."""
    module_name, _, class_name = target.partition(":")
    if "." not in module_name:
        module_name = f"harness.drivers.{module_name}"
    module = importlib.import_module(module_name)
    cls: type[Driver] = getattr(module, class_name)
    return cls


def class_path(cls: type[Driver]) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def driver_class(system: str, client: str | None = None) -> type[Driver]:
    """The driver class for ``system`` driven by ``client`` (None: its default client); DriverError names
    the known systems or clients when it is not one."""
    try:
        target = SYSTEMS[system] if client is None else CLIENTS[system][client]
    except KeyError:
        if system not in SYSTEMS:
            raise DriverError(f"unknown system {system!r}; known systems: {', '.join(SYSTEMS)}") from None
        known = ", ".join(CLIENTS.get(system, {})) or "none besides its default"
        raise DriverError(f"{system} has no client {client!r}; its other clients: {known}") from None
    try:
        return load_class(target)
    except ModuleNotFoundError as exc:
        raise DriverError(f"the {system} driver cannot be loaded: {exc}") from None
