"""`mqbench compare`: run scenarios over systems into one results folder.

Loop order is scenario > size > rate > repetition > system > variant, so the systems of one repetition run
back to back (interleaved): slow drift of a shared machine then affects every system alike, which is what
in-run ratios (``mqbench regress``) rely on. Brokers are provisioned once per run and always torn down.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.drivers import BROKERLESS, SYSTEMS, driver_class
from harness.drivers.base import BrokerEndpoint, Driver, DriverError
from harness.metrics.summary import summarize_rows
from harness.runner.case import Case, CaseFailed, run_case
from harness.runner.results import RunFolder, new_run_id
from harness.scenario import Scenario, Variant


class CompareError(Exception):
    """The run cannot start (unknown or unavailable system, no broker); one sentence."""


@dataclass(frozen=True)
class SystemStatus:
    system: str
    ready: bool
    backend: str  # "embedded" for brokerless systems, else the broker backend
    reason: str


def system_status(system: str, brokers: Mapping[str, str] | None = None, backend: str = "auto") -> SystemStatus:
    """Whether ``system`` can run here, through which backend, or exactly why not."""
    try:
        cls = driver_class(system)
    except DriverError as exc:
        return SystemStatus(system, False, "", str(exc))
    reason = cls.unavailable_reason()
    if reason:
        return SystemStatus(system, False, "", reason)
    if not cls.needs_broker:
        detail = getattr(cls, "ready_detail", None)  # a JVM-driven library says which version runs
        return SystemStatus(system, True, "embedded", detail() if detail else "no broker needed")
    try:
        from harness.brokers import choose_backend
    except ImportError:
        return SystemStatus(system, False, "", "broker provisioning is not installed in this checkout")
    choice = choose_backend(system, backend=backend, url=(brokers or {}).get(system))
    if choice.backend is None:
        return SystemStatus(system, False, "", choice.reason)
    return SystemStatus(system, True, choice.backend, choice.reason)


@dataclass
class CompareOutcome:
    run_dir: Path
    complete: bool
    summary: pd.DataFrame
    problems: list[str] = field(default_factory=list)


def resolve_systems(
    scenarios: Sequence[Scenario], requested: Sequence[str] | None, brokers: Mapping[str, str], backend: str
) -> dict[str, SystemStatus]:
    """Every system in play with its status. Systems the user asked for with ``--systems`` must be ready;
    systems a scenario lists, or all systems by default, are skipped (with their reason) when not ready, so
    the same scenario file runs on a machine with brokers and on one without."""
    wanted: list[str] = []
    explicit = requested is not None
    if requested is not None:
        wanted = list(requested)
    else:
        for sc in scenarios:
            for s in sc.systems or SYSTEMS:
                if s not in wanted:
                    wanted.append(s)
    for s in wanted:
        if s not in SYSTEMS:
            raise CompareError(f"unknown system {s!r}; known systems: {', '.join(SYSTEMS)}")
    statuses = {s: system_status(s, brokers, backend) for s in wanted}
    if explicit:
        missing = [st for st in statuses.values() if not st.ready]
        if missing:
            st = missing[0]
            raise CompareError(f"system {st.system} cannot run here: {st.reason}")
    if not any(st.ready for st in statuses.values()):
        raise CompareError("no system can run here; `mqbench systems` says why for each")
    return statuses


def supports(system: str, scenario: Scenario) -> bool:
    return scenario.pattern in driver_class(system).patterns


def _cases(scenarios: Sequence[Scenario], systems: Sequence[str]) -> Iterator[tuple[Scenario, Variant, int, float | None, int]]:
    for sc in scenarios:
        chosen = [s for s in systems if (sc.systems is None or s in sc.systems) and supports(s, sc)]
        for size in sc.message_sizes:
            for rate in sc.rates:
                for rep in range(sc.repetitions):
                    for system in chosen:
                        for variant in sc.variants_for(system):
                            yield sc, variant, size, rate, rep


def compare(
    scenarios: Sequence[Scenario],
    *,
    systems: Sequence[str] | None = None,
    out_root: Path = Path("results"),
    brokers: Mapping[str, str] | None = None,
    backend: str = "auto",
    console: Console | None = None,
    label: str | None = None,
    write_report: bool = True,
) -> CompareOutcome:
    """Run every case and write the results folder. KeyboardInterrupt leaves it marked incomplete."""
    console = console or Console()
    brokers = dict(brokers or {})
    statuses = resolve_systems(scenarios, systems, brokers, backend)
    ready = {s: st for s, st in statuses.items() if st.ready}
    unready = [st for st in statuses.values() if not st.ready]
    order = [s for s in SYSTEMS if s in ready]
    for sc in scenarios:
        listed = [s for s in order if sc.systems is None or s in sc.systems]
        if sc.systems is not None or systems is not None:
            unsupported = [s for s in listed if not supports(s, sc)]
            if unsupported and len(unsupported) == len(listed):
                raise CompareError(f"scenario {sc.name}: no chosen system supports the {sc.pattern.value} pattern")
    cases = list(_cases(scenarios, order))
    skipped = sorted({f"{s} ({sc.pattern.value})" for sc in scenarios for s in order
                      if (sc.systems is None or s in sc.systems) and not supports(s, sc)})
    if not cases:
        raise CompareError("the scenarios and systems chosen leave nothing to run")
    run = RunFolder(out_root, new_run_id(label or "-".join(sc.name for sc in scenarios[:2])))
    run.manifest["scenarios"] = [sc.as_dict() for sc in scenarios]
    console.print(f"[bold]mqbench compare[/] → {run.path}  ({len(cases)} cases; systems: {', '.join(order)})")
    if skipped:
        console.print(f"not run, the driver lacks the pattern: {', '.join(skipped)}")
        run.manifest["not_supported"] = skipped
    if unready:
        for st in unready:
            console.print(f"not run, cannot run here: {st.system}: {st.reason}", highlight=False)
        run.manifest["not_available"] = {st.system: st.reason for st in unready}
    problems: list[str] = []
    complete = True
    interrupted = False
    try:
        with contextlib.ExitStack() as stack:
            endpoints = _provision(stack, order, ready, brokers, backend, run, console)
            complete = _run_all(cases, endpoints, ready, run, console, problems) and complete
    except KeyboardInterrupt:
        interrupted = True
        complete = False
        problems.append("interrupted by the user (Ctrl-C / SIGTERM)")
        raise
    finally:
        run.finish(complete and not problems, problems)
        shutil.rmtree(run.path / ".work", ignore_errors=True)
        if not interrupted:
            if write_report:
                _report(run.path, console)
    return CompareOutcome(run.path, complete and not problems, pd.DataFrame(run.summary_rows), problems)


def _provision(
    stack: contextlib.ExitStack,
    order: Sequence[str],
    ready: Mapping[str, SystemStatus],
    brokers: Mapping[str, str],
    backend: str,
    run: RunFolder,
    console: Console,
) -> dict[str, BrokerEndpoint | None]:
    endpoints: dict[str, BrokerEndpoint | None] = {}
    for system in order:
        if ready[system].backend == "embedded":
            endpoints[system] = None
            continue
        from harness.brokers import provision

        with console.status(f"starting {system} ({ready[system].backend})…"):
            try:
                endpoints[system] = stack.enter_context(
                    provision(system, backend=backend, url=brokers.get(system), logs_dir=run.path / "logs")
                )
            except DriverError as exc:
                raise CompareError(f"{system}: {exc}") from None
    return endpoints


def _run_all(
    cases: list[tuple[Scenario, Variant, int, float | None, int]],
    endpoints: Mapping[str, BrokerEndpoint | None],
    ready: Mapping[str, SystemStatus],
    run: RunFolder,
    console: Console,
    problems: list[str],
) -> bool:
    complete = True
    from harness.runner.evaluation import EvaluationFiles

    evaluation = EvaluationFiles(run)
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=console, transient=False) as bar:
        overall = bar.add_task("cases", total=len(cases))
        for i, (sc, variant, size, rate, rep) in enumerate(cases):
            rate_text = "max" if rate is None else f"{rate:g}/s"
            desc = f"{sc.name} {variant.system}/{variant.name} {size} B @ {rate_text} rep {rep + 1}"
            task = bar.add_task(desc, total=None)

            def progress(done: int, total: int, task: Any = task) -> None:
                bar.update(task, completed=done, total=total or None)

            broker = endpoints.get(variant.system)
            case = Case(sc, variant, size, rate, rep, run.run_id, broker)
            try:
                driver = driver_class(variant.system, variant.options.get("client"))(variant.options, broker)
                _record_system(run, variant, driver, ready)
                result = run_case(case, driver, run.path / ".work" / f"case-{i}", progress)
            except (DriverError, CaseFailed) as exc:
                message = f"{desc}: {exc}"
                problems.append(message)
                console.print(f"[red]✗[/] {message}")
                complete = False
                bar.remove_task(task)
                bar.advance(overall)
                continue
            if result.problems:
                for p in result.problems:
                    console.print(f"[yellow]![/] {desc}: {p.splitlines()[0]}")
                problems.extend(f"{desc}: {p}" for p in result.problems)
            complete = complete and result.complete
            name = run.raw_name(sc.name, variant.system, variant.name, size, rate, rep)
            run.write_raw(name, result.rows)
            row = {
                "run_id": run.run_id, "scenario": sc.name, "pattern": sc.pattern.value, "system": variant.system,
                "variant": variant.name, "size": size, "rate": float("nan") if rate is None else rate,
                "label": driver.label(), "guarantee": driver.guarantee().value, "repetition": rep,
                "producers": sc.producers, "consumers": sc.consumers,
                **summarize_rows(result.rows), "complete": result.complete,
            }
            run.add_summary(row)
            if result.faults or result.timeseries is not None:
                case_cols = {k: row[k] for k in ("scenario", "pattern", "system", "variant", "label", "guarantee",
                                                  "size", "rate", "repetition")}
                evaluation.add(name, case_cols, result)
            run.manifest["cases"].append({"raw": f"raw/{name}", "complete": result.complete})
            run.write_manifest()
            bar.remove_task(task)
            bar.advance(overall)
    return complete


def _record_system(run: RunFolder, variant: Variant, driver: Driver, ready: Mapping[str, SystemStatus]) -> None:
    systems: dict[str, Any] = run.manifest["systems"]
    variants = systems.get(variant.system, {}).get("variants", {})
    if variant.name in variants:
        return
    # Per variant too: a variant's options choose its client (``client: java``) and its guarantee.
    variants[variant.name] = {"label": driver.label(), "guarantee": driver.guarantee().value,
                              "versions": driver.versions()}
    systems.setdefault(variant.system, {
        "label": driver.label(),
        "versions": driver.versions(),
        "backend": ready[variant.system].backend,
        "broker_url": driver.broker.url if driver.broker else None,
        "broker_startup_s": driver.broker.extra.get("startup_s") if driver.broker else None,
        "guarantee": driver.guarantee().value,
    })["variants"] = variants


def _report(run_dir: Path, console: Console) -> None:
    try:
        from harness.report import write_report  # type: ignore[attr-defined]
    except ImportError:
        return
    try:
        path = write_report([run_dir])
        console.print(f"report: {path}")
    except Exception as exc:  # noqa: BLE001 - the measurements are safe on disk; say what failed
        console.print(f"[yellow]the report could not be written: {exc}[/]")


SummaryPrinter = Callable[[pd.DataFrame, Console], None]

__all__ = ["BROKERLESS", "CompareError", "CompareOutcome", "compare", "resolve_systems", "system_status"]
