"""Hosts of one run: network namespaces joined by veth pairs to a bridge in the root namespace.

Layout (names carry the run's prefix ``mqn<5 hex>``, so ``leftovers()`` finds exactly ours):
  bridge ``<prefix>br`` in the root namespace, address ``10.A.B.1/24`` (the root namespace, where the
  parent and un-placed workers run, reaches every host through it);
  host i: namespace ``<prefix>-<name>``, veth ``<prefix>v<i>`` (root side, a bridge port) paired with
  ``<prefix>h<i>`` (inside the namespace) holding ``10.A.B.<i+2>/24``; its loopback is up.
Nothing of the root namespace is changed besides what is created here: ``lo`` and existing interfaces
are never touched. Where bridged packets pass a firewall that does more than accept them (Docker sets
iptables' FORWARD policy to DROP), the run adds one accept rule for its own bridge and removes it at teardown
(``_firewall``). Once made, every host is checked to reach every other one and the root namespace (a TCP
connect each way): a pair that cannot is one sentence naming the hosts and what to check. Partitions set a host's root-side veth down (packets are dropped silently, as on a cut
cable: TCP retransmits and resumes after the heal); bandwidth limits are ``tc tbf`` on both ends of the
host's veth pair.

Invariants: everything created is listed in the ``Network`` before the next step, ``close`` removes it
all and is idempotent; an atexit hook closes networks still open when the interpreter exits (the
``with`` block normally does it, also on Ctrl-C/SIGTERM, which the CLI turns into KeyboardInterrupt).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import random
import selectors
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from harness import _watchdog
from harness.network import _firewall
from harness.network._netns import exec_prefix, made_in
from harness.network.toxiproxy import Toxiproxy

PREFIX = "mqn"  # every namespace and link of ours starts with this
REACH_TIMEOUT = 2.0  # seconds a host has to answer another's TCP connect when the hosts are checked
_LIVE: set[Network] = set()
_LIVE_LOCK = threading.Lock()


class NetworkError(RuntimeError):
    """The hosts cannot be set up (not root, no ``ip``); one sentence."""


def _ip(*args: str, check: bool = True) -> str:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise NetworkError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip() or proc.returncode} "
                           "(hosts need root and iproute2)")
    return proc.stdout


def _tc(*args: str) -> None:
    proc = subprocess.run(["tc", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetworkError(f"`tc {' '.join(args)}` failed: {proc.stderr.strip()}")


class Network:
    """The hosts of a run. ``namespace(host)``/``address(host)`` for a host name; ``None`` is the root."""

    def __init__(self, hosts: Sequence[str]) -> None:
        self.tag = f"{random.getrandbits(20):05x}"
        self.prefix = f"{PREFIX}{self.tag}"
        self.bridge = f"{self.prefix}br"
        net = random.Random(self.tag)
        self.subnet = f"10.{net.randrange(200, 250)}.{net.randrange(1, 255)}"
        self.hosts = list(dict.fromkeys(hosts))
        self.created_ns: list[str] = []
        self.created_links: list[str] = []
        self.shaped: set[str] = set()
        self.firewall_rule = False  # an accept rule for our bridge is in iptables' FORWARD chain
        self.firewall_note: str | None = None  # why the rule that was needed could not be added
        self.proxies: dict[str | None, Toxiproxy] = {}
        self.log_dir = Path(tempfile.mkdtemp(prefix=f"mqbench-{self.prefix}-"))
        self._lock = threading.Lock()
        self._watched = _watchdog.watch_command(["sh", "-c", self._teardown_script()])  # if this process is killed
        with _LIVE_LOCK:
            _LIVE.add(self)
        try:
            self._create()
        except BaseException:
            self.close()
            raise

    # -- names ---------------------------------------------------------------------------------------

    def namespace(self, host: str | None) -> str | None:
        return None if host is None else f"{self.prefix}-{host}"

    def address(self, host: str | None) -> str:
        return f"{self.subnet}.1" if host is None else f"{self.subnet}.{self.hosts.index(host) + 2}"

    def _veth(self, host: str) -> tuple[str, str]:
        i = self.hosts.index(host)
        return f"{self.prefix}v{i}", f"{self.prefix}h{i}"

    def describe(self) -> dict[str, object]:
        """For the manifest: what a host is here and how the clocks relate."""
        return {
            "hosts": {h: {"namespace": self.namespace(h), "address": self.address(h)} for h in self.hosts},
            "root_address": self.address(None),
            "kind": "network namespaces of one kernel, joined by veth pairs to one bridge",
            "clock": "CLOCK_MONOTONIC is shared by every host (one kernel): no offset to apply",
            "proxy": "clients reach a host's servers through that host's Toxiproxy (one proxy per client host)",
        }

    # -- set up and tear down ------------------------------------------------------------------------

    def _create(self) -> None:
        _ip("link", "add", self.bridge, "type", "bridge")
        self.created_links.append(self.bridge)
        _ip("addr", "add", f"{self.address(None)}/24", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        if _firewall.needs_rule():
            _firewall.sweep(PREFIX, lambda: set(_links(PREFIX)))  # rules of runs killed before their teardown
            self.firewall_note = _firewall.allow(self.bridge)
            self.firewall_rule = self.firewall_note is None
        for host in self.hosts:
            ns = self.namespace(host)
            assert ns is not None
            outer, inner = self._veth(host)
            _ip("netns", "add", ns)
            self.created_ns.append(ns)
            _ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            self.created_links.append(outer)
            _ip("link", "set", inner, "netns", ns)
            _ip("link", "set", outer, "master", self.bridge)
            _ip("link", "set", outer, "up")
            _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inner)
            _ip("-n", ns, "link", "set", inner, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        self._check_reach()

    def _check_reach(self) -> None:
        """Every place (the root namespace and each host) reaches every other one: a TCP connect to a listener
        on each address, all at once. NetworkError naming the first pair that cannot and what to check."""
        places: list[str | None] = [None, *self.hosts]
        opened: list[socket.socket] = []
        failed: list[tuple[str | None, str | None]] = []

        def listener(address: str) -> socket.socket:
            sock = socket.socket()
            opened.append(sock)
            sock.bind((address, 0))
            sock.listen(len(places))
            return sock

        def client() -> socket.socket:
            sock = socket.socket()
            opened.append(sock)
            sock.setblocking(False)
            return sock

        try:
            ports: dict[str | None, int] = {}
            for place in places:
                bound = made_in(self.namespace(place), functools.partial(listener, self.address(place)))
                ports[place] = bound.getsockname()[1]
            waiting: dict[socket.socket, tuple[str | None, str | None]] = {}
            with selectors.DefaultSelector() as selector:
                for src in places:
                    for dst in places:
                        if src != dst:
                            sock = made_in(self.namespace(src), client)
                            sock.connect_ex((self.address(dst), ports[dst]))
                            selector.register(sock, selectors.EVENT_WRITE)
                            waiting[sock] = (src, dst)
                while waiting:
                    events = selector.select(REACH_TIMEOUT)
                    if not events:
                        failed.extend(waiting.values())
                        break
                    for key, _ in events:
                        sock = key.fileobj  # type: ignore[assignment]
                        selector.unregister(sock)
                        if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                            failed.append(waiting[sock])
                        del waiting[sock]
        finally:
            for sock in opened:
                sock.close()
        if failed:
            src, dst = min(failed, key=lambda pair: places.index(pair[0]) * len(places) + places.index(pair[1]))
            raise NetworkError(f"{self._place(src)} cannot reach {self._place(dst)} over the run's bridge "
                               f"{self.bridge}; {self._what_to_check()}")

    def _place(self, host: str | None) -> str:
        name = "the root namespace" if host is None else f"host {host}"
        return f"{name} ({self.address(host)})"

    def _what_to_check(self) -> str:
        if self.firewall_note is not None:
            return (f"packets between hosts pass iptables' FORWARD chain here (bridge netfilter is on), which "
                    f"does not accept them, and this run could not add its accept rule ({self.firewall_note}); "
                    "check `iptables -S FORWARD` (Docker sets its policy to DROP)")
        if self.firewall_rule:
            return ("the run's accept rule is at the top of iptables' FORWARD chain, so check the rest of the "
                    "firewall: `iptables -S`, `nft list ruleset`, and the INPUT chain of the root namespace")
        return ("check the machine's firewall (`iptables -S`, `nft list ruleset`) and whether bridged packets "
                "pass it (`sysctl net.bridge.bridge-nf-call-iptables`)")

    def close(self) -> None:
        """Stop the Toxiproxy servers, remove the bridge's accept rule, delete the namespaces (their veth ends go
        with them) and the bridge."""
        with self._lock:
            for proxy in self.proxies.values():
                with contextlib.suppress(Exception):
                    proxy.stop()
            self.proxies.clear()
            if self.firewall_rule:  # first: a rule of ours never outlives its bridge, except after a SIGKILL
                _firewall.remove(self.bridge)
                self.firewall_rule = False
            for ns in reversed(self.created_ns):
                _ip("netns", "del", ns, check=False)
            for link in reversed(self.created_links):
                _ip("link", "del", link, check=False)  # gone already when its namespace went
            self.created_ns.clear()
            self.created_links.clear()
            shutil.rmtree(self.log_dir, ignore_errors=True)  # the proxies' logs: a failed start quoted its own
            _watchdog.forget(self._watched)
        with _LIVE_LOCK:
            _LIVE.discard(self)

    def _teardown_script(self) -> str:
        """What :meth:`close` does, as one shell line for the watchdog (harness/_watchdog.py), which runs it
        if this process dies first: its proxies are process groups of their own, already killed by then. The
        veths' outer ends are deleted by name too (a namespace can outlive its name for a while)."""
        return (f"{_firewall.remove_script(self.bridge)}; "
                f"for ns in $(ip netns list | cut -d' ' -f1 | grep '^{self.prefix}-'); do ip netns del \"$ns\"; done; "
                f"for link in $(ip -o link show | cut -d: -f2 | cut -d@ -f1 | grep '^ *{self.prefix}'); do "
                f"ip link del $link 2>/dev/null; done; rm -rf {shlex.quote(str(self.log_dir))}")

    # -- what faults and routes use ------------------------------------------------------------------

    def toxiproxy(self, host: str | None) -> Toxiproxy:
        """The Toxiproxy of ``host`` (started on first use), listening on the host's address."""
        with self._lock:
            if host not in self.proxies:
                port = 8474 if host is not None else _free_port(self.address(None))
                log = self.log_dir / f"toxiproxy-{host or 'root'}.log"
                self.proxies[host] = Toxiproxy(self.namespace(host), self.address(host), port, log)
            return self.proxies[host]

    def set_link(self, host: str, up: bool) -> None:
        """Cut ``host`` off (its bridge port down) or join it again."""
        _ip("link", "set", self._veth(host)[0], "up" if up else "down")

    def shape(self, host: str, rate: str | None) -> None:
        """Limit ``host``'s link to ``rate`` (``tc`` syntax, e.g. ``10mbit``) each way; None removes it."""
        outer, inner = self._veth(host)
        ns = self.namespace(host)
        for dev, where in ((outer, ()), (inner, ("-n", str(ns)))):
            if rate is None:
                subprocess.run(["tc", *where, "qdisc", "del", "dev", dev, "root"], capture_output=True)
            else:
                # burst: at least one MTU-sized packet per timer tick; latency: how long packets may queue
                _tc(*where, "qdisc", "replace", "dev", dev, "root", "tbf", "rate", rate, "burst", "32kbit",
                    "latency", "400ms")

    def prefix_for(self, host: str | None) -> tuple[str, ...]:
        """The argv prefix running a command on ``host``."""
        return exec_prefix(self.namespace(host))


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def network(hosts: Sequence[str]) -> Iterator[Network | None]:
    """The hosts for a ``with`` block (None when there are none), always removed at its end."""
    if not hosts:
        yield None
        return
    net = Network(hosts)
    try:
        yield net
    finally:
        net.close()


def _links(prefix: str) -> list[str]:
    """Root-namespace links whose names start with ``prefix``."""
    names = []
    for line in _ip("-o", "link", "show", check=False).splitlines():
        parts = line.split(":")
        if len(parts) > 1:
            names.append(parts[1].strip().split("@")[0])
    return [n for n in names if n.startswith(prefix)]


def leftovers(prefix: str = PREFIX) -> list[str]:
    """Namespaces, root-namespace links and firewall rules (``<bridge> (iptables FORWARD rule)``) whose names
    start with ``prefix`` (ours), for checks."""
    names = [line.split()[0] for line in _ip("netns", "list", check=False).splitlines() if line.strip()]
    names = [n for n in names if n.startswith(prefix)] + _links(prefix)
    return names + [f"{bridge} (iptables {_firewall.CHAIN} rule)" for bridge in _firewall.ours(prefix)]


def close_all() -> None:
    """Close every network still open (the atexit fallback)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for net in live:
        net.close()


atexit.register(close_all)
