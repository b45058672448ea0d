"""How a client on one host reaches a server on another: addresses rewritten through the server host's proxy.

Servers listen on their host's loopback (``127.0.0.1:<port>``, as without hosts). A client on host C of a
server on host S connects instead to ``<S's address>:<listen port>`` of proxy ``<C>-<port>`` in S's
Toxiproxy, which forwards to ``127.0.0.1:<port>`` inside S. ``rewrite`` applies that to a URL or to a
driver's plan (any JSON-able value): every ``127.0.0.1:<port>`` of the server's ports is replaced, the rest
is left alone. The root namespace (``None``) is a client host like the others (the parent plans there).
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

    def rewrite(self, value: Any, client: str | None, ports: set[int]) -> Any:
        """``value`` as a client on ``client`` must use it: the server's ``127.0.0.1:<port>`` (for ``port``
        in ``ports``) become the proxy's address."""
        address = self.net.address(self.server)

        def sub(m: re.Match[str]) -> str:
            port = int(m.group(1))
            return f"{address}:{self.port_for(client, port)}" if port in ports else m.group(0)

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
            return [self.proxy_name(c, p) for (c, p) in self.listen
                    if p in ports and (client == self.server or c == client)]


def routes_for(net: Network, server: str | None) -> Routes:
    """The one ``Routes`` of ``net`` towards ``server``'s host (shared by provisioning and the cases)."""
    cache: dict[str | None, Routes] = net.__dict__.setdefault("_routes", {})
    if server not in cache:
        cache[server] = Routes(net, server)
    return cache[server]
