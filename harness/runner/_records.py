"""What a worker records, and the wire header it reads and writes: the recorders behind the send and receive
loops (harness.runner._send, harness.runner.worker).

A sending worker keeps per sequence number a send stamp and, for some steps, a second stamp (the ack, or the
reply of a request): ``SendRecord``. A receiving worker keeps per receipt a stamp and the 6 header bytes:
``Receipts``. Both come in two kinds:

* in memory (the default): buffers of this process, grown as needed, saved to ``<out>.npz`` at the end;
* mapped (runs with faults): zero-filled, file-backed buffers beside ``out`` (``<out>.tsend``; ``<out>.trecv``
  + ``<out>.hdr``; ``<out>.errors`` holds int64 (seq, stamp) pairs of sends that raised), so that a worker the
  runner kills leaves its stamps behind and the one started in its place continues them. Stamps are positive
  and written in order, so the number of records is the number of leading non-zero stamps. A receipt's
  header is written before its stamp and a send is stamped after it returned: a kill between the two loses
  at most one record, never leaves a torn one. ``finalize`` writes the ``.npz`` of a worker that was killed.

After the case, ``assemble_rows`` joins every worker's records into the raw rows of the run folder: every
message a producer recorded gets one row per consumer that should have had it (pub/sub: every consumer of
its topic; queue: the one that got it, or one row with consumer -1 when none did); stamps a side did not
record are null.
"""

from __future__ import annotations

import io
import mmap
import os
import struct
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from harness.drivers.base import Pattern
from harness.runfolder import atomic_write
from harness.runfolder.schema import KEY_FIELD
from harness.runner import _keys
from harness.runner._context import WorkerSpec

if TYPE_CHECKING:
    from harness.runner.case import Case

HEADER = struct.Struct("<HIq")  # producer id, sequence number, send stamp (ns)
SHORT_HEADER = struct.Struct("<HI")  # for messages shorter than HEADER
PROBE_ID = 0xFFFF  # producer id of probes (scenarios allow at most 65535 producers: ids 0..65534)
PROBE_PREFIX = PROBE_ID.to_bytes(2, "little")
HEADER_DTYPE = np.dtype([("producer", "<u2"), ("seq", "<u4")])
ERROR_RECORD = struct.Struct("<qq")  # (seq, t_ns) of a send that raised
BLOCK_MAX_SIZE = 4096  # larger messages: per-message Python work is small next to copying the payload
BLOCK_BYTES = 1 << 18  # a block (or batch) of messages that stays in the L2 cache


def _not_probes(rows: Any) -> Any:
    """Which rows of headers (a uint8 array, a header per row) are not probes: producer id not PROBE_ID."""
    return (rows[:, 0] != PROBE_PREFIX[0]) | (rows[:, 1] != PROBE_PREFIX[1])


def leading_stamps(stamps: Any) -> int:
    """How many stamps were written: they are positive and written in order into a zeroed buffer."""
    arr = np.frombuffer(stamps, dtype=np.int64)
    zero = np.flatnonzero(arr == 0)
    return int(zero[0]) if zero.size else int(arr.size)


def leading_count(path: str) -> int:
    """How many int64 stamps at the start of ``path`` are set (0 when the file does not exist)."""
    try:
        return leading_stamps(np.fromfile(path, dtype=np.int64))
    except (FileNotFoundError, ValueError):
        return 0


def save(path: str, **arrays: Any) -> None:
    """``<path>.npz``, written under a temporary name and renamed (a killed worker never leaves half a file)."""
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
    atomic_write(Path(f"{path}.npz"), buffer.getvalue())


