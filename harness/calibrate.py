"""What the harness costs: the measuring behind `mqbench calibrate` (harness/commands/calibrate.py prints it).

Measures pyzmq PUSH/PULL receiver throughput over tcp loopback two ways, alternating, in one run: a bare
send/recv loop between two processes with no recording at all, and the harness's own `zmq` queue case
(header, stamps, records). The ratio harness / bare says how much the harness itself costs.

Each repetition is a pair (bare loop and harness case, in alternating order) measured back to back, so
the ratio of a pair compares two runs under the same machine conditions; the summary is the median of those paired ratios
with its interquartile range, next to the ratio of the two medians. On a virtual machine the CPU time the
host took away from this one (steal, from /proc/stat) is shown per repetition: it is one source of the
spread between repetitions.
"""

from __future__ import annotations

import csv
import io
import multiprocessing as mp
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness.runfolder import atomic_write
from harness.scenario import parse_scenario

_CTX = mp.get_context("forkserver")


class CalibrationError(Exception):
    """A repetition could not be measured; the message says which and why."""


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

    from harness.brokers import free_port  # here: the sender's process imports this module too

    ctx = zmq.Context()
    r = ctx.socket(zmq.PULL)
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    r.bind(endpoint)
    p = _CTX.Process(target=_bare_sender, args=(endpoint, n, size), daemon=True)
    p.start()
    done = False
    try:
        r.setsockopt(zmq.RCVTIMEO, 30_000)
        recv = r.recv
        recv()
        first = time.monotonic_ns()
        for _ in range(n - 1):
            recv()
        last = time.monotonic_ns()
        done = True
    except zmq.Again:
        raise CalibrationError("the bare loop's receiver got nothing for 30 s (its sender process "
                               f"{'exited with code ' + str(p.exitcode) if p.exitcode is not None else 'is stuck'})"
                               ) from None
    finally:
        p.join(30 if done else 0)  # interrupted or failed: the sender may be blocked at its HWM, stop it now
        if p.is_alive():
            p.kill()
            p.join(5)
        r.close(linger=0)
        ctx.term()
    return (n - 1) / ((last - first) / 1e9)


def steal_ms() -> float | None:
    """CPU time the hypervisor has taken from this machine since boot, all CPUs, in ms (None off Linux)."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        return int(fields[8]) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


@dataclass
class Calibration:
    """Paired measurements: ``bare[i]`` and ``harness[i]`` (msgs/s) were taken back to back."""

    bare: list[float] = field(default_factory=list)
    harness: list[float] = field(default_factory=list)
    steal: list[float | None] = field(default_factory=list)  # ms taken by the host during repetition i

    def ratios(self) -> list[float]:
        return [h / b for b, h in zip(self.bare, self.harness, strict=True)]

    def median_ratio(self) -> float:
        return statistics.median(self.ratios())

    def quartiles(self) -> tuple[float, float]:
        """Interquartile range of the paired ratios (the ratio itself when there is one pair)."""
        r = self.ratios()
        if len(r) < 2:
            return r[0], r[0]
        q = statistics.quantiles(r, n=4, method="inclusive")
        return q[0], q[2]

    def ratio_of_medians(self) -> float:
        return statistics.median(self.harness) / statistics.median(self.bare)

    def write_csv(self, path: Path) -> None:
        text = io.StringIO()
        w = csv.writer(text)
        w.writerow(["repetition", "bare_msgs_per_s", "harness_msgs_per_s", "harness_over_bare", "steal_ms"])
        for i, (b, h, s) in enumerate(zip(self.bare, self.harness, self.steal, strict=True)):
            w.writerow([i + 1, f"{b:.0f}", f"{h:.0f}", f"{h / b:.4f}", "" if s is None else f"{s:.0f}"])
        atomic_write(path, text.getvalue().encode())


def calibrate(size: int, messages: int, repetitions: int, out: Path | None, console: Console) -> Calibration:
    """Alternate bare loop and harness ``repetitions`` times, saying on ``console`` which one runs; harness
    run folders and ``calibrate.csv`` go to ``out`` if given, else to a temporary folder that is removed
    afterwards. CalibrationError names a repetition that could not be measured."""
    import tempfile

    if out is None:
        with tempfile.TemporaryDirectory(prefix="mqbench-calibrate-") as tmp:
            return calibrate(size, messages, repetitions, Path(tmp), console)
    from harness.compare import compare

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

    def run_bare(rep: int) -> float:
        console.print(f"repetition {rep + 1}/{repetitions}: bare loop…")
        return bare_receiver_throughput(messages, size)

    def run_harness(rep: int) -> float:
        console.print(f"repetition {rep + 1}/{repetitions}: harness…")
        outcome = compare([scenario], out_root=out, console=console, label="calibrate", write_report=False)
        if not outcome.complete or outcome.summary.empty:
            problems = "; ".join(outcome.problems) or "no summary"
            raise CalibrationError(f"the harness run of repetition {rep + 1} did not complete: {problems}")
        return float(outcome.summary["receiver_msgs_per_s"].iloc[0])

    result = Calibration()
    for rep in range(repetitions):
        before = steal_ms()
        if rep % 2 == 0:  # the order alternates, so that neither side always runs first
            bare = run_bare(rep)
            harness = run_harness(rep)
        else:
            harness = run_harness(rep)
            bare = run_bare(rep)
        after = steal_ms()
        result.bare.append(bare)
        result.harness.append(harness)
        result.steal.append(None if before is None or after is None else after - before)
    out.mkdir(parents=True, exist_ok=True)
    result.write_csv(out / "calibrate.csv")
    return result
