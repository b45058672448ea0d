"""What the network tests share: skip (or, in CI, fail) without root or toxiproxy, and find leftovers."""

from __future__ import annotations

import os
from typing import Any

import pytest

from harness.network import find_binary, leftovers


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
