"""Running a broker's Java benchmark tool: each process in its own session with its output in a file, its CPU
from the kernel's account at its exit (``os.wait4``), and every process stopped by its pid when the block
ends, also on an error or Ctrl-C.

    with JavaTools(workdir, tool="kafka-tools 4.3.1") as tools:
        consumer = tools.start("consumer", [java, "-cp", cp, "...ConsumerPerformance", ...])
        tools.wait(consumer, timeout=60)    # raises ToolFailed on a non-zero exit or a timeout
    tools.cpu_uses([consumer])              # one CpuUse per process, plus the broker's (measure_broker)
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harness.brokers import _jars
from harness.crosscheck._tool import Tool, ToolFailed, ToolMissing
from harness.runner.proc import CpuMeter, CpuUse

TAIL_LINES = 8  # of a failed tool's output, in the ToolFailed sentence
STOP_GRACE_S = 5.0  # after SIGTERM, before SIGKILL
# Small heaps: two cores and the broker on the same machine (BROKERS.md).
TOOL_HEAP = ("-Xms64m", "-Xmx256m")
_ERROR = re.compile(r"error|exception|invalid", re.I)


def missing_jar(pom: str, jar: str, display: str) -> str | None:
    """None when Java and the ``jar`` (its name before the version) of the ``pom`` jar folder are here,
    else one sentence saying what to do; ``display`` names the tool in it."""
    if _jars.java() is None:
        return f"no Java runtime for {display}; {_jars.JVM_INSTALL}"
    lib = _jars.lib_dir(pom)
    if lib is None or not any(lib.glob(f"{jar}-*.jar")):
        return f"the {jar} jar is not in {_jars.cache_dir()}; run `make brokers`"
    return None


def java_for(tool: Tool) -> str:
    """The ``java`` executable to run ``tool`` with; ToolMissing with the tool's sentence when it cannot run."""
    reason, java = tool.missing(), _jars.java()
    if reason or java is None:
        raise ToolMissing(reason or f"no Java runtime for {tool.name}; {_jars.JVM_INSTALL}")
    return java


@dataclass
class ToolProcess:
    """One started process of a tool: its role name, pid, output file and, once reaped, status and CPU."""

    role: str
    argv: list[str]
    pid: int
    log: Path
    started: float  # time.monotonic()
    status: int | None = None  # exit status (negative: the signal that ended it) once reaped
    cpu_s: float = 0.0
    ended: float = 0.0  # time.monotonic() when reaped

    def output(self) -> str:
        try:
            return self.log.read_text(errors="replace")
        except OSError:
            return ""

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The last ``lines`` lines of output, after the first line naming an error when that came earlier
        (a tool that rejects an argument prints the reason, then its whole usage)."""
        # Lines with "|-" are logback's report on its own configuration (RocketMQ's clients print it).
        kept = [line.strip() for line in self.output().splitlines() if line.strip() and "|-" not in line]
        first_error = next((line for line in kept if _ERROR.search(line)), None)
        last = kept[-lines:]
        return " | ".join([first_error, "...", *last] if first_error and first_error not in last else last)


class JavaTools:
    """The processes one repetition of a tool started; the ``with`` block stops what still runs."""

    def __init__(self, workdir: Path, tool: str) -> None:
        self.workdir, self.tool = workdir, tool
        self.processes: list[ToolProcess] = []
        self._meter: CpuMeter | None = None

    def __enter__(self) -> JavaTools:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for proc in reversed(self.processes):
            self.stop(proc)

    def measure_broker(self, broker_pids: Sequence[int]) -> None:
        """Start counting the broker's CPU (call just before the first tool process starts)."""
        self._meter = CpuMeter({"broker": list(broker_pids)}).start()

    def start(self, role: str, argv: Sequence[str], env: Mapping[str, str] | None = None) -> ToolProcess:
        log = self.workdir / f"{role}.out"
        with open(log, "wb") as out:
            popen = subprocess.Popen(
                list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                env={**os.environ, **(env or {})}, start_new_session=True,
            )
        # Reaped by os.wait4 below, not by Popen: drop Popen's handle so it never waits on the pid itself.
        popen.returncode = 0
        proc = ToolProcess(role, list(argv), popen.pid, log, time.monotonic())
        self.processes.append(proc)
        return proc

    def poll(self, proc: ToolProcess) -> int | None:
        """The exit status once ``proc`` has ended (reaping it and taking its CPU), else None."""
        if proc.status is None:
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: no account of it left
                proc.status, proc.ended = -1, time.monotonic()
                return proc.status
            if pid == 0:
                return None
            proc.status = os.waitstatus_to_exitcode(status)
            proc.cpu_s, proc.ended = usage.ru_utime + usage.ru_stime, time.monotonic()
        return proc.status

    def wait(self, proc: ToolProcess, timeout: float) -> int:
        """Wait for ``proc`` to end by itself; ToolFailed when it exits non-zero or is still running after
        ``timeout`` seconds (it is stopped then)."""
        deadline = time.monotonic() + timeout
        while self.poll(proc) is None:
            if time.monotonic() > deadline:
                self.stop(proc)
                raise ToolFailed(f"{self.tool}: {proc.role} did not finish within {timeout:.0f} s; "
                                 f"its last output: {proc.tail() or '(none)'}")
            time.sleep(0.05)
        assert proc.status is not None
        if proc.status != 0:
            raise self.failed(proc)
        return proc.status

    def await_output(self, procs: Sequence[ToolProcess], ready: Callable[[str], bool], timeout: float,
                     what: str) -> None:
        """Until ``ready`` holds for the output of every one of ``procs``; ToolFailed when one of them exits
        first or ``timeout`` seconds pass (``what`` names what was awaited, in the sentence)."""
        deadline = time.monotonic() + timeout
        while not all(ready(proc.output()) for proc in procs):
            for proc in procs:
                if self.poll(proc) is not None:
                    raise self.failed(proc)
            if time.monotonic() > deadline:
                raise ToolFailed(f"{self.tool}: {what} within {timeout:.0f} s; "
                                 f"its last output: {procs[0].tail() or '(none)'}")
            time.sleep(0.1)

    def failed(self, proc: ToolProcess) -> ToolFailed:
        return ToolFailed(f"{self.tool}: {proc.role} exited with status {proc.status}; "
                          f"its last output: {proc.tail() or '(none)'}")

    def stop(self, proc: ToolProcess, grace: float = STOP_GRACE_S) -> None:
        """SIGTERM ``proc``'s process group (its own pid: it leads its session), SIGKILL after ``grace``."""
        if self.poll(proc) is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while self.poll(proc) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.status is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            while self.poll(proc) is None:
                time.sleep(0.02)

    def cpu_uses(self, processes: Sequence[ToolProcess]) -> list[CpuUse]:
        """CPU of each of ``processes`` (reaped) over its own life, and the broker's since ``measure_broker``."""
        uses = [CpuUse(f"tool-{p.role}", p.cpu_s, p.ended - p.started) for p in processes if p.status is not None]
        if self._meter is not None and any(self._meter.roles.values()):
            uses.extend(self._meter.stop())
        return uses
