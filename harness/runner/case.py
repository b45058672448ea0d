"""Run one case (system variant x size x rate x repetition) in worker processes and build its raw rows.

Order of events: plan (parent) -> consumers start and report ready -> producers start and report ready ->
a short settle, or for brokerless pub/sub (``Capabilities.slow_joiner``) the probe handshake: producers send
probes until every consumer has heard one from each of its producers -> common start stamp + start event ->
producers send -> the parent watches the shared progress counters -> stop when every consumer has what it
should have, when nothing moves any more after the producers finished, or when nothing moved for
``timeout`` seconds (a stall: kept, marked incomplete) -> workers save their records -> rows are assembled
here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from harness.drivers import class_path
from harness.drivers.base import BrokerEndpoint, Driver, Pattern, Role, Topology
from harness.network import Network
from harness.runner._netfaults import NetworkFaults
from harness.runner._placement import place
from harness.runner._records import assemble_rows, finalize, read_errors
from harness.runner._workers import CaseFailed, Workers
from harness.runner.faults import FaultInjector, Sampler, WorkerHooks, depth_probe
from harness.runner.worker import WorkerSpec
from harness.scenario import Scenario, Variant

__all__ = ["Case", "CaseFailed", "CaseResult", "run_case"]

SUBSCRIBE_TIMEOUT = 30.0  # at most (or the scenario's timeout): for every subscription to reach its publishers
SETTLE = 0.2  # seconds between "all ready" and the start, for subscriptions to propagate (no handshake)
DRAIN_IDLE = 3.0  # after the producers finished: seconds without progress before we stop waiting


@dataclass(frozen=True)
class Case:
    scenario: Scenario
    variant: Variant
    size: int
    rate: float | None
    repetition: int
    run_id: str
    broker: BrokerEndpoint | None
    network: Network | None = None  # the run's hosts, when scenarios place parts on them


@dataclass
class CaseResult:
    rows: pd.DataFrame
    complete: bool
    problems: list[str] = field(default_factory=list)
    start_ns: int = 0  # the common start stamp (monotonic_ns)
    faults: list[dict[str, Any]] = field(default_factory=list)  # what FaultInjector did, one dict per fault
    timeseries: pd.DataFrame | None = None  # Sampler rows (runs with faults or a slow consumer)
    send_errors: pd.DataFrame | None = None  # producer, seq, t_ns of sends that raised (runs with faults)


Progress = Callable[[int, int], None]  # (received so far, expected so far)


def run_case(case: Case, driver: Driver, work_dir: Path, on_progress: Progress | None = None) -> CaseResult:
    sc = case.scenario
    tag = f"{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    topology = Topology(sc.pattern, sc.topics, sc.producers, sc.consumers, case.size, tag)
    plan = driver.plan(topology)
    try:
        return _run(case, driver, plan, work_dir, on_progress)
    finally:
        driver.teardown(plan)


def _specs(case: Case, driver: Driver, plan: dict[str, Any], work_dir: Path) -> tuple[list[WorkerSpec], list[WorkerSpec]]:
    sc = case.scenario
    per_producer = None if sc.messages is None else sc.messages + sc.warmup
    rate = None if case.rate is None else case.rate / sc.producers
    duration_ns = None if sc.duration is None else int(sc.duration * 1e9)
    if per_producer is not None:
        send_cap = per_producer
    elif rate is not None and sc.duration is not None:
        send_cap = int(rate * sc.duration) + sc.warmup + 1024
    else:
        send_cap = 1 << 16
    reqrep = sc.pattern is Pattern.REQREP
    resilient = bool(sc.faults) and not reqrep
    # The slow-joiner handshake (see _run); runs with faults and slow consumers keep their own loops.
    probing = (sc.pattern is Pattern.PUBSUB and driver.capabilities.slow_joiner and not resilient
               and sc.consumer_rate is None)
    common = dict(
        system=case.variant.system,
        driver=class_path(type(driver)),
        options=dict(case.variant.options),
        broker=case.broker,
        plan=plan,
        size=case.size,
        payload=sc.payload,
        duration_ns=duration_ns,
        resilient=resilient,
    )
    consumers = []
    for c in range(sc.consumers):
        on_topic = sum(1 for p in range(sc.producers) if p % sc.topics == c % sc.topics)
        consumers.append(
            WorkerSpec(
                kind="replier" if reqrep else "consumer",
                name=f"{'replier' if reqrep else 'consumer'}-{c}",
                slot=sc.producers + c,
                role=Role(c, c % sc.topics),
                total=None,
                rate=None,
                capacity=max(1024, int(send_cap * on_topic * (2.0 if resilient else 1.05))),
                out=str(work_dir / f"consumer-{c}"),
                consumer_rate=sc.consumer_rate,
                probe_from=tuple(p for p in range(sc.producers) if p % sc.topics == c % sc.topics)
                if probing else (),
                **common,  # type: ignore[arg-type]
            )
        )
    producers = [
        WorkerSpec(
            kind="requester" if reqrep else "producer",
            name=f"{'requester' if reqrep else 'producer'}-{p}",
            slot=p,
            role=Role(p, p % sc.topics),
            total=per_producer,
            rate=rate,
            capacity=send_cap,
            out=str(work_dir / f"producer-{p}"),
            probe=probing,
            **common,  # type: ignore[arg-type]
        )
        for p in range(sc.producers)
    ]
    return producers, consumers


def _run(
    case: Case, driver: Driver, plan: dict[str, Any], work_dir: Path, on_progress: Progress | None
) -> CaseResult:
    work_dir.mkdir(parents=True, exist_ok=True)
    producers, consumers = _specs(case, driver, plan, work_dir)
    placed, routes, ports = place(case.network, case.scenario, driver.needs_broker, [*producers, *consumers])
    producers, consumers = placed[: len(producers)], placed[len(producers) :]
    w = Workers(len(producers) + len(consumers))
    problems: list[str] = []
    complete = True
    sc = case.scenario
    evaluating = bool(sc.faults) or sc.consumer_rate is not None
    injector: FaultInjector | None = None
    sampler: Sampler | None = None
    fault_records: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    try:
        # All at once: producers only send after the start event, by which time every consumer is ready.
        for spec in [*consumers, *producers]:
            w.launch(spec)
        w.wait_ready([s.name for s in [*consumers, *producers]])
        if any(s.probe_from for s in consumers):
            # Brokerless pub/sub: a subscription reaches a publisher some time after the subscriber is
            # ready, and what the publisher sends before then is dropped. Producers send probes until the
            # start; the start waits until every consumer has heard one from each of its producers.
            late = w.wait_subscribed([s.name for s in consumers], min(SUBSCRIBE_TIMEOUT, sc.timeout))
            if late:
                problems.append(
                    f"{', '.join(late)}: did not hear every producer's probe within "
                    f"{min(SUBSCRIBE_TIMEOUT, sc.timeout):.0f} s (the subscription had not reached the "
                    "publishers); started anyway, so the start of the stream may show as loss there"
                )
        else:
            time.sleep(SETTLE)
        w.start_ns.value = time.monotonic_ns() + 20_000_000
        control = _broker_control(case)
        if evaluating:
            fanout = max(1, sc.consumers // sc.topics) if sc.pattern is Pattern.PUBSUB else 1
            sampler = Sampler(
                w.progress, len(producers), fanout, int(w.start_ns.value),
                broker_pids=control.pids if control is not None else list, worker_pids=w.pids,
                depth=depth_probe(case.variant.system, case.broker, plan),
            )
        if sc.faults:
            injector = FaultInjector(
                sc.faults, int(w.start_ns.value), WorkerHooks(w.kill, w.relaunch, w.mark_done), control,
                driver.needs_broker, [s.name for s in producers], [s.name for s in consumers],
                NetworkFaults(case.network, routes, ports) if case.network is not None else None,
            )
        w.start.set()
        for thread in (sampler, injector):
            if thread is not None:
                thread.start()
        complete = _watch(case, w, producers, consumers, problems, on_progress, injector)
    finally:
        if injector is not None:
            fault_records = injector.stop()
        if sampler is not None:
            samples = sampler.stop()
        forced = w.shutdown(grace=3.0)
        if injector is not None:
            try:
                note = injector.ensure_broker()  # a kill-broker fault left it dead: the next case needs it
                if note and fault_records:
                    fault_records[-1]["detail"] += f"; {note}"
            except Exception as exc:  # noqa: BLE001 - later cases will say the broker is unreachable
                problems.append(f"the broker could not be started again after the case: {exc}")
    if forced:
        complete = False
        problems.append(f"workers that had to be killed (their records are missing): {', '.join(forced)}")
    problems.extend(w.errors)
    problems.extend(f"{name}: {err}" for name, (_, err) in sorted(w.done.items()) if err)
    if w.errors:
        complete = False
    send_errors = None
    if producers and producers[0].resilient:
        for spec in [*producers, *consumers]:
            finalize(spec.kind, spec.out)
        parts = [
            pd.DataFrame({"producer": spec.role.index, "seq": e[:, 0], "t_ns": e[:, 1]})
            for spec in producers
            if (e := read_errors(spec.out)).size
        ]
        send_errors = (pd.concat(parts, ignore_index=True) if parts
                       else pd.DataFrame({"producer": [], "seq": [], "t_ns": []}, dtype="int64"))
    rows = assemble_rows(case, producers, consumers, work_dir)
    return CaseResult(
        rows=rows, complete=complete, problems=problems, start_ns=int(w.start_ns.value), faults=fault_records,
        timeseries=pd.DataFrame(samples) if evaluating else None, send_errors=send_errors,
    )


def _broker_control(case: Case) -> Any:
    if case.broker is None or case.broker.backend != "process":
        return None
    from harness.brokers import broker_control

    return broker_control(case.broker)


def _watch(
    case: Case,
    w: Workers,
    producers: list[WorkerSpec],
    consumers: list[WorkerSpec],
    problems: list[str],
    on_progress: Progress | None,
    injector: FaultInjector | None = None,
) -> bool:
    """Wait until the case is over; True when it ended normally, False on a stall.

    With faults, the case is not over while a fault is still to come or under way, the drain wait counts
    from the moment the last restarted broker/worker was back, and only the drain wait ends it (receipt
    counts include redeliveries, so reaching the expected count does not mean everything arrived)."""
    sc = case.scenario
    timeout = sc.timeout + (sc.duration or 0.0)
    last_total = -1
    last_change = time.monotonic()
    producer_names = [s.name for s in producers]
    while True:
        w.drain(0.1)
        if w.errors:
            problems.append("a worker failed; the case was stopped")
            return False
        counts = list(w.progress)
        sent_total = sum(counts[: len(producers)])
        received = counts[len(producers) :]
        total = sum(counts)
        now = time.monotonic()
        if total != last_total:
            last_total, last_change = total, now
        if injector is not None:
            if injector.busy():
                last_change = now
                continue
            last_change = max(last_change, injector.settled_at())
        producers_done = all(n in w.done for n in producer_names)
        expected = _expected(sc, producers, consumers, counts, w.done) if producers_done else None
        if on_progress is not None:
            on_progress(sum(received) if sc.pattern is not Pattern.REQREP else sent_total,
                        sum(expected) if expected else _planned(sc, len(producers)))
        if sc.pattern is Pattern.REQREP:
            if producers_done:
                return True
        elif expected is not None:
            if injector is not None:
                pass  # after faults, receipts include redeliveries: counts cannot tell that all arrived
            elif sc.pattern is Pattern.QUEUE:
                topics_full = all(
                    sum(r for r, s in zip(received, consumers, strict=True) if s.role.topic == t)
                    >= sum(e for e, s in zip(expected, consumers, strict=True) if s.role.topic == t)
                    for t in range(sc.topics)
                )
                if topics_full:
                    return True
            elif all(r >= e for r, e in zip(received, expected, strict=True)):
                return True
            if now - last_change > min(DRAIN_IDLE, sc.timeout):
                return True  # nothing more is coming: what is missing is lost
        if now - last_change > timeout:
            problems.append(
                f"stalled: no message moved for {timeout:.0f} s "
                f"({sent_total} sent, {sum(received)} received); results kept"
            )
            return False


def _planned(sc: Scenario, producers: int) -> int:
    return (sc.messages + sc.warmup) * producers if sc.messages is not None else 0


def _expected(
    sc: Scenario, producers: list[WorkerSpec], consumers: list[WorkerSpec], counts: list[int],
    done: dict[str, tuple[int, str]],
) -> list[int]:
    """Per consumer, how many messages its topic carried (pubsub: each; queue: shared by the topic)."""
    sent_per_topic = [0] * sc.topics
    for spec in producers:
        sent_per_topic[spec.role.topic] += done[spec.name][0]
    out = []
    for spec in consumers:
        if sc.pattern is Pattern.PUBSUB:
            out.append(sent_per_topic[spec.role.topic])
        else:
            share = sum(1 for s in consumers if s.role.topic == spec.role.topic)
            out.append(-(-sent_per_topic[spec.role.topic] // share))
    return out
