"""Running a tool's processes: argv in, output and CPU out, every process stopped by its own pid.

A tool's CPU comes from ``os.wait4``'s rusage of the tool process (the kernel's account at its exit, which
/proc cannot give once it is gone); the broker's CPU over the same interval from ``CpuMeter``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.crosscheck._tool import ToolFailed
from harness.runner.proc import CpuMeter, CpuUse

TAIL_LINES = 3  # lines of a failed tool's output quoted in ToolFailed


@dataclass
class Finished:
    """One tool process that ended: what it printed, its exit status and its CPU."""

    argv: list[str]
    output: str
    status: int
    cpu: CpuUse
    wall_s: float


@dataclass
class Running:
    """A tool process started in its own process group, its output going to a file."""

    argv: list[str]
    role: str
    proc: subprocess.Popen[bytes]
    out_path: Path
    t0: float = field(default_factory=time.monotonic)

    def wait(self, timeout: float) -> Finished:
        """Wait for the process (killing its group after ``timeout`` s) and take its rusage."""
        deadline = time.monotonic() + timeout
        status, usage = 0, None
        while True:
            pid, raw, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                status = os.waitstatus_to_exitcode(raw)
                break
            if time.monotonic() >= deadline:
                self.kill()
                _, raw, usage = os.wait4(self.proc.pid, 0)
                status = os.waitstatus_to_exitcode(raw)
                break
            time.sleep(0.02)
        self.proc.returncode = status  # reaped here: Popen must not wait for it again
        wall = time.monotonic() - self.t0
        cpu = CpuUse(self.role, usage.ru_utime + usage.ru_stime if usage else 0.0, wall)
        text = self.out_path.read_text(errors="replace")
        return Finished(self.argv, text, status, cpu, wall)

    def kill(self) -> None:
        """SIGKILL the tool's process group (the tool and anything it forked)."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def stop(self) -> None:
        """Stop it if it still runs (error paths); a no-op once it was waited for."""
        if self.proc.returncode is None:
            self.kill()
            with contextlib.suppress(ChildProcessError):
                os.wait4(self.proc.pid, 0)
            self.proc.returncode = -signal.SIGKILL


@dataclass(frozen=True)
class Step:
    """One process of a tool: its role (``tool``, ``producer``, ``consumer``), argv and optional stdin file."""

    role: str
    argv: Sequence[str]
    stdin: Path | None = None


def start(step: Step, workdir: Path, env: Mapping[str, str] | None = None) -> Running:
    """Start ``step`` with stdout and stderr into one file under ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f"{step.role}-", suffix=".out", dir=workdir)
    with os.fdopen(fd, "wb") as out, open(step.stdin or os.devnull, "rb") as stdin:
        proc = subprocess.Popen(list(step.argv), stdout=out, stderr=subprocess.STDOUT, stdin=stdin,
                                cwd=workdir, start_new_session=True, env=None if env is None else dict(env))
    return Running(list(step.argv), step.role, proc, Path(name))


@dataclass
class Measured:
    """The processes of one repetition of a tool, and the broker's CPU over the same interval."""

    done: list[Finished]
    broker: list[CpuUse]

    def output(self, role: str) -> str:
        return next(f.output for f in self.done if f.cpu.role == role)

    def cpu(self) -> list[CpuUse]:
        """For ``ToolResult.cpu``: each tool process, then the broker (when its pids were known)."""
        return [f.cpu for f in self.done] + [u for u in self.broker if u.cpu_s]


def run_measured(
    tool: str, steps: Sequence[Step], workdir: Path, broker_pids: Sequence[int],
    timeout: float, env: Mapping[str, str] | None = None, settle: float = 0.0,
) -> Measured:
    """Start every step in order (``settle`` s after each but the last, so a consumer is
    subscribed before its producer sends) and wait for all. Raises ToolFailed when one exits non-zero or
    overruns ``timeout``; every process is stopped before this returns, also on error."""
    started: list[Running] = []
    meter = CpuMeter({"broker": list(broker_pids)}).start()
    try:
        for i, step in enumerate(steps):
            started.append(start(step, workdir, env))
            if settle and i < len(steps) - 1:
                time.sleep(settle)
        deadline = time.monotonic() + timeout
        done = [r.wait(max(0.1, deadline - time.monotonic())) for r in started]
    finally:
        for r in started:
            r.stop()
    broker = meter.stop()
    for f in done:
        if f.status != 0 or f.wall_s >= timeout:
            why = "overran its time limit" if f.wall_s >= timeout else f"exited with status {f.status}"
            raise ToolFailed(f"{tool} ({f.cpu.role}) {why}: {tail(f.output)}")
    return Measured(done, broker)


def tail(output: str, lines: int = TAIL_LINES) -> str:
    kept = [line.strip() for line in output.strip().splitlines() if line.strip()][-lines:]
    return " / ".join(kept) if kept else "(no output)"


def executable(name: str, *folders: Path) -> str | None:
    """Path of ``name`` in one of ``folders`` (first) or on PATH, or None."""
    for folder in folders:
        candidate = folder / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which(name)
