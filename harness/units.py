"""Numbers written for a reader: message sizes, counts and rates, durations. One definition of each,
used by every terminal table and by messages that name a case.

Counts, rates and durations keep three significant digits and scale their unit (``2.26M``, ``12.3k``,
``850µs``, ``1.2s``), so a cell stays a few characters wide whatever the magnitude; the exact values stay
in the run folder's files. A missing value (None, NaN) is written :data:`MISSING`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

MISSING = "–"

_SIZE_UNITS = (("MiB", 1024**2), ("MB", 1000**2), ("KiB", 1024), ("KB", 1000))
_COUNT_UNITS = (("G", 1e9), ("M", 1e6), ("k", 1e3))
_DURATION_UNITS_US = (("s", 1e6), ("ms", 1e3))


def _missing(value: float | None) -> bool:
    return value is None or math.isnan(value)


def _three_digits(value: float) -> float:
    """``value`` rounded to three significant digits (so 999.96 becomes 1000, and takes the next unit)."""
    return float(f"{value:.3g}")


def _scaled(value: float, units: tuple[tuple[str, float], ...], base: str) -> str:
    rounded = _three_digits(value)
    for suffix, factor in units:
        if abs(rounded) >= factor:
            scaled = rounded / factor
            # Beyond the largest unit, whole numbers: "1500s", never "1.5e+03s".
            return f"{scaled:.0f}{suffix}" if abs(scaled) >= 1000 else f"{scaled:.3g}{suffix}"
    return f"{rounded:.3g}{base}"


def factor(value: float | None) -> str:
    """A ratio for a reader, two significant digits and never an exponent: ``290×``, ``2.9×``, ``0.45×``,
    ``0.012×``."""
    if _missing(value):
        return MISSING
    assert value is not None
    rounded = float(f"{value:.2g}")
    if rounded == 0 or abs(rounded) >= 10:
        return f"{rounded:,.0f}×"
    decimals = 1 - math.floor(math.log10(abs(rounded)))
    return f"{rounded:.{decimals}f}×"


def size(nbytes: int) -> str:
    """``100 B``, ``1 KB``, ``64 KiB``, ``1 MiB``: the exact decimal or binary unit a scenario would
    write, else bytes."""
    for unit, factor in _SIZE_UNITS:
        if nbytes >= factor and nbytes % factor == 0:
            return f"{nbytes // factor} {unit}"
    return f"{nbytes} B"


def count(value: float | None) -> str:
    """A count or a rate: ``950``, ``12.3k``, ``2.26M``; whole numbers below 1000 exactly."""
    if _missing(value):
        return MISSING
    assert value is not None
    return _scaled(value, _COUNT_UNITS, "")


def duration_us(value: float | None) -> str:
    """A duration given in microseconds: ``12.3µs``, ``850µs``, ``4.56ms``, ``1.2s``."""
    if _missing(value):
        return MISSING
    assert value is not None
    return _scaled(value, _DURATION_UNITS_US, "µs")


def uncertain_us(
    value: float | None, uncertainty: float | None, show: Callable[[float], str], spread: bool = True
) -> str:
    """A latency between two hosts' clocks, ``uncertainty`` µs uncertain: ``151µs ±24µs`` (``151µs`` when
    ``spread`` is False: the table says the ± elsewhere); one smaller than its uncertainty is no exact
    figure, only a bound: ``≤ 130µs``. Without an uncertainty (NaN: one clock), just ``show(value)``."""
    if value is None or math.isnan(value) or uncertainty is None or math.isnan(uncertainty) or not uncertainty:
        return show(math.nan if value is None else value)
    if value < uncertainty:
        return f"≤ {show(value + uncertainty)}"
    return f"{show(value)} ±{show(uncertainty)}" if spread else show(value)


def percent(value: float | None) -> str:
    """A share such as % of a core: ``97%``, ``140%`` (whole percents)."""
    if _missing(value):
        return MISSING
    assert value is not None
    return f"{value:.0f}%"


# -- rates: one spelling of "unpaced" -----------------------------------------------------------------

MAX_RATE = "max"


def as_rate(value: Any) -> float | None:
    """A rate as code holds it: ``None`` for an unpaced one (None, NaN, "max"), else messages per second."""
    if value is None or value == MAX_RATE:
        return None
    rate = float(value)
    return None if math.isnan(rate) else rate


def rate_text(value: Any, show: Callable[[float], str] | None = None) -> str:
    """A rate for people: "max", or the number (through ``show``, e.g. :func:`count`, when given)."""
    rate = as_rate(value)
    if rate is None:
        return MAX_RATE
    return show(rate) if show is not None else f"{rate:g}"


def rate_column(value: Any) -> float:
    """A rate as a table's float ``rate`` column holds it (NaN for an unpaced one)."""
    rate = as_rate(value)
    return float("nan") if rate is None else rate
