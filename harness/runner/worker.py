"""Worker processes: one per producer, consumer, requester or replier.

Each worker owns its clock stamps (``time.monotonic_ns``, shared by all processes of one host) and keeps
them in preallocated buffers, so that recording limits what is measured as little as Python allows
(``mqbench calibrate`` measures how little). Every sending worker runs the one send loop
(harness.runner._send) with a step for what it does per message, every consuming worker the one receive
loop (harness.runner._receive); runs with faults give both their fault-tolerant strategies
(harness.runner._resilient) and mapped records (harness.runner._records). At the end a worker saves its
records to ``<out>.npz`` (temp name + rename) and reports on the status queue (harness.runner._context
describes the protocol). SIGINT is ignored here: the parent handles Ctrl-C and stops workers.
"""

from __future__ import annotations

import signal
import traceback
from typing import Any

import numpy as np

from harness.drivers import load_class
from harness.drivers.base import Driver, DriverError
from harness.runner._context import Interrupted, WorkerContext, WorkerSpec
from harness.runner._hot import HOT_LOOPS
from harness.runner._receive import POLL_TIMEOUT, Pull, pacer, receive_messages
from harness.runner._records import Receipts, SendRecord, save
from harness.runner._resilient import ReconnectingConsumer, ReconnectingSend, quiet_clients
from harness.runner._send import Request, Send, Step, probe_until_start, send_messages

__all__ = ["HOT_LOOPS", "Interrupted", "WorkerContext", "WorkerSpec", "worker_main"]


def _interrupt(signum: int, frame: Any) -> None:
    raise Interrupted


def worker_main(spec: WorkerSpec, ctx: WorkerContext) -> None:
    """Entry point of every worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGUSR1, _interrupt)
    try:
        if spec.namespace is not None:
            from harness.network import enter

            enter(spec.namespace)
        driver = load_class(spec.driver)(spec.options, spec.broker)
        if driver.runs_in_jvm:  # Java clients: this process relays to the JVM worker
            from harness.runner.jvm import relay

            relay(spec, ctx, driver)
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


def _producer(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    caps = driver.capabilities
    make = lambda: driver.create_producer(spec.plan, spec.role)  # noqa: E731
    step: Step
    probe = None  # the slow-joiner handshake: brokerless pub/sub only, never with faults (case.py)
    if spec.resilient:
        quiet_clients()
        step = ReconnectingSend(make, caps.flush, spec, ctx)
    else:
        producer = make()
        step = Send(producer, caps.batch_send, caps.flush)
        probe = producer.send if spec.probe else None
    ctx.status.put(("ready", spec.name))
    started = probe_until_start(probe, spec, ctx) if probe is not None else ctx.wait_start()
    _send_and_report(spec, ctx, step, started)


def _requester(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    step = Request(driver.create_requester(spec.plan, spec.role), spec.request_timeout)
    ctx.status.put(("ready", spec.name))
    _send_and_report(spec, ctx, step, ctx.wait_start())


def _send_and_report(spec: WorkerSpec, ctx: WorkerContext, step: Step, started: bool) -> None:
    if not started:
        step.close()
        return
    record = SendRecord(spec.out, spec.capacity, step.second, step.keeps_second, mapped_files=spec.resilient)
    n, schedule, error = send_messages(spec, ctx, step, record)
    record.save(n, schedule.intended(n))
    ctx.status.put(("done", spec.name, n, error))
    ctx.hold_until_stop()
    step.close()


def _consumer(spec: WorkerSpec, ctx: WorkerContext, driver: Driver) -> None:
    receipts = Receipts(spec.out, spec.capacity, mapped_files=spec.resilient)
    pace = pacer(spec.consumer_rate)

    def report(n: int) -> None:
        ctx.progress[spec.slot] = n

    on_message = receipts.callback(pace, report)

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
    ctx.status.put(("ready", spec.name))
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
    ctx.status.put(("ready", spec.name))
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
