"""Load balancing, fair queueing and distribution over pipes, and the reconnect back-off."""

from __future__ import annotations

import random
import time

from mqcore.backoff import reconnect_delay
from mqcore.pipe import Pipe, pipe_pair
from mqcore.routing import Distributor, FairQueue, LoadBalancer


class Owner:
    def post(self, fn: object, *args: object) -> None: ...
    def _pipe_activate_read(self, pipe: Pipe) -> None: ...
    def _pipe_activate_write(self, pipe: Pipe) -> None: ...
    def _pipe_terminated(self, pipe: Pipe) -> None: ...
    def _pipe_hiccuped(self, pipe: Pipe) -> None: ...


def pipes(n: int, hwm: int = 0) -> list[tuple[Pipe, Pipe]]:
    o = Owner()
    return [pipe_pair(o, o, hwm, o, o, hwm) for _ in range(n)]  # type: ignore[arg-type]


def test_load_balancer_round_robin_skips_full_pipes() -> None:
    pairs = pipes(3, hwm=2)
    lb = LoadBalancer()
    for mine, _ in pairs:
        lb.attach(mine)
    for i in range(6):
        assert lb.send([b"%d" % i]) is not None
    assert [len(theirs.inbound) for _, theirs in pairs] == [2, 2, 2]
    assert lb.send([b"full"]) is None
    assert not lb.has_out()
    pairs[1][1].read()
    pairs[1][1].read()  # at the LWM: writer re-activated by command
    lb.activated(pairs[1][0])
    assert lb.send([b"x"]) is pairs[1][0]


def test_fair_queue_alternates_between_pipes() -> None:
    pairs = pipes(2)
    fq = FairQueue()
    for mine, _ in pairs:
        fq.attach(mine)
    for i in range(3):
        pairs[0][1].send([b"a%d" % i])
        pairs[1][1].send([b"b%d" % i])
    got = [fq.recv() for _ in range(6)]
    assert got == [[b"a0"], [b"b0"], [b"a1"], [b"b1"], [b"a2"], [b"b2"]]
    assert fq.recv() is None and fq.active == 0
    pairs[1][1].send([b"late"])
    fq.activated(pairs[1][0])
    assert fq.recv() == [b"late"] and fq.last_pipe is pairs[1][0]


def test_fair_queue_drains_a_terminated_pipe_before_forgetting_it() -> None:
    (mine, theirs), = pipes(1)
    fq = FairQueue()
    fq.attach(mine)
    theirs.send([b"1"])
    theirs.terminate()
    fq.terminated(mine)
    assert fq.recv() == [b"1"]
    assert fq.recv() is None and mine not in fq


def test_distributor_drops_for_full_pipes_only() -> None:
    pairs = pipes(2, hwm=1)
    d = Distributor()
    for mine, _ in pairs:
        d.attach(mine)
    assert d.send_to_all([b"one"]) == 2
    pairs[0][1].read()
    assert d.send_to_all([b"two"]) == 1
    assert pairs[0][1].read() == [b"two"]
    assert pairs[1][1].read() == [b"one"]


def test_reconnect_backoff_doubles_to_max_with_jitter() -> None:
    rng = random.Random(7)
    ivl, delays = 100, []
    for _ in range(6):
        delay, ivl = reconnect_delay(ivl, 100, 1000, rng)
        delays.append(delay)
    assert ivl == 1000
    bases = [100, 200, 400, 800, 1000, 1000]
    for d, base in zip(delays, bases, strict=True):
        assert base / 1000 <= d < (base + 100) / 1000


def test_reconnect_backoff_constant_without_max() -> None:
    delay, nxt = reconnect_delay(100, 100, 0, random.Random(1))
    assert nxt == 100 and 0.1 <= delay < 0.2


def test_the_library_leaves_the_applications_random_state_alone() -> None:
    """Reconnect jitter (drawn in the I/O thread) and routing ids come from mqcore's own generator:
    an application that seeds ``random`` gets the same sequence with sockets reconnecting."""
    import mqcore

    random.seed(11)
    expected = [random.random() for _ in range(3)]
    random.seed(11)
    ctx = mqcore.Context()
    try:
        router, req = ctx.socket(mqcore.ROUTER), ctx.socket(mqcore.REQ)
        for s in (router, req):
            s.setsockopt(mqcore.LINGER, 0)
        req.setsockopt(mqcore.RECONNECT_IVL, 1)
        req.connect("tcp://127.0.0.1:1")  # nothing listens: the I/O thread retries every ~1-2 ms
        time.sleep(0.2)
        assert [random.random() for _ in range(3)] == expected
    finally:
        ctx.destroy(linger=0)
