"""The run stage: every case of the run, each in worker processes, into raw records and the manifest.

Loop order is scenario > size > rate > repetition > system > variant, so the systems of one repetition run
back to back (interleaved): slow drift of a shared machine then affects every system alike, which is what
in-run ratios (``mqbench regress``) rely on. Brokers are provisioned by the caller (``harness.compare``);
summarising is the pipeline's job.

One case: plan (parent) -> consumers start and report ready -> producers start and report ready -> a short
settle, or for brokerless pub/sub (``Capabilities.slow_joiner``) the probe handshake: producers send probes
until every consumer has heard one from each of its producers -> common start stamp + start event ->
producers send -> the parent watches the shared progress counters (``_workers.watch``) -> stop when every
consumer has what it should have, when nothing moves any more after the producers finished, or when nothing
moved for ``timeout`` seconds (a stall: kept, marked incomplete) -> workers save their records -> rows are
assembled here and written through the run folder.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, ClusterShape, Driver, DriverError, Pattern, Topology
from harness.drivers.java import JVM_LIMITS
from harness.network import Network
from harness.runfolder import CaseKey, RunFolder
from harness.runner._backlog import BacklogRelease
from harness.runner._context import Case
from harness.runner._final_read import final_read, missing, needs_final_read, stalls
from harness.runner._netfaults import NetworkFaults
from harness.runner._placement import place
from harness.runner._records import assemble_rows, finalize, read_errors, tracked
from harness.runner._workers import (
    SETTLE,
    SUBSCRIBE_TIMEOUT,
    CaseFailed,
    OnProgress,
    Workers,
    launch_all,
    specs,
    watch,
)
from harness.runner.cpu import CpuTable
from harness.runner.evaluation import EvaluationFiles
from harness.runner.faults import FaultInjector, Sampler, WorkerHooks, depth_probe
from harness.runner.proc import CpuUse
from harness.scenario import Scenario, Variant

__all__ = ["Case", "CaseFailed", "CaseResult", "CaseSpec", "RunOne", "System", "run_case", "run_cases",
           "scenario_reason", "supports", "variant_reason"]



@dataclass(frozen=True)
class CaseSpec:
    """One case to run: a scenario's variant at one message size, offered rate (None: unpaced) and
    repetition; its identity in the run folder is ``key``."""

    scenario: Scenario
    variant: Variant
    size: int
    rate: float | None
    repetition: int

    @property
    def key(self) -> CaseKey:
        return CaseKey(self.scenario.name, self.variant.system, self.variant.name, self.size, self.rate,
                       self.repetition)
#: How one case runs: :func:`run_case` here, or ``harness.cluster.ClusterCases.run_case`` on a cluster.
RunOne = Callable[["Case", Driver, Path, "OnProgress | None"], "CaseResult"]


def scenario_reason(system: str, scenario: Scenario, client: str | None = None) -> str | None:
    """Why ``system`` (through ``client``, else its default one) cannot run ``scenario``, or None."""
    cls = driver_class(system, client)
    if scenario.pattern not in cls.patterns:
        return f"the driver lacks the {scenario.pattern.value} pattern"
    if cls.runs_in_jvm and (scenario.kills or scenario.consumer_rate is not None):
        return JVM_LIMITS
    if cls.runs_in_jvm and any(f.on_node for f in scenario.faults) and not getattr(cls, "rides_node_faults", False):
        return JVM_LIMITS
    return workload_reason(cls, scenario)


def workload_reason(cls: type[Driver], scenario: Scenario) -> str | None:
    """Why a driver cannot run a scenario's workload fields (harness.scenario._workload), or None."""
    if not scenario.workload:
        return None
    if scenario.keys != "none" and not cls.capabilities.keys:
        return f"{cls.name} has no message keys to route by"
    if scenario.keys != "none" and scenario.faults:
        return "keys are not sent by the fault-tolerant producer of runs with faults"
    return None


def supports(system: str, scenario: Scenario) -> bool:
    return scenario_reason(system, scenario) is None


@functools.cache
def _client_reason(system: str, client: str | None) -> str | None:
    try:
        return driver_class(system, client).unavailable_reason()
    except DriverError as exc:
        return str(exc)


def variant_reason(variant: Variant) -> str | None:
    """Why the client a variant chooses cannot run here (a Java client without java), or None."""
    client = variant.options.get("client")
    return _client_reason(variant.system, None if client is None else str(client))


