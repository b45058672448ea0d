"""SocketBase: the socket core — pipes, the socket's mailbox, blocking send/recv, bind/connect/close.

Threading: a socket is used by one application thread at a time (like libzmq). IO threads and peer
sockets never touch its state directly; they post commands (activate_read/write, attach, terminated,
hiccup, identified, stop) to ``_mailbox``, which runs them in the socket's thread at the next
send/recv/poll. Only ``_attach_remote`` may be called from another thread; it takes ``_lock`` so that
a pipe offered while the socket closes is either attached (and then terminated by close) or refused.

Hot path: ``send``/``recv`` check the mailbox (one deque truthiness test), call the type's ``xsend`` /
``xrecv`` and return (single-frame fast paths); they sleep on the mailbox fd only when the pipes are
empty/full. Waiting for input with exactly one pipe to a tcp/ipc peer, the socket also polls that
connection's OS socket and reads it in this thread through the connection's ``mqcore.engine.Inline``
(``_inline``), activating what came in itself instead of by a command to its own mailbox
(``_read_inline``); a blocking recv goes straight to that poll, without a read that would find nothing
yet. Before sleeping any other way it gives reading back to the IO thread (``_release_engine``); a
blocking recv whose connection is parked waits in ``_wait_parked``, the same wait without the checks
that case does not need. While the socket polls its connection, each send is offered to it too
(``Inline.send``). The rules between this thread and the IO thread are ``Inline``'s.
"""

from __future__ import annotations

import os
import select
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from mqcore.constants import Errno, PollEvent, SocketOption, SocketType
from mqcore.engine import BUFFER_BYTES
from mqcore.error import Again, ContextTerminated, ZMQError
from mqcore.frame import FINISHED_TRACKER, Frame
from mqcore.mailbox import Mailbox
from mqcore.options import Options
from mqcore.pipe import Msg, Pipe
from mqcore.sockets import make_impl
from mqcore.transports import endpoints

if TYPE_CHECKING:
    from mqcore.context import Context
    from mqcore.engine import Inline

Opt = SocketOption
_perf = time.perf_counter
_yield = os.sched_yield
SPIN_FLOOR_S = 4e-6  # a spin window shrunk below this is none: the wait goes straight to sleep


def _as_bytes(data: Any) -> bytes:
    t = type(data)
    if t is bytes:
        return data  # type: ignore[no-any-return]
    if t is bytearray or t is memoryview:
        return bytes(data)
    if t is Frame:
        return data.bytes  # type: ignore[no-any-return]
    if isinstance(data, str):
        raise TypeError("unicode not allowed, use send_string")
    return bytes(memoryview(data))


def _closed_op(*args: Any, **kwargs: Any) -> Any:
    raise ZMQError(Errno.ENOTSOCK)


