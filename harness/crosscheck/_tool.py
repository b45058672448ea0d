"""The contract between ``mqbench crosscheck`` and one broker's own benchmark tool.

A tool runs one ``CrossCase`` against a broker that is already running (the same instance the harness
measures, interleaved with it) and reports what it measured in a ``ToolResult``. Adapters live in
``harness/crosscheck/tools/<system>.py``, one per broker, and are listed in ``tools/__init__.py``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from harness.drivers.base import BrokerEndpoint
from harness.runner.proc import CpuUse


class ToolMissing(Exception):
    """The tool cannot run here; the message is one sentence naming what is missing and how to get it."""


class ToolFailed(Exception):
    """The tool ran but gave no figure; the message names the tool, its exit status and its last output."""


@dataclass(frozen=True)
class CrossCase:
    """One case, as both the harness and the tool run it."""

    system: str
    size: int  # payload bytes
    messages: int  # per repetition, per producer
    producers: int = 1
    consumers: int = 1
    guarantee: str = "at-most-once"  # the harness variant's guarantee; the tool is configured to match
    window: int = 1000  # messages in flight unconfirmed / pipeline depth, where the tool has that setting
    # The harness variant's driver options as parsed (e.g. rabbitmq's prefetch, mqtt's qos), for a tool that
    # has a matching setting; empty when the caller gives none.
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass
class ToolResult:
    """What one repetition of a tool measured. Rates are messages per second; NaN when not measured."""

    tool: str  # name and version, e.g. "redis-benchmark 7.0.15"
    command: list[str]  # the argv that ran (passwords redacted)
    receiver_rate: float = math.nan  # at the consuming side; NaN when the tool only sends
    sender_rate: float = math.nan
    latency_p50_us: float = math.nan
    latency_p99_us: float = math.nan
    latency_kind: str = ""  # "one-way", "round trip" or "" (as the tool defines it, said in ``note``)
    cpu: list[CpuUse] = field(default_factory=list)  # the tool's processes and the broker's, same interval
    note: str = ""  # what the tool's figure is, when it is not plainly receiver msg/s


class Tool(ABC):
    """A broker's own benchmark tool. Stateless: one instance may run many repetitions."""

    system: ClassVar[str]  # the harness system it checks, e.g. "redis"
    name: ClassVar[str]  # e.g. "redis-benchmark"

    @abstractmethod
    def missing(self) -> str | None:
        """None when the tool can run here, else one sentence: what is missing and what to do."""

    @abstractmethod
    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        """Run one repetition of ``case`` against ``endpoint``; stop every process it started, also on error.

        ``broker_pids`` are the broker's processes (empty for an external broker), for the CPU figures.
        Raises ToolMissing or ToolFailed with one sentence.
        """
