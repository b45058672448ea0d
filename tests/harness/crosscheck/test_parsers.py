"""Each tool's output parser, on output captured from the real tools on this machine (``fixtures/``), and the
steady-state arithmetic they share (``tools/_steady.py``) on known numbers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.crosscheck._tool import CrossCase
from harness.crosscheck.tools import _steady
from harness.crosscheck.tools.mqtt import arrival_stamps
from harness.crosscheck.tools.nats import PROBE_MSGS, NatsBench, parse_stats, sized
from harness.crosscheck.tools.rabbitmq import PerfTest, parse_seconds, perftest_flags, steady
from harness.crosscheck.tools.redis import RedisBenchmark, RedisBenchmarkUnpipelined, parse_ticks

FIXTURES = Path(__file__).parent / "fixtures"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


# -- the steady-state arithmetic -----------------------------------------------------------------------


def test_events_in_the_window_over_its_length() -> None:
    stamps = [0.5 + i * 0.01 for i in range(1000)]  # 100/s from 0.5 s to 10.49 s
    rate, covered = _steady.events_rate(stamps, 2.0, 7.0)
    assert rate == pytest.approx(100.0, rel=0.01) and covered == 5.0
    assert math.isnan(_steady.events_rate(stamps, 20.0, 25.0)[0])  # nothing inside
    assert _steady.events_rate(stamps, 5.0, 5.0)[1] == 0.0


def test_counts_from_the_point_before_the_window_to_the_one_after() -> None:
    # a slow start (10/s for 3 s), then 1000/s; points about a second apart
    points = [(0.0, 0.0), (1.0, 10.0), (2.0, 20.0), (3.0, 30.0), (4.1, 1130.0), (5.0, 2030.0), (6.2, 3230.0),
              (7.0, 4030.0)]
    rate, covered = _steady.counts_rate(points, 3.0, 6.0)
    assert rate == pytest.approx((3230.0 - 30.0) / 3.2) and covered == pytest.approx(3.2)
    assert math.isnan(_steady.counts_rate(points, 3.0, 8.0)[0])  # stopped before the window's end
    assert math.isnan(_steady.counts_rate(points, -1.0, 2.0)[0])  # nothing before its start


def test_intervals_that_start_in_the_window_weighted_by_their_length() -> None:
    ticks = [(1.0, 5.0), (2.0, 100.0), (2.5, 200.0), (3.5, 100.0), (4.6, 50.0)]
    rate, covered = _steady.intervals_rate(ticks, 2.0, 4.0)  # (2, 2.5] at 200, (2.5, 3.5] at 100, (3.5, 4.6] at 50
    assert covered == pytest.approx(2.6)
    assert rate == pytest.approx((200 * 0.5 + 100 * 1.0 + 50 * 1.1) / 2.6)
    assert _steady.intervals_rate(ticks, 10.0, 12.0)[1] == 0.0


def test_moving_averages_whose_whole_window_is_inside() -> None:
    lines = [(float(t), 100.0 if t >= 15 else 10.0) for t in range(30)]
    rate, covered = _steady.window_rates(lines, 5.0, 28.0, 10.0)  # lines at 15 .. 28
    assert rate == 100.0 and covered == pytest.approx(13.0 + 10.0)
    assert math.isnan(_steady.window_rates(lines, 5.0, 12.0, 10.0)[0])  # shorter than one window


# -- redis-benchmark --------------------------------------------------------------------------------------


def test_redis_benchmark_progress_lines() -> None:
    ticks = parse_ticks(text("redis-benchmark-progress.txt"))
    assert len(ticks) > 8 and ticks[0][0] == 0.25 and ticks[3][0] == 1.0
    rates = [rps for _, rps, _ in ticks]
    assert min(rates[2:]) > 0
    rate, covered = _steady.intervals_rate([(t, r) for t, r, _ in ticks], 1.0, 3.0)
    kept = [r for t, r, _ in ticks if 1.0 < t <= 3.0]
    assert covered == pytest.approx(2.0) and rate == pytest.approx(sum(kept) / len(kept))
    assert parse_ticks("ERROR: connection refused\n") == []


def test_redis_rows_and_the_best_run() -> None:
    case = CrossCase("redis", 100, window=100)
    best = RedisBenchmark().best(case)
    assert best is not None and best.best and best.window == 100 and best.producers == 50
    assert RedisBenchmarkUnpipelined().best(case) is None  # a reference for the client, the pipelined is the best
    assert RedisBenchmarkUnpipelined().pipeline(case) == 1 and RedisBenchmark().pipeline(case) == 100


# -- PerfTest -------------------------------------------------------------------------------------------


def test_perftest_per_second_lines_after_the_ramp() -> None:
    lines = parse_seconds(text("perftest-seconds.txt"))
    assert len(lines) >= 9 and lines[0].at == pytest.approx(1.024) and lines[0].p50_us == 25394.0
    got = steady(lines, 5.0, 4.0)
    kept = [x for x, before in zip(lines, [0.0, *(y.at for y in lines)], strict=False) if 5.0 <= before < 9.0]
    opened = max(x.at for x in lines if x.at < kept[0].at)  # the line before the first kept ends its interval
    assert got["steady_s"] == pytest.approx(kept[-1].at - opened)
    assert min(x.received for x in kept) <= got["receive"] <= max(x.received for x in kept)
    assert min(x.p50_us for x in kept) <= got["p50"] <= max(x.p50_us for x in kept)
    # the older summary fixtures hold per-second lines too, with milliseconds where latency is long
    assert parse_seconds(text("perftest-autoack.txt"))[0].sent == 1506.0


def test_perftest_flags_follow_the_guarantee_and_the_best_keeps_it() -> None:
    plain = CrossCase("rabbitmq", 100, 5000)
    assert perftest_flags(plain) == ["-x", "1", "-y", "1", "-s", "100", "-a"]
    durable = CrossCase("rabbitmq", 100, 5000, guarantee="durable", window=500,
                        options={"prefetch": 100, "ack_every": 50})
    assert perftest_flags(durable)[-8:] == ["-c", "500", "-q", "100", "-A", "50", "-f", "persistent"]
    best = PerfTest().best(plain)
    assert best is not None and perftest_flags(best) == ["-x", "2", "-y", "2", "-s", "100", "-a"]
    best_durable = PerfTest().best(durable)
    assert best_durable is not None
    assert perftest_flags(best_durable)[-8:] == ["-c", "1000", "-q", "1000", "-A", "100", "-f", "persistent"]


# -- nats bench, mosquitto ------------------------------------------------------------------------------


def test_nats_bench_stats_lines() -> None:
    assert parse_stats(text("nats-bench-sub.txt")) == {"subscriber": 709788.0}
    assert parse_stats(text("nats-bench-pub.txt")) == {"publisher": 974783.0}
    with pytest.raises(ValueError):
        parse_stats("nats: error: no servers available for connection")


def test_nats_bench_is_sized_by_time_and_is_its_own_best() -> None:
    assert sized(500_000.0, 10.0) == 6_000_000 and sized(10.0, 10.0) == PROBE_MSGS
    tool = NatsBench()
    for case in (CrossCase("nats", 100), CrossCase("nats", 100, options={"jetstream": True})):
        assert tool.best(case) == case and tool.applies(case)  # one tool, Core NATS and JetStream


def test_nats_bench_jetstream_stats_lines() -> None:
    assert parse_stats(text("nats-bench-js-pub.txt")) == {"publisher": 23394.0}
    # two fetch clients share the durable consumer: the aggregated line is the consumer side's rate
    assert parse_stats(text("nats-bench-js-fetch-2clients.txt")) == {"subscriber": 18485.0}


def test_mosquitto_sub_stamps() -> None:
    stamps = arrival_stamps(text("mosquitto-sub-stamps.txt"))
    first, _, last = (float(x) for x in text("mosquitto-sub-stamps.txt").split())
    assert len(stamps) == 3 and stamps[0] == first and stamps[-1] == last
    assert arrival_stamps("Timed out\n") == []