class SocketBase:
    """The core of ``mqcore.Socket``; see ``mqcore.socket.Socket`` for the public API."""

    # Declared, so that Socket.__setattr__ knows them as attributes, not options.
    context: Context
    socket_type: SocketType

    def __init__(self, ctx: Context, socket_type: int) -> None:
        self.context = ctx
        self.socket_type = SocketType(socket_type)
        self._opts = Options(int(socket_type))
        for option, value in ctx._sockopts.items():
            try:
                self._opts.set(option, value)
            except ZMQError:
                pass
        self._impl = make_impl(int(socket_type), self._opts)
        self._xsend = self._impl.xsend
        self._xrecv = self._impl.xrecv
        self._mailbox = Mailbox()
        self._poll = select.poll()
        self._poll.register(self._mailbox.fd, select.POLLIN)
        self._inline_fd = -1  # fd of the connection polled beside the mailbox by _wait(for_input=True)
        self._inline: Inline | None = None
        self._inline_pipe: Any = None  # our end of the inline connection's pipe
        self._direct_buffer: bytearray | None = None  # Inline.read reads into it (made at first use)
        self._spin = 0.0  # seconds _poll_input polls before it sleeps (adapts; _reset_spin)
        self._reset_spin()
        self._in_parts: deque[bytes] = deque()
        self._out_parts: list[bytes] = []
        # RCVMORE is ``bool(_in_parts)``: send/recv write no attribute of the socket, so that
        # Socket.__setattr__ (pyzmq's options as attributes) never runs on their path.
        self._closed = False
        self._ctx_terminated = False
        self._lock = threading.Lock()
        self._pipes: set[Pipe] = set()
        # endpoint string -> transport objects to stop on unbind/disconnect/close
        self._endpoints: dict[str, list[Any]] = {}
        self._monitor: Any = None  # mqcore.monitor.Monitor while socket.monitor() is active
        ctx._socket_opened(self)

    # -- commands (run in the socket's thread) --------------------------------------------------------
    def _process_commands(self) -> None:
        self._mailbox.process()

    def _attach(self, pipe: Pipe, endpoint: str | None = None) -> None:
        if self._closed:
            pipe.terminate()
            return
        self._pipes.add(pipe)
        if endpoint is not None:
            self._endpoints.setdefault(endpoint, []).append(("pipe", pipe))
        self._impl.attach(pipe)
        self._xsend = self._impl.xsend  # a type may send another way with another set of pipes

    def _attach_remote(self, pipe: Pipe, endpoint: str | None = None) -> bool:
        """Offer a pipe from another thread (IO thread or inproc peer); False if the socket is closed."""
        with self._lock:
            if self._closed:
                return False
            self._mailbox.post(self._attach, pipe, endpoint)
            return True

    def _pipe_activate_read(self, pipe: Pipe) -> None:
        self._impl.read_activated(pipe)

    def _pipe_activate_write(self, pipe: Pipe) -> None:
        self._impl.write_activated(pipe)

    def _pipe_terminated(self, pipe: Pipe) -> None:
        self._pipes.discard(pipe)
        self._impl.terminated(pipe)
        if not self._closed:
            self._xsend = self._impl.xsend  # as in _attach
        if not pipe.terminated:
            pipe.terminate()  # acknowledge, so the peer's owner also forgets it

    def _pipe_hiccuped(self, pipe: Pipe) -> None:
        self._impl.hiccuped(pipe)

    def _pipe_identified(self, pipe: Pipe) -> None:
        self._impl.identified(pipe)

    def _stop(self) -> None:
        """Context termination: every blocking or later call raises ContextTerminated."""
        self._ctx_terminated = True

    # -- blocking -----------------------------------------------------------------------------------
    def _wait(self, deadline: float | None, for_input: bool = False) -> None:
        """Sleep until a command arrives or ``deadline`` passes (then raise Again); run commands.

        ``for_input``: the caller waits for a message, so the socket's one connection (if it has
        exactly one pipe, to a tcp/ipc peer with NULL/PLAIN) is polled too and read in this thread.
        """
        if self._ctx_terminated:
            raise ContextTerminated()
        mbox = self._mailbox
        mbox.sleeping = True  # Mailbox.prepare_sleep, in line: this runs once per message waited for
        if mbox.queue:
            mbox.sleeping = False
        else:
            inline = self._inline
            # The connection polled last time, if nothing changed since (else _inline_engine decides).
            if not for_input:
                inline = None
                self._release_engine()
            elif (inline is None or len(self._pipes) != 1 or self._inline_pipe not in self._pipes
                    or not inline.usable() or self._inline_pipe.peer.inline is not inline):
                inline = self._inline_engine()
            # While we poll its fd the IO thread parks the connection at its next readable event (or
            # leaves it parked); the socket's thread reads it.
            if inline is not None:
                inline.waiting = True
            poll = self._poll_input if for_input else self._poll.poll
            try:
                if deadline is None:
                    ready = poll(None)
                else:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        mbox.sleeping = False
                        raise Again()
                    ready = poll(remaining * 1000.0 + 0.5)
            finally:
                if inline is not None:
                    inline.waiting = False
            mbox.sleeping = False
            for fd, _ in ready:
                if fd == mbox.fd:
                    mbox.drain_fd()
                elif inline is not None:
                    self._read_inline(inline)
        if mbox.queue:
            mbox.process()
        if self._ctx_terminated:
            raise ContextTerminated()

    def _wait_parked(self, inline: Inline, timeout: int) -> Msg | None:
        """A blocking recv's first wait while its connection is parked (the round trip's case):
        ``_wait`` without what that case does not need (the connection's checks, a deadline).
        The message, or None: continue as usual (commands came, or nothing complete yet). Raises
        Again when RCVTIMEO (``timeout``) passes, ContextTerminated."""
        mbox = self._mailbox
        mbox.sleeping = True
        if mbox.queue or self._ctx_terminated or inline.lost:
            mbox.sleeping = False
            return None
        inline.waiting = True
        try:
            ready = self._poll_input(None if timeout < 0 else timeout)
        finally:
            inline.waiting = False
        mbox.sleeping = False
        if len(ready) == 1 and ready[0][0] == self._inline_fd:
            got = self._read_inline(inline, self._impl.xrecv_direct)
            if got is not None:
                return got
            return None if mbox.queue else self._xrecv()
        if not ready:
            raise Again()
        for fd, _ in ready:
            if fd == mbox.fd:
                mbox.drain_fd()
        return None  # commands came (the next _wait runs them), and maybe input too

    def _reset_spin(self) -> None:
        """The spin window starts at BUSY_POLL (microseconds), as set at creation or since."""
        self._spin = self._opts.busy_poll * 1e-6

    def _poll_input(self, timeout_ms: float | None) -> list[tuple[int, int]]:
        """``_poll.poll(timeout_ms)`` for a recv waiting for input, busy-polling first (BUSY_POLL).

        Sleeping costs more than the poll: a peer that sends to a sleeping thread wakes it through the
        kernel's scheduler, on another CPU by an interrupt, and on a virtual machine by a call to the
        hypervisor besides; a reply that comes while the thread still polls needs none of that. So the
        wait polls without sleeping (``poll(0)``, yielding the CPU between polls to any thread that is
        ready to run on it) for up to a window, then sleeps as before. The window adapts, as Linux's
        guest halt-polling does: a wait that ended within BUSY_POLL microseconds grows it to cover
        such a wait next time; a longer one, or a timeout, halves it, so a socket whose messages come
        seldom soon stops spinning. BUSY_POLL=0 turns it off.
        """
        poll = self._poll.poll
        window = self._spin
        start = _perf()
        if window:
            end = start + window
            if timeout_ms is not None:
                end = min(end, start + timeout_ms / 1000.0)
            while True:
                ready = poll(0)
                if ready:
                    return ready
                _yield()
                now = _perf()
                if now >= end:
                    break
            if timeout_ms is not None:
                timeout_ms = max(0.0, timeout_ms - (now - start) * 1000.0)
        ready = poll(timeout_ms)
        waited = _perf() - start
        limit = self._opts.busy_poll * 1e-6
        if ready and waited <= limit:
            self._spin = min(limit, max(window * 2.0, waited * 2.0))
        else:
            window *= 0.5
            self._spin = window if window >= SPIN_FLOOR_S else 0.0
        return ready

    def _read_inline(self, inline: Inline, take: Any = None) -> Msg | None:
        """Read the connection in this thread; what it delivers is activated here, not by command.
        ``take``: see ``Inline.read``; the message it took, else None.

        The pipe is marked awake while the connection writes (so its flush posts nothing), then put
        back to sleep by ``check_read`` if nothing came: the same protocol as a read that found it empty.
        """
        pipe = self._inline_pipe
        pipe.in_active = True
        buffer = self._direct_buffer
        if buffer is None:
            buffer = self._direct_buffer = bytearray(BUFFER_BYTES)
        got = inline.read(buffer, take)
        if got is not None:
            # The pipe got nothing: armed again as the xrecv before the wait left it (check_read).
            pipe.in_active = False
            if pipe.inbound:
                pipe.in_active = True
                self._impl.read_activated(pipe)
            return got
        if pipe.inbound or pipe.check_read():
            self._impl.read_activated(pipe)
        return None

    def _inline_engine(self) -> Inline | None:
        """The connection behind the socket's only pipe, with its fd registered in ``_poll``; else None.

        Reading in the caller's thread saves the IO thread's wake-up and its hand-over per message
        (see ``mqcore.engine.Inline``); with several pipes fair queuing stays with the IO threads.
        """
        inline = None
        pipes = self._pipes
        if len(pipes) == 1:
            for pipe in pipes:
                inline = pipe.peer.inline
            if inline is not None and not inline.usable():
                inline = None
        if inline is not self._inline:
            self._release_engine()
            if inline is not None:
                self._poll.register(inline.fd, select.POLLIN)
                self._inline_fd = inline.fd
                self._inline = inline
                self._inline_pipe = pipe
        return inline

    def _release_engine(self) -> None:
        """Stop polling the inline connection's fd and let its IO thread read again if it parked."""
        inline = self._inline
        if inline is None:
            return
        self._inline = self._inline_pipe = None
        self._poll.unregister(self._inline_fd)
        self._inline_fd = -1
        inline.release()

    def _read_parked(self) -> None:
        """If our connection is parked (its IO thread leaves reading to us), read what the OS holds."""
        inline = self._inline
        if inline is not None and (inline.parked or inline.backlog):
            self._read_inline(inline)

    @staticmethod
    def _deadline(timeout_ms: int) -> float | None:
        return None if timeout_ms < 0 else time.monotonic() + timeout_ms / 1000.0

    # -- messages -----------------------------------------------------------------------------------
    def _send_msg(self, msg: Msg, flags: int) -> None:
        if self._mailbox.queue:
            self._mailbox.process()
        inline = self._inline
        if inline is not None and inline.send(self._impl, self._inline_pipe, msg):
            return
        if self._xsend(msg):
            return
        if self._ctx_terminated:
            raise ContextTerminated()
        timeout = self._opts.sndtimeo
        if flags & 1 or timeout == 0:
            raise Again()
        deadline = self._deadline(timeout)
        while True:
            self._wait(deadline)
            if self._xsend(msg):
                return

    def _recv_msg(self, flags: int) -> Msg:
        if self._mailbox.queue:
            self._mailbox.process()
        msg = self._xrecv()
        if msg is not None:
            return msg
        return self._recv_wait(flags)

    def _recv_wait(self, flags: int) -> Msg:
        """``_recv_msg`` after the queued-message attempt failed: read inline, or wait."""
        timeout = self._opts.rcvtimeo
        blocking = not flags & 1 and timeout != 0
        inline = self._inline
        if inline is not None and blocking and inline.parked and not inline.backlog:
            msg = self._wait_parked(inline, timeout)
            if msg is not None:
                return msg
        # A blocking wait polls the parked connection's fd anyway; only decoded messages a full pipe
        # refused (backlog) or a non-blocking call need the read now.
        elif inline is not None and (inline.backlog or (inline.parked and not blocking)):
            self._read_inline(inline)
            self._mailbox.process()
            msg = self._xrecv()
            if msg is not None:
                return msg
        if self._ctx_terminated:
            raise ContextTerminated()
        if not blocking:
            raise Again()
        deadline = None if timeout < 0 else time.monotonic() + timeout / 1000.0  # _deadline, in line
        while True:
            self._wait(deadline, True)
            msg = self._xrecv()
            if msg is not None:
                return msg

    def send(self, data: Any, flags: int = 0, copy: bool = True, track: bool = False,
             routing_id: int | None = None, group: str | None = None) -> Any:
        """Send one frame; with SNDMORE the message continues with the next call.

        Raises Again (NOBLOCK or SNDTIMEO at the HWM), ZMQError(EFSM) out of REQ/REP order,
        ZMQError(EHOSTUNREACH) for an unknown ROUTER peer with ROUTER_MANDATORY, ContextTerminated.
        """
        if type(data) is not bytes:
            data = _as_bytes(data)
        parts = self._out_parts
        if not flags and not parts:
            # Fast path: one frame, blocking, nothing pending (the common case).
            if self._mailbox.queue:
                self._mailbox.process()
            inline = self._inline
            if inline is not None and inline.send(self._impl, self._inline_pipe, [data]):
                return FINISHED_TRACKER if track else None
            if not self._xsend([data]):
                self._send_msg([data], flags)
            return FINISHED_TRACKER if track else None
        if flags & 2:
            if not parts:
                self._impl.check_send_start()  # EFSM at the first frame, like libzmq
            parts.append(data)
            return None
        if parts:
            self._send_msg([*parts, data], flags)  # on error the caller may retry the last frame
            parts.clear()
        else:
            self._send_msg([data], flags)
        return FINISHED_TRACKER if track else None

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> Any:
        """Receive one frame (bytes, or a Frame with copy=False); RCVMORE tells if more follow.

        Raises Again (NOBLOCK, or RCVTIMEO expired), ZMQError(EFSM), ContextTerminated.
        """
        parts = self._in_parts
        if parts:
            frame = parts.popleft()
            more = bool(parts)
        else:
            # Fast path: a single-frame message already queued (the common case).
            if self._mailbox.queue:
                self._mailbox.process()
            msg = self._xrecv()
            if msg is not None and len(msg) == 1 and copy:
                return msg[0]
            if msg is None:
                msg = self._recv_wait(flags)
            frame = msg[0]
            if len(msg) == 1:
                more = False
            else:
                parts.extend(msg[1:])
                more = True
        if copy:
            return frame
        f = Frame(frame)
        f.more = more
        f.properties = self._in_properties()
        return f

    def _in_properties(self) -> dict[str, str] | None:
        """The metadata of the connection the last message came in on (for Frames), None for inproc."""
        impl = self._impl
        fq = getattr(impl, "fq", None)
        pipe = fq.last_pipe if fq is not None else getattr(impl, "last_pipe", None)
        return None if pipe is None else pipe.properties  # type: ignore[no-any-return]

    # -- readiness (Poller, EVENTS) -------------------------------------------------------------------
    def _events(self) -> int:
        if self._closed:
            return 0
        self._read_parked()
        self._mailbox.process()
        mask = 0
        if self._in_parts or self._impl.has_in():
            mask |= PollEvent.POLLIN
        if self._impl.has_out():
            mask |= PollEvent.POLLOUT
        return mask

    # -- options ----------------------------------------------------------------------------------------
    def setsockopt(self, option: int, value: Any) -> None:
        """Set an option by number (see ``SocketOption``); ZMQError(EINVAL) if unknown or invalid."""
        if self._closed:
            raise ZMQError(Errno.ENOTSOCK)
        if isinstance(value, str):
            raise TypeError(f"option {option} takes bytes or int, not str; use setsockopt_string")
        if option not in SocketOption._value2member_map_ and not isinstance(value, int):
            raise TypeError(f"unknown socket option {option} takes an int, not {type(value).__name__}")
        if self._impl.setsockopt(option, value):
            return
        if option in (Opt.SUBSCRIBE, Opt.UNSUBSCRIBE):
            raise ZMQError(Errno.EINVAL)
        self._opts.set(option, value)
        if option == Opt.BUSY_POLL:
            self._reset_spin()

    def getsockopt(self, option: int) -> Any:
        """Read an option by number (RCVMORE, EVENTS, FD, TYPE and LAST_ENDPOINT included)."""
        if self._closed:
            raise ZMQError(Errno.ENOTSOCK)
        if option == Opt.RCVMORE:
            return int(bool(self._in_parts))
        if option == Opt.EVENTS:
            mask = self._events()
            self._release_engine()  # the FD is the mailbox's: the IO thread must read for it
            self._mailbox.sleeping = True  # edge-style FD: later commands make FD readable
            return mask
        if option == Opt.FD:
            self._release_engine()
            return self._mailbox.fd
        return self._opts.get(option)

    # -- endpoints --------------------------------------------------------------------------------------
    def bind(self, addr: str) -> None:
        """Listen on ``addr`` (tcp://host:port|*, ipc://path|@name, inproc://name).

        Raises ZMQError(EADDRINUSE), ZMQError(EINVAL) for a malformed address,
        ZMQError(EPROTONOSUPPORT) for an unknown transport.
        """
        self._check_open()
        resolved = endpoints.bind(self, addr)
        self._opts.last_endpoint = resolved

    def connect(self, addr: str) -> None:
        """Connect to ``addr`` asynchronously; messages queue until the connection is up."""
        self._check_open()
        endpoints.connect(self, addr)
        self._opts.last_endpoint = addr

    def unbind(self, addr: str) -> None:
        """Stop listening on ``addr`` (as returned by LAST_ENDPOINT) and drop its connections."""
        self._check_open()
        endpoints.unbind(self, addr)

    def disconnect(self, addr: str) -> None:
        """Drop the connection made by ``connect(addr)``."""
        self._check_open()
        endpoints.disconnect(self, addr)

    def _check_open(self) -> None:
        if self._closed:
            raise ZMQError(Errno.ENOTSOCK)
        if self._ctx_terminated:
            raise ContextTerminated()

    # -- closing -----------------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, linger: int | None = None) -> None:
        """Close the socket. Queued outbound messages keep flowing for up to LINGER ms (-1: until sent,
        which makes ``Context.term`` wait); inproc messages already queued stay readable by the peer."""
        if self._closed:
            return
        if linger is not None:
            self._opts.linger = linger
        with self._lock:
            self._closed = True
        self._mailbox.process()  # attach offered pipes, so they are terminated below
        endpoints.close_all(self)
        if self._monitor is not None:
            self._monitor.stop()
            self._monitor = None
        linger_ms = self._opts.linger
        for pipe in list(self._pipes):
            pipe.linger = linger_ms
            pipe.terminate()
        self._pipes.clear()
        self._xsend = self._xrecv = _closed_op  # type: ignore[method-assign]
        self._release_engine()
        self._poll.unregister(self._mailbox.fd)
        self._mailbox.close()
        self.context._socket_closed(self)
