"""What the network tests share: skip (or, in CI, fail) without root or toxiproxy, and find leftovers."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.network import PREFIX, find_binary, leftovers

ROOT = Path(__file__).resolve().parents[3]


def require_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI") == "true":
            pytest.fail("network namespaces need root")
        pytest.skip("network namespaces need root")


def require_toxiproxy() -> None:
    require_root()
    if find_binary() is None:
        if os.environ.get("CI") == "true":
            pytest.fail("toxiproxy-server is missing: `make toxiproxy`")
        pytest.skip("toxiproxy-server is missing: `make toxiproxy`")


def require_jvm() -> None:
    from harness.drivers.java import unavailable_reason

    reason = unavailable_reason()
    if reason:
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)


def toxiproxy_pids() -> set[int]:
    """Pids of running toxiproxy-server processes (ours are told apart by being new)."""
    out = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/cmdline", "rb") as f:
                    if b"toxiproxy-server" in f.read().split(b"\0")[0]:
                        out.add(int(name))
            except OSError:
                continue
    return out


# What this process's runs created (recorded by wrapping the constructors once): a run of another worktree
# on the same machine may create hosts and Toxiproxy servers while a test runs, and those are not ours.
_MADE: dict[str, list] = {"prefixes": [], "pids": []}


def _record() -> None:
    from harness.network import hosts, toxiproxy

    if getattr(hosts.Network.__init__, "_recorded", False):
        return
    net_init, tox_init = hosts.Network.__init__, toxiproxy.Toxiproxy.__init__

    def network_init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            net_init(self, *args, **kwargs)
        finally:
            _MADE["prefixes"].append(self.prefix)

    def toxiproxy_init(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            tox_init(self, *args, **kwargs)
        finally:
            if hasattr(self, "pid"):
                _MADE["pids"].append(self.pid)

    network_init._recorded = True  # type: ignore[attr-defined]
    hosts.Network.__init__ = network_init  # type: ignore[method-assign]
    toxiproxy.Toxiproxy.__init__ = toxiproxy_init  # type: ignore[method-assign]


def snapshot() -> tuple[set[str], set[int], int, int]:
    """Our kind of names and toxiproxy servers present now, and how many runs of this process came before."""
    _record()
    return set(leftovers()), toxiproxy_pids(), len(_MADE["prefixes"]), len(_MADE["pids"])


def assert_nothing_left(before: tuple[set[str], set[int], int, int]) -> None:
    """Nothing of the runs since ``before`` is left; when the runs were in another process (``mqbench``
    started by the test), anything new of our kind counts."""
    prefixes, pids = _MADE["prefixes"][before[2]:], _MADE["pids"][before[3]:]
    new_names = set(leftovers()) - before[0]
    if prefixes:
        new_names = {n for n in new_names if n.startswith(tuple(prefixes))}
    assert new_names == set(), "namespaces or links of ours were left"
    new_pids = toxiproxy_pids() - before[1]
    if pids:
        new_pids &= set(pids)
    assert new_pids == set(), "a toxiproxy-server of ours was left running"


def require_dockerd() -> None:
    """Skip (in CI: fail) without Docker's engine binary."""
    if shutil.which("dockerd") is None:
        if os.environ.get("CI") == "true":
            pytest.fail("dockerd is missing: install Debian's docker.io (`make test` does as root)")
        pytest.skip("dockerd is missing: install Debian's docker.io")


class Machine:
    """A network namespace standing in for a machine of its own (``machine``): its own loopback, iptables and
    bridge netfilter setting, so a firewall set up there never reaches the real machine's."""

    def __init__(self, name: str) -> None:
        self.name = name

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``argv`` inside the machine, from the repository's root."""
        return subprocess.run(["ip", "netns", "exec", self.name, *argv], capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)

    def python(self, code: str) -> subprocess.CompletedProcess[str]:
        return self.run(sys.executable, "-c", code)

    def iptables(self, *args: str) -> None:
        done = self.run("iptables", "-w", *args)
        assert done.returncode == 0, done.stderr

    def forward_rules(self) -> list[str]:
        return self.run("iptables", "-w", "-S", "FORWARD").stdout.splitlines()

    def leftovers(self) -> list[str]:
        """What of ours (namespaces, links, rules) this machine still has, itself aside."""
        done = self.python("from harness.network import leftovers; print('\\n'.join(leftovers()))")
        return [n for n in done.stdout.splitlines() if n and n != self.name]


@contextlib.contextmanager
def machine(tmp: Path, docker: bool = False) -> Iterator[Machine]:
    """A :class:`Machine` for the block, removed at its end with everything started in it. With ``docker``, a
    Docker engine runs in it with its default firewall, on its own socket and data root: as on a machine whose
    IP forwarding was off, it turns forwarding on and sets the FORWARD policy to DROP, and adds its chains.
    (``nsenter --net`` rather than ``ip netns exec``, which would hide the cgroup mounts dockerd needs.)"""
    name = f"{PREFIX}{random.getrandbits(20):05x}-machine"  # ours, so leftovers() would show it
    subprocess.run(["ip", "netns", "add", name], check=True)
    m = Machine(name)
    engine: subprocess.Popen[bytes] | None = None
    state = Path(tempfile.mkdtemp(prefix="mqfw-"))  # short: the engine's sockets live under it
    try:
        m.run("ip", "link", "set", "lo", "up")
        if docker:
            m.run("sysctl", "-w", "net.ipv4.ip_forward=0")
            socket_path = state / "docker.sock"
            with open(tmp / "dockerd.log", "wb") as log:
                engine = subprocess.Popen(
                    ["nsenter", f"--net=/var/run/netns/{name}", "dockerd", "--data-root", str(state / "data"),
                     "--exec-root", str(state / "exec"), "--pidfile", str(state / "dockerd.pid"),
                     "-H", f"unix://{socket_path}"], stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
            deadline = time.monotonic() + 60
            while "-A FORWARD -j DOCKER-USER" not in m.forward_rules():
                assert engine.poll() is None and time.monotonic() < deadline, (tmp / "dockerd.log").read_text()[-2000:]
                time.sleep(0.2)
        yield m
    finally:
        if engine is not None:
            engine.terminate()  # dockerd stops the containerd it started
            try:
                engine.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(engine.pid, signal.SIGKILL)
                engine.wait(10)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)
        shutil.rmtree(state, ignore_errors=True)
