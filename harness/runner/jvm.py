"""The relay between the runner and the JVM worker (``jvm/``, docs/jvm.md).

A worker process whose driver runs in the JVM (``runs_in_jvm``) calls :func:`relay` instead of its Python
loops: it writes the spec as JSON, starts ``java ... mqbench.jvm.Main spec.json`` in its own process group,
checks that Java's ``System.nanoTime()`` reads the clock of ``time.monotonic_ns()``, and then plays the
Python worker's part towards the runner (ready, subscribed, progress, done) while passing the start
(``start <t0>``) and the stop (``stop``) on to the JVM's stdin. At the end it turns the JVM's records
(little-endian int64 files and a JSON index, written atomically) into exactly the arrays the Python workers
save, so that ``case.assemble_rows`` builds the same raw rows. The JVM is killed by its process group on
stop, error, SIGUSR1/SIGTERM from the runner and Ctrl-C; if this process is killed outright, the JVM sees
its stdin close (before or after `stop`) and halts itself within seconds.

A JVM that plays many roles (:func:`relay_group`, for a group process of harness.runner.worker.group_main):
the spec file is a JSON list of the roles' specs, and the JVM plays each in a thread of its own with its own
client and records. Each line a role writes carries its place in the list (``@3 progress 1200``, see
:func:`parse`); the JVM's own lines (``hello``, ``clock``) carry none, and the relay's commands (``clock``,
``start``, ``release``, ``stop``) are for every role. The relay reports each role under its own name, as
:func:`relay` reports its one.

A producer's outcomes (``Producer.watch_outcomes`` of the Python drivers): given the worker's ``Outcomes``,
the relay asks the JVM to watch them (``watch_outcomes`` in the spec); the JVM answers ``outcomes on|off``
before ``ready`` and then reports runs of sends as ``outcome <first> <count> 1|0`` lines (every 5 ms when
there is news, and before ``done``). On ``on`` the relay has ``Outcomes`` watch the JVM's client as it would a Python producer,
and hands it each run as it comes; the records then carry the acknowledgements as ``t_ack``, as a Python
producer's do.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from harness.drivers.base import DriverError
from harness.drivers.java import JVM_LIMITS, MAIN, command, unavailable_reason
from harness.runner import _keys
from harness.runner._context import Interrupted, WorkerContext, WorkerSpec
from harness.runner._outcomes import Outcomes
from harness.runner._records import save
from harness.runner._send import payloads

HELLO_TIMEOUT = 30.0  # seconds for the JVM to start and answer
STOP_GRACE = 5.0  # seconds the JVM gets to save its records after ``stop`` before it is killed
# and a group's JVM this much more per role: each role writes its own files into the case's folder, and at
# 1,000 RocketMQ topics (500 roles a JVM, the machine's load above 100) two consumers of 500 had not written
# theirs within the 5 s; their threads waited to create files in that one folder (jstack)
STOP_GRACE_PER_ROLE = 0.05


def stop_grace(roles: int) -> float:
    """Seconds a JVM of ``roles`` roles gets to save their records after ``stop``."""
    return STOP_GRACE + (STOP_GRACE_PER_ROLE * roles if roles > 1 else 0.0)

# The arrays each kind saves (harness.runner.worker) and their dtypes; absent ones are saved empty.
_ARRAYS: dict[str, dict[str, str]] = {
    "producer": {"t_send": "<i8", "t_ack": "<i8", "t_intended": "<i8"},
    "consumer": {"t_recv": "<i8", "producer": "<u2", "seq": "<u4"},
    "requester": {"t_send": "<i8", "t_recv": "<i8", "t_intended": "<i8"},
    "replier": {"served": "<i8"},
}


def kill_group(proc: subprocess.Popen[Any]) -> None:
    """Kill ``proc`` and everything in its process group (started with ``start_new_session``)."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
        pass


Report = Callable[[int, int, bool], None]  # report(first, count, accepted), as Producer.watch_outcomes


