"""Fixtures for mqcore-only tests: a context destroyed after the test, and a bound-pair helper."""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mqcore

TIMEOUT_MS = 5000


@pytest.fixture
def ctx() -> Iterator[mqcore.Context]:
    c = mqcore.Context()
    yield c
    c.destroy(linger=0)


def endpoint(transport: str) -> str:
    if transport == "tcp":
        return "tcp://127.0.0.1:*"
    if transport == "ipc":
        return "ipc://" + os.path.join(tempfile.gettempdir(), f"mqt-{uuid.uuid4().hex[:10]}.ipc")
    return f"inproc://t-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def make_pair(ctx: mqcore.Context) -> Callable[..., tuple[Any, Any]]:
    """make_pair(TYPE_A, TYPE_B, transport) -> (a bound, b connected), both with bounded waits."""

    def make(type_a: int, type_b: int, transport: str = "inproc", **opts: Any) -> tuple[Any, Any]:
        a, b = ctx.socket(type_a), ctx.socket(type_b)
        for s in (a, b):
            s.linger = 0
            s.rcvtimeo = TIMEOUT_MS
            s.sndtimeo = TIMEOUT_MS
            for name, value in opts.items():
                setattr(s, name, value)
        a.bind(endpoint(transport))
        b.connect(a.last_endpoint.decode())
        return a, b

    return make
