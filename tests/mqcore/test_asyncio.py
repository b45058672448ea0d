"""mqcore.asyncio: awaitable sockets and poller on the running loop (no busy loop), as zmq.asyncio."""

from __future__ import annotations

import asyncio
import os
import uuid

import pytest

import mqcore
import mqcore.asyncio as mqa


def _ep(transport: str) -> str:
    return "tcp://127.0.0.1:*" if transport == "tcp" else f"inproc://a-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("transport", ["tcp", "inproc"])
def test_req_rep_roundtrips(transport: str) -> None:
    async def main() -> None:
        ctx = mqa.Context()
        rep, req = ctx.socket(mqcore.REP), ctx.socket(mqcore.REQ)
        for s in (rep, req):
            s.linger = 0
            s.rcvtimeo = 5000
        rep.bind(_ep(transport))
        req.connect(rep.last_endpoint.decode())

        async def server() -> None:
            for _ in range(20):
                msg = await rep.recv_multipart()
                await rep.send_multipart([b"re:" + msg[0]])

        task = asyncio.create_task(server())
        for i in range(20):
            await req.send_string(f"q{i}")
            assert await req.recv_string() == f"re:q{i}"
        await task
        ctx.destroy(linger=0)

    asyncio.run(main())


def test_recv_waits_without_blocking_the_loop_and_times_out() -> None:
    async def main() -> None:
        ctx = mqa.Context()
        pull, push = ctx.socket(mqcore.PULL), ctx.socket(mqcore.PUSH)
        pull.linger = push.linger = 0
        pull.bind(_ep("tcp"))
        push.connect(pull.last_endpoint.decode())
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        t = asyncio.create_task(ticker())
        pending = pull.recv()
        await asyncio.sleep(0.05)
        assert not pending.done()
        await push.send(b"late")
        assert await pending == b"late"
        assert ticks > 1  # the loop kept running while recv waited
        pull.rcvtimeo = 50
        with pytest.raises(mqcore.Again):
            await pull.recv()
        t.cancel()
        ctx.destroy(linger=0)

    asyncio.run(main())


def test_poller_over_sockets_and_plain_fds() -> None:
    async def main() -> None:
        ctx = mqa.Context()
        pull, push = ctx.socket(mqcore.PULL), ctx.socket(mqcore.PUSH)
        pull.linger = push.linger = 0
        pull.bind(_ep("inproc"))
        push.connect(pull.last_endpoint.decode())
        rfd, wfd = os.pipe()
        poller = mqa.Poller()
        poller.register(pull, mqcore.POLLIN)
        poller.register(rfd, mqcore.POLLIN)
        assert await poller.poll(20) == []
        os.write(wfd, b"x")
        assert await poller.poll(1000) == [(rfd, mqcore.POLLIN)]
        os.read(rfd, 1)
        waiter = poller.poll(5000)  # a Future already, as with pyzmq
        await asyncio.sleep(0.01)
        await push.send(b"m")
        assert await waiter == [(pull, mqcore.POLLIN)]
        assert await pull.poll(0) == mqcore.POLLIN
        assert await pull.recv() == b"m"
        os.close(rfd)
        os.close(wfd)
        ctx.destroy(linger=0)

    asyncio.run(main())


def test_concurrent_receivers_on_one_socket_and_close_cancels() -> None:
    async def main() -> None:
        ctx = mqa.Context()
        pull, push = ctx.socket(mqcore.PULL), ctx.socket(mqcore.PUSH)
        pull.linger = push.linger = 0
        pull.bind(_ep("inproc"))
        push.connect(pull.last_endpoint.decode())
        receivers = [asyncio.ensure_future(pull.recv()) for _ in range(3)]
        await asyncio.sleep(0.01)
        for i in range(3):
            await push.send(b"%d" % i)
        assert sorted(await asyncio.gather(*receivers)) == [b"0", b"1", b"2"]
        stuck = asyncio.ensure_future(pull.recv())
        await asyncio.sleep(0.01)
        pull.close()
        with pytest.raises(asyncio.CancelledError):
            await stuck
        ctx.destroy(linger=0)

    asyncio.run(main())


@pytest.mark.parametrize("mq_binds", [True, False])
def test_against_pyzmq_asyncio_peer(mq_binds: bool) -> None:
    zmq_asyncio = pytest.importorskip("zmq.asyncio")
    import zmq

    async def main() -> None:
        mctx, zctx = mqa.Context(), zmq_asyncio.Context()
        dealer = mctx.socket(mqcore.DEALER)
        router = zctx.socket(zmq.ROUTER)
        dealer.linger = router.linger = 0
        dealer.rcvtimeo = router.rcvtimeo = 5000
        if mq_binds:
            dealer.bind("tcp://127.0.0.1:*")
            router.connect(dealer.last_endpoint.decode())
        else:
            router.bind("tcp://127.0.0.1:*")
            dealer.connect(router.last_endpoint.decode())
        for i in range(10):
            await dealer.send_multipart([b"hello", b"%d" % i])
            rid, *body = await router.recv_multipart()
            assert body == [b"hello", b"%d" % i]
            await router.send_multipart([rid, b"world", b"%d" % i])
            assert await dealer.recv_multipart() == [b"world", b"%d" % i]
        mctx.destroy(linger=0)
        zctx.destroy(linger=0)

    asyncio.run(main())


def test_json_pyobj_helpers_are_awaitable() -> None:
    async def main() -> None:
        ctx = mqa.Context()
        a, b = ctx.socket(mqcore.PAIR), ctx.socket(mqcore.PAIR)
        a.linger = b.linger = 0
        a.bind(_ep("inproc"))
        b.connect(a.last_endpoint.decode())
        await a.send_json({"k": [1, 2]})
        assert await b.recv_json() == {"k": [1, 2]}
        await b.send_pyobj(("t", 3))
        assert await a.recv_pyobj() == ("t", 3)
        ctx.destroy(linger=0)

    asyncio.run(main())
