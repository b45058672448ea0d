"""``crosscheck``: each broker's own benchmark tool against the broker instance the harness measures.

Per scenario and broker system: one broker is provisioned for all repetitions; for each repetition and
variant the harness runs its case (through ``harness.runner``, raw records into the run folder as in
``compare``), then every tool of that system that applies to the variant runs with the variant's settings
(size, producers, consumers, guarantee, window), then the variant's tool at its best on the broker
(``Tool.best``; a best run another variant of this repetition already made, or one equal to the run with the
row's settings, is not made again), all against the same endpoint (``ratio.interleaved``). A tool with no run
with a variant's settings (``Tool.unmatched``) gives that variant a "not run" row saying why, and runs at its
best only. Tools run for
their ramp and a fixed number of seconds of steady state: the scenario's ``duration``, else
``DEFAULT_SECONDS``. After the last system the pipeline summarises the run; each row's harness rate is that
summary's receiver msg/s. The table goes to ``crosscheck.parquet`` / ``.csv`` and the report gets a section. A
tool that cannot run gives a row that says why in one sentence.
"""

from __future__ import annotations

import contextlib
import dataclasses
import multiprocessing.forkserver as mp_forkserver
import resource
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from rich.console import Console
from rich.markup import escape

from harness.brokers import broker_control, provision
from harness.compare import CompareError, resolve_systems
from harness.crosscheck._tool import CrossCase, Tool, ToolFailed, ToolMissing, ToolResult
from harness.crosscheck.ratio import BEST, CLIENT_BOUND, MATCHED, HarnessSide, interleaved, row
from harness.crosscheck.tools import ToolUnavailable, load_tool, tool_keys
from harness.drivers import BROKERLESS, SYSTEMS, driver_class
from harness.drivers.base import BrokerEndpoint, DriverError
from harness.pipeline import PipelineError, summarise_run
from harness.report import write_report_from_summary
from harness.runfolder import RunFolder, RunFolderError
from harness.runfolder.schema import CROSSCHECK, CROSSCHECK_COLUMNS
from harness.runner.case import CaseSpec, System, run_cases
from harness.runner.plan import RunPlan
from harness.runner.proc import CpuMeter, CpuUse, cpu_seconds
from harness.runner.worker import HOT_LOOPS
from harness.scenario import Scenario, Variant

#: The driver option that is each system's window of messages in flight (pipeline depth for Redis).
WINDOW_OPTION = {"redis": "pipeline", "rabbitmq": "confirm_window", "mqtt": "inflight", "activemq": "prefetch"}
DEFAULT_WINDOW = 1000  # PerfTest's -c in the terms; for systems whose driver has no window option
DEFAULT_SECONDS = 10.0  # of steady state each tool measures when the scenario counts messages


@dataclass
class CrossOutcome:
    run_dir: Path
    rows: pd.DataFrame  # CROSSCHECK_COLUMNS, one row per variant, tool and repetition
    complete: bool
    problems: list[str] = field(default_factory=list)


@dataclass
class _Pending:
    """A row waiting for the pipeline's receiver rate of its harness repetition."""

    scenario: str
    case: CrossCase
    harness: HarnessSide
    tool: str
    result: ToolResult | None
    status: str = "ok"
    note: str = ""
    reference: str = MATCHED


