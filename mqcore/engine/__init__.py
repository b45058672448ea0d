"""The engine of one tcp/ipc connection, in two parts, one per thread that may do its IO.

``StreamEngine`` (``_stream.py``) is the connection in its IO thread: greeting, handshake, framing
through the sans-IO codec, heartbeats, ZAP, monitor events. ``Inline`` (``_inline.py``) is the socket's
thread's door to it (the direct read and send, the inline pipe flush) and keeps the lock protocol
between the two threads, described there once. Code outside this package holds a connection as
``Inline`` (``SocketBase``, ``Pipe``) or as ``StreamEngine`` (the session) and uses neither's
underscored members (tests/mqcore/test_boundaries.py keeps it so).
"""

from mqcore.engine._inline import BUFFER_BYTES, LARGE, READ, WRITE, ZERO_COPY, Inline
from mqcore.engine._stream import StreamEngine

__all__ = ["StreamEngine", "Inline", "READ", "WRITE", "ZERO_COPY", "BUFFER_BYTES", "LARGE"]
