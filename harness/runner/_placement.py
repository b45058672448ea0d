"""Workers on hosts: each spec gets its host's namespace and the addresses a client there must use.

A case has one server host: the broker's (``BrokerEndpoint.extra["host"]``; the root namespace when the
broker was not placed) or, brokerless, the binders' (producers for pubsub/queue, repliers for reqrep).
Binders keep their plan (they listen on their host's loopback); every other worker reaches the server's
ports through the server host's Toxiproxy (``harness.network.Routes``), one proxy per client host.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from harness.brokers import provisioner
from harness.drivers.base import BrokerEndpoint, Pattern
from harness.network import Network, Routes, ToxiproxyError, loopback_ports, routes_for
from harness.runner._context import WorkerSpec
from harness.runner._workers import CaseFailed
from harness.scenario import Scenario


def server_host(sc: Scenario, broker: BrokerEndpoint | None, needs_broker: bool) -> str | None:
    if needs_broker:
        return None if broker is None else broker.extra.get("host")
    return sc.hosts.of("consumers" if sc.pattern is Pattern.REQREP else "producers")


def place(
    net: Network | None, sc: Scenario, needs_broker: bool, specs: list[WorkerSpec]
) -> tuple[list[WorkerSpec], Routes | None, set[int]]:
    """``specs`` as they run on their hosts, the routes they use (None: no hosts, nothing changes) and the
    server ports of this case (its proxies are the routes' proxies to those ports)."""
    if net is None:
        return specs, None, set()
    broker = specs[0].broker if specs else None
    server = server_host(sc, broker, needs_broker)
    hosts = {spec.name: sc.hosts.of("producers" if spec.kind in ("producer", "requester") else "consumers")
             for spec in specs}
    if server is None and not any(hosts.values()):
        return specs, None, set()
    if needs_broker and broker is not None and _unrouted(broker):
        raise CaseFailed(f"{specs[0].system} tells its clients the address to connect to next, which the routes "
                         "between hosts do not rewrite unless the run starts it on a host: give the broker a host in the "
                         "scenario's hosts: and let mqbench start it (no --broker URL, no container), or run the "
                         "scenario without hosts: (docs/network.md)")
    if needs_broker:  # the URL's ports; the routes add the ports linked to them (a broker's own listeners)
        ports = loopback_ports(str(broker.extra.get("local_url", broker.url))) if broker is not None else set()
    else:
        ports = loopback_ports(specs[0].plan) if specs else set()
    try:
        return _placed(net, sc, needs_broker, specs, server, hosts, ports), routes_for(net, server), ports
    except ToxiproxyError as exc:
        raise CaseFailed(f"the route between hosts could not be set up: {exc}") from None


def _placed(
    net: Network, sc: Scenario, needs_broker: bool, specs: list[WorkerSpec], server: str | None,
    hosts: dict[str, str | None], ports: set[int],
) -> list[WorkerSpec]:
    broker = specs[0].broker if specs else None
    routes = routes_for(net, server)
    out = []
    for spec in specs:
        host = hosts[spec.name]
        changes: dict[str, Any] = {"namespace": net.namespace(host)}
        if needs_broker and broker is not None:
            local = str(broker.extra.get("local_url", broker.url))
            changes["broker"] = replace(broker, url=routes.rewrite(local, host, ports))
            changes["plan"] = routes.rewrite(spec.plan, host, ports)
        elif not _binds(sc, spec):
            changes["plan"] = routes.rewrite(spec.plan, host, ports)
        out.append(replace(spec, **changes))
    return out


def _unrouted(broker: BrokerEndpoint) -> bool:
    """A broker that advertises an address its provisioner did not route (not placed, or cannot be)."""
    prov = provisioner(broker.system)
    return prov is not None and prov.advertises_address and not broker.extra.get("routed")


def _binds(sc: Scenario, spec: WorkerSpec) -> bool:
    """Brokerless: the workers that bind (and so listen on their host's loopback)."""
    return spec.kind == ("replier" if sc.pattern is Pattern.REQREP else "producer")