def crosscheck(
    scenarios: Sequence[Scenario],
    *,
    systems: Sequence[str] | None = None,
    out_root: Path = Path("results"),
    brokers: Mapping[str, str] | None = None,
    backend: str = "auto",
    console: Console | None = None,
    strict: bool = False,
    write_report: bool = True,
) -> CrossOutcome:
    """Run the crosscheck of every broker system in ``scenarios`` (or ``systems``) into a new run folder.

    ``strict`` (CI): a tool that is missing makes the run incomplete. Raises CompareError (one sentence)
    when nothing can run; KeyboardInterrupt leaves the folder marked incomplete."""
    console = console or Console()
    brokers = dict(brokers or {})
    brokerless = [s for s in systems or () if s in BROKERLESS]
    if brokerless:
        raise CompareError(f"{', '.join(brokerless)} has no broker and so no broker tool to check against; "
                           "crosscheck takes broker systems only")
    statuses = resolve_systems(scenarios, systems, brokers, backend)
    order = [s for s in SYSTEMS if s in statuses and statuses[s].ready and s not in BROKERLESS]
    if not order:
        raise CompareError("no broker system can run here; `mqbench systems` says why for each")
    run = RunFolder.create(out_root, "crosscheck", {"hot_loops": HOT_LOOPS})
    run.manifest["scenarios"] = [sc.as_dict() for sc in scenarios]
    run.manifest["crosscheck"] = {"client_bound_below": CLIENT_BOUND}
    console.print(f"[bold]mqbench crosscheck[/] → {run.path}  (systems: {', '.join(order)})")
    for st in statuses.values():
        if not st.ready:
            console.print(f"not run, cannot run here: {st.system}: {st.reason}", highlight=False)
    pending: list[_Pending] = []
    problems: list[str] = []
    plan = RunPlan.build(scenarios, order)
    try:
        for sc in scenarios:
            for system in plan.systems_for(sc):
                variants = [v for v in plan.variants(sc) if v.system == system]
                _system(sc, system, variants, statuses[system].backend, brokers, run, console, problems, strict,
                        pending)
            for st in statuses.values():
                if not st.ready and st.system not in BROKERLESS and sc.lists(st.system):
                    pending += _not_measured(sc, st.system, {key: st.reason for key in tool_keys(st.system)})
                    if strict:
                        problems.append(f"{st.system} cannot run here: {st.reason}")
    except KeyboardInterrupt:
        problems.append("interrupted by the user (Ctrl-C / SIGTERM)")
        if pending:  # keep the rows measured so far (a second Ctrl-C skips this)
            with contextlib.suppress(PipelineError, RunFolderError):
                run.write_table(CROSSCHECK, _rows(run, pending, console, [], False), csv=True)
        run.finish(False, problems)
        raise
    finally:
        shutil.rmtree(run.work_dir, ignore_errors=True)
    rows = _rows(run, pending, console, problems, write_report)
    run.write_table(CROSSCHECK, rows, csv=True)
    complete = not problems
    run.finish(complete, problems)
    return CrossOutcome(run.path, rows, complete, problems)


def _tools(system: str) -> tuple[dict[str, Tool], dict[str, str]]:
    """The tools of ``system`` that can run here, and for the others one sentence each."""
    ready: dict[str, Tool] = {}
    missing: dict[str, str] = {}
    if not tool_keys(system):
        missing[system] = f"no crosscheck tool is registered for {system} (harness/crosscheck/tools/__init__.py)"
    for key in tool_keys(system):
        try:
            tool = load_tool(key)
        except ToolUnavailable as exc:
            missing[key] = str(exc)
            continue
        reason = tool.missing()
        if reason:
            missing[f"{key}: {tool.name}"] = reason
        else:
            ready[key] = tool
    return ready, missing


