"""Driver registry: system name -> driver class, imported lazily so a missing client library only
affects its own system."""

from __future__ import annotations

import importlib

from harness.drivers.base import Driver, DriverError

#: Every system mqbench knows, in report order. Value: "module:Class" below harness.drivers.
SYSTEMS: dict[str, str] = {
    "mqcore": "mqcore_driver:MqcoreDriver",
    "zmq": "zmq_driver:ZmqDriver",
    "rabbitmq": "rabbitmq:RabbitMQDriver",
    "kafka": "kafka:KafkaDriver",
    "tansu": "kafka:TansuDriver",
    "rocketmq": "rocketmq:RocketMQDriver",
    "nats": "nats:NatsDriver",
    "mqtt": "mqtt:MqttDriver",
    "redis": "redis_streams:RedisDriver",
    "activemq": "activemq:ActiveMQDriver",
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


def driver_class(system: str) -> type[Driver]:
    """The driver class for ``system``; DriverError names the known systems when it is not one."""
    try:
        target = SYSTEMS[system]
    except KeyError:
        raise DriverError(f"unknown system {system!r}; known systems: {', '.join(SYSTEMS)}") from None
    try:
        return load_class(target)
    except ModuleNotFoundError as exc:
        raise DriverError(f"the {system} driver cannot be loaded: {exc}") from None
