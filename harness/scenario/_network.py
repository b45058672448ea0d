"""The network parts of a scenario: ``hosts:`` and the network fault actions (checked like every field)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from harness.scenario._model import NETWORK_ACTIONS, Fault, Hosts

if TYPE_CHECKING:
    from harness.scenario._parse import _Checker

_HOST_RE = re.compile(r"^[a-z][a-z0-9]{0,11}$")
_ROLES = ("broker", "producers", "consumers")
_RATE_RE = re.compile(r"^\d+(?:\.\d+)?(?:bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$")
NETWORK_FAULT_KEYS = ("duration", "host", "delay", "jitter", "rate")
__all__ = ["NETWORK_ACTIONS", "NETWORK_FAULT_KEYS", "parse_hosts", "parse_network_fault"]


def parse_hosts(c: _Checker, raw: Any) -> Hosts:
    if raw is None:
        return Hosts()
    if not isinstance(raw, dict):
        raise c.fail("hosts", "must be a mapping like {broker: server, producers: a, consumers: b}")
    for key, value in raw.items():
        if key not in _ROLES:
            raise c.fail(f"hosts.{key}", f"is not a role; allowed: {', '.join(_ROLES)}")
        if not isinstance(value, str) or not _HOST_RE.match(value):
            raise c.fail(f"hosts.{key}", f"must be a host name (a-z, 0-9, at most 12, a letter first), got {value!r}")
    return Hosts(**raw)


def parse_network_fault(c: _Checker, where: str, item: Mapping[str, Any], at: float, hosts: Hosts) -> Fault:
    action = str(item["action"])
    if not hosts.names():
        raise c.fail(f"{where}.action", f"{action} acts between hosts: give the scenario a 'hosts:' mapping")
    if "duration" not in item:
        raise c.fail(f"{where}.duration", f"required for {action}: how long it lasts (e.g. 2s)")
    duration = c.seconds(f"{where}.duration", item["duration"])
    host = item.get("host", "consumers")
    if host in _ROLES:
        host = hosts.of(str(host))
    if host not in hosts.names():
        raise c.fail(f"{where}.host", f"must be one of the hosts ({', '.join(hosts.names())}) or a role "
                                      "placed on one (broker, producers, consumers)")
    delay = jitter = 0.0
    rate = ""
    if action == "delay":
        if "delay" not in item:
            raise c.fail(f"{where}.delay", "required for delay: the added latency each way (e.g. 20ms)")
        delay = c.seconds(f"{where}.delay", item["delay"])
        if "jitter" in item:
            jitter = c.seconds(f"{where}.jitter", item["jitter"])
    elif "delay" in item or "jitter" in item:
        raise c.fail(f"{where}.delay", "only the delay action has delay and jitter")
    if action == "bandwidth":
        rate = str(item.get("rate", "")).lower()
        if not _RATE_RE.match(rate):
            raise c.fail(f"{where}.rate", f"required for bandwidth: a rate like 10mbit or 500kbit, got {rate!r}")
    elif "rate" in item:
        raise c.fail(f"{where}.rate", "only the bandwidth action has a rate")
    return Fault(at=at, action=action, duration=duration, host=host, delay=delay, jitter=jitter, rate=rate)
