"""The socket's thread's IO (mqcore.engine.Inline): the direct read and send, and their fallbacks to the
general inline read and the pipe."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import mqcore
from mqcore.engine import LARGE, Inline

from .zmtp.wire import frame, greeting, ready

Pair = Callable[..., tuple[Any, Any]]
TRANSPORTS = ("tcp", "ipc")


@pytest.fixture(autouse=True)
def _reader_keeps_its_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The counts below assert that the socket's thread did the reading; the IO thread reads in its
    stead when that thread has not read for PARK_CHECK (Inline's rule 4), which a loaded machine may
    cause at any moment. test_io_thread_reading_in_the_readers_stead_keeps_streams_whole covers that."""
    monkeypatch.setattr("mqcore.engine._inline.PARK_CHECK", 3600.0)


@pytest.fixture
def direct_sends(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the sends the direct path took and the ones it declined."""
    counts = [0, 0]
    real = Inline.send

    def counting(*args: Any) -> bool:
        took = real(*args)
        counts[0 if took else 1] += 1
        return took

    monkeypatch.setattr(Inline, "send", counting)
    yield counts


@pytest.fixture
def direct_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts the reads the direct path took, the ones it declined (the general inline read), and
    (third) the messages it handed straight to recv."""
    counts = [0, 0, 0]
    read, general = Inline.read, Inline._read_general

    def counting_read(inline: Inline, buffer: bytearray, take: Any = None) -> Any:
        counts[0] += 1
        got = read(inline, buffer, take)
        counts[2] += got is not None
        return got

    def counting_general(inline: Inline) -> None:
        counts[0] -= 1
        counts[1] += 1
        general(inline)

    monkeypatch.setattr(Inline, "read", counting_read)
    monkeypatch.setattr(Inline, "_read_general", counting_general)
    yield counts


def _once_polled(reader: Any) -> None:
    """Return once ``reader``'s thread waits in recv polling its connection (``Inline.waiting``): a
    message sent then is read by that thread (the IO thread parks the connection), however the threads
    are scheduled. Without it a round trip's reader could be descheduled past every message (a CI run
    saw none of 200 handed straight to recv); after 5 s it returns anyway and the assertion reports it."""
    give_up = time.monotonic() + 5.0
    while time.monotonic() < give_up:
        inline = reader._inline
        if inline is not None and inline.waiting:
            return
        time.sleep(0.0002)


def _send_once_polled(reader: Any, send: Callable[[], object]) -> threading.Thread:
    """A started thread that runs ``send`` once ``reader``'s thread, blocked in recv, polls its
    connection: then the direct path reads from the first message on, however the threads are
    scheduled (a sender far ahead could otherwise fill the pipe before the reader ever waits)."""
    def run() -> None:
        _once_polled(reader)
        send()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_in_order_with_rcvhwm_reached(make_pair: Pair, transport: str, direct_reads: list[int]) -> None:
    # A small RCVHWM: one read decodes more than the pipe takes, the rest waits as the engine's backlog.
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, transport, rcvhwm=5, sndhwm=5)
    count = 3000
    sender = _send_once_polled(pull, lambda: [push.send(b"%d" % i) for i in range(count)])
    try:
        assert [pull.recv() for _ in range(count)] == [b"%d" % i for i in range(count)]
    finally:
        sender.join()
    assert direct_reads[0] > 0
    with pytest.raises(mqcore.Again):
        pull.recv(mqcore.NOBLOCK)


SPANNING = {
    "large": [[b"head%d" % i, b"", bytes([i % 256]) * (i * 997 % 90000)] for i in range(60)],
    # 64 KiB reads of small 3-frame messages mostly end inside one: it is carried into the next read.
    "small": [[b"k%d" % i, b"", b"v" * (i % 300)] for i in range(5000)],
}


@pytest.mark.parametrize("sizes", sorted(SPANNING))
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_multipart_messages_spanning_reads_stay_whole(make_pair: Pair, transport: str, sizes: str,
                                                      direct_reads: list[int]) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, transport)
    msgs = SPANNING[sizes]
    sender = _send_once_polled(pull, lambda: [push.send_multipart(m) for m in msgs])
    try:
        assert [pull.recv_multipart() for _ in msgs] == msgs
    finally:
        sender.join()
    assert direct_reads[0] > 0


def _expect(receive: Callable[[], Any], expected: list[Any], thread: threading.Thread) -> None:
    """Receive as many messages as ``expected`` holds, join ``thread`` (also on a failure), compare
    (the sizes first: a failure then shows where, not two long byte strings)."""
    try:
        got = [receive() for _ in expected]
    finally:
        thread.join()
    assert [len(m) for m in got] == [len(m) for m in expected]
    assert got == expected


