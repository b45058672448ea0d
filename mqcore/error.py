"""Exceptions with pyzmq's names: ZMQError (carries ``errno``), Again, ContextTerminated."""

from __future__ import annotations

import os

from mqcore.constants import Errno

_MESSAGES = {
    Errno.EFSM: "Operation cannot be accomplished in current state",
    Errno.ENOCOMPATPROTO: "The protocol is not compatible with the socket type",
    Errno.ETERM: "Context was terminated",
    Errno.EMTHREAD: "No thread available",
}


def strerror(errnum: int) -> str:
    """Human-readable text for an mqcore/POSIX error number."""
    try:
        return _MESSAGES[Errno(errnum)]
    except (KeyError, ValueError):
        return os.strerror(errnum)


class ZMQBaseError(Exception):
    """Base of every mqcore exception."""


class ZMQError(ZMQBaseError):
    """An error with an ``errno`` (compare with ``mqcore.EAGAIN`` etc.)."""

    errno: int | None
    strerror: str

    def __init__(self, errno: int | None = None, msg: str | None = None) -> None:
        self.errno = errno
        if msg is None:
            msg = strerror(errno) if errno is not None else "unknown error"
        self.strerror = msg
        super().__init__(msg)

    def __str__(self) -> str:
        return self.strerror

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.strerror!r})"


class ZMQBindError(ZMQBaseError):
    """bind_to_random_port found no free port."""


class Again(ZMQError):
    """The operation would block (errno EAGAIN): NOBLOCK at the HWM, or a timeout expired."""

    def __init__(self, errno: int | None = Errno.EAGAIN, msg: str | None = None) -> None:
        super().__init__(Errno.EAGAIN if errno is None else errno, msg)


class ContextTerminated(ZMQError):
    """The context was terminated (errno ETERM)."""

    def __init__(self, errno: int | None = Errno.ETERM, msg: str | None = None) -> None:
        super().__init__(Errno.ETERM if errno is None else errno, msg)


class ZMQVersionError(NotImplementedError):
    """A feature the libzmq version mqcore follows (4.3.5) does not have; pyzmq's name."""

    def __init__(self, min_version: str, msg: str = "Feature") -> None:
        self.min_version = min_version
        self.msg = msg
        super().__init__(f"{msg} requires libzmq >= {min_version}, have 4.3.5")

    def __str__(self) -> str:
        return str(self.args[0])


class NotDone(ZMQBaseError):
    """A MessageTracker wait timed out."""
