"""Report figures: pure functions from a :class:`~harness.pipeline.Summary` to matplotlib Figures.

Figures are built with ``matplotlib.figure.Figure`` (no pyplot state, no GUI backend), so they render the
same in a batch job, a test and a notebook. Each function returns ``None`` when the summary has nothing to
show for it (e.g. no scenario sweeps the offered rate). Every figure carries :func:`footnote`.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, LogFormatter, NullFormatter, NullLocator

from harness import units
from harness.metrics.search import knee
from harness.pipeline import SEARCH_KEYS, Summary
from harness.report._context import case_text, footnote, size_text

_NINES = {2.0: "50%", 10.0: "90%", 100.0: "99%", 1e3: "99.9%", 1e4: "99.99%", 1e5: "99.999%"}


def panel_figure(
    summary: Summary, panels: int, title: str, cols: int = 1, panel_size: tuple[float, float] = (6.4, 3.6)
) -> tuple[Figure, list[Axes]]:
    rows = math.ceil(panels / cols)
    fig = Figure(figsize=(panel_size[0] * cols, panel_size[1] * rows + 0.9), layout="constrained")
    axes = list(np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel())
    for extra in axes[panels:]:
        extra.set_visible(False)
    fig.suptitle(title, fontsize=12)
    fig.supxlabel(
        footnote(summary, width=int(60 * cols * panel_size[0] / 6.4) + 40), fontsize=7, color="#444"
    )
    return fig, axes[:panels]


def _with_labels(summary: Summary, frame: pd.DataFrame) -> pd.DataFrame:
    if "label" in frame.columns or frame.empty:
        return frame
    # per variant: a system's variants may be driven by different clients (rabbitmq (pika), rabbitmq (java))
    keys = ["run_id", "system", "variant"] if "variant" in frame.columns else ["run_id", "system"]
    labels = summary.per_repetition[[*keys, "label"]].drop_duplicates(keys)
    return frame.merge(labels, on=keys, how="left")


_SEARCH_LINE = list(SEARCH_KEYS)


def _searched(summary: Summary) -> pd.DataFrame:
    """The search table keyed by its line (run, scenario, system variant, size); empty when nothing searched."""
    if summary.search.empty:
        return pd.DataFrame(columns=[*_SEARCH_LINE, "max_sustained_rate", "knee_rate"])
    return summary.search[[*_SEARCH_LINE, "max_sustained_rate", "knee_rate"]]


def _at_max_sustained(summary: Summary, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with each searched line cut to its trial at the highest sustained rate (a search's dozen
    trials per system would otherwise draw a dozen distributions each); other cases unchanged."""
    searched = _searched(summary)
    if searched.empty or frame.empty:
        return frame
    merged = frame.merge(searched, on=_SEARCH_LINE, how="left")
    keep = merged["max_sustained_rate"].isna() | np.isclose(merged["rate"], merged["max_sustained_rate"])
    return frame[keep.to_numpy()]


def _by_scenario(frame: pd.DataFrame) -> Iterator[tuple[str, pd.DataFrame]]:
    for scenario, group in frame.groupby("scenario", sort=True):
        yield str(scenario), group


def _colors(keys: list[str]) -> dict[str, tuple[float, ...]]:
    from matplotlib import colormaps

    cmap = colormaps["tab10" if len(keys) <= 10 else "tab20"]
    return {key: cmap(i % cmap.N) for i, key in enumerate(sorted(set(keys)))}


def _tick(value: float, _pos: object = None) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:g}"


