"""What this process starts is stopped even when it dies: a watchdog process outlives it by a moment.

``finally`` blocks, the Ctrl-C handling and ``atexit`` hooks stop what a run started whenever the harness ends
in Python. A SIGKILL, the kernel's out-of-memory killer or a crash in a client library's native code runs
none of them, and the brokers, cluster nodes, proxies and containers of the run went on running (a RocketMQ
NameServer and broker were still up 24 minutes after a pytest process died of SIGABRT here).

So whatever starts a thing that must not outlive the run tells the watchdog how to stop it: a process group to
kill (:func:`watch_group`) or a command that undoes it (:func:`watch_command`: ``docker rm -f NAME``,
``ip netns delete NAME``), and takes that back (:func:`forget`) once it has stopped the thing itself. The
watchdog is started on the first such call, one per process (a forked child that registers gets its own),
in a session of its own (a Ctrl-C at the terminal does not reach it), reading those registrations from a pipe.
Every half second it checks that its parent is still the process that started it. When the parent is gone,
however it ended, it sends SIGTERM to the groups still listed, SIGKILL to what is left of them after
``GRACE`` seconds, runs the commands (the last registered first), and exits. A group is signalled only
while its leader is the process that was listed (the same start time in ``/proc``) or it has no leader left,
so a reused pid is never hit. A temporary folder is one call (:func:`temporary_folder`, :func:`remove_folder`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

GRACE = 5.0  # seconds between SIGTERM and SIGKILL for the groups left behind
POLL = 0.5  # seconds between the watchdog's checks of its parent

_lock = threading.Lock()
_owner = 0  # the pid whose watchdog ``_pipe`` feeds
_pipe: Any = None
_proc: subprocess.Popen[bytes] | None = None
_tokens = itertools.count(1)


def watch_group(pgid: int) -> int:
    """Kill process group ``pgid`` if this process dies before :func:`forget` of the returned token."""
    return _tell({"group": pgid, "start": _start_time(pgid)})


def watch_command(argv: list[str]) -> int:
    """Run ``argv`` if this process dies before :func:`forget` of the returned token."""
    return _tell({"command": list(argv)})


def temporary_folder(prefix: str) -> tuple[str, int]:
    """A new folder in the temporary directory (``tempfile.mkdtemp(prefix=prefix)``), removed with ``rm -rf``
    if this process dies before :func:`remove_folder`; the folder and the token to give it."""
    folder = tempfile.mkdtemp(prefix=prefix)
    return folder, watch_command(["rm", "-rf", folder])


def remove_folder(folder: str | os.PathLike[str], token: int) -> None:
    """Remove a :func:`temporary_folder` (whatever is in it) and take its registration back."""
    shutil.rmtree(folder, ignore_errors=True)
    forget(token)


def forget(token: int) -> None:
    """The thing registered under ``token`` was stopped here: the watchdog leaves it alone."""
    if token:
        _tell({"forget": token}, token)


def watchdog_pid() -> int | None:
    """The pid of this process's watchdog, if it has one (tests count it out of the processes they leave)."""
    with _lock:
        return _proc.pid if _proc is not None and _owner == os.getpid() else None


def die_with_parent() -> None:
    """This process (a worker the runner forked) is killed when the process that forked it ends: on Linux,
    ``PR_SET_PDEATHSIG``, which fires when the forking *thread* ends, so only for a child forked by a thread
    that outlives it (a multiprocessing forkserver's main thread, which ends with the harness; a Spark
    task's). Elsewhere a no-op.

    A forkserver ends once every holder of the write end of its "alive" pipe has closed it, and it hands that
    end to each child it forks (``multiprocessing.forkserver._forkserver._forkserver_alive_fd``, for the
    child's own forkserver children). Kept, a worker would hold its forkserver up as the forkserver holds the
    worker: after a SIGKILL of the harness both ran on until the worker ended by itself, which a worker past
    its start never does. So it is closed here: a worker starts no process through a forkserver."""
    import ctypes
    from multiprocessing import forkserver

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
    server: Any = forkserver._forkserver  # its alive fd is not in the stubs
    if server._forkserver_alive_fd is not None:
        with contextlib.suppress(OSError):
            os.close(server._forkserver_alive_fd)
        server._forkserver_alive_fd = None
    if os.getppid() == 1:  # the parent ended before the prctl above: no signal will come
        os.kill(os.getpid(), signal.SIGKILL)


def _tell(message: dict[str, Any], token: int = 0) -> int:
    global _owner, _pipe, _proc
    with _lock:
        if _owner != os.getpid():
            if token:  # registered with the parent's watchdog, before a fork: not ours to take back
                return 0
            _owner, _proc = os.getpid(), _start()
            _pipe = _proc.stdin
        token = token or next(_tokens)
        try:
            assert _pipe is not None
            _pipe.write((json.dumps({**message, "id": token}) + "\n").encode())
            _pipe.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the watchdog is gone (killed by hand): what it would do, this process does as it ends
        return token


def _start() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "harness._watchdog", str(os.getpid())], stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            cwd="/")


def _start_time(pid: int) -> int | None:
    """Field 22 of ``/proc/<pid>/stat`` (clock ticks after boot), or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    return int(stat[stat.rfind(")") + 2 :].split()[19])


def _ours(pgid: int, start: int | None) -> bool:
    """Whether group ``pgid`` is still the one listed: its leader the same process, or no leader left."""
    now = _start_time(pgid)
    return now is None or now == start


def _signal(groups: dict[int, tuple[int, int | None]], sig: int) -> bool:
    """Send ``sig`` to each listed group that is still ours; whether any was there to receive it."""
    sent = False
    for pgid, start in groups.values():
        if _ours(pgid, start):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
                sent = True
    return sent


def _clean(groups: dict[int, tuple[int, int | None]], commands: dict[int, list[str]]) -> None:
    if _signal(groups, signal.SIGTERM):
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline and _signal(groups, 0):
            time.sleep(0.1)
        _signal(groups, signal.SIGKILL)
    for argv in reversed(list(commands.values())):  # the last registered first, as a process unwinds
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           timeout=60)


def main(parent: int) -> None:
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, signal.SIG_IGN)  # stopped only by its parent's end (or SIGKILL)
    groups: dict[int, tuple[int, int | None]] = {}  # token -> (pgid, its leader's start time)
    commands: dict[int, list[str]] = {}
    fd = sys.stdin.fileno()
    pending = b""
    while True:
        gone = os.getppid() != parent  # then read what it said before it went, and stop
        ready, _, _ = select.select([fd], [], [], 0 if gone else POLL)
        chunk = os.read(fd, 65536) if ready else b""
        if not chunk and (gone or ready):  # the parent gone, or every writer closed (it has exited)
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            message = json.loads(line)
            if "forget" in message:
                groups.pop(message["forget"], None)
                commands.pop(message["forget"], None)
            elif "group" in message:
                groups[message["id"]] = (message["group"], message["start"])
            elif "command" in message:
                commands[message["id"]] = message["command"]
    _clean(groups, commands)


if __name__ == "__main__":
    main(int(sys.argv[1]))
