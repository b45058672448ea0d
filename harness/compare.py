"""`mqbench compare`: the stages of a run in order — provision, run, summarise, report.

This module sits above the stages and calls each in turn; no stage imports another one above it:
``harness.brokers`` provisions, ``harness.runner`` runs the cases and writes raw records and the manifest,
``harness.pipeline`` computes the one summary (Spark SQL; pandas without Java) into the run folder and
the results lake, ``harness.report`` renders it. Brokers are provisioned once per run and always torn down, also on Ctrl-C.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pandas as pd
from rich.console import Console
from rich.markup import escape

from harness.brokers import Placement, advertises_address, choose_backend, provision
from harness.brokers._spec import NodeHost
from harness.drivers import BROKERLESS, SYSTEMS, driver_class
from harness.drivers.base import SINGLE_NODE, BrokerEndpoint, ClusterShape, DriverError
from harness.network import (
    Network,
    NetworkError,
    ToxiproxyError,
    find_binary,
    loopback_ports,
    network,
    routes_for,
)
from harness.pipeline import PipelineError, add_run, default_engine, summarise_run
from harness.report import write_report_from_summary
from harness.runfolder import RunFolder
from harness.runner.case import RunOne, System, run_cases
from harness.runner.plan import RunPlan
from harness.runner.search import run_searches
from harness.runner.worker import HOT_LOOPS
from harness.scenario import Scenario, Variant


class CompareError(Exception):
    """The run cannot start (unknown or unavailable system, no broker); one sentence."""


class SummaryInterrupted(KeyboardInterrupt):
    """A Ctrl-C while the summary of a finished run was being made; its one sentence says what is left."""


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
        return SystemStatus(system, True, "embedded", cls.ready_detail())
    choice = choose_backend(system, backend=backend, url=(brokers or {}).get(system))
    if choice.backend is None:
        return SystemStatus(system, False, "", choice.reason)
    return SystemStatus(system, True, choice.backend, choice.reason)


@dataclass
class CompareOutcome:
    run_dir: Path
    complete: bool
    summary: pd.DataFrame  # the pipeline's per-repetition summary (``summary.parquet``)
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
    spark_master: str | None = None,
    engine: Literal["auto", "spark", "pandas"] | None = None,
) -> CompareOutcome:
    """Run every case, summarise the run and (unless ``write_report`` is False) write its report.

    With ``spark_master``, each case's workers run as a barrier stage on that Spark cluster
    (``harness.cluster``; the scenarios' ``hosts:`` name its workers' hosts) and the summary is computed
    there too. ``engine`` computes the summary (``auto``: Spark, pandas where no Java runtime exists); by
    default :func:`harness.pipeline.default_engine`, and ``auto`` on a cluster. The summary is the same with or
    without the report. KeyboardInterrupt leaves the folder marked
    incomplete (``mqbench report`` summarises what was recorded)."""
    console = console or Console()
    try:
        engine = engine or ("auto" if spark_master else default_engine())  # a cluster's session is there
    except PipelineError as exc:
        raise CompareError(str(exc)) from None
    brokers = dict(brokers or {})
    statuses = resolve_systems(scenarios, systems, brokers, backend)
    ready = {s: st for s, st in statuses.items() if st.ready}
    unready = [st for st in statuses.values() if not st.ready]
    order = [s for s in SYSTEMS if s in ready]
    plan = RunPlan.build(scenarios, order)
    for sc in scenarios:
        if sc.systems is not None or systems is not None:
            reasons = plan.unrunnable(sc)
            if reasons and len(reasons) == len(plan.named(sc)):
                raise CompareError(f"scenario {sc.name}: no chosen system can run it ({'; '.join(reasons)})")
    specs = list(plan.cases())
    searched = list(plan.searches())
    skipped = plan.not_supported()
    if not specs and not searched:
        raise CompareError("the scenarios and systems chosen leave nothing to run")
    if spark_master is not None and searched:
        raise CompareError("rate searches (rate: search) do not run on a Spark cluster yet; run them without "
                           "--spark-master")
    run = RunFolder.create(out_root, label or "-".join(sc.name for sc in scenarios[:2]), {"hot_loops": HOT_LOOPS})
    run.manifest["scenarios"] = [sc.as_dict() for sc in scenarios]
    console.print(f"[bold]mqbench compare[/] → {run.path}  ({len(specs)} cases, {len(searched)} rate searches; systems: {', '.join(order)})")
    if skipped:
        console.print(f"not run: {'; '.join(skipped)}", highlight=False, markup=False)
        run.manifest["not_supported"] = skipped
    if unready:
        for st in unready:
            console.print(f"not run, cannot run here: {st.system}: {st.reason}", highlight=False, markup=False)
        run.manifest["not_available"] = {st.system: st.reason for st in unready}
    for where, reason in plan.unavailable_clients().items():
        console.print(f"not run, its client cannot run here: {where}: {reason}", highlight=False, markup=False)
        run.manifest.setdefault("not_available", {})[where] = reason
    problems: list[str] = []
    complete = True
    with contextlib.ExitStack() as cluster:  # the Spark session (--spark-master) lives until the summary is made
        try:
            run_one = _cluster(cluster, spark_master, run)
            with contextlib.ExitStack() as stack:
                net = None if spark_master else _network(stack, scenarios, run)
                placement = _placement(scenarios, net)
                shapes = _shapes([spec.variant for spec in specs] + [v for _, v, _ in searched])
                provisioned = _provision(stack, order, ready, brokers, backend, run, console, placement, shapes,
                                         _node_hosts(scenarios, net))
                complete = run_cases(specs, provisioned, run, console, problems, network=net, run_one=run_one) and complete
                complete = run_searches(searched, provisioned, run, console, problems) and complete
        except KeyboardInterrupt:
            problems.append("interrupted by the user (Ctrl-C / SIGTERM)")
            run.finish(False, problems)
            raise
        finally:
            shutil.rmtree(run.work_dir, ignore_errors=True)
        run.finish(complete and not problems, problems)
        summary = _summarise(run, console, write_report, spark_master, engine)
    return CompareOutcome(run.path, complete and not problems, summary, problems)


def _cluster(stack: contextlib.ExitStack, spark_master: str | None, run: RunFolder) -> RunOne | None:
    """How a case runs on the cluster at ``spark_master`` (None: on this machine); its session is stopped
    when ``stack`` closes."""
    if spark_master is None:
        return None
    from harness.cluster import ClusterCases
    from harness.pipeline import spark_session

    try:
        spark = spark_session(spark_master)
    except PipelineError as exc:
        raise CompareError(str(exc)) from None
    stack.callback(spark.stop)
    run.manifest["cluster"] = {"spark_master": spark_master}
    return ClusterCases(spark, run).run_case


def _summarise(run: RunFolder, console: Console, write_report: bool, spark_master: str | None,
               engine: Literal["auto", "spark", "pandas"] = "auto") -> pd.DataFrame:
    """The pipeline's summary of the run (stored in it and in the results lake), then the report; an empty
    frame if nothing was recorded. The Spark session starts here, after the cases (its JVM would compete
    with the workers), or is the cluster's (``--spark-master``)."""
    try:
        with console.status("summarising (pandas)…" if engine == "pandas" else "summarising (Spark)…"):
            summary = summarise_run(run.path, engine=engine, spark_master=spark_master)
    except KeyboardInterrupt:
        raise SummaryInterrupted(f"the run's measurements are complete in {run.path} but not summarised; "
                                 f"`mqbench report {run.path}` summarises them") from None
    except PipelineError as exc:
        console.print(f"[yellow]no summary: {escape(str(exc))}[/]")
        return pd.DataFrame()
    console.print(f"computed by: {summary.computed_by}", highlight=False)
    try:
        add_run(run.path)
    except PipelineError as exc:
        console.print(f"[yellow]not added to the results lake: {escape(str(exc))}[/]")
    if write_report:
        try:
            console.print(f"report: {write_report_from_summary(summary, run.path)}")
        except Exception as exc:  # noqa: BLE001 - the measurements and summary are safe on disk; say what failed
            console.print(f"[yellow]the report could not be written: {escape(str(exc))}[/]")
    return summary.per_repetition


