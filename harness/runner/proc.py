"""What the kernel says about our processes: resident memory and CPU time, read from /proc.

One place for both, used by the fault sampler (memory over time), by the case runner (CPU per process
over a case) and by ``mqbench crosscheck`` (CPU of a broker's own benchmark tool). A process that has
vanished counts 0; nothing here raises for a pid that is gone.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def rss_bytes(pids: Sequence[int]) -> int:
    """Sum of the resident set sizes of ``pids``."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/statm", "rb") as f:
                total += int(f.read().split()[1]) * _PAGE
        except (OSError, IndexError, ValueError):
            pass
    return total


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far, including its children that it has already waited for."""
    return _cpu_seconds(pid) or 0.0


def _cpu_seconds(pid: int) -> float | None:
    """As :func:`cpu_seconds`; None when ``pid`` is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing ")".
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    except (ValueError, IndexError):
        return None
    return (utime + stime + cutime + cstime) / _TICK


@dataclass(frozen=True)
class CpuUse:
    """CPU used by one role (``broker``, ``producer-0``, ``tool`` ...) between two samples."""

    role: str
    cpu_s: float  # NaN when not measured (``note`` says why)
    wall_s: float
    note: str = ""

    @property
    def core_pct(self) -> float:
        """Percent of one core: 100 means one core was busy the whole time."""
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds of every role at one moment (``t``: ``time.monotonic()``)."""

    t: float
    seconds: Mapping[str, float]


class CpuMeter:
    """CPU seconds per role between ``start`` and ``stop``; a role is a list of pids summed together.

    A pid that ends counts what it had used at its last read (the kernel keeps no account of a process
    nobody waited for, and a role's other pids still count in full): sample a short-lived process's rusage
    at its exit instead.
    The pids of each role are fixed at construction: a process started later (a restarted broker or
    worker) is not counted. ``stop`` may be given an earlier :meth:`sample` as the end of the interval
    (the moment the work ended, when the caller noticed the end later).
    """

    def __init__(self, roles: Mapping[str, Sequence[int]]) -> None:
        self.roles = {role: list(pids) for role, pids in roles.items()}
        self._first = CpuSample(0.0, {})
        self._last_read: dict[int, float] = {}

    def _read(self, pid: int) -> float:
        seconds = _cpu_seconds(pid)
        if seconds is None:  # gone: what it had used when last seen
            return self._last_read.get(pid, 0.0)
        self._last_read[pid] = seconds
        return seconds

    def sample(self) -> CpuSample:
        return CpuSample(time.monotonic(), {role: sum(self._read(p) for p in pids) for role, pids in self.roles.items()})

    def start(self) -> CpuMeter:
        self._first = self.sample()
        return self

    def stop(self, end: CpuSample | None = None) -> list[CpuUse]:
        last = end if end is not None else self.sample()
        wall = last.t - self._first.t
        return [
            CpuUse(role, max(0.0, last.seconds[role] - self._first.seconds.get(role, 0.0)), wall)
            for role in self.roles
        ]


class CpuWhileActive:
    """A :class:`CpuMeter` whose interval ends when the work did: the last time ``count()`` (the case's
    progress counters) changed, not when the caller noticed, which may be a polling period or more later
    (that wait, spent idle, would otherwise dilute the figures of a short case).

    A daemon thread samples the meter each time the count moves, at most every ``every`` seconds.
    """

    def __init__(self, meter: CpuMeter, count: Callable[[], int], every: float = 0.02) -> None:
        self.meter, self.count, self.every = meter, count, every
        self._done = threading.Event()
        self._last: CpuSample | None = None
        self._thread = threading.Thread(target=self._follow, name="mqbench-cpu", daemon=True)

    def start(self) -> CpuWhileActive:
        self.meter.start()
        self._thread.start()
        return self

    def _follow(self) -> None:
        seen = self.count()
        while not self._done.wait(self.every):
            now = self.count()
            if now != seen:
                seen, self._last = now, self.meter.sample()

    def stop(self) -> list[CpuUse]:
        """CPU per role from the start to the last move of the count (to now when it never moved)."""
        self._done.set()
        self._thread.join()
        return self.meter.stop(self._last)