def spec_json(spec: Any, client: str, watch_outcomes: bool = False) -> dict[str, Any]:
    """The JSON the JVM reads (jvm/.../Spec.java): a WorkerSpec, flattened. A producer's workload fields go
    as data, so that the JVM follows the Python definitions: its keys (``_keys``: for random keys, the
    draws themselves), its share of a rate profile, and its bodies (``_send.payloads``, written to
    ``<out>.bodies``) when they come from a file or are compressible."""
    workload: dict[str, Any] = {}
    if spec.kind == "producer":
        if spec.keys != "none":
            picks = _keys.random_picks(spec.keys, spec.key_count, spec.role.index)
            workload["key_count"] = spec.key_count
            workload["key_picks"] = picks.tolist() if picks is not None else None
        if spec.rate_profile:
            workload["rate_profile"] = [list(step) for step in spec.rate_profile]
        if spec.payload in ("file", "compressible"):
            bodies = Path(f"{spec.out}.bodies")
            bodies.write_bytes(b"".join(bytes(body) for body in payloads(spec)))
            workload["bodies"] = str(bodies)
    elif spec.kind == "consumer" and spec.keys != "none":
        workload["key_count"] = spec.key_count  # a RabbitMQ subscriber binds its queue with every key
    return {
        **workload,
        "watch_outcomes": watch_outcomes and spec.kind == "producer",
        "kind": spec.kind, "name": spec.name, "client": client, "system": spec.system,
        "broker_url": spec.broker.url if spec.broker is not None else None,
        "options": spec.options, "plan": spec.plan, "index": spec.role.index, "topic": spec.role.topic,
        "size": spec.size, "payload": spec.payload, "total": spec.total, "duration_ns": spec.duration_ns,
        "rate": spec.rate, "phase_ns": spec.phase_ns, "capacity": spec.capacity, "out": spec.out,
        "request_timeout": spec.request_timeout,
        "probe": spec.probe, "probe_from": list(spec.probe_from),
        "backlog": _held(spec), "drain_rate": spec.drain_rate,
    }


def _held(spec: Any) -> bool:
    """A producer or consumer of a backlog case: the JVM holds it until the parent's release."""
    return bool(spec.backlog) and spec.kind in ("producer", "consumer")


def parse(line: str, grouped: bool) -> tuple[int | None, str]:
    """A line of the JVM's output as (role, text): in a JVM of many roles a role's lines carry its place in
    the spec list (``@3 progress 1200`` -> ``(3, "progress 1200")``) and the JVM's own lines (``hello``,
    ``clock``, an ``error`` before any role ran) none (role None); a JVM of one role tags nothing: role 0."""
    if not grouped:
        return 0, line
    if line.startswith("@"):
        tag, _, text = line.partition(" ")
        if tag[1:].isdigit():
            return int(tag[1:]), text
    return None, line


class _Role:
    """One role a JVM plays, as its relay sees it: the spec, the producer's ``Outcomes``, and how far it got.
    Stands for the role's client towards ``Outcomes.watch`` (the JVM said ``outcomes on``)."""

    def __init__(self, spec: WorkerSpec, outcomes: Outcomes | None = None) -> None:
        self.spec = spec
        self.outcomes = outcomes
        self.report: Report | None = None  # set once the JVM said ``outcomes on`` for this role
        self.ready = False
        self.done = False  # its records have been converted and reported, or its error reported

    def watch_outcomes(self, report: Report) -> bool:
        """What ``Outcomes.watch`` asks of a producer: here, the JVM's client, which said it reports them."""
        self.report = report
        return True


