"""The run stage: run every case and write its raw records, the manifest and the fault/timeline events.

Loop order is scenario > size > rate > repetition > system > variant, so the systems of one repetition run
back to back (interleaved): slow drift of a shared machine then affects every system alike, which is what
in-run ratios (``mqbench regress``) rely on. Brokers are provisioned by the caller (``harness.compare``);
summarising is the pipeline's job.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.drivers import driver_class
from harness.drivers.base import BrokerEndpoint, Driver, DriverError
from harness.network import Network
from harness.runfolder import RunFolder
from harness.runner.case import Case, CaseFailed, CaseResult, run_case
from harness.runner.evaluation import EvaluationFiles
from harness.scenario import Scenario, Variant

CaseSpec = tuple[Scenario, Variant, int, float | None, int]


def supports(system: str, scenario: Scenario) -> bool:
    return scenario.pattern in driver_class(system).patterns


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


def cases(scenarios: Sequence[Scenario], systems: Sequence[str]) -> Iterator[CaseSpec]:
    """Every (scenario, variant, size, rate, repetition) to run, in the interleaved order above; variants
    whose client cannot run here are left out (``variant_reason`` says why)."""
    for sc in scenarios:
        chosen = [s for s in systems if (sc.systems is None or s in sc.systems) and supports(s, sc)]
        for size in sc.message_sizes:
            for rate in sc.rates:
                for rep in range(sc.repetitions):
                    for system in chosen:
                        for variant in sc.variants_for(system):
                            if variant_reason(variant) is None:
                                yield sc, variant, size, rate, rep


@dataclass(frozen=True)
class System:
    """What the run stage needs to know about a ready system: its broker (None when brokerless) and the
    backend that serves it (``embedded`` for a library)."""

    broker: BrokerEndpoint | None
    backend: str


def run_cases(
    specs: Sequence[CaseSpec], systems: Mapping[str, System], run: RunFolder, console: Console, problems: list[str],
    observe: Callable[[CaseResult], None] | None = None, network: Network | None = None,
) -> bool:
    """Run ``specs`` into ``run``; append what went wrong to ``problems``; True when every case completed.

    ``observe`` gets the result of each case that ran (a rate search judges its trials by them); ``network``
    is the run's ``harness.network.Network`` when scenarios place parts on hosts."""
    complete = True
    evaluation = EvaluationFiles(run)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False) as bar:
        overall = bar.add_task("cases", total=len(specs))
        for i, (sc, variant, size, rate, rep) in enumerate(specs):
            rate_text = "max" if rate is None else f"{rate:g}/s"
            desc = f"{sc.name} {variant.system}/{variant.name} {size} B @ {rate_text} rep {rep + 1}"
            task = bar.add_task(desc, total=None)

            def progress(done: int, total: int, task: Any = task) -> None:
                bar.update(task, completed=done, total=total or None)

            system = systems[variant.system]
            case = Case(sc, variant, size, rate, rep, run.run_id, system.broker, network)
            try:
                driver = driver_class(variant.system, variant.options.get("client"))(variant.options, system.broker)
                labels = _record_variant(run, variant, driver, system.backend)
                result = run_case(case, driver, run.work_dir / f"case-{i}", progress)
            except (DriverError, CaseFailed) as exc:
                message = f"{desc}: {exc}"
                problems.append(message)
                console.print(f"[red]✗[/] {message}")
                complete = False
                bar.remove_task(task)
                bar.advance(overall)
                continue
            for p in result.problems:
                console.print(f"[yellow]![/] {desc}: {p.splitlines()[0]}")
            problems.extend(f"{desc}: {p}" for p in result.problems)
            complete = complete and result.complete
            name = run.raw_name(sc.name, variant.system, variant.name, size, rate, rep)
            run.write_raw(name, result.rows, result.send_errors)
            if observe is not None:
                observe(result)
            if result.faults or result.timeseries is not None or result.send_errors is not None:
                evaluation.add(name, {
                    "scenario": sc.name, "pattern": sc.pattern.value, "system": variant.system,
                    "variant": variant.name, "label": labels["label"], "guarantee": labels["guarantee"],
                    "size": size, "rate": float("nan") if rate is None else rate, "repetition": rep,
                }, result)
            run.manifest["cases"].append({
                "raw": f"raw/{name}", "complete": result.complete, "scenario": sc.name, "system": variant.system,
                "variant": variant.name, "size": size, "rate": rate, "repetition": rep,
            })
            run.write_manifest()
            bar.remove_task(task)
            bar.advance(overall)
    return complete


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
        }
    labels = {
        "system": variant.system,
        "variant": variant.name,
        "label": driver.label(),
        "guarantee": driver.guarantee().value,
        "client": driver.client_name() or driver.name,
        "backend": backend,
    }
    run.manifest.setdefault("variants", {})[f"{variant.system}/{variant.name}"] = labels
    return labels
