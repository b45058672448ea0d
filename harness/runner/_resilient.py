"""Producer and consumer loops for runs with faults: records that survive a SIGKILL, reconnects, pacing.

Records live in memory-mapped files beside the worker's ``out`` prefix instead of process memory, so a
worker the runner kills leaves its stamps behind and the worker started in its place continues them:
``<out>.tsend`` (producer: int64 send stamp per sequence number), ``<out>.trecv`` + ``<out>.hdr``
(consumer: int64 receive stamp + the 6 header bytes per receipt), ``<out>.errors`` (producer: int64 pairs
(seq, stamp) of sends that raised). Buffers are zero-filled by the kernel, stamps are positive and written
in order, so the number of records is the number of leading non-zero stamps. A consumer writes the header
before the stamp, a producer stamps after ``send`` returned: a kill between the two loses at most one
record, never leaves a torn one (a producer killed between send and stamp has its successor send that
sequence number again: at most one duplicate per producer restart).

A ``send`` or ``poll`` that raises (the broker went away) is counted and the producer/consumer is created
again from the driver until that works (the generic reconnect: a fresh client, same plan and role). The
sequence number of a failed send is not retried: it is recorded as a send error, so recovery metrics can
tell messages the system refused from messages it accepted and then lost.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

RECONNECT_PAUSE = 0.1  # seconds between attempts to create a producer/consumer again
ERROR_RECORD = struct.Struct("<qq")  # (seq, t_ns) of a send that raised
HEADER_BYTES = 6  # producer id (u16) + seq (u32), as in worker.SHORT_HEADER


def mapped(path: str, nbytes: int) -> mmap.mmap:
    """A shared, file-backed, zero-filled buffer of ``nbytes`` (existing contents kept)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < nbytes:
            os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, max(nbytes, 8))
    finally:
        os.close(fd)


def leading_count(path: str) -> int:
    """How many int64 stamps at the start of ``path`` are set (0 when the file does not exist)."""
    try:
        arr = np.fromfile(path, dtype=np.int64)
    except (FileNotFoundError, ValueError):
        return 0
    zero = np.flatnonzero(arr == 0)
    return int(zero[0]) if zero.size else int(arr.size)


def read_errors(out: str) -> np.ndarray:
    """(seq, t_ns) rows of the sends that raised, as an (n, 2) int64 array."""
    try:
        raw = np.fromfile(f"{out}.errors", dtype=np.int64)
    except FileNotFoundError:
        return np.zeros((0, 2), dtype=np.int64)
    return raw[: raw.size - raw.size % 2].reshape(-1, 2)


def finalize(kind: str, out: str) -> None:
    """Write ``<out>.npz`` from the mapped records when the worker died before it could (killed)."""
    from harness.runner.worker import _HEADER_DTYPE, _save

    if os.path.exists(f"{out}.npz"):
        return
    if kind == "producer":
        if not os.path.exists(f"{out}.tsend"):
            return
        n = leading_count(f"{out}.tsend")
        t_send = np.fromfile(f"{out}.tsend", dtype=np.int64, count=n)
        _save(out, t_send=t_send, t_ack=np.zeros(0, np.int64), t_intended=np.zeros(0, np.int64))
    elif kind == "consumer":
        if not os.path.exists(f"{out}.trecv"):
            return
        n = leading_count(f"{out}.trecv")
        t_recv = np.fromfile(f"{out}.trecv", dtype=np.int64, count=n)
        hdr = np.fromfile(f"{out}.hdr", dtype=np.uint8, count=n * HEADER_BYTES)
        parsed = np.frombuffer(hdr.tobytes(), dtype=_HEADER_DTYPE, count=n)
        _save(out, t_recv=t_recv, producer=parsed["producer"], seq=parsed["seq"])


def pacer(rate: float | None) -> Callable[[int], None] | None:
    """A slow consumer's pause: called after each receipt (stamp ``t``), sleeps so that at most ``rate``
    messages per second are handled on average, with bursts of at most 50 ms worth after an idle spell."""
    if not rate:
        return None
    period = int(1e9 / rate)
    burst = 50_000_000
    mono = time.monotonic_ns
    due = [0]

    def pace(t: int) -> None:
        nxt = max(due[0], t - burst) + period
        due[0] = nxt
        left = nxt - mono()
        if left > 200_000:  # sleep() overshoots by ~0.1 ms: pausing in steps below that is noise
            time.sleep(left / 1e9)

    return pace


def _again(make: Callable[[], Any], stop: Any, deadline_ns: int | None) -> Any:
    """Create a producer/consumer again until that works; None when the run stops first."""
    while not stop.is_set() and (deadline_ns is None or time.monotonic_ns() < deadline_ns):
        try:
            return make()
        except Exception:  # noqa: BLE001 - the broker is still away; try again
            time.sleep(RECONNECT_PAUSE)
    return None


def _drop(obj: Any) -> None:
    """Close a broken producer/consumer if that is quick; its client may be wedged, so never wait on it."""
    import threading

    def close() -> None:
        with contextlib.suppress(Exception):
            obj.close()

    t = threading.Thread(target=close, daemon=True)
    t.start()
    t.join(0.5)


