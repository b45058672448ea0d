"""What a new run records about where it ran: run id, host, clock, git revision, tool versions."""

from __future__ import annotations

import os
import platform
import re
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any


def new_run_id(label: str) -> str:
    """``20261124-031500-smoke``: UTC start time, then ``label`` made safe for a folder name."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "-", label)[:40]
    return f"{stamp}-{safe}"


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


def host_info() -> dict[str, Any]:
    cpu = platform.processor() or ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    clock = time.get_clock_info("monotonic")
    return {
        "hostname": socket.gethostname(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "clock": f"CLOCK_MONOTONIC via time.monotonic_ns ({clock.implementation}); clock_gettime in the C loops",
        "clock_resolution_ns": int(clock.resolution * 1e9) or 1,
        "clocksource": _read("/sys/devices/system/clocksource/clocksource0/current_clocksource").strip(),
    }


def git_revision(cwd: Path | None = None) -> str:
    """``<sha>`` or ``<sha>-dirty`` of the checkout at ``cwd``; ``"unknown"`` outside git."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=cwd, capture_output=True, text=True,
            timeout=5,
        ).stdout.strip()
        return f"{out}{'-dirty' if dirty else ''}"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def version(pkg: str) -> str:
    try:
        return metadata.version(pkg)
    except metadata.PackageNotFoundError:
        return "unknown"
