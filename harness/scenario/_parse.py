"""YAML -> :class:`Scenario`: every field checked, one-line errors naming the file and the field."""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from harness.drivers.base import Pattern
from harness.scenario._cluster import NODE_FAULT_KEYS, parse_cluster, parse_node_fault, variant_shape
from harness.scenario._model import (
    FAULT_ACTIONS,
    MIN_MESSAGE_SIZE,
    NODE_ACTIONS,
    Fault,
    Scenario,
    ScenarioError,
    Variant,
)
from harness.scenario._network import NETWORK_ACTIONS, NETWORK_FAULT_KEYS, parse_hosts, parse_network_fault
from harness.scenario._workload import (
    WORKLOAD_FIELDS,
    parse_backlog,
    parse_keys,
    parse_payload,
    parse_rate_profile,
    parse_topics,
    profile_mean,
)
from harness.units import MAX_RATE

if TYPE_CHECKING:
    from harness.drivers.base import ClusterShape
    from harness.scenario._model import Hosts

_FIELDS = (
    "name",
    "description",
    "pattern",
    "systems",
    "message_sizes",
    "messages",
    "duration",
    "rate",
    "producers",
    "consumers",
    "topics",
    "warmup",
    "repetitions",
    "payload",
    "timeout",
    "variants",
    "consumer_rate",
    "faults",
    "hosts",
    "p99_bound",
    "search_range",
    "cluster",
    *WORKLOAD_FIELDS,
)

_UNITS = {"b": 1, "kb": 1000, "kib": 1024, "mb": 1000**2, "mib": 1024**2}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_MAX_SIZE = 256 * 1024**2


