"""The contract between ``mqbench crosscheck`` and one broker's own benchmark tool.

A tool runs one ``CrossCase`` against a broker that is already running (the same instance the harness
measures, interleaved with it) and reports what it measured in a ``ToolResult``. Every tool runs twice per
repetition and variant of a row, in two ways: with the row's own settings (what the harness costs), and at
its best on that broker (``Tool.best``: the settings its maintainers publish for peak throughput, the row's
delivery guarantee kept), which says what the broker can carry here. Each run lasts a fixed time in steady
state: ``Tool.ramp`` seconds from its start are left out, then ``CrossCase.seconds`` are measured (plus
``Tool.window`` for a tool whose figures are moving averages over a window), so no figure depends on how
fast the machine is. Adapters live in ``harness/crosscheck/tools/<system>.py``, one per broker, and are
listed in ``tools/__init__.py``; a tool that checks only some variants of its system says so in
``applies`` (nats bench checks Core NATS and JetStream variants alike, in two modes); one that checks a
variant at its best only, having no run with the row's settings, says why in ``unmatched``.
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
    messages: int = 0  # the scenario's messages per producer when it counts them (the tools run by time)
    producers: int = 1
    consumers: int = 1
    guarantee: str = "at-most-once"  # the harness variant's guarantee; the tool is configured to match
    window: int = 1000  # messages in flight unconfirmed / pipeline depth, where the tool has that setting
    # The harness variant's driver options as parsed (e.g. rabbitmq's prefetch, mqtt's qos), for a tool that
    # has a matching setting; empty when the caller gives none.
    options: Mapping[str, Any] = field(default_factory=dict)
    seconds: float = 10.0  # of steady state the tool measures, after its ramp
    best: bool = False  # the tool at its best on this broker (Tool.best made this case), not the row's settings

    def key(self) -> tuple[Any, ...]:
        """What makes two cases the same run of a tool (options in a stable order)."""
        return (self.system, self.size, self.producers, self.consumers, self.guarantee, self.window,
                tuple(sorted((k, repr(v)) for k, v in self.options.items())), self.seconds, self.best)


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
    settings: str = ""  # the settings it ran with, in words ("linger.ms=10 batch.size=131072, 1 producer")
    steady_s: float = math.nan  # seconds of steady state its figures cover (ramp left out)


class Tool(ABC):
    """A broker's own benchmark tool. One instance runs every repetition of a crosscheck; it may remember
    what it learnt (a tool that can only be given a message count sizes its next run from the rate it
    measured), nothing else."""

    system: ClassVar[str]  # the harness system it checks, e.g. "redis"
    name: ClassVar[str]  # e.g. "redis-benchmark"
    ramp: ClassVar[float] = 3.0  # seconds from the start left out of its figures (connections, JIT warm-up)
    window: ClassVar[float] = 0.0  # seconds its figures average over (moving averages), beyond ``seconds``

    def applies(self, case: CrossCase) -> bool:
        """Whether this tool checks the variant ``case`` was made from (e.g. Core NATS's tool, not a JetStream
        variant's)."""
        return True

    def unmatched(self, case: CrossCase) -> str | None:
        """None when the tool runs with the row's settings of ``case``; else one sentence why it has no such run
        (the row is then measured against the tool at its best only, and the report shows the sentence)."""
        return None

    def best(self, case: CrossCase) -> CrossCase | None:
        """The case this tool runs at its best on the broker of ``case`` (``best=True``, the row's delivery
        guarantee kept, everything else the tool's peak-throughput settings); None when it has no such run
        (a reference loop that is not the broker's own tool). A best case equal to the row's (``key``) is
        run once and serves as both."""
        return None

    @abstractmethod
    def missing(self) -> str | None:
        """None when the tool can run here, else one sentence: what is missing and what to do."""

    @abstractmethod
    def run(self, case: CrossCase, endpoint: BrokerEndpoint, workdir: Path, broker_pids: list[int]) -> ToolResult:
        """Run one repetition of ``case`` against ``endpoint`` for ``ramp + window + case.seconds`` (about);
        stop every process it started, also on error.

        ``broker_pids`` are the broker's processes (empty for an external broker), for the CPU figures.
        Raises ToolMissing or ToolFailed with one sentence.
        """
