"""The NTP-style offset: arithmetic on known samples, and a real exchange on one host (true offset 0)."""

from __future__ import annotations

import pytest

from harness.cluster import ClockServer, Offset, estimate, measure, over_case


def test_minimum_round_trip_sample_wins() -> None:
    # coordinator clock = task clock + 1_000; the second sample has the shortest round trip
    samples = [(0, 1_500, 1_000), (10_000, 11_050, 10_100), (20_000, 21_900, 20_400)]
    got = estimate(samples)
    assert got == Offset(offset_ns=1_000, uncertainty_ns=50, rtt_ns=100)


def test_drift_widens_the_uncertainty() -> None:
    before = Offset(offset_ns=1_000, uncertainty_ns=50, rtt_ns=100)
    after = Offset(offset_ns=1_400, uncertainty_ns=30, rtt_ns=60)
    assert over_case(before, after) == Offset(offset_ns=1_200, uncertainty_ns=250, rtt_ns=60)


def test_no_samples_is_an_error() -> None:
    with pytest.raises(ValueError, match="no clock samples"):
        estimate([])


def test_exchange_on_one_host_brackets_zero() -> None:
    with ClockServer() as server:
        before = measure(server.address, samples=16)
        after = measure(server.address, samples=16)
    case = over_case(before, after)
    # one kernel, one CLOCK_MONOTONIC: the true offset is 0, and the estimate is within its bound of it
    for offset in (before, after, case):
        assert abs(offset.offset_ns) <= offset.uncertainty_ns
        assert offset.rtt_ns > 0