def _large_stream() -> list[list[bytes]]:
    """Large single frames (read header first) mixed with what makes that read step back: small and
    multipart messages, frames just under the threshold, a frame of every size class in between."""
    large = LARGE
    msgs: list[list[bytes]] = []
    for i in range(40):
        msgs.append([bytes([i]) * (large + i * 4099)])
        if i % 5 == 1:
            msgs.append([b"small%d" % i])
        if i % 7 == 2:
            msgs.append([b"k", bytes([i]) * (large * 2)])  # multipart with a large frame: the decoder's
        if i % 9 == 3:
            msgs.append([b"u" * (large - 1)])
        if i % 11 == 4:
            msgs.extend([[b"x" * 300]] * 50)
    return msgs


@pytest.mark.parametrize("rcvhwm", [1000, 3])
@pytest.mark.parametrize("transport", TRANSPORTS)
def test_large_frames_read_header_first_stay_whole_and_in_order(make_pair: Pair, transport: str, rcvhwm: int,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    # With a small RCVHWM a header-first batch fills the pipe and the rest waits as the engine's backlog.
    large_reads = [0]
    real = Inline._read_large

    def counting(*args: Any) -> None:
        large_reads[0] += 1
        real(*args)

    monkeypatch.setattr(Inline, "_read_large", counting)
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, transport, rcvhwm=rcvhwm)
    msgs = _large_stream()
    sender = _send_once_polled(pull, lambda: [push.send_multipart(m) for m in msgs])
    _expect(pull.recv_multipart, msgs, sender)
    assert large_reads[0] > 0


def test_large_frames_cut_anywhere_by_a_raw_peer(ctx: mqcore.Context) -> None:
    # A hand-made ZMTP peer writes large frames in pieces with pauses, so that the header-first reads
    # meet a header without its body, a body cut short, a frame under the threshold, and the end of the
    # stream.
    pull = ctx.socket(mqcore.PULL)
    pull.rcvtimeo = 5000
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    peer = socket.create_connection(("127.0.0.1", port))
    try:
        peer.sendall(greeting() + ready(b"PUSH"))
        bodies = [bytes([i]) * (LARGE + 1000 * i) for i in range(6)]
        wires = [frame(body) for body in bodies]
        pieces = [
            wires[0][:5000], wires[0][5000:],  # split by a read: the next reads go header first
            wires[1][:9], wires[1][9:],  # the header alone, then its body
            wires[2][:3000], wires[2][3000:],  # a body cut short
            wires[3] + frame(b"small") + wires[4],  # a small frame in between
            wires[5],  # then the end of the stream, where a header would come
        ]
        expected = [bodies[0], bodies[1], bodies[2], bodies[3], b"small", bodies[4], bodies[5]]

        def write() -> None:
            for piece in pieces:
                peer.sendall(piece)
                time.sleep(0.05)  # the reader, blocked in recv, takes what has come so far
            peer.close()

        writer = threading.Thread(target=write)
        writer.start()
        _expect(pull.recv, expected, writer)
    finally:
        peer.close()
    pull.rcvtimeo = 200
    with pytest.raises(mqcore.Again):
        pull.recv()


