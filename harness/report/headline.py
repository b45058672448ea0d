"""The report: its headline, then ``write_report``, which writes the page that opens with it.

The headline: per scenario, the systems ranked, with a ratio to the reference system (its sentence is
``_page.sentence``) and a bar chart. A scenario may hold many cases (sizes, rates); the headline compares
the systems on one of them: the smallest message size, at full speed when the scenario has a ``max``
rate, else at its highest offered rate. At full speed the systems are ranked by receiver msgs/s; at a
fixed offered rate (where every system that keeps up receives the same rate) by p99. The reference is
``zmq`` when the scenario ran it, else the first system of the run.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

from harness import units
from harness.metrics.bound import MARK, RULE_SHORT, cpu_text
from harness.pipeline import Summary, load_summary, write_summary
from harness.report import crosscheck, evaluation, guarantees, workloads
from harness.report._context import row_name
from harness.report._page import caption, figure_name, render_html, render_markdown
from harness.report.figures import MinorLogLabels, panel_figure, png_bytes, render_figures
from harness.report.figures import captions as figure_captions
from harness.runfolder import RunFolder
from harness.runfolder.schema import FEATURE_MATRIX, FIGURES_DIR, REPORT_HTML, REPORT_MD

if TYPE_CHECKING:
    from harness.pipeline._summary import Engine

#: The system every other is compared with when it ran.
REFERENCE_SYSTEM = "zmq"


@dataclass(frozen=True)
class Row:
    """One bar of the headline chart: one system variant in the headline case."""

    system: str
    name: str  # "rabbitmq (pika) durable": label and variant (unless default)
    guarantee: str
    msgs: float  # receiver msgs/s, mean over repetitions
    low: float  # 95 % interval of the mean (NaN with one repetition)
    high: float
    p50_us: float
    p99_us: float
    repetitions: int
    lost: int
    approximate: bool  # percentiles approximated (Spark) or the case did not run to its end
    ratio: float = math.nan  # msgs / the reference row's msgs
    bound: str = ""  # the CPU-based label with its reason (harness.metrics.bound), "" when none
    client_cpu: float = math.nan  # % of a core: the busiest client process, the broker (means)
    broker_cpu: float = math.nan


@dataclass(frozen=True)
class Headline:
    scenario: str
    pattern: str
    size: int
    rate: float  # NaN = full speed
    latency: str  # "one-way latency from the intended send time", ...
    rows: tuple[Row, ...]  # ranked, best first
    reference: str  # name of the reference row
    bound_us: float = math.nan  # rate search: the p99 bound; rows' msgs are their max sustained rates

    @property
    def by_latency(self) -> bool:
        return not math.isnan(self.rate)

    @property
    def by_search(self) -> bool:
        return not math.isnan(self.bound_us)

    @property
    def case_text(self) -> str:
        rate = "full speed" if math.isnan(self.rate) else f"{units.count(self.rate)} msgs/s offered"
        if self.by_search:
            rate = f"highest rate sustained with p99 under {units.duration_us(self.bound_us)}"
        return f"{self.pattern}, {units.size(self.size)}, {rate}"

    @property
    def ranking(self) -> str:
        if self.by_search:
            return "highest sustained rate first"
        return "lowest p99 first" if self.by_latency else "highest receiver msgs/s first"

    @property
    def repetitions(self) -> str:
        counts = sorted({row.repetitions for row in self.rows})
        text = "/".join(str(n) for n in counts)
        return f"{text} repetition{'' if counts == [1] else 's'}"


def _name(first: pd.Series, many_runs: bool) -> str:
    text = row_name(first["label"], first["variant"])
    return f"{text} [{first['run_id']}]" if many_runs else text


def _approximate(summary: Summary, case: pd.Series) -> bool:
    per = summary.per_repetition
    mask = (
        (per["run_id"] == case["run_id"]) & (per["scenario"] == case["scenario"])
        & (per["system"] == case["system"]) & (per["variant"] == case["variant"])
        & (per["size"] == case["size"])
        & ((per["rate"] == case["rate"]) | (per["rate"].isna() & pd.isna(case["rate"])))
    )
    methods = per.loc[mask, "percentile_method"] if "percentile_method" in per else pd.Series(dtype=str)
    return bool((methods == "approx").any()) or not bool(case["complete"])


def _headline_case(group: pd.DataFrame) -> pd.DataFrame:
    size = group["size"].min()
    group = group[group["size"] == size]
    if group["rate"].isna().any():
        return group[group["rate"].isna()]
    return group[group["rate"] == group["rate"].max()]


def _system_order(summary: Summary) -> list[str]:
    order = [system for run in summary.runs for system in run.systems]
    return list(dict.fromkeys([*order, *summary.aggregate["system"].astype(str)]))


def _with_ratios(rows: list[Row], order: list[str]) -> tuple[list[Row], str]:
    systems = {row.system for row in rows}
    ref_system = REFERENCE_SYSTEM if REFERENCE_SYSTEM in systems else next(s for s in order if s in systems)
    reference = next(row for row in rows if row.system == ref_system)
    out = [
        replace(row, ratio=row.msgs / reference.msgs if reference.msgs > 0 else math.nan)
        for row in rows
    ]
    return out, reference.name


def _row(summary: Summary, r: pd.Series, many_runs: bool, prefix: str, msgs: float | None = None) -> Row:
    return Row(
        system=str(r["system"]),
        name=_name(r, many_runs),
        guarantee=str(r.get("guarantee") or ""),
        msgs=float(r["receiver_msgs_per_s_mean"]) if msgs is None else msgs,
        low=math.nan if msgs is not None else float(r["receiver_msgs_per_s_ci95_low"]),
        high=math.nan if msgs is not None else float(r["receiver_msgs_per_s_ci95_high"]),
        p50_us=float(r[f"{prefix}_p50_us_mean"]),
        p99_us=float(r[f"{prefix}_p99_us_mean"]),
        repetitions=int(r["repetitions"]),
        lost=int(r["lost"]),
        approximate=_approximate(summary, r),
        bound=str(r.get("client_bound") or ""),
        client_cpu=float(r.get("client_cpu_pct_mean", math.nan)),
        broker_cpu=float(r.get("broker_cpu_pct_mean", math.nan)),
    )


def _searched(summary: Summary, group: pd.DataFrame, many_runs: bool) -> tuple[list[Row], float]:
    """Rows of a ``rate: search`` scenario: each variant's max sustained rate, with the latency of its
    sustained trials there (the search table's; at its lowest trial when no trial was sustained), and the
    p99 bound."""
    search = summary.search[summary.search["scenario"] == group["scenario"].iloc[0]]
    search = search[search["size"] == search["size"].min()]
    rows = []
    for _, found in search.iterrows():
        trials = group[(group["run_id"] == found["run_id"]) & (group["system"] == found["system"])
                       & (group["variant"] == found["variant"]) & (group["size"] == found["size"])]
        best = float(found["max_sustained_rate"])
        at = trials[trials["rate"] == best] if not math.isnan(best) else trials[trials["rate"] == trials["rate"].min()]
        row = _row(summary, at.iloc[0], many_runs, "lat_intended", _nan_zero(best))
        if not math.isnan(found.get("p99_at_max_us", math.nan)):
            # the sustained trials' latency: a retry that failed at the same rate is not averaged in
            row = replace(row, p50_us=float(found["p50_at_max_us"]), p99_us=float(found["p99_at_max_us"]))
        rows.append(row)
    return rows, float(search["p99_bound_us"].iloc[0])


def headlines(summary: Summary) -> list[Headline]:
    """One :class:`Headline` per scenario that has results, in scenario order."""
    agg = summary.aggregate
    if agg.empty:
        return []
    many_runs = agg["run_id"].nunique() > 1
    order = _system_order(summary)
    searched = set(summary.search["scenario"]) if not summary.search.empty else set()
    out = []
    for scenario, group in agg.groupby("scenario", sort=True):
        if scenario in searched:
            rows, bound = _searched(summary, group, many_runs)
            first = group[group["size"] == group["size"].min()].iloc[0]
            intended, rate = True, math.nan
        else:
            case = _headline_case(group)
            intended = bool(case["lat_intended_p99_us_mean"].notna().all())
            rows = [_row(summary, r, many_runs, "lat_intended" if intended else "lat") for _, r in case.iterrows()]
            first, bound = case.iloc[0], math.nan
            rate = float(first["rate"]) if pd.notna(first["rate"]) else math.nan
        key = (lambda row: _nan_last(row.p99_us)) if not math.isnan(rate) else (lambda row: -_nan_zero(row.msgs))
        ranked, reference = _with_ratios(sorted(rows, key=key), order)
        kind = str(first["latency_kind"])
        latency = f"{kind} latency from the {'intended' if intended else 'actual'} send time"
        out.append(Headline(str(scenario), str(first["pattern"]), int(first["size"]), rate, latency,
                            tuple(ranked), reference, bound))
    return out


def _nan_last(value: float) -> float:
    return math.inf if math.isnan(value) else value


def _nan_zero(value: float) -> float:
    return 0.0 if math.isnan(value) else value


def figure(summary: Summary, head: Headline) -> Figure:
    """The ranked bars of one scenario: receiver msgs/s (95 % interval, ratio to the reference written on
    each bar) and, beside it on the same rows, p50 and p99 latency."""
    n = len(head.rows)
    fig, (bars, lat) = panel_figure(
        summary, 2, f"{head.scenario} — {head.case_text}, {head.ranking} (mean of {head.repetitions})",
        cols=2, panel_size=(5.6, 0.36 * n + 0.9),
    )
    y = np.arange(n)[::-1]
    msgs = np.array([_nan_zero(row.msgs) for row in head.rows])
    err = np.array([[row.msgs - row.low, row.high - row.msgs] if not math.isnan(row.low) else [0.0, 0.0]
                    for row in head.rows]).T.clip(min=0)
    colors = ["#9aa7b8" if row.approximate else "#3b6ea8" for row in head.rows]
    drawn = bars.barh(y, msgs, xerr=err, color=colors, capsize=3, height=0.6)
    for patch, row in zip(drawn.patches, head.rows, strict=True):
        if row.bound:
            patch.set_hatch("///")
            patch.set_edgecolor("white")
    names = [("≈ " if r.approximate else "") + (f"{MARK} " if r.bound else "")
             + " · ".join(x for x in (r.name, r.guarantee) if x) for r in head.rows]
    bars.set_yticks(y, names, fontsize=8)
    room = 1.7 if any(row.bound for row in head.rows) else 1.25  # for the ratio text (and the CPU figures)
    bars.set_xlim(0, max(float((msgs + err[1]).max()), 1.0) * room)
    for yi, row, width in zip(y, head.rows, msgs + err[1], strict=True):
        text = "reference" if row.name == head.reference else units.factor(row.ratio)
        if row.bound:
            text += f"  {MARK} {cpu_text(row.client_cpu, row.broker_cpu)}"
        bars.text(width, yi, f" {units.count(row.msgs)}  {text}", va="center", fontsize=8)
    bars.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.count(v)))
    bars.set_xlabel(("max sustained msgs/s" if head.by_search else "receiver msgs/s (95% interval)")
                    + "; ≈ approximate or incomplete"
                    + (f"\nhatched, {RULE_SHORT}" if any(row.bound for row in head.rows) else ""))
    for attr, style, name in (("p50_us", "o", "p50"), ("p99_us", "s", "p99")):
        values = [getattr(row, attr) for row in head.rows]
        lat.plot(values, y, style, color="#c0504d" if name == "p99" else "#4f81bd", label=name, ms=6)
    lat.hlines(y, [r.p50_us for r in head.rows], [r.p99_us for r in head.rows], color="#999", lw=1)
    lat.set_yticks(y, [""] * n)
    lat.set_ylim(bars.get_ylim())
    lat.set_xscale("log")
    lat.margins(x=0.08)
    lat.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: units.duration_us(v)))
    lat.xaxis.set_minor_formatter(MinorLogLabels(units.duration_us, labelOnlyBase=False, minor_thresholds=(1, 0.5)))
    lat.set_xlabel(head.latency)
    lat.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, borderaxespad=0.2)  # above, off the data
    for ax in (bars, lat):
        ax.grid(True, axis="x", alpha=0.3)
    return fig


def default_out_dir(run_dirs: list[Path]) -> Path:
    """The run folder itself for one run; ``<results>/report-<UTC timestamp>/`` beside them for several."""
    if len(run_dirs) == 1:
        return run_dirs[0]
    stamp = _dt.datetime.now(_dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return run_dirs[0].parent / f"report-{stamp}"


def write_report_from_summary(summary: Summary, out_dir: Path) -> Path:
    """Write ``figures/*.png``, ``report.html`` and ``summary.md`` for ``summary`` into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = RunFolder.open(out_dir)
    heads = headlines(summary)
    figures = {figure_name(head): figure(summary, head) for head in heads}
    figures.update(render_figures(summary))
    pngs = {name: png_bytes(fig) for name, fig in figures.items()}
    for name, png in pngs.items():
        out.write_file(f"{FIGURES_DIR}/{name}.png", png)
    captions = {**figure_captions(summary), **{figure_name(head): caption(head) for head in heads}}
    extra_html = extra_md = ""
    promises = guarantees.render(summary)
    if promises is not None:
        extra_html, extra_md = promises
    extra_pngs: dict[str, bytes] = {}
    extra_captions: dict[str, str] = {}
    section = evaluation.render(summary)
    if section is not None:
        eval_figures, eval_html, eval_md = section
        extra_html, extra_md = extra_html + eval_html, extra_md + eval_md
        for name, fig in eval_figures.items():
            extra_pngs[name] = png_bytes(fig)
            out.write_file(f"{FIGURES_DIR}/{name}.png", extra_pngs[name])
            extra_captions[name] = fig.get_suptitle() or name
        matrix = evaluation.load_evaluation(summary).matrix
        if not matrix.empty:
            out.write_file(FEATURE_MATRIX, matrix.to_csv(index=False).encode())
    work = workloads.render(summary)
    if work is not None:
        work_figures, work_html, work_md = work
        extra_html, extra_md = extra_html + work_html, extra_md + work_md
        for name, fig in work_figures.items():
            extra_pngs[name] = png_bytes(fig)
            out.write_file(f"{FIGURES_DIR}/{name}.png", extra_pngs[name])
            extra_captions[name] = fig.get_suptitle() or name
    cross = crosscheck.render(summary)
    if cross is not None:
        extra_html, extra_md = extra_html + cross[0], extra_md + cross[1]
    out.write_file(REPORT_MD, render_markdown(summary, [*pngs, *extra_pngs], extra=extra_md, heads=heads).encode())
    page = render_html(summary, pngs, captions, extra=extra_html, extra_pngs=extra_pngs, extra_captions=extra_captions,
                       heads=heads)
    return out.write_file(REPORT_HTML, page.encode())


def write_report(
    run_dirs: Iterable[Path | str],
    out_dir: Path | None = None,
    *,
    engine: Engine = "auto",
    spark_master: str | None = None,
) -> Path:
    """Write the report of ``run_dirs`` from their stored summary; return the path of ``report.html``.

    A run without a summary yet (interrupted, or recorded by an older mqbench) is summarised first with
    ``engine`` and the summary stored in its folder; a stored summary is never recomputed here.
    ``out_dir`` defaults to the run folder (one run) or a new ``results/report-<timestamp>/`` (several),
    which then also gets the joined summary tables. Writes ``figures/*.png``, ``summary.md`` and
    ``report.html`` (self-contained: figures embedded as base64 PNG), each to a temporary name first.
    Raises :class:`harness.pipeline.PipelineError` for a missing run folder, a run without raw data or
    (Spark engine) missing Java.
    """
    paths = [Path(p) for p in run_dirs]
    summary = load_summary(paths, engine=engine, spark_master=spark_master)
    out = Path(out_dir) if out_dir is not None else default_out_dir(paths)
    if out.resolve() not in {p.resolve() for p in paths}:
        write_summary(summary, out)
    return write_report_from_summary(summary, out)
