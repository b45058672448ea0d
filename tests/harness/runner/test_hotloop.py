"""The runner's C loops (harness/runner/_hotloop.c) on their own: what they store, where they stop, what they
refuse. How the worker uses them is covered by test_worker_loops.py, which runs every loop test both ways."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import time
import zlib
from typing import Any

import numpy as np
import pytest

from harness.runner import _hot
from harness.runner._context import Interrupted
from harness.runner._records import leading_stamps
from harness.runner._send import NEVER
from tests.harness.runner.hotloop_support import require_hotloop


@pytest.fixture(autouse=True)
def _built() -> None:
    require_hotloop()


def _stamp(block: bytearray, size: int, i: int) -> int:
    return int(struct.unpack_from("<q", block, i * size + 6)[0])


def test_send_stamped_stamps_each_slot_before_handing_it_over() -> None:
    size, n = 20, 50
    block = bytearray(size * n)
    view = memoryview(block)
    slots = [view[i * size:(i + 1) * size] for i in range(n)]
    seen: list[tuple[int, int]] = []  # (slot, the stamp the slot held when it was sent)

    def send(msg: Any) -> None:
        i = slots.index(msg)
        seen.append((i, _stamp(block, size, i)))

    before = time.monotonic_ns()
    assert _hot.send_stamped(send, slots, block, size, 6, n, NEVER) == n
    after = time.monotonic_ns()
    assert [i for i, _ in seen] == list(range(n))
    stamps = [t for _, t in seen]
    assert before <= stamps[0] and stamps[-1] <= after and stamps == sorted(stamps)  # time.monotonic_ns's clock
    assert all(block[i * size:i * size + 6] == bytes(6) and block[i * size + 14:(i + 1) * size] == bytes(size - 14)
               for i in range(n))  # only the stamp field is written


def test_send_stamped_can_hand_over_a_bytes_object_of_each_stamped_message() -> None:
    size, n = 20, 8
    block = bytearray(size * n)
    block[14:20] = b"abcdef"  # message 0's payload after the header
    view = memoryview(block)
    slots = [view[i * size:(i + 1) * size] for i in range(n)]
    sent: list[Any] = []
    assert _hot.send_stamped(sent.append, slots, block, size, 6, n, NEVER, True) == n
    assert all(type(m) is bytes and len(m) == size for m in sent)
    assert [struct.unpack_from("<q", m, 6)[0] for m in sent] == [_stamp(block, size, i) for i in range(n)]
    assert sent[0][14:] == b"abcdef" and sent[1] == bytes(block[size:2 * size])  # each its own message


def test_send_stamped_recycles_only_the_bytes_objects_the_receiver_let_go() -> None:
    size, k = 32, 4
    block = bytearray(b"p" * size * k)
    view = memoryview(block)
    slots = [view[i * size:(i + 1) * size] for i in range(k)]
    pool: list[Any] = [None] * 3
    kept: list[bytes] = []
    released: list[tuple[int, bytes, int]] = []  # (id, contents, hash) of each message as it was handed over

    def send(msg: bytes) -> None:
        released.append((id(msg), bytes(bytearray(msg)), hash(msg)))  # a copy; the hash is cached in msg
        if len(released) % 2:
            kept.append(msg)  # a library that still holds every other message

    first = 0
    for _ in range(6):
        for i in range(k):  # the header's seq field, as the worker numbers each batch's slots
            block[i * size + 2:i * size + 6] = struct.pack("<I", first + i)
        assert _hot.send_stamped(send, slots, block, size, 6, k, NEVER, True, pool, first) == k
        first += k
    contents = [c for _, c, _ in released]
    assert contents == [b"pp" + struct.pack("<I", seq) + c[6:14] + b"p" * (size - 14)
                        for seq, c in enumerate(contents)]  # each as it was numbered and stamped, and its body
    assert [struct.unpack_from("<q", c, 6)[0] for c in contents] == sorted(
        struct.unpack_from("<q", c, 6)[0] for c in contents)
    assert all(h == hash(c) for _, c, h in released)  # no stale hash on a rewritten object
    assert kept == contents[::2]  # what the library holds never changes under it
    reused = len(released) - len({i for i, _, _ in released})
    assert reused > 0 and all(type(m) is bytes for m in pool)  # released objects were used again


def test_send_stamped_sends_nothing_past_the_deadline() -> None:
    block = bytearray(100 * 4)
    slots = [memoryview(block)[i * 100:(i + 1) * 100] for i in range(4)]
    sent: list[Any] = []
    assert _hot.send_stamped(sent.append, slots, block, 100, 6, 4, time.monotonic_ns()) == 0
    assert sent == [] and block == bytes(400)


def test_send_stamped_passes_exceptions_on_with_the_failed_message_stamped() -> None:
    block = bytearray(100 * 8)
    slots = [memoryview(block)[i * 100:(i + 1) * 100] for i in range(8)]
    calls = [0]

    def send(msg: Any) -> None:
        calls[0] += 1
        if calls[0] == 3:
            raise KeyError("driver says no")

    with pytest.raises(KeyError, match="driver says no"):
        _hot.send_stamped(send, slots, block, 100, 6, 8, NEVER)
    assert [bool(_stamp(block, 100, i)) for i in range(8)] == [True] * 3 + [False] * 5


def test_send_stamped_lets_a_signal_handler_stop_a_send_written_in_c() -> None:
    """A send written in C that never looks at signals (``zlib.crc32`` of 1 MB here): the runner's interrupt
    must still stop the loop soon after it arrives. Another process sends the signal 0.2 s in; without the
    loop's own check the 100,000 sends would run on for tens of seconds."""

    class Stop(Exception):
        pass

    def handler(signum: int, frame: Any) -> None:
        raise Stop

    n = 100_000
    block = bytearray(8 * n)
    slots = [bytes(1 << 20)] * n  # what each send is handed; the stamps go to block
    old = signal.signal(signal.SIGUSR1, handler)
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.2; kill -USR1 {os.getpid()}"])
    try:
        with pytest.raises(Stop):
            _hot.send_stamped(zlib.crc32, slots, block, 8, 0, n, NEVER)
    finally:
        killer.wait()
        signal.signal(signal.SIGUSR1, old)
    sent = leading_stamps(block)
    assert 0 < sent < n


