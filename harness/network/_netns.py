"""Entering a network namespace from inside a process, and running a command in one.

Python 3.11 has no ``os.setns``: ``enter`` calls libc's ``setns(2)`` through ctypes on the namespace's
bind mount under ``/var/run/netns`` (where ``ip netns add`` puts it). A worker calls it first thing, before
it creates any socket: sockets stay in the namespace they were created in.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

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


def made_in(namespace: str | None, make: Callable[[], T]) -> T:
    """``make()`` called by a short-lived thread inside ``namespace`` (this one's when None): a socket it
    creates stays in that namespace, and the calling thread's own namespace never changes."""
    if namespace is None:
        return make()
    got: dict[str, object] = {}

    def run() -> None:
        try:
            enter(namespace)  # this thread only: setns(2) moves the calling thread
            got["value"] = make()
        except BaseException as exc:  # noqa: BLE001 - raised again in the calling thread
            got["error"] = exc

    thread = threading.Thread(target=run, name=f"netns-{namespace}", daemon=True)
    thread.start()
    thread.join()
    if "error" in got:
        raise got["error"]  # type: ignore[misc]
    return got["value"]  # type: ignore[return-value]
