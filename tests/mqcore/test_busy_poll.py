"""BUSY_POLL: a recv waiting for input polls without sleeping for an adaptive window first."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import mqcore
from mqcore.options import BUSY_POLL_DEFAULT_US

Pair = Callable[..., tuple[Any, Any]]


class CountingPoll:
    """Stands in for a socket's ``select.poll`` object and records each call's timeout."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.timeouts: list[float | None] = []

    def poll(self, timeout: float | None = None) -> Any:
        self.timeouts.append(timeout)
        return self.real.poll(timeout)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


def _echo_after(rep: Any, count: int, delay_s: float) -> threading.Thread:
    def run() -> None:
        for _ in range(count):
            msg = rep.recv()
            time.sleep(delay_s)
            rep.send(msg)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_option_defaults_to_mqcore_s_window_and_takes_microseconds(ctx: mqcore.Context) -> None:
    sock = ctx.socket(mqcore.REQ)
    assert sock.getsockopt(mqcore.BUSY_POLL) == BUSY_POLL_DEFAULT_US
    sock.busy_poll = 0
    assert sock.getsockopt(mqcore.BUSY_POLL) == 0
    with pytest.raises(mqcore.ZMQError) as err:
        sock.setsockopt(mqcore.BUSY_POLL, -1)
    assert err.value.errno == mqcore.EINVAL
    ctx.setsockopt(mqcore.BUSY_POLL, 7)
    assert ctx.socket(mqcore.REP).busy_poll == 7
    sock.close(0)


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_waits_longer_than_the_window_stop_the_spinning(make_pair: Pair, transport: str) -> None:
    """Replies that take far longer than BUSY_POLL halve the window each wait till it is none; then a
    recv sleeps at once, without a single poll(0)."""
    req, rep = make_pair(mqcore.REQ, mqcore.REP, transport)
    thread = _echo_after(rep, 8, 0.01)
    for _ in range(7):
        req.send(b"ping")
        assert req.recv() == b"ping"
    assert req._spin == 0.0
    counting = req._poll = CountingPoll(req._poll)
    req.send(b"ping")
    assert req.recv() == b"ping"
    assert counting.timeouts and 0 not in counting.timeouts
    thread.join(5)


def test_busy_poll_zero_never_polls_without_sleeping(make_pair: Pair) -> None:
    req, rep = make_pair(mqcore.REQ, mqcore.REP, "tcp", busy_poll=0)
    counting = req._poll = CountingPoll(req._poll)
    thread = _echo_after(rep, 20, 0.0)
    for _ in range(20):
        req.send(b"ping")
        assert req.recv() == b"ping"
    assert counting.timeouts, "the recv waited at least once"
    assert 0 not in counting.timeouts
    thread.join(5)


def test_a_short_wait_opens_the_window_again(ctx: mqcore.Context) -> None:
    """A wait that ended within BUSY_POLL sets the window to cover such a wait (here: the socket's
    mailbox already signalled, so the sleeping poll returns at once)."""
    sock = ctx.socket(mqcore.PULL)
    sock.busy_poll = 10_000_000  # a limit no scheduling delay of this test reaches
    sock._spin = 0.0
    ran: list[bool] = []
    sock._mailbox.sleeping = True
    sock._mailbox.post(ran.append, True)  # what another thread's command does: the fd becomes readable
    assert sock._poll_input(1000.0)
    assert 0.0 < sock._spin <= 10.0
    sock._mailbox.drain_fd()
    sock._mailbox.process()
    assert ran == [True]
    sock.close(0)


def test_rcvtimeo_holds_while_the_window_is_longer(make_pair: Pair) -> None:
    pull, _push = make_pair(mqcore.PULL, mqcore.PUSH, "tcp", busy_poll=10_000_000, rcvtimeo=50)
    start = time.monotonic()
    with pytest.raises(mqcore.Again):
        pull.recv()
    assert time.monotonic() - start < 5.0  # the 10 s window did not override the 50 ms timeout


def test_a_spinning_recv_still_ends_with_the_context(ctx: mqcore.Context) -> None:
    sock = ctx.socket(mqcore.PULL)
    sock.busy_poll = 10_000_000
    sock.bind("tcp://127.0.0.1:*")
    failed: list[BaseException] = []

    def run() -> None:
        try:
            sock.recv()
        except BaseException as exc:  # noqa: BLE001 - the test inspects it
            failed.append(exc)
        sock.close(0)

    thread = threading.Thread(target=run)
    thread.start()
    time.sleep(0.05)
    ctx.term()
    thread.join(5)
    assert not thread.is_alive()
    assert failed and isinstance(failed[0], mqcore.ContextTerminated)
