"""Round-trip times of REQ/REP and DEALER/ROUTER, mqcore and pyzmq alternating in one run.

    .venv/bin/python docs/perf/rtt.py [--n 5000] [--rounds 3] [--transport tcp|ipc] [--pairs req,dealer]

The replier runs in a child process; the requester sends one 100 B message, waits for the reply with
``poll`` + ``recv`` (as the harness's requester does) and records the round trip. Prints p50/p90/p99 per
system and the mqcore/zmq ratio of the medians of each round.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing as mp
import os
import statistics
import tempfile
import time


def _replier(modname: str, kind: str, endpoint: str, ready: mp.synchronize.Event) -> None:
    zmq = importlib.import_module(modname)
    ctx = zmq.Context()
    s = ctx.socket(zmq.REP if kind == "req" else zmq.ROUTER)
    s.bind(endpoint)
    ready.set()
    try:
        if kind == "req":
            while True:
                msg = s.recv()
                if msg == b"stop":
                    s.send(msg)
                    break
                s.send(msg)
        else:
            while True:
                msg = s.recv_multipart()
                s.send_multipart(msg)
                if msg[-1] == b"stop":
                    break
    finally:
        s.close(linger=100)
        ctx.term()


def _measure(modname: str, kind: str, endpoint: str, n: int) -> list[float]:
    zmq = importlib.import_module(modname)
    ready = mp.get_context("spawn").Event()
    child = mp.get_context("spawn").Process(target=_replier, args=(modname, kind, endpoint, ready))
    child.start()
    ready.wait(10)
    ctx = zmq.Context()
    s = ctx.socket(zmq.REQ if kind == "req" else zmq.DEALER)
    s.connect(endpoint)
    payload = os.urandom(100)
    rtts = []
    mono = time.monotonic_ns
    pollin = zmq.POLLIN
    for i in range(n + n // 10):
        t = mono()
        s.send(payload)
        s.poll(5000, pollin)
        s.recv()
        if i >= n // 10:  # warm-up discarded
            rtts.append((mono() - t) / 1000.0)
    s.send(b"stop")
    s.recv()
    s.close(linger=0)
    ctx.term()
    child.join(10)
    return rtts


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--transport", default="tcp", choices=("tcp", "ipc"))
    ap.add_argument("--pairs", default="req,dealer")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="mqbench-rtt-")
    port = 47000 + os.getpid() % 10000
    for kind in args.pairs.split(","):
        ratios = []
        medians: dict[str, list[float]] = {"mqcore": [], "zmq": []}
        for r in range(args.rounds):
            got = {}
            for modname in ("mqcore", "zmq"):
                port += 1
                endpoint = f"tcp://127.0.0.1:{port}" if args.transport == "tcp" else f"ipc://{folder}/{modname}{r}"
                got[modname] = _measure(modname, kind, endpoint, args.n)
                medians[modname].append(statistics.median(got[modname]))
            ratios.append(statistics.median(got["mqcore"]) / statistics.median(got["zmq"]))
            for modname, xs in got.items():
                print(f"{kind:6} {args.transport} round {r} {modname:6} p50 {_pct(xs, .5):7.1f} µs  "
                      f"p90 {_pct(xs, .9):7.1f}  p99 {_pct(xs, .99):7.1f}")
        label = "REQ/REP" if kind == "req" else "DEALER/ROUTER"
        print(f"{label} {args.transport}: p50 mqcore/zmq per round {[round(x, 2) for x in ratios]}, "
              f"median {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
