"""mqcore.asyncio: Context, Socket and Poller whose operations are awaitable (pyzmq's ``zmq.asyncio``).

An operation is first tried at once without blocking; if it would block, it becomes a task that
waits for the socket's mailbox fd (the wake-up fd every command to the socket writes to while the
socket "sleeps") through ``loop.add_reader`` and then retries — no busy loop, no extra thread.
``send``/``recv``/... return futures (already done when the operation completed at once), so they
can be awaited or, as with pyzmq, left to complete. RCVTIMEO/SNDTIMEO bound the waits (Again).

Invariants: one ``_FdWaiters`` per event loop owns every ``add_reader``/``add_writer`` this module
makes and fans one readiness callback out to all futures waiting on that fd, so a socket awaited by
several tasks and pollers at once never has its callback replaced. A socket is used from its loop's
thread only. Closing a socket cancels what still waits on it.
"""

from __future__ import annotations

import asyncio
import json
import pickle
import select
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import mqcore
from mqcore.constants import Errno
from mqcore.error import Again, ZMQError
from mqcore.poller import POLLERR, POLLIN, POLLOUT, _fileno
from mqcore.socket_base import SocketBase

__all__ = ["Context", "Socket", "Poller"]

T = TypeVar("T")
_NOBLOCK = 1


