"""Worker processes: one per producer, consumer, requester or replier.

Each worker owns its clock stamps (``time.monotonic_ns``, shared by all processes of one host) and keeps
them in preallocated buffers, so that recording limits what is measured as little as Python allows
(``mqbench calibrate`` measures how little). Every sending worker runs the one send loop
(harness.runner._send) with a step for what it does per message, every consuming worker the one receive
loop (below); runs with faults give both their fault-tolerant strategies
(harness.runner._resilient) and mapped records (harness.runner._records). At the end a worker saves its
records to ``<out>.npz`` (temp name + rename) and reports on the status queue (harness.runner._context
describes the protocol). SIGINT is ignored here: the parent handles Ctrl-C and stops workers.

The receive loop: receive -> stamp -> record the header, for every consuming worker, into ``Receipts``.

Two ways in, chosen by what the driver declares: pull-style consumers (``Capabilities.pull_receive``) hand
the worker a blocking receive, and the loop runs it in batches (``_pull_batches``, the per-message steps in
C where the extension is built: ``_hotloop.recv_headers``); callback-style consumers get
``Receipts.callback`` and the loop calls ``poll``. Strategies of the loop, not copies of it: a slow consumer
(``pacer``, callback way), the fault-tolerant consumer (``ReconnectingConsumer``: ``poll`` makes it again
when it raises; mapped receipts), the slow-joiner handshake before the start (``await_probes``).
"""

from __future__ import annotations

import gc
import signal
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from harness import _watchdog
from harness.drivers import load_class
from harness.drivers.base import Driver, DriverError
from harness.runner import _hot
from harness.runner._context import Ended, Interrupted, WorkerContext, WorkerSpec
from harness.runner._hot import HOT_LOOPS
from harness.runner._outcomes import Outcomes
from harness.runner._records import (
    BLOCK_BYTES,
    PROBE_PREFIX,
    SHORT_HEADER,
    Receipts,
    SendRecord,
    leading_stamps,
    save,
)
from harness.runner._resilient import ReconnectingConsumer, ReconnectingSend, quiet_clients
from harness.runner._send import KeyedSend, Request, Send, Step, probe_until_start, send_messages

__all__ = ["HOT_LOOPS", "Interrupted", "WorkerContext", "WorkerSpec", "worker_main"]


#: A pull-style receive: a function that blocks for the next payload at most a set time, and the exception
#: it raises when none came.
Pull = tuple[Callable[[], bytes], type[BaseException]]
POLL_TIMEOUT = 0.05  # seconds a receive or poll blocks before the loop looks at the stop event
HOT_BATCH = 1024  # messages per batch of a pull-style receive loop (at most, in the Python loop)
#: In a worker process that plays many roles (``group_main``), how many of them set up their clients at once:
#: a thousand clients that connect and ask for metadata all together overwhelm a broker on a small machine
#: (at 1,000 topics on two cores, confluent-kafka's offset look-ups and RocketMQ's consumer starts timed out);
#: a few at a time per process, they do not.
SETUP_AT_ONCE = 4


class _SetupGate:
    """At most ``n`` threads of this process between ``enter`` and ``leave`` (a role's setup, up to ready)."""

    def __init__(self, n: int) -> None:
        self._slots = threading.Semaphore(n)
        self._held = threading.local()

    def enter(self) -> None:
        self._slots.acquire()
        self._held.on = True

    def leave(self) -> None:
        """End this thread's setup (again: nothing)."""
        if getattr(self._held, "on", False):
            self._held.on = False
            self._slots.release()


_gate: _SetupGate | None = None  # set by group_main; a process of one role needs none


def pacer(rate: float | None) -> Callable[[int], None] | None:
    """A slow consumer's pause: called after each receipt (stamp ``t``), sleeps so that at most ``rate``
    messages per second are handled on average, with bursts of at most 50 ms worth after an idle spell."""
    if not rate:
        return None
    period = int(1e9 / rate)
    burst = 50_000_000
    mono = time.monotonic_ns
    due = [0]

    def pace(t: int) -> None:
        nxt = max(due[0], t - burst) + period
        due[0] = nxt
        left = nxt - mono()
        if left > 200_000:  # sleep() overshoots by ~0.1 ms: pausing in steps below that is noise
            time.sleep(left / 1e9)

    return pace


