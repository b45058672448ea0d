"""Clock offsets between hosts: an NTP-style exchange of CLOCK_MONOTONIC stamps.

CLOCK_MONOTONIC (``time.monotonic_ns``) is per host, so a latency between a send stamped on one host and a
receipt stamped on another needs the offset between the two clocks. The coordinator answers stamp
requests (:class:`ClockServer`); a task on another host asks it ``samples`` times (:func:`measure`):

    t0 = task clock at request   t1 = coordinator clock when it answers   t3 = task clock at the answer
    offset = t1 - (t0 + t3) / 2  (coordinator - task)     round trip = t3 - t0

The coordinator's answer was taken somewhere inside the round trip, so the true offset is within half the
round trip of the estimate; the sample with the smallest round trip gives the tightest bound. Measured
before and after a case, the two offsets also bound the drift between the clocks over the case:
:func:`over_case` records the mean offset with uncertainty = half the best round trip + |drift|.
Pure arithmetic apart from :class:`ClockServer` and :func:`measure` (one TCP connection, 16-byte frames).
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

_STAMP = struct.Struct("!q")
#: Samples per measurement: enough for one of them to see an unloaded round trip.
SAMPLES = 64


@dataclass(frozen=True)
class Offset:
    """Coordinator clock minus task clock (ns), within ``± uncertainty_ns``; ``rtt_ns``: the best round trip."""

    offset_ns: int
    uncertainty_ns: int
    rtt_ns: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def estimate(samples: Sequence[tuple[int, int, int]]) -> Offset:
    """The offset from ``(t0, t1, t3)`` samples (see the module's note): the minimum-round-trip sample's.

    Raises ValueError for no samples."""
    if not samples:
        raise ValueError("no clock samples to estimate an offset from")
    t0, t1, t3 = min(samples, key=lambda s: s[2] - s[0])
    rtt = t3 - t0
    return Offset(offset_ns=t1 - (t0 + t3) // 2, uncertainty_ns=(rtt + 1) // 2, rtt_ns=rtt)


def over_case(before: Offset, after: Offset) -> Offset:
    """One offset for a case measured before and after it: their mean, uncertain by the larger half round
    trip plus the drift between the two measurements."""
    drift = abs(after.offset_ns - before.offset_ns)
    return Offset(
        offset_ns=(before.offset_ns + after.offset_ns) // 2,
        uncertainty_ns=max(before.uncertainty_ns, after.uncertainty_ns) + (drift + 1) // 2,
        rtt_ns=min(before.rtt_ns, after.rtt_ns),
    )


class ClockServer:
    """Answers every 8-byte request with the coordinator's ``time.monotonic_ns()``, on ``host:port`` (port 0:
    any free one). ``bind`` is the address tasks reach the coordinator at (a host namespace's address on a
    machine that simulates hosts). A context manager: the thread and sockets end on exit."""

    def __init__(self, bind: str = "127.0.0.1", port: int = 0) -> None:
        self._listener = socket.create_server((bind, port))
        self.address: tuple[str, int] = self._listener.getsockname()[:2]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="clock-server", daemon=True)

    def __enter__(self) -> ClockServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        self._thread.join(timeout=5)

    def _serve(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    @staticmethod
    def _answer(conn: socket.socket) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with conn:
            while _recv_exact(conn, _STAMP.size):
                conn.sendall(_STAMP.pack(time.monotonic_ns()))


def _recv_exact(conn: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            return b""
        data += chunk
    return data


def measure(address: tuple[str, int], samples: int = SAMPLES, timeout: float = 10.0) -> Offset:
    """This host's offset to the coordinator at ``address`` (a :class:`ClockServer`)."""
    got: list[tuple[int, int, int]] = []
    with socket.create_connection(address, timeout=timeout) as conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(samples):
            t0 = time.monotonic_ns()
            conn.sendall(_STAMP.pack(t0))
            answer = _recv_exact(conn, _STAMP.size)
            t3 = time.monotonic_ns()
            if not answer:
                raise ConnectionError(f"clock server {address[0]}:{address[1]} closed the connection")
            got.append((t0, _STAMP.unpack(answer)[0], t3))
    return estimate(got)
