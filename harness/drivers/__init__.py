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
    "nats": "nats:NatsDriver",
    "mqtt": "mqtt:MqttDriver",
    "redis": "redis_streams:RedisDriver",
    "activemq": "activemq:ActiveMQDriver",
}

#: Systems that need no broker: the embedded default of `make compare`.
BROKERLESS = ("mqcore", "zmq")


def driver_class(system: str) -> type[Driver]:
    """The driver class for ``system``; DriverError names the known systems when it is not one."""
    try:
        target = SYSTEMS[system]
    except KeyError:
        raise DriverError(f"unknown system {system!r}; known systems: {', '.join(SYSTEMS)}") from None
    module_name, _, class_name = target.partition(":")
    try:
        module = importlib.import_module(f"harness.drivers.{module_name}")
    except ModuleNotFoundError as exc:
        raise DriverError(f"the {system} driver cannot be loaded: {exc}") from None
    cls: type[Driver] = getattr(module, class_name)
    return cls