class _FdWaiters:
    """Readiness futures per fd for one loop (see module comment)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.waiting: dict[tuple[int, str], list[asyncio.Future[None]]] = {}

    def wait(self, fd: int, kind: str = "r") -> asyncio.Future[None]:
        fut: asyncio.Future[None] = self.loop.create_future()
        key = (fd, kind)
        futures = self.waiting.setdefault(key, [])
        if not futures:
            add = self.loop.add_reader if kind == "r" else self.loop.add_writer
            add(fd, self._fire, key)
        futures.append(fut)
        fut.add_done_callback(lambda f: self._forget(key, f))
        return fut

    def _unwatch(self, key: tuple[int, str]) -> None:
        remove = self.loop.remove_reader if key[1] == "r" else self.loop.remove_writer
        remove(key[0])

    def _fire(self, key: tuple[int, str]) -> None:
        futures = self.waiting.pop(key, [])
        self._unwatch(key)
        for fut in futures:
            if not fut.done():
                fut.set_result(None)

    def _forget(self, key: tuple[int, str], fut: asyncio.Future[None]) -> None:
        futures = self.waiting.get(key)
        if futures is not None and fut in futures:
            futures.remove(fut)
            if not futures:
                del self.waiting[key]
                self._unwatch(key)

    def cancel_fd(self, fd: int) -> None:
        for kind in ("r", "w"):
            for fut in self.waiting.pop((fd, kind), []):
                fut.cancel()
            self._unwatch((fd, kind))


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _FdWaiters] = weakref.WeakKeyDictionary()


def _waiters(loop: asyncio.AbstractEventLoop | None = None) -> _FdWaiters:
    loop = loop or asyncio.get_running_loop()
    w = _by_loop.get(loop)
    if w is None:
        w = _by_loop[loop] = _FdWaiters(loop)
    return w


def _arm(sock: SocketBase, waiters: _FdWaiters) -> asyncio.Future[None] | None:
    """A future that completes when a command reaches ``sock``; None if one is already queued."""
    if sock._closed:
        raise ZMQError(Errno.ENOTSOCK)
    sock._release_engine()  # we wait on the mailbox fd only: the IO thread must read for us
    if not sock._mailbox.prepare_sleep():
        return None
    return waiters.wait(sock._mailbox.fd)


def _same(value: T) -> T:
    return value


def _then(inner: asyncio.Future[Any], transform: Callable[[Any], T]) -> asyncio.Future[T]:
    """A future of ``transform(inner's result)``: done at once if ``inner`` is; cancelling it
    cancels ``inner`` (so a cancelled recv_string takes no message)."""
    out: asyncio.Future[T] = inner.get_loop().create_future()

    def settle(done: asyncio.Future[Any]) -> None:
        if out.done():
            return
        if done.cancelled():
            out.cancel()
        elif done.exception() is not None:
            out.set_exception(done.exception())  # type: ignore[arg-type]
        else:
            try:
                out.set_result(transform(done.result()))
            except Exception as exc:
                out.set_exception(exc)

    if inner.done():
        settle(inner)
    else:
        inner.add_done_callback(settle)
        out.add_done_callback(lambda o: inner.cancel() if o.cancelled() else None)
    return out


class Socket(mqcore.Socket):
    """An mqcore socket with awaitable send/recv (pyzmq's ``zmq.asyncio.Socket``)."""

    def _attempt(self, op: Callable[[], T], timeout_ms: int) -> asyncio.Future[T]:
        """A plain future of ``op()`` (as pyzmq's: ``cancel()`` makes it done at once); a task
        retries ``op`` when it would block, and never runs it once the future is cancelled, so a
        cancelled recv takes no message."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[T] = loop.create_future()
        try:
            fut.set_result(op())
            self._wake_for_parts(loop)
        except Again:
            if timeout_ms == 0:
                fut.set_exception(Again())
                return fut
            task = loop.create_task(self._retry(op, timeout_ms, fut))
            fut.add_done_callback(lambda f: task.cancel() if f.cancelled() else None)
        except Exception as exc:
            fut.set_exception(exc)
        return fut

    def _wake_for_parts(self, loop: asyncio.AbstractEventLoop) -> None:
        """A receive left frames of its message queued: wake the receivers waiting on the mailbox,
        which no command will wake (the frames are already ours)."""
        if self._in_parts:
            waiters = _by_loop.get(loop)
            key = (self._mailbox.fd, "r")
            if waiters is not None and key in waiters.waiting:
                waiters._fire(key)

    async def _retry(self, op: Callable[[], T], timeout_ms: int, out: asyncio.Future[T]) -> None:
        loop = asyncio.get_running_loop()
        waiters = _waiters(loop)
        deadline = None if timeout_ms < 0 else loop.time() + timeout_ms / 1000.0
        while not out.done():
            fut = _arm(self, waiters)
            if fut is not None:
                remaining = None if deadline is None else max(0.0, deadline - loop.time())
                try:
                    await asyncio.wait_for(fut, remaining)
                except TimeoutError:
                    out.set_exception(Again())  # (sleeping stays set: at worst one spurious wake-up)
                    return
                except asyncio.CancelledError:
                    out.cancel()  # the socket was closed (or the future cancelled)
                    raise
                self._mailbox.drain_fd()  # the fd fired: every waiter on it was woken
            if out.done():
                return  # cancelled while waiting: leave the message for the next receiver
            try:
                out.set_result(op())
                self._wake_for_parts(loop)
            except Again:
                if deadline is not None and loop.time() >= deadline:
                    out.set_exception(Again())
            except Exception as exc:
                out.set_exception(exc)

    # -- awaitable API (futures) ---------------------------------------------------------------------
    def send(self, data: Any, flags: int = 0, copy: bool = True, track: bool = False,  # type: ignore[override]
             routing_id: int | None = None, group: str | None = None) -> asyncio.Future[None]:
        """Send one frame (SNDMORE continues the message); a future that raises Again after SNDTIMEO."""
        if not isinstance(data, (bytes, bytearray, memoryview)) and not hasattr(data, "bytes"):
            if isinstance(data, str):
                raise TypeError("unicode not allowed, use send_string")
        blocking = not flags & _NOBLOCK
        return self._attempt(lambda: SocketBase.send(self, data, flags | _NOBLOCK),
                             self._opts.sndtimeo if blocking else 0)

    def recv(self, flags: int = 0, copy: bool = True, track: bool = False) -> asyncio.Future[Any]:  # type: ignore[override]
        """Receive one frame; a future that raises Again after RCVTIMEO (at once with NOBLOCK)."""
        blocking = not flags & _NOBLOCK
        return self._attempt(lambda: SocketBase.recv(self, flags | _NOBLOCK, copy),
                             self._opts.rcvtimeo if blocking else 0)

    def send_multipart(self, msg_parts: Sequence[Any], flags: int = 0, copy: bool = True,  # type: ignore[override]
                       track: bool = False, **kwargs: Any) -> asyncio.Future[None]:
        """Send a whole multipart message atomically."""
        parts = list(msg_parts)
        blocking = not flags & _NOBLOCK
        return self._attempt(lambda: mqcore.Socket.send_multipart(self, parts, flags | _NOBLOCK),
                             self._opts.sndtimeo if blocking else 0)

    def recv_multipart(self, flags: int = 0, copy: bool = True,  # type: ignore[override]
                       track: bool = False) -> asyncio.Future[list[Any]]:
        """Receive all frames of the next message."""
        blocking = not flags & _NOBLOCK
        return self._attempt(lambda: mqcore.Socket.recv_multipart(self, flags | _NOBLOCK, copy),
                             self._opts.rcvtimeo if blocking else 0)

    def send_string(self, u: str, flags: int = 0, copy: bool = True,  # type: ignore[override]
                    encoding: str = "utf-8", **kwargs: Any) -> asyncio.Future[None]:
        if not isinstance(u, str):
            raise TypeError("str objects only")
        return self.send(u.encode(encoding), flags)

    def recv_string(self, flags: int = 0, encoding: str = "utf-8") -> asyncio.Future[str]:  # type: ignore[override]
        return self._recv_as(flags, lambda b: b.decode(encoding))

    def recv_json(self, flags: int = 0, **kwargs: Any) -> asyncio.Future[Any]:  # type: ignore[override]
        return self._recv_as(flags, lambda b: json.loads(b.decode("utf-8"), **kwargs))

    def recv_pyobj(self, flags: int = 0) -> asyncio.Future[Any]:  # type: ignore[override]
        return self._recv_as(flags, pickle.loads)

    def recv_serialized(self, deserialize: Any, flags: int = 0,  # type: ignore[override]
                        copy: bool = True) -> asyncio.Future[Any]:
        blocking = not flags & _NOBLOCK
        return self._attempt(
            lambda: deserialize(mqcore.Socket.recv_multipart(self, flags | _NOBLOCK, copy)),
            self._opts.rcvtimeo if blocking else 0)

    def _recv_as(self, flags: int, transform: Callable[[bytes], T]) -> asyncio.Future[T]:
        # one future whose op receives and transforms: a cancelled future took no message
        blocking = not flags & _NOBLOCK
        return self._attempt(lambda: transform(SocketBase.recv(self, flags | _NOBLOCK)),
                             self._opts.rcvtimeo if blocking else 0)

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> asyncio.Future[int]:  # type: ignore[override]
        """Receive one frame into ``buffer`` (see ``mqcore.Socket.recv_into``); a future of its length."""
        blocking = not flags & _NOBLOCK
        return self._attempt(lambda: mqcore.Socket.recv_into(self, buffer, nbytes, flags | _NOBLOCK),
                             self._opts.rcvtimeo if blocking else 0)

    def poll(self, timeout: int | None = None, flags: int = POLLIN) -> asyncio.Future[int]:  # type: ignore[override]
        """A future of the events among ``flags`` seen within ``timeout`` ms (None: forever)."""
        p = Poller()
        p.register(self, flags)
        return _then(p.poll(timeout), lambda ready: int(dict(ready).get(self, 0)))

    def close(self, linger: int | None = None) -> None:
        """Close; tasks still waiting on this socket are cancelled."""
        if not self._closed:
            for loop, w in list(_by_loop.items()):
                if loop.is_closed():  # its futures can no longer run; the fd may be reused
                    del _by_loop[loop]
                else:
                    w.cancel_fd(self._mailbox.fd)
        super().close(linger)


class Context(mqcore.Context):
    """An mqcore context whose sockets are ``mqcore.asyncio.Socket``."""

    _instance: Context | None = None  # type: ignore[assignment]
    _socket_class = Socket

    def socket(self, socket_type: int, socket_class: Any = None, **kwargs: Any) -> Socket:  # type: ignore[override]
        return super().socket(socket_type, socket_class, **kwargs)  # type: ignore[return-value]


class Poller(mqcore.Poller):
    """``await poller.poll(timeout_ms)`` over mqcore sockets and plain fds / objects with fileno()."""

    def _now(self) -> list[tuple[Any, int]]:
        ready = self._ready()
        fds = [(s, f) for s, f in self.sockets if not isinstance(s, SocketBase)]
        if fds:
            p = select.poll()
            for s, f in fds:
                p.register(_fileno(s), (select.POLLIN if f & POLLIN else 0) | (select.POLLOUT if f & POLLOUT else 0))
            got = dict(p.poll(0))
            for s, f in fds:
                ev = got.get(_fileno(s), 0)
                mask = (POLLIN if ev & select.POLLIN else 0) | (POLLOUT if ev & select.POLLOUT else 0)
                mask |= POLLERR if ev & (select.POLLERR | select.POLLHUP) else 0
                if mask & (f | POLLERR):
                    ready.append((_fileno(s), mask & (f | POLLERR)))  # pyzmq's async poller gives fds
        return ready

    def poll(self, timeout: float | None = None) -> asyncio.Future[list[tuple[Any, int]]]:  # type: ignore[override]
        """A future of the events ready now or within ``timeout`` ms (None or negative: forever)."""
        loop = asyncio.get_running_loop()
        ready = self._now()
        if ready or timeout == 0:
            fut: asyncio.Future[list[tuple[Any, int]]] = loop.create_future()
            fut.set_result(ready)
            return fut
        return _then(loop.create_task(self._wait_ready(timeout)), _same)

    async def _wait_ready(self, timeout: float | None) -> list[tuple[Any, int]]:
        loop = asyncio.get_running_loop()
        waiters = _waiters(loop)
        deadline = None if timeout is None or timeout < 0 else loop.time() + timeout / 1000.0
        while True:
            if any(isinstance(s, SocketBase) and s._closed for s, _ in self.sockets):
                raise asyncio.CancelledError()  # a polled socket was closed: as pyzmq, cancel
            ready = self._now()
            if ready:
                return ready
            if deadline is not None and loop.time() >= deadline:
                return []
            futures: list[asyncio.Future[None]] = []
            armed: list[tuple[SocketBase, asyncio.Future[None]]] = []
            retry = False
            for s, f in self.sockets:
                if isinstance(s, SocketBase):
                    if s._closed:
                        continue
                    fut = _arm(s, waiters)
                    if fut is None:
                        retry = True
                        break
                    futures.append(fut)
                    armed.append((s, fut))
                else:
                    if f & POLLIN:
                        futures.append(waiters.wait(_fileno(s), "r"))
                    if f & POLLOUT:
                        futures.append(waiters.wait(_fileno(s), "w"))
            if not retry and futures:
                remaining = None if deadline is None else max(0.0, deadline - loop.time())
                await asyncio.wait(futures, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
            elif not retry:
                await asyncio.sleep(0 if deadline is None else max(0.0, deadline - loop.time()))
            for s, fut in armed:
                # drain only an fd that fired (then every waiter on it was woken): draining clears
                # the sleeping flag another task waiting on the same socket may rely on
                if fut.done() and not fut.cancelled() and not s._closed:
                    s._mailbox.drain_fd()
            for fut in futures:
                fut.cancel()


# pyzmq's zmq.asyncio re-exports the constants; do the same for drop-in use
for _name in dir(mqcore):
    if _name.isupper():
        globals()[_name] = getattr(mqcore, _name)
del _name