def _system(
    sc: Scenario, system: str, variants: Sequence[Variant], backend: str, brokers: Mapping[str, str],
    run: RunFolder, console: Console, problems: list[str], strict: bool, out: list[_Pending],
) -> None:
    """Append the rows of ``system``'s ``variants`` (those the run plan runs) to ``out`` as each is measured
    (an interrupted run keeps them)."""
    tools, missing = _tools(system)
    for key, reason in missing.items():
        console.print(f"[yellow]![/] {system}: tool {key} missing: {escape(str(reason))}", highlight=False)
        if strict:
            problems.append(f"{system}: tool {key} missing: {reason}")
    out += _not_measured(sc, system, missing)
    if not tools or not variants:
        return
    with contextlib.ExitStack() as stack:
        try:
            endpoint = stack.enter_context(provision(system, backend=backend, url=brokers.get(system),
                                                     logs_dir=run.logs_dir))
        except DriverError as exc:
            problems.append(f"{system}: {exc}")
            console.print(f"[red]✗[/] {system}: {escape(str(exc))}", highlight=False)
            return
        control = broker_control(endpoint)
        pids = control.pids() if control is not None else []
        run.manifest.setdefault("crosscheck_brokers", {})[system] = {"url": endpoint.url, "version": endpoint.version}
        for size in sc.message_sizes:
            cases = {v.name: _case(sc, v, size, endpoint) for v in variants}
            by_name = {v.name: v for v in variants}
            applying = {name: [key for key, tool in tools.items() if tool.applies(case)]
                        for name, (case, _) in cases.items()}
            best_of = {name: next((key for key in keys if tools[key].best(cases[name][0]) is not None), None)
                       for name, keys in applying.items()}
            matching: dict[str, list[str]] = {}  # the tools that also run with each variant's own settings
            for name, keys in applying.items():
                if not keys:
                    why = f"no crosscheck tool of {system} applies to its variant {name}"
                    problems.append(f"{system}/{name}: {why}")
                    out += _not_measured(sc, system, {system: why})
                case, labels = cases[name]
                matching[name] = []
                for key in keys:
                    why_not = tools[key].unmatched(case)
                    if why_not is None:
                        matching[name].append(key)
                        continue
                    console.print(f"[yellow]![/] {system}/{name}: {tools[key].name}, against its best only: "
                                  f"{escape(why_not)}", highlight=False)
                    side = HarnessSide(name, labels["client"], labels["label"], case.guarantee, 0, float("nan"))
                    out.append(_Pending(sc.name, case, side, tools[key].name, None, "not run", why_not))
            sides: dict[tuple[str, int], HarnessSide] = {}
            made: dict[tuple[Any, ...], _Pending] = {}  # this repetition's tool runs, by tool and case
            for step in interleaved(sc.repetitions, list(by_name), matching, best_of):
                case, labels = cases[step.variant]
                where = f"{system}/{step.variant} {size} B rep {step.repetition + 1}"
                if step.tool is None:
                    cpu = _harness(sc, by_name[step.variant], size, step.repetition, endpoint, backend, pids,
                                   run, console, problems)
                    sides[(step.variant, step.repetition)] = HarnessSide(
                        step.variant, labels["client"], labels["label"], case.guarantee, step.repetition,
                        float("nan"), cpu)
                    continue
                tool = tools[step.tool]
                side = sides[(step.variant, step.repetition)]
                ran = tool.best(case) if step.best else case
                assert ran is not None
                done = (step.repetition, step.tool, ran.key())
                if done not in made:
                    label = f"{tool.name} at its best" if step.best else tool.name
                    with console.status(f"{where}: {label}…"):
                        made[done] = _tool_run(sc.name, tool, ran, side, endpoint, run, pids, console, problems,
                                               where)
                first = made[done]
                out.append(dataclasses.replace(first, case=case, harness=side,
                                               reference=BEST if step.best else MATCHED))


def _not_measured(sc: Scenario, system: str, reasons: Mapping[str, str]) -> list[_Pending]:
    """A "missing" row per tool that cannot run (``reasons``: tool -> one sentence)."""
    case = CrossCase(system, sc.message_sizes[0], sc.messages or 0, sc.producers, sc.consumers)
    side = HarnessSide("", "", "", "", 0, float("nan"))
    return [_Pending(sc.name, case, side, key.split(": ")[-1], None, "missing", why) for key, why in reasons.items()]


def _case(sc: Scenario, variant: Variant, size: int, endpoint: BrokerEndpoint) -> tuple[CrossCase, dict[str, str]]:
    """The CrossCase of one variant (its guarantee, window and options as its driver parsed them)."""
    driver = driver_class(variant.system, variant.options.get("client"))(variant.options, endpoint)
    opts = getattr(driver, "opts", None)
    options: dict[str, Any] = (dataclasses.asdict(opts)
                               if dataclasses.is_dataclass(opts) and not isinstance(opts, type) else {})
    window = int(options.get(WINDOW_OPTION.get(variant.system, ""), DEFAULT_WINDOW))
    case = CrossCase(variant.system, size, sc.messages or 0, sc.producers, sc.consumers,
                     driver.guarantee().value, window, options, seconds=sc.duration or DEFAULT_SECONDS)
    return case, {"label": driver.label(), "client": driver.client_name() or driver.name}


def _harness(
    sc: Scenario, variant: Variant, size: int, rep: int, endpoint: BrokerEndpoint, backend: str,
    pids: list[int], run: RunFolder, console: Console, problems: list[str],
) -> list[CpuUse]:
    """Run the harness's case once; its workers' CPU and the broker's over the same interval."""
    before = _workers_cpu()
    t0 = time.monotonic()
    meter = CpuMeter({"broker": pids}).start()
    run_cases([CaseSpec(sc, variant, size, None, rep)], {variant.system: System(endpoint, backend)}, run, console, problems)
    broker = [u for u in meter.stop() if pids]
    return [CpuUse("harness", _workers_cpu() - before, time.monotonic() - t0), *broker]


