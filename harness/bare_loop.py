"""A bare PUSH/PULL loop of a pyzmq-API library, nothing stamped or recorded: the floor ``mqbench calibrate``
measures the harness against (harness/calibrate.py). Run as a script, never imported by the harness, so that
its process holds the library and nothing else (no numpy, no harness: a process's own objects are what a
full garbage collection walks).

    python harness/bare_loop.py push LIBRARY ENDPOINT MESSAGES SIZE [DISTINCT]
                                          binds, prints "bound", sends, prints "cpu S"
    python harness/bare_loop.py pull LIBRARY ENDPOINT MESSAGES        connects, receives, prints "rate R cpu S"

LIBRARY is ``zmq`` (pyzmq) or ``mqcore``. The sender cycles through DISTINCT messages (default 1) made
before its loop, each with its own first 8 bytes: as many as the harness's sender hands that library in turn
(``harness.runner._send.distinct_messages``), so that the bare loop differs from the harness's case in the
stamping and recording only. The topology is the harness's: the producer binds, the consumer
connects (harness/drivers/zmq_driver.py). The rate is the receiver's, as the harness defines it:
(n - 1) / (last receipt - first receipt). ``cpu`` is the CPU time of the whole process (all its threads:
the library's IO threads too) over its loop: the sender's from its first send to its close, the receiver's
from its first receipt to its last. A receive that waits 30 s ends the run with status 1 ("timeout").
JeroMQ's bare loop is jvm/src/main/java/mqbench/jvm/BareLoop.java.
"""

from __future__ import annotations

import importlib
import itertools
import sys
import time

TIMEOUT_MS = 30_000


def push(lib: str, endpoint: str, n: int, size: int, distinct: int = 1) -> int:
    zmq = importlib.import_module(lib)
    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.bind(endpoint)
    print("bound", flush=True)
    msgs = [i.to_bytes(8, "little")[:size] + bytes(max(0, size - 8)) for i in range(max(1, distinct))]
    send = s.send
    cpu = time.process_time()
    for msg in itertools.islice(itertools.cycle(msgs), n):  # no more bytecode a message than a range loop
        send(msg)
    s.close(linger=TIMEOUT_MS)  # everything queued leaves before the context ends
    ctx.term()
    print(f"cpu {time.process_time() - cpu}", flush=True)
    return 0


def pull(lib: str, endpoint: str, n: int) -> int:
    zmq = importlib.import_module(lib)
    ctx = zmq.Context()
    s = ctx.socket(zmq.PULL)
    s.setsockopt(zmq.RCVTIMEO, TIMEOUT_MS)
    s.connect(endpoint)
    recv = s.recv
    try:
        recv()
        first, cpu = time.monotonic_ns(), time.process_time()
        for _ in range(n - 1):
            recv()
        last, cpu = time.monotonic_ns(), time.process_time() - cpu
    except zmq.Again:
        print("timeout", flush=True)
        return 1
    finally:
        s.close(linger=0)
        ctx.term()
    print(f"rate {(n - 1) / ((last - first) / 1e9)} cpu {cpu}", flush=True)
    return 0


def main(argv: list[str]) -> int:
    if len(argv) in (5, 6) and argv[0] == "push":
        return push(argv[1], argv[2], int(argv[3]), int(argv[4]), *map(int, argv[5:]))
    if len(argv) == 4 and argv[0] == "pull":
        return pull(argv[1], argv[2], int(argv[3]))
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