def _network(stack: contextlib.ExitStack, scenarios: Sequence[Scenario], run: RunFolder) -> Network | None:
    """The run's hosts (every host any scenario names), removed when the run ends, however it ends."""
    hosts = [h for sc in scenarios for h in sc.hosts.names()]
    if not hosts:
        return None
    if find_binary() is None:
        raise CompareError("hosts need toxiproxy-server, which is not installed; run `make toxiproxy`")
    try:
        net = stack.enter_context(network(hosts))
    except (NetworkError, ToxiproxyError) as exc:
        raise CompareError(f"the scenarios' hosts cannot be set up: {exc}") from None
    assert net is not None
    run.manifest["network"] = net.describe()
    return net


def _placement(scenarios: Sequence[Scenario], net: Network | None) -> Placement | None:
    """Where local broker processes run: the one host the scenarios give the broker, if any."""
    placed = sorted({sc.hosts.broker for sc in scenarios if sc.hosts.broker is not None})
    if net is None or not placed:
        return None
    if len(placed) > 1:
        raise CompareError(f"the scenarios of one run place the broker on different hosts ({', '.join(placed)}); "
                           "run them separately or give them the same broker host")
    routes = routes_for(net, placed[0])
    clients = tuple(dict.fromkeys([None, *(sc.hosts.of(role) for sc in scenarios for role in ("producers", "consumers"))]))
    return Placement(placed[0], net.prefix_for(placed[0]), lambda url: routes.rewrite(url, None, loopback_ports(url)),
                     clients=clients, advertise=routes.advertise, mirror=routes.mirror)