def receive_messages(spec: WorkerSpec, ctx: WorkerContext, consumer: Any, receipts: Receipts, pull: Pull | None) -> None:
    """From the start (after the handshake when ``spec.probe_from`` is set) until the stop event."""
    if spec.probe_from:
        if pull is None:
            raise DriverError(f"{spec.system}: the slow-joiner handshake needs a pull-style consumer "
                              "(Capabilities.pull_receive)")
        started = await_probes(pull, spec, ctx, receipts)
    else:
        started = ctx.wait_start()
    if not started or (spec.backlog and not hold_back(ctx)):
        return
    if pull is not None:
        _pull_batches(pull, spec, ctx, receipts)
        return
    poll, stop, progress, slot = consumer.poll, ctx.stop, ctx.progress, spec.slot
    try:
        while not stop.is_set():
            poll(POLL_TIMEOUT)
            progress[slot] = receipts.count()
    except Ended:
        pass


def hold_back(ctx: WorkerContext) -> bool:
    """A backlog case's consumer: receive nothing until the parent releases the consumers (the broker holds
    the backlog meanwhile; a brokerless sender meets its high-water mark). False when stopped first."""
    while not ctx.released():
        if ctx.stop.wait(0.005):
            return False
    return True


def gated(on_message: Callable[[bytes], None], ctx: WorkerContext) -> Callable[[bytes], None]:
    """``on_message`` for a library that delivers on its own thread: until the release it blocks that
    thread (the client stops reading, the broker holds the rest) and then passes the message on."""
    def on_held_message(payload: bytes) -> None:
        if not ctx.released():
            hold_back(ctx)
        on_message(payload)

    return on_held_message


def await_probes(pull: Pull, spec: WorkerSpec, ctx: WorkerContext, receipts: Receipts) -> bool:
    """A consumer until the start: receive, and report ``("subscribed", name)`` once a probe from each of
    ``spec.probe_from`` has arrived. A message that is not a probe can only arrive once the start is set and
    before this loop has seen it: it is recorded like any other. Returns like ``WorkerContext.wait_start``."""
    recv, timed_out = pull
    missing = set(spec.probe_from)
    reported = False
    mono = time.monotonic_ns
    while not ctx.start.is_set():
        if ctx.stop.is_set():
            return False
        try:
            msg = recv()
        except timed_out:
            continue
        t = mono()
        if msg[:2] == PROBE_PREFIX and len(msg) >= SHORT_HEADER.size:
            missing.discard(SHORT_HEADER.unpack_from(msg)[1])
            if not missing and not reported:
                ctx.status.put(("subscribed", spec.name))
                reported = True
        else:
            receipts.add_batch([msg], [t], spec.size)
    return not ctx.stop.is_set()


