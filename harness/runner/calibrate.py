"""`mqbench calibrate`: is the harness what limits the numbers?

Measures pyzmq PUSH/PULL receiver throughput over tcp loopback two ways, alternating, in one run: a bare
send/recv loop between two processes with no recording at all, and the harness's own `zmq` queue case
(header, stamps, records). The ratio harness / bare says how much the harness itself costs.
"""

from __future__ import annotations

import multiprocessing as mp
import statistics
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from harness.drivers.zmq_driver import free_tcp_port
from harness.scenario import parse_scenario

_CTX = mp.get_context("forkserver")


def _bare_sender(endpoint: str, n: int, size: int) -> None:
    import zmq

    ctx = zmq.Context()
    s = ctx.socket(zmq.PUSH)
    s.connect(endpoint)
    msg = bytes(size)
    for _ in range(n):
        s.send(msg)
    s.close(linger=-1)
    ctx.term()


def bare_receiver_throughput(n: int, size: int) -> float:
    """msgs/s at a PULL receiving n messages from a PUSH in another process: (n-1) / (last - first)."""
    import zmq

    ctx = zmq.Context()
    r = ctx.socket(zmq.PULL)
    endpoint = f"tcp://127.0.0.1:{free_tcp_port()}"
    r.bind(endpoint)
    p = _CTX.Process(target=_bare_sender, args=(endpoint, n, size), daemon=True)
    p.start()
    try:
        r.setsockopt(zmq.RCVTIMEO, 30_000)
        recv = r.recv
        recv()
        first = time.monotonic_ns()
        for _ in range(n - 1):
            recv()
        last = time.monotonic_ns()
    finally:
        p.join(30)
        if p.is_alive():
            p.kill()
        r.close(linger=0)
        ctx.term()
    return (n - 1) / ((last - first) / 1e9)


def calibrate(size: int, messages: int, repetitions: int, out: Path | None, console: Console) -> int:
    """Alternate bare loop and harness ``repetitions`` times; harness run folders go to ``out`` if given,
    else to a temporary folder that is removed afterwards."""
    import tempfile

    if out is None:
        with tempfile.TemporaryDirectory(prefix="mqbench-calibrate-") as tmp:
            return calibrate(size, messages, repetitions, Path(tmp), console)
    from harness.runner.compare import compare

    scenario = parse_scenario(
        {
            "name": "calibrate",
            "pattern": "queue",
            "systems": ["zmq"],
            "message_sizes": [size],
            "messages": messages,
            "warmup": 0,
            "repetitions": 1,
        },
        "<calibrate>",
    )
    bare: list[float] = []
    harness: list[float] = []
    for rep in range(repetitions):
        console.print(f"repetition {rep + 1}/{repetitions}: bare loop…")
        bare.append(bare_receiver_throughput(messages, size))
        console.print(f"repetition {rep + 1}/{repetitions}: harness…")
        outcome = compare([scenario], out_root=out, console=console, label="calibrate", write_report=False)
        harness.append(float(outcome.summary["receiver_msgs_per_s"].iloc[0]))
    table = Table(title=f"pyzmq PUSH/PULL receiver throughput, {size} B, tcp loopback, {messages} messages")
    table.add_column("repetition")
    table.add_column("bare loop msg/s", justify="right")
    table.add_column("harness msg/s", justify="right")
    table.add_column("harness / bare", justify="right")
    for i, (b, h) in enumerate(zip(bare, harness, strict=True)):
        table.add_row(str(i + 1), f"{b:,.0f}", f"{h:,.0f}", f"{h / b:.2f}")
    mb, mh = statistics.median(bare), statistics.median(harness)
    table.add_row("median", f"{mb:,.0f}", f"{mh:,.0f}", f"{mh / mb:.2f}")
    console.print(table)
    return 0
