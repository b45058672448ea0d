"""Fixtures for interop tests: one mqcore context and one pyzmq (libzmq) context per test, and a
helper that makes a connected pair with either library on either side and either side binding."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import zmq

import mqcore

TIMEOUT_MS = 5000
# The ipc endpoints' files, which some interop tests leave (21 in /tmp after one CI run), go when the test
# process ends, however it ends: made when this file is collected, a session fixture's teardown missed the
# folder of a run interrupted before any interop test ran.
_IPC_DIR = tempfile.mkdtemp(prefix="mqbench-interop-")


@atexit.register
def _remove_ipc_files(owner: int = os.getpid()) -> None:
    if os.getpid() == owner:  # not in a forked child that exits through atexit
        shutil.rmtree(_IPC_DIR, ignore_errors=True)


@dataclass
class Libs:
    mq: mqcore.Context
    zmq: zmq.Context

    def ctx(self, lib: str) -> Any:
        return self.mq if lib == "mq" else self.zmq

    def mod(self, lib: str) -> Any:
        return mqcore if lib == "mq" else zmq


@pytest.fixture
def libs() -> Iterator[Libs]:
    mctx = mqcore.Context()
    zctx = zmq.Context()
    yield Libs(mctx, zctx)
    mctx.destroy(linger=0)
    zctx.destroy(linger=0)


def endpoint_for(transport: str) -> str:
    if transport == "tcp":
        return "tcp://127.0.0.1:*"
    return "ipc://" + os.path.join(_IPC_DIR, f"mqi-{uuid.uuid4().hex[:10]}.ipc")


def make_socket(libs: Libs, lib: str, type_name: str, **opts: Any) -> Any:
    mod = libs.mod(lib)
    s = libs.ctx(lib).socket(getattr(mod, type_name))
    s.linger = 0
    s.rcvtimeo = TIMEOUT_MS
    s.sndtimeo = TIMEOUT_MS
    for name, value in opts.items():
        setattr(s, name, value)
    return s


def bound_pair(libs: Libs, a: tuple[str, str], b: tuple[str, str], transport: str,
               a_binds: bool = True, a_opts: dict[str, Any] | None = None,
               b_opts: dict[str, Any] | None = None) -> tuple[Any, Any]:
    """Two sockets (lib, TYPE) joined over ``transport``; ``a`` binds unless ``a_binds`` is False."""
    sa = make_socket(libs, a[0], a[1], **(a_opts or {}))
    sb = make_socket(libs, b[0], b[1], **(b_opts or {}))
    binder, connecter = (sa, sb) if a_binds else (sb, sa)
    binder.bind(endpoint_for(transport))
    connecter.connect(binder.last_endpoint.decode())
    return sa, sb