def _workers_cpu() -> float:
    """CPU seconds of the runner's worker processes so far (those that ended and were waited for).

    Workers are forked by multiprocessing's forkserver (``harness.runner._workers``), which waits for them:
    the kernel adds each one's CPU to the forkserver's children's account (``cutime``/``cstime``, which
    ``cpu_seconds`` includes). Workers reaped here directly (no forkserver yet) are in our own rusage."""
    server = getattr(getattr(mp_forkserver, "_forkserver", None), "_forkserver_pid", None)
    own = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (cpu_seconds(server) if server else 0.0) + own.ru_utime + own.ru_stime


ATTEMPTS = 2  # runs of a tool per repetition: a shared machine stalls a JVM tool now and then


def _tool_run(
    scenario: str, tool: Tool, case: CrossCase, side: HarnessSide, endpoint: BrokerEndpoint, run: RunFolder,
    pids: list[int], console: Console, problems: list[str], where: str,
) -> _Pending:
    """One repetition of ``tool``; a run that fails is made once more (the first failure is kept in the
    row's note), a tool that is missing is not."""
    failures: list[str] = []
    for _ in range(ATTEMPTS):
        # Absolute: tools run with their own working directory and are handed file paths under this one.
        workdir = (run.work_dir / f"tool-{time.monotonic_ns()}").resolve()
        try:
            result = tool.run(case, endpoint, workdir, pids)
        except (ToolMissing, ToolFailed, ValueError) as exc:
            # ValueError: an adapter's parser found no figure in the tool's output (a tool cut short, say).
            if isinstance(exc, ValueError):
                exc = ToolFailed(f"its output held no figure ({exc})")
            console.print(f"[red]✗[/] {where}: {tool.name}: {escape(str(exc))}", highlight=False)
            if isinstance(exc, ToolMissing):
                problems.append(f"{where}: {tool.name}: {exc}")
                return _Pending(scenario, case, side, tool.name, None, "missing", str(exc))
            failures.append(str(exc))
            continue
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        if failures:
            result = dataclasses.replace(result, note=f"{result.note}; made again after: {failures[0]}")
        return _Pending(scenario, case, side, tool.name, result)
    problems.append(f"{where}: {tool.name}: {failures[-1]}")
    return _Pending(scenario, case, side, tool.name, None, "failed", "; ".join(failures))


def _rows(run: RunFolder, pending: list[_Pending], console: Console, problems: list[str],
          write_report: bool) -> pd.DataFrame:
    """The rows, each with its harness repetition's receiver rate from the pipeline's summary."""
    rates: dict[tuple[Any, ...], float] = {}
    if any(p.status == "ok" for p in pending):  # else no harness case ran and there is nothing to summarise
        try:
            summary = summarise_run(run.path, engine="pandas")
        except (PipelineError, RunFolderError) as exc:
            problems.append(f"no summary: {exc}")
        else:
            for r in summary.per_repetition.to_dict("records"):
                key = (r["scenario"], r["system"], r["variant"], int(r["size"]), int(r["repetition"]))
                rates[key] = float(r["receiver_msgs_per_s"])
            if write_report:
                # The report's crosscheck section reads crosscheck.parquet: write the table first.
                run.write_table(CROSSCHECK, _frame(pending, rates), csv=True)
                try:
                    console.print(f"report: {write_report_from_summary(summary, run.path)}")
                except Exception as exc:  # noqa: BLE001 - the table is safe on disk; say what failed
                    console.print(f"[yellow]the report could not be written: {escape(str(exc))}[/]")
    return _frame(pending, rates)


def _frame(pending: list[_Pending], rates: Mapping[tuple[Any, ...], float]) -> pd.DataFrame:
    rows = []
    for p in pending:
        key = (p.scenario, p.case.system, p.harness.variant, p.case.size, p.harness.repetition)
        side = dataclasses.replace(p.harness, receiver_rate=rates.get(key, float("nan")))
        rows.append(row(p.case, side, p.tool, p.result, p.status, p.note, p.reference))
    return pd.DataFrame(rows, columns=list(CROSSCHECK_COLUMNS))