class _Lines:
    """The JVM's stdout, line by line, read on a thread, as ``(role, text)`` (:func:`parse`; None at end of
    output). A role's ``outcomes on`` and ``outcome`` lines go to its ``Outcomes`` there and then, in order,
    whatever the relay is waiting for: so every outcome the JVM told before a role's ``done`` is in its
    ``Outcomes`` when that ``done`` is handled."""

    def __init__(self, proc: subprocess.Popen[str], roles: list[_Role], grouped: bool = False) -> None:
        self.lines: queue.Queue[tuple[int | None, str] | None] = queue.Queue()
        self.held: deque[tuple[int | None, str] | None] = deque()  # read ahead while waiting for a line
        self.roles = roles
        self.grouped = grouped
        assert proc.stdout is not None
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, stream: Any) -> None:
        for raw in stream:
            index, line = parse(raw.rstrip("\n"), self.grouped)
            role = self.roles[index] if index is not None and index < len(self.roles) else None
            if role is not None and line.startswith("outcome "):
                first, count, accepted = line.split()[1:4]
                if role.report is not None:
                    role.report(int(first), int(count), accepted == "1")
            elif role is not None and line == "outcomes on" and role.outcomes is not None:
                role.outcomes.watch(role, 0)  # -> _Role.watch_outcomes
            elif not line.startswith("outcomes "):
                self.lines.put((index, line))
        self.lines.put(None)

    def get(self, timeout: float) -> tuple[int | None, str] | None:
        """The next line; raises queue.Empty after ``timeout`` seconds without one."""
        if self.held:
            return self.held.popleft()
        return self.lines.get(timeout=timeout)

    def wait_for(self, prefix: str, timeout: float) -> str:
        """The first line of the JVM's own (``hello``, ``clock``) starting with ``prefix``; other lines are
        kept for later; the end of output, or an error that ends the JVM, raises ``_Ended``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise DriverError(f"the JVM worker did not answer {prefix!r} within {timeout:.0f} s") from None
            self.held.append(item)
            if item is None or (item[1].startswith("error ") and (item[0] is None or not self.grouped)):
                raise _Ended
            if item[1].startswith(prefix):
                self.held.pop()
                return item[1]


class _Ended(Exception):
    """The JVM reported an error or ended before the line awaited."""


def check_clock(send: Any, lines: _Lines) -> None:
    """Bracket one ``System.nanoTime()`` between two ``time.monotonic_ns()`` stamps; DriverError if outside."""
    before = time.monotonic_ns()
    send("clock")
    java = int(lines.wait_for("clock ", HELLO_TIMEOUT).split()[1])
    after = time.monotonic_ns()
    if not before <= java <= after:
        raise DriverError(
            f"Java's System.nanoTime() ({java}) fell outside two readings of Python's time.monotonic_ns() "
            f"({before}..{after}): the two do not read the same clock, so the JVM worker cannot run here "
            "(it needs Linux, where both read CLOCK_MONOTONIC)"
        )


def relay(spec: WorkerSpec, ctx: WorkerContext, driver: Any, outcomes: Outcomes | None = None) -> None:
    """Play ``spec``'s worker through the JVM (the contract of harness.runner.worker.worker_main). With
    ``outcomes`` (a producer's), the client is asked to report each send's outcome there (see the module
    docstring); ``outcomes.watched`` then says whether it did."""
    _relay([_Role(spec, outcomes)], ctx, driver, grouped=False)


def relay_group(specs: list[WorkerSpec], ctx: WorkerContext) -> None:
    """Play every role of ``specs`` through ONE JVM (a group process of harness.runner.worker.group_main):
    each role in a thread of the JVM with its own client and records, reported to the runner under its own
    name as :func:`relay` reports one. A role that fails is reported under its name; a failure of the JVM
    itself under the name of each role it had not finished."""
    from harness.drivers import load_class

    roles = [_Role(spec, Outcomes(spec.out, mapped_files=False) if spec.kind == "producer" else None) for spec in specs]
    try:
        _relay(roles, ctx, load_class(specs[0].driver)(specs[0].options, specs[0].broker), grouped=True)
    except DriverError as exc:
        _fail(roles, ctx, str(exc))
    except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then exit
        _fail(roles, ctx, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}")
    finally:
        for role in roles:
            if role.outcomes is not None:
                role.outcomes.close()


def _fail(roles: list[_Role], ctx: WorkerContext, message: str) -> None:
    for role in roles:
        if not role.done:
            role.done = True
            ctx.status.put(("error", role.spec.name, message))


def heap_options(roles: int) -> tuple[str, ...]:
    """The heap of a JVM playing ``roles`` roles: the single role's 512 MiB and 16 MiB more per role, at
    most 2 GiB (a ceiling, not a reservation: the serial collector grows the heap only as it fills)."""
    return (f"-Xmx{min(2048, 512 + 16 * roles)}m",)


def _relay(roles: list[_Role], ctx: WorkerContext, driver: Any, grouped: bool) -> None:
    first = roles[0].spec
    if any(r.spec.kills or r.spec.consumer_rate is not None for r in roles):  # the case loop leaves such
        raise DriverError(f"{driver.label()}: {JVM_LIMITS}")  # cases out; a guard
    reason = unavailable_reason()
    if reason:
        raise DriverError(f"{driver.label()}: {reason}")
    def interrupted(signum: int, frame: Any) -> None:
        raise Interrupted

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGUSR1, signal.SIGTERM)}
    signal.signal(signal.SIGTERM, interrupted)  # terminate() from the runner: kill the JVM on the way out
    if grouped:
        from harness.runner.worker import SETUP_AT_ONCE

        spec_path = Path(f"{first.out}.jvm-group-spec.json")
        specs: Any = [{**spec_json(r.spec, driver.jvm_client, r.outcomes is not None),
                       "setup_at_once": SETUP_AT_ONCE} for r in roles]
        options = heap_options(len(roles))
    else:
        spec_path = Path(f"{first.out}.jvm-spec.json")
        specs = spec_json(first, driver.jvm_client, roles[0].outcomes is not None)
        options = ()
    spec_path.write_text(json.dumps(specs))
    log_path = Path(f"{first.out}.jvm.log")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            command(MAIN, str(spec_path), options=options), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=log, text=True, bufsize=1, start_new_session=True,
        )
    lines = _Lines(proc, roles, grouped)
    try:
        _drive(roles, proc, lines, ctx, log_path)
    except Interrupted:
        _send(proc, "stop")
        for role in _finish(roles, lines, ctx.status):
            role.done = True
            ctx.status.put(("error", role.spec.name,
                            "stopped by the runner before the JVM worker saved its records"))
    finally:
        # A late SIGUSR1 or SIGTERM from the runner must not cut the kill short and leave the JVM running:
        # ignored meanwhile (blocking them in this thread is not enough: another thread of the process, the
        # status queue's feeder, may take the signal, and Python runs its handler here all the same).
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        kill_group(proc)
        # Then SIGTERM as it was (an ignored SIGTERM is inherited: a process started later, a Spark daemon
        # in a test, would not stop on it), and SIGUSR1 too unless it had a handler: it interrupts a relay,
        # and there is none left to interrupt (one after the worker's relay ended its exit in a traceback).
        signal.signal(signal.SIGTERM, previous[signal.SIGTERM])
        usr1 = previous[signal.SIGUSR1]
        signal.signal(signal.SIGUSR1, signal.SIG_IGN if callable(usr1) else usr1)
        spec_path.unlink(missing_ok=True)


def _send(proc: subprocess.Popen[str], line: str) -> None:
    try:
        assert proc.stdin is not None
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
        pass  # the JVM is gone; its exit is reported where its output ends


READY_TIMEOUT = 60.0  # seconds for a JVM's roles to be ready after its clock check (a group: 1 s more per role)


def _drive(roles: list[_Role], proc: subprocess.Popen[str], lines: _Lines, ctx: WorkerContext,
           log_path: Path) -> None:
    """The case's commands to the JVM (``start``, ``release``, ``stop``: once, for all its roles) and each
    role's lines to the runner, under the role's name, until the JVM's output ends."""
    grouped = lines.grouped
    system = roles[0].spec.system
    try:
        lines.wait_for("hello", HELLO_TIMEOUT)
        check_clock(lambda text: _send(proc, text), lines)
    except _Ended:
        pass  # the error line (or the end) is handled below, in order
    ready_by = time.monotonic() + READY_TIMEOUT + (len(roles) if grouped else 0)
    started = stopping = False
    held = any(_held(r.spec) for r in roles)
    # The runner's interrupt is held while the loop runs and taken between two lines: raised between a
    # ``done`` line's conversion and its report, it lost that role (its records saved, the role named as
    # stopped before saving them: one consumer of each 500-role JVM, in most 1,000-topic runs).
    with _whole() as interrupted:
        while not interrupted:
            if not started and ctx.start.is_set():
                _send(proc, f"start {int(ctx.start_ns.value)}")
                started = True
            if held and started and ctx.released():
                _send(proc, "release")
                held = False
            if not stopping and ctx.stop.is_set():
                _send(proc, "stop")
                stopping = True
            try:
                item = lines.get(0.02)
            except queue.Empty:
                late = [r for r in roles if not r.ready and not r.done]
                if late and time.monotonic() > ready_by and not stopping:
                    raise DriverError(f"the JVM worker did not answer 'ready' within {READY_TIMEOUT:.0f} s") from None
                continue
            if item is None:
                code = proc.wait()
                if code != 0:
                    raise DriverError(f"the JVM worker exited with code {code}: {_tail(log_path)}")
                return
            index, line = item
            word, _, rest = line.partition(" ")
            if index is None or index >= len(roles):  # a line of the JVM itself, in a group
                if word == "error":
                    raise DriverError(f"{system} (java): {rest}")
                continue
            role = roles[index]
            spec = role.spec
            if word == "ready":
                role.ready = True
                ctx.status.put(("ready", spec.name, proc.pid))  # the JVM's pid: its CPU is this worker's
            elif word == "progress":
                ctx.progress[spec.slot] = int(rest)
            elif word == "subscribed":
                ctx.status.put(("subscribed", spec.name))
            elif word == "done":
                _done(role, rest, ctx.status)
            elif word == "error":
                if not grouped:
                    raise DriverError(f"{system} (java): {rest}")
                role.done = True  # this role only: the JVM's others go on (the runner stops the case)
                ctx.status.put(("error", spec.name, f"{system} (java): {rest}"))


def _done(role: _Role, rest: str, status: Any) -> None:
    """A role's ``done <count> <error>``: its records converted, the role marked done and reported."""
    _convert(role.spec, role.outcomes)
    role.done = True
    count, _, error = rest.partition(" ")
    status.put(("done", role.spec.name, int(count), error))


def _finish(roles: list[_Role], lines: Any, status: Any) -> list[_Role]:
    """After an interruption: wait up to ``stop_grace`` seconds for the records of the roles not done yet,
    reporting each as it comes, and then convert those whose ``done`` had come by then (converting 500
    roles' records one after another outlasted the grace at 1,000 topics, while their lines waited here);
    returns those whose records did not come."""
    deadline = time.monotonic() + stop_grace(len(roles))
    while not all(r.done for r in roles):
        late = time.monotonic() >= deadline
        try:
            item = lines.get(0.0 if late else 0.05)
        except queue.Empty:
            if late:
                break
            continue
        if item is None:
            break
        index, line = item
        if index is not None and index < len(roles) and line.startswith("done "):
            # The JVM stopped on ``stop`` and saved whole records, only later than the runner's grace (a
            # RocketMQ consumer takes seconds to close): no problem of its own unless it says one; what did
            # not arrive shows in the delivery accounting.
            _done(roles[index], line[5:], status)
    return [r for r in roles if not r.done]


def _tail(log_path: Path) -> str:
    try:
        lines = [ln for ln in log_path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no output"
    return lines[-1] if lines else "no output"


def _convert(spec: Any, outcomes: Outcomes | None = None) -> None:
    """The JVM's records -> ``<out>.npz`` with the arrays and dtypes the Python worker of this kind saves;
    a producer that reported its outcomes gets their acknowledgements as ``t_ack`` (as ``SendRecord.save``),
    one whose sends return with the acknowledgement its own ``t_ack`` stamps."""
    index_path = Path(f"{spec.out}.jvm.json")
    index = json.loads(index_path.read_text())
    count = int(index["count"])
    arrays: dict[str, np.ndarray] = {}
    for name, dtype in _ARRAYS[spec.kind].items():
        path = index["arrays"].get(name)
        if path is None:
            arrays[name] = np.zeros(0, dtype)
            continue
        arrays[name] = np.fromfile(path, dtype="<i8", count=count).astype(dtype)
        os.unlink(path)
    if outcomes is not None and outcomes.watched:
        arrays["t_ack"] = outcomes.stamps(count)
        arrays["tracked"] = np.array([True])
    elif "t_ack" in index["arrays"]:  # stamped by the JVM as each synchronous send returned
        arrays["tracked"] = np.array([True])
    save(spec.out, **arrays)
    index_path.unlink()


@contextlib.contextmanager
def _whole() -> Iterator[list[int]]:
    """The runner's SIGUSR1 held: it interrupts only when the block ends, at a point the block chose (a
    ``done`` line's records saved and its role reported; an interrupt inside ``np.savez`` once broke the file
    and lost every role of a group). The block gets the list of the signals that came, to end early on one."""
    handler = signal.getsignal(signal.SIGUSR1)
    came: list[int] = []
    if not callable(handler) or threading.current_thread() is not threading.main_thread():
        yield came
        return
    signal.signal(signal.SIGUSR1, lambda signum, frame: came.append(signum))
    try:
        yield came
    finally:
        signal.signal(signal.SIGUSR1, handler)
        if came:
            handler(signal.SIGUSR1, None)  # as it would have, now that the records are whole
