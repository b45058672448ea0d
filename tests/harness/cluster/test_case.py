"""A case on a cluster, without a cluster: stamps moved onto the coordinator's clock, hosts named, the
shared verdict of the watch, the clock column of the summary and how an uncertain latency is written."""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from harness import units
from harness.cluster import Offset, RoleResult
from harness.cluster._case import (
    _Roles,
    _Verdict,
    cross_host_uncertainty_ns,
    host_offsets,
    listening_ports,
    on_coordinator_clock,
    on_host,
    on_ports,
    unsupported,
)
from harness.drivers.base import Pattern
from harness.pipeline._cpu import clock_uncertainty_us
from harness.runner._context import Case
from harness.runner._workers import specs
from harness.scenario import Variant, parse_scenario


def _result(role: str, host: str, offset: int, uncertainty: int) -> RoleResult:
    return RoleResult(role, None, host, f"{host}:1", Offset(offset, uncertainty, 2 * uncertainty))


def test_stamps_move_by_their_hosts_offset() -> None:
    results = [_result("producer-0", "a", 1_000, 50), _result("consumer-0", "b", -500, 30)]
    rows = pd.DataFrame({"producer": [0, 0], "consumer": [0, -1],
                         "t_intended": pd.array([None, None], dtype="Int64"),
                         "t_send": pd.array([10_000, 20_000], dtype="Int64"),
                         "t_ack": pd.array([None, None], dtype="Int64"),
                         "t_recv": pd.array([12_000, None], dtype="Int64")})
    out = on_coordinator_clock(rows, Pattern.QUEUE, results, host_offsets(results))
    assert out["t_send"].tolist() == [11_000, 21_000]
    assert out["t_recv"].iloc[0] == 11_500 and pd.isna(out["t_recv"].iloc[1])  # a lost message stays unstamped
    assert out["t_intended"].isna().all()
    assert out["send_host"].tolist() == ["a", "a"] and out["send_executor"].tolist() == ["a:1", "a:1"]
    assert out["recv_host"].iloc[0] == "b" and out["recv_host"].iloc[1] is None


def test_one_host_keeps_its_latencies_and_has_no_uncertainty() -> None:
    results = [_result("requester-0", "a", 900, 80), _result("replier-0", "a", 1_000, 20)]
    offsets = host_offsets(results)
    assert offsets["a"].offset_ns == 1_000  # the tightest measurement of the host
    rows = pd.DataFrame({"producer": [0], "consumer": [0], "t_intended": pd.array([None], dtype="Int64"),
                         "t_send": pd.array([100], dtype="Int64"), "t_ack": pd.array([None], dtype="Int64"),
                         "t_recv": pd.array([400], dtype="Int64")})
    out = on_coordinator_clock(rows, Pattern.REQREP, results, offsets)
    assert int(out["t_recv"].iloc[0] - out["t_send"].iloc[0]) == 300
    assert cross_host_uncertainty_ns(results, offsets, Pattern.REQREP) == 0
    two = [*results, _result("replier-1", "b", 0, 35)]
    assert cross_host_uncertainty_ns(two, host_offsets(two), Pattern.REQREP) == 0  # a round trip: one clock
    spread = [_result("producer-0", "a", 1_000, 20), _result("consumer-0", "b", 0, 35)]
    assert cross_host_uncertainty_ns(spread, host_offsets(spread), Pattern.QUEUE) == 55


def test_a_brokerless_plan_moves_to_the_binders_host() -> None:
    plan = {"endpoints": ["tcp://127.0.0.1:5001", "tcp://127.0.0.1:5002"], "topology": {"producers": 2},
            "curve": {"client": ["pub", "sec"]}}
    moved = on_host(plan, "10.0.0.7")
    assert moved["endpoints"] == ["tcp://10.0.0.7:5001", "tcp://10.0.0.7:5002"]
    assert moved["topology"] == plan["topology"] and moved["curve"] == plan["curve"]


def test_connectors_move_to_the_published_binders() -> None:
    plan = {"endpoints": ["tcp://127.0.0.1:5001", "tcp://127.0.0.1:5002"], "n": 2}
    moved = on_ports(plan, {5001: "10.0.0.7", 5002: "10.0.0.8"})
    assert moved == {"endpoints": ["tcp://10.0.0.7:5001", "tcp://10.0.0.8:5002"], "n": 2}
    assert on_ports(plan, {5001: "10.0.0.7"})["endpoints"][1] == "tcp://127.0.0.1:5002"  # not published: kept


def test_listening_ports_of_a_process() -> None:
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert port in listening_ports(os.getpid())


@pytest.mark.parametrize(("text", "refused"), [
    ("pattern: queue\nhosts: {producers: a, consumers: b}", None),
    ("pattern: reqrep\nhosts: {consumers: b}", None),
    ("pattern: queue\nhosts: {consumers: b}", None),  # the listening producers publish where they are
    ("pattern: queue", None),
    ("pattern: reqrep", None),
    ("pattern: pubsub\nhosts: {producers: a, consumers: b}", "subscription handshake"),
])
def test_brokerless_cases_need_their_binders_host(text: str, refused: str | None) -> None:
    import yaml

    sc = parse_scenario({"name": "c", "message_sizes": [100], "messages": 10, **yaml.safe_load(text)})
    case = Case(sc, Variant("zmq", "default", {}), 100, None, 0, "run", None)
    driver = type("Brokerless", (), {"needs_broker": False})()
    why = unsupported(case, driver)  # type: ignore[arg-type]
    assert why is None if refused is None else refused in (why or "")


