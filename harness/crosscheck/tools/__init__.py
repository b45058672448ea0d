"""The brokers' own benchmark tools, one adapter module per broker, found by lazy import path.

A key is ``<system>`` or ``<system>/<what>`` when a system has more than one reference row (Redis unpipelined
and pipelined; RabbitMQ's PerfTest and a plain pika loop). Modules are imported only when their tool is
used, so a module that does not exist yet means "not built yet" in one sentence, never a crash.
"""

from __future__ import annotations

import importlib

from harness.crosscheck._tool import Tool

#: key -> "module:Class", in the order rows are reported.
TOOLS: dict[str, str] = {
    "rabbitmq": "harness.crosscheck.tools.rabbitmq:PerfTest",
    "rabbitmq/pika-loop": "harness.crosscheck.tools.rabbitmq:PlainPikaLoop",
    "kafka": "harness.crosscheck.tools.kafka:KafkaPerf",
    "rocketmq": "harness.crosscheck.tools.rocketmq:RocketBenchmark",
    "nats": "harness.crosscheck.tools.nats:NatsBench",
    "mqtt": "harness.crosscheck.tools.mqtt:MosquittoClients",
    "mqtt/paho": "harness.crosscheck.tools.mqtt:PahoBench",
    "redis/unpipelined": "harness.crosscheck.tools.redis:RedisBenchmarkUnpipelined",
    "redis": "harness.crosscheck.tools.redis:RedisBenchmark",
    "activemq": "harness.crosscheck.tools.activemq:ActiveMQPerf",
}


class ToolUnavailable(Exception):
    """The adapter for a tool cannot be loaded (module not written yet or broken); one sentence."""


def tool_keys(system: str) -> list[str]:
    """The keys of ``system``'s tools, in report order."""
    return [key for key in TOOLS if key.split("/", 1)[0] == system]


def load_tool(key: str) -> Tool:
    """An instance of the tool registered under ``key``; ToolUnavailable when its adapter is missing."""
    try:
        path = TOOLS[key]
    except KeyError:
        raise ToolUnavailable(f"no crosscheck tool is registered as {key!r}; known: {', '.join(TOOLS)}") from None
    module, _, cls = path.partition(":")
    try:
        found = getattr(importlib.import_module(module), cls)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module.startswith(exc.name):
            raise ToolUnavailable(f"the crosscheck adapter for {key} ({module}) is not built yet") from None
        raise ToolUnavailable(f"the crosscheck adapter for {key} cannot be imported: {exc}") from None
    except AttributeError:
        raise ToolUnavailable(f"the crosscheck adapter {module} has no class {cls}") from None
    tool: Tool = found()
    return tool


__all__ = ["TOOLS", "ToolUnavailable", "load_tool", "tool_keys"]
