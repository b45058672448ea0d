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
_KEYS = (*_ROLES, "nodes")
_RATE_RE = re.compile(r"^\d+(?:\.\d+)?(?:bit|kbit|mbit|gbit|bps|kbps|mbps|gbps)$")
NETWORK_FAULT_KEYS = ("duration", "host", "delay", "jitter", "rate")
__all__ = ["NETWORK_ACTIONS", "NETWORK_FAULT_KEYS", "parse_hosts", "parse_network_fault"]


def parse_hosts(c: _Checker, raw: Any) -> Hosts:
    if raw is None:
        return Hosts()
    if not isinstance(raw, dict):
        raise c.fail("hosts", "must be a mapping like {broker: server, producers: a, consumers: b}")
    nodes: tuple[str, ...] = ()
    for key, value in raw.items():
        if key not in _KEYS:
            raise c.fail(f"hosts.{key}", f"is not a role; allowed: {', '.join(_KEYS)}")
        if key == "nodes":
            if not isinstance(value, list) or len(value) < 2:
                raise c.fail("hosts.nodes", f"must list one host per node of a cluster (two or more), got {value!r}")
            for name in value:
                if not isinstance(name, str) or not _HOST_RE.match(name):
                    raise c.fail("hosts.nodes", f"each must be a host name (a-z, 0-9, at most 12, a letter first), "
                                                f"got {name!r}")
            if len(set(value)) != len(value):
                raise c.fail("hosts.nodes", f"each node needs a host of its own, got {value}")
            nodes = tuple(value)
        elif not isinstance(value, str) or not _HOST_RE.match(value):
            raise c.fail(f"hosts.{key}", f"must be a host name (a-z, 0-9, at most 12, a letter first), got {value!r}")
    clash = set(nodes) & {raw.get(r) for r in _ROLES}
    if clash:
        raise c.fail("hosts.nodes", f"a node's host is its own: {', '.join(sorted(clash))} is also given a role")
    return Hosts(**{k: v for k, v in raw.items() if k != "nodes"}, nodes=nodes)


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