@dataclass(frozen=True)
class System:
    """What the run stage needs to know about a ready system: its single-node broker (None when brokerless
    or when no variant runs on one), its clusters by shape, and the backend that serves them (``embedded``
    for a library)."""

    broker: BrokerEndpoint | None
    backend: str
    clusters: Mapping[ClusterShape, BrokerEndpoint] = field(default_factory=dict)

    def endpoint(self, variant: Variant) -> BrokerEndpoint | None:
        """The broker ``variant`` runs on: the cluster of its shape, else the single node."""
        return self.clusters[variant.cluster] if variant.cluster.clustered else self.broker


def run_cases(
    specs: Sequence[CaseSpec], systems: Mapping[str, System], run: RunFolder, console: Console, problems: list[str],
    observe: Callable[[CaseResult], None] | None = None, network: Network | None = None,
    run_one: RunOne | None = None,
) -> bool:
    """Run ``specs`` into ``run``; append what went wrong to ``problems``; True when every case completed.

    ``observe`` gets the result of each case that ran (a rate search judges its trials by them); ``network``
    is the run's ``harness.network.Network`` when scenarios place parts on hosts; ``run_one`` runs a case
    elsewhere than on this machine (``harness.cluster.ClusterCases.run_case``; default :func:`run_case`)."""
    run_one = run_one or run_case
    complete = True
    evaluation = EvaluationFiles(run)
    cpu = CpuTable(run)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        overall = bar.add_task("cases", total=len(specs))
        for i, spec in enumerate(specs):
            sc, variant, size, rate, rep = spec.scenario, spec.variant, spec.size, spec.rate, spec.repetition
            key = spec.key
            desc = key.describe()
            task = bar.add_task(desc, total=None)

            def progress(done: int, total: int, task: Any = task) -> None:
                bar.update(task, completed=done, total=total or None)

            system = systems[variant.system]
            broker = system.endpoint(variant)
            case = Case(sc, variant, size, rate, rep, run.run_id, broker, network)
            try:
                driver = driver_class(variant.system, variant.options.get("client"))(variant.options, broker)
                labels = _record_variant(run, variant, driver, broker.backend if broker else system.backend)
                result = run_one(case, driver, run.work_dir / f"case-{i}", progress)
            except (DriverError, CaseFailed) as exc:
                message = f"{desc}: {exc}"
                problems.append(message)
                console.print(f"[red]✗[/] {escape(message)}")
                complete = False
                bar.remove_task(task)
                bar.advance(overall)
                continue
            for p in result.problems:
                console.print(f"[yellow]![/] {escape(desc)}: {escape(p.splitlines()[0])}")
            if result.backlog and result.backlog["note"]:
                console.print(f"[yellow]·[/] {escape(desc)}: {escape(result.backlog['note'])}", highlight=False)
            for note in [*result.notes, *_final_read_notes(result)]:
                console.print(f"[yellow]·[/] {escape(desc)}: {escape(note)}", highlight=False)
            problems.extend(f"{desc}: {p}" for p in result.problems)
            complete = complete and result.complete
            name = key.raw_name
            run.write_raw(name, result.rows, result.send_errors, drained=result.drained,
                          acks_tracked=result.acks_tracked)
            cpu.add(case, result.cpu)
            if observe is not None:
                observe(result)
            if (result.faults or result.timeseries is not None or result.send_errors is not None
                    or result.drained is not None):
                evaluation.add(key, {
                    "pattern": sc.pattern.value, "label": labels["label"],
                    "guarantee": labels["guarantee"],
                    "acks_tracked": result.acks_tracked,
                    "stall_s": max(result.stalls.values(), default=float("nan")),
                }, result)
            run.manifest["cases"].append({
                "raw": f"raw/{name}", "complete": result.complete, **key.manifest_entry(),
                **({"stalls": {str(c): round(v, 3) for c, v in result.stalls.items()}} if result.stalls else {}),
                **({"backlog": result.backlog} if result.backlog else {}),
                **({"notes": result.notes} if result.notes else {}),
            })
            run.write_manifest()
            bar.remove_task(task)
            bar.advance(overall)
    return complete


