"""The scenario model: frozen dataclasses a parsed scenario is made of (see ``harness.scenario``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from harness.drivers.base import Pattern

# The header a producer writes into every message: producer id (u16) + sequence number (u32) + send stamp
# (i64); messages shorter than that carry only producer id and sequence number.
MIN_MESSAGE_SIZE = 6


class ScenarioError(ValueError):
    """A scenario that cannot be run; str() is one line naming file, field and what is allowed."""


@dataclass(frozen=True)
class Variant:
    """One configuration of one system: a name for reports and the options handed to the driver."""

    system: str
    name: str = "default"
    options: Mapping[str, Any] = field(default_factory=dict)


FAULT_ACTIONS = (
    "kill-broker",
    "restart-broker",
    "kill-consumer",
    "restart-consumer",
    "kill-producer",
    "restart-producer",
    "restart-peer",
)


@dataclass(frozen=True)
class Fault:
    """One fault the runner injects: ``action`` at ``at`` seconds after the common start.

    Kills are SIGKILL. ``restart-*`` kills, waits ``down`` seconds, and starts the same broker (same port,
    same data directory) or the same worker (same role and endpoint; it continues the records of the one it
    replaces). ``target`` is the producer/consumer index for worker actions.
    """

    at: float
    action: str
    target: int = 0
    down: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {"at": self.at, "action": self.action, "target": self.target, "down": self.down}


@dataclass(frozen=True)
class Scenario:
    name: str
    pattern: Pattern
    message_sizes: tuple[int, ...]
    messages: int | None = None
    duration: float | None = None
    rates: tuple[float | None, ...] = (None,)  # None = max
    systems: tuple[str, ...] | None = None
    producers: int = 1
    consumers: int = 1
    topics: int = 1
    warmup: int = 1000
    repetitions: int = 1
    payload: str = "random"
    timeout: float = 30.0
    description: str = ""
    variants: Mapping[str, tuple[Variant, ...]] = field(default_factory=dict)
    consumer_rate: float | None = None  # msgs/s each consumer handles at most; None = as fast as it can
    faults: tuple[Fault, ...] = ()
    source: str = ""
    # ``rate: search``: ``rates`` is empty; per system a bisection over short trials (each as long as
    # ``messages``/``duration``) within ``search_range`` finds the highest rate sustained with p99 <= bound
    p99_bound: float | None = None  # seconds
    search_range: tuple[float, float] = (1000.0, 1_000_000.0)

    @property
    def searches(self) -> bool:
        return self.p99_bound is not None and not self.rates

    def variants_for(self, system: str) -> tuple[Variant, ...]:
        return self.variants.get(system, (Variant(system),))

    def with_repetitions(self, n: int) -> Scenario:
        return replace(self, repetitions=n)

    def as_dict(self) -> dict[str, Any]:
        """A JSON-able description for the manifest."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "pattern":
                value = value.value
            elif f.name == "variants":
                value = {s: [{"name": v.name, **dict(v.options)} for v in vs] for s, vs in value.items()}
            elif f.name == "faults":
                value = [fault.as_dict() for fault in value]
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out