def mapped(path: str, nbytes: int) -> mmap.mmap:
    """A shared, file-backed, zero-filled buffer of ``nbytes`` (existing contents kept)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < nbytes:
            os.ftruncate(fd, nbytes)
        return mmap.mmap(fd, max(nbytes, 8))
    finally:
        os.close(fd)


def read_pairs(path: str) -> np.ndarray:
    """The (seq, t_ns) int64 pairs of ``path`` as an (n, 2) array (empty when it does not exist)."""
    try:
        raw = np.fromfile(path, dtype=np.int64)
    except FileNotFoundError:
        return np.zeros((0, 2), dtype=np.int64)
    return raw[: raw.size - raw.size % 2].reshape(-1, 2)


def read_errors(out: str) -> np.ndarray:
    """(seq, t_ns) rows of the sends the system refused, as an (n, 2) int64 array: sends that raised
    (``<out>.errors``) and sends refused in an outcome reported later (``<out>.refused``)."""
    return np.concatenate([read_pairs(f"{out}.errors"), read_pairs(f"{out}.refused")])


def tracked(out: str) -> bool:
    """Whether the producer of ``out`` was told each send's outcome (synchronous or reported acks)."""
    rec = _load(out)
    return rec is not None and bool(rec.get("tracked", np.zeros(1))[:1].any())


def finalize(kind: str, out: str) -> None:
    """Write ``<out>.npz`` from the mapped records when the worker died before it could (killed)."""
    if os.path.exists(f"{out}.npz"):
        return
    if kind == "producer" and os.path.exists(f"{out}.tsend"):
        n = leading_count(f"{out}.tsend")
        t_send = np.fromfile(f"{out}.tsend", dtype=np.int64, count=n)
        acks = read_pairs(f"{out}.acks")
        t_ack = np.zeros(n if acks.size else 0, np.int64)
        keep = acks[:, 0] < n
        t_ack[acks[keep, 0]] = acks[keep, 1]
        watched = os.path.exists(f"{out}.watched")
        save(out, t_send=t_send, t_ack=t_ack, t_intended=np.zeros(0, np.int64), tracked=np.array([watched]))
    elif kind == "consumer" and os.path.exists(f"{out}.trecv"):
        n = leading_count(f"{out}.trecv")
        t_recv = np.fromfile(f"{out}.trecv", dtype=np.int64, count=n)
        hdr = np.fromfile(f"{out}.hdr", dtype=np.uint8, count=n * SHORT_HEADER.size)
        _save_receipts(out, t_recv, hdr.tobytes(), n)


def _save_receipts(out: str, t_recv: Any, headers: bytes, n: int) -> None:
    parsed = np.frombuffer(headers[: n * SHORT_HEADER.size], dtype=HEADER_DTYPE, count=n)
    save(out, t_recv=np.asarray(t_recv, dtype=np.int64), producer=parsed["producer"], seq=parsed["seq"])


class SendRecord:
    """Send stamps per sequence number (``t_send``) and, when ``second`` names one (``t_ack``, ``t_recv``), a
    second stamp each. In memory the buffers grow (``grow``); mapped they hold ``capacity`` and ``start`` is
    where a killed predecessor stopped."""

    def __init__(self, out: str, capacity: int, second: str, keeps_second: bool, mapped_files: bool) -> None:
        self.out, self.second, self.capacity = out, second, capacity
        self._map: mmap.mmap | None = None
        self.start = 0
        self.t_send: Any
        if mapped_files:
            self._map = mapped(f"{out}.tsend", 8 * capacity)
            self.t_send = memoryview(self._map).cast("q")
            self.start = leading_count(f"{out}.tsend")
        else:
            self.t_send = array("q", bytes(8 * capacity))
        self.t_second: Any = array("q", bytes(8 * capacity)) if keeps_second else None

    @property
    def growable(self) -> bool:
        return self._map is None

    def grow(self) -> int:
        """Double the in-memory buffers (duration runs outgrow their estimate); returns the new capacity."""
        self.t_send.frombytes(bytes(8 * self.capacity))
        if self.t_second is not None:
            self.t_second.frombytes(bytes(8 * self.capacity))
        self.capacity *= 2
        return self.capacity

    def written(self) -> int:
        return leading_stamps(self.t_send)

    def save(self, n: int, intended: np.ndarray, acks: np.ndarray | None = None) -> None:
        """``<out>.npz`` of the first ``n`` sends; ``acks`` (``Outcomes.stamps``) when the producer reported
        its acknowledgements (then they are its ``t_ack``, 0 where none came)."""
        second = (np.frombuffer(self.t_second, dtype=np.int64, count=n) if self.t_second is not None
                  else np.zeros(0, np.int64))
        t_send = np.frombuffer(self.t_send, dtype=np.int64, count=n).copy()
        seconds = {self.second: second}
        if acks is not None:
            seconds["t_ack"] = acks
        told = acks is not None or (self.t_second is not None and self.second == "t_ack")
        save(self.out, t_send=t_send, **seconds, t_intended=intended, tracked=np.array([told]))
        if self._map is not None:
            self.t_send.release()
            self._map.close()


