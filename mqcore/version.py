"""Versions (pyzmq's ``zmq.sugar.version``).

``__version__`` and ``pyzmq_version()`` name the pyzmq release whose API mqcore follows and whose own test
suite it is held to (docs/pyzmq-suite.md), since pyzmq code that checks ``zmq.__version__`` asks which
pyzmq API it may use; ``zmq_version()`` names the libzmq release whose behaviour mqcore follows. mqcore's
own release is ``MQCORE_VERSION``.
"""

from __future__ import annotations

MQCORE_VERSION = "0.1.0"

__version__ = "27.2.0"
__revision__ = ""
VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH = (int(part) for part in __version__.split("."))
VERSION_EXTRA = ""
version_info: tuple[int, int, int] = (VERSION_MAJOR, VERSION_MINOR, VERSION_PATCH)

#: the libzmq release whose behaviour mqcore follows
LIBZMQ_VERSION = (4, 3, 5)

__all__ = ["zmq_version", "zmq_version_info", "pyzmq_version", "pyzmq_version_info", "__version__",
           "__revision__"]


def pyzmq_version() -> str:
    """The pyzmq release whose API mqcore follows, as a string."""
    return __version__


def pyzmq_version_info() -> tuple[int, int, int]:
    """The pyzmq release whose API mqcore follows, as (major, minor, patch)."""
    return version_info


def zmq_version() -> str:
    """The libzmq release whose behaviour mqcore follows, as a string."""
    return "{}.{}.{}".format(*LIBZMQ_VERSION)


def zmq_version_info() -> tuple[int, int, int]:
    """The libzmq release whose behaviour mqcore follows, as (major, minor, patch)."""
    return LIBZMQ_VERSION