class MinorLogLabels(LogFormatter):
    """Matplotlib's choice of which minor log ticks to label (only on short ranges), written by ``text``."""

    def __init__(self, text: Callable[[float], str], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.text = text

    def __call__(self, x: float, pos: int | None = None) -> str:
        return self.text(x) if super().__call__(x, pos) else ""


def _log_axes(ax: Axes, x: bool = True) -> None:
    """Log scales with plain-number labels (``1,600`` rather than ``1.6 x 10^3``) on y (and x)."""
    axes = (ax.xaxis, ax.yaxis) if x else (ax.yaxis,)
    if x:
        ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in axes:
        axis.set_major_formatter(FuncFormatter(_tick))
        axis.set_minor_formatter(MinorLogLabels(_tick, labelOnlyBase=False, minor_thresholds=(1, 0.5)))


def _error(mean: pd.Series, low: pd.Series, high: pd.Series) -> np.ndarray | None:
    if low.isna().all():
        return None
    return np.vstack([(mean - low).clip(lower=0).fillna(0), (high - mean).clip(lower=0).fillna(0)])


def _mean_ci(ax: Axes, line: pd.DataFrame, x: str, col: str, style: str, color: object, label: str) -> None:
    """One series of means over ``x`` with their 95% confidence intervals as error bars."""
    yerr = _error(line[f"{col}_mean"], line[f"{col}_ci95_low"], line[f"{col}_ci95_high"])
    ax.errorbar(line[x], line[f"{col}_mean"], yerr=yerr, fmt=style, color=color, capsize=3, ms=4, label=label)


def _legend(ax: Axes, entries: int, of: Axes | None = None) -> None:
    """The legend beside the axes, never over them: inside, a legend of many cases hides the lines it names
    (constrained layout makes room for it). ``of``: the axes whose lines it names, when not ``ax`` (a row of
    panels keyed alike gets one legend, beside its last panel)."""
    handles, labels = (of or ax).get_legend_handles_labels()
    ax.legend(handles, labels, fontsize=6 if entries > 8 else 7, ncol=2 if entries > 16 else 1, loc="upper left",
              bbox_to_anchor=(1.01, 1.0), borderaxespad=0)


#: A rate axis goes logarithmic only when its values span more than this factor; else it starts at zero.
LOG_SPAN = 30.0


def _rate_axis(ax: Axes, values: pd.Series, axis: str = "y") -> None:
    """Linear from zero (so noise never looks like a cliff) unless the values span more than ``LOG_SPAN``."""
    positive = values[values > 0]
    if not positive.empty and positive.max() / positive.min() > LOG_SPAN:
        if axis == "y":
            _log_axes(ax, x=False)
        else:
            ax.set_xscale("log")
            ax.xaxis.set_major_formatter(FuncFormatter(_tick))
        return
    top = float(values.max()) if values.notna().any() else 1.0
    (ax.set_ylim if axis == "y" else ax.set_xlim)(0, top * 1.1 if top > 0 else 1.0)
    (ax.yaxis if axis == "y" else ax.xaxis).set_major_formatter(FuncFormatter(_tick))


def _sized(agg: pd.DataFrame) -> pd.DataFrame:
    """The cases of scenarios that measured at least two message sizes (one size makes no size chart)."""
    if agg.empty:
        return agg
    return agg[agg.groupby("scenario")["size"].transform("nunique") >= 2]


def throughput_vs_size(summary: Summary) -> Figure | None:
    """Sender (solid) and receiver (dashed) throughput against message size, msgs/s and MB/s.

    Points are means over repetitions with 95 % Student-t intervals as error bars; only scenarios that
    measured two sizes or more.
    """
    agg = _sized(summary.aggregate)
    if agg.empty:
        return None
    scenarios = list(_by_scenario(agg))
    fig, axes = panel_figure(summary, 2 * len(scenarios), "Throughput vs message size (mean, 95% CI)", cols=2)
    for i, (scenario, group) in enumerate(scenarios):
        colors = _colors([case_text(r, omit=("size",)) for _, r in group.iterrows()])
        for unit, ax in (("msgs_per_s", axes[2 * i]), ("mb_per_s", axes[2 * i + 1])):
            for _, line in group.groupby(["label", "variant", "rate"], dropna=False, sort=True):
                line = line.sort_values("size")
                key = case_text(line.iloc[0], omit=("size",))
                for side, style in (("sender", "-o"), ("receiver", "--s")):
                    _mean_ci(ax, line, "size", f"{side}_{unit}", style, colors[key], f"{key} {side}")
            _rate_axis(ax, pd.concat([group[f"{side}_{unit}_ci95_high"].fillna(group[f"{side}_{unit}_mean"])
                                      for side in ("sender", "receiver")]))
            ax.set_xscale("log", base=2)
            sizes = sorted(group["size"].unique())
            ax.xaxis.set_major_locator(FixedLocator(sizes))
            ax.xaxis.set_minor_locator(NullLocator())
            ax.set_xticklabels([size_text(int(s)) for s in sizes])
            ax.set_xlabel("message size")
            ax.set_ylabel("msgs/s" if unit == "msgs_per_s" else "MB/s (10^6 bytes/s)")
            ax.set_title(f"{scenario}", fontsize=10)
            ax.grid(True, which="both", alpha=0.3)
        _legend(axes[2 * i + 1], 2 * len(colors))
    return fig


def latency_nines(summary: Summary) -> Figure | None:
    """Latency percentiles (pooled over repetitions, from raw rows) on a "nines" axis, x = 1/(1-q).

    Solid: from the actual send time; dotted: from the intended (open-loop schedule) time. Percentiles the
    sample count cannot resolve (1/(1-q) > samples) are not drawn; the maximum is a marker at x = samples.
    A rate search shows each system at its highest sustained rate only.
    """
    dist = _with_labels(summary, _at_max_sustained(summary, summary.distribution))
    if dist.empty:
        return None
    scenarios = list(_by_scenario(dist))
    fig, axes = panel_figure(
        summary, len(scenarios), "Latency percentile distribution", cols=min(2, len(scenarios))
    )
    kinds = dict(
        zip(summary.per_repetition["scenario"], summary.per_repetition["latency_kind"], strict=False)
    )
    for ax, (scenario, group) in zip(axes, scenarios, strict=True):
        cases = group.groupby(["label", "variant", "size", "rate"], dropna=False, sort=True)
        colors = _colors([case_text(c.iloc[0]) for _, c in cases])
        for _, case in cases:
            key = case_text(case.iloc[0])
            for source, style in (("actual send", "-"), ("intended", ":")):
                part = case[case["latency_from"] == source].sort_values("percentile")
                if part.empty:
                    continue
                samples = int(part["samples"].iloc[0])
                q = part["percentile"].to_numpy() / 100
                with np.errstate(divide="ignore"):
                    x = 1 / (1 - q)
                shown = x <= samples
                # many cases: name each once (solid), a legend twice as long would hide the plot
                label = key if source == "actual send" else None if len(cases) > 6 else f"{key} (from intended)"
                ax.plot(
                    x[shown],
                    part["latency_us"].to_numpy()[shown],
                    style,
                    color=colors[key],
                    label=label,
                )
                ax.plot(
                    [samples],
                    [part["latency_us"].iloc[-1]],
                    "^" if source == "actual send" else "v",
                    color=colors[key],
                    ms=5,
                )
        _log_axes(ax, x=False)
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(FixedLocator(list(_NINES)))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.xaxis.set_minor_locator(NullLocator())
        ax.set_xticklabels(list(_NINES.values()))
        ax.set_xlabel("percentile (markers: maximum)")
        kind = kinds.get(scenario, "one-way")
        ax.set_ylabel(f"{kind} latency (µs)")
        ax.set_title(f"{scenario} — {kind} latency", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax, len(cases) if len(cases) > 6 else 2 * len(cases))
    return fig


def _swept(agg: pd.DataFrame) -> pd.DataFrame:
    finite = agg[agg["rate"].notna()]
    if finite.empty:
        return finite
    counts = finite.groupby(["scenario", "label", "variant", "size"])["rate"].transform("nunique")
    return finite[counts >= 2]


def latency_vs_rate(summary: Summary) -> Figure | None:
    """p50 (solid) and p99 (dashed) latency against offered rate, for scenarios that sweep or search the
    rate; a star marks the knee of each p99 curve (``harness.metrics.search.knee``): for a search, the
    search table's (judged from the trials), else the knee of the mean curve drawn.

    Latency is from the intended send time when the schedule recorded one (coordinated-omission corrected),
    else from the actual send; mean of per-repetition percentiles with 95 % intervals.
    """
    agg = _swept(summary.aggregate)
    if agg.empty:
        return None
    knees = {tuple(k): r for *k, r in _searched(summary)[[*_SEARCH_LINE, "knee_rate"]].itertuples(index=False)}
    scenarios = list(_by_scenario(agg))
    fig, axes = panel_figure(
        summary,
        len(scenarios),
        "Latency vs offered rate (mean of repetitions, 95% CI)",
        cols=1,
        panel_size=(9.0, 4.2),  # the legend stands beside the axes
    )
    for ax, (scenario, group) in zip(axes, scenarios, strict=True):
        lines = group.groupby(["label", "variant", "size"], sort=True)
        colors = _colors([case_text(line.iloc[0], omit=("rate",)) for _, line in lines])
        use_intended = group["lat_intended_p50_us_mean"].notna().all()
        prefix = "lat_intended" if use_intended else "lat"
        for _, line in lines:
            line = line.sort_values("rate")
            key = case_text(line.iloc[0], omit=("rate",))
            p99 = line[f"{prefix}_p99_us_mean"]
            first = line.iloc[0]
            line_key = tuple(first[k] for k in _SEARCH_LINE)
            found = knees[line_key] if line_key in knees else knee(list(line["rate"]), list(p99))
            bend = float(found) if found is not None and math.isfinite(found) else None
            at_bend = p99[np.isclose(line["rate"], bend)] if bend is not None else p99[:0]
            if bend is not None and not at_bend.empty:
                at = float(at_bend.iloc[0])
                ax.plot([bend], [at], "*", color=colors[key], ms=14, mec="black", zorder=5)
                ax.annotate(f"knee {units.count(bend)}/s", (bend, at), textcoords="offset points", xytext=(6, -12),
                            fontsize=7)
            # one legend entry per system (its colour); the line style says p50 or p99, keyed once below
            for p, style in (("p50", "-o"), ("p99", "--s")):
                _mean_ci(ax, line, "rate", f"{prefix}_{p}_us", style, colors[key], key if p == "p50" else "")
        for p, style in (("p50", "-"), ("p99", "--")):
            ax.plot([], [], style, color="black", label=p)
        _log_axes(ax, x=False)
        _rate_axis(ax, group["rate"], axis="x")
        ax.set_xlabel("offered rate (msgs/s, all producers)")
        ax.set_ylabel(f"latency from {'intended' if use_intended else 'actual'} send (µs)")
        ax.set_title(scenario, fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        _legend(ax, len(colors) + 2)
    return fig


#: A repetition is drawn over time only when its receipts span at least this many whole one-second buckets of
#: the summary's series: a run of a second or two is one or two points, which say nothing of its course.
SERIES_MIN_SECONDS = 5


def _long_enough(series: pd.DataFrame) -> pd.DataFrame:
    """The rows of the repetitions whose series has at least ``SERIES_MIN_SECONDS`` whole buckets (the last
    bucket is partial)."""
    if series.empty:
        return series
    keys = ["run_id", "scenario", "system", "variant", "size", "rate", "repetition"]
    span = series.groupby(keys, dropna=False)["second"].transform("max")
    return series[span >= SERIES_MIN_SECONDS]


def receiver_series(summary: Summary) -> Figure | None:
    """Receipts per second over time since the first receipt, one line per case and repetition (a rate
    search: each system at its highest sustained rate); only repetitions that lasted at least
    ``SERIES_MIN_SECONDS`` (no figure when none did)."""
    series = _with_labels(summary, _long_enough(_at_max_sustained(summary, summary.series)))
    if series.empty:
        return None
    scenarios = list(_by_scenario(series))
    fig, axes = panel_figure(
        summary,
        len(scenarios),
        "Receiver throughput over time (per-second buckets)",
        cols=min(2, len(scenarios)),
    )
    for ax, (scenario, group) in zip(axes, scenarios, strict=True):
        cases = group.groupby(["label", "variant", "size", "rate"], dropna=False, sort=True)
        colors = _colors([case_text(c.iloc[0]) for _, c in cases])
        for _, case in cases:
            key = case_text(case.iloc[0])
            for n, (_rep, run) in enumerate(case.groupby(["run_id", "repetition"], sort=True)):
                ax.plot(
                    run["second"],
                    run["msgs"],
                    "-o",
                    drawstyle="steps-post",
                    ms=3,
                    color=colors[key],
                    alpha=1.0 if n == 0 else 0.5,
                    label=key if n == 0 else None,
                )
        ax.set_xlabel("second since first receipt (last bucket is partial)")
        ax.set_ylabel("receipts per second")
        ax.set_title(scenario, fontsize=10)
        ax.grid(True, alpha=0.3)
        _legend(ax, len(colors))
    return fig


#: Report figures in display order: file stem -> builder.
FIGURES: dict[str, Callable[[Summary], Figure | None]] = {
    "throughput_vs_size": throughput_vs_size,
    "latency_nines": latency_nines,
    "latency_vs_rate": latency_vs_rate,
    "receiver_throughput_over_time": receiver_series,
}


def _repetitions(frame: pd.DataFrame) -> str:
    counts = sorted({int(n) for n in frame["repetitions"]}) if not frame.empty else [0]
    return f"{'/'.join(map(str, counts))} repetition{'' if counts == [1] else 's'}"


def captions(summary: Summary) -> dict[str, str]:
    """What each figure compares, over which scenarios, from how many repetitions."""
    agg = summary.aggregate

    def names(frame: pd.DataFrame) -> str:
        return ", ".join(sorted(frame["scenario"].astype(str).unique())) if not frame.empty else "no scenario"

    sized, swept = _sized(agg), _swept(agg)
    return {
        "throughput_vs_size": f"Sender and receiver throughput of each system against message size "
        f"({names(sized)}): means of {_repetitions(sized)} with 95% intervals.",
        "latency_nines": f"Latency percentiles of each system ({names(agg)}), pooled over "
        f"{_repetitions(agg)} from raw rows; markers are the maxima.",
        "latency_vs_rate": f"p50 and p99 latency of each system against offered load ({names(swept)}), open "
        f"loop: means of per-repetition percentiles over {_repetitions(swept)} with 95% intervals; stars "
        "mark each p99 curve's knee.",
        "receiver_throughput_over_time": f"Receipts per second of each system over time "
        f"({names(_long_enough(summary.series))}), one line per repetition of {_repetitions(agg)}; only "
        f"repetitions that received for {SERIES_MIN_SECONDS} s or more.",
    }


def render_figures(summary: Summary) -> dict[str, Figure]:
    """All figures that have something to show, by file stem."""
    figures = {}
    for name, build in FIGURES.items():
        fig = build(summary)
        if fig is not None:
            figures[name] = fig
    return figures


def png_bytes(fig: Figure, dpi: int = 110) -> bytes:
    """The figure as PNG bytes (Agg renderer)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