def _roles(pattern: str) -> _Roles:
    sc = parse_scenario({"name": "c", "pattern": pattern, "messages": 10, "warmup": 0, "timeout": "5s",
                         "message_sizes": [100]})
    case = Case(sc, Variant("redis", "default", {}), 100, None, 0, "run", None)

    class _Driver:  # what specs() asks of a driver
        capabilities = type("Caps", (), {"slow_joiner": False})()

    producers, consumers = specs(case, _Driver(), {}, Path("/nonexistent"))  # type: ignore[arg-type]
    return _Roles(case, producers, consumers)


def _report(name: str, slot: int, count: int, done: int | None, now: float, errors: list[str] | None = None
            ) -> dict[str, Any]:
    return {"name": name, "slot": slot, "count": count, "done": None if done is None else [done, ""],
            "errors": errors or [], "now": now}


def test_the_watch_ends_when_the_consumers_have_everything() -> None:
    verdict = _Verdict(_roles("queue"))
    assert not verdict.over([_report("producer-0", 0, 5, None, 1.0), _report("consumer-0", 1, 4, None, 1.0)])
    assert not verdict.over([_report("producer-0", 0, 10, 10, 1.1), _report("consumer-0", 1, 9, None, 1.1)])
    assert verdict.over([_report("producer-0", 0, 10, 10, 1.2), _report("consumer-0", 1, 10, None, 1.2)])
    assert verdict.complete and not verdict.problems


def test_a_failed_worker_stops_every_task() -> None:
    verdict = _Verdict(_roles("queue"))
    assert verdict.over([_report("producer-0", 0, 0, None, 1.0, ["producer-0: boom"]),
                         _report("consumer-0", 1, 0, None, 1.0)])
    assert not verdict.complete and verdict.problems


def test_a_stall_ends_the_case_incomplete() -> None:
    verdict = _Verdict(_roles("queue"))
    assert not verdict.over([_report("producer-0", 0, 3, None, 0.0), _report("consumer-0", 1, 3, None, 0.0)])
    assert verdict.over([_report("producer-0", 0, 3, None, 60.0), _report("consumer-0", 1, 3, None, 60.0)])
    assert not verdict.complete and "stalled" in verdict.problems[0]


def test_the_summary_takes_the_cases_clock_uncertainty() -> None:
    keys = {"run_id": "r", "scenario": "s", "system": "redis", "variant": "default", "size": 100, "rate": math.nan,
            "repetition": 0}
    clocks = pd.DataFrame([{**keys, "latency_uncertainty_ns": 4_000}, {**keys, "latency_uncertainty_ns": 4_000}])
    cases = pd.DataFrame([keys, {**keys, "repetition": 1}])
    assert clock_uncertainty_us(cases, clocks).iloc[0] == pytest.approx(4.0)
    assert math.isnan(clock_uncertainty_us(cases, clocks).iloc[1])
    assert clock_uncertainty_us(cases, pd.DataFrame()).isna().all()  # a run on one machine


def test_a_latency_below_its_uncertainty_is_a_bound() -> None:
    assert units.uncertain_us(150.0, 24.0, units.duration_us) == "150µs ±24µs"
    assert units.uncertain_us(150.0, 24.0, units.duration_us, spread=False) == "150µs"
    assert units.uncertain_us(10.0, 24.0, units.duration_us) == "≤ 34µs"
    assert units.uncertain_us(10.0, math.nan, units.duration_us) == "10µs"


@pytest.mark.parametrize(("uncertainty", "shown"), [(30.0, True), (0.0, False), (math.nan, False)])
def test_the_end_of_run_title_gives_the_clocks_uncertainty_only_when_there_is_one(
    uncertainty: float, shown: bool
) -> None:
    from harness.commands.compare import end_of_run_tables
    from tests.harness.commands.test_commands import render, summary

    frame = summary(["zmq"]).assign(clock_uncertainty_us=uncertainty)  # 0: round trips or one host
    (only,) = end_of_run_tables(frame)
    title = " ".join(" ".join(render(only)[:3]).split())  # the title wraps
    assert ("between hosts" in title) is shown and ("±30µs" in title) is shown


def test_a_stage_that_recorded_nothing_still_writes_a_raw_file(tmp_path: Path) -> None:
    """Workers that never got going (a host that cannot reach the broker) leave no rows: the host columns stay
    names (not the producer column's integers), and the run folder writes the empty case."""
    from harness.runfolder import RunFolder

    results = [_result("producer-0", "a", 0, 10), _result("consumer-0", "b", 0, 10)]
    empty = pd.DataFrame({"producer": pd.Series([], dtype="int32"), "consumer": pd.Series([], dtype="int32"),
                          **{k: pd.array([], dtype="Int64") for k in ("t_intended", "t_send", "t_ack", "t_recv")}})
    out = on_coordinator_clock(empty, Pattern.QUEUE, results, host_offsets(results))
    assert out.empty and all(out[c].dtype == object for c in ("send_host", "send_executor", "recv_host"))
    run = RunFolder.create(tmp_path, "empty", {})
    rows = pd.DataFrame({"run_id": pd.Series([], dtype=object), "scenario": pd.Series([], dtype=object),
                         "pattern": pd.Series([], dtype=object), "system": pd.Series([], dtype=object),
                         "variant": pd.Series([], dtype=object), "repetition": pd.Series([], dtype="int32"),
                         "size": pd.Series([], dtype="int32"), "rate": pd.Series([], dtype=float),
                         "seq": pd.Series([], dtype="int64"), "warmup": pd.Series([], dtype=bool), **out})
    written = run.write_raw("empty.parquet", rows)
    assert len(run.read_raw(written.name)) == 0
