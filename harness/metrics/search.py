"""Latency under load: the knee of a latency-vs-offered-rate curve, whether a trial was sustained, and the
bisection that finds the highest sustainable rate. Pure functions, no IO.

* **Knee**: the offered rate after which latency bends upward. On the curve (rate, running maximum of log
  p99) scaled to the unit square it is the point farthest below the chord from the first to the last point
  (the "Kneedle" idea for a convex increasing curve). A curve that stays within ``KNEE_MIN_RISE`` of its
  lowest p99 has no knee, nor one that rises at once (no point below the chord).
* **Sustained**: the receiver kept up with the offered rate (received at least ``KEEP_UP`` of it, nothing
  lost; a growing backlog shows as a shortfall) and p99 from the intended send time stayed under the bound.
* **Bisection**: between the highest sustained and the lowest unsustained rate tried, halving (geometric
  mean) until they are within ``RESOLUTION`` of each other.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

#: A receiver that gets at least this share of the offered rate keeps up.
KEEP_UP = 0.95
#: A knee needs p99 at its highest rate at least this many times its lowest.
KNEE_MIN_RISE = 2.0
#: The search stops when the bracketing rates are within this factor of each other.
RESOLUTION = 1.1


def knee(rates: Sequence[float], p99_us: Sequence[float]) -> float | None:
    """The offered rate at the knee of ``p99_us`` against ``rates`` (three points at least), else None."""
    points = sorted((r, p) for r, p in zip(rates, p99_us, strict=True) if r > 0 and p > 0 and math.isfinite(p))
    if len(points) < 3:
        return None
    xs = [r for r, _ in points]
    # latency does not fall as load rises: a dip is noise, so the curve is its running maximum
    ys = list(itertools.accumulate((math.log(p) for _, p in points), max))
    if max(ys) - min(ys) < math.log(KNEE_MIN_RISE):
        return None
    x0, x1, y0, y1 = xs[0], xs[-1], min(ys), max(ys)
    # scaled to the unit square, the chord from (0, y_first) to (1, y_last) against each point
    sx = [(x - x0) / (x1 - x0) for x in xs]
    sy = [(y - y0) / (y1 - y0) for y in ys]
    below = [sy[0] + (sy[-1] - sy[0]) * s - y for s, y in zip(sx, sy, strict=True)]
    best = max(range(1, len(points) - 1), key=lambda i: below[i])
    return xs[best] if below[best] > 0 else None


def sustained(offered: float, received_per_s: float, lost: int, p99_us: float, bound_us: float) -> bool:
    """Whether one trial at ``offered`` msgs/s was sustained (receiver rate per consumer share)."""
    if not (math.isfinite(received_per_s) and math.isfinite(p99_us)):
        return False
    return lost == 0 and received_per_s >= KEEP_UP * offered and p99_us <= bound_us


def next_rate(tried: dict[float, bool], low: float, high: float) -> float | None:
    """The next rate to try given the trials so far (rate -> sustained) within [low, high]; None when done.

    Starts at ``low``; while everything tried was sustained, doubles (up to ``high``); then bisects the
    bracket geometrically."""
    if not tried:
        return low
    good = [r for r, ok in tried.items() if ok]
    bad = [r for r, ok in tried.items() if not ok]
    if not good:
        return None  # even the lowest rate was not sustained
    best = max(good)
    above = [r for r in bad if r > best]
    if not above:
        return None if best >= high else min(best * 2, high)
    ceiling = min(above)
    if ceiling / best <= RESOLUTION:
        return None
    return math.sqrt(best * ceiling)


def fanout(pattern: str, consumers: int, topics: int) -> int:
    """Receipts per message: every subscriber of a topic in pub/sub, one consumer otherwise."""
    return max(consumers // max(topics, 1), 1) if pattern == "pubsub" else 1


def max_sustained(tried: dict[float, bool]) -> float:
    """The highest sustained rate of a search (NaN when none was)."""
    good = [r for r, ok in tried.items() if ok]
    return max(good) if good else math.nan
