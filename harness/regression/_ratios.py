"""Per-repetition ratios "system under test / reference" from summary rows. Pure functions, no IO.

Input is a summary table (``summary.parquet`` columns, one row per case and repetition, see
``harness.runfolder.schema``). For every system other than the reference, every case and every metric of
the case's pattern, the ratio of repetition *r* is the system's value in repetition *r* divided by the
reference's value in the same scenario, size, rate and repetition *r*. The runner interleaves systems
within a repetition, so both values saw the same state of the machine; dividing cancels most of it.

Output is a long table with :data:`RATIO_COLUMNS`; a ratio is NaN when either value is missing, zero or
not finite (the repetition then does not count towards :data:`MIN_REPETITIONS`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from harness import units
from harness.regression._errors import RegressionInputError
from harness.regression._stats import MIN_REPETITIONS, Better

#: The system every other one is divided by unless the user names another.
DEFAULT_REFERENCE = "zmq"


def split_reference(text: str) -> tuple[str, str | None]:
    """``"zmq"`` -> ("zmq", None); ``"zmq:tuned"`` -> ("zmq", "tuned")."""
    system, _, variant = text.partition(":")
    return system, (variant or None)


@dataclass(frozen=True)
class MetricSpec:
    """One summary column the check compares, which way is good, and how to show it."""

    column: str
    better: Better
    label: str
    unit: str


RECEIVER_THROUGHPUT = MetricSpec("receiver_msgs_per_s", Better.HIGHER, "receiver throughput", "msgs/s")
SENDER_THROUGHPUT = MetricSpec("sender_msgs_per_s", Better.HIGHER, "sender throughput", "msgs/s")
RTT_P50 = MetricSpec("lat_p50_us", Better.LOWER, "RTT p50", "µs")
RTT_P99 = MetricSpec("lat_p99_us", Better.LOWER, "RTT p99", "µs")

#: What is compared for each pattern. Request/reply is closed-loop (one request in flight), so its
#: throughput is just 1/RTT; the round trip percentiles say it better.
METRICS_BY_PATTERN: dict[str, tuple[MetricSpec, ...]] = {
    "queue": (RECEIVER_THROUGHPUT, SENDER_THROUGHPUT),
    "pubsub": (RECEIVER_THROUGHPUT, SENDER_THROUGHPUT),
    "reqrep": (RTT_P50, RTT_P99),
}

#: Every metric by column name (for ``--metric-threshold NAME=...``).
METRICS: dict[str, MetricSpec] = {m.column: m for specs in METRICS_BY_PATTERN.values() for m in specs}

#: Identifies one compared metric (one row of the result table) apart from the repetition.
METRIC_KEY = ("scenario", "pattern", "system", "variant", "size", "rate", "metric")
RATIO_COLUMNS = (
    *METRIC_KEY,
    "better",
    "repetition",
    "value",
    "reference",
    "reference_variant",
    "reference_value",
    "ratio",
)
#: Summary columns the ratios are computed from (the baseline keeps these, plus ``label``).
CASE_COLUMNS = ("scenario", "pattern", "system", "variant", "size", "rate", "repetition")
SUMMARY_INPUT_COLUMNS = (*CASE_COLUMNS, *METRICS)

# Join on a finite stand-in for "rate max" (NaN), which pandas would not match reliably.
_MAX_RATE = -1.0
_JOIN = ("scenario", "pattern", "size", "_rate", "repetition")


def _prepared(summary: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in CASE_COLUMNS if c not in summary.columns]
    if missing:
        raise RegressionInputError(
            f"the summary lacks the column(s) {', '.join(missing)}; re-create it with the current mqbench"
        )
    frame = summary.copy()
    frame["variant"] = frame["variant"].fillna("default").astype(str)
    frame["rate"] = frame["rate"].astype("float64")
    frame["_rate"] = frame["rate"].fillna(_MAX_RATE)
    return frame


def repetition_ratios(
    summary: pd.DataFrame, reference: str = DEFAULT_REFERENCE, reference_variant: str | None = None
) -> pd.DataFrame:
    """Per-repetition ratios of every other system to ``reference`` (see the module docstring).

    Raises :class:`RegressionInputError` when the reference is absent, is the only system, lacks
    ``reference_variant``, or has several variants in one case and none was chosen.
    """
    frame = _prepared(summary)
    systems = sorted(str(s) for s in frame["system"].dropna().unique())
    if reference not in systems:
        raise RegressionInputError(
            f"the reference system {reference!r} was not measured (systems: {', '.join(systems) or 'none'}); "
            "add it to the scenario's systems or pick another with --reference"
        )
    if systems == [reference]:
        raise RegressionInputError(
            f"only the reference system {reference!r} was measured; add the system to check "
            "(e.g. mqcore) to the scenario's systems"
        )
    ref = frame[frame["system"] == reference]
    if reference_variant is not None:
        ref = ref[ref["variant"] == reference_variant]
        if ref.empty:
            raise RegressionInputError(
                f"the reference system {reference!r} has no variant {reference_variant!r}"
            )
    duplicated = ref.duplicated(list(_JOIN), keep=False)
    if duplicated.any():
        variants = ", ".join(sorted(ref.loc[duplicated, "variant"].unique()))
        raise RegressionInputError(
            f"the reference system {reference!r} has several variants ({variants}) in one case; "
            f"choose one with --reference {reference}:VARIANT"
        )
    sut = frame[frame["system"] != reference]
    wanted = [p for p in METRICS_BY_PATTERN if (sut["pattern"] == p).any()]
    for pattern in wanted:
        for spec in METRICS_BY_PATTERN[pattern]:
            if spec.column not in frame.columns:
                raise RegressionInputError(
                    f"the summary lacks the column {spec.column}, needed for {pattern} scenarios"
                )
    columns = sorted({spec.column for p in wanted for spec in METRICS_BY_PATTERN[p]})
    # One join for all metrics; "_ref" marks the reference's values.
    joined = sut[[*CASE_COLUMNS, "_rate", *columns]].merge(
        ref[[*_JOIN, "variant", *columns]], on=list(_JOIN), how="left", suffixes=("", "_ref")
    )
    pieces = []
    for pattern in wanted:
        rows = joined[joined["pattern"] == pattern]
        for spec in METRICS_BY_PATTERN[pattern]:
            piece = rows[list(CASE_COLUMNS)].copy()
            piece["metric"] = spec.column
            piece["better"] = spec.better.value
            piece["value"] = rows[spec.column]
            piece["reference"] = reference
            piece["reference_variant"] = rows["variant_ref"]
            piece["reference_value"] = rows[f"{spec.column}_ref"]
            pieces.append(piece)
    if not pieces:
        return pd.DataFrame(columns=list(RATIO_COLUMNS))
    out = pd.concat(pieces, ignore_index=True)
    value = out["value"].astype("float64")
    ref_value = out["reference_value"].astype("float64")
    usable = np.isfinite(value) & np.isfinite(ref_value) & (value > 0) & (ref_value > 0)
    out["ratio"] = np.where(usable, value / ref_value.where(usable, 1.0), math.nan)
    out = out[list(RATIO_COLUMNS)]
    return out.sort_values([*METRIC_KEY, "repetition"], kind="mergesort", na_position="last").reset_index(
        drop=True
    )


def require_repetitions(ratios: pd.DataFrame, where: str, minimum: int = MIN_REPETITIONS) -> None:
    """Raise :class:`RegressionInputError` naming the first metric with fewer than ``minimum`` usable
    ratios (repetitions where both systems have a value) in ``ratios``; ``where`` names the data."""
    if ratios.empty:
        raise RegressionInputError(
            f"{where}: no case of a pattern the check knows (queue, pubsub, reqrep) to compare"
        )
    counts = (
        ratios.assign(_ok=np.isfinite(ratios["ratio"].astype("float64")))
        .groupby(list(METRIC_KEY), dropna=False, sort=True)["_ok"]
        .sum()
    )
    short = counts[counts < minimum]
    if short.empty:
        return
    key = dict(zip(METRIC_KEY, short.index[0], strict=True))
    reference = str(ratios["reference"].iloc[0])
    raise RegressionInputError(
        f"{where}: the check needs at least {minimum} repetitions with both systems measured, but "
        f"{describe_key(key)} against {reference} has {int(short.iloc[0])}; "
        f"set 'repetitions: {minimum}' or more in the scenario and run it again"
    )


def usable_ratios(summary: pd.DataFrame, where: str, reference: str) -> pd.DataFrame:
    """:func:`repetition_ratios` to ``reference`` (``SYSTEM[:VARIANT]``) with enough repetitions for the
    check; a :class:`RegressionInputError` names ``where`` (the run or baseline the summary is from)."""
    system, variant = split_reference(reference)
    try:
        ratios = repetition_ratios(summary, system, variant)
    except RegressionInputError as exc:
        raise RegressionInputError(f"{where}: {exc}") from None
    require_repetitions(ratios, where, MIN_REPETITIONS)
    return ratios


def describe_key(key: dict[str, object]) -> str:
    """``mqcore receiver throughput at 1 KB (regress-queue)`` for one metric key."""
    spec = METRICS.get(str(key["metric"]))
    label = spec.label if spec else str(key["metric"])
    system = str(key["system"])
    if key.get("variant") not in (None, "default"):
        system += f"[{key['variant']}]"
    where = f"at {units.size(int(key['size']))}"  # type: ignore[call-overload]
    rate = key.get("rate")
    if rate is not None and not math.isnan(float(rate)):  # type: ignore[arg-type]
        where += f", {rate:g} msgs/s"
    return f"{system} {label} {where} ({key['scenario']})"