class Receipts:
    """Receive stamps and the 6 header bytes of each receipt; messages shorter than a header are counted as
    foreign and left out. In memory: an ``array('q')`` of stamps and one bytearray of headers; a batch from
    the C receive loop is appended as one copy of its int64 stamps (as a list it cost the receiver, mqcore's
    slower side at full speed, 30-50 ns a message: an int object made per stamp and kept, 40 bytes of heap
    a receipt). Mapped: ``capacity`` receipts, surplus ones counted like foreign ones."""

    def __init__(self, out: str, capacity: int, mapped_files: bool) -> None:
        self.out, self.capacity = out, capacity
        self.foreign = 0
        self.t_recv = array("q")
        self.headers = bytearray()
        self._maps: tuple[mmap.mmap, mmap.mmap] | None = None
        self._views: tuple[memoryview, memoryview] | None = None
        self._n = 0
        if mapped_files:
            stamps, headers = mapped(f"{out}.trecv", 8 * capacity), mapped(f"{out}.hdr", SHORT_HEADER.size * capacity)
            self._maps = (stamps, headers)
            self._views = (memoryview(stamps).cast("q"), memoryview(headers))
            self._n = leading_count(f"{out}.trecv")

    def count(self) -> int:
        return self._n if self._maps is not None else len(self.t_recv)

    def callback(
        self, pace: Callable[[int], None] | None, report: Callable[[int], None]
    ) -> Callable[[bytes], None]:
        """The per-message callback for callback-style consumers: the stamp first, then the header and the
        stamp stored. With ``pace`` (a slow consumer) it then pauses, and it passes the count to ``report``
        every 64 receipts (such a consumer, or a callback thread, may stay inside one ``poll`` for seconds)."""
        size = SHORT_HEADER.size
        if self._maps is None and pace is None:
            t_recv, headers = self.t_recv, self.headers

            # Defaults bind everything the callback touches: per message two C calls and a slice.
            def on_message(
                payload: bytes, stamp: Callable[[int], None] = t_recv.append,
                keep: Callable[[bytes], None] = headers.extend, mono: Callable[[], int] = time.monotonic_ns,
            ) -> None:
                t = mono()
                if len(payload) >= size:
                    keep(payload[:size])  # header before stamp, as everywhere
                    stamp(t)
                else:
                    self.foreign += 1

            return on_message
        store = self._store_mapped if self._maps is not None else self._store

        def on_paced_message(payload: bytes) -> None:
            t = time.monotonic_ns()
            n = store(payload, t)
            if n and not n & 63:
                report(n)
            if pace is not None:
                pace(t)

        return on_paced_message

    def _store(self, payload: bytes, t: int) -> int:
        if len(payload) < SHORT_HEADER.size:
            self.foreign += 1
            return 0
        self.headers += payload[: SHORT_HEADER.size]
        self.t_recv.append(t)
        return len(self.t_recv)

    def _store_mapped(self, payload: bytes, t: int) -> int:
        assert self._views is not None
        n, size = self._n, SHORT_HEADER.size
        if len(payload) < size or n >= self.capacity:
            self.foreign += 1
            return 0
        stamps, headers = self._views
        headers[n * size:(n + 1) * size] = bytes(payload[:size])
        stamps[n] = t
        self._n = n + 1
        return n + 1

    def add_batch(self, batch: list[Any], stamps: list[int], size: int) -> None:
        """Append the receipts of a batch (pull-style receiving, in memory). A message without a stamp (the
        receive was interrupted between the two) is left out, probes (``PROBE_ID``) too. When every message
        has the run's size (the normal case) numpy cuts the headers out of the joined batch; otherwise
        message by message."""
        hsize = SHORT_HEADER.size
        del batch[len(stamps):]
        if not batch:
            return
        if hsize <= size <= BLOCK_MAX_SIZE and set(map(len, batch)) == {size}:
            rows = np.frombuffer(b"".join(batch), np.uint8).reshape(len(batch), size)
            if size == hsize:  # probes are 6 bytes long: only here can one be in a batch of the run's size
                keep = _not_probes(rows)
                if not keep.all():
                    self.headers += rows[keep, :hsize].tobytes()
                    self.t_recv.extend([t for t, k in zip(stamps, keep.tolist(), strict=True) if k])
                    return
            self.headers += rows[:, :hsize].tobytes()
            self.t_recv.extend(stamps)
            return
        for payload, t in zip(batch, stamps, strict=True):
            if payload[:2] != PROBE_PREFIX:
                self._store(payload, t)  # headers first: an interruption between the two leaves a spare one

    def add_headers(self, headers: Any, lengths: Any, stamps: Any) -> None:
        """Append the receipts of a batch received by ``_hotloop.recv_headers``: message i's first header
        bytes at ``headers[i * 6:]``, its length ``lengths[i]``, its stamp ``stamps[i]`` (arrays of as many
        messages as were recorded). As ``add_batch``: messages shorter than a header are foreign, probes are
        left out."""
        n = len(stamps)
        if not n:
            return
        hsize = SHORT_HEADER.size
        rows = np.frombuffer(headers, np.uint8, n * hsize).reshape(n, hsize)
        whole = lengths >= hsize
        keep = whole & _not_probes(rows)
        self.foreign += n - int(np.count_nonzero(whole))
        if keep.all():
            self.headers += rows.tobytes()
            self.t_recv.frombytes(np.ascontiguousarray(stamps, np.int64).data.cast("B"))
        else:
            self.headers += rows[keep].tobytes()
            self.t_recv.frombytes(np.ascontiguousarray(stamps[keep], np.int64).data.cast("B"))

    def note(self) -> str:
        """What the worker reports beside its count."""
        if not self.foreign:
            return ""
        return f"{self.foreign} foreign or surplus messages ignored" if self._maps else (
            f"{self.foreign} foreign messages ignored")

    def save(self) -> None:
        if self._maps is None:
            n = len(self.t_recv)
            _save_receipts(self.out, self.t_recv, bytes(self.headers), n)
            return
        # The maps stay open (a client thread may still hold the callback); the file reads see their pages.
        for m in self._maps:
            m.flush()
        finalize("consumer", self.out)

