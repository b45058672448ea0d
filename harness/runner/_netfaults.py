"""Network fault actions between hosts (``delay``, ``bandwidth``, ``partition``, ``reset``): apply, then undo.

Each acts on one host (``Fault.host``) for ``Fault.duration`` seconds:
- ``delay``: a Toxiproxy ``latency`` toxic (delay, jitter) on both streams of every proxy serving that host
  (on the server's host: every proxy), so a message crossing one proxied hop arrives ``delay`` later;
- ``reset``: a ``reset_peer`` toxic (timeout 0) on the same proxies: open connections are reset (TCP RST)
  and so is every new one until the end;
- ``partition``: the host's bridge port set down, then up (packets dropped silently, nothing reset: a
  cut cable; Toxiproxy's ``timeout`` toxic would drop bytes TCP already acknowledged, which no network
  does);
- ``bandwidth``: ``tc tbf`` at ``rate`` on both ends of the host's veth pair.
``undo`` is always called (the injector's finally), also when the case ends inside the window.
"""

from __future__ import annotations

from harness.network import Network, Routes
from harness.scenario import Fault

_TOXIC = {"delay": "latency", "reset": "reset_peer"}
_STREAMS = ("upstream", "downstream")


class NetworkFaults:
    """The network of a run and the routes of one case, as the fault injector acts on them."""

    def __init__(self, net: Network, routes: Routes | None, ports: set[int]) -> None:
        self.net, self.routes, self.ports = net, routes, ports

    def _proxies(self, fault: Fault) -> list[str]:
        return [] if self.routes is None else self.routes.proxies_of(fault.host, self.ports)

    def apply(self, fault: Fault) -> str:
        """Start the fault; returns what was done (one phrase). Raises on failure."""
        host = str(fault.host)
        if fault.action == "partition":
            self.net.set_link(host, up=False)
            return f"host {host} cut off (link down)"
        if fault.action == "bandwidth":
            self.net.shape(host, fault.rate)
            return f"host {host} limited to {fault.rate} each way (tc tbf)"
        proxies = self._proxies(fault)
        if not proxies or self.routes is None:
            raise RuntimeError(f"no connection of host {host} goes through a proxy in this case")
        proxy = self.net.toxiproxy(self.routes.server)
        attributes = ({"latency": round(fault.delay * 1000), "jitter": round(fault.jitter * 1000)}
                      if fault.action == "delay" else {"timeout": 0})
        for name in proxies:
            for stream in _STREAMS:
                proxy.add_toxic(name, f"mqbench-{fault.action}-{stream}", _TOXIC[fault.action], attributes, stream)
        if fault.action == "delay":
            return (f"{fault.delay * 1000:g} ms (jitter {fault.jitter * 1000:g} ms) each way on "
                    f"{len(proxies)} connection(s) of host {host} (Toxiproxy latency)")
        return f"connections of host {host} reset ({len(proxies)} proxies, Toxiproxy reset_peer)"

    def undo(self, fault: Fault) -> None:
        host = str(fault.host)
        if fault.action == "partition":
            self.net.set_link(host, up=True)
        elif fault.action == "bandwidth":
            self.net.shape(host, None)
        elif self.routes is not None:
            proxy = self.net.toxiproxy(self.routes.server)
            for name in self._proxies(fault):
                for stream in _STREAMS:
                    proxy.remove_toxic(name, f"mqbench-{fault.action}-{stream}")
