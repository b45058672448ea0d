"""Running a tool's processes: each in its own session with its output in a file, its CPU from the kernel's
account at its exit (``os.wait4``'s rusage, which /proc cannot give once it is gone), the broker's CPU over
the same interval from ``CpuMeter``, and every process stopped by its own pid when the block ends, also on
an error or Ctrl-C.

    with Tools(workdir, tool="kafka-tools 4.3.1") as tools:
        consumer = tools.start("consumer", [java, "-cp", cp, "...ConsumerPerformance", ...])
        tools.wait(consumer, timeout=60)    # raises ToolFailed on a non-zero exit or a timeout
    tools.cpu_uses([consumer])              # one CpuUse per process, plus the broker's (measure_broker)

``run_measured`` does the whole of it for tools whose processes just run to their end (PerfTest with its
time limit, nats bench); ``Tools.hold`` lets tools that run until stopped run for a set time.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from harness import _watchdog
from harness.crosscheck._tool import ToolFailed
from harness.runner.proc import CpuMeter, CpuUse

TAIL_LINES = 8  # of a failed tool's output, in the ToolFailed sentence
STOP_GRACE_S = 5.0  # after SIGTERM, before SIGKILL
_ERROR = re.compile(r"error|exception|invalid", re.I)


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
    watched: int = 0  # its watchdog token (harness/_watchdog.py) until reaped

    @property
    def wall_s(self) -> float:
        """Seconds from its start to its reaping (to now while it runs)."""
        return (self.ended if self.status is not None else time.monotonic()) - self.started

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


class Tools:
    """The processes one repetition of a tool started; the ``with`` block stops what still runs."""

    def __init__(self, workdir: Path, tool: str) -> None:
        self.workdir, self.tool = workdir, tool
        self.processes: list[ToolProcess] = []
        self._meter: CpuMeter | None = None

    def __enter__(self) -> Tools:
        self.workdir.mkdir(parents=True, exist_ok=True)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        for proc in reversed(self.processes):
            self.stop(proc)

    def measure_broker(self, broker_pids: Sequence[int]) -> None:
        """Start counting the broker's CPU (call just before the first tool process starts)."""
        self._meter = CpuMeter({"broker": list(broker_pids)}).start()

    def start(self, role: str, argv: Sequence[str], env: Mapping[str, str] | None = None,
              stdin: Path | None = None) -> ToolProcess:
        """Start ``argv`` in its own session, ``env`` added to ours, ``stdin`` read from a file (else empty)."""
        log = self.workdir / f"{role}.out"
        for n in range(1, 1000):  # a role started twice in one folder keeps both outputs
            if not log.exists():
                break
            log = self.workdir / f"{role}.{n}.out"
        with open(log, "wb") as out, open(stdin or os.devnull, "rb") as source:
            popen = subprocess.Popen(
                list(argv), stdin=source, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir,
                env={**os.environ, **(env or {})}, start_new_session=True,
            )
        # Reaped by os.wait4 below, not by Popen: drop Popen's handle so it never waits on the pid itself.
        popen.returncode = 0
        proc = ToolProcess(role, list(argv), popen.pid, log, time.monotonic(), watched=_watchdog.watch_group(popen.pid))
        self.processes.append(proc)
        return proc

    def poll(self, proc: ToolProcess) -> int | None:
        """The exit status once ``proc`` has ended (reaping it and taking its CPU), else None."""
        if proc.status is None:
            try:
                pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: no account of it left
                proc.status, proc.ended = -1, time.monotonic()
                _watchdog.forget(proc.watched)
                return proc.status
            if pid == 0:
                return None
            proc.status = os.waitstatus_to_exitcode(status)
            proc.cpu_s, proc.ended = usage.ru_utime + usage.ru_stime, time.monotonic()
            _watchdog.forget(proc.watched)
        return proc.status

    def wait(self, proc: ToolProcess, timeout: float) -> int:
        """Wait for ``proc`` to end by itself; ToolFailed when it exits non-zero or is still running after
        ``timeout`` seconds (it is stopped then)."""
        self.wait_all([proc], timeout)
        assert proc.status is not None
        return proc.status

    def wait_all(self, procs: Sequence[ToolProcess], timeout: float) -> None:
        """Wait for every one of ``procs`` to end by itself; ToolFailed as soon as one exits non-zero, or
        when one still runs after ``timeout`` seconds (it is stopped then)."""
        deadline = time.monotonic() + timeout
        while True:
            for proc in procs:
                if self.poll(proc) not in (None, 0):
                    raise self.failed(proc)
            running = [proc for proc in procs if proc.status is None]
            if not running:
                return
            if time.monotonic() > deadline:
                self.stop(running[0])
                raise ToolFailed(f"{self.tool}: {running[0].role} did not finish within {timeout:.0f} s; "
                                 f"its last output: {running[0].tail() or '(none)'}")
            time.sleep(0.02)

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

    def hold(self, procs: Sequence[ToolProcess], seconds: float) -> None:
        """Let ``procs`` (tools that run until stopped) run for ``seconds``; ToolFailed as soon as one of them
        ends before that."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for proc in procs:
                if self.poll(proc) is not None:
                    if proc.status:
                        raise self.failed(proc)
                    raise ToolFailed(f"{self.tool}: {proc.role} ended after {proc.wall_s:.0f} s, before the "
                                     f"{seconds:.0f} s it was to run; its last output: {proc.tail() or '(none)'}")
            time.sleep(0.05)

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
        uses = [CpuUse(f"tool-{p.role}", p.cpu_s, p.wall_s) for p in processes if p.status is not None]
        if self._meter is not None and any(self._meter.roles.values()):
            uses.extend(self._meter.stop())
        return uses


@dataclass(frozen=True)
class Step:
    """One process of a tool: its role (``tool``, ``producer``, ``consumer``), argv and optional stdin file."""

    role: str
    argv: Sequence[str]
    stdin: Path | None = None


@dataclass
class Measured:
    """The processes of one repetition of a tool, and the CPU of each and of the broker."""

    done: list[ToolProcess]
    uses: list[CpuUse]

    def output(self, role: str) -> str:
        return next(p.output() for p in self.done if p.role == role)

    def cpu(self) -> list[CpuUse]:
        """For ``ToolResult.cpu``: each tool process, then the broker (when its pids were known)."""
        return self.uses


def run_measured(
    tool: str, steps: Sequence[Step], workdir: Path, broker_pids: Sequence[int],
    timeout: float, env: Mapping[str, str] | None = None, settle: float = 0.0,
) -> Measured:
    """Start every step in order (``settle`` s after each but the last, so a consumer is subscribed before
    its producer sends) and wait for all. Raises ToolFailed when one exits non-zero or overruns ``timeout``;
    every process is stopped before this returns, also on error."""
    with Tools(workdir, tool) as tools:
        tools.measure_broker(broker_pids)
        started = []
        for i, step in enumerate(steps):
            started.append(tools.start(step.role, step.argv, env, step.stdin))
            if settle and i < len(steps) - 1:
                time.sleep(settle)
        tools.wait_all(started, timeout)
        return Measured(started, tools.cpu_uses(started))


def executable(name: str, *folders: Path) -> str | None:
    """Path of ``name`` in one of ``folders`` (first) or on PATH, or None."""
    for folder in folders:
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)


def built_tool(name: str) -> str | None:
    """A Go tool ``make brokers`` builds into ``.brokers/bin`` (natscli's ``nats``, ``mqttbench``), else on
    PATH, else None."""
    from harness.brokers._jars import cache_dir

    return executable(name, cache_dir() / "bin")
