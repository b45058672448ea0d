"""Local broker processes: each command in its own process group, always stopped.

Invariants: every started process is the leader of a new session/process group (``start_new_session``), is
listed in ``_LIVE`` until stopped, and is stopped by signalling its group (SIGTERM, then SIGKILL after the
grace period). Daemons some brokers spawn with their own ``setsid`` (Erlang's ``erl_child_setup``) are found
as descendants through /proc at stop time and killed if they outlive the group. An ``atexit`` hook stops
whatever is still running when the interpreter exits, and the watchdog (harness/_watchdog.py) whatever is still
running when the process dies without running it. Only the thread that started a group stops it, except the
atexit hook.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from harness import _watchdog
from harness.brokers._spec import Command

_LIVE: set[BrokerProcess] = set()
_LIVE_LOCK = threading.Lock()


class BrokerProcess:
    """One started command. ``stop`` is idempotent."""

    def __init__(self, command: Command, cwd: Path, log_dir: Path) -> None:
        self.name = command.name
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{command.name}.out"
        env = {**os.environ, **command.env}
        with open(self.log_path, "ab") as log:
            self.popen = subprocess.Popen(
                list(command.argv),
                cwd=cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                user=command.user,
                group=command.user,
                extra_groups=[] if command.user else None,
            )
        self.pid = self.popen.pid
        self._watched = _watchdog.watch_group(self.pid)  # stopped even if this process is killed
        with _LIVE_LOCK:
            _LIVE.add(self)

    def exited(self) -> int | None:
        """The exit status if the process has ended, else None."""
        return self.popen.poll()

    def stop(self, grace: float) -> None:
        """SIGTERM the process group, wait up to ``grace`` s, then SIGKILL the group and any descendants, and
        return once they are gone (a SIGKILLed process ends only when it next runs: on a loaded machine, some
        time after the signal), or after 5 s more."""
        try:
            descendants = _descendants(self.pid)
            _signal_group(self.pid, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _group_alive(self.pid):
                self.popen.poll()  # reap the leader so it does not count as alive
                time.sleep(0.05)
            _signal_group(self.pid, signal.SIGKILL)
            for pid in descendants:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.popen.wait(timeout=5)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and (_group_alive(self.pid) or any(map(_running, descendants))):
                time.sleep(0.02)
        finally:
            _watchdog.forget(self._watched)
            with _LIVE_LOCK:
                _LIVE.discard(self)


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    """True while a process (other than a zombie) is in group ``pgid``."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg succeeds for zombies too; look for a member that is not one.
    for entry in _proc_stats():
        if entry[2] == pgid and entry[1] != "Z":
            return True
    return False


def _running(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return False
    return stat[stat.rfind(")") + 2 :].split()[0] != "Z"


def _proc_stats() -> list[tuple[int, str, int, int]]:
    """(pid, state, pgid, ppid) of every process, from /proc (empty where /proc is absent)."""
    out: list[tuple[int, str, int, int]] = []
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        out.append((int(name), fields[0], int(fields[2]), int(fields[1])))
    return out


def _descendants(pid: int) -> list[int]:
    """All live descendants of ``pid``, whatever their process group."""
    children: dict[int, list[int]] = {}
    for p, state, _pgid, ppid in _proc_stats():
        if state != "Z":
            children.setdefault(ppid, []).append(p)
    found: list[int] = []
    stack = [pid]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def stop_all(grace: float = 2.0) -> None:
    """Stop every broker process still running (the atexit fallback)."""
    with _LIVE_LOCK:
        live = list(_LIVE)
    for proc in live:
        proc.stop(grace)


def live_pids() -> list[int]:
    """Pids of the broker processes started here and not yet stopped (for tests and diagnostics)."""
    with _LIVE_LOCK:
        return [p.pid for p in _LIVE]


atexit.register(stop_all)
