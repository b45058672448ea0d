"""Two-process REQ/REP round trip and PUSH/PULL receiver throughput, mqcore against pyzmq, outside the harness.

Usage: python tools/roundtrip.py [--rounds 5] [--trips 5000] [--messages 200000] [--size 100]
                                [--transport tcp|ipc] [--mqcore-from DIR] [--busy-poll US] [--bare]

Each round runs both libraries one after the other (the order alternates between rounds), each as
two processes over tcp loopback (or ipc): this process binds and measures (REQ: one perf_counter
stamp per round trip; PULL: messages per second from the first to the last message), a child process
started from this same file connects and serves (REP echoes, PUSH sends). Beside the clocks it reports
the CPU time this process spent per round trip and per received message (``time.process_time``, all
its threads), and what the child reports of its own (per round trip on the REP side, per message sent
on the PUSH side): on a loaded machine the wall-clock figures swing with the scheduler, the CPU cost
much less. The printed ratios are mqcore/pyzmq within the same run: on a shared machine only those are
comparable, not the absolute figures. Issue 19's bar: round trip p50 <= 0.8x and throughput >= 0.8x
pyzmq's. ``--mqcore-from DIR`` imports mqcore from DIR (e.g. an export of an older commit) in both
processes, so that runs alternating it with this tree's mqcore compare two versions. ``--bare`` adds, each round, a bare
Python TCP ping-pong (two processes, blocking sockets, no library, no framing): the floor a library's
round trip adds to. ``--busy-poll US``
sets mqcore's BUSY_POLL in both processes (0: a waiting recv sleeps at once, as libzmq's does; the
default lets it poll up to 100 us first, see docs/pyzmq-suite.md), so that the path alone can be
compared.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

LIBS = ("mqcore", "pyzmq")
CHILD_TIMEOUT_S = 120
WARMUP = 200
_RUNS = itertools.count()
BUSY_POLL = 113  # the option's number (an older mqcore, through --mqcore-from, may not name it)


def _lib(name: str) -> ModuleType:
    return importlib.import_module("mqcore" if name == "mqcore" else "zmq")


def _context(lib: str, busy_poll: int | None) -> Any:
    """A context of ``lib``; for mqcore with ``busy_poll`` set, its sockets' BUSY_POLL."""
    ctx = _lib(lib).Context()
    if lib == "mqcore" and busy_poll is not None:
        ctx.setsockopt(BUSY_POLL, busy_poll)
    return ctx


def _time_trips(send: Callable[[bytes], object], recv: Callable[[], object], count: int,
                size: int) -> dict[str, float]:
    """WARMUP round trips, then ``count`` timed ones (one perf_counter stamp per trip): p50, p99 and this
    process's CPU per trip, in microseconds."""
    payload = b"x" * size
    for _ in range(WARMUP):
        send(payload)
        recv()
    clock = time.perf_counter
    trips = []
    cpu0 = time.process_time()
    for _ in range(count):
        t0 = clock()
        send(payload)
        recv()
        trips.append(clock() - t0)
    cpu = time.process_time() - cpu0
    trips.sort()
    return {"p50_us": trips[len(trips) // 2] * 1e6, "p99_us": trips[int(len(trips) * 0.99)] * 1e6,
            "cpu_us_trip": cpu / count * 1e6}


def _bare_recv(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes from a blocking socket (a round trip's message seldom comes in pieces, but may)."""
    data = sock.recv(size)
    while len(data) < size:
        more = sock.recv(size - len(data))
        if not more:
            raise ConnectionError("the peer closed the connection mid-message")
        data += more
    return data


def _bare_serve(endpoint: str, count: int, size: int) -> None:
    """The bare floor's echo side: a blocking socket, no library, no framing."""
    host, port = endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port))) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        cpu0 = time.process_time()
        for _ in range(count):
            sock.sendall(_bare_recv(sock, size))
    print(time.process_time() - cpu0, flush=True)