def _final_read_notes(result: CaseResult) -> list[str]:
    """What the final read found, in words: held messages are the broker's, a stall is the consumer's."""
    if result.drained is None:
        return []
    held = len(result.drained.drop_duplicates(["producer", "seq"]))
    notes = [f"the final read found {held:,} accepted messages the consumers never got still held by the broker "
             "(counted as held, not lost)"]
    notes += [f"consumer {c} received nothing for the last {seconds:.1f} s of the case: a stall"
              for c, seconds in sorted(result.stalls.items())]
    return notes


def parity_labels(driver: Driver, variant: Variant) -> dict[str, str]:
    """What makes two rows like for like, for the manifest and every table: the broker's shape (nodes,
    replicas), what a send waits for, when messages are forced to disk, and the one-line ``parity`` label."""
    if not driver.needs_broker:
        return {"parity": "no broker (library)", "nodes": "0", "replicas": "0", "acks": "none", "fsync": "none",
                "cluster_note": ""}
    shape = driver.broker.shape if driver.broker is not None else variant.cluster
    own = driver.parity()
    where = shape.label() + (f" ({variant.cluster_note})" if variant.cluster_note else "")
    return {"parity": f"{where}; acks: {own['acks']}; fsync: {own['fsync']}", "nodes": str(shape.nodes),
            "replicas": str(shape.replicas), "acks": own["acks"], "fsync": own["fsync"],
            "cluster_note": variant.cluster_note}


def _record_variant(run: RunFolder, variant: Variant, driver: Driver, backend: str) -> dict[str, str]:
    """Record the system (versions, broker) once and every variant's own labels in the manifest."""
    systems: dict[str, Any] = run.manifest["systems"]
    if variant.system not in systems:
        systems[variant.system] = {
            "label": driver.label(),
            "versions": driver.versions(),
            "backend": backend,
            "broker_url": driver.broker.url if driver.broker else None,
            "broker_startup_s": driver.broker.extra.get("startup_s") if driver.broker else None,
            **({"broker_image": driver.broker.extra.get("image"), "broker_image_id": driver.broker.extra.get("image_id"),
                "broker_image_origin": driver.broker.extra.get("image_origin")}
               if driver.broker and driver.broker.backend == "containers" else {}),
        }
    labels = {
        "system": variant.system,
        "variant": variant.name,
        "label": driver.label(),
        "guarantee": driver.guarantee().value,
        "client": driver.client_name() or driver.name,
        "backend": backend,
        **parity_labels(driver, variant),
    }
    run.manifest.setdefault("variants", {})[f"{variant.system}/{variant.name}"] = labels
    return labels


@dataclass
class CaseResult:
    rows: pd.DataFrame
    complete: bool
    problems: list[str] = field(default_factory=list)
    start_ns: int = 0  # the common start stamp (monotonic_ns)
    faults: list[dict[str, Any]] = field(default_factory=list)  # what FaultInjector did, one dict per fault
    timeseries: pd.DataFrame | None = None  # Sampler rows (runs with faults or a slow consumer)
    send_errors: pd.DataFrame | None = None  # producer, seq, t_ns of sends that raised (runs with faults)
    cpu: list[CpuUse] = field(default_factory=list)  # per process role, start event to last message moved
    acks_tracked: bool = False  # the producers were told each send's outcome: unanswered sends are not accepted
    drained: pd.DataFrame | None = None  # the final read's receipts: producer, seq, consumer, t_ns (held, not lost)
    stalls: dict[int, float] = field(default_factory=dict)  # consumer -> seconds without a receipt at the end
    backlog: dict[str, Any] | None = None  # a backlog case: target, built, release_ns, start_ns, note
    notes: list[str] = field(default_factory=list)  # what a reader should know that did not make it incomplete


def run_case(case: Case, driver: Driver, work_dir: Path, on_progress: OnProgress | None = None) -> CaseResult:
    sc = case.scenario
    tag = f"{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    topology = Topology(sc.pattern, sc.topics, sc.producers, sc.consumers, case.size, tag,
                        keys=sc.key_count if sc.keys != "none" else 0)
    plan = driver.plan(topology)
    try:
        return _run(case, driver, plan, work_dir, on_progress)
    finally:
        driver.teardown(plan)


