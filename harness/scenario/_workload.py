"""The workload fields of a scenario, as OpenMessaging Benchmark and RabbitMQ PerfTest users run them: a
backlog built and drained, rate profiles, keys, payloads from files or of a given compressibility, topics
per sweep. Each is checked here, with one-line errors naming the field; a scenario without them is as
before (``harness.scenario._parse`` calls in here only for the fields that are present).

::

    backlog: {size: 50MB, drain_rate: 0.5}   # or {messages: 20000, ...}: consumers hold back until the
                               # producers have built that backlog, then drain it while the producers go on
                               # at drain_rate x the rate (OMB's consumerBacklogSizeGB / backlogDrainRatio)
    rate_profile: [[1000, 4s], [8000, 1s]]   # total msgs/s for a time, in turn, repeated to the end
                               # (PerfTest's --variable-rate): steps, or a burst of 1 s every 5 s
    keys: round-robin          # none | round-robin | random: a key per message where the system has keys
    key_count: 64              # distinct keys
    payload: {file: body.json} # bodies from a file (its size when message_sizes is left out), or
    payload: {compressible: 0.7}   # random bodies of which this fraction compresses away
    topics: [1, 10, 100]       # a sweep: one scenario per topic count, named <name>-<n>t, with
    producers_per_topic: 1     # ... producers and consumers per topic
    consumers_per_topic: 1
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from harness.scenario._parse import _Checker

KEY_DISTRIBUTIONS = ("none", "round-robin", "random")
WORKLOAD_FIELDS = ("backlog", "rate_profile", "keys", "key_count", "producers_per_topic", "consumers_per_topic")
#: Payload kinds: the existing two, and the two a mapping gives.
PAYLOADS = ("random", "fixed", "file", "compressible")
#: Pools of distinct bodies a producer sends in turn (compressible payloads): the same body over and over
#: would compress across messages to nothing, whatever its own compressibility (OMB's
#: randomizedPayloadPoolSize answers the same).
PAYLOAD_POOL = 64


@dataclass(frozen=True)
class Backlog:
    """Consumers hold back until the producers have built ``messages`` (per consumer's share: the total
    over all subscribers, as OMB counts ``subscriptions x sent - received``) or ``size_bytes``; then they
    are released and the producers go on at ``drain_rate`` x the case's rate."""

    messages: int = 0
    size_bytes: int = 0
    drain_rate: float = 1.0

    def target(self, message_size: int) -> int:
        """The backlog to build, in messages of ``message_size`` bytes."""
        if self.messages:
            return self.messages
        return max(1, -(-self.size_bytes // max(1, message_size)))

    def as_dict(self) -> dict[str, Any]:
        return {"messages": self.messages, "size_bytes": self.size_bytes, "drain_rate": self.drain_rate}


@dataclass(frozen=True)
class Payload:
    """What a message body holds besides the header: ``kind`` (``PAYLOADS``), the file of ``file`` bodies
    and the fraction of a ``compressible`` body that compresses away."""

    kind: str = "random"
    file: str = ""
    compressible: float = 0.0


def parse_backlog(c: _Checker, raw: Any) -> Backlog:
    fld = "backlog"
    if not isinstance(raw, dict):
        raise c.fail(fld, f"must be a mapping like {{size: 50MB, drain_rate: 0.5}}, got {raw!r}")
    for key in raw:
        if key not in ("size", "messages", "drain_rate"):
            raise c.fail(f"{fld}.{key}", "is not a backlog field; allowed: size, messages, drain_rate")
    if ("size" in raw) == ("messages" in raw):
        raise c.fail(fld, "give either 'size' (bytes, e.g. 50MB) or 'messages', not both and not neither")
    messages = c.integer(f"{fld}.messages", raw["messages"], 1) if "messages" in raw else 0
    size = c.bytes_(f"{fld}.size", raw["size"]) if "size" in raw else 0
    drain = raw.get("drain_rate", 1.0)
    if isinstance(drain, bool) or not isinstance(drain, int | float) or not 0 <= drain <= 10:
        raise c.fail(f"{fld}.drain_rate", f"must be a fraction of the rate between 0 and 10, got {drain!r}")
    return Backlog(messages=messages, size_bytes=size, drain_rate=float(drain))


def parse_rate_profile(c: _Checker, raw: Any) -> tuple[tuple[float, float], ...]:
    fld = "rate_profile"
    if not isinstance(raw, list) or not raw:
        raise c.fail(fld, "must be a list of [msgs/s, duration] steps, e.g. [[1000, 4s], [8000, 1s]]")
    out = []
    for i, step in enumerate(raw):
        if not isinstance(step, list) or len(step) != 2:
            raise c.fail(f"{fld}[{i}]", f"must be [msgs/s, duration], got {step!r}")
        rate, seconds = step
        if isinstance(rate, bool) or not isinstance(rate, int | float) or rate < 0:
            raise c.fail(f"{fld}[{i}]", f"the rate must be messages per second >= 0, got {rate!r}")
        out.append((float(rate), c.seconds(f"{fld}[{i}]", seconds)))
    if not any(rate for rate, _ in out):
        raise c.fail(fld, "at least one step must send (a rate above 0)")
    return tuple(out)


def profile_mean(profile: tuple[tuple[float, float], ...]) -> float:
    """The offered rate of one round of a profile: messages over seconds."""
    return sum(r * s for r, s in profile) / sum(s for _, s in profile)


def parse_keys(c: _Checker, data: Mapping[str, Any]) -> tuple[str, int]:
    keys = data.get("keys", "none")
    if keys not in KEY_DISTRIBUTIONS:
        raise c.fail("keys", f"must be one of {', '.join(KEY_DISTRIBUTIONS)}, got {keys!r}")
    count = c.integer("key_count", data.get("key_count", 64), 1)
    if "key_count" in data and keys == "none":
        raise c.fail("key_count", "only applies with keys: round-robin or random")
    return keys, count


def parse_payload(c: _Checker, raw: Any, source: str) -> Payload:
    fld = "payload"
    if raw in ("random", "fixed"):
        return Payload(kind=raw)
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in ("file", "compressible"):
        raise c.fail(fld, f"must be 'random', 'fixed', {{file: PATH}} or {{compressible: 0.7}}, got {raw!r}")
    if "file" in raw:
        path = Path(str(raw["file"]))
        if not path.is_absolute() and source and not source.startswith("<"):
            path = Path(source).parent / path  # relative to the scenario file
        if not path.is_file():
            raise c.fail(f"{fld}.file", f"no such file: {path}")
        return Payload(kind="file", file=str(path.resolve()))
    ratio = raw["compressible"]
    if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
        raise c.fail(f"{fld}.compressible", f"must be the fraction of a body that compresses, 0 to 1, got {ratio!r}")
    return Payload(kind="compressible", compressible=float(ratio))


def parse_topics(c: _Checker, data: Mapping[str, Any]) -> tuple[tuple[int, ...], int | None, int | None]:
    """(topic counts, producers per topic, consumers per topic): one count unless ``topics`` is a list;
    the per-topic counts are None when not given."""
    raw = data.get("topics", 1)
    counts = tuple(c.integer("topics", t, 1) for t in raw) if isinstance(raw, list) else (c.integer("topics", raw, 1),)
    if not counts:
        raise c.fail("topics", "must list at least one topic count")
    per: list[int | None] = []
    for fld in ("producers_per_topic", "consumers_per_topic"):
        per.append(c.integer(fld, data[fld], 1) if fld in data else None)
        if fld in data and fld.split("_")[0] in data:
            raise c.fail(fld, f"give either '{fld}' or '{fld.split('_')[0]}', not both")
    if len(counts) > 1 and (per[0] is None or per[1] is None):
        raise c.fail("topics", "a list of topic counts needs producers_per_topic and consumers_per_topic")
    return counts, per[0], per[1]