def test_a_large_frame_over_maxmsgsize_ends_the_connection_on_the_header_first_path(ctx: mqcore.Context) -> None:
    # The header-first read checks MAXMSGSIZE from the header like the decoder (which then refuses the
    # frame): the frames under the limit arrive, the one over it and anything after it do not.
    limit = LARGE * 3
    pull = ctx.socket(mqcore.PULL)
    pull.maxmsgsize = limit
    port = pull.bind_to_random_port("tcp://127.0.0.1")
    peer = socket.create_connection(("127.0.0.1", port))
    try:
        peer.sendall(greeting() + ready(b"PUSH"))
        under = [bytes([i]) * (LARGE + i) for i in range(4)]
        wire = b"".join(frame(body) for body in under)
        pieces = [
            wire[:len(frame(under[0])) + 1000],  # a read ends inside a large frame: header first next
            wire[len(frame(under[0])) + 1000:],
            frame(b"o" * (limit + 1)) + frame(b"after"),
        ]

        def write() -> None:
            for piece in pieces:
                peer.sendall(piece)
                time.sleep(0.05)  # the reader, blocked in recv, takes what has come so far

        writer = threading.Thread(target=write)
        writer.start()
        _expect(pull.recv, under, writer)
        pull.rcvtimeo = 300
        with pytest.raises(mqcore.Again):
            pull.recv()
    finally:
        peer.close()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_io_thread_reading_in_the_readers_stead_keeps_streams_whole(make_pair: Pair, transport: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # The IO thread looks every half millisecond whether the reader read since and reads itself when
    # not, so the two threads share the reading of streams that take every path (direct, header
    # first, general, a full pipe's backlog) many times.
    monkeypatch.setattr("mqcore.engine._inline.PARK_CHECK", 0.0005)
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, transport, rcvhwm=3)
    msgs = _large_stream() + SPANNING["small"][:2000] + [[b"%d" % i] for i in range(3000)]
    sender = _send_once_polled(pull, lambda: [push.send_multipart(m) for m in msgs])
    _expect(pull.recv_multipart, msgs, sender)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_noblock_eagain_then_poll_readiness_for_queued_messages(make_pair: Pair, transport: str,
                                                                direct_reads: list[int]) -> None:
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, transport)
    with pytest.raises(mqcore.Again):
        pull.recv(mqcore.NOBLOCK)
    push.send_multipart([b"m0"])
    assert pull.recv() == b"m0"  # the connection is up and idle now
    for i in range(1, 6):
        push.send(b"m%d" % i)
    # One blocking recv may read all five at once; the others wait queued and must show as POLLIN.
    got = [pull.recv()]
    poller = mqcore.Poller()
    poller.register(pull, mqcore.POLLIN)
    while len(got) < 5:
        assert dict(poller.poll(5000)).get(pull) == mqcore.POLLIN
        assert pull.getsockopt(mqcore.EVENTS) & mqcore.POLLIN
        got.append(pull.recv(mqcore.NOBLOCK))
    assert got == [b"m%d" % i for i in range(1, 6)]
    assert poller.poll(0) == []
    with pytest.raises(mqcore.Again):
        pull.recv(mqcore.NOBLOCK)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_req_rep_round_trips_and_efsm(make_pair: Pair, transport: str, direct_reads: list[int],
                                      direct_sends: list[int]) -> None:
    rep, req = make_pair(mqcore.REP, mqcore.REQ, transport)

    def serve() -> None:
        for _ in range(200):
            rep.send_multipart(rep.recv_multipart())

    server = threading.Thread(target=serve)
    server.start()
    try:
        for i in range(200):
            req.send_multipart([b"q%d" % i, b"x" * i])
            assert req.recv_multipart() == [b"q%d" % i, b"x" * i]
    finally:
        server.join()
    with pytest.raises(mqcore.ZMQError):
        req.recv(mqcore.NOBLOCK)  # EFSM: no request outstanding
    req.send(b"again")
    with pytest.raises(mqcore.ZMQError):
        req.send(b"twice")  # EFSM: the reply is still due, also on the direct path
    assert direct_reads[0] > 0
    assert direct_sends[0] > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_single_frame_round_trips_hand_the_message_straight_to_recv(make_pair: Pair, transport: str,
                                                                     direct_reads: list[int]) -> None:
    """A REQ's reply and a REP's request alone in their read skip the pipe: the REQ/REP states,
    RCVMORE and the message's connection (Frame properties) are as on the pipe path."""
    rep, req = make_pair(mqcore.REP, mqcore.REQ, transport)
    seen: list[Any] = []

    def serve() -> None:
        for _ in range(100):
            request = rep.recv(copy=False)
            seen.append((request.bytes, request.more, request.get("Socket-Type")))
            with pytest.raises(mqcore.ZMQError):
                rep.recv(mqcore.NOBLOCK)  # EFSM: the reply is due first
            _once_polled(req)
            rep.send(request.bytes.upper())

    server = threading.Thread(target=serve)
    server.start()
    try:
        for i in range(100):
            _once_polled(rep)
            req.send(b"q%d" % i)
            assert req.recv() == b"Q%d" % i
            assert not req.getsockopt(mqcore.RCVMORE)
    finally:
        server.join()
    assert seen == [(b"q%d" % i, False, "REQ") for i in range(100)]
    assert direct_reads[2] > 0
    with pytest.raises(mqcore.ZMQError):
        req.recv(mqcore.NOBLOCK)  # EFSM: no request outstanding


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("delimiter", [True, False])
def test_dealer_router_round_trips_go_direct_both_ways(make_pair: Pair, transport: str, delimiter: bool,
                                                       direct_reads: list[int],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A ROUTER's reply is written in its thread and a message alone in its read goes straight to the
    waiting recv, on both sides: the routing id, the frames and RCVMORE stay as on the pipe path."""
    from mqcore.sockets.reqrep import Router

    router_direct = [0]
    real = Router.xsend_direct

    def counting(self: Router, msg: list[bytes], pipe: Any) -> Any:
        frames = real(self, msg, pipe)
        router_direct[0] += frames is not None
        return frames

    monkeypatch.setattr(Router, "xsend_direct", counting)
    router, dealer = make_pair(mqcore.ROUTER, mqcore.DEALER, transport)
    head = [b""] if delimiter else []
    ids: list[bytes] = []

    def serve() -> None:
        for _ in range(100):
            rid, *frames = router.recv_multipart()
            ids.append(rid)
            _once_polled(dealer)
            router.send_multipart([rid, *frames[:-1], frames[-1].upper()])
        router.send_multipart([b"\x00nobody", b"lost"])  # an unknown id: dropped, as on the pipe path

    server = threading.Thread(target=serve)
    server.start()
    try:
        for i in range(100):
            _once_polled(router)
            dealer.send_multipart([*head, b"q%d" % i])
            assert dealer.recv_multipart() == [*head, b"Q%d" % i]
            assert not dealer.getsockopt(mqcore.RCVMORE)
    finally:
        server.join()
    assert len(set(ids)) == 1 and len(ids[0]) == 5 and ids[0][0] == 0  # one generated routing id
    assert router_direct[0] > 0
    assert direct_reads[2] > 0
    with pytest.raises(mqcore.Again):
        dealer.recv(mqcore.NOBLOCK)


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_pair_round_trips_hand_the_message_straight_to_recv(make_pair: Pair, transport: str,
                                                            direct_reads: list[int]) -> None:
    a, b = make_pair(mqcore.PAIR, mqcore.PAIR, transport)
    def serve() -> None:
        for _ in range(100):
            got = b.recv()
            _once_polled(a)
            b.send(got + b"!")

    server = threading.Thread(target=serve)
    server.start()
    try:
        for i in range(100):
            _once_polled(b)
            a.send(b"%d" % i)
            assert a.recv() == b"%d!" % i
    finally:
        server.join()
    assert direct_reads[2] > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_send_after_a_read_goes_direct_however_soon(make_pair: Pair, transport: str,
                                                      direct_sends: list[int],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    # Every send counts as back to back by time alone (a round trip here takes well under a second);
    # a REQ's requests still go direct, because each follows the read of the previous reply (only
    # back-to-back sends go to the IO thread). A read marks the last attempt at monotonic time 0, so
    # the gap must stay under the machine's uptime.
    monkeypatch.setattr("mqcore.engine._inline.INLINE_GAP", 1.0)
    rep, req = make_pair(mqcore.REP, mqcore.REQ, transport)
    trips = 50
    server = threading.Thread(target=lambda: [rep.send(rep.recv()) for _ in range(trips)])
    server.start()
    try:
        for i in range(trips):
            req.send(b"%d" % i)
            assert req.recv() == b"%d" % i
    finally:
        server.join()
    assert direct_sends[0] >= trips // 2


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_partial_direct_writes_leave_the_rest_to_the_io_thread(make_pair: Pair, transport: str,
                                                               direct_sends: list[int]) -> None:
    router, dealer = make_pair(mqcore.ROUTER, mqcore.DEALER, transport, rcvhwm=2)
    dealer.send(b"hello")
    rid, _ = router.recv_multipart()
    # Replied while the dealer waits in recv: its thread polls the connection from then on.
    reply = threading.Timer(0.2, router.send_multipart, ([rid, b"welcome"],))
    reply.start()
    try:
        assert dealer.recv() == b"welcome"
    finally:
        reply.join()
    # The router reads nothing while these go out (its IO thread stops at RCVHWM): the OS buffers fill, a direct write ends partial
    # and its rest, like every later message, goes through the IO thread, in order.
    msgs = [[b"%d" % i, bytes([i]) * 60000] for i in range(40)]
    for msg in msgs:
        time.sleep(0.0002)  # apart by more than INLINE_GAP, so each send may go direct
        dealer.send_multipart(msg)
    assert [router.recv_multipart()[1:] for _ in msgs] == msgs
    assert direct_sends[0] > 0


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_peer_disconnect_mid_stream(ctx: mqcore.Context, transport: str, direct_reads: list[int]) -> None:
    from tests.mqcore.conftest import endpoint

    pull = ctx.socket(mqcore.PULL)
    pull.rcvtimeo = 5000
    pull.bind(endpoint(transport))
    addr = pull.last_endpoint.decode()
    for round_ in range(2):  # the second peer connects after the first went away
        push = ctx.socket(mqcore.PUSH)
        push.connect(addr)
        for i in range(500):
            push.send(b"%d-%d" % (round_, i))
        push.close(linger=-1)  # everything leaves, then the connection closes under the reader
        assert [pull.recv() for _ in range(500)] == [b"%d-%d" % (round_, i) for i in range(500)]
    pull.rcvtimeo = 100
    with pytest.raises(mqcore.Again):
        pull.recv()
    pull.close(linger=0)


def test_heartbeats_keep_the_io_thread_reading(make_pair: Pair) -> None:
    # With heartbeats the engine never parks, so the direct path stays out of the way; messages
    # and the PING/PONG commands between them still arrive and are answered.
    pull, push = make_pair(mqcore.PULL, mqcore.PUSH, "tcp", heartbeat_ivl=10)
    for i in range(50):
        push.send(b"%d" % i)
    assert [pull.recv() for _ in range(50)] == [b"%d" % i for i in range(50)]
