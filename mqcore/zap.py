"""ZapClient: one engine's ZAP request (RFC 27) to the handler bound at inproc://zeromq.zap.01.

Owned by the engine's IO thread. Like libzmq's session, it joins the handler socket through a pipe
pair made from the context's inproc registry: our end is owned by this object (its commands run in
the IO thread's mailbox), the other end is offered to the handler socket as if an inproc DEALER had
connected. The request goes out as ``[b"", *frames]`` (the delimiter a REQ/REP handler expects) and
the reply arrives as the handler wrote it; nothing blocks the IO thread. One request per object; the
pipe is closed once the reply arrived, or when the engine goes away. If the handler socket closes
before it answers, ``on_lost`` is called (the engine then drops the connection).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import TYPE_CHECKING

from mqcore.pipe import Pipe, pipe_pair
from mqcore.zmtp import ZAP_ENDPOINT

if TYPE_CHECKING:
    from mqcore.context import Context
    from mqcore.io_thread import IoThread

ZAP_NAME = ZAP_ENDPOINT[len("inproc://"):]

_request_ids = itertools.count(1)


def handler_bound(ctx: Context) -> bool:
    """Is a ZAP handler bound in ``ctx`` right now? (libzmq asks the same when a connection starts)."""
    with ctx._lock:
        return ZAP_NAME in ctx._inproc_bound


def next_request_id() -> bytes:
    """A request id unique in this process, so replies can never be confused between connections."""
    return b"%d" % next(_request_ids)


class ZapClient:
    """Sends one ZAP request and hands the reply to ``on_reply`` (all in the IO thread)."""

    def __init__(self, ctx: Context, io: IoThread, on_reply: Callable[[list[bytes]], None],
                 on_lost: Callable[[], None]) -> None:
        self._ctx = ctx
        self._io = io
        self._on_reply = on_reply
        self._on_lost = on_lost
        self._pipe: Pipe | None = None
        self._done = False

    def send(self, frames: list[bytes]) -> bool:
        """Deliver the request; False if no handler is bound (or it is closing) any more."""
        ctx = self._ctx
        with ctx._lock:
            handler = ctx._inproc_bound.get(ZAP_NAME)
            if handler is None:
                return False
            ours, theirs = pipe_pair(self, self._io.mailbox, 0, handler, handler._mailbox, 0)
            if not handler._attach_remote(theirs):
                return False
        self._pipe = ours
        if not ours.send([b"", *frames]):
            return False
        if ours.check_read():  # arms activate_read: the handler's flush wakes us with the reply
            self._io.post(self._pipe_activate_read, ours)
        return True

    def close(self) -> None:
        """Forget the request (the engine closed, or the reply was taken)."""
        self._done = True
        if self._pipe is not None and not self._pipe.terminated:
            self._pipe.terminate()

    # -- pipe owner protocol (commands run in the IO thread) -------------------------------------------
    def _pipe_activate_read(self, pipe: Pipe) -> None:
        msg = pipe.read()
        if msg is None or self._done:
            return
        self.close()
        self._on_reply(msg)

    def _pipe_activate_write(self, pipe: Pipe) -> None:
        pass

    def _pipe_hiccuped(self, pipe: Pipe) -> None:
        pass

    def _pipe_terminated(self, pipe: Pipe) -> None:
        # A handler that replies and closes at once (one REP per request) may end the pipe before
        # our activate_read ran: the reply is still queued in it.
        msg = None if self._done else pipe.read()
        if not pipe.terminated:
            pipe.terminate()
        if self._done:
            return
        self._done = True
        if msg is not None:
            self._on_reply(msg)
        else:
            self._on_lost()