@pytest.mark.parametrize(
    ("size", "offset", "n", "slots", "block_len"),
    [
        (10, 6, 1, 1, 10),  # the stamp would end past the slot
        (100, 6, 3, 2, 300),  # more messages than slots
        (100, 6, 3, 3, 299),  # more messages than the block holds
        (0, 0, 1, 1, 100),  # no slot size
        (100, 6, -1, 1, 100),
    ],
)
def test_send_stamped_refuses_shapes_that_do_not_fit(size: int, offset: int, n: int, slots: int, block_len: int) -> None:
    with pytest.raises(ValueError, match="must fit"):
        _hot.send_stamped(print, [b"x"] * slots, bytearray(block_len), size, offset, n, NEVER)


def test_send_stamped_needs_a_writable_block_and_a_list() -> None:
    with pytest.raises(BufferError):
        _hot.send_stamped(print, [b"x"], bytes(100), 100, 6, 1, NEVER)
    with pytest.raises(TypeError):
        _hot.send_stamped(print, (b"x",), bytearray(100), 100, 6, 1, NEVER)


class _Timeout(Exception):
    pass


def _buffers(n: int, hsize: int = 6) -> tuple[bytearray, np.ndarray, np.ndarray]:
    return bytearray(n * hsize), np.zeros(n, np.int64), np.zeros(n, np.int64)


def test_recv_headers_keeps_headers_lengths_and_stamps_and_ends_a_batch_at_a_timeout() -> None:
    arrivals = [b"abcdefgh", b"xy", bytearray(b"123456")]

    def recv() -> Any:
        if not arrivals:
            raise _Timeout
        return arrivals.pop(0)

    headers, lengths, stamps = _buffers(8)
    before = time.monotonic_ns()
    assert _hot.recv_headers(recv, _Timeout, headers, lengths, stamps, 8, 6) == 3
    after = time.monotonic_ns()
    assert headers[:6] == b"abcdef" and headers[6:8] == b"xy" and headers[12:18] == b"123456"
    assert lengths[:3].tolist() == [8, 2, 6]
    assert before <= stamps[0] <= stamps[1] <= stamps[2] <= after and not stamps[3:].any()
    # the timeout was cleared, not left pending
    assert _hot.recv_headers(recv, _Timeout, headers, lengths, stamps, 8, 6) == 0


def test_recv_headers_lets_each_message_go_before_the_next_receive() -> None:
    """A plain receive loop holds one message at a time; so does this one (docs/harness-cost.md)."""
    import sys

    held: list[int] = []
    current: list[bytearray] = []

    def recv() -> bytearray:
        if current:
            held.append(sys.getrefcount(current[0]))  # ours and getrefcount's argument: nobody else's
        current[:] = [bytearray(b"h" * 10)]
        return current[0]

    assert _hot.recv_headers(recv, _Timeout, *_buffers(4), 4, 6) == 4
    assert held == [2, 2, 2]


def test_recv_headers_passes_other_exceptions_on_after_recording_what_came_before() -> None:
    arrivals: list[Any] = [b"abcdef", b"ghijkl", Interrupted]

    def recv() -> bytes:
        item = arrivals.pop(0)
        if item is Interrupted:
            raise Interrupted
        return item

    headers, lengths, stamps = _buffers(4)
    with pytest.raises(Interrupted):
        _hot.recv_headers(recv, _Timeout, headers, lengths, stamps, 4, 6)
    assert headers[:12] == b"abcdefghijkl" and leading_stamps(stamps) == 2


def test_recv_headers_refuses_shapes_that_do_not_fit_and_messages_without_a_buffer() -> None:
    for n_headers, n_lengths, n_stamps in [(2, 4, 4), (4, 2, 4), (4, 4, 2)]:
        with pytest.raises(ValueError, match="must fit"):
            _hot.recv_headers(bytes, _Timeout, bytearray(6 * n_headers), np.zeros(n_lengths, np.int64),
                              np.zeros(n_stamps, np.int64), 3, 6)
    with pytest.raises(BufferError):
        _hot.recv_headers(bytes, _Timeout, bytearray(24), np.zeros(4, np.int64), bytes(32), 3, 6)
    headers, lengths, stamps = _buffers(2)
    with pytest.raises(TypeError):
        _hot.recv_headers(lambda: 42, _Timeout, headers, lengths, stamps, 2, 6)
    assert not stamps.any()
