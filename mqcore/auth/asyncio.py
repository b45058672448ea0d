"""AsyncioAuthenticator: an Authenticator answering ZAP requests in a task on the running event loop
(pyzmq's ``zmq.auth.asyncio``). Use it with an ``mqcore.asyncio.Context``; ``start()`` needs a
running loop, and the task is the only user of the ZAP socket until ``stop()`` cancels it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import mqcore
from mqcore.asyncio import Poller
from mqcore.auth.base import Authenticator

__all__ = ["AsyncioAuthenticator"]


class AsyncioAuthenticator(Authenticator):
    """Serve the ZAP policy from an asyncio task; ``start``/``stop`` as in pyzmq."""

    def __init__(self, context: mqcore.Context | None = None, loop: Any = None,
                 encoding: str = "utf-8", log: logging.Logger | None = None) -> None:
        if context is None:
            import mqcore.asyncio

            context = mqcore.asyncio.Context.instance()
        super().__init__(context, encoding, log)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Bind the ZAP socket and start serving on the running loop.

        ZMQError(EADDRINUSE) if a handler is bound; RuntimeError if no event loop is running."""
        loop = asyncio.get_running_loop()
        super().start()
        self._task = loop.create_task(self._serve())

    def stop(self) -> None:
        """Stop serving and close the ZAP socket (no-op if not started)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        super().stop()

    async def _serve(self) -> None:
        sock = self.zap_socket
        assert sock is not None
        poller = Poller()
        poller.register(sock, mqcore.POLLIN)
        while True:
            try:
                await poller.poll()
                msg = sock.recv_multipart(mqcore.NOBLOCK)
            except mqcore.Again:
                continue
            except mqcore.ContextTerminated:
                return
            try:
                await self.handle_zap_message(msg)
            except Exception:  # one bad request must not stop the handler
                self.log.exception("mqcore ZAP handler failed on %r", msg)
