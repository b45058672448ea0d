"""The core NATS producer's hand-over to the client's event loop (``_NatsProducer._drain``), without a server."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from harness.drivers.nats import _NatsProducer


def test_a_drain_that_runs_while_another_awaits_loses_and_reorders_nothing() -> None:
    loop = asyncio.new_event_loop()
    published: list[bytes] = []
    producer: Any = None

    class Client:
        async def publish(self, subject: str, body: bytes) -> None:
            published.append(body)
            if body == b"2":
                # The client's buffer is full: it awaits its flush, and meanwhile the sending thread queues
                # more, which schedules a second drain that runs during this await.
                for later in (b"5", b"6"):
                    producer.send(bytearray(later))
                await asyncio.sleep(0)

    session = SimpleNamespace(nc=Client(), errors=[], check=lambda: None,
                              submit=lambda coro: loop.create_task(coro))
    producer = _NatsProducer(session, "subject")  # type: ignore[arg-type]
    try:
        for body in (b"0", b"1", b"2", b"3", b"4"):
            producer.send(bytearray(body))
        for _ in range(10):
            loop.run_until_complete(asyncio.sleep(0))
    finally:
        loop.close()
    assert session.errors == []
    assert published == [b"0", b"1", b"2", b"3", b"4", b"5", b"6"]
