"""Entering a network namespace from inside a process, and running a command in one.

Python 3.11 has no ``os.setns``: ``enter`` calls libc's ``setns(2)`` through ctypes on the namespace's
bind mount under ``/var/run/netns`` (where ``ip netns add`` puts it). A worker calls it first thing, before
it creates any socket: sockets stay in the namespace they were created in.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

NETNS_DIR = "/var/run/netns"
_CLONE_NEWNET = 0x40000000


class NamespaceError(OSError):
    """A namespace that cannot be entered (missing, or no permission); one sentence."""


def enter(namespace: str) -> None:
    """Move the calling thread's process into ``namespace`` (its network stack from now on)."""
    path = os.path.join(NETNS_DIR, namespace)
    libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as exc:
        raise NamespaceError(f"network namespace {namespace} cannot be opened ({exc.strerror}); "
                             "was the run's network torn down already?") from None
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise NamespaceError(f"cannot enter network namespace {namespace}: {os.strerror(err)} (needs root)")
    finally:
        os.close(fd)


def exec_prefix(namespace: str | None) -> tuple[str, ...]:
    """The argv prefix that runs a command inside ``namespace`` (empty for the root namespace)."""
    return () if namespace is None else ("ip", "netns", "exec", namespace)
