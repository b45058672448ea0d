"""How a client on one host reaches a server on another: addresses rewritten through the server host's proxy.

Servers listen on their host's loopback (``127.0.0.1:<port>``, as without hosts). A client on host C of a
server on host S connects instead to ``<S's address>:<listen port>`` of proxy ``<C>-<port>`` in S's
Toxiproxy, which forwards to ``127.0.0.1:<port>`` inside S. ``rewrite`` applies that to a URL or to a
driver's plan (any JSON-able value): every ``127.0.0.1:<port>`` of the server's ports is replaced, the rest
is left alone. The root namespace (``None``) is a client host like the others (the parent plans there).

Brokers that tell clients an address to use next need more (``harness.brokers.Placement``):
- ``advertise`` (Kafka: one listener per client host): a client on host C given the URL's port uses the
  broker's port ``own`` instead (an *alias*), whose listener advertises the address of C's own proxy to it;
- ``mirror`` (RocketMQ: one advertised address): ``127.0.0.1:<port>`` on client host C is a proxy in C's
  own Toxiproxy forwarding to C's proxy on the server host, so the loopback address the broker advertises
  leads every client host through its own route (one more user-space hop, without faults of its own).
Ports reached that way are *linked* to the URL's port, so a case's faults act on their proxies too.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Any

from harness.network.hosts import Network

_LOOPBACK = re.compile(r"127\.0\.0\.1:(\d+)")


def loopback_ports(value: Any) -> set[int]:
    """Every port of a ``127.0.0.1:<port>`` inside ``value`` (a URL, or a plan's strings)."""
    found: set[int] = set()
    for text in _strings(value):
        found.update(int(m.group(1)) for m in _LOOPBACK.finditer(text))
    return found


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)


class Routes:
    """The proxies from client hosts to the servers of one host (``server``); created on first use and
    kept for the run (a proxy to a port nobody listens on any more costs nothing)."""

    def __init__(self, net: Network, server: str | None) -> None:
        self.net, self.server = net, server
        self.listen: dict[tuple[str | None, int], int] = {}
        self.alias: dict[tuple[str | None, int], int] = {}  # (client, URL port) -> the port it uses instead
        self.linked: dict[int, set[int]] = {}  # URL port -> ports its clients are sent on to
        self._lock = threading.Lock()

    @staticmethod
    def proxy_name(client: str | None, port: int) -> str:
        return f"{client or 'root'}-{port}"

    def port_for(self, client: str | None, port: int) -> int:
        with self._lock:
            key = (client, port)
            if key not in self.listen:
                self.listen[key] = self.net.toxiproxy(self.server).proxy(self.proxy_name(client, port), port)
            return self.listen[key]

    def reach(self, client: str | None, port: int) -> str:
        """``address:port`` by which a client on ``client`` reaches the server host's loopback ``port``."""
        return f"{self.net.address(self.server)}:{self.port_for(client, port)}"

    def advertise(self, client: str | None, shown: int, own: int) -> str:
        """A client on ``client`` given port ``shown`` uses ``own`` instead; returns the address it reaches
        ``own`` at (what a listener of its own advertises to it)."""
        with self._lock:
            self.alias[(client, shown)] = own
            self.linked.setdefault(shown, set()).add(own)
        return self.reach(client, own)

    def mirror(self, client: str | None, shown: int, port: int) -> None:
        """Make ``127.0.0.1:port`` on host ``client`` lead to the server host's ``port`` (through ``client``'s
        own route), for clients told that loopback address; ``port`` is linked to the URL's ``shown``."""
        with self._lock:
            self.linked.setdefault(shown, set()).add(port)
        if client == self.server:
            return  # the server listens there itself
        address, _, via = self.reach(client, port).rpartition(":")
        self.net.toxiproxy(client).proxy(f"mirror-{port}", int(via), listen=f"127.0.0.1:{port}", upstream_host=address)

    def rewrite(self, value: Any, client: str | None, ports: set[int]) -> Any:
        """``value`` as a client on ``client`` must use it: the server's ``127.0.0.1:<port>`` (for ``port``
        in ``ports``) become the proxy's address (of the port's alias for that client, if it has one)."""

        def sub(m: re.Match[str]) -> str:
            port = int(m.group(1))
            return self.reach(client, self.alias.get((client, port), port)) if port in ports else m.group(0)

        if isinstance(value, str):
            return _LOOPBACK.sub(sub, value)
        if isinstance(value, dict):
            return {k: self.rewrite(v, client, ports) for k, v in value.items()}
        if isinstance(value, list):
            return [self.rewrite(v, client, ports) for v in value]
        if isinstance(value, tuple):
            return tuple(self.rewrite(v, client, ports) for v in value)
        return value

    def proxies_of(self, client: str | None, ports: set[int]) -> list[str]:
        """Names of the proxies to ``ports`` serving ``client`` (all of them when ``client`` is the server's
        own host)."""
        with self._lock:
            every = set(ports).union(*(self.linked.get(p, set()) for p in ports))
            return [self.proxy_name(c, p) for (c, p) in self.listen
                    if p in every and (client == self.server or c == client)]


def routes_for(net: Network, server: str | None) -> Routes:
    """The one ``Routes`` of ``net`` towards ``server``'s host (shared by provisioning and the cases)."""
    cache: dict[str | None, Routes] = net.__dict__.setdefault("_routes", {})
    if server not in cache:
        cache[server] = Routes(net, server)
    return cache[server]