def _shapes(variants: Sequence[Variant]) -> dict[str, list[ClusterShape]]:
    """The broker shapes each system's variants run on, single node first, in the order they first come."""
    out: dict[str, list[ClusterShape]] = {}
    for v in variants:
        shapes = out.setdefault(v.system, [])
        if v.cluster not in shapes:
            shapes.append(v.cluster)
    for shapes in out.values():
        shapes.sort(key=lambda shape: shape.clustered)
    return out


def _node_hosts(scenarios: Sequence[Scenario], net: Network | None) -> list[NodeHost] | None:
    """Where a cluster's nodes run: the scenarios' ``hosts: {nodes: [...]}`` (one list per run), else loopback."""
    lists = sorted({sc.hosts.nodes for sc in scenarios if sc.hosts.nodes})
    if net is None or not lists:
        return None
    if len(lists) > 1:
        raise CompareError(f"the scenarios of one run give the nodes different hosts ({'; '.join(map(', '.join, lists))}); "
                           "run them separately or give them the same nodes")
    return [NodeHost(address=net.address(h), host=h, prefix=net.prefix_for(h)) for h in lists[0]]


def _provision(
    stack: contextlib.ExitStack,
    order: Sequence[str],
    ready: Mapping[str, SystemStatus],
    brokers: Mapping[str, str],
    backend: str,
    run: RunFolder,
    console: Console,
    placement: Placement | None = None,
    shapes: Mapping[str, Sequence[ClusterShape]] | None = None,
    node_hosts: list[NodeHost] | None = None,
) -> dict[str, System]:
    """Start the brokers of every ready system, one per shape its variants run on (default: a single node)."""
    out: dict[str, System] = {}
    for system in order:
        if ready[system].backend == "embedded":
            out[system] = System(None, "embedded")
            continue
        note = choose_backend(system, backend=backend, url=brokers.get(system)).note
        if note:
            console.print(note, highlight=False)
        single: BrokerEndpoint | None = None
        clusters: dict[ClusterShape, BrokerEndpoint] = {}
        for shape in (shapes or {}).get(system, [SINGLE_NODE]):
            what = f"{system} ({shape.label()})" if shape.clustered else f"{system} ({ready[system].backend})"
            with console.status(f"starting {what}…"):
                try:
                    endpoint = stack.enter_context(
                        provision(system, backend=backend, url=brokers.get(system), logs_dir=run.logs_dir,
                                  placement=None if advertises_address(system) or shape.clustered else placement,
                                  shape=shape, node_hosts=node_hosts)
                    )
                except DriverError as exc:
                    raise CompareError(f"{system}: {exc}") from None
            if shape.clustered:
                clusters[shape] = endpoint
            else:
                single = endpoint
        out[system] = System(single, ready[system].backend, clusters)
    return out


__all__ = ["BROKERLESS", "CompareError", "CompareOutcome", "compare", "resolve_systems", "system_status"]
