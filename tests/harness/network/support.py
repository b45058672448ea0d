"""What the network tests share: skip (or, in CI, fail) without root or toxiproxy, and find leftovers."""

from __future__ import annotations

import os

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


def snapshot() -> tuple[set[str], set[int]]:
    """Our kind of names and toxiproxy servers present now (another run may be going on beside a test)."""
    return set(leftovers()), toxiproxy_pids()


def assert_nothing_left(before: tuple[set[str], set[int]]) -> None:
    assert set(leftovers()) - before[0] == set(), "namespaces or links of ours were left"
    assert toxiproxy_pids() - before[1] == set(), "a toxiproxy-server of ours was left running"