def _bare_measure(count: int, size: int) -> dict[str, float]:
    """The floor the issue names: a bare Python TCP ping-pong between two processes, blocking sockets,
    ``size`` bytes each way, what any library's round trip adds to."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        endpoint = f"127.0.0.1:{listener.getsockname()[1]}"
        child = _start_child("bare", "reqrep", endpoint, count + WARMUP, size, None)
        try:
            listener.settimeout(CHILD_TIMEOUT_S)
            sock, _ = listener.accept()
        except BaseException:
            child.kill()  # our own child, by its pid
            child.communicate()
            raise
    with sock:
        sock.settimeout(None)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        result = _time_trips(sock.sendall, lambda: _bare_recv(sock, size), count, size)
    peer_cpu = _stop_child(child, "bare")
    if peer_cpu is not None:
        result["peer_cpu_us_trip"] = peer_cpu / (count + WARMUP) * 1e6
    return result


def serve(lib: str, kind: str, endpoint: str, count: int, size: int, busy_poll: int | None = None) -> None:
    """The child's side: echo ``count`` requests (REP) or send ``count`` messages (PUSH)."""
    if lib == "bare":
        _bare_serve(endpoint, count, size)
        return
    zmq = _lib(lib)
    ctx = _context(lib, busy_poll)
    sock = ctx.socket(zmq.REP if kind == "reqrep" else zmq.PUSH)
    sock.connect(endpoint)
    cpu0 = time.process_time()
    if kind == "reqrep":
        for _ in range(count):
            sock.send(sock.recv())
    else:
        payload = b"x" * size
        for _ in range(count):
            sock.send(payload)
    sock.close()  # default LINGER: every message leaves before the context ends
    ctx.term()
    print(time.process_time() - cpu0, flush=True)  # this side's CPU seconds, for the measuring side


def _start_child(lib: str, kind: str, endpoint: str, count: int, size: int,
                 busy_poll: int | None) -> subprocess.Popen[bytes]:
    extra = [] if busy_poll is None else ["--busy-poll", str(busy_poll)]
    return subprocess.Popen([sys.executable, __file__, "--serve", lib, kind, endpoint, str(count), str(size), *extra],
                            stdout=subprocess.PIPE)


def _stop_child(child: subprocess.Popen[bytes], lib: str) -> float | None:
    """Wait for the child; the CPU seconds it reports, None if it had to be killed."""
    try:
        out, _ = child.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        child.kill()  # our own child, by its pid
        child.communicate()
        # Called once this side has its figures (every message arrived), so the round still counts.
        print(f"note: the {lib} child had not exited {CHILD_TIMEOUT_S} s after its last message; killed it",
              file=sys.stderr, flush=True)
        return None
    try:
        return float(out.split()[-1])
    except (IndexError, ValueError):
        return None


def measure(lib: str, kind: str, count: int, size: int, transport: str = "tcp",
            busy_poll: int | None = None) -> dict[str, float]:
    """This process's side of one run: bind, start the child, measure, stop the child."""
    zmq = _lib(lib)
    ctx: Any = _context(lib, busy_poll)
    sock = ctx.socket(zmq.REQ if kind == "reqrep" else zmq.PULL)
    # A fresh path for each measurement, so no connection meets a socket file of an earlier one (with
    # one path reused, a pyzmq PULL once waited forever for messages its exited PUSH child had sent).
    ipc_path = os.path.join(tempfile.gettempdir(), f"mqcore-roundtrip-{os.getpid()}-{next(_RUNS)}")
    if transport == "ipc":
        endpoint = f"ipc://{ipc_path}"
        sock.bind(endpoint)
    else:
        endpoint = f"tcp://127.0.0.1:{sock.bind_to_random_port('tcp://127.0.0.1')}"
    child = _start_child(lib, kind, endpoint, count + WARMUP, size, busy_poll)
    try:
        if kind == "reqrep":
            result = _time_trips(sock.send, sock.recv, count, size)
        else:
            for _ in range(WARMUP):
                sock.recv()
            t0 = time.perf_counter()
            cpu0 = time.process_time()
            for _ in range(count):
                sock.recv()
            cpu = time.process_time() - cpu0
            result = {"msgs_per_s": count / (time.perf_counter() - t0), "cpu_us_msg": cpu / count * 1e6}
        # The child's CPU spans its whole loop, warm-up and the wait for the connection included.
        peer_key = "peer_cpu_us_trip" if kind == "reqrep" else "sender_cpu_us_msg"
    finally:
        sock.close(linger=0)
        peer_cpu = _stop_child(child, lib)
        ctx.term()
        if transport == "ipc" and os.path.exists(ipc_path):
            os.unlink(ipc_path)  # ours; not every library removes its socket file on close
    if peer_cpu is not None:
        result[peer_key] = peer_cpu / (count + WARMUP) * 1e6
    return result