def _run(
    case: Case, driver: Driver, plan: dict[str, Any], work_dir: Path, on_progress: OnProgress | None
) -> CaseResult:
    work_dir.mkdir(parents=True, exist_ok=True)
    producers, consumers = specs(case, driver, plan, work_dir)
    placed, routes, ports = place(case.network, case.scenario, driver.needs_broker, [*producers, *consumers])
    producers, consumers = placed[: len(producers)], placed[len(producers) :]
    w = Workers(len(producers) + len(consumers))
    problems: list[str] = []
    complete = True
    sc = case.scenario
    evaluating = bool(sc.faults) or sc.consumer_rate is not None or sc.backlog is not None or bool(sc.rate_profile)
    injector: FaultInjector | None = None
    sampler: Sampler | None = None
    backlog: BacklogRelease | None = None
    backlog_record: dict[str, Any] | None = None
    fault_records: list[dict[str, Any]] = []
    samples: list[dict[str, Any]] = []
    cpu: list[CpuUse] = []
    ended_ns = 0
    try:
        # All at once: producers only send after the start event, by which time every consumer is ready.
        launch_all(w, producers, consumers)
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
                leader_resource=driver.leader_resource(plan) if driver.needs_broker else "",
            )
        nodes = [control.node_pids(n) for n in range(control.nodes)] if hasattr(control, "node_pids") else None
        w.measure_cpu(case.broker, control.pids() if control is not None else None, nodes)
        if sc.backlog is not None:
            names = [s.name for s in producers]
            backlog = BacklogRelease(
                w.progress, len(producers), max(1, sc.consumers // sc.topics) if sc.pattern is Pattern.PUBSUB else 1,
                sc.backlog.target(case.size), w.release_ns, lambda: all(n in w.done for n in names))
        w.start.set()
        for thread in (sampler, injector, backlog):
            if thread is not None:
                thread.start()
        complete = watch(case, w, producers, consumers, problems, on_progress, injector)
        ended_ns = time.monotonic_ns()
        cpu = w.cpu_used()
    finally:
        if injector is not None:
            fault_records = injector.stop()
        if sampler is not None:
            samples = sampler.stop()
        if backlog is not None:
            backlog_record = {**backlog.stop(), "start_ns": int(w.start_ns.value)}
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
    notes = [f"{', '.join(w.closed_late)}: their clients did not close within the runner's grace time; stopped "
             "after their records were saved (nothing is missing)"] if w.closed_late else []
    problems.extend(w.errors)
    problems.extend(f"{name}: {err}" for name, (_, err) in sorted(w.done.items()) if err)
    if w.errors:
        complete = False
    resilient = bool(producers) and producers[0].resilient
    if resilient:
        for spec in [*producers, *consumers]:
            finalize(spec.kind, spec.out)
    parts = [  # sends that raised (runs with faults), and sends refused in an outcome reported later (any run)
        pd.DataFrame({"producer": spec.role.index, "seq": e[:, 0], "t_ns": e[:, 1]})
        for spec in producers
        if (e := read_errors(spec.out)).size
    ]
    send_errors = None
    if resilient or parts:
        send_errors = (pd.concat(parts, ignore_index=True) if parts
                       else pd.DataFrame({"producer": [], "seq": [], "t_ns": []}, dtype="int64"))
    rows = assemble_rows(case, producers, consumers, work_dir)
    acks_tracked = any(tracked(spec.out) for spec in producers)
    drained, stalled = None, {}
    if needs_final_read(driver, case) and ended_ns:
        absent = missing(rows, send_errors, acks_tracked)
        if len(absent):
            try:
                drained = final_read(producers, consumers, absent, work_dir / "final-read")
            except CaseFailed as exc:
                problems.append(f"the final read of what the broker still holds failed: {exc}")
            stalled = stalls(rows, absent, ended_ns, int(w.start_ns.value), [s.role.index for s in consumers])
    return CaseResult(
        rows=rows, complete=complete, problems=problems, start_ns=int(w.start_ns.value), faults=fault_records,
        timeseries=pd.DataFrame(samples) if evaluating else None, send_errors=send_errors, cpu=cpu,
        acks_tracked=acks_tracked, drained=drained, stalls=stalled, backlog=backlog_record, notes=notes,
    )


def _broker_control(case: Case) -> Any:
    if case.broker is None or case.broker.backend not in ("process", "containers"):
        return None
    from harness.brokers import broker_control

    return broker_control(case.broker)


