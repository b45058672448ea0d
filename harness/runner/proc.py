"""What the kernel says about our processes: resident memory and CPU time, read from /proc.

One place for both, used by the fault sampler (memory over time), by the case runner (CPU per process
over a case) and by ``mqbench crosscheck`` (CPU of a broker's own benchmark tool). A process that has
vanished counts 0; nothing here raises for a pid that is gone.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
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
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return 0.0
    # The command name (field 2) may hold spaces and parentheses: split after its closing ")".
    fields = raw[raw.rfind(b")") + 2:].split()
    try:
        utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    except (ValueError, IndexError):
        return 0.0
    return (utime + stime + cutime + cstime) / _TICK


@dataclass(frozen=True)
class CpuUse:
    """CPU used by one role (``broker``, ``producer-0``, ``tool`` ...) between two samples."""

    role: str
    cpu_s: float
    wall_s: float

    @property
    def core_pct(self) -> float:
        """Percent of one core: 100 means one core was busy the whole time."""
        return 100.0 * self.cpu_s / self.wall_s if self.wall_s > 0 else float("nan")


class CpuMeter:
    """CPU seconds per role between ``start`` and ``stop``; a role is a list of pids summed together.

    Pids that end between the two samples lose their share after their last read (the kernel keeps no
    account of a process nobody waited for): sample a short-lived process's rusage at its exit instead.
    """

    def __init__(self, roles: Mapping[str, Sequence[int]]) -> None:
        self.roles = {role: list(pids) for role, pids in roles.items()}
        self._start: dict[str, float] = {}
        self._t0 = 0.0

    def start(self) -> CpuMeter:
        self._t0 = time.monotonic()
        self._start = {role: sum(cpu_seconds(p) for p in pids) for role, pids in self.roles.items()}
        return self

    def stop(self) -> list[CpuUse]:
        wall = time.monotonic() - self._t0
        return [
            CpuUse(role, max(0.0, sum(cpu_seconds(p) for p in pids) - self._start.get(role, 0.0)), wall)
            for role, pids in self.roles.items()
        ]
