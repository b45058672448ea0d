"""ThreadAuthenticator: an Authenticator answering ZAP requests in a background thread (pyzmq's names).

``start()`` binds inproc://zeromq.zap.01 in the caller's thread (so connections made after it
returns are checked) and then hands the socket to the thread, which alone uses it until it exits.
``stop()`` wakes the thread through a private pipe, waits for it, and the thread closes the socket.
The thread keeps one event loop of its own to run ``handle_zap_message`` (a coroutine, since a CURVE
credentials callback may be one); requests are answered one at a time.
Configuration calls (``allow``, ``configure_plain`` ...) may come from any thread at any time.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading

import mqcore
from mqcore.auth.base import Authenticator

__all__ = ["ThreadAuthenticator"]


class ThreadAuthenticator(Authenticator):
    """Run the ZAP handler in a daemon thread; ``start``/``stop``/``is_alive`` as in pyzmq."""

    def __init__(self, context: mqcore.Context | None = None, encoding: str = "utf-8",
                 log: logging.Logger | None = None) -> None:
        super().__init__(context, encoding, log)
        self.thread: threading.Thread | None = None
        self._wake_r = self._wake_w = -1

    def start(self) -> None:
        """Bind the ZAP socket and start the thread. ZMQError(EADDRINUSE) if a handler is bound."""
        super().start()
        self._wake_r, self._wake_w = os.pipe()
        self.thread = threading.Thread(target=self._run, name="mqcore-zap", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """Stop the thread and close the ZAP socket (no-op if not started)."""
        thread = self.thread
        if thread is None:
            return
        os.write(self._wake_w, b"x")
        thread.join()
        for fd in (self._wake_r, self._wake_w):
            os.close(fd)
        self._wake_r = self._wake_w = -1
        self.thread = None

    def is_alive(self) -> bool:
        """Is the handler thread running?"""
        return self.thread is not None and self.thread.is_alive()

    def _run(self) -> None:
        sock = self.zap_socket
        assert sock is not None
        poller = mqcore.Poller()
        poller.register(sock, mqcore.POLLIN)
        poller.register(self._wake_r, mqcore.POLLIN)
        loop = asyncio.new_event_loop()
        try:
            while True:
                events = dict(poller.poll())
                if self._wake_r in events:
                    break
                if sock in events:
                    self._handle_one(sock, loop)
        except mqcore.ContextTerminated:
            pass
        finally:
            loop.close()
            super().stop()

    def _handle_one(self, sock: mqcore.Socket, loop: asyncio.AbstractEventLoop) -> None:
        msg = sock.recv_multipart()
        try:
            loop.run_until_complete(self.handle_zap_message(msg))
        except mqcore.ContextTerminated:
            raise
        except Exception:  # one bad request must not stop the handler
            self.log.exception("mqcore ZAP handler failed on %r", msg)
