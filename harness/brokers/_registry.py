"""System name -> provisioner, for the systems that need a broker."""

from __future__ import annotations

import importlib

from harness.brokers._base import Provisioner

PROVISIONERS: dict[str, str] = {
    "rabbitmq": "rabbitmq:RabbitMQProvisioner",
    "kafka": "kafka:KafkaProvisioner",
    "tansu": "tansu:TansuProvisioner",
    "rocketmq": "rocketmq:RocketMQProvisioner",
    "nats": "nats:NatsProvisioner",
    "mqtt": "mqtt:MosquittoProvisioner",
    "redis": "redis:RedisProvisioner",
    "activemq": "activemq:ActiveMQProvisioner",
}


def provisioner(system: str) -> Provisioner | None:
    """The provisioner for ``system``, or None when the system needs no broker."""
    target = PROVISIONERS.get(system)
    if target is None:
        return None
    module_name, _, class_name = target.partition(":")
    module = importlib.import_module(f"harness.brokers.{module_name}")
    cls: type[Provisioner] = getattr(module, class_name)
    return cls()
