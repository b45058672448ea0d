"""Steady-state figures from what the tools print while they run: the arithmetic, without IO.

A tool runs for its ramp plus the measured seconds (``_tool.Tool``); its figure is taken over the measured
window only, ``[start + ramp, start + ramp + seconds]``, from one of three kinds of output:

- stamps of single events (a subscriber's arrival stamps, a consumer's log line per message): events inside
  the window over the window;
- cumulative counts at stamped moments (ConsumerPerformance's interval lines): the count's growth from the
  last point before the window to the first after it, over the time between them;
- rates of consecutive intervals (PerfTest's per-second lines, redis-benchmark's quarter-second ones): the
  mean of the intervals that start inside the window, each weighted by its length.

Each returns ``(msgs/s, seconds covered)``; NaN and 0 when the window holds too little to say (fewer than
two points, or no interval).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence

Figure = tuple[float, float]  # (msgs/s, seconds of steady state it covers)
NOTHING: Figure = (math.nan, 0.0)


def events_rate(stamps: Sequence[float], start: float, end: float) -> Figure:
    """Events per second among ``stamps`` (sorted, seconds) within ``[start, end]``."""
    if end <= start:
        return NOTHING
    lo, hi = bisect.bisect_left(stamps, start), bisect.bisect_right(stamps, end)
    if hi - lo < 2:
        return NOTHING
    return (hi - lo) / (end - start), end - start


def counts_rate(points: Sequence[tuple[float, float]], start: float, end: float) -> Figure:
    """Growth per second of a cumulative count given as ``(time, count)`` points (time ascending), from the
    last point at or before ``start`` to the first at or after ``end`` (a tool prints its points about once
    a second: the span is the window widened to the points around it); NaN when no point lies at or after
    ``end`` (the run stopped too soon) or none at or before ``start``."""
    before = [p for p in points if p[0] <= start]
    after = [p for p in points if p[0] >= end]
    if not before or not after or after[0][0] <= before[-1][0]:
        return NOTHING
    (t0, n0), (t1, n1) = before[-1], after[0]
    return (n1 - n0) / (t1 - t0), t1 - t0


def intervals_rate(intervals: Sequence[tuple[float, float]], start: float, end: float) -> Figure:
    """Time-weighted mean rate of consecutive intervals given as ``(end time, rate over the interval)``
    (the first interval starts at 0), over those that start within ``[start, end)`` (a tool's ticks drift by
    a few milliseconds: the last one may end a little after ``end``)."""
    total = span = 0.0
    previous = 0.0
    for t, rate in intervals:
        if start <= previous < end and t > previous:
            total += rate * (t - previous)
            span += t - previous
        previous = t
    return (total / span, span) if span > 0 else NOTHING


def window_rates(lines: Sequence[tuple[float, float]], start: float, end: float, window: float) -> Figure:
    """For a tool whose lines are moving averages, each over the ``window`` seconds before its time: the
    mean of the lines whose whole window lies within ``[start, end]``, and the seconds their windows cover."""
    inside = [(t, rate) for t, rate in lines if t - window >= start and t <= end]
    if not inside:
        return NOTHING
    return sum(rate for _, rate in inside) / len(inside), inside[-1][0] - inside[0][0] + window