def _record(store: dict[str, list[float]], label: str, row: dict[str, float]) -> None:
    """Keep one round's figures for the medians and print them under ``label``."""
    for key, value in row.items():
        store.setdefault(key, []).append(value)
    print(f"{label} " + "  ".join(f"{k} {v:,.1f}" for k, v in row.items()), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds per library (default 5)")
    parser.add_argument("--trips", type=int, default=5000, help="REQ/REP round trips per round")
    parser.add_argument("--messages", type=int, default=200000, help="PUSH/PULL messages per round")
    parser.add_argument("--size", type=int, default=100, help="message size in bytes (default 100)")
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp", help="default tcp (loopback)")
    parser.add_argument("--mqcore-from", metavar="DIR", help="import mqcore from DIR (both processes)")
    parser.add_argument("--busy-poll", type=int, metavar="US",
                        help="mqcore's BUSY_POLL in microseconds, both processes (0: off; default: mqcore's)")
    parser.add_argument("--bare", action="store_true",
                        help="also a bare Python TCP ping-pong each round (blocking sockets, no library): the floor")
    parser.add_argument("--serve", nargs=5, metavar=("LIB", "KIND", "ENDPOINT", "COUNT", "SIZE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.mqcore_from:
        if not os.path.isfile(os.path.join(args.mqcore_from, "mqcore", "__init__.py")):
            parser.error(f"--mqcore-from {args.mqcore_from}: no mqcore package there; give the folder holding mqcore/")
        sys.path.insert(0, args.mqcore_from)
        # The children (started from this file) import it from there too.
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, (args.mqcore_from, os.environ.get("PYTHONPATH"))))
    if args.serve:
        lib, kind, endpoint, count, size = args.serve
        serve(lib, kind, endpoint, int(count), int(size), args.busy_poll)
        return 0
    if args.bare and args.transport != "tcp":
        parser.error("--bare is a tcp ping-pong; leave out --transport ipc")
    results: dict[str, dict[str, list[float]]] = {lib: {} for lib in LIBS}
    bare: dict[str, list[float]] = {}
    for r in range(args.rounds):
        for lib in (LIBS if r % 2 == 0 else LIBS[::-1]):
            row = {**measure(lib, "reqrep", args.trips, args.size, args.transport, args.busy_poll),
                   **measure(lib, "pushpull", args.messages, args.size, args.transport, args.busy_poll)}
            _record(results[lib], f"round {r + 1} {lib:<7}", row)
        if args.bare:
            _record(bare, f"round {r + 1} {'bare':<7}", _bare_measure(args.trips, args.size))
    where = "tcp loopback" if args.transport == "tcp" else "ipc"
    spin = "" if args.busy_poll is None else f", mqcore BUSY_POLL {args.busy_poll} us"
    print(f"median of {args.rounds} rounds, {args.size} B, {where}{spin} (ratios are mqcore/pyzmq, same run)")
    for key in results["mqcore"]:
        ours, theirs = (statistics.median(results[lib][key]) for lib in LIBS)
        print(f"  {key:<17} mqcore {ours:>12,.1f}  pyzmq {theirs:>12,.1f}  ratio {ours / theirs:.2f}")
    if bare:
        print("the bare ping-pong (no library; mqcore/bare and pyzmq/bare, same run)")
        for key, values in bare.items():
            floor = statistics.median(values)
            ours, theirs = (statistics.median(results[lib][key]) for lib in LIBS)
            print(f"  {key:<17} bare {floor:>12,.1f}  mqcore/bare {ours / floor:.2f}  pyzmq/bare {theirs / floor:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
