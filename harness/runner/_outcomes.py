"""What became of each send, as the system told the producer: an acknowledgement (stamped when it arrived) or
a refusal. A send that returned is only handed over; for a producer that is told more
(``Producer.watch_outcomes``: confirms, acks, publish acks arriving on the client's threads) the messages it
never heard back about are neither accepted nor refused, and the accounting keeps them apart (never loss).

``Outcomes`` belongs to one producing worker. ``watch(producer, first_seq)`` asks a freshly made producer to
report; its i-th send is sequence number ``first_seq + i`` (the send loop sends each sequence number once,
in order, through one producer at a time; probes are only sent by brokerless drivers, which report nothing).
Reports come from any thread: each is a few list appends under the GIL, and in runs with faults also one
unbuffered write per report to ``<out>.acks`` / ``<out>.refused`` (int64 (seq, t_ns) pairs), so a worker the
runner kills leaves them behind. ``stamps(n)`` gives the dense ``t_ack`` column (0: no acknowledgement).
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from typing import Any

import numpy as np

from harness.runner._records import ERROR_RECORD

ACKS, REFUSED = "acks", "refused"


class Outcomes:
    def __init__(self, out: str, mapped_files: bool) -> None:
        self.out = out
        self.watched = False
        self._seq, self._t = array("q"), array("q")
        self._lock = threading.Lock()
        self._files: dict[str, int] = {}
        if mapped_files:
            for kind in (ACKS, REFUSED):
                self._files[kind] = os.open(f"{out}.{kind}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def watch(self, producer: Any, first_seq: int) -> bool:
        """Ask ``producer`` (made just now, nothing sent through it yet) to report each send's outcome."""

        def report(first: int, count: int, accepted: bool) -> None:
            t = time.monotonic_ns()
            seqs = range(first_seq + first, first_seq + first + count)
            if accepted:
                with self._lock:
                    self._seq.extend(seqs)
                    self._t.extend([t] * count)
                self._write(ACKS, seqs, t)
            else:
                self._write(REFUSED, seqs, t, always=True)

        told = bool(producer.watch_outcomes(report))
        if told and not self.watched and self._files:
            open(f"{self.out}.watched", "wb").close()  # noqa: SIM115 - a marker for finalize()
        self.watched = self.watched or told
        return told

    def refuse(self, seq: int, t: int) -> None:
        """A send that raised (the send loop's own record of it)."""
        self._write(REFUSED, range(seq, seq + 1), t, always=True)

    def _write(self, kind: str, seqs: range, t: int, always: bool = False) -> None:
        fd = self._files.get(kind)
        if fd is None and always:  # refusals are rare: kept in a file in every run
            with self._lock:
                if kind not in self._files:
                    self._files[kind] = os.open(f"{self.out}.{kind}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                fd = self._files[kind]
        if fd is not None:
            os.write(fd, b"".join(ERROR_RECORD.pack(s, t) for s in seqs))

    def stamps(self, n: int) -> np.ndarray:
        """``t_ack`` of sequence numbers 0..n-1 from the acknowledgements so far (0 where none came)."""
        out = np.zeros(n, np.int64)
        with self._lock:
            seq = np.frombuffer(self._seq, dtype=np.int64).copy()
            t = np.frombuffer(self._t, dtype=np.int64).copy()
        keep = seq < n
        out[seq[keep]] = t[keep]
        return out

    def close(self) -> None:
        for fd in self._files.values():
            os.close(fd)
        self._files.clear()

