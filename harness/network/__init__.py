"""Runs across a network on one machine: hosts as network namespaces, and the faults between them.

``Network`` (``hosts.py``) creates a run's hosts (namespaces + veth pairs + a bridge, named with a per-run
prefix) and removes them on every way out; ``Routes`` (``routes.py``) rewrites a client's addresses to
reach a server host through that host's Toxiproxy (``toxiproxy.py``); ``enter`` moves a worker into its
host before it opens a socket. docs/network.md describes the whole.
"""

from harness.network._netns import NamespaceError, enter, exec_prefix
from harness.network.hosts import PREFIX, Network, NetworkError, leftovers, network
from harness.network.routes import Routes, loopback_ports, routes_for
from harness.network.toxiproxy import Toxiproxy, ToxiproxyError, find_binary

__all__ = [
    "PREFIX",
    "NamespaceError",
    "Network",
    "NetworkError",
    "Routes",
    "Toxiproxy",
    "ToxiproxyError",
    "enter",
    "exec_prefix",
    "find_binary",
    "leftovers",
    "loopback_ports",
    "network",
    "routes_for",
]