def producer(spec: Any, driver: Any, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    from harness.runner.worker import (
        Interrupted,
        _header_writers,
        _hold_until_stop,
        _payload,
        _save,
        _Schedule,
        _sleep_until,
        _wait_start,
    )

    logging.disable(logging.CRITICAL)  # client libraries log every failed reconnect; errors are counted instead
    make = lambda: driver.create_producer(spec.plan, spec.role)  # noqa: E731
    prod = make()
    status.put(("ready", spec.name))
    if not _wait_start(start, stop):
        prod.close()
        return
    cap = spec.capacity
    mm = mapped(f"{spec.out}.tsend", 8 * cap)
    t_send = memoryview(mm).cast("q")
    errlog = open(f"{spec.out}.errors", "ab", buffering=0)  # noqa: SIM115 - closed below
    seq = leading_count(f"{spec.out}.tsend")  # a restarted producer continues where the killed one stopped
    buf = _payload(spec)
    pid = spec.role.index
    schedule = _Schedule.start(spec, start_ns)
    t0, deadline, period = schedule.t0, schedule.deadline, schedule.period
    total = min(schedule.total, cap)
    mono = time.monotonic_ns
    pack, pack_short = _header_writers(spec)
    send = prod.send
    error = ""
    try:
        while seq < total:
            if period:
                _sleep_until(t0 + int(seq * period))
            t = mono()
            if deadline is not None and t >= deadline:
                break
            if pack is not None:
                pack(buf, 0, pid, seq, t)
            else:
                pack_short(buf, 0, pid, seq)
            try:
                send(buf)
            except Exception:  # noqa: BLE001 - counted; the producer is made again below
                errlog.write(ERROR_RECORD.pack(seq, t))
                t_send[seq] = t
                seq += 1
                progress[spec.slot] = seq
                _drop(prod)
                prod = _again(make, stop, deadline)
                if prod is None:
                    break
                send = prod.send
                continue
            t_send[seq] = t
            seq += 1
            if not seq & 63:
                progress[spec.slot] = seq
                if stop.is_set():
                    break
        progress[spec.slot] = seq
        if prod is not None:
            with contextlib.suppress(Exception):
                prod.flush(spec.request_timeout * 4)
    except Interrupted:
        seq = leading_count(f"{spec.out}.tsend")
        error = f"interrupted by the runner while sending (blocked after {seq} messages)"
    errlog.close()
    n = seq
    _save(spec.out, t_send=np.frombuffer(mm, dtype=np.int64, count=n).copy(), t_ack=np.zeros(0, np.int64),
          t_intended=schedule.intended(n))
    del t_send
    mm.close()
    status.put(("done", spec.name, n, error))
    _hold_until_stop(stop)
    if prod is not None:
        _drop(prod)


def consumer(spec: Any, driver: Any, status: Any, start: Any, stop: Any, start_ns: Any, progress: Any) -> None:
    from harness.runner.worker import Interrupted, _wait_start

    logging.disable(logging.CRITICAL)
    cap = spec.capacity
    mm_t = mapped(f"{spec.out}.trecv", 8 * cap)
    mm_h = mapped(f"{spec.out}.hdr", HEADER_BYTES * cap)
    stamps = memoryview(mm_t).cast("q")
    headers = memoryview(mm_h)
    count = [leading_count(f"{spec.out}.trecv")]
    dropped = [0]
    pace = pacer(spec.consumer_rate)
    mono = time.monotonic_ns
    slot = spec.slot

    def on_message(payload: bytes) -> None:
        t = mono()
        n = count[0]
        if len(payload) < HEADER_BYTES or n >= cap:
            dropped[0] += 1
            return
        headers[n * HEADER_BYTES : (n + 1) * HEADER_BYTES] = bytes(payload[:HEADER_BYTES])
        stamps[n] = t
        count[0] = n + 1
        if not n & 63:
            progress[slot] = n + 1
        if pace is not None:
            pace(t)

    def make() -> Any:
        c = driver.create_consumer(spec.plan, spec.role)
        c.start(on_message)
        return c

    cons = make()
    status.put(("ready", spec.name))
    try:
        if _wait_start(start, stop):
            while not stop.is_set():
                try:
                    cons.poll(0.05)
                except Interrupted:
                    raise
                except Exception:  # noqa: BLE001 - the broker went away: make the consumer again
                    _drop(cons)
                    time.sleep(RECONNECT_PAUSE)
                    cons = _again(make, stop, None)
                    if cons is None:
                        break
                progress[spec.slot] = count[0]
    except Interrupted:
        pass
    if cons is not None:
        _drop(cons)
    n = count[0]
    progress[spec.slot] = n
    # The maps stay open (a client thread may still hold on_message); the file reads below see their pages.
    mm_t.flush()
    mm_h.flush()
    finalize("consumer", spec.out)
    bad = dropped[0]
    status.put(("done", spec.name, n, f"{bad} foreign or surplus messages ignored" if bad else ""))
