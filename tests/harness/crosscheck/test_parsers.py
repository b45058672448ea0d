"""Each tool's output parser, on output captured from the real tools on this machine (``fixtures/``)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from harness.crosscheck._tool import CrossCase
from harness.crosscheck.tools.mqtt import receiver_rate
from harness.crosscheck.tools.nats import parse_stats
from harness.crosscheck.tools.rabbitmq import parse_summary, perftest_flags
from harness.crosscheck.tools.redis import parse_csv

FIXTURES = Path(__file__).parent / "fixtures"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_redis_benchmark_csv_gives_rate_and_latency() -> None:
    rps, p50, p99 = parse_csv(text("redis-benchmark-P1.csv"))
    assert (rps, p50, p99) == (6891.80, 0.015, 3.503)
    rps, p50, p99 = parse_csv(text("redis-benchmark-P100.csv"))
    assert (rps, p50, p99) == (43554.01, 0.175, 33.215)


def test_redis_benchmark_without_result_row_is_an_error() -> None:
    with pytest.raises(ValueError):
        parse_csv("ERROR: connection refused\n")


def test_perftest_summary_with_and_without_confirms() -> None:
    got = parse_summary(text("perftest-autoack.txt"))
    assert got == {"send": 5149.0, "receive": 5149.0, "p50": 121226.0, "p95": 387200.0, "p99": 404290.0}
    # With confirms PerfTest also prints a confirm latency line: the consumer (one-way) line is the one read.
    got = parse_summary(text("perftest-confirms.txt"))
    assert (got["send"], got["receive"], got["p50"], got["p99"]) == (3522.0, 3522.0, 1553559.0, 1810407.0)


def test_perftest_latency_in_milliseconds_is_converted() -> None:
    got = parse_summary("id: x, receiving rate avg: 10 msg/s\n"
                        "id: x, consumer latency min/median/75th/95th/99th 1/2/3/4/5 ms\n")
    assert got["p50"] == 2000.0 and got["p99"] == 5000.0 and "send" not in got


def test_perftest_flags_follow_the_guarantee() -> None:
    plain = perftest_flags(CrossCase("rabbitmq", 100, 5000))
    assert plain == ["-x", "1", "-y", "1", "-s", "100", "-C", "5000", "-D", "5000", "-a"]
    durable = perftest_flags(CrossCase("rabbitmq", 100, 5000, guarantee="durable", window=500,
                                       options={"prefetch": 100, "ack_every": 50}))
    assert durable[-8:] == ["-c", "500", "-q", "100", "-A", "50", "-f", "persistent"]


def test_nats_bench_stats_lines() -> None:
    assert parse_stats(text("nats-bench-sub.txt")) == {"subscriber": 709788.0}
    assert parse_stats(text("nats-bench-pub.txt")) == {"publisher": 974783.0}
    with pytest.raises(ValueError):
        parse_stats("nats: error: no servers available for connection")


def test_nats_bench_jetstream_stats_lines() -> None:
    assert parse_stats(text("nats-bench-js-pub.txt")) == {"publisher": 23394.0}
    # two fetch clients share the durable consumer: the aggregated line is the consumer side's rate
    assert parse_stats(text("nats-bench-js-fetch-2clients.txt")) == {"subscriber": 18485.0}


def test_mosquitto_sub_stamps_give_a_receiver_rate() -> None:
    n, rate = receiver_rate(text("mosquitto-sub-stamps.txt"))
    first, _, last = (float(x) for x in text("mosquitto-sub-stamps.txt").split())
    assert n == 3 and rate == pytest.approx(2 / (last - first))
    one, no_rate = receiver_rate("1795501948.1\n")
    assert one == 1 and math.isnan(no_rate)