def _pull_batches(pull: Pull, spec: WorkerSpec, ctx: WorkerContext, receipts: Receipts) -> None:
    """What ``Receipts.callback`` does, in batches: per message only the receive, the clock read and the
    header kept. In C (``_hotloop.recv_headers``) each message is let go as soon as its header is copied, as a
    plain receive loop lets it go; the Python loop holds a batch and ``Receipts.add_batch`` cuts the headers
    out at once. A batch ends after ``k`` messages or a receive timeout. Interrupted by the runner, the batch
    is recorded up to the message being received (one that was received and stamped just before the
    interruption may be left out)."""
    recv, timed_out = pull
    size, stop, progress, slot = spec.size, ctx.stop, ctx.progress, spec.slot
    hot, hsize = _hot.recv_headers, SHORT_HEADER.size
    if hot is not None:
        # The C loop keeps 6 bytes a message, so its batch is not bounded by the messages' size: at 1 KB the
        # bound below made it 256, and the batch's own work (recording, the stop and progress) cost 43-53 ns
        # a message against 27-34 at 1,024 (timed alone), on a receiver that is mqcore's slower side.
        k = HOT_BATCH
        headers, lengths, stamps = bytearray(k * hsize), np.zeros(k, np.int64), np.zeros(k, np.int64)
        while not stop.is_set():
            n = 0
            try:
                stamps[:] = 0
                n = hot(recv, timed_out, headers, lengths, stamps, k, hsize)
            finally:
                if not n:  # interrupted inside the C loop: every message it recorded has its stamp
                    n = leading_stamps(stamps)
                receipts.add_headers(headers, lengths[:n], stamps[:n])
            progress[slot] = receipts.count()
        return
    k = max(1, min(HOT_BATCH, BLOCK_BYTES // max(size, 1)))  # the batch's messages are held: a cached block
    mono = time.monotonic_ns
    batch: list[Any] = [None] * k
    got: list[int] = [0] * k
    while not stop.is_set():
        n = 0
        try:
            for n in range(k):  # n: messages of this batch so far, also when a receive times out
                batch[n] = recv()
                got[n] = mono()
            n = k
        except timed_out:
            pass
        finally:
            receipts.add_batch(batch[:n], got[:n], size)
        progress[slot] = receipts.count()


def _ready(spec: WorkerSpec, ctx: WorkerContext, client_pid: int | None = None) -> None:
    """Tell the runner this worker is ready, its heap set aside first: every object made so far (numpy, the
    harness's modules, the driver's client and connections: tens of thousands) goes to the collector's
    permanent generation (``gc.freeze``). A full collection walks every tracked object of the process, so
    without this a library that makes container objects per message (mqcore, a pure-Python client) pays, in
    each full collection it triggers, for the harness's objects as well as its own: tens of milliseconds
    that stall the stream here and not in the library's own programs (docs/harness-cost.md). A consumer whose
    client runs in a process of its own names it (``client_pid``): its CPU is counted as this worker's."""
    gc.collect()
    gc.freeze()
    ctx.status.put(("ready", spec.name, client_pid) if client_pid else ("ready", spec.name))
    if _gate is not None:
        _gate.leave()


def _interrupt(signum: int, frame: Any) -> None:
    """The first SIGUSR1 interrupts whatever the worker waits in; the runner repeats it until the worker
    is gone (one signal can arrive while no Python code runs to see it), and a repeat must not cut short
    the saving of records the first one started."""
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    raise Interrupted


def worker_main(spec: WorkerSpec, ctx: WorkerContext) -> None:
    """Entry point of every worker process. It dies with the runner's forkserver, which ends with the runner
    however that ends (a killed harness leaves no worker blocked in a client)."""
    _watchdog.die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, _interrupt)
    if spec.namespace is not None:
        from harness.network import enter

        enter(spec.namespace)
    run_role(spec, ctx)


def group_main(specs: list[WorkerSpec], ctx: WorkerContext) -> None:
    """Entry point of a worker process that plays many roles, each in a thread of its own (cases with more
    producers and consumers than ``harness.runner._workers.ONE_PROCESS_EACH``, as OMB's workers run many
    producers and consumers in one JVM): every role runs the same loops and reports to the parent under
    its own name. The roles share the process's interpreter, so they take turns at the GIL; a role blocked
    in its client cannot be interrupted (SIGUSR1 is ignored here): the runner then kills the process and
    names the roles whose records are lost. The roles set up their clients ``SETUP_AT_ONCE`` at a time. Not
    used with faults or network hosts. Roles whose clients run in the JVM are played by one JVM instead, a
    thread each there (``jvm.relay_group``), and this process relays to it as for one role: SIGUSR1
    interrupts the relay, which stops the JVM and waits for its records."""
    global _gate
    _watchdog.die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if load_class(specs[0].driver).runs_in_jvm:
        from harness.runner.jvm import relay_group

        signal.signal(signal.SIGUSR1, _interrupt)
        try:
            relay_group(specs, ctx)
        finally:
            signal.signal(signal.SIGUSR1, signal.SIG_IGN)  # a late one must not end the exit in a traceback
        return
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    threading.stack_size(1 << 20)  # a thousand roles' stacks: 1 MiB each is plenty for the loops
    _gate = _SetupGate(SETUP_AT_ONCE)  # the roles set up their clients a few at a time
    threads = [threading.Thread(target=run_role, args=(spec, ctx), name=spec.name, daemon=True) for spec in specs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def run_role(spec: WorkerSpec, ctx: WorkerContext) -> None:
    """One producer, consumer, requester or replier, from its driver to its report to the parent."""
    if _gate is not None:
        _gate.enter()
    try:
        driver = load_class(spec.driver)(spec.options, spec.broker)
        if driver.runs_in_jvm:  # Java clients: this process relays to the JVM worker
            from harness.runner.jvm import relay

            outcomes = Outcomes(spec.out, mapped_files=spec.resilient) if spec.kind == "producer" else None
            try:
                relay(spec, ctx, driver, outcomes)
            finally:
                if outcomes is not None:
                    outcomes.close()
            return
        body = {"producer": _producer, "consumer": _consumer, "requester": _requester, "replier": _replier}
        body[spec.kind](spec, ctx, driver)
    except DriverError as exc:
        ctx.status.put(("error", spec.name, str(exc)))
    except Interrupted:
        ctx.status.put(("error", spec.name, "stopped by the runner before it was ready"))
    except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then exit
        detail = traceback.format_exc(limit=6)
        ctx.status.put(("error", spec.name, f"{type(exc).__name__}: {exc}\n{detail}"))
    finally:
        if _gate is not None:
            _gate.leave()  # a role that failed before it was ready


def _producer(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    caps = driver.capabilities
    make = lambda: driver.create_producer(spec.plan, spec.role)  # noqa: E731
    outcomes = Outcomes(spec.out, mapped_files=spec.resilient)
    step: Step
    probe = None  # the slow-joiner handshake: brokerless pub/sub only, never with faults (case.py)
    if spec.resilient:
        quiet_clients()
        step = ReconnectingSend(make, caps.flush, spec, ctx, outcomes)
    else:
        producer = make()
        outcomes.watch(producer, 0)
        if spec.keys != "none":
            step = KeyedSend(producer, caps.batch_send, caps.flush, spec.keys, spec.key_count, spec.role.index)
        else:
            step = Send(producer, caps.batch_send, caps.flush, caps.send_bytes)
        probe = producer.send if spec.probe else None
    _ready(spec, ctx)
    started = probe_until_start(probe, spec, ctx) if probe is not None else ctx.wait_start()
    _send_and_report(spec, ctx, step, started, outcomes)


def _requester(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    step = Request(driver.create_requester(spec.plan, spec.role), spec.request_timeout)
    _ready(spec, ctx)
    _send_and_report(spec, ctx, step, ctx.wait_start())


def _send_and_report(
    spec: WorkerSpec, ctx: WorkerContext, step: Step, started: bool, outcomes: Outcomes | None = None
) -> None:
    if not started:
        step.close()
        if outcomes is not None:
            outcomes.close()
        return
    record = SendRecord(spec.out, spec.capacity, step.second, step.keeps_second, mapped_files=spec.resilient)
    n, schedule, error = send_messages(spec, ctx, step, record)
    # The step's ``finish`` (in send_messages) flushed: a producer told of outcomes waits for them there.
    record.save(n, schedule.intended(n), outcomes.stamps(n) if outcomes is not None and outcomes.watched else None)
    ctx.status.put(("done", spec.name, n, error))
    try:
        ctx.hold_until_stop()
        step.close()
    except Interrupted:  # a client that hangs in its close: what it did is saved and reported already
        pass
    finally:
        if outcomes is not None:
            outcomes.close()


def _consumer(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    receipts = Receipts(spec.out, spec.capacity, mapped_files=spec.resilient)
    pace = pacer(spec.consumer_rate)

    def report(n: int) -> None:
        ctx.progress[spec.slot] = n

    on_message = receipts.callback(pace, report)
    if spec.backlog:
        on_message = gated(on_message, ctx)

    def make() -> Any:
        consumer = driver.create_consumer(spec.plan, spec.role)
        consumer.start(on_message)
        return consumer

    pull: Pull | None = None
    if spec.resilient:
        quiet_clients()
        consumer: Any = ReconnectingConsumer(make, ctx.stop)
    else:
        consumer = make()
        if driver.capabilities.pull_receive and pace is None:
            pull = consumer.receiver(POLL_TIMEOUT)
    client_pid = (consumer.consumer if spec.resilient else consumer).client_pid  # its CPU is this worker's
    _ready(spec, ctx, client_pid)
    try:
        receive_messages(spec, ctx, consumer, receipts, pull)
    except Interrupted:
        pass
    consumer.close()
    n = receipts.count()
    ctx.progress[spec.slot] = n
    receipts.save()
    ctx.status.put(("done", spec.name, n, receipts.note()))


def _replier(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    replier = driver.create_replier(spec.plan, spec.role)
    replier.start()
    _ready(spec, ctx)
    served = 0
    try:
        if ctx.wait_start():
            while not ctx.stop.is_set():
                served += replier.poll(POLL_TIMEOUT)
                ctx.progress[spec.slot] = served
    except Interrupted:
        pass
    replier.close()
    save(spec.out, served=np.array([served], dtype=np.int64))
    ctx.status.put(("done", spec.name, served, ""))