NULL = -1  # stamp sentinel before rows are built: monotonic_ns() is never negative


def _load(path: str) -> dict[str, np.ndarray] | None:
    try:
        with np.load(f"{path}.npz") as data:
            return {k: data[k] for k in data.files}
    except FileNotFoundError:
        return None


def assemble_rows(
    case: Case, producers: list[WorkerSpec], consumers: list[WorkerSpec], work_dir: Path
) -> pd.DataFrame:
    """Join producer and consumer records into raw rows (see harness.runfolder.schema)."""
    sc = case.scenario
    sent: dict[int, dict[str, np.ndarray]] = {}
    for spec in producers:
        rec = _load(spec.out)
        if rec is not None:
            sent[spec.role.index] = rec
    parts: list[dict[str, np.ndarray]] = []

    def part(producer: np.ndarray, consumer: np.ndarray, seq: np.ndarray, t_recv: np.ndarray) -> None:
        n = seq.size
        t_send = np.full(n, NULL, dtype=np.int64)
        t_int = np.full(n, NULL, dtype=np.int64)
        t_ack = np.full(n, NULL, dtype=np.int64)
        for p in np.unique(producer).tolist():  # only the producers present (a thousand topics: few each)
            rec = sent.get(p)
            if rec is None:
                continue
            mask = producer == p
            idx = seq[mask]
            ok = idx < rec["t_send"].size
            sel = np.flatnonzero(mask)[ok]
            t_send[sel] = rec["t_send"][idx[ok]]
            if "t_intended" in rec and rec["t_intended"].size:
                t_int[sel] = rec["t_intended"][idx[ok]]
            if "t_ack" in rec and rec["t_ack"].size:
                acked = rec["t_ack"][np.minimum(idx[ok], rec["t_ack"].size - 1)]
                acked[idx[ok] >= rec["t_ack"].size] = 0
                t_ack[sel] = np.where(acked > 0, acked, NULL)  # 0: no acknowledgement came
        parts.append(
            dict(producer=producer, consumer=consumer, seq=seq, t_intended=t_int, t_send=t_send, t_ack=t_ack,
                 t_recv=t_recv)
        )

    if sc.pattern is Pattern.REQREP:
        for p, rec in sent.items():
            n = rec["t_send"].size
            part(np.full(n, p), np.full(n, p), np.arange(n), rec["t_recv"].astype(np.int64))
    else:
        received: dict[int, dict[str, np.ndarray]] = {}
        for spec in consumers:
            rec = _load(spec.out)
            if rec is not None:
                received[spec.role.index] = rec
        topic_of = {s.role.index: s.role.topic for s in producers}
        all_keys = {p: np.arange(rec["t_send"].size) for p, rec in sent.items()}
        got_any: dict[int, set[int]] = {p: set() for p in sent}
        for spec in consumers:
            rec = received.get(spec.role.index)
            if rec is None:
                continue
            prod = rec["producer"].astype(np.int64)
            seq = rec["seq"].astype(np.int64)
            part(prod, np.full(prod.size, spec.role.index), seq, rec["t_recv"].astype(np.int64))
            for p in np.unique(prod):
                if p in got_any:
                    got_any[int(p)].update(seq[prod == p].tolist())
            if sc.pattern is Pattern.PUBSUB:  # what this consumer should have had and did not
                for p, keys in all_keys.items():
                    if topic_of.get(p) != spec.role.topic:
                        continue
                    missing = np.setdiff1d(keys, seq[prod == p])
                    part(np.full(missing.size, p), np.full(missing.size, spec.role.index), missing,
                         np.full(missing.size, NULL))
        if sc.pattern is Pattern.QUEUE:
            for p, keys in all_keys.items():
                missing = np.setdiff1d(keys, np.fromiter(got_any[p], dtype=np.int64))
                part(np.full(missing.size, p), np.full(missing.size, -1), missing, np.full(missing.size, NULL))

    cols = {k: np.concatenate([pt[k] for pt in parts]) if parts else np.zeros(0, np.int64) for k in
            ("producer", "consumer", "seq", "t_intended", "t_send", "t_ack", "t_recv")}
    n = cols["seq"].size
    df = pd.DataFrame(
        {
            "run_id": case.run_id,
            "scenario": sc.name,
            "pattern": sc.pattern.value,
            "system": case.variant.system,
            "variant": case.variant.name,
            "repetition": np.full(n, case.repetition, dtype=np.int32),
            "size": np.full(n, case.size, dtype=np.int32),
            "rate": np.full(n, np.nan if case.rate is None else case.rate),
            "producer": cols["producer"].astype(np.int32),
            "consumer": cols["consumer"].astype(np.int32),
            "seq": cols["seq"].astype(np.int64),
            "warmup": cols["seq"] < sc.warmup,
            "t_intended": _nullable(cols["t_intended"]),
            "t_send": _nullable(cols["t_send"]),
            "t_ack": _nullable(cols["t_ack"]),
            "t_recv": _nullable(cols["t_recv"]),
        }
    )
    if sc.keys != "none":
        df[KEY_FIELD.name] = _key_names(sc.keys, sc.key_count, cols["producer"], cols["seq"])
    return df


def _key_names(distribution: str, count: int, producer: np.ndarray, seq: np.ndarray) -> np.ndarray:
    """The key each (producer, seq) was sent with (``harness.runner._keys``), as ``k<index>``."""
    index = np.zeros(seq.size, dtype=np.int64)
    for p in np.unique(producer).tolist():
        mask = producer == p
        index[mask] = _keys.key_indices(distribution, count, int(p), seq[mask])
    names = np.array([f"k{i}" for i in range(count)], dtype=object)
    return names[index]


def _nullable(values: np.ndarray) -> Any:
    """int64 stamps with the NULL sentinel -> a nullable Int64 array (no float on the way: ns need 63 bits)."""
    arr = np.asarray(values, dtype=np.int64)
    return pd.arrays.IntegerArray(arr.copy(), arr == NULL)
