"""What the harness costs: the measuring behind `mqbench calibrate` (harness/commands/calibrate.py prints it).

For each brokerless library (pyzmq as ``zmq``, ``mqcore``, ``jeromq``) and message size, PUSH/PULL receiver
throughput over tcp loopback is measured two ways, back to back: a bare send/recv loop between two processes
that hold the library and nothing else, nothing stamped or recorded (``harness/bare_loop.py``, JeroMQ's
``BareLoop.java``), and the harness's own queue case of that library (header, stamps, records, through
``compare``). The ratio harness ÷ bare of a pair says how much the harness itself costs that library; a
library's ratio against pyzmq's says whether the harness costs it more than it costs pyzmq.

Each repetition runs one pair per library and size, the libraries interleaved and the order inside a pair
alternating, so that the drift of a shared machine touches every library alike. The summary per library and
size is the median of its paired ratios with their interquartile range. On a virtual machine the CPU time
the host took away from this one (steal, from /proc/stat) is shown per pair: one source of the spread.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import os
import signal
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness import units
from harness.brokers import free_port
from harness.runfolder import atomic_write
from harness.scenario import parse_scenario

#: The brokerless libraries, by harness system, with the name a reader knows them by; pyzmq is the reference.
LIBRARIES: dict[str, str] = {"zmq": "pyzmq", "mqcore": "mqcore", "jeromq": "JeroMQ"}
REFERENCE = "zmq"
BARE_TIMEOUT_S = 120.0  # a whole bare loop, process starts included (a JVM on a loaded machine is slow)
_BARE_SCRIPT = Path(__file__).with_name("bare_loop.py")


class CalibrationError(Exception):
    """A repetition could not be measured; the message says which and why."""


def _bare_command(library: str, role: str, endpoint: str, n: int, size: int) -> list[str]:
    args = [role, endpoint, str(n), *([str(size), str(_distinct(library, size))] if role == "push" else [])]
    if library == "jeromq":
        from harness.drivers.java import command

        return command("mqbench.jvm.BareLoop", *args)
    return [sys.executable, str(_BARE_SCRIPT), role, library, *args[1:]]


def _distinct(library: str, size: int) -> int:
    """How many distinct messages the bare sender cycles through: as many as the harness's sender hands the
    library in turn. mqcore keeps the ``bytes`` objects it is sent (its driver's ``send_bytes``) and JeroMQ the
    arrays (the JVM worker sends a new one a message); pyzmq copies each message out of the sender's block."""
    from harness.drivers import driver_class
    from harness.runner._send import distinct_messages

    keeps = library == "jeromq" or driver_class(library).capabilities.send_bytes
    return distinct_messages(size, keeps)


def _stop(proc: subprocess.Popen[str]) -> None:
    """Kill ``proc``'s process group (it leads its own session) and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(10)


def bare_receiver_throughput(library: str, n: int, size: int) -> tuple[float, float]:
    """msgs/s at a PULL receiving ``n`` messages of ``size`` bytes from a PUSH in another process, both bare
    loops of ``library``: (n-1) / (last - first); and the CPU seconds both processes spent in their loops.
    CalibrationError when the loop fails or overruns."""
    if library not in LIBRARIES:
        raise CalibrationError(f"no bare loop for {library!r}; the brokerless libraries are {', '.join(LIBRARIES)}")
    if library == "jeromq":
        from harness.drivers.java import unavailable_reason

        reason = unavailable_reason()
        if reason:
            raise CalibrationError(f"JeroMQ's bare loop cannot run: {reason}")
    endpoint = f"tcp://127.0.0.1:{free_port()}"
    procs: list[subprocess.Popen[str]] = []

    def start(role: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(_bare_command(library, role, endpoint, n, size), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
                                start_new_session=True)
        procs.append(proc)
        return proc

    try:
        sender = start("push")
        assert sender.stdout is not None
        first = sender.stdout.readline().strip()  # "bound": the receiver may connect
        if first != "bound":
            raise CalibrationError(f"{LIBRARIES[library]}'s bare sender did not bind: {first or 'no output'}")
        receiver = start("pull")
        try:
            out, _ = receiver.communicate(timeout=BARE_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise CalibrationError(f"{LIBRARIES[library]}'s bare loop did not finish {n:,} messages within "
                                   f"{BARE_TIMEOUT_S:.0f} s") from None
        said = next((line.split() for line in out.splitlines() if line.startswith("rate ")), None)
        if receiver.returncode != 0 or said is None or len(said) < 4:
            tail = " | ".join(out.strip().splitlines()[-3:]) or "no output"
            raise CalibrationError(f"{LIBRARIES[library]}'s bare receiver failed (status {receiver.returncode}): "
                                   f"{tail}")
        try:
            sent, _ = sender.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            sent = ""
        sender_cpu = next((float(line.split()[1]) for line in sent.splitlines() if line.startswith("cpu ")),
                          math.nan)
        return float(said[1]), float(said[3]) + sender_cpu
    finally:
        for proc in procs:  # interrupted or failed: the sender may be blocked at its HWM, stop it now
            _stop(proc)


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
    """Paired measurements of one library at one size: ``bare[i]`` and ``harness[i]`` (msgs/s) were taken
    back to back."""

    library: str = REFERENCE
    size: int = 100
    bare: list[float] = field(default_factory=list)
    harness: list[float] = field(default_factory=list)
    steal: list[float | None] = field(default_factory=list)  # ms taken by the host during pair i
    # CPU µs per message of the sending and receiving processes together (every thread), over their loops:
    # what the harness costs in work, which a loaded machine changes far less than it changes a rate
    bare_cpu: list[float] = field(default_factory=list)
    harness_cpu: list[float] = field(default_factory=list)

    @property
    def name(self) -> str:
        return LIBRARIES.get(self.library, self.library)

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

    def cpu_ratio(self) -> float:
        """Median of the paired ratios harness CPU per message ÷ bare CPU per message (NaN when unmeasured)."""
        pairs = [h / b for b, h in zip(self.bare_cpu, self.harness_cpu, strict=True)
                 if math.isfinite(b) and math.isfinite(h) and b > 0]
        return statistics.median(pairs) if pairs else math.nan


def relative_to_reference(results: Sequence[Calibration]) -> dict[tuple[str, int], float]:
    """Per (library, size): its median harness ÷ bare over pyzmq's at the same size (1.0: the harness costs it
    what it costs pyzmq; below: more). NaN when pyzmq was not measured at that size."""
    reference = {c.size: c.median_ratio() for c in results if c.library == REFERENCE and c.bare}
    return {(c.library, c.size): (c.median_ratio() / reference[c.size] if c.size in reference and c.bare
                                  else math.nan) for c in results}


def write_csv(results: Sequence[Calibration], path: Path) -> None:
    """``calibrate.csv``: one row per pair."""
    text = io.StringIO()
    w = csv.writer(text)
    w.writerow(["library", "size", "repetition", "bare_msgs_per_s", "harness_msgs_per_s", "harness_over_bare",
                "steal_ms", "bare_cpu_us_per_msg", "harness_cpu_us_per_msg"])
    for c in results:
        cpus = zip(c.bare_cpu or [math.nan] * len(c.bare), c.harness_cpu or [math.nan] * len(c.bare), strict=True)
        for i, (b, h, s, (bc, hc)) in enumerate(zip(c.bare, c.harness, c.steal, cpus, strict=True)):
            w.writerow([c.library, c.size, i + 1, f"{b:.0f}", f"{h:.0f}", f"{h / b:.4f}",
                        "" if s is None else f"{s:.0f}", "" if math.isnan(bc) else f"{bc:.3f}",
                        "" if math.isnan(hc) else f"{hc:.3f}"])
    atomic_write(path, text.getvalue().encode())


def calibrate(libraries: Sequence[str], sizes: Sequence[int], messages: int, repetitions: int,
              out: Path | None, console: Console) -> list[Calibration]:
    """For each repetition, size and library a bare loop and the harness's case, back to back (the order
    inside a pair alternating between repetitions), saying on ``console`` which one runs; harness run folders
    and ``calibrate.csv`` go to ``out`` if given, else to a temporary folder that is removed afterwards.
    CalibrationError names a pair that could not be measured."""
    import tempfile

    if out is None:
        with tempfile.TemporaryDirectory(prefix="mqbench-calibrate-") as tmp:
            return calibrate(libraries, sizes, messages, repetitions, Path(tmp), console)
    from harness.compare import compare

    results = {(lib, size): Calibration(lib, size) for size in sizes for lib in libraries}

    def run_harness(lib: str, size: int, rep: int) -> tuple[float, float]:
        scenario = parse_scenario({"name": "calibrate", "pattern": "queue", "systems": [lib], "message_sizes": [size],
                                   "messages": messages, "warmup": 0, "repetitions": 1}, "<calibrate>")
        # pandas: one summary per pair, and a JVM started by the first would idle beside the pairs after it
        outcome = compare([scenario], out_root=out, console=console, label=f"calibrate-{lib}", write_report=False,
                          engine="pandas")
        if not outcome.complete or outcome.summary.empty:
            problems = "; ".join(outcome.problems) or "no summary"
            raise CalibrationError(f"the harness run of {LIBRARIES[lib]}, {units.size(size)}, repetition {rep + 1} "
                                   f"did not complete: {problems}")
        return float(outcome.summary["receiver_msgs_per_s"].iloc[0]), _workers_cpu(outcome.run_dir)

    for rep in range(repetitions):
        for size in sizes:
            for lib in libraries:
                where = f"repetition {rep + 1}/{repetitions}, {LIBRARIES[lib]} {units.size(size)}"
                before = steal_ms()
                sides: dict[str, tuple[float, float]] = {}
                order = ("bare", "harness") if rep % 2 == 0 else ("harness", "bare")  # neither always first
                for side in order:
                    console.print(f"{where}: {'bare loop' if side == 'bare' else 'harness'}…", highlight=False)
                    sides[side] = (bare_receiver_throughput(lib, messages, size) if side == "bare"
                                   else run_harness(lib, size, rep))
                after = steal_ms()
                c = results[(lib, size)]
                c.bare.append(sides["bare"][0])
                c.harness.append(sides["harness"][0])
                c.bare_cpu.append(sides["bare"][1] / messages * 1e6)
                c.harness_cpu.append(sides["harness"][1] / messages * 1e6)
                c.steal.append(None if before is None or after is None else after - before)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(list(results.values()), out / "calibrate.csv")
    return list(results.values())


def _workers_cpu(run_dir: Path) -> float:
    """CPU seconds of the harness case's producer and consumer processes (every thread; the JVM behind a
    Java worker's relay too) over the case's measured interval, from the run's CPU table; NaN without one."""
    from harness.runfolder import RunFolder
    from harness.runfolder.schema import CPU

    try:
        table = RunFolder.open(run_dir).read_table(CPU)
    except Exception:  # noqa: BLE001 - no table: the figure is simply not there
        return math.nan
    if table.empty:
        return math.nan
    workers = table[table["role"].astype(str).str.match(r"(producer|consumer)-")]
    return float(workers["cpu_s"].sum()) if not workers.empty else math.nan
