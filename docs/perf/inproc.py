"""inproc throughput and round trips, mqcore and pyzmq alternating in one run (inproc cannot cross
processes, so the harness cannot measure it).

    .venv/bin/python docs/perf/inproc.py [--n 200000] [--rounds 3]

PUSH/PULL: a sender thread pushes N messages of each size; the receiver (main thread) measures
messages / (last receive - first receive). REQ/REP: a replier thread echoes 100 B; the requester
records each round trip. Prints each round and the mqcore/zmq ratio of the medians.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import threading
import time


def _throughput(zmq, n: int, size: int, name: str) -> float:
    ctx = zmq.Context()
    pull = ctx.socket(zmq.PULL)
    pull.bind(f"inproc://{name}")
    push = ctx.socket(zmq.PUSH)
    push.connect(f"inproc://{name}")
    payload = bytes(size)

    def sender() -> None:
        for _ in range(n):
            push.send(payload)

    t = threading.Thread(target=sender)
    t.start()
    pull.recv()
    t0 = time.perf_counter()
    for _ in range(n - 1):
        pull.recv()
    rate = (n - 1) / (time.perf_counter() - t0)
    t.join()
    push.close(linger=0)
    pull.close(linger=0)
    ctx.term()
    return rate


def _rtt(zmq, n: int, name: str) -> float:
    ctx = zmq.Context()
    rep = ctx.socket(zmq.REP)
    rep.bind(f"inproc://{name}")
    req = ctx.socket(zmq.REQ)
    req.connect(f"inproc://{name}")

    def replier() -> None:
        for _ in range(n):
            rep.send(rep.recv())

    t = threading.Thread(target=replier)
    t.start()
    payload = bytes(100)
    rtts = []
    for _ in range(n):
        t0 = time.monotonic_ns()
        req.send(payload)
        req.recv()
        rtts.append((time.monotonic_ns() - t0) / 1000.0)
    t.join()
    req.close(linger=0)
    rep.close(linger=0)
    ctx.term()
    return statistics.median(rtts[n // 10:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    mods = {name: importlib.import_module(name) for name in ("mqcore", "zmq")}
    for size in (100, 1000, 65536):
        n = args.n if size < 65536 else max(2000, args.n // 50)
        ratios = []
        for r in range(args.rounds):
            got = {m: _throughput(z, n, size, f"tp-{size}-{r}") for m, z in mods.items()}
            ratios.append(got["mqcore"] / got["zmq"])
            print(f"inproc PUSH/PULL {size} B round {r}: mqcore {got['mqcore']:,.0f}/s zmq {got['zmq']:,.0f}/s")
        print(f"inproc PUSH/PULL {size} B: receiver throughput mqcore/zmq median {statistics.median(ratios):.2f}")
    ratios = []
    for r in range(args.rounds):
        got = {m: _rtt(z, 5000, f"rtt-{r}") for m, z in mods.items()}
        ratios.append(got["mqcore"] / got["zmq"])
        print(f"inproc REQ/REP round {r}: p50 mqcore {got['mqcore']:.1f} µs zmq {got['zmq']:.1f} µs")
    print(f"inproc REQ/REP: p50 RTT mqcore/zmq median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