class _Checker:
    """Turns raw YAML values into typed ones, raising ScenarioError that names the file and field."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, fld: str, message: str) -> ScenarioError:
        return ScenarioError(f"{self.source}: field '{fld}': {message}")

    def integer(self, fld: str, value: Any, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(fld, f"must be a whole number >= {minimum}, got {value!r}")
        if value < minimum:
            raise self.fail(fld, f"must be >= {minimum}, got {value}")
        return value

    def seconds(self, fld: str, value: Any) -> float:
        if isinstance(value, str):
            m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min)?\s*", value)
            if not m:
                raise self.fail(fld, f"must be seconds (e.g. 10 or '10s', '500ms', '2m'), got {value!r}")
            scale = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "min": 60.0}[m.group(2)]
            value = float(m.group(1)) * scale
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(fld, f"must be a number of seconds, got {value!r}")
        if value <= 0:
            raise self.fail(fld, f"must be > 0 seconds, got {value}")
        return float(value)

    def bytes_(self, fld: str, value: Any) -> int:
        """A number of bytes, or one with a unit (B, KB, KiB, MB, MiB)."""
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        m = _SIZE_RE.match(value) if isinstance(value, str) else None
        if m is None or m.group(2).lower() not in ("", *_UNITS) or float(m.group(1)) <= 0:
            raise self.fail(fld, f"must be bytes > 0 (e.g. 1000, '50MB', '1MiB'), got {value!r}")
        return int(float(m.group(1)) * _UNITS[m.group(2).lower() or "b"])

    def size(self, value: Any) -> int:
        fld = "message_sizes"
        if isinstance(value, bool):
            raise self.fail(fld, f"sizes are bytes (e.g. 100, '1KB', '1MiB'), got {value!r}")
        if isinstance(value, int):
            n = value
        elif isinstance(value, str) and (m := _SIZE_RE.match(value)):
            unit = m.group(2).lower() or "b"
            if unit not in _UNITS:
                raise self.fail(fld, f"unknown unit in {value!r}; allowed: B, KB, KiB, MB, MiB")
            n = int(float(m.group(1)) * _UNITS[unit])
        else:
            raise self.fail(fld, f"sizes are bytes (e.g. 100, '1KB', '1MiB'), got {value!r}")
        if not MIN_MESSAGE_SIZE <= n <= _MAX_SIZE:
            raise self.fail(
                fld, f"each size must be between {MIN_MESSAGE_SIZE} B (the message header) and 256 MiB, got {n}"
            )
        return n

    def rate(self, value: Any, fld: str = "rate") -> float | None:
        if value == MAX_RATE:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise self.fail(fld, f"must be 'max' or messages per second > 0 (or a list of those), got {value!r}")
        return float(value)


def load_scenarios(path: str | Path) -> list[Scenario]:
    """Load every scenario in a YAML file. Raises ScenarioError (one line) for anything wrong."""
    p = Path(path)
    source = str(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ScenarioError(f"{source}: no such scenario file") from None
    except OSError as exc:
        raise ScenarioError(f"{source}: cannot be read: {exc.strerror}") from None
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        where = ""
        mark = getattr(exc, "problem_mark", None)
        if mark is not None:
            where = f" at line {mark.line + 1}, column {mark.column + 1}"
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise ScenarioError(f"{source}: not valid YAML{where}: {problem}") from None
    if not docs:
        raise ScenarioError(f"{source}: the file holds no scenario")
    scenarios = [sc for d in docs for sc in _expand_topics(d, source)]
    names = [s.name for s in scenarios]
    for n in names:
        if names.count(n) > 1:
            raise ScenarioError(f"{source}: field 'name': scenario name {n!r} is used twice in this file")
    return scenarios


def _expand_topics(data: Any, source: str) -> list[Scenario]:
    """One scenario, or one per topic count of a ``topics`` list: ``<name>-<n>t`` of the series ``<name>``."""
    if not isinstance(data, dict) or not isinstance(data.get("topics"), list):
        return [parse_scenario(data, source)]
    parse_topics(_Checker(source), data)  # the list and the per-topic counts it needs
    name = data.get("name")
    return [parse_scenario({**data, "topics": n, "name": f"{name}-{n}t"}, source, series=str(name))
            for n in data["topics"]]


def parse_scenario(data: Any, source: str = "<scenario>", series: str = "") -> Scenario:
    """Validate one scenario mapping (as loaded from YAML); ``series`` names the topic sweep it is part of."""
    from harness.drivers import SYSTEMS

    c = _Checker(source)
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario must be a mapping of fields, got {type(data).__name__}")
    for key in data:
        if key not in _FIELDS:
            close = difflib.get_close_matches(str(key), _FIELDS, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise c.fail(str(key), f"is not a scenario field{hint}; allowed: {', '.join(_FIELDS)}")

    name = data.get("name")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise c.fail("name", f"required; letters, digits, '.', '-' and '_', got {name!r}")

    raw_pattern = data.get("pattern")
    allowed_patterns = ", ".join(p.value for p in Pattern)
    if raw_pattern is None:
        raise c.fail("pattern", f"required; allowed: {allowed_patterns}")
    try:
        pattern = Pattern(raw_pattern)
    except ValueError:
        raise c.fail("pattern", f"must be one of {allowed_patterns}, got {raw_pattern!r}") from None

    systems: tuple[str, ...] | None = None
    if "systems" in data:
        raw_systems = data["systems"]
        if isinstance(raw_systems, str):
            raw_systems = [s.strip() for s in raw_systems.split(",") if s.strip()]
        if not isinstance(raw_systems, list) or not raw_systems:
            raise c.fail("systems", f"must be a non-empty list of systems from: {', '.join(SYSTEMS)}")
        for s in raw_systems:
            if s not in SYSTEMS:
                raise c.fail("systems", f"unknown system {s!r}; allowed: {', '.join(SYSTEMS)}")
        systems = tuple(dict.fromkeys(raw_systems))

    payload = parse_payload(c, data.get("payload", "random"), source)
    raw_sizes = data.get("message_sizes")
    if raw_sizes is None and payload.kind == "file":
        raw_sizes = [max(MIN_MESSAGE_SIZE, Path(payload.file).stat().st_size)]
    if raw_sizes is None:
        raise c.fail("message_sizes", "required; a list of sizes in bytes, e.g. [100, 1KB]")
    if not isinstance(raw_sizes, list):
        raw_sizes = [raw_sizes]
    if not raw_sizes:
        raise c.fail("message_sizes", "must list at least one size")
    sizes = tuple(c.size(v) for v in raw_sizes)

    messages = duration = None
    if "messages" in data and "duration" in data:
        raise c.fail("messages", "give either 'messages' or 'duration', not both")
    if "messages" in data:
        messages = c.integer("messages", data["messages"], 1)
    elif "duration" in data:
        duration = c.seconds("duration", data["duration"])
    else:
        raise c.fail("messages", "required: give 'messages' (per producer) or 'duration' (seconds)")

    rate_profile = parse_rate_profile(c, data["rate_profile"]) if "rate_profile" in data else ()
    if rate_profile and "rate" in data:
        raise c.fail("rate_profile", "give either 'rate' or 'rate_profile', not both")
    raw_rate = profile_mean(rate_profile) if rate_profile else data.get("rate", "max")
    searching = raw_rate == "search"
    rates = () if searching else tuple(c.rate(r) for r in (raw_rate if isinstance(raw_rate, list) else [raw_rate]))
    if not rates and not searching:
        raise c.fail("rate", "must be 'max', a rate, a non-empty list of those, or 'search'")
    p99_bound, search_range = _parse_search(c, data, searching)

    topic_counts, per_topic_producers, per_topic_consumers = parse_topics(c, data)
    if len(topic_counts) > 1:
        raise c.fail("topics", "a list of topic counts is a sweep: load the scenario from its file")
    topics = topic_counts[0]
    producers = topics * per_topic_producers if per_topic_producers else c.integer("producers", data.get("producers", 1), 1)
    consumers = topics * per_topic_consumers if per_topic_consumers else c.integer("consumers", data.get("consumers", 1), 1)
    if topics > producers or topics > consumers:
        raise c.fail("topics", f"needs at least one producer and one consumer per topic ({topics} topics)")
    if producers > 65535:
        raise c.fail("producers", "at most 65535 (the header's producer id is 16 bits)")
    warmup = c.integer("warmup", data.get("warmup", 1000), 0)
    repetitions = c.integer("repetitions", data.get("repetitions", 1), 1)
    timeout = c.seconds("timeout", data.get("timeout", 30))
    if messages is not None and messages + warmup >= 2**32:
        raise c.fail("messages", "messages + warmup must stay below 2**32 per producer (32-bit sequence)")

    keys, key_count = parse_keys(c, data)
    backlog = parse_backlog(c, data["backlog"]) if data.get("backlog") is not None else None
    if backlog is not None:
        if pattern is Pattern.REQREP:
            raise c.fail("backlog", "applies to pubsub and queue scenarios (consumers that can hold back)")
        if rate_profile or searching or any(r is None for r in rates):
            raise c.fail("backlog", "needs a fixed 'rate' (the producers go on at drain_rate x that rate)")
        if messages is not None and backlog.messages and backlog.messages >= messages * producers:
            raise c.fail("backlog.messages", f"must be below what the producers send ({messages * producers})")

    description = data.get("description", "")
    if not isinstance(description, str):
        raise c.fail("description", "must be text")

    cluster = parse_cluster(c, "cluster", data["cluster"]) if data.get("cluster") is not None else None
    variants = _parse_variants(c, data.get("variants", {}), systems, cluster)

    consumer_rate = None
    if data.get("consumer_rate") is not None:
        consumer_rate = c.rate(data["consumer_rate"], "consumer_rate")
        if consumer_rate is None:
            raise c.fail("consumer_rate", "must be messages per second > 0 (leave it out for no limit)")
    hosts = parse_hosts(c, data.get("hosts"))
    faults = _parse_faults(c, data.get("faults"), producers, consumers, pattern, hosts)

    return Scenario(
        name=name,
        pattern=pattern,
        message_sizes=sizes,
        messages=messages,
        duration=duration,
        rates=rates,
        systems=systems,
        producers=producers,
        consumers=consumers,
        topics=topics,
        warmup=warmup,
        repetitions=repetitions,
        payload=payload.kind,
        payload_file=payload.file,
        compressible=payload.compressible,
        timeout=timeout,
        description=description,
        variants=variants,
        consumer_rate=consumer_rate,
        faults=faults,
        hosts=hosts,
        source=source,
        p99_bound=p99_bound,
        search_range=search_range,
        cluster=cluster,
        backlog=backlog,
        rate_profile=rate_profile,
        keys=keys,
        key_count=key_count,
        series=series,
    )


def _parse_search(c: _Checker, data: Mapping[str, Any], searching: bool) -> tuple[float | None, tuple[float, float]]:
    """``p99_bound`` (seconds) and ``search_range`` (msgs/s) of a ``rate: search`` scenario."""
    if not searching:
        for fld in ("p99_bound", "search_range"):
            if fld in data:
                raise c.fail(fld, "only applies with 'rate: search'")
        return None, (1000.0, 1_000_000.0)
    if "p99_bound" not in data:
        raise c.fail("p99_bound", "required with 'rate: search': the highest acceptable p99, e.g. 5ms")
    bound = c.seconds("p99_bound", data["p99_bound"])
    raw = data.get("search_range", [1000, 1_000_000])
    if not isinstance(raw, list) or len(raw) != 2:
        raise c.fail("search_range", f"must be [lowest, highest] msgs/s, got {raw!r}")
    low, high = (c.rate(r, "search_range") for r in raw)
    if low is None or high is None or low >= high:
        raise c.fail("search_range", f"must be two rates in msgs/s, lowest first, got {raw!r}")
    return bound, (low, high)


def _parse_variants(
    c: _Checker, raw: Any, systems: tuple[str, ...] | None, cluster: ClusterShape | None
) -> dict[str, tuple[Variant, ...]]:
    from harness.drivers import SYSTEMS, driver_class
    from harness.drivers.base import DriverError

    if raw in (None, {}):
        return {}
    if not isinstance(raw, dict):
        raise c.fail("variants", "must map a system name to its options (a mapping, or a list of mappings)")
    out: dict[str, tuple[Variant, ...]] = {}
    for system, spec in raw.items():
        if system not in SYSTEMS:
            raise c.fail("variants", f"unknown system {system!r}; allowed: {', '.join(SYSTEMS)}")
        items = spec if isinstance(spec, list) else [spec]
        if not items:
            raise c.fail(f"variants.{system}", "must give at least one variant")
        parsed: list[Variant] = []
        for i, item in enumerate(items):
            where = f"variants.{system}" + (f"[{i}]" if isinstance(spec, list) else "")
            if item is None:
                item = {}
            if not isinstance(item, dict):
                raise c.fail(where, f"must be a mapping of options, got {item!r}")
            opts = dict(item)
            shape, note = variant_shape(c, where, system, opts, cluster)
            try:  # the option ``client`` chooses the driver (harness.drivers.CLIENTS)
                allowed: frozenset[str] | None = driver_class(system, opts.get("client")).option_names()
            except DriverError as exc:
                if "client" in opts:
                    raise c.fail(f"{where}.client", str(exc)) from None
                allowed = None  # the driver cannot load here; its options are checked when it runs
            vname = opts.pop("name", "default" if len(items) == 1 else f"v{i}")
            if not isinstance(vname, str) or not _NAME_RE.match(vname):
                raise c.fail(f"{where}.name", f"letters, digits, '.', '-' and '_', got {vname!r}")
            if allowed is not None:
                for key in opts:
                    if key not in allowed:
                        close = difflib.get_close_matches(str(key), sorted(allowed), n=1)
                        hint = f" (did you mean '{close[0]}'?)" if close else ""
                        listed = ", ".join(sorted(allowed)) or "none"
                        raise c.fail(f"{where}.{key}", f"is not a {system} option{hint}; allowed: {listed}")
            parsed.append(Variant(system=system, name=vname, options=opts, cluster=shape, cluster_note=note))
        names = [v.name for v in parsed]
        if len(set(names)) != len(names):
            raise c.fail(f"variants.{system}", f"variant names must differ, got {names}")
        out[system] = tuple(parsed)
    return out


_FAULT_KEYS = tuple(dict.fromkeys(("at", "action", "target", "down", *NETWORK_FAULT_KEYS, *NODE_FAULT_KEYS)))


def _parse_faults(
    c: _Checker, raw: Any, producers: int, consumers: int, pattern: Pattern, hosts: Hosts
) -> tuple[Fault, ...]:
    if raw in (None, []):
        return ()
    if not isinstance(raw, list):
        raise c.fail("faults", "must be a list of {at: 2s, action: restart-broker, ...} mappings")
    out: list[Fault] = []
    for i, item in enumerate(raw):
        where = f"faults[{i}]"
        if not isinstance(item, dict):
            raise c.fail(where, f"must be a mapping like {{at: 2s, action: restart-broker}}, got {item!r}")
        for key in item:
            if key not in _FAULT_KEYS:
                raise c.fail(f"{where}.{key}", f"is not a fault field; allowed: {', '.join(_FAULT_KEYS)}")
        if "at" not in item:
            raise c.fail(f"{where}.at", "required: seconds after the start (e.g. 2s)")
        at = c.seconds(f"{where}.at", item["at"])
        action = item.get("action")
        if action not in FAULT_ACTIONS:
            raise c.fail(f"{where}.action", f"must be one of {', '.join(FAULT_ACTIONS)}, got {action!r}")
        if action in NETWORK_ACTIONS:
            if "node" in item:
                raise c.fail(f"{where}.node", f"only node actions ({', '.join(NODE_ACTIONS)}) have it")
            out.append(parse_network_fault(c, where, item, at, hosts))
            continue
        if action in NODE_ACTIONS:
            extra = [k for k in (*NETWORK_FAULT_KEYS, "target") if k in item and k not in NODE_FAULT_KEYS]
            if extra:
                raise c.fail(f"{where}.{extra[0]}", "a node action has at, action, node, down (restart-node) "
                                                    "and duration (pause-node, isolate-node)")
            out.append(parse_node_fault(c, where, item, at, hosts))
            continue
        if "node" in item:
            raise c.fail(f"{where}.node", f"only node actions ({', '.join(NODE_ACTIONS)}) have it")
        extra = [k for k in NETWORK_FAULT_KEYS if k in item]
        if extra:
            raise c.fail(f"{where}.{extra[0]}", f"only network actions ({', '.join(NETWORK_ACTIONS)}) have it")
        if pattern is Pattern.REQREP and "broker" not in action:
            raise c.fail(f"{where}.action", "worker faults are supported for pubsub and queue scenarios only")
        target = c.integer(f"{where}.target", item.get("target", 0), 0)
        workers = producers if "producer" in action else consumers
        if target >= workers:
            raise c.fail(f"{where}.target", f"there are only {workers} workers of that kind (0..{workers - 1})")
        down = 0.0
        if "down" in item:
            down = 0.0 if item["down"] in (0, "0", "0s") else c.seconds(f"{where}.down", item["down"])
            if not action.startswith("restart"):
                raise c.fail(f"{where}.down", "only restart-* actions have a down time")
        out.append(Fault(at=at, action=action, target=target, down=down))
    return tuple(sorted(out, key=lambda f: f.at))
